#include "causeway/worker/object_store.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::worker {

using transport::ObjectStoreStats;
namespace object_store_test {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

BufferId Id(uint64_t array, int64_t shard = 0) {
  return BufferId{ArrayHandle(array), shard};
}

// A literal of `shape` whose element at multi-index `index` is `fn(index)`.
Literal Make(const Shape& shape,
             const std::function<double(const std::vector<int64_t>&)>& fn) {
  Literal literal(shape);
  std::vector<int64_t> index(shape.rank(), 0);
  hlo::VisitType(shape.type(), [&](auto tag) {
    using E = decltype(tag);
    std::span<E> data = literal.mutable_data<E>();
    for (size_t i = 0; i < data.size(); ++i) {
      const double value = fn(index);
      if constexpr (std::is_same_v<E, hlo::BF16> ||
                    std::is_same_v<E, hlo::F16>) {
        data[i] = E(static_cast<float>(value));
      } else {
        data[i] = static_cast<E>(value);
      }
      for (int64_t d = shape.rank() - 1; d >= 0; --d) {
        if (++index[d] < shape.dim(d)) break;
        index[d] = 0;
      }
    }
  });
  return literal;
}

// f32 values 0, 1, 2, ... of `dims`.
Literal Iota(std::vector<int64_t> dims, double start = 0) {
  Shape shape(PrimitiveType::kF32, std::move(dims));
  double next = start;
  return Make(shape, [&](const std::vector<int64_t>&) { return next++; });
}

// The part of `fn`'s values at `offsets` with `piece_dims`.
Literal PieceOf(PrimitiveType type, std::vector<int64_t> piece_dims,
                std::vector<int64_t> offsets,
                const std::function<double(const std::vector<int64_t>&)>& fn) {
  return Make(Shape(type, std::move(piece_dims)),
              [&](const std::vector<int64_t>& index) {
                std::vector<int64_t> global = index;
                for (size_t d = 0; d < global.size(); ++d) {
                  global[d] += offsets[d];
                }
                return fn(global);
              });
}

class ObjectStoreTest : public ::testing::Test {
 protected:
  static constexpr int64_t kBudget = 1024;
  ObjectStore store_{DeviceId(3), kBudget};
};

TEST_F(ObjectStoreTest, ReservedBufferIsReadyWithItsDataOnceFulfilled) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {2, 3})).Await().ok());
  EXPECT_FALSE(store_.Get(Id(1)).IsReady());
  ASSERT_TRUE(store_.Fulfill(Id(1), Iota({2, 3})).ok());

  absl::StatusOr<Literal> value = store_.Get(Id(1)).AwaitFor(kWait);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, Iota({2, 3}));
  EXPECT_EQ(store_.Stats().used_bytes, 24);
  EXPECT_EQ(store_.Stats().num_ready, 1);
}

TEST_F(ObjectStoreTest,
       GetBeforeFulfillWaitsAndResolvesWhenAnotherThreadFulfills) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {4})).Await().ok());
  Future<Literal> pending = store_.Get(Id(1));
  EXPECT_FALSE(pending.IsReady());

  std::thread producer(
      [&] { EXPECT_TRUE(store_.Fulfill(Id(1), Iota({4})).ok()); });
  absl::StatusOr<Literal> value = pending.AwaitFor(kWait);
  producer.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, Iota({4}));
}

TEST_F(ObjectStoreTest, FailedBufferGivesItsErrorToWaitingAndLaterReaders) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {4})).Await().ok());
  Future<Literal> waiting = store_.Get(Id(1));
  ASSERT_TRUE(
      store_.Fail(Id(1), absl::InternalError("program p op add.3 failed"))
          .ok());

  EXPECT_EQ(waiting.AwaitFor(kWait).status().message(),
            "program p op add.3 failed");
  EXPECT_EQ(store_.Get(Id(1)).Await().status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(store_.Stats().used_bytes, 0);  // Errors hold no memory.
  EXPECT_EQ(store_.Stats().num_error, 1);
}

