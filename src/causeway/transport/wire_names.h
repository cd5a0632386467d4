// Names by number on a stream: the names a worker stream repeats in every
// message (a launch's program, its session, the producer of each input; a
// trace event's program and session) travel once, and as a small number
// after that (docs/distributed.md, "The cost of a message").
//
// Each direction of a stream has one table: the sender's NameEncoder gives
// a name its id the first time a message uses it and puts the definition
// in that message's `Names`; the receiver's NameDecoder reads a message's
// definitions before the rest of it. Ids count up from 1 in the order
// defined; 0 is the empty name and is never defined. Both sides handle
// their stream's messages in order on one thread, so neither is
// thread-safe.
//
// Bounded: the decoder keeps at most kMaxNames names of at most
// kMaxNameBytes each, kMaxNameTableBytes in all; the encoder starts a
// message with a reset (both tables emptied) once its table holds half of
// either bound, and cuts a longer name at kMaxNameBytes (names are for
// people: status, errors, traces). A definition the decoder cannot keep
// (out of order, too long, beyond the bounds) is dropped with a warning,
// and every use of its id fails as unknown: an unknown id fails what names
// it (a launch, a trace event), never the stream.
//
// A launch's peers (its devices and their hosts, the same in each of its
// ops: N ids in each of N ops) go in the same table's life: defined once
// (Names.define_peers) under the launch's fingerprint, used by number
// (LaunchOp.peers), at most kMaxPeerLists lists of kMaxPeerIds ids in all,
// emptied by the same reset. So a launch over 2,048 devices costs the head
// one number per op, not 2,560, once its slice's first launch has passed.
#ifndef CAUSEWAY_TRANSPORT_WIRE_NAMES_H_
#define CAUSEWAY_TRANSPORT_WIRE_NAMES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "causeway/base/ids.h"
#include "causeway/transport/proto/worker.pb.h"

namespace causeway::transport {

class FieldPath;

inline constexpr int64_t kMaxNames = int64_t{1} << 16;
inline constexpr int64_t kMaxNameBytes = 4096;
inline constexpr int64_t kMaxNameTableBytes = int64_t{16} << 20;
// Peer lists (a launch's devices and hosts): at most this many, of this
// many ids in all, per table.
inline constexpr int64_t kMaxPeerLists = int64_t{1} << 12;
inline constexpr int64_t kMaxPeerIds = int64_t{1} << 22;

// A launch's peers as a stream's table keeps them.
struct Peers {
  std::vector<DeviceId> devices;
  std::vector<HostId> hosts;
};

class NameEncoder {
 public:
  // Starts a message whose definitions go to `names` (until the next
  // Begin); resets the table first when it is half full.
  void Begin(wire::Names* names);
  // The id of `name` (0 for the empty name), defined in the current
  // message if this table has not sent it yet.
  uint32_t Id(const std::string& name);

  // The id of a launch's peers, `key` their fingerprint
  // (LaunchOp::peers_key), defined in the current message if this table
  // has not sent them yet.
  uint32_t PeersId(uint64_t key, const std::vector<DeviceId>& devices,
                   const std::vector<HostId>& hosts);

  int64_t size() const { return static_cast<int64_t>(ids_.size()); }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  int64_t bytes_ = 0;
  std::unordered_map<uint64_t, uint32_t> peer_ids_;
  int64_t peer_id_count_ = 0;  // Ids in every list sent.
  wire::Names* names_ = nullptr;
};

class NameDecoder {
 public:
  // Applies a message's definitions; what cannot be kept is dropped (see
  // the header comment), never an error.
  void Define(const wire::Names& names);
  bool Has(uint32_t id) const { return id <= names_.size(); }
  // Sets `*out` to the name `id` stands for, shared (null for id 0);
  // InvalidArgument naming the field when no definition of it was kept.
  absl::Status Find(uint32_t id, const FieldPath& path,
                    std::shared_ptr<const std::string>* out) const;
  // The same, as a copy ("" for id 0).
  absl::Status Find(uint32_t id, const FieldPath& path,
                    std::string* out) const;

  // Sets `*out` to the peers `id` stands for; InvalidArgument naming the
  // field when no definition of it was kept.
  absl::Status FindPeers(uint32_t id, const FieldPath& path,
                         std::shared_ptr<const Peers>* out) const;

  int64_t size() const { return static_cast<int64_t>(names_.size()); }

 private:
  std::vector<std::shared_ptr<const std::string>> names_;  // names_[id - 1].
  int64_t bytes_ = 0;
  std::vector<std::shared_ptr<const Peers>> peers_;  // peers_[id - 1].
  int64_t peer_id_count_ = 0;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_WIRE_NAMES_H_
