#include "causeway/hlo/parser.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "causeway/hlo/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::hlo {
namespace parser_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::unique_ptr<Module> MustParse(std::string_view text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModule(text);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return nullptr;
  return std::move(module).value();
}

std::string ParseError(std::string_view text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModule(text);
  EXPECT_FALSE(module.ok()) << "parsed unexpectedly";
  if (module.ok()) return "";
  EXPECT_EQ(module.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(module.status().message());
}

// A module whose entry holds `body` (instruction lines) after parameter p0.
std::string Entry(std::string_view body,
                  std::string_view param_shape = "f32[4]{0}") {
  return absl::StrCat(
      "HloModule m\n\nENTRY %main {\n  %p0 = ", std::string(param_shape),
      " parameter(0)\n", std::string(body), "\n}\n");
}

const Instruction& Find(const Module& module, std::string_view name) {
  for (const auto& computation : module.computations()) {
    if (Instruction* found = computation->FindInstruction(name)) return *found;
  }
  ADD_FAILURE() << "no instruction " << name;
  static Instruction none;
  return none;
}

template <typename T>
std::vector<T> Values(const Literal& literal) {
  auto span = literal.data<T>();
  return std::vector<T>(span.begin(), span.end());
}

// ---------------------------------------------------------------------------
// Module structure.

TEST(ParserTest, ParsesEntryComputationWithParametersAndRoot) {
  auto module = MustParse(R"(HloModule test_module

ENTRY %main.3 (x: f32[2], y: f32[2]) -> f32[2] {
  %x = f32[2]{0} parameter(0)
  %y = f32[2]{0} parameter(1)
  ROOT %add = f32[2]{0} add(f32[2]{0} %x, f32[2]{0} %y)
}
)");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->name(), "test_module");
  ASSERT_EQ(module->computations().size(), 1u);
  const Computation* entry = module->entry();
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->name(), "main.3");
  EXPECT_TRUE(entry->is_entry());
  ASSERT_EQ(entry->parameter_count(), 2);
  EXPECT_EQ(entry->parameter(1)->name, "y");
  ASSERT_NE(entry->root(), nullptr);
  EXPECT_EQ(entry->root()->name, "add");
  EXPECT_TRUE(entry->root()->is_root);
  EXPECT_EQ(entry->root()->opcode, Opcode::kAdd);
  ASSERT_EQ(entry->root()->operand_count(), 2);
  EXPECT_EQ(entry->root()->operand(0)->name, "x");
  EXPECT_EQ(entry->root()->shape, *ParseShape("f32[2]{0}"));
  EXPECT_EQ(module->instruction_count(), 3);
  EXPECT_EQ(entry->root()->unique_id, 2);
}

TEST(ParserTest, RecordsOneBasedLineAndColumnOfEveryInstruction) {
  auto module = MustParse(
      "HloModule m\nENTRY e {\n  %a = f32[] parameter(0)\n    ROOT b = f32[] "
      "negate(a)\n}\n");
  ASSERT_NE(module, nullptr);
  const Instruction& a = Find(*module, "a");
  const Instruction& b = Find(*module, "b");
  EXPECT_EQ(a.line, 3);
  EXPECT_EQ(a.column, 3);
  EXPECT_EQ(b.line, 4);
  EXPECT_EQ(b.column, 5);
}

TEST(ParserTest, LastComputationIsEntryWhenNoneIsMarked) {
  auto module = MustParse(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
main {
  x = f32[4] parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(x, zero), dimensions={0}, to_apply=add
}
)");
  ASSERT_NE(module, nullptr);
  ASSERT_NE(module->entry(), nullptr);
  EXPECT_EQ(module->entry()->name(), "main");
  EXPECT_TRUE(module->entry()->is_entry());
  EXPECT_FALSE(module->computations()[0]->is_entry());
}

TEST(ParserTest, LastInstructionIsRootWhenNoneIsMarked) {
  auto module = MustParse(Entry("  %n = f32[4]{0} negate(%p0)"));
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->root()->name, "n");
  EXPECT_TRUE(module->entry()->root()->is_root);
}

TEST(ParserTest, KeepsHeaderAttributesRawAndReadsPartitionCounts) {
  auto module = MustParse(
      "HloModule jit_f, is_scheduled=true, "
      "entry_computation_layout={(f32[4]{0}, /*index=1*/s32[])->f32[4]{0}}, "
      "num_partitions=8, replica_count=2, "
      "frontend_attributes={xla.sdy.meshes={empty_mesh = #sdy.mesh<[]>}}\n" +
      Entry("").substr(12));
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->num_partitions(), 8);
  EXPECT_EQ(module->replica_count(), 2);
  EXPECT_THAT(
      module->raw_attributes(),
      ElementsAre(Pair("is_scheduled", "true"),
                  Pair("entry_computation_layout",
                       "{(f32[4]{0}, /*index=1*/s32[])->f32[4]{0}}"),
                  Pair("frontend_attributes",
                       "{xla.sdy.meshes={empty_mesh = #sdy.mesh<[]>}}")));
}

TEST(ParserTest, KeepsStackFrameIndexAsOneRawBlock) {
  auto module = MustParse(R"(HloModule m, is_scheduled=true

FileNames
1 "/tmp/a b.py"

FunctionNames
1 "<module>"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=0 end_column=5}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


ENTRY %main {
  ROOT %c = f32[] constant(1), metadata={op_name="c" stack_frame_id=1}
}
)");
  ASSERT_NE(module, nullptr);
  ASSERT_EQ(module->raw_attributes().size(), 2u);
  EXPECT_EQ(module->raw_attributes()[1].first, "#stack_frames");
  const std::string& block = module->raw_attributes()[1].second;
  EXPECT_EQ(block.substr(0, 9), "FileNames");
  EXPECT_THAT(block, HasSubstr("1 {file_location_id=1 parent_frame_id=1}"));
  EXPECT_EQ(block.back(), '}');
}

TEST(ParserTest, SkipsBlockAndLineComments) {
  auto module = MustParse(R"(HloModule m  // the module
ENTRY %main {
  // a comment line
  %p0 = f32[1]{0} parameter(0)  /* trailing */
  ROOT %t = (f32[1]{0}, f32[1]{0}, /*index=2*/f32[1]{0}) tuple(%p0, %p0, /*index=2*/%p0)
}
)");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->root()->operand_count(), 3);
  EXPECT_EQ(module->entry()->root()->shape.tuple_shapes().size(), 3u);
}

TEST(ParserTest, KeepsComputationExecutionThread) {
  auto module = MustParse(R"(HloModule m
%callee (a: f32[]) -> f32[] {
  ROOT %a = f32[] parameter(0)
}, execution_thread="host"
ENTRY %main {
  %x = f32[] parameter(0)
  ROOT %c = f32[] call(%x), to_apply=%callee
}
)");
  ASSERT_NE(module, nullptr);
  EXPECT_THAT(module->computations()[0]->raw_attributes(),
              ElementsAre(Pair("execution_thread", "\"host\"")));
}

