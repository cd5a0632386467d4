#include "causeway/transport/data_plane.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/logging.h"

namespace causeway::transport {

void InProcessDataPlane::Register(HostId host, PieceReceiver* receiver) {
  CW_CHECK(receiver != nullptr);
  absl::MutexLock lock(&mu_);
  Endpoint& endpoint = endpoints_[host];
  CW_CHECK(endpoint.receiver == nullptr) << "host " << host
                                         << " registered twice";
  endpoint.receiver = receiver;
}

void InProcessDataPlane::Unregister(HostId host) {
  absl::MutexLock lock(&mu_);
  auto it = endpoints_.find(host);
  if (it == endpoints_.end()) return;
  it->second.receiver = nullptr;
  // Wait for calls already inside the receiver to return.
  auto idle = [this, host]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return endpoints_[host].active_calls == 0;
  };
  mu_.Await(absl::Condition(&idle));
  endpoints_.erase(host);
}

absl::Status InProcessDataPlane::Push(HostId destination, PieceMessage piece) {
  PieceReceiver* receiver = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = endpoints_.find(destination);
    if (it == endpoints_.end() || it->second.receiver == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          "data plane: host ", destination.value(), " is not reachable"));
    }
    receiver = it->second.receiver;
    ++it->second.active_calls;
  }
  receiver->ReceivePiece(std::move(piece));
  absl::MutexLock lock(&mu_);
  --endpoints_[destination].active_calls;
  return absl::OkStatus();
}

absl::StatusOr<hlo::Literal> ExtractPiece(const hlo::Literal& source,
                                          absl::Span<const int64_t> offsets,
                                          absl::Span<const int64_t> dims) {
  const hlo::Shape& shape = source.shape();
  if (!shape.IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot take a piece of non-array ", shape.ToString()));
  }
  const int64_t rank = shape.rank();
  if (static_cast<int64_t>(offsets.size()) != rank ||
      static_cast<int64_t>(dims.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "piece of rank ", dims.size(), " (offsets rank ", offsets.size(),
        ") does not match ", shape.ToString()));
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (offsets[d] < 0 || dims[d] < 0 || offsets[d] + dims[d] > shape.dim(d)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "piece at [", absl::StrJoin(offsets, ","), "] of size [",
          absl::StrJoin(dims, ","), "] does not fit in ", shape.ToString()));
    }
  }
  hlo::Shape piece_shape(shape.type(),
                         std::vector<int64_t>(dims.begin(), dims.end()));
  bool whole = true;
  for (int64_t d = 0; d < rank; ++d) {
    whole = whole && offsets[d] == 0 && dims[d] == shape.dim(d);
  }
  if (whole) return source.WithShape(piece_shape);  // Shares storage.
  hlo::Literal piece(piece_shape);
  if (piece_shape.ElementCount() == 0) return piece;
  const int64_t width = hlo::ByteWidth(shape.type());
  const std::vector<int64_t> source_strides =
      hlo::RowMajorStrides(shape.dims());
  // Copy innermost rows: the last dimension is contiguous in both.
  const int64_t row = rank == 0 ? 1 : dims[rank - 1];
  const int64_t rows = rank == 0 ? 1 : piece_shape.ElementCount() / row;
  const auto* src = static_cast<const char*>(source.untyped_data());
  auto* dst = static_cast<char*>(piece.mutable_untyped_data());
  std::vector<int64_t> index(rank > 0 ? rank - 1 : 0, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t element = 0;
    for (int64_t d = 0; d + 1 < rank; ++d) {
      element += (offsets[d] + index[d]) * source_strides[d];
    }
    if (rank > 0) element += offsets[rank - 1];
    std::memcpy(dst + r * row * width, src + element * width, row * width);
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
  return piece;
}

}  // namespace causeway::transport