TEST_F(ObjectStoreTest, ReservationWaitsUntilAReleaseFreesEnoughMemory) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({200})).Await().ok());  // 800 bytes.
  Future<> second = store_.Reserve(Id(2), Shape(PrimitiveType::kF32, {100}));
  EXPECT_FALSE(second.IsReady());
  EXPECT_EQ(store_.Stats().num_waiting, 1);
  EXPECT_EQ(store_.Stats().waiting_bytes, 400);

  ASSERT_TRUE(store_.Release(Id(1)).ok());
  EXPECT_TRUE(second.AwaitFor(kWait).ok());
  EXPECT_EQ(store_.Stats().used_bytes, 400);
  EXPECT_EQ(store_.Stats().num_waiting, 0);
}

TEST_F(ObjectStoreTest,
       WaitingReservationsAreGrantedInFifoOrderSmallOnesDoNotOvertake) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({200})).Await().ok());  // 800 of 1024.
  absl::Mutex mu;
  std::vector<int> granted;
  auto record = [&](int n) {
    return [&, n](const absl::Status& status) {
      EXPECT_TRUE(status.ok()) << status;
      absl::MutexLock lock(&mu);
      granted.push_back(n);
    };
  };
  store_.Reserve(Id(2), Shape(PrimitiveType::kF32, {100}))
      .OnReady(InlineExecutor::Instance(), record(2));  // 400: must wait.
  store_.Reserve(Id(3), Shape(PrimitiveType::kF32, {10}))
      .OnReady(InlineExecutor::Instance(), record(3));  // 40: fits, waits.
  store_.Reserve(Id(4), Shape(PrimitiveType::kF32, {10}))
      .OnReady(InlineExecutor::Instance(), record(4));
  EXPECT_TRUE(granted.empty());

  ASSERT_TRUE(store_.Release(Id(1)).ok());
  EXPECT_EQ(granted, (std::vector<int>{2, 3, 4}));
}

TEST_F(ObjectStoreTest, ReservationThatCanNeverFitFailsAtOnceNamingTheSizes) {
  Future<> reservation =
      store_.Reserve(Id(7, 2), Shape(PrimitiveType::kF32, {512}));
  ASSERT_TRUE(reservation.IsReady());
  EXPECT_EQ(reservation.Await().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(reservation.Await().message(),
            "buffer array 7 shard 2 needs 2048 bytes but device 3 has a "
            "budget of 1024 bytes");
  // The error lives in the buffer, for its readers.
  EXPECT_EQ(store_.Get(Id(7, 2)).Await().status(), reservation.Await());
  EXPECT_EQ(store_.Stats().used_bytes, 0);
}

TEST_F(ObjectStoreTest, ReleasingTheLastReferenceFreesTheMemory) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({64})).Await().ok());
  ASSERT_TRUE(store_.AddRef(Id(1)).ok());
  ASSERT_TRUE(store_.Release(Id(1)).ok());
  EXPECT_EQ(store_.Stats().used_bytes, 256);  // One reference is left.

  ASSERT_TRUE(store_.Release(Id(1)).ok());
  EXPECT_EQ(store_.Stats().used_bytes, 0);
  EXPECT_EQ(store_.Get(Id(1)).Await().status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ObjectStoreTest, ReaderKeepsItsValueAfterTheBufferIsReleased) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({8})).Await().ok());
  Future<Literal> read = store_.Get(Id(1));
  ASSERT_TRUE(store_.Release(Id(1)).ok());
  EXPECT_EQ(store_.Stats().used_bytes, 0);  // Accounting frees at Release.
  EXPECT_EQ(*read.Await(), Iota({8}));
}

