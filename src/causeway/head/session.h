// One client session as the head keeps it: its slices (what it asked for
// and where each one is now), its executables (bound to a slice), and the
// FIFO of its work that waits for a slice to be granted.
//
// Deferred work keeps the session's order: an operation runs at once only
// if nothing of the session waits before it and the slice it needs has
// devices; otherwise it waits behind the earlier ones, and DrainDeferred
// (after a grant or a remap) runs them from the front while the front one
// can run. A slice that fails or is released no longer blocks: the work
// then runs and fails with the slice's error.
//
// Not thread-safe: every Session lives in a SessionTable and is used only
// under its lock (SessionTable::WithSession). Deferred work runs there too,
// so it may change the session and post (array table, dispatcher), never
// call a channel or resolve a promise inline.
#ifndef CAUSEWAY_HEAD_SESSION_H_
#define CAUSEWAY_HEAD_SESSION_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "causeway/base/ids.h"
#include "causeway/head/compile_cache.h"
#include "causeway/head/resource_manager.h"
#include "causeway/transport/session_channel.h"

namespace causeway::head {

// One of a session's slices: what was asked for, and where it is now.
struct SliceRecord {
  enum class State {
    kRequesting,  // Asked of the resource manager, no id yet.
    kQueued,      // Waiting for devices.
    kGranted,
    kBroken,  // Lost devices; waits for spares.
    kReleased,
    kFailed,  // Refused: `failure` says why.
  };
  SliceHandle handle;
  SliceId id;  // Negative until the resource manager gave one.
  transport::SliceRequest request;
  State state = State::kRequesting;
  absl::Status failure;
  IslandId island;
  std::vector<DeviceId> devices;
  std::vector<int64_t> mesh_shape;
  uint64_t generation = 0;

  // Requested or queued: work that needs its devices waits.
  bool Waiting() const {
    return state == State::kRequesting || state == State::kQueued;
  }
  transport::SliceInfo Info() const;
};

// "requesting", "queued", "granted", "broken", "released", "failed".
const char* SliceStateName(SliceRecord::State state);

struct ExecutableRecord {
  ExecutableHandle handle;
  SliceHandle slice;
  BoundProgram bound;
};

class Session {
 public:
  struct Limits {
    int64_t max_slices = 1024;
    int64_t max_executables = 4096;
  };
  // What deferred work waits for: nothing (it only keeps its place in the
  // session's order), a slice, or the slice an executable is bound to.
  using WaitsFor = std::variant<std::monostate, SliceHandle, ExecutableHandle>;
  // Runs the work (with the session: it is alive while its work is).
  using Run = absl::AnyInvocable<void(Session&) &&>;
  // The session ended first: resolves what the work would have.
  using Cancel = absl::AnyInvocable<void(const absl::Status&) &&>;

  Session(SessionId id, std::string name, double weight, int priority,
          bool leased, Limits limits);

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  SessionId id() const { return id_; }
  const std::string& name() const { return name_; }
  double weight() const { return weight_; }
  int priority() const { return priority_; }
  bool leased() const { return leased_; }

  // --- Slices. ---
  // A new slice record for `request` (AlreadyExists for a handle in use,
  // ResourceExhausted beyond the limit).
  absl::StatusOr<SliceRecord*> AddSlice(const transport::SliceRequest& request);
  // Null if the session has no slice `handle`.
  SliceRecord* FindSlice(SliceHandle handle);
  const SliceRecord* FindSlice(SliceHandle handle) const;
  // NotFound naming the handle, or the slice.
  absl::StatusOr<SliceRecord*> GetSlice(SliceHandle handle);
  // The resource manager gave the slice its id: it is queued.
  void SliceQueued(SliceHandle handle, SliceId id);
  // The slice has devices (a grant or a remap): adopted unless it is an
  // older mapping than the one kept. True if adopted; then deferred work
  // that waited for it can run (DrainDeferred).
  bool SliceOnDevices(SliceRecord& slice, IslandId island,
                      std::vector<DeviceId> devices,
                      std::vector<int64_t> mesh_shape, uint64_t generation);
  // Its devices were lost (kBroken), or the request was refused (kFailed).
  void SliceBroken(SliceRecord& slice, uint64_t generation);
  void SliceFailed(SliceHandle handle, absl::Status why);
  // Released by the client, or by the resource manager. Its id, if it had
  // one (to release with the resource manager).
  std::optional<SliceId> SliceReleased(SliceHandle handle);
  const std::map<SliceHandle, std::shared_ptr<SliceRecord>>& slices() const {
    return slices_;
  }

  // --- Executables. ---
  // AlreadyExists / ResourceExhausted for one that cannot be added.
  absl::Status CheckNewExecutable(ExecutableHandle handle) const;
  absl::Status AddExecutable(std::shared_ptr<ExecutableRecord> executable);
  const ExecutableRecord* FindExecutable(ExecutableHandle handle) const;
  // The executables bound to `slice`.
  std::vector<const ExecutableRecord*> ExecutablesOn(SliceHandle slice) const;
  int64_t num_executables() const {
    return static_cast<int64_t>(executables_.size());
  }

  // --- Deferred work (see the header comment). ---
  void RunOrDefer(WaitsFor waits_for, Run run, Cancel cancel);
  void DrainDeferred();
  // Every waiting operation, in order, is told `status` (the session ends).
  void CancelDeferred(const absl::Status& status);
  int64_t num_deferred() const {
    return static_cast<int64_t>(deferred_.size());
  }

 private:
  struct Deferred {
    WaitsFor waits_for;
    Run run;
    Cancel cancel;
  };
  bool Blocked(const WaitsFor& waits_for) const;

  const SessionId id_;
  const std::string name_;
  const double weight_;
  const int priority_;
  const bool leased_;
  const Limits limits_;
  std::map<SliceHandle, std::shared_ptr<SliceRecord>> slices_;
  std::map<ExecutableHandle, std::shared_ptr<ExecutableRecord>> executables_;
  std::deque<Deferred> deferred_;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_SESSION_H_
