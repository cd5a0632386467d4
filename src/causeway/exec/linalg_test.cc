// Tests for dot and convolution. Expected values were computed with numpy
// (dot) and jax.lax.conv_general_dilated (convolution) on the same inputs:
// element i of an input filled with `seed` is ((7 * i + seed) % 11) - 5.
#include <cstdint>
#include <string>
#include <vector>

#include "causeway/exec/kernels.h"
#include "causeway/hlo/float16.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace linalg_test {

using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAreArray;
using hlo::testutil::DoubleValues;

Literal Fill(PrimitiveType type, std::vector<int64_t> dims, int64_t seed,
             float scale = 1.0f) {
  Literal literal{Shape(type, std::move(dims))};
  hlo::VisitType(type, [&](auto tag) {
    using E = decltype(tag);
    auto data = literal.mutable_data<E>();
    for (size_t i = 0; i < data.size(); ++i) {
      float v =
          static_cast<float>((static_cast<int64_t>(i) * 7 + seed) % 11 - 5);
      if constexpr (std::is_same_v<E, hlo::BF16> ||
                    std::is_same_v<E, hlo::F16>) {
        data[i] = E(v / scale);
      } else {
        data[i] = static_cast<E>(v / scale);
      }
    }
  });
  return literal;
}

Instruction DotInstr(Shape shape, std::vector<int64_t> lhs_batch,
                     std::vector<int64_t> lhs_contracting,
                     std::vector<int64_t> rhs_batch,
                     std::vector<int64_t> rhs_contracting) {
  Instruction instr;
  instr.name = "dot";
  instr.opcode = hlo::Opcode::kDot;
  instr.shape = std::move(shape);
  instr.dot_dimension_numbers = {lhs_batch, lhs_contracting, rhs_batch,
                                 rhs_contracting};
  return instr;
}

TEST(DotTest, MultipliesMatrices) {
  Literal lhs{Shape(PrimitiveType::kF32, {2, 3})};
  Literal rhs{Shape(PrimitiveType::kF32, {3, 2})};
  float a[] = {1, 2, 3, 4, 5, 6};
  float b[] = {7, 8, 9, 10, 11, 12};
  std::copy(a, a + 6, lhs.mutable_data<float>().begin());
  std::copy(b, b + 6, rhs.mutable_data<float>().begin());
  Instruction dot =
      DotInstr(Shape(PrimitiveType::kF32, {2, 2}), {}, {1}, {}, {0});
  absl::StatusOr<Literal> result = EvalDot(dot, lhs, rhs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({58.0, 64.0, 139.0, 154.0}));
}

TEST(DotTest, HandlesBatchAndContractingDimsInAnyPosition) {
  // lhs [c=3, b=2, m=4], rhs [b=2, n=5, c=3] -> [b, m, n].
  Literal lhs = Fill(PrimitiveType::kF32, {3, 2, 4}, 1);
  Literal rhs = Fill(PrimitiveType::kF32, {2, 5, 3}, 2);
  Instruction dot =
      DotInstr(Shape(PrimitiveType::kF32, {2, 4, 5}), {1}, {0}, {0}, {2});
  absl::StatusOr<Literal> result = EvalDot(dot, lhs, rhs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({0,   9,  18, -17, -8, 7,   -5, -17, 4,   -8,
                                3,   3,  3,  -8,  -8, -1,  11, 23,  -20, -8,
                                -17, 18, 9,  0,   -9, -5,  -2, 1,   4,   7,
                                40,  0,  4,  8,   12, -14, 13, 7,   1,   -5}));
}

TEST(DotTest, ContractsSeveralDimsInTheirListedOrder) {
  // lhs [m=2, c=3, k=4] contracting {1, 2}; rhs [k=4, n=5, c=3]
  // contracting {2, 0}.
  Literal lhs = Fill(PrimitiveType::kF32, {2, 3, 4}, 1);
  Literal rhs = Fill(PrimitiveType::kF32, {4, 5, 3}, 2);
  Instruction dot =
      DotInstr(Shape(PrimitiveType::kF32, {2, 5}), {}, {1, 2}, {}, {2, 0});
  absl::StatusOr<Literal> result = EvalDot(dot, lhs, rhs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({34, 82, 42, 2, -5, -18, -21, 9, 39, -19}));
}

