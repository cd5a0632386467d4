// The head: the single controller. It serves client sessions
// (transport::SessionService), lets hosts join and notices when they die,
// and composes the parts that do the work, each with its own state and
// lock (see docs/dispatch.md, docs/failure.md, docs/membership.md):
//
//   Membership       the hosts: topology snapshots, channels, deaths
//   HealthMonitor    heartbeats with a deadline, session leases
//   ResourceManager  slices on devices: grants, queue, remaps
//   SessionTable     the sessions (Session: slices, executables, the
//                    FIFO of work waiting for a slice)
//   CompileCache     programs parsed and verified once
//   ArrayTable       every session's arrays
//   Uploads          PutArray, PutShards: checked, split, sent
//   Fetches          ArrayReady, Fetch, FetchShards: asked, assembled
//   launch_plan.h    Execute and Copy validated and planned
//   Dispatcher       island schedulers (gang order), batches, in flight
//   worker_notices.h what workers say unasked, checked
//   WorkerStatusPoll every worker's status, up to a deadline
//   status_report.h  the status view
//
// Head wires them: the session service's calls, hosts joining and dying.
// It talks to workers only through their ControlChannels, and never while
// it holds a lock: what its parts decide under their locks goes out
// through the Outbox, in order, once the locks are released. Data never
// passes through it except PutArray and Fetch, which are copies to and
// from the client.
//
// Thread-safe. Futures resolve on the head's callback threads, on worker
// threads or on the thread that drains the outbox; attach continuations
// with an executor of your own.
#ifndef CAUSEWAY_HEAD_HEAD_H_
#define CAUSEWAY_HEAD_HEAD_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
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
#include "causeway/head/array_table.h"
#include "causeway/head/compile_cache.h"
#include "causeway/head/dispatcher.h"
#include "causeway/head/fetches.h"
#include "causeway/head/health.h"
#include "causeway/head/launch_plan.h"
#include "causeway/head/membership.h"
#include "causeway/head/outbox.h"
#include "causeway/head/resource_manager.h"
#include "causeway/head/session.h"
#include "causeway/head/session_table.h"
#include "causeway/head/uploads.h"
#include "causeway/head/worker_statuses.h"
#include "causeway/hlo/literal.h"
#include "causeway/trace/events.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/session_channel.h"
#include "causeway/transport/topology.h"

