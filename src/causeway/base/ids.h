// Strong id types: a DeviceId is never confused with a HostId or an index.
#ifndef CAUSEWAY_BASE_IDS_H_
#define CAUSEWAY_BASE_IDS_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>

namespace causeway {

// A typed integer id. `Tag` only distinguishes the types.
template <typename Tag, typename Int = int64_t>
class StrongId {
 public:
  constexpr StrongId() = default;
  constexpr explicit StrongId(Int value) : value_(value) {}
  constexpr Int value() const { return value_; }
  friend constexpr auto operator<=>(StrongId, StrongId) = default;
  template <typename H>
  friend H AbslHashValue(H h, StrongId id) {
    return H::combine(std::move(h), id.value_);
  }
  friend std::ostream& operator<<(std::ostream& os, StrongId id) {
    return os << id.value_;
  }

 private:
  Int value_ = -1;
};

using DeviceId = StrongId<struct DeviceIdTag>;
using HostId = StrongId<struct HostIdTag>;
using IslandId = StrongId<struct IslandIdTag>;
using SessionId = StrongId<struct SessionIdTag>;
using ArrayHandle = StrongId<struct ArrayHandleTag, uint64_t>;

// One shard of an array on one device: the unit an object store holds and
// the data plane moves.
struct BufferId {
  ArrayHandle array;
  int64_t shard = 0;

  friend bool operator==(const BufferId&, const BufferId&) = default;
  friend auto operator<=>(const BufferId&, const BufferId&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const BufferId& id) {
    return H::combine(std::move(h), id.array, id.shard);
  }
  // "array 12 shard 3".
  std::string ToString() const;
};

}  // namespace causeway

template <typename Tag, typename Int>
struct std::hash<causeway::StrongId<Tag, Int>> {
  size_t operator()(causeway::StrongId<Tag, Int> id) const {
    return std::hash<Int>()(id.value());
  }
};

#endif  // CAUSEWAY_BASE_IDS_H_
