#include "causeway/transport/data_plane.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/logging.h"

namespace causeway::transport {

// ---------------------------------------------------------------------------
// Boxes.

BoxRuns::BoxRuns(absl::Span<const int64_t> array_dims,
                 absl::Span<const int64_t> offsets,
                 absl::Span<const int64_t> dims, int64_t element_bytes) {
  const int64_t rank = static_cast<int64_t>(array_dims.size());
  CW_CHECK(static_cast<int64_t>(offsets.size()) == rank &&
           static_cast<int64_t>(dims.size()) == rank)
      << "box of rank " << dims.size() << " in an array of rank " << rank;
  int64_t elements = 1;
  for (int64_t d = 0; d < rank; ++d) {
    CW_CHECK(offsets[d] >= 0 && dims[d] >= 0 &&
             offsets[d] <= array_dims[d] - dims[d])
        << "box [" << absl::StrJoin(offsets, ",") << "] + ["
        << absl::StrJoin(dims, ",") << "] outside ["
        << absl::StrJoin(array_dims, ",") << "]";
    elements *= dims[d];
  }
  if (elements == 0) return;  // No runs.
  if (rank == 0) {
    count_ = 1;
    run_bytes_ = element_bytes;
    return;
  }
  // Dimensions [outer, rank) are contiguous in the array.
  int64_t outer = rank - 1;
  int64_t run = dims[outer];
  while (outer > 0 && dims[outer] == array_dims[outer]) {
    --outer;
    run *= dims[outer];
  }
  run_bytes_ = run * element_bytes;
  count_ = elements / run;
  int64_t stride = element_bytes;
  std::vector<int64_t> strides(rank);
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= array_dims[d];
  }
  for (int64_t d = 0; d < rank; ++d) first_ += offsets[d] * strides[d];
  outer_dims_.assign(dims.begin(), dims.begin() + outer);
  outer_strides_.assign(strides.begin(), strides.begin() + outer);
}

BoxRuns::Cursor::Cursor(const BoxRuns& runs)
    : runs_(&runs), offset_(runs.first_), index_(runs.outer_dims_.size(), 0) {}

void BoxRuns::Cursor::Next() {
  ++run_;
  for (int64_t d = static_cast<int64_t>(index_.size()) - 1; d >= 0; --d) {
    offset_ += runs_->outer_strides_[d];
    if (++index_[d] < runs_->outer_dims_[d]) return;
    offset_ -= index_[d] * runs_->outer_strides_[d];
    index_[d] = 0;
  }
}

void CopyBox(const std::byte* source, absl::Span<const int64_t> source_dims,
             absl::Span<const int64_t> source_offsets, std::byte* destination,
             absl::Span<const int64_t> destination_dims,
             absl::Span<const int64_t> destination_offsets,
             absl::Span<const int64_t> dims, int64_t element_bytes) {
  const BoxRuns from(source_dims, source_offsets, dims, element_bytes);
  const BoxRuns to(destination_dims, destination_offsets, dims, element_bytes);
  if (from.count() == 0) return;
  // Both runs cover a suffix of the box's dimensions, so the shorter one
  // divides the longer: copy in the shorter runs.
  BoxRuns::Cursor in(from);
  BoxRuns::Cursor out(to);
  if (from.run_bytes() <= to.run_bytes()) {
    const int64_t run = from.run_bytes();
    const int64_t per = to.run_bytes() / run;
    for (; !out.done(); out.Next()) {
      for (int64_t k = 0; k < per; ++k, in.Next()) {
        std::memcpy(destination + out.offset() + k * run,
                    source + in.offset(), static_cast<size_t>(run));
      }
    }
  } else {
    const int64_t run = to.run_bytes();
    const int64_t per = from.run_bytes() / run;
    for (; !in.done(); in.Next()) {
      for (int64_t k = 0; k < per; ++k, out.Next()) {
        std::memcpy(destination + out.offset(), source + in.offset() + k * run,
                    static_cast<size_t>(run));
      }
    }
  }
}

