#include "causeway/hlo/printer.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/hlo/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::hlo {
namespace printer_test {

using ::testing::HasSubstr;

std::unique_ptr<Module> MustParse(std::string_view text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModule(text);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return nullptr;
  return std::move(module).value();
}

// Parses `text`, prints it, parses the print and checks that the two
// modules are equal and that printing is stable.
void ExpectRoundTrip(std::string_view text, std::string_view what) {
  SCOPED_TRACE(std::string(what));
  std::unique_ptr<Module> first = MustParse(text);
  ASSERT_NE(first, nullptr);
  std::string printed = PrintModule(*first);
  std::unique_ptr<Module> second = MustParse(printed);
  ASSERT_NE(second, nullptr) << printed;
  std::string diff;
  EXPECT_TRUE(ModulesEqual(*first, *second, &diff)) << diff << "\n" << printed;
  EXPECT_EQ(PrintModule(*second), printed);
}

std::filesystem::path TestdataDir() {
  return std::filesystem::path(__FILE__).parent_path() / "testdata";
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(PrinterTest, RoundTripsEveryJaxCompiledTestdataModule) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TestdataDir())) {
    if (entry.path().extension() != ".hlo") continue;
    ExpectRoundTrip(ReadFile(entry.path()), entry.path().filename().string());
    ++count;
  }
  EXPECT_GE(count, 20);
}

TEST(PrinterTest, ReprintsJaxOutputCloseToHowXlaPrintedIt) {
  std::string text = ReadFile(TestdataDir() / "shard_map_collectives.hlo");
  std::unique_ptr<Module> module = MustParse(text);
  ASSERT_NE(module, nullptr);
  std::string printed = PrintModule(*module);
  // Lines without mesh-style replica groups come back word for word.
  for (std::string_view line :
       {"  %param.1 = f32[8]{0} parameter(0), sharding={devices=[8]<=[8]}, "
        "metadata={op_name=\"x\"}",
        "  %ppermute.3 = f32[8]{0} collective-permute(%param.1), channel_id=1, "
        "source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}",
        "StackFrames\n1 {file_location_id=1 parent_frame_id=1}",
        "HloModule jit_sm, is_scheduled=true"}) {
    EXPECT_THAT(printed, HasSubstr(std::string(line)));
  }
}

constexpr std::string_view kEveryAttribute =
    R"(HloModule every_attribute, entry_computation_layout={(f32[4]{0})->f32[4]{0}}, num_partitions=4, replica_count=2

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}, execution_thread="main"

%less (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %lt = pred[] compare(%a, %b), direction=LT, type=TOTALORDER
}

%cond (t: (s32[], f32[4])) -> pred[] {
  %t = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %n = s32[] constant(5)
  ROOT %c = pred[] compare(%i, %n), direction=LT
}

%body (t: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[4]{0} get-tuple-element(%t), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  ROOT %r = (s32[], f32[4]{0}) tuple(%i2, %x)
}

%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %e = f32[4]{0} exponential(%p)
}

