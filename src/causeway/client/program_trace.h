// Program tracing: several executions and copies recorded by the client and
// submitted as ONE dataflow graph (transport::ProgramGraph). The runtime
// dispatches all of its ops at once, enqueuing every op on its devices
// before the first one runs ("parallel asynchronous dispatch").
//
//   ProgramTrace trace(session);
//   std::vector<Array> y = *trace.Execute(a, {x});
//   Array z = *trace.Copy(y[0], other_slice, Sharding::Replicated());
//   std::vector<Array> w = *trace.Execute(b, {z});
//   CW_RETURN_IF_ERROR(trace.Submit());
//   // y, z and w are ordinary arrays now.
//
// Arrays a trace returns may be passed to later ops of the same trace at
// once. Outside the trace they are usable after Submit(); before that,
// using them fails with FailedPrecondition. A trace destroyed without
// Submit() sends nothing, and its arrays fail with FailedPrecondition.
//
// Not thread-safe: record a trace from one thread.
#ifndef CAUSEWAY_CLIENT_PROGRAM_TRACE_H_
#define CAUSEWAY_CLIENT_PROGRAM_TRACE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "causeway/client/array.h"
#include "causeway/client/executable.h"
#include "causeway/client/session.h"
#include "causeway/client/sharding.h"
#include "causeway/client/slice.h"
#include "causeway/transport/session_channel.h"

namespace causeway::client {

class ProgramTrace {
 public:
  // `session` must outlive the trace's Submit.
  explicit ProgramTrace(Session& session);
  ~ProgramTrace();  // Abandons an unsubmitted trace.

  ProgramTrace(const ProgramTrace&) = delete;
  ProgramTrace& operator=(const ProgramTrace&) = delete;

  // Records an execution (and the copies its arguments need); see
  // Executable::Execute.
  absl::StatusOr<std::vector<Array>> Execute(const Executable& executable,
                                             absl::Span<const Array> args);
  // Records a copy; see Session::Copy.
  absl::StatusOr<Array> Copy(const Array& array, const Slice& slice,
                             const Sharding& sharding);
  absl::StatusOr<Array> Reshard(const Array& array, const Sharding& sharding);

  // Sends the graph. FailedPrecondition if already submitted, or if the
  // session has closed. An empty trace submits nothing.
  absl::Status Submit();

  bool submitted() const { return submitted_; }
  // Ops recorded so far (executions and copies).
  size_t num_ops() const { return graph_.ops.size(); }
  const transport::ProgramGraph& graph() const { return graph_; }

 private:
  absl::Status CheckRecording() const;

  std::shared_ptr<internal::SessionCore> session_;
  const uint64_t id_;
  transport::ProgramGraph graph_;
  // Every array the trace made, kept alive until Submit so that none is
  // deleted before the head knows it.
  std::vector<Array> outputs_;
  // Arrays from outside the trace that its ops read, kept alive until
  // Submit so that the client does not delete them before the ops are sent.
  std::vector<Array> inputs_;
  bool submitted_ = false;
};

}  // namespace causeway::client

#endif  // CAUSEWAY_CLIENT_PROGRAM_TRACE_H_