TEST_F(ObjectStoreTest, ReleasingABufferBeforeItsDataCameCancelsItsReaders) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {8})).Await().ok());
  Future<Literal> read = store_.Get(Id(1));
  ASSERT_TRUE(store_.Release(Id(1)).ok());
  EXPECT_EQ(read.AwaitFor(kWait).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(store_.Stats().used_bytes, 0);
  EXPECT_EQ(store_.Fulfill(Id(1), Iota({8})).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ObjectStoreTest, ReleasingAWaitingReservationCancelsItAndLetsTheNextIn) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({200})).Await().ok());
  Future<> big = store_.Reserve(Id(2), Shape(PrimitiveType::kF32, {200}));
  Future<> small = store_.Reserve(Id(3), Shape(PrimitiveType::kF32, {10}));
  EXPECT_FALSE(small.IsReady());

  ASSERT_TRUE(store_.Release(Id(2)).ok());
  EXPECT_EQ(big.Await().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(small.AwaitFor(kWait).ok());
  EXPECT_EQ(store_.Stats().used_bytes, 840);
}

TEST_F(ObjectStoreTest, FailCancelsAWaitingReservationWithTheGivenError) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({200})).Await().ok());
  Future<> waiting = store_.Reserve(Id(2), Shape(PrimitiveType::kF32, {200}));
  ASSERT_TRUE(
      store_.Fail(Id(2), absl::DeadlineExceededError("op timed out")).ok());
  EXPECT_EQ(waiting.Await().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store_.Get(Id(2)).Await().status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store_.Stats().num_waiting, 0);
}

TEST_F(ObjectStoreTest, PutWaitsForMemoryAndIsReadyOnceGranted) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({200})).Await().ok());
  Future<> put = store_.Put(Id(2), Iota({100}, 5));
  EXPECT_FALSE(put.IsReady());
  EXPECT_FALSE(store_.Get(Id(2)).IsReady());

  ASSERT_TRUE(store_.Release(Id(1)).ok());
  ASSERT_TRUE(put.AwaitFor(kWait).ok());
  EXPECT_TRUE(store_.Get(Id(2)).IsReady());
  EXPECT_EQ(*store_.Get(Id(2)).Await(), Iota({100}, 5));
}

TEST_F(ObjectStoreTest, DataForAWaitingBufferIsHeldUntilItsMemoryIsGranted) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({200})).Await().ok());
  Future<> reservation =
      store_.Reserve(Id(2), Shape(PrimitiveType::kF32, {100}));
  ASSERT_TRUE(store_.Fulfill(Id(2), Iota({100})).ok());
  EXPECT_FALSE(store_.Get(Id(2)).IsReady());
  EXPECT_EQ(store_.Stats().used_bytes, 800);  // Not counted before grant.

  ASSERT_TRUE(store_.Release(Id(1)).ok());
  EXPECT_EQ(*store_.Get(Id(2)).AwaitFor(kWait), Iota({100}));
  EXPECT_TRUE(reservation.Await().ok());
}

TEST_F(ObjectStoreTest,
       FulfillWithAnotherShapeFailsTheBufferWithInvalidArgument) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {2, 3})).Await().ok());
  absl::Status status = store_.Fulfill(Id(1), Iota({3, 2}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "buffer array 1 shard 0 was reserved as f32[2,3] but was given "
            "f32[3,2]");
  EXPECT_EQ(store_.Get(Id(1)).Await().status(), status);
}

TEST_F(ObjectStoreTest, FulfillingTwiceIsRefusedAndKeepsTheFirstValue) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({4})).Await().ok());
  EXPECT_EQ(store_.Fulfill(Id(1), Iota({4}, 9)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*store_.Get(Id(1)).Await(), Iota({4}));
}

TEST_F(ObjectStoreTest, UnknownBufferIsNotFoundAndNamed) {
  absl::Status status = store_.Get(Id(42, 1)).Await().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "buffer array 42 shard 1 is not in the object store of device 3");
  EXPECT_EQ(store_.Fulfill(Id(42), Iota({1})).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_.Release(Id(42)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_.AddRef(Id(42)).code(), absl::StatusCode::kNotFound);
}