TEST(DotTest, ReadsATransposedRhsInPlace) {
  Literal lhs = Fill(PrimitiveType::kF32, {2, 3}, 1);
  Literal rhs = Fill(PrimitiveType::kF32, {4, 3}, 2);
  Instruction dot =
      DotInstr(Shape(PrimitiveType::kF32, {2, 4}), {}, {1}, {}, {1});
  absl::StatusOr<Literal> result = EvalDot(dot, lhs, rhs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({24, 26, 28, -14, 23, 28, 33, -17}));
}

TEST(DotTest, AccumulatesBf16InFloatAndRoundsTheResult) {
  Literal lhs = Fill(PrimitiveType::kBF16, {2, 8}, 1, 3.0f);
  Literal rhs = Fill(PrimitiveType::kBF16, {8, 2}, 2, 7.0f);
  Instruction dot =
      DotInstr(Shape(PrimitiveType::kBF16, {2, 2}), {}, {1}, {}, {0});
  absl::StatusOr<Literal> result = EvalDot(dot, lhs, rhs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({2.09375, -0.8515625,
                                                 -0.279296875, -0.5703125}));
}

TEST(DotTest, MultipliesS8IntoS32WithWraparound) {
  Literal lhs{Shape(PrimitiveType::kS8, {1, 2})};
  Literal rhs{Shape(PrimitiveType::kS8, {2, 1})};
  lhs.mutable_data<int8_t>()[0] = -128;
  lhs.mutable_data<int8_t>()[1] = 100;
  rhs.mutable_data<int8_t>()[0] = 127;
  rhs.mutable_data<int8_t>()[1] = -3;
  Instruction dot =
      DotInstr(Shape(PrimitiveType::kS32, {1, 1}), {}, {1}, {}, {0});
  absl::StatusOr<Literal> result = EvalDot(dot, lhs, rhs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->data<int32_t>()[0], -128 * 127 + 100 * -3);

  Instruction wrap =
      DotInstr(Shape(PrimitiveType::kS8, {1, 1}), {}, {1}, {}, {0});
  result = EvalDot(wrap, lhs, rhs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->data<int8_t>()[0],
            static_cast<int8_t>(-128 * 127 + 100 * -3));
}

TEST(DotTest, MultipliesF64) {
  Literal lhs = Fill(PrimitiveType::kF64, {2, 3}, 1, 3.0f);
  Literal rhs = Fill(PrimitiveType::kF64, {3, 1}, 2);
  Instruction dot =
      DotInstr(Shape(PrimitiveType::kF64, {2, 1}), {}, {1}, {}, {0});
  absl::StatusOr<Literal> result = EvalDot(dot, lhs, rhs);
  ASSERT_TRUE(result.ok()) << result.status();
  // Fill divides in float: lhs = {-4/3, 1, -1/3, ...} as f32 values.
  const double l[] = {-4 / 3.0f, 3 / 3.0f, -1 / 3.0f,
                      -5 / 3.0f, 2 / 3.0f, -2 / 3.0f};
  const double r[] = {-3, 4, 0};
  EXPECT_DOUBLE_EQ(result->data<double>()[0],
                   l[0] * r[0] + l[1] * r[1] + l[2] * r[2]);
  EXPECT_DOUBLE_EQ(result->data<double>()[1],
                   l[3] * r[0] + l[4] * r[1] + l[5] * r[2]);
}