PieceWriter::PieceWriter(std::byte* base, BoxRuns runs,
                         absl::AnyInvocable<void(absl::Status) &&> finish)
    : base_(base), runs_(std::move(runs)), finish_(std::move(finish)) {}

PieceWriter::~PieceWriter() {
  if (finish_ != nullptr) {
    Finish(absl::CancelledError(
        "data plane: a piece was abandoned before its bytes were written"));
  }
}

void PieceWriter::Finish(absl::Status status) {
  CW_CHECK(finish_ != nullptr) << "PieceWriter finished twice";
  absl::AnyInvocable<void(absl::Status) &&> finish = std::move(finish_);
  finish_ = nullptr;
  std::move(finish)(std::move(status));
}

// ---------------------------------------------------------------------------
// InProcessDataPlane.

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

Future<> InProcessDataPlane::Push(HostId destination, PieceMessage piece) {
  PieceReceiver* receiver = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = endpoints_.find(destination);
    if (it == endpoints_.end() || it->second.receiver == nullptr) {
      return MakeErrorFuture(absl::UnavailableError(absl::StrCat(
          "data plane: host ", destination.value(), " is not reachable")));
    }
    receiver = it->second.receiver;
    ++it->second.active_calls;
  }
  receiver->ReceivePiece(std::move(piece));
  absl::MutexLock lock(&mu_);
  --endpoints_[destination].active_calls;
  return MakeReadyFuture();
}

absl::StatusOr<hlo::Shape> PieceShape(const PieceMessage& piece) {
  if (!piece.data.ok()) return piece.data.status();
  const hlo::Shape& shape = piece.data->shape();
  if (!shape.IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a piece must be an array, not ", shape.ToString(false)));
  }
  if (piece.source_offsets.empty()) return shape;
  const int64_t rank = shape.rank();
  if (static_cast<int64_t>(piece.source_offsets.size()) != rank ||
      static_cast<int64_t>(piece.dims.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "piece of rank ", piece.dims.size(), " (offsets rank ",
        piece.source_offsets.size(), ") does not match ", shape.ToString()));
  }
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t offset = piece.source_offsets[d];
    const int64_t dim = piece.dims[d];
    if (offset < 0 || dim < 0 || offset > shape.dim(d) - dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "piece at [", absl::StrJoin(piece.source_offsets, ","),
          "] of size [", absl::StrJoin(piece.dims, ","), "] does not fit in ",
          shape.ToString()));
    }
  }
  return hlo::Shape(shape.type(), piece.dims);
}

absl::StatusOr<hlo::Literal> TakePieceValue(PieceMessage piece) {
  if (!piece.data.ok() || piece.source_offsets.empty()) {
    return std::move(piece.data);
  }
  return ExtractPiece(*piece.data, piece.source_offsets, piece.dims);
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
  bool whole = true;
  for (int64_t d = 0; d < rank; ++d) {
    if (offsets[d] < 0 || dims[d] < 0 || offsets[d] > shape.dim(d) - dims[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "piece at [", absl::StrJoin(offsets, ","), "] of size [",
          absl::StrJoin(dims, ","), "] does not fit in ", shape.ToString()));
    }
    whole = whole && offsets[d] == 0 && dims[d] == shape.dim(d);
  }
  hlo::Shape piece_shape(shape.type(),
                         std::vector<int64_t>(dims.begin(), dims.end()));
  if (whole) return source.WithShape(piece_shape);  // Shares storage.
  hlo::Literal piece = hlo::Literal::Uninitialized(piece_shape);
  const std::vector<int64_t> zeros(rank, 0);
  CopyBox(static_cast<const std::byte*>(source.untyped_data()), shape.dims(),
          offsets, static_cast<std::byte*>(piece.mutable_untyped_data()), dims,
          zeros, dims, hlo::ByteWidth(shape.type()));
  return piece;
}

}  // namespace causeway::transport
