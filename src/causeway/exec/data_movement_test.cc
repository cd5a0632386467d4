#include <cstdint>
#include <numeric>
#include <vector>

#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace data_movement_test {

using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// An array of `dims` whose element at row-major position i is i (converted
// to the element type).
Literal Iota(PrimitiveType type, std::vector<int64_t> dims, int64_t first = 0) {
  Literal literal(Shape(type, std::move(dims)));
  hlo::VisitType(type, [&](auto tag) {
    using T = decltype(tag);
    auto out = literal.mutable_data<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = ConvertElement<T>(static_cast<int64_t>(i) + first);
    }
  });
  return literal;
}

std::vector<double> Doubles(const Literal& literal) {
  std::vector<double> out;
  for (int64_t i = 0; i < literal.shape().ElementCount(); ++i) {
    out.push_back(literal.GetAsDouble(i));
  }
  return out;
}

Instruction Instr(Opcode opcode, Shape shape) {
  Instruction instr;
  instr.name = "test";
  instr.opcode = opcode;
  instr.shape = std::move(shape);
  return instr;
}

Literal Ok(absl::StatusOr<Literal> result) {
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : Literal();
}

// Reference transpose, element by element.
std::vector<double> NaiveTranspose(const Literal& in,
                                   const std::vector<int64_t>& perm) {
  const std::vector<int64_t>& dims = in.shape().dims();
  std::vector<int64_t> out_dims(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out_dims[i] = dims[perm[i]];
  const std::vector<int64_t> in_strides = RowMajorStrides(dims);
  std::vector<double> out;
  ForEachIndex(out_dims, [&](std::span<const int64_t> index) {
    int64_t offset = 0;
    for (size_t i = 0; i < perm.size(); ++i) offset += index[i] * in_strides[perm[i]];
    out.push_back(in.GetAsDouble(offset));
  });
  return out;
}

TEST(DataMovementTest, CopyBetweenLayoutsKeepsLogicalValues) {
  Shape shape(PrimitiveType::kF32, {2, 3});
  shape.set_minor_to_major({0, 1});
  Literal in = Iota(PrimitiveType::kF32, {2, 3});
  Literal out = Ok(EvalCopy(Instr(Opcode::kCopy, shape), in));
  EXPECT_EQ(out.shape(), shape);
  EXPECT_THAT(Doubles(out), ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(DataMovementTest, BitcastWithDefaultLayoutsSharesStorage) {
  Literal in = Iota(PrimitiveType::kS32, {2, 3});
  Literal out = Ok(EvalBitcast(Instr(Opcode::kBitcast, Shape(PrimitiveType::kS32, {3, 2})), in));
  EXPECT_EQ(out.untyped_data(), in.untyped_data());
  EXPECT_THAT(Doubles(out), ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(DataMovementTest, BitcastReinterpretsPhysicalLayout) {
  // f32[2,3]{0,1} is stored column-major: physical order 0,3,1,4,2,5. Read
  // as f32[3,2]{1,0}, that is the transpose.
  Literal in = Iota(PrimitiveType::kF32, {2, 3});
  Shape in_shape(PrimitiveType::kF32, {2, 3});
  in_shape.set_minor_to_major({0, 1});
  in = in.WithShape(in_shape);
  Shape out_shape(PrimitiveType::kF32, {3, 2});
  out_shape.set_minor_to_major({1, 0});
  Literal out = Ok(EvalBitcast(Instr(Opcode::kBitcast, out_shape), in));
  EXPECT_THAT(Doubles(out), ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(DataMovementTest, BitcastBetweenMatchingNonDefaultLayoutsIsAReshapeOfPhysicalOrder) {
  // f32[2,3]{0,1} → f32[6]{0}: the flat result is the physical order.
  Literal in = Iota(PrimitiveType::kF32, {2, 3});
  Shape in_shape(PrimitiveType::kF32, {2, 3});
  in_shape.set_minor_to_major({0, 1});
  Literal out = Ok(EvalBitcast(Instr(Opcode::kBitcast, Shape(PrimitiveType::kF32, {6})),
                               in.WithShape(in_shape)));
  EXPECT_THAT(Doubles(out), ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(DataMovementTest, BitcastIgnoresWhereUnitDimsSitInTheLayout) {
  Literal in = Iota(PrimitiveType::kF32, {1, 4});
  Shape in_shape(PrimitiveType::kF32, {1, 4});
  in_shape.set_minor_to_major({0, 1});  // Unit dim minor: still row-major.
  in = in.WithShape(in_shape);
  Literal out = Ok(EvalBitcast(Instr(Opcode::kBitcast, Shape(PrimitiveType::kF32, {4})), in));
  EXPECT_EQ(out.untyped_data(), in.untyped_data());
  EXPECT_THAT(Doubles(out), ElementsAre(0, 1, 2, 3));
}

TEST(DataMovementTest, BitcastRejectsDifferentSizes) {
  Literal in = Iota(PrimitiveType::kF32, {2, 3});
  EXPECT_EQ(EvalBitcast(Instr(Opcode::kBitcast, Shape(PrimitiveType::kF32, {5})), in)
                .status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DataMovementTest, BroadcastScalarFillsTheResult) {
  Instruction instr = Instr(Opcode::kBroadcast, Shape(PrimitiveType::kBF16, {2, 3}));
  Literal out = Ok(EvalBroadcast(instr, Literal::Scalar(PrimitiveType::kBF16, 1.5f)));
  EXPECT_THAT(Doubles(out), ElementsAre(1.5, 1.5, 1.5, 1.5, 1.5, 1.5));
}

TEST(DataMovementTest, BroadcastAlongLeadingTrailingAndMiddleDims) {
  Literal row = Iota(PrimitiveType::kS32, {3});
  Instruction leading = Instr(Opcode::kBroadcast, Shape(PrimitiveType::kS32, {2, 3}));
  leading.dimensions = {1};
  EXPECT_THAT(Doubles(Ok(EvalBroadcast(leading, row))), ElementsAre(0, 1, 2, 0, 1, 2));
  Instruction trailing = Instr(Opcode::kBroadcast, Shape(PrimitiveType::kS32, {3, 2}));
  trailing.dimensions = {0};
  EXPECT_THAT(Doubles(Ok(EvalBroadcast(trailing, row))), ElementsAre(0, 0, 1, 1, 2, 2));
  Literal pair = Iota(PrimitiveType::kS32, {2, 2});
  Instruction middle = Instr(Opcode::kBroadcast, Shape(PrimitiveType::kS32, {2, 3, 2}));
  middle.dimensions = {0, 2};
  EXPECT_THAT(Doubles(Ok(EvalBroadcast(middle, pair))),
              ElementsAre(0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3));
}

TEST(DataMovementTest, BroadcastRejectsMismatchedDims) {
  Instruction instr = Instr(Opcode::kBroadcast, Shape(PrimitiveType::kS32, {2, 4}));
  instr.dimensions = {1};
  EXPECT_EQ(EvalBroadcast(instr, Iota(PrimitiveType::kS32, {3})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DataMovementTest, ReshapeSharesStorage) {
  Literal in = Iota(PrimitiveType::kF64, {4, 3});
  Literal out = Ok(EvalReshape(Instr(Opcode::kReshape, Shape(PrimitiveType::kF64, {2, 6})), in));
  EXPECT_EQ(out.untyped_data(), in.untyped_data());
  EXPECT_EQ(out.shape().dims(), (std::vector<int64_t>{2, 6}));
}

TEST(DataMovementTest, TransposeOfALargeMatrixMatchesReference) {
  // Odd sizes exercise partial tiles.
  for (PrimitiveType type : {PrimitiveType::kF32, PrimitiveType::kBF16,
                             PrimitiveType::kU8, PrimitiveType::kF64}) {
    Literal in = Iota(type, {37, 45});
    Instruction instr = Instr(Opcode::kTranspose, Shape(type, {45, 37}));
    instr.dimensions = {1, 0};
    EXPECT_THAT(Doubles(Ok(EvalTranspose(instr, in))),
                ElementsAreArray(NaiveTranspose(in, {1, 0})))
        << hlo::PrimitiveTypeName(type);
  }
}

TEST(DataMovementTest, TransposeOfRank4MatchesReferenceForEveryPermutation) {
  Literal in = Iota(PrimitiveType::kS32, {3, 5, 4, 6});
  std::vector<int64_t> perm = {0, 1, 2, 3};
  do {
    std::vector<int64_t> out_dims;
    for (int64_t p : perm) out_dims.push_back(in.shape().dim(p));
    Instruction instr = Instr(Opcode::kTranspose, Shape(PrimitiveType::kS32, out_dims));
    instr.dimensions = perm;
    EXPECT_THAT(Doubles(Ok(EvalTranspose(instr, in))),
                ElementsAreArray(NaiveTranspose(in, perm)));
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(DataMovementTest, SliceWithStrides) {
  Literal in = Iota(PrimitiveType::kF32, {4, 5});
  Instruction instr = Instr(Opcode::kSlice, Shape(PrimitiveType::kF32, {2, 2}));
  instr.slice = {{1, 4, 2}, {0, 5, 3}};
  EXPECT_THAT(Doubles(Ok(EvalSlice(instr, in))), ElementsAre(5, 8, 15, 18));
}

TEST(DataMovementTest, SliceRejectsOutOfRangeLimits) {
  Instruction instr = Instr(Opcode::kSlice, Shape(PrimitiveType::kF32, {3}));
  instr.slice = {{2, 5, 1}};
  EXPECT_EQ(EvalSlice(instr, Iota(PrimitiveType::kF32, {4})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DataMovementTest, ConcatenateAlongEachDim) {
  Literal a = Iota(PrimitiveType::kS16, {2, 2});
  Literal b = Iota(PrimitiveType::kS16, {2, 1}, 10);
  const Literal* operands[] = {&a, &b};
  Instruction cols = Instr(Opcode::kConcatenate, Shape(PrimitiveType::kS16, {2, 3}));
  cols.dimensions = {1};
  EXPECT_THAT(Doubles(Ok(EvalConcatenate(cols, operands))), ElementsAre(0, 1, 10, 2, 3, 11));
  Literal c = Iota(PrimitiveType::kS16, {1, 2}, 20);
  const Literal* rows_operands[] = {&a, &c};
  Instruction rows = Instr(Opcode::kConcatenate, Shape(PrimitiveType::kS16, {3, 2}));
  rows.dimensions = {0};
  EXPECT_THAT(Doubles(Ok(EvalConcatenate(rows, rows_operands))),
              ElementsAre(0, 1, 2, 3, 20, 21));
}

TEST(DataMovementTest, ConcatenateRejectsWrongTotal) {
  Literal a = Iota(PrimitiveType::kS16, {2});
  const Literal* operands[] = {&a, &a};
  Instruction instr = Instr(Opcode::kConcatenate, Shape(PrimitiveType::kS16, {5}));
  instr.dimensions = {0};
  EXPECT_EQ(EvalConcatenate(instr, operands).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DataMovementTest, PadWithLowHighAndInteriorPadding) {
  Literal in = Iota(PrimitiveType::kF32, {2, 2}, 1);
  Instruction instr = Instr(Opcode::kPad, Shape(PrimitiveType::kF32, {4, 5}));
  instr.padding = {{1, 0, 1}, {0, 2, 1}};
  Literal out = Ok(EvalPad(instr, in, Literal::Scalar(PrimitiveType::kF32, -1.0f)));
  EXPECT_THAT(Doubles(out), ElementsAre(-1, -1, -1, -1, -1,  //
                                        1, -1, 2, -1, -1,    //
                                        -1, -1, -1, -1, -1,  //
                                        3, -1, 4, -1, -1));
}

TEST(DataMovementTest, NegativePaddingCrops) {
  Literal in = Iota(PrimitiveType::kS32, {5});
  Instruction instr = Instr(Opcode::kPad, Shape(PrimitiveType::kS32, {6}));
  // Interior 1 makes 9 elements; low -2 and high -1 leave 6.
  instr.padding = {{-2, -1, 1}};
  Literal out = Ok(EvalPad(instr, in, Literal::Scalar(PrimitiveType::kS32, 9)));
  EXPECT_THAT(Doubles(out), ElementsAre(1, 9, 2, 9, 3, 9));
}

TEST(DataMovementTest, PadThatCropsEverythingLeavesOnlyPadding) {
  Literal in = Iota(PrimitiveType::kS32, {2});
  Instruction instr = Instr(Opcode::kPad, Shape(PrimitiveType::kS32, {1}));
  instr.padding = {{-3, 2, 0}};
  EXPECT_THAT(Doubles(Ok(EvalPad(instr, in, Literal::Scalar(PrimitiveType::kS32, 7)))),
              ElementsAre(7));
}

TEST(DataMovementTest, IotaCountsAlongItsDimensionInAnyType) {
  Instruction instr = Instr(Opcode::kIota, Shape(PrimitiveType::kF32, {2, 3}));
  instr.iota_dimension = 1;
  EXPECT_THAT(Doubles(Ok(EvalIota(instr))), ElementsAre(0, 1, 2, 0, 1, 2));
  Instruction rows = Instr(Opcode::kIota, Shape(PrimitiveType::kU8, {3, 2}));
  rows.iota_dimension = 0;
  EXPECT_THAT(Doubles(Ok(EvalIota(rows))), ElementsAre(0, 0, 1, 1, 2, 2));
}

TEST(DataMovementTest, ReverseFlipsTheNamedDims) {
  Literal in = Iota(PrimitiveType::kS32, {2, 3});
  Instruction instr = Instr(Opcode::kReverse, Shape(PrimitiveType::kS32, {2, 3}));
  instr.dimensions = {1};
  EXPECT_THAT(Doubles(Ok(EvalReverse(instr, in))), ElementsAre(2, 1, 0, 5, 4, 3));
  instr.dimensions = {0, 1};
  EXPECT_THAT(Doubles(Ok(EvalReverse(instr, in))), ElementsAre(5, 4, 3, 2, 1, 0));
}

TEST(DataMovementTest, DynamicSliceClampsStartIndices) {
  Literal in = Iota(PrimitiveType::kF32, {4, 4});
  Instruction instr = Instr(Opcode::kDynamicSlice, Shape(PrimitiveType::kF32, {2, 2}));
  instr.dynamic_slice_sizes = {2, 2};
  Literal row = Literal::Scalar(PrimitiveType::kS64, int64_t{7});  // → 2
  Literal col = Literal::Scalar(PrimitiveType::kS32, -3);          // → 0
  const Literal* starts[] = {&row, &col};
  EXPECT_THAT(Doubles(Ok(EvalDynamicSlice(instr, in, starts))), ElementsAre(8, 9, 12, 13));
  Literal one = Literal::Scalar(PrimitiveType::kU32, 1u);
  const Literal* unsigned_starts[] = {&one, &one};
  EXPECT_THAT(Doubles(Ok(EvalDynamicSlice(instr, in, unsigned_starts))),
              ElementsAre(5, 6, 9, 10));
}

TEST(DataMovementTest, DynamicSliceSignExtendsUnsignedStartIndicesAsXla) {
  // XLA's CPU backend sign-extends every index: u8 200 reads as -56 → 0.
  Literal in = Iota(PrimitiveType::kF32, {4});
  Instruction instr = Instr(Opcode::kDynamicSlice, Shape(PrimitiveType::kF32, {2}));
  Literal start = Literal::Scalar(PrimitiveType::kU8, 200);
  const Literal* starts[] = {&start};
  EXPECT_THAT(Doubles(Ok(EvalDynamicSlice(instr, in, starts))), ElementsAre(0, 1));
}

TEST(DataMovementTest, DynamicSliceRejectsNonScalarIndices) {
  Literal in = Iota(PrimitiveType::kF32, {4});
  Instruction instr = Instr(Opcode::kDynamicSlice, Shape(PrimitiveType::kF32, {2}));
  Literal bad = Iota(PrimitiveType::kS32, {1});
  const Literal* starts[] = {&bad};
  EXPECT_EQ(EvalDynamicSlice(instr, in, starts).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DataMovementTest, DynamicUpdateSliceClampsAndLeavesTheOperandUnchanged) {
  Literal in = Iota(PrimitiveType::kS32, {3, 3});
  Literal update = Iota(PrimitiveType::kS32, {2, 2}, 100);
  Instruction instr = Instr(Opcode::kDynamicUpdateSlice, Shape(PrimitiveType::kS32, {3, 3}));
  Literal row = Literal::Scalar(PrimitiveType::kS32, 5);  // → 1
  Literal col = Literal::Scalar(PrimitiveType::kS32, 0);
  const Literal* starts[] = {&row, &col};
  EXPECT_THAT(Doubles(Ok(EvalDynamicUpdateSlice(instr, in, update, starts))),
              ElementsAre(0, 1, 2, 100, 101, 5, 102, 103, 8));
  EXPECT_THAT(Doubles(in), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8));
}

TEST(DataMovementTest, DynamicUpdateSliceInPlaceWritesAnUnsharedOperandWithoutCopying) {
  Literal carry = Iota(PrimitiveType::kF32, {4, 2});
  const void* storage = carry.untyped_data();
  Literal update = Iota(PrimitiveType::kF32, {1, 2}, 50);
  Instruction instr = Instr(Opcode::kDynamicUpdateSlice, Shape(PrimitiveType::kF32, {4, 2}));
  Literal row = Literal::Scalar(PrimitiveType::kS32, 2);
  Literal col = Literal::Scalar(PrimitiveType::kS32, 0);
  const Literal* starts[] = {&row, &col};
  ASSERT_TRUE(DynamicUpdateSliceInPlace(instr, carry, update, starts).ok());
  EXPECT_EQ(carry.untyped_data(), storage);
  EXPECT_THAT(Doubles(carry), ElementsAre(0, 1, 2, 3, 50, 51, 6, 7));
}

TEST(DataMovementTest, DynamicUpdateSliceInPlaceCopiesSharedStorageFirst) {
  Literal original = Iota(PrimitiveType::kS32, {3});
  Literal carry = original;  // Shares storage.
  Literal update = Iota(PrimitiveType::kS32, {1}, 9);
  Literal start = Literal::Scalar(PrimitiveType::kS32, 1);
  const Literal* starts[] = {&start};
  Instruction instr = Instr(Opcode::kDynamicUpdateSlice, Shape(PrimitiveType::kS32, {3}));
  ASSERT_TRUE(DynamicUpdateSliceInPlace(instr, carry, update, starts).ok());
  EXPECT_THAT(Doubles(carry), ElementsAre(0, 9, 2));
  EXPECT_THAT(Doubles(original), ElementsAre(0, 1, 2));
}

TEST(DataMovementTest, BroadcastWithUnsortedDimensionsTransposes) {
  Literal in = Iota(PrimitiveType::kS32, {2, 3});
  Instruction instr = Instr(Opcode::kBroadcast, Shape(PrimitiveType::kS32, {3, 2}));
  instr.dimensions = {1, 0};
  EXPECT_THAT(Doubles(Ok(EvalBroadcast(instr, in))), ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(DataMovementTest, CopyStridedReplicatesLeadingBroadcastDims) {
  std::vector<uint32_t> src = {1, 2, 3};
  std::vector<uint32_t> dst(12, 0);
  std::vector<int64_t> dims = {2, 2, 3};
  std::vector<int64_t> src_strides = {0, 0, 1};
  std::vector<int64_t> dst_strides = {6, 3, 1};
  CopyStrided(4, dims, src.data(), src_strides, dst.data(), dst_strides);
  EXPECT_THAT(dst, ElementsAre(1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3));
}

TEST(DataMovementTest, CopyStridedMovesElementsOfOddWidthBytewise) {
  std::vector<uint8_t> src = {1, 2, 3, 4, 5, 6};  // Two 3-byte elements.
  std::vector<uint8_t> dst(6, 0);
  std::vector<int64_t> dims = {2};
  std::vector<int64_t> src_strides = {-1};
  std::vector<int64_t> dst_strides = {1};
  CopyStrided(3, dims, src.data() + 3, src_strides, dst.data(), dst_strides);
  EXPECT_THAT(dst, ElementsAre(4, 5, 6, 1, 2, 3));
}

}  // namespace data_movement_test
}  // namespace causeway::exec