TEST_F(ObjectStoreTest, ReservingAnExistingBufferIsAlreadyExists) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({4})).Await().ok());
  EXPECT_EQ(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {4})).Await().code(),
      absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*store_.Get(Id(1)).Await(), Iota({4}));
}

TEST_F(ObjectStoreTest, FailAllTurnsEveryBufferIntoDataLossAndFreesAllMemory) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({200})).Await().ok());
  ASSERT_TRUE(
      store_.Reserve(Id(2), Shape(PrimitiveType::kF32, {10})).Await().ok());
  Future<Literal> reader = store_.Get(Id(2));
  Future<> waiting = store_.Reserve(Id(3), Shape(PrimitiveType::kF32, {200}));

  store_.FailAll(absl::DataLossError("host 1 was lost"));
  for (uint64_t array : {1, 2, 3}) {
    EXPECT_EQ(store_.Get(Id(array)).Await().status().code(),
              absl::StatusCode::kDataLoss);
  }
  EXPECT_EQ(reader.Await().status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(waiting.Await().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store_.Stats().used_bytes, 0);
  EXPECT_EQ(store_.Stats().num_error, 3);
  EXPECT_EQ(store_.Put(Id(4), Iota({1})).Await().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(ObjectStoreTest, PiecesAssembleA2DBufferInRowMajorOrder) {
  auto value = [](const std::vector<int64_t>& i) { return i[0] * 100 + i[1]; };
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {4, 6})).Await().ok());
  ASSERT_TRUE(store_.ExpectPieces(Id(1), 4).ok());
  for (int64_t row : {0, 2}) {
    for (int64_t col : {0, 3}) {
      EXPECT_FALSE(store_.Get(Id(1)).IsReady());
      ASSERT_TRUE(store_
                      .WritePiece(Id(1), {row, col},
                                  PieceOf(PrimitiveType::kF32, {2, 3},
                                          {row, col}, value))
                      .ok());
    }
  }
  EXPECT_EQ(*store_.Get(Id(1)).AwaitFor(kWait),
            Make(Shape(PrimitiveType::kF32, {4, 6}), value));
}

TEST_F(ObjectStoreTest, PiecesAssembleA3DBf16Buffer) {
  auto value = [](const std::vector<int64_t>& i) {
    return i[0] * 16 + i[1] * 4 + i[2];
  };
  const PrimitiveType bf16 = PrimitiveType::kBF16;
  ASSERT_TRUE(store_.Reserve(Id(1), Shape(bf16, {2, 3, 4})).Await().ok());
  ASSERT_TRUE(store_.ExpectPieces(Id(1), 3).ok());
  // Uneven pieces along the middle and last dimensions.
  ASSERT_TRUE(store_
                  .WritePiece(Id(1), {0, 0, 0},
                              PieceOf(bf16, {2, 1, 4}, {0, 0, 0}, value))
                  .ok());
  ASSERT_TRUE(store_
                  .WritePiece(Id(1), {0, 1, 0},
                              PieceOf(bf16, {2, 2, 1}, {0, 1, 0}, value))
                  .ok());
  ASSERT_TRUE(store_
                  .WritePiece(Id(1), {0, 1, 1},
                              PieceOf(bf16, {2, 2, 3}, {0, 1, 1}, value))
                  .ok());
  EXPECT_EQ(*store_.Get(Id(1)).AwaitFor(kWait),
            Make(Shape(bf16, {2, 3, 4}), value));
}

