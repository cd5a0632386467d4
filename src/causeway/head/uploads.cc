#include "causeway/head/uploads.h"

#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "causeway/hlo/sharding_util.h"

namespace causeway::head {
namespace {

using transport::ControlChannel;
using transport::PutBufferRequest;

absl::Status WithContext(const absl::Status& status,
                         const std::string& context) {
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

class GlobalValue final : public UploadSource {
 public:
  explicit GlobalValue(hlo::Literal value) : value_(std::move(value)) {}
  const char* what() const override { return "PutArray"; }
  absl::Status Check(const transport::ArraySpec& spec, const hlo::Shape&,
                     int64_t n) const override {
    if (!value_.shape().IsArray() ||
        !value_.shape().Compatible(spec.global_shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PutArray: the value is ", value_.shape().ToString(false),
          " but the array spec says ", spec.global_shape.ToString(false)));
    }
    // What splitting could refuse, without the copies.
    absl::StatusOr<std::vector<hlo::ShardRegion>> regions =
        hlo::ShardRegions(spec.sharding, spec.global_shape, n);
    if (!regions.ok()) return WithContext(regions.status(), "PutArray");
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<hlo::Literal>> TakeShards(
      const hlo::Sharding& sharding, int64_t n) override {
    absl::StatusOr<std::vector<hlo::Literal>> shards =
        hlo::SplitGlobal(value_, sharding, n);
    value_ = hlo::Literal();  // The shards hold what is still needed.
    if (!shards.ok()) return WithContext(shards.status(), "PutArray");
    return shards;
  }

 private:
  hlo::Literal value_;
};

class GivenShards final : public UploadSource {
 public:
  explicit GivenShards(std::vector<hlo::Literal> shards)
      : shards_(std::move(shards)) {}
  const char* what() const override { return "PutShards"; }
  absl::Status Check(const transport::ArraySpec&, const hlo::Shape& shard_shape,
                     int64_t n) const override {
    if (static_cast<int64_t>(shards_.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("PutShards: ", shards_.size(), " shards for a slice of ",
                       n, " devices"));
    }
    for (size_t i = 0; i < shards_.size(); ++i) {
      const hlo::Shape& shape = shards_[i].shape();
      if (!shape.IsArray() || !shape.Compatible(shard_shape)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "PutShards: shard ", i, " is ", shape.ToString(false),
            " but the array's shards are ", shard_shape.ToString(false)));
      }
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<hlo::Literal>> TakeShards(const hlo::Sharding&,
                                                       int64_t) override {
    return std::move(shards_);
  }

 private:
  std::vector<hlo::Literal> shards_;
};

// An upload's shards, made by the first PutBuffer to leave and taken one
// by one by each.
class PendingShards {
 public:
  PendingShards(std::shared_ptr<UploadSource> source, hlo::Sharding sharding,
                int64_t n)
      : source_(std::move(source)), sharding_(std::move(sharding)), n_(n) {}

  absl::StatusOr<hlo::Literal> Take(int64_t i) {
    absl::MutexLock lock(&mu_);
    if (!shards_.has_value()) {
      shards_ = source_->TakeShards(sharding_, n_);
      source_.reset();
    }
    if (!shards_->ok()) return shards_->status();
    return std::move((**shards_)[i]);
  }

 private:
  absl::Mutex mu_;  // Only this upload's PutBuffers wait on it.
  std::shared_ptr<UploadSource> source_ ABSL_GUARDED_BY(mu_);
  const hlo::Sharding sharding_;
  const int64_t n_;
  std::optional<absl::StatusOr<std::vector<hlo::Literal>>> shards_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::shared_ptr<UploadSource> UploadSource::Global(hlo::Literal value) {
  return std::make_shared<GlobalValue>(std::move(value));
}

std::shared_ptr<UploadSource> UploadSource::Shards(
    std::vector<hlo::Literal> shards) {
  return std::make_shared<GivenShards>(std::move(shards));
}

absl::Status ValidateArrayShape(const hlo::Shape& shape,
                                const std::string& what) {
  constexpr size_t kMaxRank = 64;
  constexpr int64_t kMaxBytes = int64_t{1} << 50;
  if (!shape.IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", shape.ToString(false), " is not an array"));
  }
  if (shape.dims().size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has rank ", shape.dims().size(), "; at most ", kMaxRank));
  }
  int64_t bytes = hlo::ByteWidth(shape.type());
  for (int64_t dim : shape.dims()) {
    if (dim < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " has a negative dimension: ", shape.ToString(false)));
    }
    if (dim > 0 && bytes > kMaxBytes / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", shape.ToString(false), " is larger than ",
                       kMaxBytes, " bytes"));
    }
    bytes *= dim;
  }
  return absl::OkStatus();
}