ENTRY %main (x: f32[4], idx: s32[3,1], img: f32[1,8,8,3], w: f32[3,3,3,4]) -> f32[4] {
  %x = f32[4]{0} parameter(0), sharding={devices=[2,2]<=[4] last_tile_dim_replicate}, metadata={op_name="x"}
  %idx = s32[3,1]{1,0} parameter(1), sharding={replicated}
  %img = f32[1,8,8,3]{3,2,1,0} parameter(2)
  %w = f32[3,3,3,4]{3,2,1,0} parameter(3)
  %c0 = f32[] constant(0)
  %big = f32[12]{0} constant({0, 1.5, -2, 3.25, inf, -inf, nan, -0, 1e-45, 3.40282347e+38, 0.1, 7})
  %tc = (f32[2]{0}, (pred[], s64[])) constant(({1, 2}, (true, -9223372036854775808)))
  %u = u64[2]{0} constant({18446744073709551615, 0})
  %h = f16[3]{0} constant({65504, nan(0x1), -inf})
  %bf = bf16[2,2]{0,1} constant({ {1, 2}, {3, 4} })
  %empty = f32[0,2]{1,0} constant({})
  %b = f32[2,4]{1,0} broadcast(%x), dimensions={1}
  %tr = f32[4,2]{0,1} transpose(%b), dimensions={1,0}
  %rv = f32[4]{0} reverse(%x), dimensions={0}
  %sl = f32[2]{0} slice(%x), slice={[0:4:2]}
  %zero = s32[] constant(0)
  %ds = f32[2]{0} dynamic-slice(%x, %zero), dynamic_slice_sizes={2}
  %pd = f32[9]{0} pad(%x, %c0), padding=1_2_1
  %io = s32[4,3]{1,0} iota(), iota_dimension=1
  %cmp = pred[4]{0} compare(%x, %x), direction=GE
  %dt = f32[] dot(%x, %x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, operand_precision={highest,highest}
  %cv = f32[1,8,8,4]{3,2,1,0} convolution(%img, %w), window={size=3x3 stride=1x1 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f, feature_group_count=1
  %g = f32[3,1]{1,0} gather(%x, %idx), offset_dims={1}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}, indices_are_sorted=true
  %upd = f32[3]{0} constant({1, 2, 3})
  %sc = f32[4]{0} scatter(%x, %idx, %upd), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=%add
  %red = f32[] reduce(%x, %c0), dimensions={0}, to_apply=%add
  %rw = f32[4]{0} reduce-window(%x, %c0), window={size=2 pad=0_1}, to_apply=%add
  %srt = f32[4]{0} sort(%x), dimensions={0}, is_stable=true, to_apply=%less
  %fu = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused, backend_config={"outer_dimension_partitions":[]}
  %init = (s32[], f32[4]{0}) tuple(%zero, %x)
  %wh = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"5"}}
  %p = pred[] constant(true)
  %cd = f32[4]{0} conditional(%p, %x, %x), true_computation=%fused, false_computation=%fused
  %cd2 = f32[4]{0} conditional(%zero, %x, %x), branch_computations={%fused, %fused}
  %cl = f32[4]{0} call(%x), to_apply=%fused, frontend_attributes={xla_cpu_small_call="true"}
  %rbg = (u64[2]{0}, u32[4]{0}) rng-bit-generator(%u), algorithm=rng_three_fry
  %rp = f32[4]{0} reduce-precision(%x), exponent_bits=8, mantissa_bits=7
  %ar = f32[4]{0} all-reduce(%x), channel_id=1, replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true, to_apply=%add
  %ar2 = f32[4]{0} all-reduce(%x), replica_groups={}, to_apply=%add
  %ag = f32[8]{0} all-gather(%x), channel_id=2, replica_groups={{0,1},{2,3}}, dimensions={0}, use_global_device_ids=true
  %rs = f32[2]{0} reduce-scatter(%x), channel_id=3, replica_groups={{0,1},{2,3}}, dimensions={0}, to_apply=%add
  %a2a = f32[4]{0} all-to-all(%x), channel_id=4, replica_groups={{0,1,2,3}}, dimensions={0}, constrain_layout=true
  %a2at = (f32[4]{0}, f32[4]{0}) all-to-all(%x, %x), channel_id=5, replica_groups={{0,1}}
  %cp = f32[4]{0} collective-permute(%x), channel_id=6, source_target_pairs={{0,1},{1,0}}
  %pid = u32[] partition-id()
  %rid = u32[] replica-id()
  %cc = f32[4]{0} custom-call(%x), custom_call_target="my\"target", api_version=API_VERSION_TYPED_FFI, sharding={{maximal device=0}}
  %cc2 = f32[4]{0} custom-call(%x), custom_call_target="TopK", called_computations={%add, %fused}
  %mp = f32[4]{0} map(%x, %x), dimensions={0}, to_apply=%add
  %un = f32[4]{0} some-future-op(%x, %x), mystery={a, b}, sharding={devices=[4]0,2,1,3}
  %ob = (f32[4]{0}) opt-barrier(%x)
  ROOT %out = f32[4]{0} add(%fu, %x), control-predecessors={%un}, sharding={devices=[2,2]<=[4] last_tile_dims={manual}}
}
)";

TEST(PrinterTest, RoundTripsEveryInterpretedAttribute) {
  ExpectRoundTrip(kEveryAttribute, "every attribute");
}