TEST_F(ObjectStoreTest, PiecesAssembleAPredBuffer) {
  auto value = [](const std::vector<int64_t>& i) {
    return (i[0] + 2 * i[1]) % 3 == 0 ? 1.0 : 0.0;
  };
  const PrimitiveType pred = PrimitiveType::kPred;
  ASSERT_TRUE(store_.Reserve(Id(1), Shape(pred, {5, 3})).Await().ok());
  ASSERT_TRUE(store_.ExpectPieces(Id(1), 2).ok());
  ASSERT_TRUE(
      store_.WritePiece(Id(1), {3, 0}, PieceOf(pred, {2, 3}, {3, 0}, value))
          .ok());
  ASSERT_TRUE(
      store_.WritePiece(Id(1), {0, 0}, PieceOf(pred, {3, 3}, {0, 0}, value))
          .ok());
  EXPECT_EQ(*store_.Get(Id(1)).AwaitFor(kWait),
            Make(Shape(pred, {5, 3}), value));
}

TEST_F(ObjectStoreTest, PiecesForAWaitingBufferAreCopiedInWhenItIsGranted) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({200})).Await().ok());
  Future<> reservation =
      store_.Reserve(Id(2), Shape(PrimitiveType::kF32, {64}));  // 256 bytes.
  ASSERT_TRUE(store_.ExpectPieces(Id(2), 2).ok());
  ASSERT_TRUE(store_.WritePiece(Id(2), {32}, Iota({32}, 32)).ok());
  ASSERT_TRUE(store_.WritePiece(Id(2), {0}, Iota({32}, 0)).ok());
  EXPECT_FALSE(reservation.IsReady());
  EXPECT_FALSE(store_.Get(Id(2)).IsReady());

  ASSERT_TRUE(store_.Release(Id(1)).ok());
  EXPECT_EQ(*store_.Get(Id(2)).AwaitFor(kWait), Iota({64}));
  EXPECT_TRUE(reservation.Await().ok());
}

TEST_F(ObjectStoreTest, AnErrorInPlaceOfAPieceFailsTheBuffer) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {8})).Await().ok());
  ASSERT_TRUE(store_.ExpectPieces(Id(1), 2).ok());
  ASSERT_TRUE(store_.WritePiece(Id(1), {0}, Iota({4})).ok());
  ASSERT_TRUE(store_.Fail(Id(1), absl::DataLossError("source host lost")).ok());

  EXPECT_EQ(store_.Get(Id(1)).Await().status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(store_.WritePiece(Id(1), {4}, Iota({4})).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.Stats().used_bytes, 0);
}

TEST_F(ObjectStoreTest, PieceOutsideTheBufferFailsItNamingTheShapes) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {2, 4})).Await().ok());
  ASSERT_TRUE(store_.ExpectPieces(Id(1), 2).ok());
  absl::Status status = store_.WritePiece(Id(1), {0, 3}, Iota({2, 2}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("piece f32[2,2] at offsets [0,3] does not fit in "
                        "f32[2,4] (dimension 1: 3 + 2 > 4)"));
  EXPECT_EQ(store_.Get(Id(1)).Await().status(), status);
}

TEST_F(ObjectStoreTest, PiecesThatOverlapFailTheBuffer) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {4})).Await().ok());
  ASSERT_TRUE(store_.ExpectPieces(Id(1), 2).ok());
  ASSERT_TRUE(store_.WritePiece(Id(1), {0}, Iota({3})).ok());
  EXPECT_EQ(store_.WritePiece(Id(1), {1}, Iota({3})).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.Get(Id(1)).Await().status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, PiecesThatLeaveAGapFailTheBufferWhenTheLastArrives) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {4})).Await().ok());
  ASSERT_TRUE(store_.ExpectPieces(Id(1), 2).ok());
  ASSERT_TRUE(store_.WritePiece(Id(1), {0}, Iota({1})).ok());
  ASSERT_TRUE(store_.WritePiece(Id(1), {2}, Iota({2})).ok());
  EXPECT_EQ(store_.Get(Id(1)).Await().status().message(),
            "the 2 pieces of buffer array 1 shard 0 cover 3 of its 4 elements");
}