TEST(ParserTest, ResolvesForwardReferencesToComputations) {
  auto module = MustParse(R"(HloModule m
ENTRY %main {
  %x = f32[] parameter(0)
  ROOT %c = f32[] call(%x), to_apply=%later
}
%later {
  %a = f32[] parameter(0)
  ROOT %n = f32[] negate(%a)
}
)");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->name(), "main");
  ASSERT_EQ(module->entry()->root()->called_computations.size(), 1u);
  EXPECT_EQ(module->entry()->root()->to_apply()->name(), "later");
}

TEST(ParserTest, KeepsUnknownOpcodesWithTheirAttributesRaw) {
  auto module = MustParse(
      Entry("  %s = (f32[4]{0}, u32[]) all-reduce-start(%p0), dimensions={0}, "
            "to_apply=%nowhere, foo=bar"));
  ASSERT_NE(module, nullptr);
  const Instruction& s = Find(*module, "s");
  EXPECT_EQ(s.opcode, Opcode::kUnknown);
  EXPECT_EQ(s.opcode_name, "all-reduce-start");
  EXPECT_EQ(s.line, 5);
  EXPECT_EQ(s.column, 3);
  EXPECT_TRUE(s.dimensions.empty());
  EXPECT_THAT(s.raw_attributes,
              ElementsAre(Pair("dimensions", "{0}"),
                          Pair("to_apply", "%nowhere"), Pair("foo", "bar")));
}

TEST(ParserTest, KeepsUninterpretedAttributesExactly) {
  auto module = MustParse(Entry(
      "  %d = f32[4]{0} add(%p0, %p0), metadata={op_name=\"jit(f)/add, "
      "}{\" source_file=\"/x.py\" source_line=3}, "
      "backend_config={\"a\":[1,{\"b\":\"}\"}],\"c\":\"x,y\"}, "
      "frontend_attributes={k=\"v\"}, control-predecessors={%p0}, "
      "origin={{\"x\"}}, statistics={visualizing_index=1,stat-index-1=0.5}, "
      "backend_config=\"str, with comma\""));
  ASSERT_NE(module, nullptr);
  EXPECT_THAT(
      Find(*module, "d").raw_attributes,
      ElementsAre(
          Pair("metadata",
               "{op_name=\"jit(f)/add, }{\" source_file=\"/x.py\" "
               "source_line=3}"),
          Pair("backend_config", "{\"a\":[1,{\"b\":\"}\"}],\"c\":\"x,y\"}"),
          Pair("frontend_attributes", "{k=\"v\"}"),
          Pair("control-predecessors", "{%p0}"), Pair("origin", "{{\"x\"}}"),
          Pair("statistics", "{visualizing_index=1,stat-index-1=0.5}"),
          Pair("backend_config", "\"str, with comma\"")));
}

TEST(ParserTest, KeepsDotPrecisionAndAlgorithmRaw) {
  auto module = MustParse(
      Entry("  %d = f32[] dot(%p0, %p0), lhs_contracting_dims={0}, "
            "rhs_contracting_dims={0}, operand_precision={highest,default}, "
            "algorithm=dot_bf16_bf16_f32",
            "f32[4]{0}"));
  ASSERT_NE(module, nullptr);
  const Instruction& d = Find(*module, "d");
  EXPECT_THAT(d.raw_attributes,
              ElementsAre(Pair("operand_precision", "{highest,default}"),
                          Pair("algorithm", "dot_bf16_bf16_f32")));
  EXPECT_EQ(d.rng_algorithm, RandomAlgorithm::kDefault);
}

TEST(ParserTest, AcceptsAttributesSplitOverLines) {
  auto module = MustParse(
      Entry("  %b = f32[2,4]{1,0} broadcast(%p0),\n      dimensions={1},\n"
            "      metadata={op_name=\"b\"}"));
  ASSERT_NE(module, nullptr);
  EXPECT_THAT(Find(*module, "b").dimensions, ElementsAre(1));
}

// ---------------------------------------------------------------------------
// Shapes.

TEST(ParseShapeTest, ReadsArrayShapeWithLayout) {
  absl::StatusOr<Shape> shape = ParseShape("f32[2,3]{0,1}");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->type(), PrimitiveType::kF32);
  EXPECT_THAT(shape->dims(), ElementsAre(2, 3));
  EXPECT_THAT(shape->minor_to_major(), ElementsAre(0, 1));
}

TEST(ParseShapeTest, IgnoresTilesAndMemorySpaceInLayouts) {
  absl::StatusOr<Shape> shape =
      ParseShape("bf16[8,128]{1,0:T(8,128)(2,1)S(1)}");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_THAT(shape->minor_to_major(), ElementsAre(1, 0));
  EXPECT_EQ(shape->ToString(), "bf16[8,128]{1,0}");
}

TEST(ParseShapeTest, ReadsScalarsTokensDynamicDimsAndNestedTuples) {
  absl::StatusOr<Shape> shape =
      ParseShape("(pred[], (s8[<=4,2]{1,0}, token[]), u64[0], ())");
  ASSERT_TRUE(shape.ok()) << shape.status();
  ASSERT_TRUE(shape->IsTuple());
  ASSERT_EQ(shape->tuple_shapes().size(), 4u);
  EXPECT_EQ(shape->tuple_shape(0), Shape::Scalar(PrimitiveType::kPred));
  const Shape& inner = shape->tuple_shape(1);
  EXPECT_THAT(inner.tuple_shape(0).dynamic_dims(), ElementsAre(true, false));
  EXPECT_TRUE(inner.tuple_shape(1).IsToken());
  EXPECT_THAT(shape->tuple_shape(2).dims(), ElementsAre(0));
  EXPECT_TRUE(shape->tuple_shape(3).tuple_shapes().empty());
  EXPECT_EQ(shape->ToString(),
            "(pred[], (s8[<=4,2]{1,0}, token[]), u64[0], ())");
}

TEST(ParserTest, AnUnsupportedElementTypeNamesTheInstructionAndItsOp) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModule(R"(HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  c = q7[4]{0} convert(x)
  ROOT t = (q7[4], f32[4]) tuple(c, x)
})");
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().message(),
            "line 4:7: unsupported element type 'q7' (the shape of "
            "instruction 'c', a convert)");
  module = ParseModule(
      "HloModule m\nENTRY e {\n  ROOT t = (f32[], q7[2]) "
      "tuple()\n}");
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(std::string(module.status().message()),
              HasSubstr("(the shape of instruction 't', a tuple)"));
}