namespace causeway::head {

// Bounds on what one client may ask of the head.
struct SessionLimits {
  int64_t max_sessions = 4096;
  int64_t max_slices_per_session = 1024;
  int64_t max_executables_per_session = 4096;
  int64_t max_arrays_per_session = int64_t{1} << 20;
  size_t max_name_length = 256;                   // Session names.
  size_t max_program_bytes = size_t{64} << 20;    // HLO text.
  size_t max_handles_per_call = size_t{1} << 16;  // Delete, Execute.
  size_t max_ops_per_graph = size_t{1} << 16;     // Submit.
};

struct HeadOptions {
  trace::EventSink* events = nullptr;  // Null: NullEventSink(). Not owned.
  // Health (docs/failure.md): every interval the head pings each alive
  // host; one that has not answered OK for the timeout is dead. A zero
  // interval turns pinging off (MarkHostDead and disconnect notices still
  // work).
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  // A leased session silent for this long expires (zero: never).
  absl::Duration session_lease = absl::Seconds(10);
  // Launches released and not finished per island before the island
  // scheduler holds back more (its fair-share order then decides).
  int64_t max_inflight_launches_per_island = 64;
  // HLO text bytes of the most recently compiled programs kept parsed (and
  // loaded on the workers that ran them) after their last executable goes,
  // for a client that compiles them again (CompileCache); 0 keeps none.
  int64_t program_cache_bytes = int64_t{64} << 20;
  // Slice requests too big for the hosts there are now wait for hosts to
  // join instead of failing (ResourceManager::Options::wait_for_hosts).
  bool slices_wait_for_hosts = false;
  // With it: the islands and the devices per island the cluster is
  // configured to have; a request beyond them is refused at once
  // (ResourceManager::Options). Zero: not configured.
  int64_t configured_islands = 0;
  int64_t configured_island_devices = 0;
  // Slice requests waiting at once, all sessions together
  // (ResourceManager::Options::max_queued_requests).
  int64_t max_queued_slice_requests = 10000;
  // Called once per (island, epoch) that is over: the island moved on and
  // no launch of that epoch is in flight (Dispatcher::Options). Optional.
  std::function<void(IslandId island, uint64_t epoch)> epoch_retired;
  Membership::Limits host_limits;
  SessionLimits session_limits;
};

// What the head knows of its sessions and hosts at one moment, for the
// HTTP status view and metrics (observe/): taken under the head's locks
// briefly (Head::View), no worker asked.
struct SessionView {
  struct Slice {
    SliceHandle handle;
    // "requesting", "queued", "granted", "broken", "released", "failed".
    std::string state;
    int64_t requested_devices = 0;
    std::optional<IslandId> requested_island;
    IslandId island;  // Granted or broken: where.
    std::vector<DeviceId> devices;
    std::vector<int64_t> mesh_shape;
    uint64_t generation = 0;
    std::string failure;  // Failed: why.
  };
  SessionId id;
  std::string name;
  bool leased = false;
  int priority = 0;
  double weight = 1.0;
  int64_t executables = 0;
  int64_t arrays = 0;
  int64_t deferred = 0;  // Operations waiting for a slice.
  std::vector<Slice> slices;
};
struct ClusterView {
  std::shared_ptr<const transport::Topology> topology;
  std::map<HostId, HostDeath> deaths;
  std::vector<SessionView> sessions;
  // The resource manager's slices (queued requests included), by id.
  std::vector<SliceInfo> slices;
  // Alive hosts: how long since each last answered a heartbeat.
  std::map<HostId, absl::Duration> heartbeat_ages;
};

class Head final : public transport::SessionService,
                   public transport::WorkerListener {
 public:
  // Also turns off abseil's debug-mode Mutex deadlock detector for the
  // process (head.cc: it dominated dispatch profiles; TSan checks the order).
  static absl::StatusOr<std::unique_ptr<Head>> Create(HeadOptions options);
  ~Head() override;  // Shutdown(), then every session ends.

  Head(const Head&) = delete;
  Head& operator=(const Head&) = delete;

  // The current snapshot of the cluster.
  std::shared_ptr<const transport::Topology> topology() const;

  // --- The session service (transport/session_channel.h). ---
  absl::StatusOr<SessionId> OpenSession(
      const transport::OpenSessionRequest& request,
      transport::SessionLease lease) override;
  Future<> CloseSession(SessionId session) override;
  void Touch(SessionId session) override;
  Future<transport::SliceInfo> RequestSlice(
      SessionId session, transport::SliceRequest request) override;
  Future<transport::SliceInfo> GetSlice(SessionId session,
                                        SliceHandle slice) override;
  Future<> ReleaseSlice(SessionId session, SliceHandle slice) override;
  Future<transport::CompileInfo> Compile(
      SessionId session, transport::CompileRequest request) override;
  Future<> PutArray(SessionId session, transport::ArraySpec spec,
                    hlo::Literal global) override;
  Future<> PutShards(SessionId session, transport::ArraySpec spec,
                     std::vector<hlo::Literal> shards) override;
  void Execute(SessionId session, transport::ExecuteOp op) override;
  void Copy(SessionId session, transport::CopyOp op) override;
  void Submit(SessionId session, transport::ProgramGraph graph) override;
  Future<> ArrayReady(SessionId session, ArrayHandle array) override;
  Future<hlo::Literal> Fetch(SessionId session, ArrayHandle array) override;
  Future<std::vector<hlo::Literal>> FetchShards(SessionId session,
                                                ArrayHandle array) override;
  void Delete(SessionId session, std::vector<ArrayHandle> arrays) override;
  Future<transport::StatusReport> GetStatus() override;
  Future<std::string> GetTrace() override;

  // --- Observation (observe/: the HTTP view, metrics). ---
  // The sessions, slices and hosts now; takes each part's lock briefly.
  ClusterView View() const;
  // Every alive worker's status (its devices' running and queued ops and
  // memory), each asked after everything already sent; a worker that does
  // not answer within `timeout` gets DeadlineExceeded in its place.
  Future<WorkerStatuses> GetWorkerStatuses(absl::Duration timeout);

  // --- Membership (docs/membership.md). ---
  // A host joins in two steps: Register gives it its ids (Membership), and
  // once its worker can take calls through `channel`, Activate makes it
  // alive: its devices join the pool, slices waiting for devices may be
  // granted onto it, and the health checker starts watching it.
  absl::StatusOr<HostAssignment> RegisterHost(
      const HostRegistration& registration);
  absl::Status ActivateHost(HostId host,
                            std::shared_ptr<transport::ControlChannel> channel);

  // --- Health and failure (docs/failure.md). ---
  // Declares `host` dead: its devices leave the pool, every array with a
  // shard there becomes DATA_LOSS, ops that need it fail, slices on it are
  // remapped and their executables reloaded. Idempotent; a dead host never
  // comes back.
  void MarkHostDead(HostId host, const std::string& reason);
  bool IsHostAlive(HostId host) const;
  // Waits until `host` is declared dead and its failure handled (arrays
  // failed, slices remapped); DeadlineExceeded if not by `deadline`.
  absl::Status AwaitHostDead(HostId host, absl::Time deadline);
  // Waits until `session` is no longer open (closed, or its lease
  // expired); DeadlineExceeded if not by `deadline`.
  absl::Status AwaitSessionEnded(SessionId session, absl::Time deadline);
  // One round of the health checker now (what it does every interval).
  void CheckHealthNow();

  // --- Worker notices (transport::WorkerListener). ---
  void OnOpDone(const transport::OpDone& done) override;
  // A piece its sender could not deliver: fails the destination buffer
  // through the destination's channel (FailBuffers), unless the source or
  // the destination host is dead (their failure handling covers it).
  void OnPushFailed(const transport::UndeliveredPiece& piece) override;
  void OnWorkerDisconnected(HostId host, absl::Status why) override;
  // Replayed into HeadOptions::events, shifted by `clock_offset`; at most
  // 2^16 per batch, only the host's own devices' events, and an offset of
  // more than a day is refused.
  void OnTraceEvents(HostId host, std::vector<trace::EventRecord> events,
                     absl::Duration clock_offset) override;

  // Stops the health checker and refuses new sessions with Unavailable.
  // Idempotent.
  void Shutdown();

 private:
  explicit Head(HeadOptions options);

  // Ends a session (CloseSession, an expired lease, shutdown): `status`
  // fails its waiting work and stops its launches; `why` is what later
  // calls naming it are told. NotOpen's error if it is not open.
  absl::Status EndSession(SessionId session, const absl::Status& status,
                          const std::string& why);
  // A call of the session's client: renews its lease, then runs `work`
  // with the session under the session table's lock (SessionTable::
  // WithSession says what it may do). NotOpen's error if it is not open.
  absl::Status ForClient(SessionId session,
                         absl::FunctionRef<void(Session&)> work);
  // Resolves `promise` with `result` through the outbox (its continuations
  // may run inline: never under a lock).
  template <typename T>
  void ResolveLater(std::shared_ptr<Promise<T>> promise,
                    internal::FutureResult<T> result);

  // Slices.
  absl::StatusOr<transport::SliceInfo> OnSliceGranted(SessionId session,
                                                      SliceHandle handle,
                                                      const SliceGrant& grant);
  void OnSliceEvent(const SliceEvent& event);
  // The slice has new devices: its executables are loaded there and the
  // session's work that waited for it runs. Under the table's lock.
  void SliceMoved(Session& session, const SliceRecord& slice);
  // PutArray and PutShards: a new array from `source`, once its slice is
  // granted (Uploads::Place).
  Future<> Upload(SessionId session_id, transport::ArraySpec spec,
                  std::shared_ptr<UploadSource> source);
  // ArrayReady, Fetch and FetchShards: `read` of the array, in the
  // session's order.
  template <typename T>
  Future<T> ReadArray(SessionId session_id, ArrayHandle handle,
                      void (Fetches::*read)(std::shared_ptr<const ArrayRecord>,
                                            std::shared_ptr<Promise<T>>));
  void LoadProgram(const CompiledProgram& program,
                   const std::vector<DeviceId>& devices);
  // Tells every alive worker to unload the programs no executable uses and
  // the compile cache no longer keeps (CompileCache::TakeUnused). After a
  // session ends and after a compile, so that what workers hold stays
  // bounded by the programs in use and those kept.
  void UnloadUnusedPrograms();

  // Execute and Copy: now, or once the executable's or slice's devices are
  // granted (Session::RunOrDefer). Under the table's lock.
  void EnqueueExecute(Session& session, transport::ExecuteOp op);
  void EnqueueCopy(Session& session, transport::CopyOp op);
  void ExecuteNow(Session& session, const transport::ExecuteOp& op);
  // What PlanExecute and PlanCopy plan in: the session and its slice now,
  // on `topology` (which must outlive it).
  PlanContext PlanContextFor(const Session& session, const SliceRecord& slice,
                             const transport::Topology& topology);
  void CopyNow(Session& session, const transport::CopyOp& op);

  const HeadOptions options_;
  trace::EventSink* const events_;
  Outbox outbox_;
  Membership membership_;
  CompileCache programs_;
  ArrayTable arrays_;
  // Sessions, their slices, executables and deferred work. Its lock comes
  // before the parts' locks and is never held while calling the resource
  // manager, the health monitor's callbacks or a channel.
  SessionTable sessions_;
  std::unique_ptr<ResourceManager> resources_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<HealthMonitor> health_;
  std::unique_ptr<ThreadPool> callbacks_;
  std::unique_ptr<Uploads> uploads_;
  std::unique_ptr<Fetches> fetches_;
  std::unique_ptr<WorkerStatusPoll> statuses_;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_HEAD_H_
