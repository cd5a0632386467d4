// The token is proven, never sent (docs/security.md). A proof is the text
// "v1:MICROS:NONCE:MAC", where MICROS is the prover's clock (Unix
// microseconds), NONCE 16 fresh random bytes and MAC
// HMAC-SHA256(token, "causeway call v1:MICROS:NONCE"), both in hex. The
// head accepts a proof once, within kProofWindow of its own clock. Every
// gRPC call to the head carries one (grpc_common.h: AddCredentials), and so
// does every request to its plain-HTTP endpoint (observe/http_server.h:
// `Authorization: Causeway-Proof PROOF`).
#ifndef CAUSEWAY_TRANSPORT_CALL_PROOF_H_
#define CAUSEWAY_TRANSPORT_CALL_PROOF_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace causeway::transport {

inline constexpr absl::Duration kProofWindow = absl::Seconds(30);

// A fresh proof of `token` made at `now`.
std::string MakeCallProof(absl::string_view token, absl::Time now);

// OK when there is no token or `proof` proves it (above); UNAUTHENTICATED
// otherwise, naming why (a malformed proof, a wrong token, a clock too far
// from the head's, a proof used before). Proofs accepted are remembered
// until they expire (at most `max_remembered`: past it, proofs are refused
// RESOURCE_EXHAUSTED rather than let a replay through). Thread-safe.
class ProofCheck {
 public:
  explicit ProofCheck(std::string token,
                      size_t max_remembered = size_t{1} << 20)
      : token_(std::move(token)), max_remembered_(max_remembered) {}

  // True when there is a token to prove.
  bool needed() const { return !token_.empty(); }
  absl::Status Check(absl::string_view proof, absl::Time now) const;

 private:
  const std::string token_;
  const size_t max_remembered_;
  mutable absl::Mutex mu_;
  using Nonce = std::pair<uint64_t, uint64_t>;
  // Nonces of accepted proofs (about 60 bytes each), in the order they
  // came with when each may be forgotten (its time plus the window: after
  // that it is refused as too old anyway).
  mutable absl::flat_hash_set<Nonce> seen_ ABSL_GUARDED_BY(mu_);
  mutable std::deque<std::pair<absl::Time, Nonce>> expiry_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_CALL_PROOF_H_