TEST(ParseShapeTest, RefusesUnsupportedElementTypesByName) {
  absl::StatusOr<Shape> shape = ParseShape("f6e3m2fn[2]");
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().message(),
            "line 1:1: unsupported element type 'f6e3m2fn'");
  EXPECT_THAT(std::string(ParseShape("(f32[], q8[2])").status().message()),
              HasSubstr("line 1:9: unsupported element type 'q8'"));
}

TEST(ParseShapeTest, RefusesShapesOfMoreThanTwoToTheFortyElements) {
  absl::StatusOr<Shape> shape = ParseShape("f32[1048576,1048577]");
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(std::string(shape.status().message()),
              HasSubstr("more than 2^40 elements"));
  EXPECT_FALSE(ParseShape("f32[9223372036854775807,4]").ok());
  EXPECT_FALSE(ParseShape("f32[99999999999999999999]").ok());
  EXPECT_TRUE(ParseShape("f32[1048576,1048576]").ok());
}

TEST(ParseShapeTest, RefusesNegativeDimsAndBadLayouts) {
  EXPECT_THAT(std::string(ParseShape("f32[-1]").status().message()),
              HasSubstr("must not be negative"));
  EXPECT_THAT(std::string(ParseShape("f32[2,3]{0,0}").status().message()),
              HasSubstr("not a permutation"));
  EXPECT_THAT(std::string(ParseShape("f32[2,3]{0}").status().message()),
              HasSubstr("not a permutation"));
}

TEST(ParseShapeTest, RefusesDeepTupleNestingWithoutRecursingForever) {
  std::string text(100000, '(');
  absl::StatusOr<Shape> shape = ParseShape(text);
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(std::string(shape.status().message()), HasSubstr("nests deeper"));
}

TEST(ParseShapeTest, RefusesTrailingText) {
  EXPECT_EQ(ParseShape("f32[2] x").status().message(),
            "line 1:8: expected 'end of shape', got 'x'");
}

// ---------------------------------------------------------------------------
// Constants.

