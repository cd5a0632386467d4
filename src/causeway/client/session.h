// A Session: one client's connection to the cluster. It owns its slices,
// arrays and executables; closing it (or destroying it) releases them all.
//
//   Session session = *client->OpenSession({.name = "trainer", .weight = 2});
//   Slice slice = *session.CreateSlice(2);
//   Executable exe = *session.Compile(hlo_text, slice);
//   Array x = *session.FromHost(literal, slice, *Sharding::TiledByDims({2}));
//   std::vector<Array> y = *exe.Execute({x});
//   hlo::Literal value = *y[0].ToHost().Await();
//
// Move-only: a moved-from Session fails every call with FailedPrecondition
// (and reads as closed). Thread-safe: any thread may call any method
// (except moving or destroying the Session while others use it).
#ifndef CAUSEWAY_CLIENT_SESSION_H_
#define CAUSEWAY_CLIENT_SESSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/client/array.h"
#include "causeway/client/executable.h"
#include "causeway/client/sharding.h"
#include "causeway/client/slice.h"
#include "causeway/hlo/literal.h"
#include "causeway/transport/session_channel.h"

namespace causeway::client {

namespace internal {
class SessionCore;
}  // namespace internal

struct SessionOptions {
  std::string name = "session";  // Shown in status and traces.
  double weight = 1.0;           // Fair-share weight on every island.
  int priority = 0;              // Default priority of its slice requests.
};

struct SliceOptions {
  int64_t num_devices = 1;
  std::vector<int64_t> mesh_shape;      // Empty: {num_devices}.
  std::vector<std::string> axis_names;  // Empty: "x", "y", ...
  std::optional<IslandId> island;       // Empty: any island.
  std::optional<int> priority;          // Empty: the session's.
  bool allow_smaller = false;           // May shrink on failure remap.
  // Time-share the devices with other shared slices (the island scheduler
  // interleaves their programs by fair share) instead of owning them.
  bool shared = false;
};

class Session {
 public:
  // Opens a session on `channel` (waits for the head's reply).
  static absl::StatusOr<Session> Open(
      std::unique_ptr<transport::SessionChannel> channel,
      SessionOptions options = {});

  Session(Session&&) = default;
  Session& operator=(Session&&);
  ~Session();  // Close(), ignoring its error.

  SessionId id() const;
  const std::string& name() const;

  // Asks for a virtual slice. Returns at once; the slice's Ready() resolves
  // when it is granted. InvalidArgument for sizes that make no sense.
  absl::StatusOr<Slice> CreateSlice(SliceOptions options);
  absl::StatusOr<Slice> CreateSlice(int64_t num_devices,
                                    std::vector<int64_t> mesh_shape = {},
                                    std::optional<IslandId> island = {});

  // Compiles `hlo_text` for `slice` (which may still be queued: the program
  // loads onto the devices when they are granted). Waits for the head to
  // parse and verify it: errors carry line:column.
  absl::StatusOr<Executable> Compile(std::string_view hlo_text,
                                     const Slice& slice);

  // An array on `slice` with `sharding`, holding `value` (split by the
  // sharding). Returns at once; the upload runs in the background.
  absl::StatusOr<Array> FromHost(const hlo::Literal& value, const Slice& slice,
                                 const Sharding& sharding);

  // An array of `global_shape` on `slice` with `sharding`, assembled from
  // one buffer per device: shards[i] goes to virtual device i and must have
  // the shard shape the sharding gives (JAX's
  // make_array_from_single_device_arrays). Replicas are not compared: each
  // device keeps its own. Returns at once; the upload runs in the
  // background.
  absl::StatusOr<Array> FromShards(std::vector<hlo::Literal> shards,
                                   const hlo::Shape& global_shape,
                                   const Slice& slice,
                                   const Sharding& sharding);

  // A copy of `array` on `slice` with `sharding` (any slice of this
  // session, any sharding that fits): data moves device to device.
  absl::StatusOr<Array> Copy(const Array& array, const Slice& slice,
                             const Sharding& sharding);
  // A copy on the same slice with another sharding.
  absl::StatusOr<Array> Reshard(const Array& array, const Sharding& sharding);
  // An array of `global_shape` on `slice` with `sharding` assembled from
  // arrays already on devices: shard i is shard pieces[i].second of array
  // pieces[i].first, which must have the shard shape the sharding gives
  // (JAX's make_array_from_single_device_arrays, worker to worker).
  absl::StatusOr<Array> Assemble(
      absl::Span<const std::pair<Array, int64_t>> pieces,
      const hlo::Shape& global_shape, const Slice& slice,
      const Sharding& sharding);

  // The head's view of every device (running op, queues, waits).
  Future<transport::StatusReport> Status();
  // Chrome trace-event JSON of recent work (opens in Perfetto).
  Future<std::string> Trace();

  // Releases everything the session holds. Later calls on the session or
  // its arrays fail with FailedPrecondition. Idempotent.
  absl::Status Close();
  bool closed() const;

  const std::shared_ptr<internal::SessionCore>& core() const { return core_; }

 private:
  explicit Session(std::shared_ptr<internal::SessionCore> core);
  // FailedPrecondition for a moved-from or closed session.
  absl::Status CheckOpen() const;
  std::shared_ptr<internal::SessionCore> core_;
};

}  // namespace causeway::client

#endif  // CAUSEWAY_CLIENT_SESSION_H_
