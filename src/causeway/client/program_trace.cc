#include "causeway/client/program_trace.h"

#include <utility>

#include "causeway/base/status.h"
#include "causeway/client/internal.h"

namespace causeway::client {

ProgramTrace::ProgramTrace(Session& session)
    : session_(session.core()),
      id_(session_ != nullptr ? session_->NextTraceId() : 0) {}

ProgramTrace::~ProgramTrace() {
  if (submitted_) return;
  for (const Array& array : outputs_) {
    array.state()->abandoned.store(true);
    array.state()->pending_trace.store(0);
  }
}

absl::Status ProgramTrace::CheckRecording() const {
  if (submitted_) {
    return absl::FailedPreconditionError(
        "this ProgramTrace was submitted already: start a new one");
  }
  if (session_ == nullptr) {
    return absl::FailedPreconditionError(
        "a ProgramTrace of a moved-from Session");
  }
  return session_->CheckOpen();
}

absl::StatusOr<std::vector<Array>> ProgramTrace::Execute(
    const Executable& executable, absl::Span<const Array> args) {
  CW_RETURN_IF_ERROR(CheckRecording());
  if (!executable.valid()) {
    return absl::InvalidArgumentError("Execute of an invalid Executable");
  }
  if (executable.state()->session != session_) {
    return absl::InvalidArgumentError(
        "the executable belongs to another session than the trace");
  }
  CW_ASSIGN_OR_RETURN(std::vector<Array> outputs,
                      internal::AppendExecute(*executable.state(), args, id_,
                                              &graph_.ops, &outputs_));
  inputs_.insert(inputs_.end(), args.begin(), args.end());
  outputs_.insert(outputs_.end(), outputs.begin(), outputs.end());
  return outputs;
}

absl::StatusOr<Array> ProgramTrace::Copy(const Array& array, const Slice& slice,
                                         const Sharding& sharding) {
  CW_RETURN_IF_ERROR(CheckRecording());
  CW_ASSIGN_OR_RETURN(Array copy, internal::AppendCopy(session_, array, slice,
                                                       sharding, id_,
                                                       &graph_.ops));
  inputs_.push_back(array);
  outputs_.push_back(copy);
  return copy;
}

absl::StatusOr<Array> ProgramTrace::Reshard(const Array& array,
                                            const Sharding& sharding) {
  if (!array.valid()) {
    return absl::InvalidArgumentError("Reshard of an invalid (default) Array");
  }
  return Copy(array, array.slice(), sharding);
}

absl::Status ProgramTrace::Submit() {
  CW_RETURN_IF_ERROR(CheckRecording());
  submitted_ = true;
  if (graph_.ops.size() == 1) {
    internal::SendOps(*session_, std::move(graph_.ops));
  } else if (!graph_.ops.empty()) {
    session_->channel().Submit(std::move(graph_));
  }
  graph_ = transport::ProgramGraph();
  // The arrays exist for the head from here on: usable anywhere, and
  // deleted when the client drops them.
  for (const Array& array : outputs_) array.state()->pending_trace.store(0);
  outputs_.clear();  // Arrays the client dropped are deleted now.
  inputs_.clear();
  return absl::OkStatus();
}

}  // namespace causeway::client