TEST(PrinterTest, PrintsEveryInstructionOfAHandWrittenModuleAsWritten) {
  std::unique_ptr<Module> module = MustParse(kEveryAttribute);
  ASSERT_NE(module, nullptr);
  std::string printed = PrintModule(*module);
  for (std::string_view line : {
           "  %big = f32[12]{0} constant({0, 1.5, -2, 3.25, inf, -inf, nan, "
           "-0, 1e-45, 3.4028235e+38, 0.1, 7})",
           "  %bf = bf16[2,2]{0,1} constant({ {1, 2}, {3, 4} })",
           "  %h = f16[3]{0} constant({65504, nan(0x1), -inf})",
           "  %pd = f32[9]{0} pad(%x, %c0), padding=1_2_1",
           "  %cv = f32[1,8,8,4]{3,2,1,0} convolution(%img, %w), "
           "window={size=3x3 pad=1_1x1_1 rhs_reversal=0x1}, "
           "dim_labels=b01f_01io->b01f",
           "  %ar = f32[4]{0} all-reduce(%x), channel_id=1, "
           "replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true, "
           "to_apply=%add",
           "  %cd = f32[4]{0} conditional(%p, %x, %x), "
           "true_computation=%fused, false_computation=%fused",
           "  %cc2 = f32[4]{0} custom-call(%x), custom_call_target=\"TopK\", "
           "called_computations={%add, %fused}",
           "  %mp = f32[4]{0} map(%x, %x), dimensions={0}, to_apply=%add",
           "  %un = f32[4]{0} some-future-op(%x, %x), sharding={devices=[4]0,"
           "2,1,3}, mystery={a, b}",
           "ENTRY %main (x: f32[4], idx: s32[3,1], img: f32[1,8,8,3], w: "
           "f32[3,3,3,4]) -> f32[4] {",
           "}, execution_thread=\"main\"",
           "HloModule every_attribute, entry_computation_layout={(f32[4]{0})->"
           "f32[4]{0}}, replica_count=2, num_partitions=4",
       }) {
    EXPECT_THAT(printed, HasSubstr(std::string(line)));
  }
}

TEST(PrinterTest, PrintsConstantsInFullNeverElided) {
  std::string values;
  for (int i = 0; i < 1000; ++i)
    absl::StrAppend(&values, i == 0 ? "" : ", ", i);
  std::unique_ptr<Module> module = MustParse(
      absl::StrCat("HloModule m\nENTRY e {\n  ROOT c = s32[1000]{0} constant({",
                   values, "})\n}\n"));
  ASSERT_NE(module, nullptr);
  std::string printed = PrintModule(*module);
  EXPECT_THAT(printed, HasSubstr(absl::StrCat("constant({", values, "})")));
  EXPECT_THAT(printed, ::testing::Not(HasSubstr("...")));
}

// Prints a literal into a module and parses it back.
Literal ReparseLiteral(const Literal& literal) {
  std::string text = absl::StrCat(
      "HloModule m\nENTRY e {\n  ROOT c = ", literal.shape().ToString(),
      " constant(", PrintLiteralValues(literal), ")\n}\n");
  std::unique_ptr<Module> module = MustParse(text);
  if (module == nullptr) return Literal();
  return *module->entry()->root()->literal;
}

