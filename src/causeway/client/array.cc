#include "causeway/client/array.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/client/internal.h"

namespace causeway::client {

Array::Array(std::shared_ptr<internal::ArrayState> state)
    : state_(std::move(state)) {}

namespace {

absl::Status Invalid(const char* call) {
  return absl::InvalidArgumentError(
      absl::StrCat(call, " of an invalid (default) Array"));
}

}  // namespace

// An invalid array answers with empty values instead of crashing.
ArrayHandle Array::handle() const {
  return state_ != nullptr ? state_->handle : ArrayHandle();
}
const hlo::Shape& Array::shape() const {
  static const hlo::Shape* const kNone = new hlo::Shape();
  return state_ != nullptr ? state_->shape : *kNone;
}
const Sharding& Array::sharding() const {
  static const Sharding* const kNone = new Sharding(Sharding::Replicated());
  return state_ != nullptr ? state_->sharding : *kNone;
}
const Slice& Array::slice() const {
  static const Slice* const kNone = new Slice();
  return state_ != nullptr ? state_->slice : *kNone;
}

Future<> Array::Ready() const {
  if (state_ == nullptr) return MakeErrorFuture(Invalid("Ready"));
  if (absl::Status usable = state_->CheckUsable(0); !usable.ok()) {
    return MakeErrorFuture(usable);
  }
  Future<> ready = state_->session->channel().ArrayReady(state_->handle);
  if (!state_->uploaded.has_value()) return ready;
  // A refused upload is the array's error, whatever the head says of it.
  return JoinFutures({*state_->uploaded, ready});
}

Future<hlo::Literal> Array::ToHost() const {
  if (state_ == nullptr) {
    return MakeErrorFuture<hlo::Literal>(Invalid("ToHost"));
  }
  if (absl::Status usable = state_->CheckUsable(0); !usable.ok()) {
    return MakeErrorFuture<hlo::Literal>(usable);
  }
  if (state_->uploaded.has_value()) {
    if (state_->uploaded->IsReady() && !state_->uploaded->Await().ok()) {
      return MakeErrorFuture<hlo::Literal>(state_->uploaded->Await());
    }
  }
  return state_->session->channel().Fetch(state_->handle);
}

Future<std::vector<hlo::Literal>> Array::ShardsToHost() const {
  using Shards = std::vector<hlo::Literal>;
  if (state_ == nullptr)
    return MakeErrorFuture<Shards>(Invalid("ShardsToHost"));
  if (absl::Status usable = state_->CheckUsable(0); !usable.ok()) {
    return MakeErrorFuture<Shards>(usable);
  }
  if (state_->uploaded.has_value()) {
    if (state_->uploaded->IsReady() && !state_->uploaded->Await().ok()) {
      return MakeErrorFuture<Shards>(state_->uploaded->Await());
    }
  }
  return state_->session->channel().FetchShards(state_->handle);
}

void Array::Delete() const {
  if (state_ == nullptr || state_->deleted.exchange(true)) return;
  if (state_->abandoned.load() || state_->pending_trace.load() != 0) return;
  state_->session->DropArray(state_->handle);
}

bool Array::IsDeleted() const {
  return state_ != nullptr && state_->deleted.load();
}

std::string Array::ToString() const {
  if (state_ == nullptr) return "array (invalid)";
  return absl::StrCat("array ", state_->handle.value(), " ",
                      state_->shape.ToString(false),
                      state_->sharding.ToString(), " on slice ",
                      state_->slice.handle().value());
}

}  // namespace causeway::client