TEST_F(ObjectStoreTest, PieceBeforeExpectPiecesIsRefused) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {4})).Await().ok());
  EXPECT_EQ(store_.WritePiece(Id(1), {0}, Iota({4})).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.Get(Id(1)).Await().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Writes `value`'s bytes into the memory BeginWrite returned, as a
// network data plane would.
void WriteBytes(std::byte* at, const Literal& value) {
  std::memcpy(at, value.untyped_data(), static_cast<size_t>(value.size_bytes()));
}

TEST_F(ObjectStoreTest, AWholeValueWrittenInPlaceBecomesTheValue) {
  ASSERT_TRUE(store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {2, 3}))
                  .Await()
                  .ok());
  absl::StatusOr<std::byte*> at =
      store_.BeginWrite(Id(1), {0, 0}, Shape(PrimitiveType::kF32, {2, 3}));
  ASSERT_TRUE(at.ok()) << at.status();
  WriteBytes(*at, Iota({2, 3}));
  EXPECT_FALSE(store_.Get(Id(1)).IsReady());
  store_.EndWrite(Id(1), absl::OkStatus());
  EXPECT_EQ(*store_.Get(Id(1)).AwaitFor(kWait), Iota({2, 3}));
  // The value is the written memory itself, not a copy of it.
  EXPECT_EQ(store_.Get(Id(1)).Await()->untyped_data(), *at);
}

TEST_F(ObjectStoreTest, AWholeValueWrittenWhileWaitingIsReadyOnGrant) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({200})).Await().ok());
  Future<> reservation = store_.Reserve(Id(2), Shape(PrimitiveType::kF32, {64}));
  absl::StatusOr<std::byte*> at =
      store_.BeginWrite(Id(2), {0}, Shape(PrimitiveType::kF32, {64}));
  ASSERT_TRUE(at.ok()) << at.status();
  WriteBytes(*at, Iota({64}));
  store_.EndWrite(Id(2), absl::OkStatus());
  EXPECT_FALSE(reservation.IsReady());
  ASSERT_TRUE(store_.Release(Id(1)).ok());
  EXPECT_EQ(*store_.Get(Id(2)).AwaitFor(kWait), Iota({64}));
}

TEST_F(ObjectStoreTest, APieceWrittenInPlaceCountsLikeWritePiece) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {8})).Await().ok());
  ASSERT_TRUE(store_.ExpectPieces(Id(1), 2).ok());
  absl::StatusOr<std::byte*> at =
      store_.BeginWrite(Id(1), {4}, Shape(PrimitiveType::kF32, {4}));
  ASSERT_TRUE(at.ok()) << at.status();
  ASSERT_TRUE(store_.WritePiece(Id(1), {0}, Iota({4})).ok());
  EXPECT_FALSE(store_.Get(Id(1)).IsReady());  // One piece is still coming.
  WriteBytes(*at + 16, Iota({4}, 4));
  store_.EndWrite(Id(1), absl::OkStatus());
  EXPECT_EQ(*store_.Get(Id(1)).AwaitFor(kWait), Iota({8}));
}

TEST_F(ObjectStoreTest, PiecesAreWrittenInPlaceOnlyOnceTheirMemoryIsGranted) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({200})).Await().ok());
  store_.Reserve(Id(2), Shape(PrimitiveType::kF32, {64}));
  ASSERT_TRUE(store_.ExpectPieces(Id(2), 2).ok());
  EXPECT_EQ(store_.BeginWrite(Id(2), {0}, Shape(PrimitiveType::kF32, {32}))
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  // Nothing was counted: the pieces still arrive the ordinary way.
  ASSERT_TRUE(store_.WritePiece(Id(2), {0}, Iota({32})).ok());
  ASSERT_TRUE(store_.WritePiece(Id(2), {32}, Iota({32}, 32)).ok());
  ASSERT_TRUE(store_.Release(Id(1)).ok());
  EXPECT_EQ(*store_.Get(Id(2)).AwaitFor(kWait), Iota({64}));
}

