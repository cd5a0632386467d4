#include "causeway/client/slice.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/client/internal.h"

namespace causeway::client {

Slice::Slice(std::shared_ptr<internal::SliceState> state)
    : state_(std::move(state)) {}

SliceHandle Slice::handle() const { return state_->handle; }

int64_t Slice::num_devices() const { return state_->mesh.num_devices(); }

const Mesh& Slice::mesh() const { return state_->mesh; }

std::optional<IslandId> Slice::requested_island() const {
  return state_->island;
}

Future<transport::SliceInfo> Slice::Ready() const { return state_->granted; }

Future<transport::SliceInfo> Slice::Info() const {
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
  if (state_->session->closed() || state_->released.exchange(true)) {
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