TEST(DotTest, RejectsMismatchedContractingSizes) {
  Literal lhs = Fill(PrimitiveType::kF32, {2, 3}, 1);
  Literal rhs = Fill(PrimitiveType::kF32, {4, 2}, 2);
  Instruction dot =
      DotInstr(Shape(PrimitiveType::kF32, {2, 2}), {}, {1}, {}, {0});
  absl::StatusOr<Literal> result = EvalDot(dot, lhs, rhs);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DotTest, RejectsAResultShapeThatDoesNotMatch) {
  Literal lhs = Fill(PrimitiveType::kF32, {2, 3}, 1);
  Literal rhs = Fill(PrimitiveType::kF32, {3, 2}, 2);
  Instruction dot =
      DotInstr(Shape(PrimitiveType::kF32, {2, 3}), {}, {1}, {}, {0});
  EXPECT_EQ(EvalDot(dot, lhs, rhs).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- convolution -----------------------------------------------------------

// Parses HLO dim_labels such as "b01f_01io->b01f".
hlo::ConvolutionDimensionNumbers Labels(const std::string& text) {
  hlo::ConvolutionDimensionNumbers d;
  size_t u = text.find('_'), arrow = text.find("->");
  std::string in = text.substr(0, u), k = text.substr(u + 1, arrow - u - 1),
              out = text.substr(arrow + 2);
  size_t spatial = in.size() - 2;
  d.input_spatial_dimensions.resize(spatial);
  d.kernel_spatial_dimensions.resize(spatial);
  d.output_spatial_dimensions.resize(spatial);
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == 'b')
      d.input_batch_dimension = i;
    else if (in[i] == 'f')
      d.input_feature_dimension = i;
    else
      d.input_spatial_dimensions[in[i] - '0'] = i;
    if (k[i] == 'i')
      d.kernel_input_feature_dimension = i;
    else if (k[i] == 'o')
      d.kernel_output_feature_dimension = i;
    else
      d.kernel_spatial_dimensions[k[i] - '0'] = i;
    if (out[i] == 'b')
      d.output_batch_dimension = i;
    else if (out[i] == 'f')
      d.output_feature_dimension = i;
    else
      d.output_spatial_dimensions[out[i] - '0'] = i;
  }
  return d;
}

struct WindowSpec {
  int64_t size, stride, pad_low, pad_high, lhs_dilate = 1, rhs_dilate = 1;
  bool reverse = false;
};

Instruction ConvInstr(Shape shape, const std::string& labels,
                      std::vector<WindowSpec> window,
                      int64_t feature_groups = 1, int64_t batch_groups = 1) {
  Instruction instr;
  instr.name = "conv";
  instr.opcode = hlo::Opcode::kConvolution;
  instr.shape = std::move(shape);
  instr.convolution_dimension_numbers = Labels(labels);
  for (const WindowSpec& w : window) {
    hlo::WindowDimension dim;
    dim.size = w.size;
    dim.stride = w.stride;
    dim.padding_low = w.pad_low;
    dim.padding_high = w.pad_high;
    dim.base_dilation = w.lhs_dilate;
    dim.window_dilation = w.rhs_dilate;
    dim.window_reversal = w.reverse;
    instr.window.push_back(dim);
  }
  instr.feature_group_count = feature_groups;
  instr.batch_group_count = batch_groups;
  return instr;
}

absl::StatusOr<Literal> Conv(const Instruction& instr,
                             std::vector<int64_t> in_dims,
                             std::vector<int64_t> k_dims,
                             PrimitiveType type = PrimitiveType::kF32) {
  return EvalConvolution(instr, Fill(type, std::move(in_dims), 1),
                         Fill(type, std::move(k_dims), 3));
}

TEST(ConvolutionTest, ComputesAPaddedNhwcConvolution) {
  Instruction conv = ConvInstr(Shape(PrimitiveType::kF32, {1, 4, 4, 3}),
                               "b01f_01io->b01f", {{3, 1, 1, 1}, {3, 1, 1, 1}});
  absl::StatusOr<Literal> result = Conv(conv, {1, 4, 4, 2}, {3, 3, 2, 3});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({30,  -18, 0,   -23, -2,  19,  -36, -16, 4,   37,
                                -16, 8,   11,  -30, 17,  10,  -22, 23,  26,  20,
                                -41, 2,   36,  -40, -39, -40, 36,  52,  -41, 20,
                                -31, 23,  -22, 31,  17,  -30, -23, 8,   -16, 2,
                                4,   -16, -15, 19,  -2,  7,   0,   -18}));
}

