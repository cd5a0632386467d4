// The evaluator under programs too big or too deep to run: each is refused
// with an error naming what is too much, never a crash (std::bad_alloc, a
// stack overflow) and never the kernel's OOM killer.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/exec/evaluator.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/hlo/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace evaluator_limits_test {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::testutil::F32;
using hlo::testutil::Values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class EvaluatorLimitsTest : public ::testing::Test {
 protected:
  absl::Status Load(std::string_view text) {
    auto module = hlo::ParseModule(text);
    if (!module.ok()) return module.status();
    module_ = *std::move(module);
    auto evaluator = Evaluator::Create(*module_);
    if (!evaluator.ok()) return evaluator.status();
    evaluator_ = *std::move(evaluator);
    return absl::OkStatus();
  }
  absl::StatusOr<Literal> Run(std::vector<Literal> args,
                              RunContext context = {}) {
    return evaluator_->Run(args, context);
  }

  std::unique_ptr<hlo::Module> module_;
  std::unique_ptr<Evaluator> evaluator_;
};

constexpr char kAdd[] = R"(
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
)";

TEST_F(EvaluatorLimitsTest, AnIotaTooBigForMemoryNamesTheInstructionAndBytes) {
  ASSERT_TRUE(Load(absl::StrCat("HloModule m\n", kAdd, R"(
ENTRY main {
  zero = f32[] parameter(0)
  i = f32[100000000000] iota(), iota_dimension=0
  ROOT r = f32[] reduce(i, zero), dimensions={0}, to_apply=add
})"))
                  .ok());
  auto result = Run({F32({}, {0})});
  ASSERT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted)
      << result.status();
  EXPECT_THAT(result.status().message(),
              HasSubstr("instruction 'i' (line 11)"));
  EXPECT_THAT(result.status().message(),
              HasSubstr("needs a buffer of 400000000000 bytes"));
}

TEST_F(EvaluatorLimitsTest, ABroadcastTooBigForMemoryIsRefused) {
  ASSERT_TRUE(Load(absl::StrCat("HloModule m\n", kAdd, R"(
ENTRY main {
  x = f32[] parameter(0)
  b = f32[100000,100000] broadcast(x), dimensions={}
  ROOT r = f32[] reduce(b, x), dimensions={0,1}, to_apply=add
})"))
                  .ok());
  auto result = Run({F32({}, {1})});
  ASSERT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted)
      << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr("instruction 'b'"));
  EXPECT_THAT(result.status().message(), HasSubstr("40000000000 bytes"));
}

// Each value is 4000 bytes; only two are alive at once along the chain.
constexpr char kChain[] = R"(
HloModule m
ENTRY main {
  x = f32[1000] parameter(0)
  a = f32[1000] add(x, x)
  b = f32[1000] multiply(a, a)
  c = f32[1000] add(b, b)
  d = f32[1000] multiply(c, c)
  ROOT e = f32[1000] add(d, d)
})";

TEST_F(EvaluatorLimitsTest, ValuesThatDieAreCreditedBackToTheLimit) {
  ASSERT_TRUE(Load(kChain).ok());
  auto result = Run({Literal(Shape(PrimitiveType::kF32, {1000}))},
                    RunContext{.memory_limit_bytes = 8000});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->shape().dims(), (std::vector<int64_t>{1000}));
}

TEST_F(EvaluatorLimitsTest, TheLimitCountsEveryValueTheRunHolds) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  x = f32[1000] parameter(0)
  a = f32[1000] add(x, x)
  b = f32[1000] multiply(x, x)
  c = f32[1000] subtract(x, x)
  ab = f32[1000] add(a, b)
  ROOT abc = f32[1000] add(ab, c)
})")
                  .ok());
  // a, b and c are alive together: 12000 bytes.
  auto refused = Run({Literal(Shape(PrimitiveType::kF32, {1000}))},
                     RunContext{.memory_limit_bytes = 10000});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("instruction 'c' (line 7)"));
  EXPECT_THAT(refused.status().message(), HasSubstr("(8000 bytes held)"));
  // The same evaluator runs the program where it fits.
  auto fits = Run({Literal(Shape(PrimitiveType::kF32, {1000}))},
                  RunContext{.memory_limit_bytes = 16000});
  EXPECT_TRUE(fits.ok()) << fits.status();
}

