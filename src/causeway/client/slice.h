// A virtual slice: "n devices in one island, mesh shape 2x2", as a session
// asked for it. The resource manager maps it onto physical devices when it
// is granted, and may remap it later (after a failure) without the client's
// code changing: arrays and executables name the slice, never devices.
//
// A Slice is usable as soon as it is created: programs compile for it and
// arrays are placed on it while the request still waits in the queue; their
// work starts when the slice is granted (Ready()).
//
// A copyable handle; the slice is released when the last handle (and every
// array and executable on it) is gone, or when its session closes.
// Thread-safe.
#ifndef CAUSEWAY_CLIENT_SLICE_H_
#define CAUSEWAY_CLIENT_SLICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/client/sharding.h"
#include "causeway/transport/session_channel.h"

namespace causeway::client {

namespace internal {
struct SliceState;
}  // namespace internal

class Slice {
 public:
  // Invalid: its accessors give empty values (0 devices), Ready and Info
  // fail with InvalidArgument, Release does nothing.
  Slice() = default;
  explicit Slice(std::shared_ptr<internal::SliceState> state);

  bool valid() const { return state_ != nullptr; }
  SliceHandle handle() const;
  int64_t num_devices() const;
  const Mesh& mesh() const;
  // The island asked for, if any.
  std::optional<IslandId> requested_island() const;

  // Resolves when the slice is granted, with its current mapping onto
  // physical devices; or with the error that keeps it from ever being
  // granted (ResourceExhausted: larger than any island; Cancelled: the
  // session closed first).
  Future<transport::SliceInfo> Ready() const;
  // The current mapping (it changes when the head remaps the slice after a
  // failure). Waits for the grant.
  Future<transport::SliceInfo> Info() const;

  // Gives the devices back now (arrays on the slice become unusable).
  // Later calls do nothing.
  Future<> Release() const;

  // "slice 3 (2 devices, mesh[x=2])".
  std::string ToString() const;

  friend bool operator==(const Slice& a, const Slice& b) {
    return a.state_ == b.state_;
  }

  const std::shared_ptr<internal::SliceState>& state() const { return state_; }

 private:
  std::shared_ptr<internal::SliceState> state_;
};

}  // namespace causeway::client

#endif  // CAUSEWAY_CLIENT_SLICE_H_