TEST_F(ObjectStoreTest, AMismatchedValueWrittenInPlaceIsRefusedAndFailsTheBuffer) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {8})).Await().ok());
  absl::Status refused =
      store_.BeginWrite(Id(1), {0}, Shape(PrimitiveType::kF32, {4})).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(),
              HasSubstr("was reserved as f32[8] but was given f32[4]"));
  EXPECT_EQ(store_.Get(Id(1)).Await().status(), refused);
  EXPECT_EQ(store_.Stats().used_bytes, 0);
}

TEST_F(ObjectStoreTest, MemoryBeingWrittenOutlivesAFailedAndReleasedBuffer) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {64})).Await().ok());
  absl::StatusOr<std::byte*> at =
      store_.BeginWrite(Id(1), {0}, Shape(PrimitiveType::kF32, {64}));
  ASSERT_TRUE(at.ok()) << at.status();
  ASSERT_TRUE(store_.Fail(Id(1), absl::DataLossError("peer lost")).ok());
  ASSERT_TRUE(store_.Release(Id(1)).ok());  // The owner lets go.
  EXPECT_EQ(store_.Stats().used_bytes, 0);  // Its budget is back at once.
  WriteBytes(*at, Iota({64}));              // Still valid memory.
  EXPECT_EQ(store_.Get(Id(1)).Await().status().code(),
            absl::StatusCode::kDataLoss);  // The writer's reference.
  store_.EndWrite(Id(1), absl::OkStatus());
  EXPECT_EQ(store_.Get(Id(1)).Await().status().code(),
            absl::StatusCode::kNotFound);  // Gone with the last reference.
}

TEST_F(ObjectStoreTest, AWriteThatEndsInErrorFailsTheBuffer) {
  ASSERT_TRUE(
      store_.Reserve(Id(1), Shape(PrimitiveType::kF32, {8})).Await().ok());
  ASSERT_TRUE(store_.ExpectPieces(Id(1), 2).ok());
  ASSERT_TRUE(
      store_.BeginWrite(Id(1), {0}, Shape(PrimitiveType::kF32, {4})).ok());
  store_.EndWrite(Id(1), absl::DataLossError("connection broke after 8 bytes"));
  EXPECT_EQ(store_.Get(Id(1)).Await().status().message(),
            "connection broke after 8 bytes");
  EXPECT_EQ(store_.Stats().used_bytes, 0);
}

TEST_F(ObjectStoreTest, DebugStringShowsTheAccountingAndEachBuffer) {
  ASSERT_TRUE(store_.Put(Id(1), Iota({2, 2})).Await().ok());
  ASSERT_TRUE(
      store_.Reserve(Id(2, 1), Shape(PrimitiveType::kS32, {3})).Await().ok());
  ASSERT_TRUE(store_.Fail(Id(2, 1), absl::InternalError("boom")).ok());
  EXPECT_EQ(store_.DebugString(),
            "device 3: budget 1024 B, used 16 B (0 B awaiting data), 0 waiting "
            "for 0 B\n"
            "  array 1 shard 0: ready f32[2,2] 16 B, refs 1\n"
            "  array 2 shard 1: error s32[3] 12 B, refs 1, INTERNAL: boom\n");
}

TEST(CopyPieceIntoTest, CopiesAScalar) {
  Literal dest(Shape(PrimitiveType::kS64, {}));
  ASSERT_TRUE(
      CopyPieceInto(Literal::Scalar(PrimitiveType::kS64, 7), {}, &dest).ok());
  EXPECT_EQ(dest.data<int64_t>()[0], 7);
}