Uploads::Uploads(Membership* membership, Dispatcher* dispatcher,
                 ArrayTable* arrays, Outbox* outbox, Executor* callbacks)
    : membership_(membership),
      dispatcher_(dispatcher),
      arrays_(arrays),
      outbox_(outbox),
      callbacks_(callbacks) {}

void Uploads::Place(const Session& session, const transport::ArraySpec& spec,
                    std::shared_ptr<UploadSource> source,
                    std::shared_ptr<Promise<>> done) {
  auto resolve = [this, done](absl::Status status) {
    outbox_->Post([done, status = std::move(status)] { done->Set(status); });
  };
  if (absl::Status fresh = arrays_->CheckNewHandles(session.id(), {spec});
      !fresh.ok()) {
    return resolve(fresh);
  }
  auto fail = [&](absl::Status status) {
    arrays_->AddErrors(session.id(), {spec}, status);
    resolve(std::move(status));
  };
  const std::string what = source->what();
  if (absl::Status shape = ValidateArrayShape(spec.global_shape, what);
      !shape.ok()) {
    return fail(shape);
  }
  const SliceRecord* slice = session.FindSlice(spec.slice);
  if (slice == nullptr) {
    return fail(absl::NotFoundError(
        absl::StrCat(what, ": unknown slice handle ", spec.slice.value())));
  }
  if (slice->state != SliceRecord::State::kGranted) {
    return fail(absl::UnavailableError(absl::StrCat(
        what, ": slice ", spec.slice.value(), " has no devices now")));
  }
  const std::shared_ptr<const transport::Topology> topology =
      membership_->topology();
  const int64_t n = static_cast<int64_t>(slice->devices.size());
  absl::StatusOr<hlo::Shape> shard_shape =
      hlo::ShardShape(spec.sharding, spec.global_shape, n);
  if (!shard_shape.ok()) return fail(WithContext(shard_shape.status(), what));
  for (DeviceId device : slice->devices) {
    const int64_t budget = topology->device(device).memory_bytes;
    if (shard_shape->ByteSize() > budget) {
      return fail(absl::ResourceExhaustedError(absl::StrCat(
          what, ": a shard of array ", spec.handle.value(), " needs ",
          shard_shape->ByteSize(), " bytes but device ", device.value(),
          " has a memory budget of ", budget, " bytes")));
    }
  }
  if (absl::Status fits = source->Check(spec, *shard_shape, n); !fits.ok()) {
    return fail(fits);
  }

  auto array = std::make_shared<ArrayRecord>();
  array->session = session.id();
  array->handle = spec.handle;
  array->internal = arrays_->NewInternalHandle();
  array->slice = spec.slice;
  array->placement =
      ArrayPlacement{spec.global_shape, spec.sharding, slice->devices};
  static const auto* const kUploaded = new std::shared_ptr<const std::string>(
      std::make_shared<const std::string>("uploaded by the client"));
  array->producer = *kUploaded;
  array->buffers =
      NewArrayBuffers(array->internal, array->placement, *topology);
  arrays_->Add(array);
  auto shards =
      std::make_shared<PendingShards>(std::move(source), spec.sharding, n);
  std::vector<Future<>> puts;
  for (int64_t i = 0; i < n; ++i) {
    const auto& [host, buffer] = array->buffers->buffers[i];
    auto [put, put_future] = MakePromise<>();
    puts.push_back(std::move(put_future));
    // Runs in the outbox, with no lock held: the split happens here.
    dispatcher_->Call(
        host, [membership = membership_, host = host, buffer = buffer, shards,
               i, put = std::move(put)](ControlChannel* worker) mutable {
          if (worker == nullptr) {
            put.Set(membership->CallError(
                host, absl::UnavailableError(absl::StrCat(
                          "host ", host.value(), " cannot be reached"))));
            return;
          }
          absl::StatusOr<hlo::Literal> shard = shards->Take(i);
          if (!shard.ok()) {
            put.Set(shard.status());
            return;
          }
          worker
              ->PutBuffer(PutBufferRequest{buffer.device, buffer.buffer,
                                           *std::move(shard)})
              .OnReady(InlineExecutor::Instance(),
                       [membership, host, put = std::move(put)](
                           const absl::Status& status) mutable {
                         put.Set(membership->CallError(host, status));
                       });
        });
  }
  // Whatever reads the buffers is sent after the PutBuffers.
  dispatcher_->MarkPlaced(*array->buffers);
  JoinFutures(std::move(puts))
      .OnReady(*callbacks_,
               [done](const absl::Status& status) { done->Set(status); });
}

}  // namespace causeway::head
