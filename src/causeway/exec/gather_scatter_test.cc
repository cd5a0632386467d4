// Tests for gather and scatter. Expected values come from JAX 0.10.2
// (lax.gather with mode=CLIP, .at[].add, lax.scatter with FILL_OR_DROP) on
// the same inputs: element i of an input filled with `seed` is
// ((7 * i + seed) % 11) - 5.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "causeway/exec/kernels.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace gather_scatter_test {

using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAreArray;
using hlo::testutil::Array;
using hlo::testutil::DoubleValues;

Literal Fill(std::vector<int64_t> dims, int64_t seed) {
  Literal literal{Shape(PrimitiveType::kF32, std::move(dims))};
  auto data = literal.mutable_data<float>();
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<float>((static_cast<int64_t>(i) * 7 + seed) % 11 - 5);
  }
  return literal;
}

constexpr char kComputations[] = R"(
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}
%overwrite (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  ROOT %b = f32[] parameter(1)
}
%add_and_count (a: f32[], n: s32[], b: f32[], m: s32[]) -> (f32[], s32[]) {
  %a = f32[] parameter(0)
  %n = s32[] parameter(1)
  %b = f32[] parameter(2)
  %m = s32[] parameter(3)
  %sum = f32[] add(%a, %b)
  %count = s32[] add(%n, %m)
  ROOT %t = (f32[], s32[]) tuple(%sum, %count)
}
)";

class GatherScatterTest : public ::testing::Test {
 protected:
  const Instruction& Parse(const std::string& params, const std::string& body) {
    std::string text = std::string("HloModule test\n") + kComputations +
                       "ENTRY %main (" + params + ") -> f32[] {\n" + body +
                       "\n}\n";
    auto module = hlo::ParseModule(text);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) std::abort();
    module_ = std::move(*module);
    return *module_->entry()->root();
  }

  ComputationRunner NoRunner() {
    return [](const hlo::Computation& c,
              std::span<const Literal>) -> absl::StatusOr<Literal> {
      ADD_FAILURE() << "runner called for " << c.name();
      return absl::InternalError("runner called");
    };
  }

  std::unique_ptr<hlo::Module> module_;
};

TEST_F(GatherScatterTest, GathersRowBlocksAndClampsStartsThatDoNotFit) {
  const Instruction& gather = Parse("x: f32[5,3], i: s32[3,1]", R"(
  %x = f32[5,3] parameter(0)
  %i = s32[3,1] parameter(1)
  ROOT %g = f32[3,2,3] gather(%x, %i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={2,3})");
  Literal x = Fill({5, 3}, 1);
  Literal i = Array<int32_t>(PrimitiveType::kS32, {3, 1}, {4, -1, 3});
  absl::StatusOr<Literal> result = EvalGather(gather, x, i);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({4, 0, -4, 3, -1, -5, -4, 3, -1, -5, 2, -2, 4, 0,
                                -4, 3, -1, -5}));
}

TEST_F(GatherScatterTest, TreatsAnIndexVectorDimEqualToTheRankAsImplicit) {
  const Instruction& gather = Parse("x: f32[5,3], i: s64[3]", R"(
  %x = f32[5,3] parameter(0)
  %i = s64[3] parameter(1)
  ROOT %g = f32[3,3] gather(%x, %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3})");
  Literal x = Fill({5, 3}, 1);
  Literal i = Array<int64_t>(PrimitiveType::kS64, {3}, {2, 0, 2});
  absl::StatusOr<Literal> result = EvalGather(gather, x, i);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({5, 1, -3, -4, 3, -1, 5, 1, -3}));
}

TEST_F(GatherScatterTest, ReadsIndexVectorsAlongALeadingDim) {
  const Instruction& gather = Parse("x: f32[5,3], i: s32[2,3]", R"(
  %x = f32[5,3] parameter(0)
  %i = s32[2,3] parameter(1)
  ROOT %g = f32[3] gather(%x, %i), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,1})");
  Literal x = Fill({5, 3}, 1);
  Literal i = Array<int32_t>(PrimitiveType::kS32, {2, 3}, {0, 4, 2, 2, 1, 0});
  absl::StatusOr<Literal> result = EvalGather(gather, x, i);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({-1, -1, 5}));
}