TEST(CopyPieceIntoTest, CopiesAnInnerBlockOfA3DArrayAndLeavesTheRest) {
  auto value = [](const std::vector<int64_t>& i) {
    return 1 + i[0] * 100 + i[1] * 10 + i[2];
  };
  const Shape shape(PrimitiveType::kS16, {3, 4, 5});
  Literal dest(shape);
  ASSERT_TRUE(
      CopyPieceInto(PieceOf(PrimitiveType::kS16, {2, 2, 3}, {1, 1, 2}, value),
                    {1, 1, 2}, &dest)
          .ok());
  EXPECT_EQ(dest, Make(shape, [&](const std::vector<int64_t>& i) {
              bool inside = i[0] >= 1 && i[1] >= 1 && i[1] < 3 && i[2] >= 2;
              return inside ? value(i) : 0.0;
            }));
}

TEST(CopyPieceIntoTest, DoesNotWriteToALiteralThatSharesTheDestinationStorage) {
  Literal dest = Iota({4});
  const Literal original = dest;
  ASSERT_TRUE(CopyPieceInto(Iota({2}, 10), {1}, &dest).ok());
  EXPECT_EQ(original, Iota({4}));
  EXPECT_EQ(dest.GetAsDouble(1), 10);
  EXPECT_EQ(dest.GetAsDouble(2), 11);
}

TEST(CopyPieceIntoTest, RefusesAnotherElementTypeOrRank) {
  Literal dest(Shape(PrimitiveType::kF32, {4}));
  EXPECT_EQ(CopyPieceInto(Literal(Shape(PrimitiveType::kS32, {2})), {0}, &dest)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CopyPieceInto(Iota({2, 2}), {0, 0}, &dest).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CopyPieceInto(Iota({2}), {-1}, &dest).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dest, Literal(Shape(PrimitiveType::kF32, {4})));
}

// Many threads reserve, fill (whole, in pieces, or by Put), read, share and
// release buffers of random sizes under a budget that holds only a few at a
// time; some fail theirs. Everything completes and the accounting returns to
// zero.
TEST(ObjectStoreStressTest,
     ConcurrentUseUnderASmallBudgetCompletesAndFreesAll) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 300;
  ObjectStore store(DeviceId(0), 2048);
  std::atomic<int> completed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kIterations; ++i) {
        const BufferId id = Id(static_cast<uint64_t>(t * kIterations + i));
        const int64_t n =
            2 * std::uniform_int_distribution<int64_t>(1, 256)(rng);
        const Literal value = Iota({n}, i);
        const int mode = static_cast<int>(rng() % 4);
        if (mode == 0) {
          ASSERT_TRUE(store.Put(id, value).AwaitFor(kWait).ok());
        } else {
          ASSERT_TRUE(store.Reserve(id, value.shape()).AwaitFor(kWait).ok());
          if (mode == 1) {
            ASSERT_TRUE(store.Fulfill(id, value).ok());
          } else if (mode == 2) {
            ASSERT_TRUE(store.ExpectPieces(id, 2).ok());
            ASSERT_TRUE(
                store.WritePiece(id, {n / 2}, Iota({n / 2}, i + n / 2)).ok());
            ASSERT_TRUE(store.WritePiece(id, {0}, Iota({n / 2}, i)).ok());
          } else {
            ASSERT_TRUE(store.Fail(id, absl::AbortedError("op failed")).ok());
          }
        }
        ASSERT_TRUE(store.AddRef(id).ok());
        absl::StatusOr<Literal> read = store.Get(id).AwaitFor(kWait);
        if (mode == 3) {
          EXPECT_EQ(read.status().code(), absl::StatusCode::kAborted);
        } else {
          ASSERT_TRUE(read.ok()) << read.status();
          EXPECT_EQ(*read, value);
        }
        ASSERT_TRUE(store.Release(id).ok());
        ASSERT_TRUE(store.Release(id).ok());
        ++completed;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(completed.load(), kThreads * kIterations);
  const ObjectStoreStats stats = store.Stats();
  EXPECT_EQ(stats.used_bytes, 0);
  EXPECT_EQ(stats.num_waiting + stats.num_reserved + stats.num_ready +
                stats.num_error,
            0);
}

}  // namespace object_store_test
}  // namespace causeway::worker