TEST(PrinterTest, PrintsComplexConstantsAsPairsThatParseBackExactly) {
  Literal c64(Shape(PrimitiveType::kC64, {3}));
  auto values = c64.mutable_data<C64>();
  values[0] = C64(1, -2);
  values[1] = C64(0.1f, std::numeric_limits<float>::infinity());
  values[2] = C64(-0.0f, std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(PrintLiteralValues(c64).substr(0, 21), "{(1, -2), (0.1, inf),");
  EXPECT_EQ(ReparseLiteral(c64), c64);
  Literal c128(Shape(PrimitiveType::kC128, {2}));
  c128.mutable_data<C128>()[0] = C128(0.1, -1e-300);
  c128.mutable_data<C128>()[1] = C128(std::nextafter(1.0, 2.0), 3);
  EXPECT_EQ(ReparseLiteral(c128), c128);
}

TEST(PrinterTest, RoundTripsFftAttributes) {
  ExpectRoundTrip(
      "HloModule m\nENTRY e {\n  p = c64[2,4,6]{2,1,0} parameter(0)\n"
      "  ROOT f = f32[2,4,10]{2,1,0} fft(p), fft_type=IRFFT, "
      "fft_length={4,10}\n}\n",
      "irfft");
}

TEST(PrinterTest, EveryHalfPrecisionBitPatternRoundTripsExactly) {
  for (PrimitiveType type : {PrimitiveType::kF16, PrimitiveType::kBF16}) {
    Literal literal(Shape(type, {65536}));
    auto bits = literal.mutable_data<uint16_t>();
    for (int i = 0; i < 65536; ++i) bits[i] = static_cast<uint16_t>(i);
    Literal back = ReparseLiteral(literal);
    ASSERT_EQ(back.shape().ElementCount(), 65536);
    auto back_bits = back.data<uint16_t>();
    int mismatches = 0;
    for (int i = 0; i < 65536; ++i) mismatches += back_bits[i] != bits[i];
    EXPECT_EQ(mismatches, 0) << PrimitiveTypeName(type);
  }
}

TEST(PrinterTest, RandomFloatBitPatternsRoundTripExactly) {
  std::mt19937_64 rng(42);
  Literal f32(Shape(PrimitiveType::kF32, {20000}));
  auto f32_bits = f32.mutable_data<uint32_t>();
  for (auto& b : f32_bits) b = static_cast<uint32_t>(rng());
  f32_bits[0] = 1;           // Smallest subnormal.
  f32_bits[1] = 0x7F7FFFFF;  // Largest finite.
  f32_bits[2] = 0xFFC00001;  // Negative NaN with payload.
  Literal f64(Shape(PrimitiveType::kF64, {20000}));
  auto f64_bits = f64.mutable_data<uint64_t>();
  for (auto& b : f64_bits) b = rng();
  f64_bits[0] = 1;
  f64_bits[1] = 0x7FF0000000000001;
  Literal back32 = ReparseLiteral(f32);
  Literal back64 = ReparseLiteral(f64);
  ASSERT_EQ(back32.shape().ElementCount(), 20000);
  ASSERT_EQ(back64.shape().ElementCount(), 20000);
  EXPECT_EQ(std::memcmp(back32.untyped_data(), f32.untyped_data(), 80000), 0);
  EXPECT_EQ(std::memcmp(back64.untyped_data(), f64.untyped_data(), 160000), 0);
}

TEST(PrinterTest, IntegerExtremesRoundTrip) {
  Literal s64(Shape(PrimitiveType::kS64, {3}));
  auto v = s64.mutable_data<int64_t>();
  v[0] = std::numeric_limits<int64_t>::min();
  v[1] = std::numeric_limits<int64_t>::max();
  v[2] = -1;
  EXPECT_EQ(PrintLiteralValues(s64),
            "{-9223372036854775808, 9223372036854775807, -1}");
  EXPECT_EQ(ReparseLiteral(s64), s64);
  Literal s8(Shape(PrimitiveType::kS8, {2}));
  s8.mutable_data<int8_t>()[0] = -128;
  s8.mutable_data<int8_t>()[1] = 127;
  EXPECT_EQ(PrintLiteralValues(s8), "{-128, 127}");
  EXPECT_EQ(ReparseLiteral(s8), s8);
}

TEST(PrinterTest, PrintsTupleAndNestedLiterals) {
  Literal a(Shape(PrimitiveType::kS32, {2, 2}));
  auto v = a.mutable_data<int32_t>();
  for (int i = 0; i < 4; ++i) v[i] = i;
  Literal t = Literal::MakeTuple(
      {a, Literal::Scalar(PrimitiveType::kPred, true),
       Literal::MakeTuple({Literal::Scalar(PrimitiveType::kF32, 0.5f)})});
  EXPECT_EQ(PrintLiteralValues(t), "({ {0, 1}, {2, 3} }, true, (0.5))");
  EXPECT_EQ(ReparseLiteral(t), t);
}

TEST(PrinterTest, PrintsEveryShardingForm) {
  for (std::string_view text :
       {"{replicated}", "{manual}", "{maximal device=5}",
        "{devices=[2,1]<=[2]}", "{devices=[2,4]<=[4,2]T(1,0)}",
        "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}",
        "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}",
        "{{replicated}, {devices=[2]0,1}, {}}", "{}",
        "{replicated shard_as 1}"}) {
    absl::StatusOr<Sharding> sharding = ParseSharding(text);
    ASSERT_TRUE(sharding.ok()) << text << ": " << sharding.status();
    EXPECT_EQ(PrintSharding(*sharding), text);
  }
}

TEST(PrinterTest, PrintsOneInstructionWithoutIndentation) {
  std::unique_ptr<Module> module = MustParse(
      "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n"
      "  ROOT b = f32[2]{0} add(f32[2] a, a), metadata={op_name=\"x\"}\n}\n");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PrintInstruction(*module->entry()->root()),
            "ROOT %b = f32[2]{0} add(%a, %a), metadata={op_name=\"x\"}");
  EXPECT_EQ(PrintInstruction(*module->entry()->parameter(0)),
            "%a = f32[2] parameter(0)");
}

