#include "causeway/client/executable.h"

#include <utility>

#include "causeway/base/status.h"
#include "causeway/client/internal.h"

namespace causeway::client {

Executable::Executable(std::shared_ptr<const internal::ExecutableState> state)
    : state_(std::move(state)) {}

// An invalid executable answers with empty values instead of crashing.
namespace {
const internal::ExecutableState& NoExecutable() {
  static const internal::ExecutableState* const kNone =
      new internal::ExecutableState();
  return *kNone;
}
}  // namespace

ExecutableHandle Executable::handle() const {
  return state_ != nullptr ? state_->info.handle : ExecutableHandle();
}
const std::string& Executable::name() const {
  return (state_ != nullptr ? *state_ : NoExecutable()).name;
}
const Slice& Executable::slice() const {
  return (state_ != nullptr ? *state_ : NoExecutable()).slice;
}
const transport::CompileInfo& Executable::compile_info() const {
  return (state_ != nullptr ? *state_ : NoExecutable()).info;
}
const std::vector<hlo::Shape>& Executable::parameter_shapes() const {
  return (state_ != nullptr ? *state_ : NoExecutable()).parameter_shapes;
}
const std::vector<Sharding>& Executable::parameter_shardings() const {
  return (state_ != nullptr ? *state_ : NoExecutable()).parameter_shardings;
}
const std::vector<hlo::Shape>& Executable::output_shapes() const {
  return (state_ != nullptr ? *state_ : NoExecutable()).output_shapes;
}
const std::vector<Sharding>& Executable::output_shardings() const {
  return (state_ != nullptr ? *state_ : NoExecutable()).output_shardings;
}

absl::StatusOr<std::vector<Array>> Executable::Execute(
    absl::Span<const Array> args) const {
  if (state_ == nullptr) {
    return absl::InvalidArgumentError(
        "Execute of an invalid (default) Executable");
  }
  std::vector<internal::GraphOp> ops;
  std::vector<Array> temporaries;
  CW_ASSIGN_OR_RETURN(
      std::vector<Array> outputs,
      internal::AppendExecute(*state_, args, /*trace_id=*/0, &ops,
                              &temporaries));
  internal::SendOps(*state_->session, std::move(ops));
  return outputs;  // `temporaries` are deleted after the ops were sent.
}

}  // namespace causeway::client
