#include "causeway/client/executable.h"

#include <utility>

#include "causeway/base/status.h"
#include "causeway/client/internal.h"

namespace causeway::client {

Executable::Executable(std::shared_ptr<const internal::ExecutableState> state)
    : state_(std::move(state)) {}

ExecutableHandle Executable::handle() const { return state_->info.handle; }
const std::string& Executable::name() const { return state_->name; }
const Slice& Executable::slice() const { return state_->slice; }
const transport::CompileInfo& Executable::compile_info() const {
  return state_->info;
}
const std::vector<hlo::Shape>& Executable::parameter_shapes() const {
  return state_->parameter_shapes;
}
const std::vector<Sharding>& Executable::parameter_shardings() const {
  return state_->parameter_shardings;
}
const std::vector<hlo::Shape>& Executable::output_shapes() const {
  return state_->output_shapes;
}
const std::vector<Sharding>& Executable::output_shardings() const {
  return state_->output_shardings;
}

absl::StatusOr<std::vector<Array>> Executable::Execute(
    absl::Span<const Array> args) const {
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
