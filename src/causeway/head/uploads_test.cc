#include "causeway/head/uploads.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/head/testing/fake_hosts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace uploads_test {

using ::testing::HasSubstr;
using transport::ArraySpec;

hlo::Shape F32(std::vector<int64_t> dims) {
  return hlo::Shape(hlo::PrimitiveType::kF32, std::move(dims));
}

// Halves along dimension 0 over devices 0 and 1.
hlo::Sharding Halves() {
  hlo::Sharding sharding;
  sharding.kind = hlo::Sharding::Kind::kTiled;
  sharding.tile_dims = {2};
  sharding.tile_devices = {0, 1};
  return sharding;
}

// Counts the splits of the source it wraps.
class CountingSource final : public UploadSource {
 public:
  explicit CountingSource(std::shared_ptr<UploadSource> source)
      : source_(std::move(source)) {}
  const char* what() const override { return source_->what(); }
  absl::Status Check(const ArraySpec& spec, const hlo::Shape& shard_shape,
                     int64_t n) const override {
    return source_->Check(spec, shard_shape, n);
  }
  absl::StatusOr<std::vector<hlo::Literal>> TakeShards(
      const hlo::Sharding& sharding, int64_t n) override {
    ++takes;
    return source_->TakeShards(sharding, n);
  }
  std::atomic<int> takes{0};

 private:
  std::shared_ptr<UploadSource> source_;
};

// Two alive hosts of one device each behind fake channels, and a session
// whose slice 1 is granted on both devices.
class UploadsTest : public testing::FakeHostsTest {
 protected:
  void SetUp() override {
    AddHosts(2, 1);
    transport::SliceRequest request;
    request.handle = SliceHandle(1);
    absl::StatusOr<SliceRecord*> slice = session_.AddSlice(request);
    ASSERT_TRUE(slice.ok());
    session_.SliceOnDevices(**slice, IslandId(0), {DeviceId(0), DeviceId(1)},
                            {2}, 1);
  }
  // Places array 5, tiled over the slice's two devices, from `source`.
  Future<> Place(std::shared_ptr<UploadSource> source,
                 hlo::Shape shape = F32({4})) {
    auto [promise, future] = MakePromise<>();
    ArraySpec spec{ArrayHandle(next_handle_++), std::move(shape), Halves(),
                   SliceHandle(1)};
    uploads_.Place(session_, spec, std::move(source),
                   std::make_shared<Promise<>>(std::move(promise)));
    return future;
  }
  // What `placed` resolves to once the outbox has run.
  absl::Status Placed(Future<> placed) {
    outbox_.Drain();
    return placed.Await();
  }
  int PutBuffers() const {
    int n = 0;
    for (const auto& host : hosts_) {
      for (const std::string& call : host->calls()) {
        n += call.starts_with("PutBuffer");
      }
    }
    return n;
  }

  ArrayTable arrays_;
  Uploads uploads_{&membership_, &dispatcher_, &arrays_, &outbox_,
                   &InlineExecutor::Instance()};
  Session session_{SessionId(1), "s", 1.0, 0, false, {}};
  uint64_t next_handle_ = 5;  // The first array placed is 5.
};

TEST_F(UploadsTest, TheValueIsSplitWhenThePutBuffersLeaveNotWhilePlacing) {
  auto source = std::make_shared<CountingSource>(
      UploadSource::Global(hlo::Literal(F32({4}))));
  Future<> done = Place(source);
  // Placing (under the session table's lock) recorded the array and
  // split nothing.
  EXPECT_EQ(source->takes, 0);
  EXPECT_EQ(PutBuffers(), 0);
  EXPECT_TRUE(
      arrays_.Find(SessionId(1), ArrayHandle(5), [] { return std::string(); })
          .ok());
  outbox_.Drain();
  EXPECT_EQ(source->takes, 1);
  EXPECT_EQ(PutBuffers(), 2);
  EXPECT_TRUE(done.Await().ok());
}

TEST_F(UploadsTest, AValueThatDoesNotFitIsAnErrorArrayAndNothingIsSent) {
  Future<> done = Place(UploadSource::Global(hlo::Literal(F32({3}))), F32({4}));
  outbox_.Drain();
  absl::Status status = done.Await();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("PutArray: the value is f32[3]"));
  // Reading the array gives the same error.
  absl::Status read =
      arrays_.Find(SessionId(1), ArrayHandle(5), [] { return std::string(); })
          .status();
  EXPECT_EQ(read.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.message(), HasSubstr("PutArray: the value is f32[3]"));
  EXPECT_EQ(PutBuffers(), 0);
}

TEST_F(UploadsTest, ShardsMustBeOnePerDeviceOfTheShardShape) {
  std::vector<hlo::Literal> three(3, hlo::Literal(F32({2})));
  EXPECT_THAT(Placed(Place(UploadSource::Shards(std::move(three)))).message(),
              HasSubstr("PutShards: 3 shards for a slice of 2 devices"));
  std::vector<hlo::Literal> wrong;
  wrong.emplace_back(F32({2}));
  wrong.emplace_back(F32({3}));
  EXPECT_THAT(Placed(Place(UploadSource::Shards(std::move(wrong)))).message(),
              HasSubstr("shard 1 is f32[3] but the array's shards are f32[2]"));
  EXPECT_EQ(PutBuffers(), 0);
}

TEST_F(UploadsTest, AShardLargerThanADevicesMemoryIsRefused) {
  absl::Status status = Placed(
      Place(UploadSource::Global(hlo::Literal(F32({1024}))), F32({1024})));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("has a memory budget of 1024"));
}

TEST(ValidateArrayShapeTest, ArraysOfANegativeDimensionOrTooLargeAreRefused) {
  EXPECT_TRUE(ValidateArrayShape(F32({2, 3}), "x").ok());
  EXPECT_THAT(ValidateArrayShape(F32({2, -1}), "x").message(),
              HasSubstr("x has a negative dimension"));
  EXPECT_THAT(ValidateArrayShape(F32({int64_t{1} << 30, int64_t{1} << 30}), "x")
                  .message(),
              HasSubstr("is larger than"));
  EXPECT_THAT(ValidateArrayShape(hlo::Shape::Tuple({}), "x").message(),
              HasSubstr("is not an array"));
}

}  // namespace uploads_test
}  // namespace causeway::head