TEST_F(GatherScatterTest, GathersWithBatchingDims) {
  const Instruction& gather = Parse("y: f32[2,4], i: s32[2,1]", R"(
  %y = f32[2,4] parameter(0)
  %i = s32[2,1] parameter(1)
  ROOT %g = f32[2] gather(%y, %i), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, index_vector_dim=1, slice_sizes={1,1}, operand_batching_dims={0}, start_indices_batching_dims={0})");
  Literal y = Fill({2, 4}, 2);
  Literal i = Array<int32_t>(PrimitiveType::kS32, {2, 1}, {3, 1});
  absl::StatusOr<Literal> result = EvalGather(gather, y, i);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({-4, -1}));
}

TEST_F(GatherScatterTest, RejectsASliceLargerThanTheOperand) {
  const Instruction& gather = Parse("x: f32[5,3], i: s32[3,1]", R"(
  %x = f32[5,3] parameter(0)
  %i = s32[3,1] parameter(1)
  ROOT %g = f32[3,2,3] gather(%x, %i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={2,3})");
  Literal small = Fill({1, 3}, 1);
  Literal i = Array<int32_t>(PrimitiveType::kS32, {3, 1}, {0, 0, 0});
  EXPECT_EQ(EvalGather(gather, small, i).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GatherScatterTest, AddsDuplicateUpdates) {
  const Instruction& scatter =
      Parse("x: f32[5,3], i: s32[3,1], u: f32[3,3]", R"(
  %x = f32[5,3] parameter(0)
  %i = s32[3,1] parameter(1)
  %u = f32[3,3] parameter(2)
  ROOT %s = f32[5,3] scatter(%x, %i, %u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add)");
  Literal x = Fill({5, 3}, 1);
  Literal i = Array<int32_t>(PrimitiveType::kS32, {3, 1}, {4, 0, 4});
  Literal u =
      Array<float>(PrimitiveType::kF32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Literal* operands[] = {&x, &i, &u};
  absl::StatusOr<Literal> result = EvalScatter(scatter, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({0, 8, 5, -5, 2, -2, 5, 1, -3,
                                                 4, 0, -4, 11, 9, 7}));
  EXPECT_EQ(x.data<float>()[0], -4);  // The operand is not modified.
}

TEST_F(GatherScatterTest, SkipsWindowsThatDoNotFitAndOverwritesTheRest) {
  const Instruction& scatter =
      Parse("x: f32[5,3], i: s32[2,1], u: f32[2,2,3]", R"(
  %x = f32[5,3] parameter(0)
  %i = s32[2,1] parameter(1)
  %u = f32[2,2,3] parameter(2)
  ROOT %s = f32[5,3] scatter(%x, %i, %u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%overwrite)");
  Literal x = Fill({5, 3}, 1);
  Literal i = Array<int32_t>(PrimitiveType::kS32, {2, 1}, {4, 1});
  Literal u{Shape(PrimitiveType::kF32, {2, 2, 3})};
  for (int k = 0; k < 12; ++k) u.mutable_data<float>()[k] = k;
  const Literal* operands[] = {&x, &i, &u};
  absl::StatusOr<Literal> result = EvalScatter(scatter, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({-4, 3, -1, 6, 7, 8, 9, 10, 11,
                                                 4, 0, -4, 3, -1, -5}));
}

TEST_F(GatherScatterTest, SkipsNegativeStarts) {
  const Instruction& scatter =
      Parse("x: f32[5,3], i: s32[1,1], u: f32[1,3]", R"(
  %x = f32[5,3] parameter(0)
  %i = s32[1,1] parameter(1)
  %u = f32[1,3] parameter(2)
  ROOT %s = f32[5,3] scatter(%x, %i, %u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add)");
  Literal x = Fill({5, 3}, 1);
  Literal i = Array<int32_t>(PrimitiveType::kS32, {1, 1}, {-1});
  Literal u = Array<float>(PrimitiveType::kF32, {1, 3}, {100, 100, 100});
  const Literal* operands[] = {&x, &i, &u};
  absl::StatusOr<Literal> result = EvalScatter(scatter, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, x);
}

TEST_F(GatherScatterTest, ScattersWithBatchingDims) {
  const Instruction& scatter = Parse("y: f32[2,4], i: s32[2,1], u: f32[2]", R"(
  %y = f32[2,4] parameter(0)
  %i = s32[2,1] parameter(1)
  %u = f32[2] parameter(2)
  ROOT %s = f32[2,4] scatter(%y, %i, %u), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, index_vector_dim=1, input_batching_dims={0}, scatter_indices_batching_dims={0}, to_apply=%add)");
  Literal y = Fill({2, 4}, 2);  // {-3, 4, 0, -4, 3, -1, -5, 2}
  Literal i = Array<int32_t>(PrimitiveType::kS32, {2, 1}, {3, 1});
  Literal u = Array<float>(PrimitiveType::kF32, {2}, {10, 20});
  const Literal* operands[] = {&y, &i, &u};
  absl::StatusOr<Literal> result = EvalScatter(scatter, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({-3, 4, 0, 6, 3, 19, -5, 2}));
}

TEST_F(GatherScatterTest, ScattersSeveralArraysWithOneCombiner) {
  const Instruction& scatter =
      Parse("x: f32[4], n: s32[4], i: s32[3], u: f32[3], m: s32[3]", R"(
  %x = f32[4] parameter(0)
  %n = s32[4] parameter(1)
  %i = s32[3] parameter(2)
  %u = f32[3] parameter(3)
  %m = s32[3] parameter(4)
  ROOT %s = (f32[4], s32[4]) scatter(%x, %n, %i, %u, %m), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add_and_count)");
  Literal x = Array<float>(PrimitiveType::kF32, {4}, {0, 0, 0, 0});
  Literal counts = Array<int32_t>(PrimitiveType::kS32, {4}, {0, 0, 0, 0});
  Literal i = Array<int32_t>(PrimitiveType::kS32, {3}, {2, 0, 2});
  Literal u = Array<float>(PrimitiveType::kF32, {3}, {1.5f, 2, 3});
  Literal ones = Array<int32_t>(PrimitiveType::kS32, {3}, {1, 1, 1});
  const Literal* operands[] = {&x, &counts, &i, &u, &ones};
  absl::StatusOr<Literal> result = EvalScatter(scatter, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->elements().size(), 2u);
  EXPECT_THAT(DoubleValues(result->elements()[0]),
              ElementsAreArray({2.0, 0.0, 4.5, 0.0}));
  EXPECT_THAT(DoubleValues(result->elements()[1]), ElementsAreArray({1, 0, 2, 0}));
}

TEST_F(GatherScatterTest, RejectsUpdatesThatDoNotMatchTheIndices) {
  const Instruction& scatter =
      Parse("x: f32[5,3], i: s32[3,1], u: f32[3,3]", R"(
  %x = f32[5,3] parameter(0)
  %i = s32[3,1] parameter(1)
  %u = f32[3,3] parameter(2)
  ROOT %s = f32[5,3] scatter(%x, %i, %u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add)");
  Literal x = Fill({5, 3}, 1);
  Literal i = Array<int32_t>(PrimitiveType::kS32, {2, 1}, {4, 0});
  Literal u = Fill({3, 3}, 2);
  const Literal* operands[] = {&x, &i, &u};
  EXPECT_EQ(EvalScatter(scatter, operands, NoRunner()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GatherScatterTest, RejectsAnIndexVectorDimOutOfRange) {
  const Instruction& gather = Parse("x: f32[5,3], i: s32[3,1]", R"(
  %x = f32[5,3] parameter(0)
  %i = s32[3,1] parameter(1)
  ROOT %g = f32[3,3] gather(%x, %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3})");
  Instruction bad = gather;
  bad.gather_dimension_numbers.index_vector_dim = 5;
  Literal x = Fill({5, 3}, 1);
  Literal i = Array<int32_t>(PrimitiveType::kS32, {3, 1}, {0, 1, 2});
  EXPECT_EQ(EvalGather(bad, x, i).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GatherScatterTest, RejectsFloatIndices) {
  const Instruction& gather = Parse("x: f32[5,3], i: s32[3,1]", R"(
  %x = f32[5,3] parameter(0)
  %i = s32[3,1] parameter(1)
  ROOT %g = f32[3,3] gather(%x, %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3})");
  Literal x = Fill({5, 3}, 1);
  Literal i = Fill({3, 1}, 0);
  EXPECT_EQ(EvalGather(gather, x, i).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace gather_scatter_test
}  // namespace causeway::exec
