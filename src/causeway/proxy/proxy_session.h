// One IFRT proxy session: a connected JAX process (one IfrtSession stream)
// served as one Causeway session. It turns the protocol's requests into
// calls on the C++ client library (client/): arrays, slices, executables.
//
// Devices. A JAX device is a virtual device: a position on an island, not
// a physical device. The JAX process sees the cluster's devices as they were
// when the proxy connected, less the spare hosts' (ProxyDevices), numbered
// 0..N-1 by island, then by Causeway device id, with `slice_index` = island.
// An array or executable on a list of JAX devices lives on a Causeway slice
// of that many devices on their island, made on first use and kept for the
// session (shared: every JAX session time-shares all devices; see
// docs/jax.md). When a host dies, the head remaps the slice onto spare
// devices of the island: the JAX devices stay the same.
//
// Handles. The client names most objects itself (handles below 2^48); the
// server mints the rest from 2^48 up. A handle names an array future: a
// request that names an array whose making has not finished waits for it,
// and an array whose making failed fails every request that names it.
//
// Thread-safe: Process may be called from any thread; `respond` runs once
// per request, on the session's executor or the calling thread, never
// under the session's lock.
#ifndef CAUSEWAY_PROXY_PROXY_SESSION_H_
#define CAUSEWAY_PROXY_PROXY_SESSION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/executor.h"
#include "causeway/base/future.h"
#include "causeway/client/client.h"
#include "causeway/proxy/compile_service.h"
#include "causeway/proxy/host_buffer_store.h"
#include "causeway/proxy/ifrt_convert.h"
#include "causeway/proxy/proto/ifrt_service.pb.h"

namespace causeway::proxy {

// A JAX device as the proxy presents it.
struct ProxyDevice {
  int32_t id = 0;  // JAX's device id.
  IslandId island;
  std::string kind;
  int64_t memory_bytes = 0;
};

// The JAX devices of `client`'s cluster (see the header comment): every
// device, less those of the `spare_hosts_per_island` last hosts (by host
// id) of each island, which stay out of jax.devices() for the head to remap
// slices onto when a host dies. InvalidArgument when that leaves an island
// with no device.
absl::StatusOr<std::vector<ProxyDevice>> ProxyDevices(
    const client::Client& client, int spare_hosts_per_island);

// Handles the server mints start here; the client's stay below.
inline constexpr uint64_t kServerHandlesStart = uint64_t{1} << 48;
// Bounds on one request.
inline constexpr int kMaxHandlesPerRequest = 1 << 20;

// Shared: a request's work that finishes after its answer (a fetch
// storing its value, an upload's array being made) holds the session until
// it has run, so a JAX process that goes away mid-request leaves nothing
// behind that points at a destroyed session.
class ProxySession : public std::enable_shared_from_this<ProxySession> {
 public:
  using Respond = absl::AnyInvocable<void(xla::ifrt::proxy::IfrtResponse) &&>;
  struct Options {
    uint64_t session_id = 0;
    int protocol_version = 0;
    std::string name = "jax";
    HostBufferStore::Limits host_buffer_limits;
    // The JAX devices (ProxyDevices); empty: every device of the cluster.
    std::vector<ProxyDevice> devices;
  };

  // Opens the Causeway session. `client`, `compiler` and `executor`
  // outlive the session.
  static absl::StatusOr<std::shared_ptr<ProxySession>> Create(
      client::Client* client, CompileService* compiler, Executor* executor,
      Options options);
  ~ProxySession();

  // Serves one request; `respond` gets its response (with the request's
  // op_id and the status) exactly once.
  void Process(const xla::ifrt::proxy::IfrtRequest& request, Respond respond);

  HostBufferStore& host_buffers() { return host_buffers_; }
  // Futures the client may still read (CheckFuture): compiles' readiness,
  // deletions, and the status of executions that asked for one.
  int64_t held_futures();
  uint64_t id() const { return options_.session_id; }
  // Ends the Causeway session: its arrays, executables, futures and slices
  // are released and pending requests fail. Idempotent.
  void Close();

 private:
  struct ArrayEntry;
  struct ExecutableEntry;
  using Response = xla::ifrt::proxy::IfrtResponse;
  using ArrayFuture = Future<std::shared_ptr<const ArrayEntry>>;

  ProxySession(CompileService* compiler, Executor* executor, Options options,
               client::Session session);