TEST(ConstantTest, ReadsScalarsOfEveryType) {
  auto module = MustParse(R"(HloModule m
ENTRY e {
  a = pred[] constant(true)
  b = s8[] constant(-128)
  c = s16[] constant(32767)
  d = s32[] constant(-2147483648)
  e = s64[] constant(-9223372036854775808)
  f = u8[] constant(255)
  g = u16[] constant(65535)
  h = u32[] constant(4294967295)
  i = u64[] constant(18446744073709551615)
  j = f16[] constant(0.5)
  k = bf16[] constant(-2.5)
  l = f32[] constant(1.4013e-45)
  m = f64[] constant(0.1)
  ROOT t = () tuple()
}
)");
  ASSERT_NE(module, nullptr);
  auto lit = [&](std::string_view name) -> const Literal& {
    return *Find(*module, name).literal;
  };
  EXPECT_TRUE(Values<bool>(lit("a"))[0]);
  EXPECT_EQ(Values<int8_t>(lit("b"))[0], -128);
  EXPECT_EQ(Values<int16_t>(lit("c"))[0], 32767);
  EXPECT_EQ(Values<int32_t>(lit("d"))[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(Values<int64_t>(lit("e"))[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Values<uint8_t>(lit("f"))[0], 255);
  EXPECT_EQ(Values<uint16_t>(lit("g"))[0], 65535);
  EXPECT_EQ(Values<uint32_t>(lit("h"))[0], 4294967295u);
  EXPECT_EQ(Values<uint64_t>(lit("i"))[0], ~uint64_t{0});
  EXPECT_EQ(Values<F16>(lit("j"))[0].bits, 0x3800);
  EXPECT_EQ(Values<BF16>(lit("k"))[0].bits, 0xC020);
  EXPECT_EQ(std::bit_cast<uint32_t>(Values<float>(lit("l"))[0]), 1u);
  EXPECT_EQ(Values<double>(lit("m"))[0], 0.1);
}

TEST(ConstantTest, ReadsNestedArraysInRowMajorOrder) {
  auto module = MustParse(
      Entry("  ROOT %c = s32[2,3]{0,1} constant({ { 1, 2, 3 }, {4,5,6} })"));
  ASSERT_NE(module, nullptr);
  const Instruction& c = Find(*module, "c");
  ASSERT_TRUE(c.literal.has_value());
  EXPECT_THAT(Values<int32_t>(*c.literal), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(c.shape.minor_to_major(), ElementsAre(0, 1));
}

TEST(ConstantTest, ReadsInfinitiesNansAndNegativeZero) {
  auto module = MustParse(
      Entry("  ROOT %c = f32[6]{0} constant({inf, -inf, nan, -nan, -0, "
            "nan(0x1234)})"));
  ASSERT_NE(module, nullptr);
  std::vector<float> v = Values<float>(*Find(*module, "c").literal);
  EXPECT_EQ(v[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(std::bit_cast<uint32_t>(v[2]), 0x7FC00000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(v[3]), 0xFFC00000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(v[4]), 0x80000000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(v[5]), 0x7F801234u);
}

TEST(ConstantTest, ReadsHalfPrecisionValuesAsXlaPrintsThem) {
  auto module = MustParse(Entry(
      "  %h = f16[4]{0} constant({65504, 5.9605e-08, 0.099976, nan})\n"
      "  ROOT %b = bf16[3]{0} constant({3.00405527e+38, 0.100097656, -inf})"));
  ASSERT_NE(module, nullptr);
  std::vector<F16> h = Values<F16>(*Find(*module, "h").literal);
  EXPECT_EQ(h[0].bits, 0x7BFF);
  EXPECT_EQ(h[1].bits, 0x0001);
  EXPECT_EQ(h[2].bits, 0x2E66);
  EXPECT_EQ(h[3].bits, 0x7E00);
  std::vector<BF16> b = Values<BF16>(*Find(*module, "b").literal);
  EXPECT_EQ(b[0].bits, 0x7F62);
  EXPECT_EQ(b[1].bits, 0x3DCD);
  EXPECT_EQ(b[2].bits, 0xFF80);
}

TEST(ConstantTest, ReadsComplexConstantsAsRealImaginaryPairs) {
  auto module = MustParse(
      Entry("  %a = c64[3]{0} constant({(1, -2), (0.5, inf), (-0, nan)})\n"
            "  ROOT %b = c128[] constant((0.1, 1e+300))"));
  ASSERT_NE(module, nullptr);
  std::vector<C64> a = Values<C64>(*Find(*module, "a").literal);
  EXPECT_EQ(a[0], C64(1, -2));
  EXPECT_EQ(a[1], C64(0.5f, std::numeric_limits<float>::infinity()));
  EXPECT_TRUE(std::signbit(a[2].real()));
  EXPECT_TRUE(std::isnan(a[2].imag()));
  EXPECT_EQ(Values<C128>(*Find(*module, "b").literal)[0], C128(0.1, 1e300));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = c64[] constant(1)")),
              HasSubstr("expected '('"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = c64[] constant((1 2))")),
              HasSubstr("expected ','"));
}

TEST(AttributeTest, ReadsFftTypeAndLength) {
  auto module = MustParse(
      Entry("  ROOT %f = c64[3,5]{1,0} fft(%p0), fft_type=RFFT, "
            "fft_length={3,8}",
            "f32[3,8]{1,0}"));
  ASSERT_NE(module, nullptr);
  const Instruction& f = Find(*module, "f");
  EXPECT_EQ(f.opcode, Opcode::kFft);
  EXPECT_EQ(f.fft_type, FftType::kRfft);
  EXPECT_THAT(f.fft_length, ElementsAre(3, 8));
  EXPECT_THAT(ParseError(Entry("  ROOT %f = c64[4]{0} fft(%p0), "
                               "fft_type=DCT, fft_length={4}",
                               "c64[4]{0}")),
              HasSubstr("expected an fft type (FFT, IFFT, RFFT, IRFFT), got "
                        "'DCT'"));
}

TEST(ConstantTest, ReadsTupleConstantsWithOrWithoutElementShapes) {
  auto module = MustParse(Entry(
      "  %a = (f32[2]{0}, (s32[], pred[])) constant(({1, 2}, (3, true)))\n"
      "  ROOT %b = (f32[2]{0}, s32[]) constant((f32[2] {5, 6}, s32[] 7))"));
  ASSERT_NE(module, nullptr);
  const Literal& a = *Find(*module, "a").literal;
  ASSERT_EQ(a.elements().size(), 2u);
  EXPECT_THAT(Values<float>(a.elements()[0]), ElementsAre(1, 2));
  EXPECT_THAT(Values<int32_t>(a.elements()[1].elements()[0]), ElementsAre(3));
  const Literal& b = *Find(*module, "b").literal;
  EXPECT_THAT(Values<float>(b.elements()[0]), ElementsAre(5, 6));
  EXPECT_THAT(Values<int32_t>(b.elements()[1]), ElementsAre(7));
}

TEST(ConstantTest, ReadsEmptyArrays) {
  auto module =
      MustParse(Entry("  %a = f32[0]{0} constant({})\n"
                      "  ROOT %b = f32[2,0]{1,0} constant({ {}, {} })"));
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Find(*module, "b").literal->shape().ElementCount(), 0);
}

TEST(ConstantTest, RefusesElidedConstantsWithInstructions) {
  std::string error = ParseError(
      Entry("  ROOT %constant.2 = f32[2,3,4]{2,1,0} constant({...})"));
  EXPECT_EQ(error,
            "line 5:49: constant 'constant.2' has its values elided ('{...}'); "
            "print the module with large constants: from JAX, "
            "compiled.runtime_executable().hlo_modules()[0].to_string(opts) "
            "with opts.print_large_constants = True (as_text() elides them); "
            "in XLA dumps, --xla_dump_large_constants=true");
}

TEST(ConstantTest, RefusesWrongValueCounts) {
  EXPECT_THAT(ParseError(Entry("  ROOT %c = f32[3]{0} constant({1, 2})")),
              HasSubstr("line 5:32: constant 'c' has 2 values in dimension 0 "
                        "but shape f32[3]{0} needs 3"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = f32[2]{0} constant({1, 2, 3})")),
              HasSubstr("line 5:39: constant 'c' has more than 2 values"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = f32[2,1]{1,0} constant({1, 2})")),
              HasSubstr("expected '{', got '1'"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = f32[] constant({1})")),
              HasSubstr("line 5:28: expected 'value', got '{'"));
}

TEST(ConstantTest, RefusesValuesOutOfRangeForTheirType) {
  EXPECT_THAT(ParseError(Entry("  ROOT %c = s8[] constant(128)")),
              HasSubstr("line 5:27: invalid s8 value '128': out of range"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = u32[] constant(-1)")),
              HasSubstr("invalid u32 value '-1': out of range"));
  EXPECT_THAT(
      ParseError(Entry("  ROOT %c = u64[] constant(18446744073709551616)")),
      HasSubstr("out of range"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = f32[] constant(1e39)")),
              HasSubstr("invalid f32 value '1e39': out of range"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = f16[] constant(70000)")),
              HasSubstr("out of range"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = s32[] constant(1.5)")),
              HasSubstr("expected an integer"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = pred[] constant(2)")),
              HasSubstr("expected true or false"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = f32[] constant(nan(0x800000))")),
              HasSubstr("payload"));
}

// ---------------------------------------------------------------------------
// Attributes.

TEST(AttributeTest, ReadsShapeManipulationAttributes) {
  auto module =
      MustParse(Entry(R"(  %b = f32[3,4]{1,0} broadcast(%p0), dimensions={1}
  %s = f32[2]{0} slice(%p0), slice={[1:4:2]}
  %s2 = f32[2,2]{1,0} slice(%b), slice={[0:2], [1:3]}
  %i = s32[] parameter(1)
  %d = f32[2]{0} dynamic-slice(%p0, %i), dynamic_slice_sizes={2}
  %z = f32[] constant(0)
  %pad = f32[9]{0} pad(%p0, %z), padding=-1_2_1
  %pad2 = f32[5,7]{1,0} pad(%b, %z), padding=0_0_0x1_2_0
  %io = s32[3,4]{1,0} iota(), iota_dimension=1
  %t = (f32[4]{0}) tuple(%p0)
  ROOT %g = f32[4]{0} get-tuple-element(%t), index=0)"));
  ASSERT_NE(module, nullptr);
  EXPECT_THAT(Find(*module, "b").dimensions, ElementsAre(1));
  EXPECT_EQ(Find(*module, "s").slice, (std::vector<SliceDimension>{{1, 4, 2}}));
  EXPECT_EQ(Find(*module, "s2").slice,
            (std::vector<SliceDimension>{{0, 2, 1}, {1, 3, 1}}));
  EXPECT_THAT(Find(*module, "d").dynamic_slice_sizes, ElementsAre(2));
  EXPECT_EQ(Find(*module, "pad").padding,
            (std::vector<PaddingDimension>{{-1, 2, 1}}));
  EXPECT_EQ(Find(*module, "pad2").padding,
            (std::vector<PaddingDimension>{{0, 0, 0}, {1, 2, 0}}));
  EXPECT_EQ(Find(*module, "io").iota_dimension, 1);
  EXPECT_EQ(Find(*module, "g").tuple_index, 0);
}

TEST(AttributeTest, ReadsCompareDirectionAndType) {
  auto module =
      MustParse(Entry("  %a = pred[4]{0} compare(%p0, %p0), direction=GE\n"
                      "  ROOT %b = pred[4]{0} compare(%p0, %p0), direction=NE, "
                      "type=TOTALORDER"));
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Find(*module, "a").comparison_direction, ComparisonDirection::kGe);
  EXPECT_EQ(Find(*module, "a").comparison_type, ComparisonType::kDefault);
  EXPECT_EQ(Find(*module, "b").comparison_direction, ComparisonDirection::kNe);
  EXPECT_EQ(Find(*module, "b").comparison_type, ComparisonType::kTotalOrder);
  EXPECT_THAT(ParseError(Entry("  ROOT %a = pred[4]{0} compare(%p0, %p0), "
                               "direction=XX")),
              HasSubstr("line 5:53: expected a comparison direction"));
}

TEST(AttributeTest, ReadsDotDimensionNumbers) {
  auto module = MustParse(Entry(
      "  ROOT %d = f32[2,3,5]{2,1,0} dot(%p0, %p0), lhs_batch_dims={0}, "
      "lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
      "f32[2,3,4]{2,1,0}"));
  ASSERT_NE(module, nullptr);
  const DotDimensionNumbers& d = Find(*module, "d").dot_dimension_numbers;
  EXPECT_THAT(d.lhs_batch_dims, ElementsAre(0));
  EXPECT_THAT(d.lhs_contracting_dims, ElementsAre(2));
  EXPECT_THAT(d.rhs_batch_dims, ElementsAre(0));
  EXPECT_THAT(d.rhs_contracting_dims, ElementsAre(1));
}

TEST(AttributeTest, ReadsConvolutionWindowAndDimLabels) {
  auto module = MustParse(Entry(
      "  ROOT %c = f32[1,4,8,8]{3,2,1,0} convolution(%p0, %p0), "
      "window={size=3x5 stride=1x2 pad=1_1x-2_2 lhs_dilate=1x3 rhs_dilate=2x1 "
      "rhs_reversal=0x1}, dim_labels=bf01_oi10->1b0f, feature_group_count=2, "
      "batch_group_count=3",
      "f32[1,3,8,8]{3,2,1,0}"));
  ASSERT_NE(module, nullptr);
  const Instruction& c = Find(*module, "c");
  ASSERT_EQ(c.window.size(), 2u);
  EXPECT_EQ(c.window[0], (WindowDimension{3, 1, 1, 1, 2, 1, false}));
  EXPECT_EQ(c.window[1], (WindowDimension{5, 2, -2, 2, 1, 3, true}));
  const ConvolutionDimensionNumbers& n = c.convolution_dimension_numbers;
  EXPECT_EQ(n.input_batch_dimension, 0);
  EXPECT_EQ(n.input_feature_dimension, 1);
  EXPECT_THAT(n.input_spatial_dimensions, ElementsAre(2, 3));
  EXPECT_EQ(n.kernel_output_feature_dimension, 0);
  EXPECT_EQ(n.kernel_input_feature_dimension, 1);
  EXPECT_THAT(n.kernel_spatial_dimensions, ElementsAre(3, 2));
  EXPECT_EQ(n.output_batch_dimension, 1);
  EXPECT_EQ(n.output_feature_dimension, 3);
  EXPECT_THAT(n.output_spatial_dimensions, ElementsAre(2, 0));
  EXPECT_EQ(c.feature_group_count, 2);
  EXPECT_EQ(c.batch_group_count, 3);
}

TEST(AttributeTest, RefusesMalformedWindowsAndDimLabels) {
  EXPECT_THAT(ParseError(Entry("  ROOT %c = f32[4]{0} convolution(%p0, %p0), "
                               "window={size=3x3 stride=1}, "
                               "dim_labels=b0f_0io->b0f")),
              HasSubstr("window stride has 1 dimensions but size has 2"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = f32[4]{0} convolution(%p0, %p0), "
                               "window={size=3 bogus=1}")),
              HasSubstr("unknown window field 'bogus'"));
  EXPECT_THAT(ParseError(Entry("  ROOT %c = f32[4]{0} convolution(%p0, %p0), "
                               "dim_labels=b0f_0io->b1f")),
              HasSubstr("bad dim_labels 'b0f_0io->b1f'"));
}

TEST(AttributeTest, ReadsGatherAndScatterDimensionNumbers) {
  auto module = MustParse(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[10,3] parameter(0)
  i = s32[3,1] parameter(1)
  u = f32[3,1,3] parameter(2)
  g = f32[3,1,3] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, operand_batching_dims={}, index_vector_dim=1, slice_sizes={1,3}, indices_are_sorted=true
  ROOT sc = f32[10,3] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, input_batching_dims={5}, scatter_indices_batching_dims={6}, unique_indices=true, to_apply=add
}
)");
  ASSERT_NE(module, nullptr);
  const Instruction& g = Find(*module, "g");
  EXPECT_THAT(g.gather_dimension_numbers.offset_dims, ElementsAre(1, 2));
  EXPECT_THAT(g.gather_dimension_numbers.start_index_map, ElementsAre(0));
  EXPECT_EQ(g.gather_dimension_numbers.index_vector_dim, 1);
  EXPECT_THAT(g.gather_slice_sizes, ElementsAre(1, 3));
  EXPECT_TRUE(g.indices_are_sorted);
  EXPECT_FALSE(g.unique_indices);
  const Instruction& s = Find(*module, "sc");
  const ScatterDimensionNumbers& n = s.scatter_dimension_numbers;
  EXPECT_THAT(n.update_window_dims, ElementsAre(1, 2));
  EXPECT_THAT(n.scatter_dims_to_operand_dims, ElementsAre(0));
  EXPECT_EQ(n.index_vector_dim, 1);
  EXPECT_THAT(n.input_batching_dims, ElementsAre(5));
  EXPECT_THAT(n.scatter_indices_batching_dims, ElementsAre(6));
  EXPECT_TRUE(s.unique_indices);
  EXPECT_EQ(s.to_apply()->name(), "add");
}

constexpr std::string_view kCalleeModule = R"(HloModule m
c0 {
  ROOT a = pred[] parameter(0)
}
c1 {
  ROOT a = pred[] parameter(0)
}
c2 {
  ROOT a = pred[] parameter(0)
}
ENTRY e {
  p = pred[] parameter(0)
  i = s32[] parameter(1)
  w = pred[] while(p), body=c1, condition=c0
  t = pred[] conditional(p, p, p), false_computation=c2, true_computation=c0
  b = pred[] conditional(i, p, p, p), branch_computations={c2, %c0, c1}
  f = pred[] fusion(p), kind=kOutput, calls=c1
  s = pred[] sort(p), dimensions={0}, is_stable=true, to_apply=c2
  ROOT ss = pred[] select-and-scatter(p, p, p), window={size=1}, scatter=c1, select=c2
}
)";

TEST(AttributeTest, FillsCalledComputationsInDocumentedOrder) {
  auto module = MustParse(kCalleeModule);
  ASSERT_NE(module, nullptr);
  auto names = [&](std::string_view inst) {
    std::vector<std::string> result;
    for (const Computation* c : Find(*module, inst).called_computations) {
      result.push_back(c->name());
    }
    return result;
  };
  EXPECT_THAT(names("w"), ElementsAre("c0", "c1"));
  EXPECT_THAT(names("t"), ElementsAre("c0", "c2"));
  EXPECT_THAT(names("b"), ElementsAre("c2", "c0", "c1"));
  EXPECT_THAT(names("f"), ElementsAre("c1"));
  EXPECT_EQ(Find(*module, "f").fusion_kind, FusionKind::kOutput);
  EXPECT_THAT(names("s"), ElementsAre("c2"));
  EXPECT_TRUE(Find(*module, "s").is_stable);
  EXPECT_THAT(names("ss"), ElementsAre("c2", "c1"));
}

TEST(AttributeTest, ReadsRngAlgorithmAndReducePrecisionBits) {
  EXPECT_THAT(ParseError(Entry("  ROOT %p = f32[4]{0} reduce-precision(%p1), "
                               "exponent_bits=5, mantissa_bits=10")),
              HasSubstr("unknown operand '%p1'"));
  auto module = MustParse(
      Entry("  %r = (u64[2]{0}, u32[4]{0}) rng-bit-generator(%p0), "
            "algorithm=rng_philox\n"
            "  %f = f32[4]{0} parameter(1)\n"
            "  ROOT %p = f32[4]{0} reduce-precision(%f), exponent_bits=5, "
            "mantissa_bits=10",
            "u64[2]{0}"));
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Find(*module, "r").rng_algorithm, RandomAlgorithm::kPhilox);
  EXPECT_EQ(Find(*module, "p").exponent_bits, 5);
  EXPECT_EQ(Find(*module, "p").mantissa_bits, 10);
}

TEST(AttributeTest, ReadsExplicitAndEmptyReplicaGroups) {
  auto module = MustParse(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  ar = f32[4] all-reduce(x), channel_id=3, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, constrain_layout=true, to_apply=add
  ROOT br = f32[4] all-reduce(x), replica_groups={}, to_apply=add
}
)");
  ASSERT_NE(module, nullptr);
  const Instruction& a = Find(*module, "ar");
  EXPECT_EQ(a.replica_groups.groups,
            (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  EXPECT_FALSE(a.replica_groups.iota.has_value());
  EXPECT_EQ(a.channel_id, 3);
  EXPECT_TRUE(a.use_global_device_ids);
  EXPECT_TRUE(a.constrain_layout);
  const Instruction& b = Find(*module, "br");
  EXPECT_TRUE(b.replica_groups.groups.empty());
  EXPECT_FALSE(b.channel_id.has_value());
}

TEST(AttributeTest, ExpandsIotaReplicaGroupsAndKeepsTheIotaForm) {
  auto module = MustParse(Entry(
      "  %a = f32[32]{0} all-gather(%p0), replica_groups=[2,4]<=[4,2]T(1,0), "
      "dimensions={0}\n"
      "  ROOT %b = f32[80]{0} all-gather(%p0), "
      "replica_groups=[2,10]<=[4,5]T(1,0), dimensions={0}"));
  ASSERT_NE(module, nullptr);
  const ReplicaGroups& a = Find(*module, "a").replica_groups;
  EXPECT_EQ(a.groups,
            (std::vector<std::vector<int64_t>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  ASSERT_TRUE(a.iota.has_value());
  EXPECT_EQ(a.iota->num_groups, 2);
  EXPECT_EQ(a.iota->group_size, 4);
  EXPECT_THAT(a.iota->reshape_dims, ElementsAre(4, 2));
  EXPECT_THAT(a.iota->transpose_perm, ElementsAre(1, 0));
  const ReplicaGroups& b = Find(*module, "b").replica_groups;
  EXPECT_THAT(b.groups[0], ElementsAre(0, 5, 10, 15, 1, 6, 11, 16, 2, 7));
  EXPECT_THAT(b.groups[1], ElementsAre(12, 17, 3, 8, 13, 18, 4, 9, 14, 19));
}

TEST(AttributeTest, ReadsMeshAxesReplicaGroupsAsIota) {
  auto module = MustParse(Entry(
      "  %a = f32[4]{0} all-reduce(%p0), "
      "replica_groups=mesh['axis_0'=2,'axis_1'=1,'axis_2'=4] {'axis_0'}\n"
      "  %b = f32[4]{0} all-reduce(%p0), replica_groups=mesh[x=2,y=4] {y,x}\n"
      "  ROOT %c = f32[4]{0} all-reduce(%p0), "
      "replica_groups=mesh[x=8] {x:(2)2}"));
  ASSERT_NE(module, nullptr);
  const ReplicaGroups& a = Find(*module, "a").replica_groups;
  EXPECT_EQ(a.groups, (std::vector<std::vector<int64_t>>{
                          {0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  ASSERT_TRUE(a.iota.has_value());
  EXPECT_EQ(a.iota->num_groups, 4);
  EXPECT_EQ(a.iota->group_size, 2);
  const ReplicaGroups& b = Find(*module, "b").replica_groups;
  EXPECT_EQ(b.groups,
            (std::vector<std::vector<int64_t>>{{0, 4, 1, 5, 2, 6, 3, 7}}));
  // Sub-axis (2)2 of an axis of 8: devices whose index bit 1 varies.
  const ReplicaGroups& c = Find(*module, "c").replica_groups;
  EXPECT_EQ(c.groups, (std::vector<std::vector<int64_t>>{
                          {0, 2}, {1, 3}, {4, 6}, {5, 7}}));
}

TEST(AttributeTest, ReadsMeshReplicaGroupsWithDeviceOrder) {
  auto module = MustParse(Entry(
      "  %a = f32[4]{0} all-reduce(%p0), replica_groups=mesh['axis_0'=4,"
      "'axis_1'=1,'axis_2'=2], device_ids=([2,4]T(1,0)) {'axis_0'}\n"
      "  ROOT %b = f32[4]{0} all-reduce(%p0), replica_groups=mesh[x=4,y=2], "
      "device_ids=(0,4,1,5,2,6,3,7) {x}"));
  ASSERT_NE(module, nullptr);
  for (std::string_view name : {"a", "b"}) {
    const ReplicaGroups& groups = Find(*module, name).replica_groups;
    EXPECT_EQ(groups.groups,
              (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}))
        << name;
    EXPECT_FALSE(groups.iota.has_value()) << name;
  }
  EXPECT_THAT(ParseError(Entry("  ROOT %a = f32[4]{0} all-reduce(%p0), "
                               "replica_groups=mesh[x=4], device_ids=(0,1) "
                               "{x}")),
              HasSubstr("mesh device_ids has 2 entries, the mesh has 4"));
}

TEST(AttributeTest, RefusesIotaReplicaGroupsThatDoNotCoverTheDevices) {
  EXPECT_THAT(ParseError(Entry("  ROOT %a = f32[4]{0} all-reduce(%p0), "
                               "replica_groups=[2,3]<=[8]")),
              HasSubstr("line 5:55: replica groups [2,3] do not cover the 8 "
                        "devices of the iota"));
  EXPECT_THAT(ParseError(Entry("  ROOT %a = f32[4]{0} all-reduce(%p0), "
                               "replica_groups=[2,4]<=[4,2]T(0,0)")),
              HasSubstr("is not a permutation"));
  EXPECT_THAT(ParseError(Entry("  ROOT %a = f32[4]{0} all-reduce(%p0), "
                               "replica_groups=[1,1099511627776]<=["
                               "1099511627776]")),
              HasSubstr("more than"));
}

TEST(AttributeTest, ReadsCollectivePermutePairsAndCustomCallTarget) {
  auto module = MustParse(
      Entry("  %cp = f32[4]{0} collective-permute(%p0), channel_id=1, "
            "source_target_pairs={{0,1},{1,2},{7,0}}\n"
            "  ROOT %cc = f32[4]{0} custom-call(%cp), "
            "custom_call_target=\"my\\\"target\", "
            "api_version=API_VERSION_TYPED_FFI"));
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Find(*module, "cp").source_target_pairs,
            (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}, {7, 0}}));
  EXPECT_EQ(Find(*module, "cp").channel_id, 1);
  EXPECT_EQ(Find(*module, "cc").custom_call_target, "my\"target");
  EXPECT_THAT(Find(*module, "cc").raw_attributes,
              ElementsAre(Pair("api_version", "API_VERSION_TYPED_FFI")));
}

TEST(AttributeTest, RefusesDuplicateInterpretedAttributes) {
  EXPECT_THAT(ParseError(Entry("  ROOT %b = f32[2,4]{1,0} broadcast(%p0), "
                               "dimensions={1}, dimensions={1}")),
              HasSubstr("line 5:59: duplicate attribute 'dimensions' on 'b'"));
}

// ---------------------------------------------------------------------------
// Shardings.

TEST(ShardingTest, ReadsReplicatedManualAndMaximal) {
  EXPECT_EQ(ParseSharding("{replicated}")->kind, Sharding::Kind::kReplicated);
  EXPECT_EQ(ParseSharding("{manual}")->kind, Sharding::Kind::kManual);
  absl::StatusOr<Sharding> maximal = ParseSharding("{maximal device=3}");
  ASSERT_TRUE(maximal.ok()) << maximal.status();
  EXPECT_EQ(maximal->kind, Sharding::Kind::kMaximal);
  EXPECT_EQ(maximal->maximal_device, 3);
}

TEST(ShardingTest, ReadsExplicitTileAssignmentWithReplicatedLastDim) {
  absl::StatusOr<Sharding> s =
      ParseSharding("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, Sharding::Kind::kTiled);
  EXPECT_THAT(s->tile_dims, ElementsAre(2, 1, 2));
  EXPECT_THAT(s->tile_devices, ElementsAre(0, 2, 1, 3));
  EXPECT_TRUE(s->last_tile_dim_replicate);
  EXPECT_FALSE(s->iota.has_value());
}

TEST(ShardingTest, ExpandsIotaTileAssignments) {
  absl::StatusOr<Sharding> s =
      ParseSharding("{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->tile_devices, ElementsAre(0, 4, 1, 5, 2, 6, 3, 7));
  ASSERT_TRUE(s->iota.has_value());
  EXPECT_THAT(s->iota->reshape_dims, ElementsAre(2, 4));
  EXPECT_THAT(s->iota->transpose_perm, ElementsAre(1, 0));
  absl::StatusOr<Sharding> plain = ParseSharding("{devices=[2,1]<=[2]}");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(plain->tile_devices, ElementsAre(0, 1));
}

TEST(ShardingTest, ReadsLastTileDimsSubgroups) {
  absl::StatusOr<Sharding> s = ParseSharding(
      "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->last_tile_dims, ElementsAre("manual", "replicated"));
  EXPECT_EQ(s->tile_devices.size(), 8u);
}

TEST(ShardingTest, ReadsTupleShardings) {
  absl::StatusOr<Sharding> s = ParseSharding(
      "{{replicated}, {devices=[2]0,1}, {maximal device=1}, {{manual}}}");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, Sharding::Kind::kTuple);
  ASSERT_EQ(s->tuple_elements.size(), 4u);
  EXPECT_THAT(s->tuple_elements[1].tile_devices, ElementsAre(0, 1));
  EXPECT_EQ(s->tuple_elements[3].tuple_elements[0].kind,
            Sharding::Kind::kManual);
}

TEST(ShardingTest, KeepsUnknownFormsAsRawText) {
  for (std::string_view text :
       {"{unknown}", "{replicated shard_as 1}", "{devices=[2]0,1 foo}",
        "{something {nested} \"str}\"}"}) {
    absl::StatusOr<Sharding> s = ParseSharding(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status();
    EXPECT_EQ(s->kind, Sharding::Kind::kUnknown) << text;
    EXPECT_EQ(s->unknown_text, text);
  }
}

TEST(ShardingTest, DropsShardingMetadata) {
  absl::StatusOr<Sharding> s =
      ParseSharding("{replicated metadata={op_name=\"a\"}}");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, Sharding::Kind::kReplicated);
}

TEST(ShardingTest, RefusesDeviceCountsThatDoNotMatchTheTiles) {
  absl::StatusOr<Sharding> s = ParseSharding("{devices=[2,2]0,1,2}");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "line 1:15: tile assignment [2,2] needs 4 devices, got 3");
  EXPECT_THAT(
      std::string(ParseSharding("{devices=[2,2]<=[8]}").status().message()),
      HasSubstr("iota device list has 8 devices but the tile "
                "assignment needs 4"));
  EXPECT_FALSE(
      ParseSharding("{devices=[1048576,1048576]<=[1099511627776]}").ok());
}

TEST(ShardingTest, IsReadFromInstructions) {
  auto module = MustParse(
      Entry("  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%p0, %p0), "
            "sharding={{devices=[2]<=[2]}, {replicated}}, metadata={}"));
  ASSERT_NE(module, nullptr);
  const Instruction& t = Find(*module, "t");
  ASSERT_TRUE(t.sharding.has_value());
  EXPECT_EQ(t.sharding->tuple_elements.size(), 2u);
  EXPECT_THAT(t.raw_attributes, ElementsAre(Pair("metadata", "{}")));
}

// ---------------------------------------------------------------------------
// Errors.

TEST(ErrorTest, ReportsExpectedAndGotWithPosition) {
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  a = f32[] parameter(0\n}"),
            "line 4:1: expected ')', got '}'");
  EXPECT_EQ(ParseError("HloModul m"),
            "line 1:1: expected 'HloModule', got 'HloModul'");
  EXPECT_EQ(ParseError(""), "line 1:1: expected 'HloModule', got end of input");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n"),
            "line 4:1: expected '}', got end of input");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  a f32[] parameter(0)\n}"),
            "line 3:5: expected '=', got 'f32'");
}

TEST(ErrorTest, NamesUnknownOperandsAndTheirComputation) {
  EXPECT_EQ(ParseError("HloModule m\nENTRY %bar {\n  %a = f32[] parameter(0)\n"
                       "  ROOT %b = f32[] add(%a, %foo)\n}"),
            "line 4:27: unknown operand '%foo' in computation 'bar'");
}

TEST(ErrorTest, RefusesDuplicateNames) {
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n"
                       "  a = f32[] negate(a)\n}"),
            "line 4:3: duplicate instruction name '%a' in computation 'e'");
  EXPECT_EQ(ParseError("HloModule m\nc {\n ROOT a = f32[] parameter(0)\n}\n"
                       "c {\n ROOT a = f32[] parameter(0)\n}"),
            "line 5:1: duplicate computation name '%c'");
}

TEST(ErrorTest, RefusesStructuralMistakes) {
  EXPECT_THAT(ParseError("HloModule m\nENTRY e {\n ROOT a = f32[] "
                         "parameter(0)\n ROOT b = f32[] negate(a)\n}"),
              HasSubstr("line 4:2: computation 'e' has more than one ROOT ('a' "
                        "and 'b')"));
  EXPECT_THAT(ParseError("HloModule m\nENTRY e {\n}"),
              HasSubstr("line 2:1: computation 'e' has no instructions"));
  EXPECT_THAT(ParseError("HloModule m\nENTRY a {\n ROOT x = f32[] "
                         "parameter(0)\n}\nENTRY b {\n ROOT x = f32[] "
                         "parameter(0)\n}"),
              HasSubstr("more than one ENTRY computation ('a' and 'b')"));
  EXPECT_THAT(ParseError("HloModule m\nENTRY e {\n ROOT x = f32[] "
                         "parameter(1)\n}"),
              HasSubstr("computation 'e' has no parameter(0)"));
  EXPECT_THAT(
      ParseError("HloModule m\nENTRY e {\n x = f32[] parameter(0)\n"
                 " ROOT y = f32[] parameter(0)\n}"),
      HasSubstr("line 4:27: duplicate parameter(0) in computation 'e'"));
  EXPECT_THAT(ParseError("HloModule m"),
              HasSubstr("module has no computations"));
}

TEST(ErrorTest, RefusesUnknownOrMissingCalledComputations) {
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n x = f32[] parameter(0)\n"
                       " ROOT c = f32[] call(x), to_apply=%nope\n}"),
            "line 4:35: unknown computation '%nope'");
  EXPECT_THAT(ParseError("HloModule m\nc {\n ROOT a = pred[] parameter(0)\n}\n"
                         "ENTRY e {\n x = pred[] parameter(0)\n"
                         " ROOT w = pred[] while(x), condition=c\n}"),
              HasSubstr("line 7:2: while 'w' is missing body="));
}

TEST(ErrorTest, RefusesUnterminatedStringsAndBrackets) {
  EXPECT_THAT(ParseError(Entry("  ROOT %n = f32[4]{0} negate(%p0), "
                               "metadata={op_name=\"abc}")),
              HasSubstr("line 5:54: unterminated string"));
  EXPECT_THAT(ParseError(Entry("  ROOT %n = f32[4]{0} negate(%p0), "
                               "metadata={op_name=\"abc\"")),
              HasSubstr("expected '}', got end of input"));
  EXPECT_THAT(ParseError(Entry("  ROOT %n = f32[4]{0} negate(%p0), "
                               "metadata={a=(b]}")),
              HasSubstr("expected ')', got ']' in attribute 'metadata'"));
}

TEST(ErrorTest, RefusesDeeplyNestedAttributesWithoutCrashing) {
  std::string deep = std::string(5000, '{') + std::string(5000, '}');
  EXPECT_THAT(ParseError(Entry("  ROOT %n = f32[4]{0} negate(%p0), x=" + deep)),
              HasSubstr("nests deeper than 256"));
  std::string sharding = std::string(5000, '{') + std::string(5000, '}');
  EXPECT_THAT(ParseError(Entry("  ROOT %n = f32[4]{0} negate(%p0), sharding=" +
                               sharding)),
              HasSubstr("sharding nests deeper than 256"));
}

TEST(ErrorTest, BoundsTheDeviceIdsAModuleMayExpandTo) {
  std::string body;
  for (int i = 0; i < 17; ++i) {
    absl::StrAppend(&body, "  %g", i,
                    " = f32[4]{0} all-gather(%p0), "
                    "replica_groups=[1,1048576]<=[1048576], dimensions={0}\n");
  }
  EXPECT_THAT(ParseError(Entry(body)),
              HasSubstr("line 20:52: replica groups and tile assignments of "
                        "this module expand to more than 16777216 device ids"));
}

// ---------------------------------------------------------------------------
// Regression inputs found by the fuzzer: each must give a clean error.

TEST(RegressionTest, FuzzerFindingsGiveCleanErrorsOrRoundTrip) {
  std::filesystem::path dir = std::filesystem::path(__FILE__)
                                  .parent_path()
                                  .parent_path()
                                  .parent_path()
                                  .parent_path() /
                              "tests" / "parser_regressions";
  ASSERT_TRUE(std::filesystem::exists(dir)) << dir;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream file(entry.path(), std::ios::binary);
    std::stringstream text;
    text << file.rdbuf();
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModule(text.str());
    if (!module.ok()) {
      EXPECT_EQ(module.status().code(), absl::StatusCode::kInvalidArgument)
          << entry.path();
      EXPECT_THAT(std::string(module.status().message()), HasSubstr("line "))
          << entry.path();
    } else {
      // What parses must print as text that parses back the same.
      std::string printed = PrintModule(**module);
      absl::StatusOr<std::unique_ptr<Module>> reparsed = ParseModule(printed);
      ASSERT_TRUE(reparsed.ok()) << entry.path() << ": " << reparsed.status();
      std::string diff;
      EXPECT_TRUE(ModulesEqual(**module, **reparsed, &diff))
          << entry.path() << ": " << diff;
    }
    ++count;
  }
  EXPECT_GT(count, 0);
}

}  // namespace parser_test
}  // namespace causeway::hlo
