#include "causeway/transport/sealed_records.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include <climits>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"

namespace causeway::transport {

namespace {

constexpr size_t kNonceBytes = 12;

// 4 zero bytes, then the sequence number (little-endian).
std::array<uint8_t, kNonceBytes> NonceOf(uint64_t sequence) {
  std::array<uint8_t, kNonceBytes> nonce{};
  for (int i = 0; i < 8; ++i) {
    nonce[4 + i] = static_cast<uint8_t>(sequence >> (8 * i));
  }
  return nonce;
}

// EVP's lengths are ints: large inputs go in slices.
constexpr size_t kMaxSlice = size_t{1} << 30;

}  // namespace

Mac HmacSha256(absl::Span<const uint8_t> key,
               absl::Span<const uint8_t> message) {
  Mac mac{};
  unsigned int length = 0;
  // HMAC's key may be empty (no token: the Gloo mesh's pair keys).
  static const uint8_t kEmpty = 0;
  CW_CHECK(HMAC(EVP_sha256(), key.empty() ? &kEmpty : key.data(),
                static_cast<int>(key.size()), message.data(), message.size(),
                mac.data(), &length) != nullptr &&
           length == mac.size())
      << "HMAC-SHA256 failed";
  return mac;
}

void FillRandom(absl::Span<uint8_t> out, absl::string_view what) {
  CW_CHECK(RAND_bytes(out.data(), static_cast<int>(out.size())) == 1)
      << "no random bytes for " << what;
}

SealKey DeriveSealKey(absl::Span<const uint8_t> secret,
                      absl::Span<const uint8_t> salt, absl::string_view label) {
  SealKey key{};
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  CW_CHECK(ctx != nullptr);
  size_t length = key.size();
  // HKDF's secret may be empty (a cluster without a token never seals).
  static const uint8_t kEmpty = 0;
  CW_CHECK(EVP_PKEY_derive_init(ctx) > 0 &&
           EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
           EVP_PKEY_CTX_set1_hkdf_salt(ctx, salt.data(),
                                       static_cast<int>(salt.size())) > 0 &&
           EVP_PKEY_CTX_set1_hkdf_key(
               ctx, secret.empty() ? &kEmpty : secret.data(),
               static_cast<int>(secret.size())) > 0 &&
           EVP_PKEY_CTX_add1_hkdf_info(
               ctx, reinterpret_cast<const unsigned char*>(label.data()),
               static_cast<int>(label.size())) > 0 &&
           EVP_PKEY_derive(ctx, key.data(), &length) > 0 &&
           length == key.size())
      << "HKDF-SHA256 failed";
  EVP_PKEY_CTX_free(ctx);
  return key;
}

struct RecordSealer::Cipher {
  EVP_CIPHER_CTX* ctx = nullptr;
};

RecordSealer::RecordSealer(const SealKey& key)
    : cipher_(std::make_unique<Cipher>()) {
  cipher_->ctx = EVP_CIPHER_CTX_new();
  CW_CHECK(cipher_->ctx != nullptr &&
           EVP_EncryptInit_ex(cipher_->ctx, EVP_aes_256_gcm(), nullptr,
                              key.data(), nullptr) == 1 &&
           EVP_CIPHER_CTX_ctrl(cipher_->ctx, EVP_CTRL_GCM_SET_IVLEN,
                               static_cast<int>(kNonceBytes), nullptr) == 1)
      << "AES-256-GCM is not available";
}

RecordSealer::~RecordSealer() { EVP_CIPHER_CTX_free(cipher_->ctx); }

void RecordSealer::Begin(absl::Span<const uint8_t> associated) {
  CW_CHECK(sequence_ != std::numeric_limits<uint64_t>::max())
      << "a sealed connection ran out of nonces";
  const auto nonce = NonceOf(sequence_++);
  CW_CHECK(EVP_EncryptInit_ex(cipher_->ctx, nullptr, nullptr, nullptr,
                              nonce.data()) == 1);
  if (!associated.empty()) {
    int out = 0;
    CW_CHECK(EVP_EncryptUpdate(cipher_->ctx, nullptr, &out, associated.data(),
                               static_cast<int>(associated.size())) == 1);
  }
}

void RecordSealer::Add(const void* in, void* out, size_t size) {
  const auto* from = static_cast<const uint8_t*>(in);
  auto* to = static_cast<uint8_t*>(out);
  while (size > 0) {
    const size_t slice = std::min(size, kMaxSlice);
    int written = 0;
    CW_CHECK(EVP_EncryptUpdate(cipher_->ctx, to, &written, from,
                               static_cast<int>(slice)) == 1 &&
             static_cast<size_t>(written) == slice);
    from += slice;
    to += slice;
    size -= slice;
  }
}

void RecordSealer::End(uint8_t* tag) {
  int written = 0;
  CW_CHECK(EVP_EncryptFinal_ex(cipher_->ctx, nullptr, &written) == 1 &&
           written == 0 &&
           EVP_CIPHER_CTX_ctrl(cipher_->ctx, EVP_CTRL_GCM_GET_TAG,
                               static_cast<int>(kSealTagBytes), tag) == 1);
}

void RecordSealer::SealInPlace(uint8_t* data, size_t size, uint8_t* tag,
                               absl::Span<const uint8_t> associated) {
  Begin(associated);
  Add(data, data, size);
  End(tag);
}

struct RecordOpener::Cipher {
  EVP_CIPHER_CTX* ctx = nullptr;
};

RecordOpener::RecordOpener(const SealKey& key)
    : cipher_(std::make_unique<Cipher>()) {
  cipher_->ctx = EVP_CIPHER_CTX_new();
  CW_CHECK(cipher_->ctx != nullptr &&
           EVP_DecryptInit_ex(cipher_->ctx, EVP_aes_256_gcm(), nullptr,
                              key.data(), nullptr) == 1 &&
           EVP_CIPHER_CTX_ctrl(cipher_->ctx, EVP_CTRL_GCM_SET_IVLEN,
                               static_cast<int>(kNonceBytes), nullptr) == 1)
      << "AES-256-GCM is not available";
}

RecordOpener::~RecordOpener() { EVP_CIPHER_CTX_free(cipher_->ctx); }

absl::Status RecordOpener::OpenInPlace(uint8_t* data, size_t size,
                                       const uint8_t* tag,
                                       absl::Span<const uint8_t> associated) {
  CW_CHECK(sequence_ != std::numeric_limits<uint64_t>::max());
  const uint64_t sequence = sequence_++;
  const auto nonce = NonceOf(sequence);
  EVP_CIPHER_CTX* ctx = cipher_->ctx;
  CW_CHECK(EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) ==
           1);
  int written = 0;
  if (!associated.empty()) {
    CW_CHECK(EVP_DecryptUpdate(ctx, nullptr, &written, associated.data(),
                               static_cast<int>(associated.size())) == 1);
  }
  for (size_t at = 0; at < size;) {
    const size_t slice = std::min(size - at, kMaxSlice);
    CW_CHECK(EVP_DecryptUpdate(ctx, data + at, &written, data + at,
                               static_cast<int>(slice)) == 1);
    at += slice;
  }
  CW_CHECK(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG,
                               static_cast<int>(kSealTagBytes),
                               const_cast<uint8_t*>(tag)) == 1);
  if (EVP_DecryptFinal_ex(ctx, nullptr, &written) != 1) {
    // The plaintext is unauthenticated: the caller must not use it.
    std::memset(data, 0, size);
    return absl::DataLossError(absl::StrCat(
        "sealed record ", sequence, " (", size,
        " bytes) failed its authentication: it was changed, dropped, "
        "repeated or sealed with another key on the way"));
  }
  return absl::OkStatus();
}

}  // namespace causeway::transport