TEST(ConvolutionTest, AppliesWindowStrides) {
  Instruction conv = ConvInstr(Shape(PrimitiveType::kF32, {2, 3, 3, 2}),
                               "b01f_01io->b01f", {{3, 2, 1, 1}, {3, 2, 1, 1}});
  absl::StatusOr<Literal> result = Conv(conv, {2, 5, 5, 2}, {3, 3, 2, 2});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({29, -1,  15,   -37, 51, 41, 13,  -67, -100,
                                61, 50,  -77,  -65, 27, 65, 20,  -12, -43,
                                0,  -43, -72,  38,  41, 51, -29, 9,   88,
                                41, 53,  -110, -37, 9,  47, -67, -75, 46}));
}

TEST(ConvolutionTest, DilatesTheInputAsInTheInputGradient) {
  Instruction conv =
      ConvInstr(Shape(PrimitiveType::kF32, {1, 6, 6, 1}), "b01f_01io->b01f",
                {{3, 1, 2, 1, 2, 1}, {3, 1, 2, 1, 2, 1}});
  absl::StatusOr<Literal> result = Conv(conv, {1, 3, 3, 2}, {3, 3, 2, 1});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({-12, 24,  3,   -17, -2,  -14, -14, -11, 33,
                                26,  -3,  8,   -20, -24, 29,  39,  -10, -8,
                                8,   -10, -31, -17, 32,  20,  24,  -11, -11,
                                8,   -17, 38,  8,   2,   -29, -5,  12,  -23}));
}

TEST(ConvolutionTest, DilatesTheWindow) {
  Instruction conv =
      ConvInstr(Shape(PrimitiveType::kF32, {1, 5, 5, 2}), "b01f_01io->b01f",
                {{2, 1, 0, 1, 1, 2}, {2, 1, 0, 1, 1, 2}});
  absl::StatusOr<Literal> result = Conv(conv, {1, 6, 6, 1}, {2, 2, 1, 2});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(
      DoubleValues(*result),
      ElementsAreArray({39,  -32, -23, 36,  -8,  -17, -4,  -4,  -12, 10,
                        -25, 46,  -10, -7,  38,  -27, -24, 41,  -16, 0,
                        -23, 36,  -8,  -17, -4,  -4,  -11, -2,  24,  -10,
                        -10, -7,  38,  -27, -24, 41,  -9,  -12, 20,  -20,
                        4,   -11, 8,   -19, 1,   -5,  5,   -13, -10, 25}));
}

TEST(ConvolutionTest, CropsWithNegativePadding) {
  Instruction conv =
      ConvInstr(Shape(PrimitiveType::kF32, {1, 3, 2, 1}), "b01f_01io->b01f",
                {{2, 1, -1, 0}, {2, 1, 0, -2}});
  absl::StatusOr<Literal> result = Conv(conv, {1, 5, 5, 1}, {2, 2, 1, 1});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({41, -18, -12, 6, -10, 41}));
}

TEST(ConvolutionTest, ComputesADepthwiseConvolutionWithFeatureGroups) {
  Instruction conv =
      ConvInstr(Shape(PrimitiveType::kF32, {1, 3, 3, 8}), "b01f_01io->b01f",
                {{2, 1, 0, 0}, {2, 1, 0, 0}}, /*feature_groups=*/4);
  absl::StatusOr<Literal> result = Conv(conv, {1, 4, 4, 4}, {2, 2, 1, 8});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray(
                  {10,  -34, 14,  -10, 32,  -5,  20, -41, -2,  12,  -14, -2,
                   32,  -2,  4,   12,  8,   -41, -9, -5,  -23, -10, 10,  -34,
                   -5,  -15, 1,   -11, -23, -4,  0,  -27, -6,  42,  -16, 8,
                   -12, 10,  -16, 26,  -7,  -22, 0,  16,  -23, 2,   1,   35,
                   2,   26,  10,  10,  -23, 8,   -9, 42,  12,  -27, 4,   -4,
                   32,  -11, -14, -15, 0,   19,  20, 4,   32,  -8,  14,  5}));
}