TEST(PrinterTest, RoundTripsAModuleBuiltInMemory) {
  // Built the way a builder does: no opcode_name, root set on the
  // computation only, no source positions.
  Module module("built");
  auto computation = std::make_unique<Computation>("main");
  computation->set_is_entry(true);
  auto param = std::make_unique<Instruction>();
  param->name = "x";
  param->opcode = Opcode::kParameter;
  param->parameter_number = 0;
  param->shape = Shape(PrimitiveType::kF32, {2, 3});
  param->unique_id = module.NextInstructionId();
  Instruction* x = computation->AddInstruction(std::move(param));
  auto constant = std::make_unique<Instruction>();
  constant->name = "c";
  constant->opcode = Opcode::kConstant;
  constant->shape = Shape(PrimitiveType::kF32, {2, 3});
  constant->literal = Literal(constant->shape);
  constant->literal->mutable_data<float>()[4] = -1.25f;
  constant->unique_id = module.NextInstructionId();
  Instruction* c = computation->AddInstruction(std::move(constant));
  auto add = std::make_unique<Instruction>();
  add->name = "sum";
  add->opcode = Opcode::kAdd;
  add->shape = Shape(PrimitiveType::kF32, {2, 3});
  add->operands = {x, c};
  add->unique_id = module.NextInstructionId();
  computation->set_root(computation->AddInstruction(std::move(add)));
  module.set_entry(module.AddComputation(std::move(computation)));

  std::string printed = PrintModule(module);
  EXPECT_THAT(printed, HasSubstr("ROOT %sum = f32[2,3] add(%x, %c)"));
  EXPECT_THAT(
      printed,
      HasSubstr("%c = f32[2,3] constant({ {0, 0, 0}, {0, -1.25, 0} })"));
  std::unique_ptr<Module> parsed = MustParse(printed);
  ASSERT_NE(parsed, nullptr);
  std::string diff;
  EXPECT_TRUE(ModulesEqual(module, *parsed, &diff)) << diff;
}

TEST(ModulesEqualTest, ReportsTheFirstDifference) {
  std::string base =
      "HloModule m\nENTRY e {\n  a = f32[2]{0} parameter(0)\n"
      "  b = f32[2]{0} broadcast(a), dimensions={0}\n"
      "  ROOT c = f32[2]{0} add(a, b)\n}\n";
  std::unique_ptr<Module> a = MustParse(base);
  ASSERT_NE(a, nullptr);
  std::string diff;
  EXPECT_TRUE(ModulesEqual(*a, *MustParse(base), &diff)) << diff;

  struct Case {
    std::string from, to, message;
  };
  for (const Case& c : std::vector<Case>{
           {"dimensions={0}", "dimensions={}", "instruction 'b': dimensions"},
           {"add(a, b)", "add(b, a)",
            "instruction 'c': operand 0 is 'a' vs 'b'"},
           {"f32[2]{0} add", "f32[2] add", "instruction 'c': shape"},
           {"add(a, b)", "multiply(a, b)", "opcode add vs multiply"},
           {"add(a, b)", "add(a, b), metadata={}", "raw attributes"},
           {"HloModule m", "HloModule n", "module name 'm' vs 'n'"},
       }) {
    std::string changed = base;
    changed.replace(changed.find(c.from), c.from.size(), c.to);
    std::unique_ptr<Module> b = MustParse(changed);
    ASSERT_NE(b, nullptr);
    EXPECT_FALSE(ModulesEqual(*a, *b, &diff)) << c.to;
    EXPECT_THAT(diff, HasSubstr(c.message)) << c.to;
  }
  EXPECT_FALSE(ModulesEqual(*a, *MustParse("HloModule m\nENTRY e {\n  ROOT a "
                                           "= f32[2]{0} parameter(0)\n}\n")));
}

TEST(ModulesEqualTest, ComparesConstantsBitForBit) {
  std::unique_ptr<Module> a = MustParse(
      "HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({nan, 0})\n}\n");
  std::unique_ptr<Module> b = MustParse(
      "HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({nan, -0})\n}\n");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::string diff;
  EXPECT_TRUE(ModulesEqual(*a, *a, &diff));
  EXPECT_FALSE(ModulesEqual(*a, *b, &diff));
  EXPECT_THAT(diff, HasSubstr("constant value"));
}

}  // namespace printer_test
}  // namespace causeway::hlo
