// The head: the single controller. It serves client sessions (what
// transport::SessionChannel carries), grants slices through the resource
// manager, compiles programs once (parse + verify, cached by fingerprint)
// and loads them onto the workers of a slice when it is granted, dispatches
// executions and copies (dispatcher.h) in every island's gang order, keeps
// the table of every session's arrays, and handles host failure. It talks to
// workers only through ControlChannels; data never passes through it except
// PutArray and Fetch, which are copies to and from the client by definition.
// See docs/dispatch.md and docs/failure.md.
//
// Arrays: the client mints handles; the head maps each (session, handle) to
// an internal handle, unique across sessions, that names the array's
// buffers on the workers. An array whose op could not even be dispatched
// (unknown handle, wrong shape, ...) is an error array: it has no buffers,
// and every op that uses it yields error arrays too. Errors found while
// running live in the buffers and flow the same way on the workers.
//
// Thread-safe. Futures resolve on the head's callback threads or on worker
// threads; attach continuations with an executor of your own.
#ifndef CAUSEWAY_HEAD_HEAD_H_
#define CAUSEWAY_HEAD_HEAD_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/executor.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/head/dispatcher.h"
#include "causeway/head/resource_manager.h"
#include "causeway/hlo/literal.h"
#include "causeway/trace/events.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/session_channel.h"
#include "causeway/transport/topology.h"