TEST(ConvolutionTest, SplitsTheBatchIntoBatchGroupsAsInAGroupedWeightGradient) {
  Instruction conv =
      ConvInstr(Shape(PrimitiveType::kF32, {2, 2, 2, 6}), "f01b_i01o->01bf",
                {{2, 1, 0, 0}, {2, 1, 0, 0}}, 1, /*batch_groups=*/2);
  absl::StatusOr<Literal> result = Conv(conv, {2, 3, 3, 4}, {2, 2, 2, 6});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({12,  3,  -17, -68, 47,  8,   3,   12,  -23, -12,
                                -33, 1,  9,   6,   -19, -42, 2,   2,   0,   15,
                                -25, 47, -45, 28,  3,   12,  -23, -12, -33, 1,
                                -61, 10, 4,   44,  -36, 27,  0,   15,  -25, 47,
                                -45, 28, 13,  13,  46,  -18, 29,  -34}));
}

TEST(ConvolutionTest, HonoursNchwDimLabels) {
  Instruction conv = ConvInstr(Shape(PrimitiveType::kF32, {2, 4, 4, 2}),
                               "bf01_oi01->bf01", {{2, 1, 1, 0}, {2, 2, 0, 1}});
  absl::StatusOr<Literal> result = Conv(conv, {2, 3, 4, 4}, {4, 3, 2, 2});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(
      DoubleValues(*result),
      ElementsAreArray({18,  9,   13,  -4,  -21, -38, 11, 5,  -7,  -22, -27,
                        -12, 47,  18,  22,  -29, -43, 24, -1, 13,  -6,  41,
                        -33, -41, 20,  15,  -30, -17, 7,  9,  -22, 13,  -22,
                        13,  -21, -38, 11,  5,   -23, 37, 18, 3,   47,  18,
                        22,  -29, 52,  -54, -19, 4,   -6, 41, -33, -41, -5,
                        53,  -23, 5,   7,   9,   -22, 13, 4,  -16}));
}

TEST(ConvolutionTest, ReversesTheWindow) {
  Instruction conv =
      ConvInstr(Shape(PrimitiveType::kF32, {1, 4, 3, 1}), "b01f_01io->b01f",
                {{3, 1, 1, 1, 1, 1, true}, {2, 1, 0, 0}});
  absl::StatusOr<Literal> result = Conv(conv, {1, 4, 4, 1}, {3, 2, 1, 1});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({-27, 35, 9, 18, -13, -22, -18,
                                                 -27, 52, -6, 30, -11}));
}

TEST(ConvolutionTest, ComputesBf16InFloat) {
  Instruction conv =
      ConvInstr(Shape(PrimitiveType::kBF16, {1, 3, 2, 1}), "b01f_01io->b01f",
                {{2, 1, -1, 0}, {2, 1, 0, -2}});
  absl::StatusOr<Literal> result =
      Conv(conv, {1, 5, 5, 1}, {2, 2, 1, 1}, PrimitiveType::kBF16);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({41, -18, -12, 6, -10, 41}));
}

TEST(ConvolutionTest, RejectsAnOutputShapeThatDoesNotMatchTheWindow) {
  Instruction conv = ConvInstr(Shape(PrimitiveType::kF32, {1, 4, 4, 1}),
                               "b01f_01io->b01f", {{2, 1, 0, 0}, {2, 1, 0, 0}});
  EXPECT_EQ(Conv(conv, {1, 4, 4, 1}, {2, 2, 1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ConvolutionTest, RejectsFeatureCountsThatDoNotMatchTheKernel) {
  Instruction conv = ConvInstr(Shape(PrimitiveType::kF32, {1, 3, 3, 2}),
                               "b01f_01io->b01f", {{2, 1, 0, 0}, {2, 1, 0, 0}});
  EXPECT_EQ(Conv(conv, {1, 4, 4, 3}, {2, 2, 2, 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ConvolutionTest, RejectsDimLabelsThatRepeatADimension) {
  Instruction conv = ConvInstr(Shape(PrimitiveType::kF32, {1, 3, 3, 1}),
                               "b01f_01io->b01f", {{2, 1, 0, 0}, {2, 1, 0, 0}});
  conv.convolution_dimension_numbers.input_feature_dimension = 0;
  EXPECT_EQ(Conv(conv, {1, 4, 4, 1}, {2, 2, 1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace linalg_test
}  // namespace causeway::exec
