// An Executable: an HLO program compiled for a slice, with the input and
// output shardings its module declares (parameters' and root's
// `sharding={...}`; none means replicated).
//
// Execute returns its output arrays at once and never blocks: the client
// mints the output handles itself and sends the execution without waiting
// for a reply. An argument that lives on another slice, or with another
// sharding than the program expects, is copied (resharded) first, inside
// the same submission.
//
// A copyable handle. Thread-safe.
#ifndef CAUSEWAY_CLIENT_EXECUTABLE_H_
#define CAUSEWAY_CLIENT_EXECUTABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "causeway/base/ids.h"
#include "causeway/client/array.h"
#include "causeway/client/sharding.h"
#include "causeway/client/slice.h"
#include "causeway/hlo/shape.h"
#include "causeway/transport/session_channel.h"

namespace causeway::client {

namespace internal {
struct ExecutableState;
}  // namespace internal

class Executable {
 public:
  // Invalid: its accessors give empty values and Execute fails with
  // InvalidArgument.
  Executable() = default;
  explicit Executable(std::shared_ptr<const internal::ExecutableState> state);

  bool valid() const { return state_ != nullptr; }
  ExecutableHandle handle() const;
  // The module's name.
  const std::string& name() const;
  const Slice& slice() const;
  const transport::CompileInfo& compile_info() const;

  // Global shapes and shardings of the parameters and of the outputs (a
  // tuple root is flattened into its elements).
  const std::vector<hlo::Shape>& parameter_shapes() const;
  const std::vector<Sharding>& parameter_shardings() const;
  const std::vector<hlo::Shape>& output_shapes() const;
  const std::vector<Sharding>& output_shardings() const;

  // Runs the program on `args` (one per parameter, of its global shape and
  // dtype; InvalidArgument otherwise) and returns its outputs at once.
  // Errors of the run itself surface in the outputs.
  absl::StatusOr<std::vector<Array>> Execute(absl::Span<const Array> args) const;

  const std::shared_ptr<const internal::ExecutableState>& state() const {
    return state_;
  }

 private:
  std::shared_ptr<const internal::ExecutableState> state_;
};

}  // namespace causeway::client

#endif  // CAUSEWAY_CLIENT_EXECUTABLE_H_
