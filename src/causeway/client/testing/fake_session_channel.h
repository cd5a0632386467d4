// A fake head for client tests: a SessionChannel that runs everything
// itself, in one process, without the runtime. Programs really run: each
// partition in turn, on one evaluator (exec/evaluator.h), so programs with
// collectives across partitions are refused at Compile (the runtime runs
// those). Arrays are kept as global values, so a copy or reshard just names
// the same value again, and per-device buffers (PutShards) collapse to the
// global value they assemble to. Ops run one at a time, in the order they
// were sent, on one thread.
//
// It records every call so that tests can check what the client sent (one
// Submit per trace, no round trip per Execute, deletes).
//
// For tests only. Thread-safe.
#ifndef CAUSEWAY_CLIENT_TESTING_FAKE_SESSION_CHANNEL_H_
#define CAUSEWAY_CLIENT_TESTING_FAKE_SESSION_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/executor.h"
#include "causeway/base/future.h"
#include "causeway/exec/evaluator.h"
#include "causeway/hlo/ir.h"
#include "causeway/transport/session_channel.h"

namespace causeway::client {

class FakeSessionChannel final : public transport::SessionChannel {
 public:
  struct Options {
    // Slice requests wait until GrantHeldSlices() instead of being granted
    // at once (to test compile-before-provisioning).
    bool hold_slices = false;
    // Requests for more devices fail with ResourceExhausted.
    int64_t max_slice_devices = 8;
    // Programs (by module name) whose every run fails, as a failing op
    // would: "program 'NAME': injected failure at op 'ROOT'".
    std::vector<std::string> failing_programs;
  };

  FakeSessionChannel() : FakeSessionChannel(Options()) {}
  explicit FakeSessionChannel(Options options);
  ~FakeSessionChannel() override;  // Waits for queued ops.

  // Grants every slice requested so far that is still waiting.
  void GrantHeldSlices();

  // Every call received, in order: "OpenSession", "RequestSlice",
  // "Compile", "PutArray", "Execute", "Copy", "Submit(3)" (ops in the
  // graph), "ArrayReady", "Fetch", "Delete(2)", "ReleaseSlice",
  // "CloseSession", ...
  std::vector<std::string> calls() const;
  // The graphs received through Submit.
  std::vector<transport::ProgramGraph> graphs() const;
  // Arrays the head holds (created and not deleted).
  int64_t num_live_arrays() const;
  // Waits until every op sent so far has run.
  void Drain();

  Future<SessionId> OpenSession(transport::OpenSessionRequest request) override;
  Future<> CloseSession() override;
  Future<transport::SliceInfo> RequestSlice(
      transport::SliceRequest request) override;
  Future<transport::SliceInfo> GetSlice(SliceHandle slice) override;
  Future<> ReleaseSlice(SliceHandle slice) override;
  Future<transport::CompileInfo> Compile(
      transport::CompileRequest request) override;
  Future<> PutArray(transport::ArraySpec spec, hlo::Literal global) override;
  Future<> PutShards(transport::ArraySpec spec,
                     std::vector<hlo::Literal> shards) override;
  void Execute(transport::ExecuteOp op) override;
  void Copy(transport::CopyOp op) override;
  void Submit(transport::ProgramGraph graph) override;
  Future<> ArrayReady(ArrayHandle array) override;
  Future<hlo::Literal> Fetch(ArrayHandle array) override;
  Future<std::vector<hlo::Literal>> FetchShards(ArrayHandle array) override;
  void Delete(std::vector<ArrayHandle> arrays) override;
  Future<transport::StatusReport> GetStatus() override;
  Future<std::string> GetTrace() override;

 private:
  struct SliceEntry {
    transport::SliceInfo info;
    int64_t num_devices = 0;
    Promise<transport::SliceInfo> grant;  // Until granted.
    Future<transport::SliceInfo> granted;
  };
  struct ExecutableEntry {
    transport::CompileInfo info;
    std::string name;
    SliceHandle slice;
    bool fails = false;
    int64_t num_partitions = 1;  // The slice's devices.
    std::unique_ptr<hlo::Module> module;
    std::unique_ptr<exec::Evaluator> evaluator;  // Runs `module`.
  };

  void Log(std::string call) ABSL_LOCKS_EXCLUDED(mu_);
  // Registers the op's outputs and queues it. Caller holds mu_.
  void EnqueueExecuteLocked(transport::ExecuteOp op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnqueueCopyLocked(transport::CopyOp op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Future<hlo::Literal> LookupLocked(ArrayHandle handle) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordLayoutLocked(const transport::ArraySpec& spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<transport::ProgramGraph> graphs_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<SliceHandle, std::shared_ptr<SliceEntry>> slices_
      ABSL_GUARDED_BY(mu_);
  std::unordered_map<ExecutableHandle, std::shared_ptr<ExecutableEntry>>
      executables_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<ArrayHandle, Future<hlo::Literal>> arrays_
      ABSL_GUARDED_BY(mu_);
  // Each array's sharding and its slice's device count, for FetchShards.
  std::unordered_map<ArrayHandle, std::pair<hlo::Sharding, int64_t>>
      array_layouts_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_device_ ABSL_GUARDED_BY(mu_) = 0;
  // Runs ops in order; declared last so it drains before the rest dies.
  std::unique_ptr<ThreadPool> worker_;
};

}  // namespace causeway::client

#endif  // CAUSEWAY_CLIENT_TESTING_FAKE_SESSION_CHANNEL_H_