  Future<Response> Dispatch(const xla::ifrt::proxy::IfrtRequest& request);
  Response Init();
  Future<Response> MakeArrayFromHostBuffer(
      const xla::ifrt::proxy::MakeArrayFromHostBufferRequest& request);
  Future<Response> MakeArraysFromHostBufferShards(
      const xla::ifrt::proxy::MakeArraysFromHostBufferShardsRequest& request);
  // One array of `spec`, named `handle`.
  Future<> MakeArrayFromShards(
      uint64_t handle,
      const xla::ifrt::proxy::MakeArraysFromHostBufferShardsRequest::
          MakeArraysFromHostBufferShardsSpec& spec);
  Future<Response> CopyToHostBuffer(
      const xla::ifrt::proxy::CopyToHostBufferRequest& request);
  Future<Response> CheckFuture(uint64_t handle);
  Future<Response> CheckValueReady(
      const xla::ifrt::proxy::CheckValueReadyRequest& request);
  absl::StatusOr<Response> DeleteArrays(
      const xla::ifrt::proxy::DeleteArrayRequest& request);
  absl::StatusOr<Response> IsArrayDeleted(uint64_t handle);
  absl::StatusOr<Response> DestructArrays(
      const xla::ifrt::proxy::DestructArrayRequest& request);
  Future<Response> CopyArrays(const xla::ifrt::proxy::CopyArraysRequest& request);
  Future<Response> FullyReplicatedShard(
      const xla::ifrt::proxy::FullyReplicatedShardRequest& request);
  Future<Response> AssembleArray(
      const xla::ifrt::proxy::AssembleArrayFromSingleDeviceArraysRequest& request);
  Future<Response> RemapArrays(const xla::ifrt::proxy::RemapArraysRequest& request);
  Future<Response> ReshardArrays(
      const xla::ifrt::proxy::ReshardArraysRequest& request);
  // The sharding of a remap output that takes its shards from one input
  // (`sources[j]`: output shard j's input and input shard): the input's,
  // with each position renamed to the output position that took it.
  static absl::StatusOr<hlo::Sharding> MovedSharding(
      const std::vector<std::shared_ptr<const ArrayEntry>>& inputs,
      const std::vector<std::pair<int, int64_t>>& sources);
  absl::StatusOr<Response> MakeErrorArrays(
      const xla::ifrt::proxy::MakeErrorArraysRequest& request);
  Future<Response> DisassembleArray(
      const xla::ifrt::proxy::DisassembleIntoSingleDeviceArraysRequest& request);
  absl::StatusOr<Response> DefaultDeviceAssignment(
      const xla::ifrt::proxy::GetDefaultDeviceAssignmentRequest& request);
  absl::StatusOr<Response> DefaultLayout(
      const xla::ifrt::proxy::GetDefaultLayoutRequest& request);
  Future<Response> Compile(const xla::ifrt::proxy::CompileRequest& request);
  absl::StatusOr<std::shared_ptr<const ExecutableEntry>> FindExecutable(uint64_t handle);
  absl::StatusOr<Response> ExecutableMetadata(uint64_t handle);
  absl::StatusOr<Response> ExecutableCostAnalysis(uint64_t handle);
  absl::StatusOr<Response> ExecutableProgramText(uint64_t handle);
  Future<Response> Execute(
      const xla::ifrt::proxy::LoadedExecutableExecuteRequest& request);
  absl::StatusOr<Response> DestructExecutable(uint64_t handle);

  // The entry's data as a piece of an assembly: its array, or its parent's
  // shard for a shard view.
  static std::pair<client::Array, int64_t> PieceOf(const ArrayEntry& entry);
  // The entry's data as an array of its own: a shard view is copied worker
  // to worker out of its parent onto its device's slice.
  absl::StatusOr<client::Array> Materialized(const ArrayEntry& entry);
  // The slice for a list of JAX devices (made on first use).
  absl::StatusOr<client::Slice> SliceFor(const std::vector<int32_t>& devices);
  // The array named `handle`, once made (NotFound for an unknown handle).
  ArrayFuture FindArray(uint64_t handle);
  // Registers `handle` (AlreadyExists when taken; InvalidArgument at or
  // above kServerHandlesStart unless `server_minted`).
  absl::Status AddArray(uint64_t handle, ArrayFuture array,
                        bool server_minted = false);
  uint64_t MintHandle();

  CompileService* const compiler_;
  Executor* const executor_;
  const Options options_;
  const std::vector<ProxyDevice> devices_;
  HostBufferStore host_buffers_;
  client::Session session_;

  absl::Mutex mu_;
  std::map<std::vector<int32_t>, client::Slice> slices_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, ArrayFuture> arrays_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Future<>> futures_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::shared_ptr<const ExecutableEntry>> executables_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = kServerHandlesStart;
};

}  // namespace causeway::proxy

#endif  // CAUSEWAY_PROXY_PROXY_SESSION_H_