TEST_F(EvaluatorLimitsTest, AFusionBodyRunsWithinTheLimitOfItsRun) {
  ASSERT_TRUE(Load(R"(
HloModule m
body {
  p = f32[1000] parameter(0)
  b = f32[1000,4] broadcast(p), dimensions={0}
  ROOT t = f32[4,1000] transpose(b), dimensions={1,0}
}
ENTRY main {
  x = f32[1000] parameter(0)
  ROOT f = f32[4,1000] fusion(x), kind=kLoop, calls=body
})")
                  .ok());
  auto refused = Run({Literal(Shape(PrimitiveType::kF32, {1000}))},
                     RunContext{.memory_limit_bytes = 12000});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("16000 bytes"));
}

TEST_F(EvaluatorLimitsTest, AKernelsScratchIsChargedToo) {
  // A bf16 dot converts both operands to f32 copies (1 MiB each): the
  // result alone (512 KiB) would fit the limit, the copies do not.
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  a = bf16[512,512] parameter(0)
  b = bf16[512,512] parameter(1)
  ROOT d = bf16[512,512] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})")
                  .ok());
  const Shape shape(PrimitiveType::kBF16, {512, 512});
  auto refused = Run({Literal(shape), Literal(shape)},
                     RunContext{.memory_limit_bytes = 1536 << 10});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("instruction 'd'"));
  auto fits = Run({Literal(shape), Literal(shape)},
                  RunContext{.memory_limit_bytes = 4 << 20});
  EXPECT_TRUE(fits.ok()) << fits.status();
}

TEST_F(EvaluatorLimitsTest, AComplexDotsOperandCopiesAreCharged) {
  // Both operands are read in place (transposed), but Eigen's complex GEMM
  // gets row-major copies of them (512 KiB each): the result alone (512
  // KiB) would fit the limit, the copies do not.
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  a = c64[256,256] parameter(0)
  b = c64[256,256] parameter(1)
  ROOT d = c64[256,256] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={1}
})")
                  .ok());
  const Shape shape(PrimitiveType::kC64, {256, 256});
  auto refused = Run({Literal(shape), Literal(shape)},
                     RunContext{.memory_limit_bytes = 1 << 20});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("instruction 'd'"));
  auto fits = Run({Literal(shape), Literal(shape)},
                  RunContext{.memory_limit_bytes = 2 << 20});
  EXPECT_TRUE(fits.ok()) << fits.status();
}

TEST_F(EvaluatorLimitsTest, AnF8DotsAccumulatorIsCharged) {
  // An f8 dot accumulates in an f32 array (256 KiB) before it rounds to
  // its f8 result (64 KiB); the operands widen to f32 copies (128 KiB).
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  a = f8e4m3fn[256,128] parameter(0)
  b = f8e4m3fn[128,256] parameter(1)
  ROOT d = f8e4m3fn[256,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})")
                  .ok());
  const Shape a(PrimitiveType::kF8E4M3FN, {256, 128});
  const Shape b(PrimitiveType::kF8E4M3FN, {128, 256});
  auto refused = Run({Literal(a), Literal(b)},
                     RunContext{.memory_limit_bytes = 384 << 10});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("instruction 'd'"));
  auto fits = Run({Literal(a), Literal(b)},
                  RunContext{.memory_limit_bytes = 1 << 20});
  EXPECT_TRUE(fits.ok()) << fits.status();
}

TEST_F(EvaluatorLimitsTest,
       ACollectiveResultPastTheLimitIsRefusedBeforeItRuns) {
  ASSERT_TRUE(Load(absl::StrCat("HloModule m\n", kAdd, R"(
ENTRY main {
  x = f32[1000] parameter(0)
  ROOT r = f32[1000] all-reduce(x), replica_groups={}, to_apply=add
})"))
                  .ok());
  auto refused = Run({Literal(Shape(PrimitiveType::kF32, {1000}))},
                     RunContext{.memory_limit_bytes = 1000});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("its result needs 4000 bytes"));
}