namespace causeway::head {

class IslandScheduler;

struct HeadOptions {
  std::shared_ptr<const transport::Topology> topology;  // Required.
  // One channel per host, indexed by host id. Not owned; they must outlive
  // the head.
  std::vector<transport::ControlChannel*> workers;
  trace::EventSink* events = nullptr;  // Null: NullEventSink(). Not owned.
  // Health: every interval the head pings each live worker; one that does
  // not answer OK within the timeout is declared dead (docs/failure.md).
  // A zero interval turns the checker off (MarkHostDead still works).
  absl::Duration heartbeat_interval = absl::Milliseconds(100);
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // Launches released and not finished per island before the island
  // scheduler holds back more (its fair-share order then decides).
  int64_t max_inflight_launches_per_island = 64;
};

class Head final : public transport::SessionService,
                   public transport::WorkerListener {
 public:
  // Also turns off abseil's debug-mode Mutex deadlock detector for the
  // process (see head.cc: it dominated dispatch profiles).
  static absl::StatusOr<std::unique_ptr<Head>> Create(HeadOptions options);
  ~Head() override;  // Shutdown().

  Head(const Head&) = delete;
  Head& operator=(const Head&) = delete;

  const transport::Topology& topology() const { return *options_.topology; }

  // --- The session service (transport/session_channel.h). ---
  absl::StatusOr<SessionId> OpenSession(
      const transport::OpenSessionRequest& request) override;
  Future<> CloseSession(SessionId session) override;
  Future<transport::SliceInfo> RequestSlice(
      SessionId session, transport::SliceRequest request) override;
  Future<transport::SliceInfo> GetSlice(SessionId session,
                                        SliceHandle slice) override;
  Future<> ReleaseSlice(SessionId session, SliceHandle slice) override;
  Future<transport::CompileInfo> Compile(
      SessionId session, transport::CompileRequest request) override;
  Future<> PutArray(SessionId session, transport::ArraySpec spec,
                    hlo::Literal global) override;
  void Execute(SessionId session, transport::ExecuteOp op) override;
  void Copy(SessionId session, transport::CopyOp op) override;
  void Submit(SessionId session, transport::ProgramGraph graph) override;
  Future<> ArrayReady(SessionId session, ArrayHandle array) override;
  Future<hlo::Literal> Fetch(SessionId session, ArrayHandle array) override;
  void Delete(SessionId session, std::vector<ArrayHandle> arrays) override;
  Future<transport::StatusReport> GetStatus() override;
  Future<std::string> GetTrace() override;

  // --- Health and failure (docs/failure.md). ---
  // Declares `host` dead: its devices leave the pool, every array with a
  // shard there becomes DATA_LOSS, ops that need it fail, slices on it are
  // remapped and their executables reloaded. Idempotent.
  void MarkHostDead(HostId host, const std::string& reason);
  bool IsHostAlive(HostId host) const;
  // Waits until `host` is declared dead and its failure handled (arrays
  // failed, slices remapped); DeadlineExceeded if not by `deadline`.
  absl::Status AwaitHostDead(HostId host, absl::Time deadline);
  // One round of heartbeats now (what the checker does every interval).
  void CheckHealthNow();

  // Worker notices.
  void OnOpDone(const transport::OpDone& done) override;
  // A piece its sender could not deliver: fails the destination buffer
  // through the destination's channel (FailBuffers), unless the source or
  // the destination host is dead (their failure handling covers it).
  void OnPushFailed(const transport::UndeliveredPiece& piece) override;

  // Stops the health checker and fails later requests with Unavailable.
  // Idempotent.
  void Shutdown();

 private:
  struct CompiledProgram;
  struct ArrayState;
  struct ArrayRecord;
  struct SliceRecord;
  struct Executable;
  struct Deferred;
  struct Session;
  struct PreparedLaunch;

  explicit Head(HeadOptions options);

  // Sessions.
  Session* FindSessionLocked(SessionId session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The array `handle` of `session`, if it holds data or will: NotFound
  // ("<context>: unknown array handle N (...)"; no prefix when `context`
  // is empty) if the session never created it or deleted it, and the
  // array's own error, unchanged, if it failed.
  absl::StatusOr<std::shared_ptr<ArrayRecord>> FindArrayLocked(
      const Session& session, ArrayHandle handle,
      absl::FunctionRef<std::string()> context) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `run` now, or queues it behind earlier deferred work of the session
  // while `blocked()` says a slice it needs is not granted yet; `cancel`
  // resolves whatever `run` would have if the session ends first.
  void RunOrDeferLocked(Session& session, std::function<bool()> blocked,
                        std::function<void()> run,
                        std::function<void(absl::Status)> cancel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DrainDeferredLocked(Session& session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SliceBlockedLocked(Session& session, SliceHandle slice)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ExecutableBlockedLocked(Session& session, ExecutableHandle executable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Slices.
  absl::StatusOr<transport::SliceInfo> OnSliceGranted(
      SessionId session, SliceHandle handle, const SliceGrant& grant);
  void OnSliceEvent(const SliceEvent& event);
  void LoadExecutablesLocked(Session& session, const SliceRecord& slice)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LoadProgramLocked(const CompiledProgram& program,
                         const std::vector<DeviceId>& devices)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static transport::SliceInfo InfoOf(const SliceRecord& slice);

  // Compile cache.
  absl::StatusOr<std::shared_ptr<const CompiledProgram>> GetOrCompile(
      const std::string& hlo_text);

  // Arrays.
  ArrayHandle NewInternalHandle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<ArrayRecord> AddArrayLocked(
      Session& session, const transport::ArraySpec& spec,
      ArrayPlacement placement, absl::Status error, std::string producer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddErrorArraysLocked(Session& session,
                            const std::vector<transport::ArraySpec>& specs,
                            const absl::Status& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteArrayLocked(Session& session, ArrayHandle handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the array's buffers back once nothing queued at the head still
  // needs them.
  void MaybeReleaseBuffersLocked(ArrayRecord& record, DispatchBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(dispatch_mu_);
  // Runs `callback(OK)` once the array's buffers exist on their workers, or
  // `callback(error)` if they never will.
  void WhenPlacedLocked(ArrayRecord& record,
                        std::function<void(absl::Status)> callback)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Dispatch (dispatcher.h).
  // Run an Execute or Copy now, or once the executable's or slice's
  // devices are granted (RunOrDeferLocked).
  void EnqueueExecuteLocked(Session& session, transport::ExecuteOp op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnqueueCopyLocked(Session& session, transport::CopyOp op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteLocked(Session& session, const transport::ExecuteOp& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CopyLocked(Session& session, const transport::CopyOp& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckNewHandlesLocked(
      Session& session, const std::vector<transport::ArraySpec>& specs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens a dispatch batch (if none is open) for the duration of `body`:
  // every launch released meanwhile, on any thread, joins it; it is sent,
  // one message per worker, when the outermost call returns. Holding mu_
  // keeps dispatches from overlapping.
  void Batched(const std::function<void()>& body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The open batch, or `*local` (which the caller then sends).
  DispatchBatch& BatchLocked(DispatchBatch* local)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(dispatch_mu_);
  void SendIfLocalLocked(DispatchBatch& batch, DispatchBatch* local)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(dispatch_mu_);
  void ReleaseLaunch(const std::shared_ptr<PreparedLaunch>& launch,
                     uint64_t seq) ABSL_LOCKS_EXCLUDED(dispatch_mu_);
  // The scheduler dropped a launch it never released (its session ended).
  void DropLaunch(const std::shared_ptr<PreparedLaunch>& launch)
      ABSL_LOCKS_EXCLUDED(dispatch_mu_);
  void LaunchFinished(IslandId island, uint64_t seq);

  // Status.
  transport::StatusReport BuildStatus(
      const std::vector<absl::StatusOr<transport::WorkerStatus>>& workers);

  void HealthLoop();

  const HeadOptions options_;
  trace::EventSink* const events_;
  std::unique_ptr<ResourceManager> resources_;
  std::vector<std::unique_ptr<IslandScheduler>> schedulers_;  // By island.
  std::unique_ptr<ThreadPool> callbacks_;

  // Sessions, slices, executables, arrays. Order: mu_ before dispatch_mu_
  // before inflight_mu_; none is held while calling the resource manager or
  // an island scheduler.
  mutable absl::Mutex mu_;
  std::map<SessionId, std::unique_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<SliceId, std::pair<SessionId, SliceHandle>> slices_by_id_
      ABSL_GUARDED_BY(mu_);
  int64_t next_session_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_internal_handle_ ABSL_GUARDED_BY(mu_) = 1;
  std::set<HostId> dead_hosts_ ABSL_GUARDED_BY(mu_);
  // Dead hosts whose failure handling (remaps included) is complete.
  std::set<HostId> handled_dead_hosts_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex compile_mu_;
  std::map<uint64_t, std::weak_ptr<const CompiledProgram>> compiled_
      ABSL_GUARDED_BY(compile_mu_);

  // Sending to workers, in order.
  absl::Mutex dispatch_mu_ ABSL_ACQUIRED_AFTER(mu_);
  DispatchBatch batch_storage_ ABSL_GUARDED_BY(dispatch_mu_);
  DispatchBatch* open_batch_ ABSL_GUARDED_BY(dispatch_mu_) = nullptr;
  int open_depth_ ABSL_GUARDED_BY(dispatch_mu_) = 0;
  std::vector<transport::ControlChannel*> live_workers_
      ABSL_GUARDED_BY(dispatch_mu_);
  std::set<HostId> dead_for_dispatch_ ABSL_GUARDED_BY(dispatch_mu_);
  uint64_t next_transfer_id_ ABSL_GUARDED_BY(mu_) = 1;

  // Launches sent and not finished on every device: (island, seq) -> the
  // devices still running it.
  absl::Mutex inflight_mu_ ABSL_ACQUIRED_AFTER(dispatch_mu_);
  std::map<std::pair<IslandId, uint64_t>, std::set<DeviceId>> inflight_
      ABSL_GUARDED_BY(inflight_mu_);

  // Health checker.
  absl::Mutex health_mu_;
  bool health_stop_ ABSL_GUARDED_BY(health_mu_) = false;
  std::thread health_thread_;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_HEAD_H_
