#include "causeway/client/slice.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/client/internal.h"

namespace causeway::client {

Slice::Slice(std::shared_ptr<internal::SliceState> state)
    : state_(std::move(state)) {}

// An invalid slice answers with empty values instead of crashing.
namespace {
absl::Status Invalid(const char* call) {
  return absl::InvalidArgumentError(
      absl::StrCat(call, " of an invalid (default) Slice"));
}
}  // namespace

SliceHandle Slice::handle() const {
  return state_ != nullptr ? state_->handle : SliceHandle();
}

int64_t Slice::num_devices() const {
  return state_ != nullptr ? state_->mesh.num_devices() : 0;
}

const Mesh& Slice::mesh() const {
  static const Mesh* const kNone = new Mesh(Mesh::Linear(0));
  return state_ != nullptr ? state_->mesh : *kNone;
}

std::optional<IslandId> Slice::requested_island() const {
  return state_ != nullptr ? state_->island : std::nullopt;
}

Future<transport::SliceInfo> Slice::Ready() const {
  if (state_ == nullptr) {
    return MakeErrorFuture<transport::SliceInfo>(Invalid("Ready"));
  }
  return state_->granted;
}

Future<transport::SliceInfo> Slice::Info() const {
  if (state_ == nullptr) {
    return MakeErrorFuture<transport::SliceInfo>(Invalid("Info"));
  }
  if (absl::Status open = state_->session->CheckOpen(); !open.ok()) {
    return MakeErrorFuture<transport::SliceInfo>(open);
  }
  std::shared_ptr<internal::SliceState> state = state_;
  return state_->granted.AndThen(
      InlineExecutor::Instance(),
      [state](const transport::SliceInfo&) {
        return state->session->channel().GetSlice(state->handle);
      });
}

Future<> Slice::Release() const {
  if (state_ == nullptr || state_->session->closed() ||
      state_->released.exchange(true)) {
    return MakeReadyFuture();
  }
  return state_->session->channel().ReleaseSlice(state_->handle);
}

std::string Slice::ToString() const {
  if (state_ == nullptr) return "slice (invalid)";
  return absl::StrCat("slice ", state_->handle.value(), " (", num_devices(),
                      " devices, ", state_->mesh.ToString(), ")");
}

}  // namespace causeway::client
