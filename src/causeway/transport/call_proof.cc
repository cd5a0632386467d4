#include "causeway/transport/call_proof.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "causeway/base/constant_time.h"
#include "causeway/transport/sealed_records.h"

namespace causeway::transport {
namespace {

// HMAC-SHA256(token, "causeway call v1:" + stamped), in hex.
std::string ProofMac(absl::string_view token, absl::string_view stamped) {
  const Mac mac =
      HmacSha256(token, absl::StrCat("causeway call v1:", stamped));
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

}  // namespace

std::string MakeCallProof(absl::string_view token, absl::Time now) {
  uint8_t nonce[16];
  FillRandom(absl::MakeSpan(nonce), "a call's proof");
  const std::string stamped = absl::StrCat(
      absl::ToUnixMicros(now), ":",
      absl::BytesToHexString(absl::string_view(
          reinterpret_cast<const char*>(nonce), sizeof nonce)));
  return absl::StrCat("v1:", stamped, ":", ProofMac(token, stamped));
}

absl::Status ProofCheck::Check(absl::string_view proof, absl::Time now) const {
  if (token_.empty()) return absl::OkStatus();
  const std::vector<absl::string_view> parts = absl::StrSplit(proof, ':');
  int64_t micros = 0;
  Nonce nonce;
  if (parts.size() != 4 || parts[0] != "v1" ||
      !absl::SimpleAtoi(parts[1], &micros) || parts[2].size() != 32 ||
      !absl::SimpleHexAtoi(parts[2].substr(0, 16), &nonce.first) ||
      !absl::SimpleHexAtoi(parts[2].substr(16), &nonce.second) ||
      parts[3].size() != 64) {
    return absl::UnauthenticatedError(
        "the proof of the token is malformed (not v1:MICROS:NONCE:MAC)");
  }
  const std::string stamped = absl::StrCat(parts[1], ":", parts[2]);
  const std::string expected = ProofMac(token_, stamped);
  if (!ConstantTimeEquals(std::string_view(parts[3].data(), parts[3].size()),
                          expected)) {
    return absl::UnauthenticatedError("the token does not match the head's");
  }
  const absl::Time made = absl::FromUnixMicros(micros);
  if (absl::AbsDuration(now - made) > kProofWindow) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the proof of the token is dated ", absl::FormatDuration(now - made),
        " from the head's clock (at most ", absl::FormatDuration(kProofWindow),
        " apart): check the clocks of this machine and the head's"));
  }
  absl::MutexLock lock(&mu_);
  while (!expiry_.empty() && expiry_.front().first < now) {
    seen_.erase(expiry_.front().second);
    expiry_.pop_front();
  }
  if (seen_.contains(nonce)) {
    return absl::UnauthenticatedError(
        "the proof of the token was used before (a replayed call)");
  }
  if (seen_.size() >= max_remembered_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the head has accepted ", max_remembered_, " proofs in the last ",
        absl::FormatDuration(2 * kProofWindow),
        " and remembers no more: refused, since a replay could not be told "
        "apart"));
  }
  seen_.insert(nonce);
  expiry_.emplace_back(made + kProofWindow, nonce);
  return absl::OkStatus();
}

}  // namespace causeway::transport