// A chain of `levels` computations (the entry is level 1), each calling the
// next with `how`: "call", "fusion", "while" or "conditional". The value
// doubles at the bottom and passes unchanged through every other level.
std::string NestedModule(int levels, const std::string& how) {
  std::string text = "HloModule nested\n";
  absl::StrAppend(&text, "c", levels, " {\n  p = f32[] parameter(0)\n",
                  "  ROOT r = f32[] add(p, p)\n}\n");
  // A while runs its body once: the condition is true for p < 1.
  absl::StrAppend(&text, "once {\n  s = (f32[], s32[]) parameter(0)\n",
                  "  i = s32[] get-tuple-element(s), index=1\n",
                  "  one = s32[] constant(1)\n",
                  "  ROOT lt = pred[] compare(i, one), direction=LT\n}\n");
  for (int level = levels - 1; level >= 1; --level) {
    const std::string callee = absl::StrCat("c", level + 1);
    const bool entry = level == 1;
    absl::StrAppend(&text, entry ? "ENTRY " : "", "c", level, " {\n");
    if (how == "while") {
      absl::StrAppend(&text, "  s = (f32[], s32[]) parameter(0)\n",
                      "  v = f32[] get-tuple-element(s), index=0\n",
                      "  i = s32[] get-tuple-element(s), index=1\n",
                      "  one = s32[] constant(1)\n",
                      "  n = s32[] add(i, one)\n");
      if (level == levels - 1) {
        absl::StrAppend(&text, "  w = f32[] call(v), to_apply=", callee,
                        "\n  ROOT t = (f32[], s32[]) tuple(w, n)\n}\n");
      } else {
        absl::StrAppend(&text, "  zero = s32[] constant(0)\n",
                        "  init = (f32[], s32[]) tuple(v, zero)\n",
                        "  w = (f32[], s32[]) while(init), condition=once, "
                        "body=",
                        callee,
                        "\n  wv = f32[] get-tuple-element(w), index=0\n",
                        "  ROOT t = (f32[], s32[]) tuple(wv, n)\n}\n");
      }
      continue;
    }
    absl::StrAppend(&text, "  p = f32[] parameter(0)\n");
    if (how == "call") {
      absl::StrAppend(&text, "  ROOT r = f32[] call(p), to_apply=", callee);
    } else if (how == "fusion") {
      absl::StrAppend(&text,
                      "  ROOT r = f32[] fusion(p), kind=kLoop, calls=", callee);
    } else {
      absl::StrAppend(&text, "  t = pred[] constant(true)\n",
                      "  ROOT r = f32[] conditional(t, p, p), "
                      "true_computation=",
                      callee, ", false_computation=", callee);
    }
    absl::StrAppend(&text, "\n}\n");
  }
  return text;
}

class NestingTest : public EvaluatorLimitsTest,
                    public ::testing::WithParamInterface<const char*> {
 protected:
  // The while chain's entry takes (value, counter).
  std::vector<Literal> Arguments() const {
    if (std::string(GetParam()) != "while") return {F32({}, {3})};
    Literal counter(Shape(PrimitiveType::kS32, {}));
    return {Literal::MakeTuple({F32({}, {3}), counter})};
  }
  double ResultValue(const Literal& result) const {
    return result.shape().IsTuple() ? result.elements()[0].GetAsDouble(0)
                                    : result.GetAsDouble(0);
  }
};

TEST_P(NestingTest, AModuleAtTheDepthLimitRuns) {
  ASSERT_TRUE(Load(NestedModule(Evaluator::kMaxNestingDepth, GetParam())).ok());
  auto result = Run(Arguments());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ResultValue(*result), 6);
}

TEST_P(NestingTest, ADeeperModuleIsRefusedAtLoadNamingTheDepth) {
  absl::Status loaded = Load(NestedModule(5000, GetParam()));
  ASSERT_EQ(loaded.code(), absl::StatusCode::kUnimplemented) << loaded;
  EXPECT_THAT(loaded.message(),
              HasSubstr("nests its computations 5000 levels deep, and at "
                        "most 256 are supported"));
  EXPECT_THAT(loaded.message(), HasSubstr("at nesting level 257"));
}

INSTANTIATE_TEST_SUITE_P(EveryKindOfCall, NestingTest,
                         ::testing::Values("call", "fusion", "while",
                                           "conditional"));

TEST_F(EvaluatorLimitsTest, ComputationsThatCallEachOtherAreRefused) {
  // The parser resolves names anywhere in the module; the verifier would
  // refuse this, and Create must too when run without it.
  auto module = hlo::ParseModule(R"(
HloModule m
a {
  p = f32[] parameter(0)
  ROOT r = f32[] call(p), to_apply=b
}
b {
  p = f32[] parameter(0)
  ROOT r = f32[] call(p), to_apply=a
}
ENTRY main {
  x = f32[] parameter(0)
  ROOT y = f32[] call(x), to_apply=a
})");
  ASSERT_TRUE(module.ok()) << module.status();
  auto evaluator = Evaluator::Create(**module);
  ASSERT_FALSE(evaluator.ok());
  EXPECT_THAT(evaluator.status().message(), HasSubstr("cycle"));
}

}  // namespace evaluator_limits_test
}  // namespace causeway::exec
