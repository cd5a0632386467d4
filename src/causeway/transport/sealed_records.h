// Sealed records: AES-256-GCM over a byte stream whose two ends share a
// key, for the data plane and the collectives (docs/security.md,
// "Encryption").
//
// Contract:
// * Each direction of a connection has its own key, derived with
//   HKDF-SHA256 from a secret both ends proved (the cluster's token, a
//   Gloo pair's key) and the handshake's fresh nonces (the salt): a new
//   connection has new keys, so nothing recorded on one connection opens
//   on another.
// * A record's nonce is its sequence number on its direction (0, 1, 2, ...;
//   never sent): a key never sees a nonce twice, and a record dropped,
//   repeated or moved fails to open.
// * A record is `ciphertext | tag` (kSealTagBytes); its length is known to
//   both ends from what they already agreed (the frame's header), so it is
//   not sent. Optional associated data (bytes sent in clear, such as a
//   length prefix) is authenticated with the record.
// * Open() decrypts in place and reports whether the tag matched: a caller
//   uses plaintext only after that (a record that fails leaves its
//   connection unusable: the next nonce is out of step anyway).
//
// Thread-compatible: one object per direction of one connection, used by
// one thread at a time.
#ifndef CAUSEWAY_TRANSPORT_SEALED_RECORDS_H_
#define CAUSEWAY_TRANSPORT_SEALED_RECORDS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace causeway::transport {

inline constexpr size_t kSealTagBytes = 16;
inline constexpr size_t kSealKeyBytes = 32;

using SealKey = std::array<uint8_t, kSealKeyBytes>;

// HMAC-SHA256 of `message` under `key`: the proofs of the data plane's, the
// Gloo mesh's and the head's calls.
using Mac = std::array<uint8_t, 32>;
Mac HmacSha256(absl::Span<const uint8_t> key, absl::Span<const uint8_t> message);
inline Mac HmacSha256(absl::string_view key, absl::string_view message) {
  return HmacSha256(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(key.data()), key.size()),
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(message.data()),
                          message.size()));
}

// Fills `out` with OpenSSL's random bytes (nonces, secrets); aborts, naming
// `what`, if it has none.
void FillRandom(absl::Span<uint8_t> out, absl::string_view what);

// HKDF-SHA256 (RFC 5869) of `secret` with `salt`, for `label` (one label
// per use and direction).
SealKey DeriveSealKey(absl::Span<const uint8_t> secret,
                      absl::Span<const uint8_t> salt, absl::string_view label);

// One direction of a connection. Records are sealed (or opened) whole, in
// order; a record may be built from several pieces of plaintext (Add) so
// that a gather of runs needs no copy before it is encrypted.
class RecordSealer {
 public:
  explicit RecordSealer(const SealKey& key);
  ~RecordSealer();
  RecordSealer(const RecordSealer&) = delete;
  RecordSealer& operator=(const RecordSealer&) = delete;

  // Starts the next record (its nonce is the next sequence number).
  void Begin(absl::Span<const uint8_t> associated = {});
  // Encrypts `size` bytes of `in` into `out` (`out` may be `in`).
  void Add(const void* in, void* out, size_t size);
  // Ends the record: its tag into `tag` (kSealTagBytes).
  void End(uint8_t* tag);

  // Begin, Add and End of one contiguous record, in place.
  void SealInPlace(uint8_t* data, size_t size, uint8_t* tag,
                   absl::Span<const uint8_t> associated = {});

  uint64_t records() const { return sequence_; }

 private:
  struct Cipher;
  std::unique_ptr<Cipher> cipher_;
  uint64_t sequence_ = 0;
};

class RecordOpener {
 public:
  explicit RecordOpener(const SealKey& key);
  ~RecordOpener();
  RecordOpener(const RecordOpener&) = delete;
  RecordOpener& operator=(const RecordOpener&) = delete;

  // Decrypts the next record (`size` bytes at `data`, in place) and checks
  // its tag: DataLoss if it does not match (the record was changed,
  // dropped, repeated or sealed with another key); `data` then holds no
  // plaintext the caller may use.
  absl::Status OpenInPlace(uint8_t* data, size_t size, const uint8_t* tag,
                           absl::Span<const uint8_t> associated = {});

  uint64_t records() const { return sequence_; }

 private:
  struct Cipher;
  std::unique_ptr<Cipher> cipher_;
  uint64_t sequence_ = 0;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_SEALED_RECORDS_H_
