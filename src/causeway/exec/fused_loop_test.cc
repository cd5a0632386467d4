#include "causeway/exec/fused_loop.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "causeway/exec/evaluator.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/xla_cpu_target.h"
#include "causeway/hlo/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace fused_loop_test {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::HasSubstr;

// Deterministic values with the awkward cases mixed in: NaN, ±inf, -0 and
// denormals for floats, 0, -1 and the minimum for integers.
Literal Random(const Shape& shape, uint32_t seed) {
  Literal literal(shape);
  uint32_t state = seed * 2654435761u + 12345u;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  const int64_t n = shape.ElementCount();
  hlo::VisitType(shape.type(), [&](auto tag) {
    using T = decltype(tag);
    T* data = MutableDataPtr<T>(literal);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t r = next();
      if constexpr (std::is_same_v<T, bool>) {
        data[i] = (r & 1) != 0;
      } else if constexpr (kIsFloat<T>) {
        static constexpr float kSpecial[] = {
            std::numeric_limits<float>::quiet_NaN(),
            std::numeric_limits<float>::infinity(),
            -std::numeric_limits<float>::infinity(),
            -0.0f,
            1e-40f,
            -3e-39f};
        float value = static_cast<float>(r % 20001) / 2500.0f - 4.0f;
        if (r % 97 < 6) value = kSpecial[r % 97];
        data[i] = FromCompute<T>(static_cast<ComputeType<T>>(value));
      } else {
        T value = static_cast<T>(static_cast<int64_t>(r % 101) - 50);
        if (r % 89 == 0) value = std::numeric_limits<T>::min();
        if (r % 83 == 0) value = static_cast<T>(-1);
        data[i] = value;
      }
    }
  });
  return literal;
}

class FusedLoopTest : public ::testing::Test {
 protected:
  // Parses `text`, whose ENTRY is the body under test, and compiles the
  // entry computation as a fused loop.
  void Load(std::string_view text) {
    text_ = std::string(text);
    auto module = hlo::ParseModule(text);
    ASSERT_TRUE(module.ok()) << module.status();
    module_ = *std::move(module);
    auto fused = FusedLoop::Compile(*module_->entry());
    ASSERT_TRUE(fused.ok()) << fused.status();
    fused_ = *std::move(fused);
  }

  std::vector<Literal> RandomArguments(uint32_t seed) {
    std::vector<Literal> args;
    for (const hlo::Instruction* parameter : module_->entry()->parameters()) {
      args.push_back(Random(parameter->shape, seed + args.size()));
    }
    return args;
  }

  absl::StatusOr<Literal> RunFused(const std::vector<Literal>& args) {
    std::vector<const Literal*> pointers;
    for (const Literal& arg : args) pointers.push_back(&arg);
    EXPECT_TRUE(fused_->CanRun(pointers));
    const ComputationRunner runner =
        [](const hlo::Computation& computation,
           std::span<const Literal>) -> absl::StatusOr<Literal> {
      return absl::InternalError("no runner in this test");
    };
    return fused_->Run(pointers, runner);
  }

  // Runs the body op by op as the evaluator runs a fusion body: the text
  // again, its entry called by a fusion from a new entry computation.
  absl::StatusOr<Literal> RunOpByOp(const std::vector<Literal>& args) {
    const hlo::Computation& body = *module_->entry();
    std::string text = text_;
    const size_t entry = text.find("ENTRY ");
    if (entry == std::string::npos) {
      return absl::InvalidArgumentError("the test text has no ENTRY");
    }
    text.erase(entry, 6);
    std::string wrapper = "\nENTRY wrapper {\n";
    std::string operands;
    for (int64_t i = 0; i < body.parameter_count(); ++i) {
      absl::StrAppend(&wrapper, "  p", i, " = ",
                      body.parameter(i)->shape.ToString(), " parameter(", i,
                      ")\n");
      absl::StrAppend(&operands, i > 0 ? ", " : "", "p", i);
    }
    absl::StrAppend(&wrapper, "  ROOT f = ", body.root()->shape.ToString(),
                    " fusion(", operands, "), kind=kLoop, calls=",
                    body.name(), "\n}\n");
    auto module = hlo::ParseModule(text + wrapper);
    if (!module.ok()) return module.status();
    // Fused loops off: the fusion's body runs op by op, not as the very
    // FusedLoop under test.
    auto evaluator = Evaluator::Create(**module, {.fused_loops = false});
    if (!evaluator.ok()) return evaluator.status();
    return (*evaluator)->Run(args, RunContext{});
  }

  // Runs the body op by op (the evaluator) and fused on the same random
  // arguments and expects the same bits; returns the fused result.
  Literal ExpectSameAsOpByOp(std::string_view text, uint32_t seed = 1) {
    Load(text);
    if (fused_ == nullptr) return Literal();
    const std::vector<Literal> args = RandomArguments(seed);
    absl::StatusOr<Literal> want = RunOpByOp(args);
    absl::StatusOr<Literal> got = RunFused(args);
    EXPECT_TRUE(want.ok()) << want.status();
    EXPECT_TRUE(got.ok()) << got.status();
    if (!want.ok() || !got.ok()) return Literal();
    EXPECT_TRUE(*want == *got)
        << "op by op: " << want->ToString() << "\nfused: " << got->ToString();
    return *std::move(got);
  }

  // The same for each element type in `types`, written as `$T` in `text`;
  // and, if `loops` is given, that the body fused into that many loops.
  void ExpectSameAsOpByOpIn(std::initializer_list<const char*> types,
                            absl::string_view text,
                            std::optional<int64_t> loops = std::nullopt) {
    for (const char* type : types) {
      SCOPED_TRACE(type);
      ExpectSameAsOpByOp(absl::StrReplaceAll(text, {{"$T", type}}));
      if (loops.has_value()) {
        ASSERT_NE(fused_, nullptr);
        EXPECT_EQ(fused_->loop_count(), *loops);
      }
    }
  }

  std::string text_;
  std::unique_ptr<hlo::Module> module_;
  std::unique_ptr<FusedLoop> fused_;
};

TEST_F(FusedLoopTest, ScalarRowAndColumnBroadcastsMatchOpByOp) {
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  x = f32[16,40] parameter(0)
  row = f32[40] parameter(1)
  column = f32[16] parameter(2)
  half = f32[] constant(0.5)
  halves = f32[16,40] broadcast(half), dimensions={}
  scaled = f32[16,40] multiply(x, halves)
  rows = f32[16,40] broadcast(row), dimensions={1}
  columns = f32[16,40] broadcast(column), dimensions={0}
  sum = f32[16,40] add(scaled, rows)
  ROOT difference = f32[16,40] subtract(sum, columns)
})");
  EXPECT_EQ(fused_->loop_count(), 1);
  EXPECT_EQ(fused_->kernel_count(), 0);
}

TEST_F(FusedLoopTest, InnerBroadcastsAndTransposesMatchOpByOp) {
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  x = f32[2,3,5,7] parameter(0)
  y = f32[3,7] parameter(1)
  z = f32[7,5,3,2] parameter(2)
  ys = f32[2,3,5,7] broadcast(y), dimensions={1,3}
  zt = f32[2,3,5,7] transpose(z), dimensions={3,2,1,0}
  product = f32[2,3,5,7] multiply(x, ys)
  ROOT sum = f32[2,3,5,7] add(product, zt)
})");
}

TEST_F(FusedLoopTest, TransposedReadsCopiedTileWiseMatchOpByOp) {
  // Transposing reads inside a loop: chunks that are boxes of whole rows
  // are copied tiled (attention's [8,64,64] swap of the last two dims),
  // chunks that straddle a dim (rows of 100, 32 to a chunk) and the tail
  // element by element; in f32 and f16.
  ExpectSameAsOpByOpIn({"f32", "f16"}, R"(
HloModule m
ENTRY body {
  x = $T[8,64,64] parameter(0)
  y = $T[8,64,64] parameter(1)
  z = $T[3,16,100] parameter(2)
  w = $T[3,100,16] parameter(3)
  yt = $T[8,64,64] transpose(y), dimensions={0,2,1}
  zt = $T[3,100,16] transpose(z), dimensions={0,2,1}
  a = $T[8,64,64] add(x, yt)
  b = $T[3,100,16] multiply(w, zt)
  ra = $T[2048,16] reshape(a)
  rb = $T[300,16] reshape(b)
  c = $T[2348,16] concatenate(ra, rb), dimensions={0}
  ROOT e = $T[2348,16] exponential(c)
})", 3);
}

TEST_F(FusedLoopTest, LoneTransposeBroadcastAndSliceRootsMatchOpByOp) {
  // A loop that only moves elements is one strided copy of the whole value.
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  x = f32[8,64,64] parameter(0)
  row = f32[48] parameter(1)
  t = f32[64,8,64]{0,2,1} transpose(x), dimensions={2,0,1}
  c = f32[64,8,64] copy(t)
  b = f32[64,512] bitcast(c)
  rows = f32[3,40,48] broadcast(row), dimensions={2}
  s = f32[8,30,32] slice(x), slice={[0:8], [2:62:2], [7:39]}
  ROOT r = (f32[64,512], f32[3,40,48], f32[8,30,32]) tuple(b, rows, s)
})");
  EXPECT_EQ(fused_->loop_count(), 3);
}

TEST_F(FusedLoopTest, BroadcastRowsFilledOncePerRunMatchOpByOp) {
  // Broadcasts whose period divides a chunk (a scale over the last dim, a
  // [2,64] table over a batch) are filled once and read by every chunk,
  // the tail included; a period that does not divide a chunk (63) is
  // gathered chunk by chunk.
  ExpectSameAsOpByOpIn({"f32", "bf16"}, R"(
HloModule m
ENTRY body {
  x = $T[9,14,64] parameter(0)
  scale = $T[64] parameter(1)
  table = $T[2,64] parameter(2)
  odd = $T[63] parameter(3)
  y = $T[9,14,63] parameter(4)
  s = $T[9,14,64] broadcast(scale), dimensions={2}
  tb = $T[63,2,64] broadcast(table), dimensions={1,2}
  t = $T[9,14,64] bitcast(tb)
  o = $T[9,14,63] broadcast(odd), dimensions={2}
  a = $T[9,14,64] multiply(x, s)
  b = $T[9,14,64] add(a, t)
  c = $T[9,14,63] subtract(y, o)
  ROOT r = ($T[9,14,64], $T[9,14,63]) tuple(b, c)
})");
}

TEST_F(FusedLoopTest, BinaryOpsReadingRowBroadcastsInPlaceMatchOpByOp) {
  // Per-row values repeated over rows of 96 (rows straddle chunks) on
  // either side of divide, subtract and maximum; a broadcast read twice
  // is gathered into a register as before. f32, f64 and f16 (which always
  // gathers).
  ExpectSameAsOpByOpIn({"f32", "f64", "f16"}, R"(
HloModule m
ENTRY body {
  x = $T[7,11,96] parameter(0)
  v = $T[7,11] parameter(1)
  w = $T[7,11] parameter(2)
  vs = $T[7,11,96] broadcast(v), dimensions={0,1}
  ws = $T[7,11,96] broadcast(w), dimensions={0,1}
  a = $T[7,11,96] divide(x, vs)
  b = $T[7,11,96] subtract(ws, a)
  c = $T[7,11,96] maximum(b, x)
  vt = $T[7,11,96] broadcast(v), dimensions={0,1}
  d = $T[7,11,96] multiply(vt, vt)
  ROOT e = $T[7,11,96] add(c, d)
})");
}

TEST_F(FusedLoopTest, MultiplyAddsReadingRowBroadcastsInPlaceMatchOpByOp) {
  // Contracted multiply-adds whose first factor, second factor or addend
  // is a per-row value over rows of 96 (straddling chunks), one with its
  // product negated (c - a * b).
  ExpectSameAsOpByOpIn({"f32", "f64"}, R"(
HloModule m
ENTRY body {
  x = $T[7,11,96] parameter(0)
  y = $T[7,11,96] parameter(1)
  u = $T[7,11] parameter(2)
  v = $T[7,11] parameter(3)
  w = $T[7,11] parameter(4)
  us = $T[7,11,96] broadcast(u), dimensions={0,1}
  vs = $T[7,11,96] broadcast(v), dimensions={0,1}
  ws = $T[7,11,96] broadcast(w), dimensions={0,1}
  p = $T[7,11,96] multiply(us, x)
  a = $T[7,11,96] add(p, y)
  q = $T[7,11,96] multiply(a, vs)
  b = $T[7,11,96] subtract(x, q)
  r = $T[7,11,96] multiply(b, y)
  ROOT c = $T[7,11,96] add(r, ws)
})");
}

TEST_F(FusedLoopTest, SlicesBitcastsAndCopiesMatchOpByOp) {
  // The attention head split of a transformer: slice a projection, view it
  // as heads, transpose.
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  qkv = f32[16,96]{1,0} parameter(0)
  b = f32[2,8,96]{2,1,0} bitcast(qkv)
  v = f32[2,8,32]{2,1,0} slice(b), slice={[0:2], [0:8], [64:96]}
  heads = f32[2,8,4,8]{3,2,1,0} bitcast(v)
  t = f32[2,4,8,8]{2,1,3,0} transpose(heads), dimensions={0,2,3,1}
  c = f32[2,4,8,8]{3,2,1,0} copy(t)
  ROOT e = f32[2,4,8,8]{3,2,1,0} exponential(c)
})");
}

TEST_F(FusedLoopTest, ManyChunksWithATailMatchOpByOp) {
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  x = f32[3001] parameter(0)
  y = f32[3001] parameter(1)
  e = f32[3001] exponential(x)
  t = f32[3001] tanh(y)
  l = f32[3001] logistic(x)
  g = f32[3001] log(e)
  r = f32[3001] erf(t)
  m = f32[3001] exponential-minus-one(l)
  p = f32[3001] log-plus-one(r)
  q = f32[3001] rsqrt(g)
  s = f32[3001] sqrt(m)
  a = f32[3001] add(p, q)
  b = f32[3001] divide(a, s)
  c = f32[3001] maximum(b, x)
  ROOT d = f32[3001] minimum(c, y)
})");
}

TEST_F(FusedLoopTest, HalfPrecisionRoundsPerOpAsOpByOp) {
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  a = bf16[1030] parameter(0)
  b = f16[1030] parameter(1)
  la = bf16[1030] logistic(a)
  ea = bf16[1030] exponential(a)
  sa = bf16[1030] multiply(la, ea)
  eb = f16[1030] exponential-minus-one(b)
  wb = f32[1030] convert(eb)
  wa = f32[1030] convert(sa)
  sum = f32[1030] add(wa, wb)
  ROOT narrow = bf16[1030] convert(sum)
})");
}

TEST_F(FusedLoopTest, MultiplyAddsContractAsOpByOp) {
  const Literal result = ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  a = f16[1100] parameter(0)
  b = f16[1100] parameter(1)
  c = f16[1100] parameter(2)
  x = f32[1100] parameter(3)
  y = f32[1100] parameter(4)
  m = f16[1100] multiply(a, b)
  s = f16[1100] add(m, c)
  n = f16[1100] multiply(c, c)
  ng = f16[1100] negate(n)
  t = f16[1100] subtract(s, ng)
  w = f32[1100] convert(t)
  p = f32[1100] multiply(x, y)
  q = f32[1100] multiply(y, y)
  u = f32[1100] subtract(p, q)
  ROOT r = f32[1100] add(u, w)
})");
  EXPECT_EQ(fused_->loop_count(), 1);
  // Each sum rounded once: t = a*b + c + c*c, the second product rounded
  // on its own, u = x*y - round(y*y), the sum rounded; f16 only where XLA
  // computes it natively (xla_cpu_target.h), else every f16 op rounds. The
  // ctest run PromotedF16.* forces the other.
  const bool f16_contracts = ActiveXlaCpuTarget().avx512fp16;
  const std::vector<Literal> args = RandomArguments(1);
  auto f16 = [&](int arg, int i) {
    return static_cast<double>(
        static_cast<float>(args[arg].data<hlo::F16>()[i]));
  };
  int checked = 0;
  for (int i = 0; i < 1100; ++i) {
    const double ab = f16_contracts ? f16(0, i) * f16(1, i)
                                    : hlo::F16::ToFloat(hlo::F16::FromDouble(
                                          f16(0, i) * f16(1, i)));
    const double s =
        hlo::F16::ToFloat(hlo::F16::FromDouble(ab + f16(2, i)));
    const double cc = f16_contracts
                          ? f16(2, i) * f16(2, i)
                          : hlo::F16::ToFloat(
                                hlo::F16::FromDouble(f16(2, i) * f16(2, i)));
    hlo::F16 t;
    t.bits = hlo::F16::FromDouble(s + cc);
    const float x = args[3].data<float>()[i], y = args[4].data<float>()[i];
    const float u = std::fma(x, y, -(y * y));
    const float want = u + static_cast<float>(t);
    const float got = result.data<float>()[i];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << i;
      continue;
    }
    if (std::fpclassify(want) == FP_SUBNORMAL ||
        std::fpclassify(u) == FP_SUBNORMAL || std::fabs(y * y) < 1e-37f) {
      continue;  // Flushed by the kernels, not by this reference.
    }
    EXPECT_EQ(got, want) << i;
    ++checked;
  }
  EXPECT_GT(checked, 900);
}

TEST_F(FusedLoopTest, IntegerEdgeCasesMatchOpByOp) {
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  a = s32[700] parameter(0)
  b = s32[700] parameter(1)
  c = u8[700] parameter(2)
  q = s32[700] divide(a, b)
  r = s32[700] remainder(a, b)
  s = s32[700] shift-left(q, b)
  t = s32[700] shift-right-arithmetic(r, b)
  u = s32[700] add(s, t)
  w = u8[700] convert(u)
  x = u8[700] multiply(w, c)
  ROOT y = s32[700] convert(x)
})");
}

TEST_F(FusedLoopTest, CompareSelectAndClampMatchOpByOp) {
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  x = f32[9,70] parameter(0)
  y = f32[9,70] parameter(1)
  choose = pred[] parameter(2)
  lo = f32[] parameter(3)
  hi = f32[9,70] parameter(4)
  lt = pred[9,70] compare(x, y), direction=LT
  total = pred[9,70] compare(x, y), direction=GE, type=TOTALORDER
  picked = f32[9,70] select(lt, x, y)
  either = f32[9,70] select(choose, picked, x)
  clamped = f32[9,70] clamp(lo, either, hi)
  finite = pred[9,70] is-finite(clamped)
  both = pred[9,70] and(finite, total)
  zero = f32[] constant(0)
  zeros = f32[9,70] broadcast(zero), dimensions={}
  ROOT result = f32[9,70] select(both, clamped, zeros)
})");
}

TEST_F(FusedLoopTest, FloatToIntegerConversionSaturatesAsOpByOp) {
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  x = f32[600] parameter(0)
  big = f32[] constant(3e9)
  bigs = f32[600] broadcast(big), dimensions={}
  y = f32[600] multiply(x, bigs)
  i = s32[600] convert(y)
  ROOT u = u16[600] convert(i)
})");
}

TEST_F(FusedLoopTest, TrailingReduceIsFedByTheLoopChunkByChunk) {
  ExpectSameAsOpByOp(R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY body {
  x = f32[2,8,32] parameter(0)
  pos = f32[8,32] parameter(1)
  ps = f32[2,8,32] broadcast(pos), dimensions={1,2}
  sum = f32[2,8,32] add(x, ps)
  sq = f32[2,8,32] multiply(sum, sum)
  zero = f32[] constant(0)
  ROOT r = f32[2,8] reduce(sq, zero), dimensions={2}, to_apply=add
})");
  // `sq` is never whole: its chunks are reduced as they are computed.
  EXPECT_EQ(fused_->loop_count(), 1);
  EXPECT_EQ(fused_->kernel_count(), 0);
}

TEST_F(FusedLoopTest, ReducedRowsMatchOpByOpWhateverTheirLength) {
  // Rows of 64 (the kernel's 32-lane loop, 8 rows a chunk), 96 (chunks of
  // 1536, a multiple of 512 holding whole rows, and a tail), 5 (the
  // kernel's sequential loop) and a whole array reduced to one value; max,
  // add, multiply and min, after an exp as a softmax computes.
  ExpectSameAsOpByOpIn({"f32", "f64", "f16", "bf16"}, R"(
HloModule m
max {
  a = $T[] parameter(0)
  b = $T[] parameter(1)
  ROOT m = $T[] maximum(a, b)
}
ENTRY body {
  x = $T[40,64] parameter(0)
  e = $T[40,64] exponential(x)
  lo = $T[] constant(-inf)
  ROOT r = $T[40] reduce(e, lo), dimensions={1}, to_apply=max
})", 1);
  EXPECT_EQ(fused_->kernel_count(), 0);
  ExpectSameAsOpByOpIn({"f32", "f16"}, R"(
HloModule m
add {
  a = $T[] parameter(0)
  b = $T[] parameter(1)
  ROOT s = $T[] add(b, a)
}
ENTRY body {
  x = $T[3,37,96] parameter(0)
  c = $T[96] parameter(1)
  cs = $T[3,37,96] broadcast(c), dimensions={2}
  d = $T[3,37,96] subtract(x, cs)
  zero = $T[] parameter(2)
  ROOT r = $T[3,37] reduce(d, zero), dimensions={2}, to_apply=add
})", 1);
  EXPECT_EQ(fused_->kernel_count(), 0);
  ExpectSameAsOpByOpIn({"f32", "s32"}, R"(
HloModule m
mul {
  a = $T[] parameter(0)
  b = $T[] parameter(1)
  ROOT p = $T[] multiply(a, b)
}
ENTRY body {
  x = $T[301,5] parameter(0)
  y = $T[301,5] parameter(1)
  s = $T[301,5] add(x, y)
  one = $T[] constant(1)
  ROOT r = $T[301] reduce(s, one), dimensions={1}, to_apply=mul
})", 1);
  ExpectSameAsOpByOpIn({"f32"}, R"(
HloModule m
min {
  a = $T[] parameter(0)
  b = $T[] parameter(1)
  ROOT m = $T[] minimum(a, b)
}
ENTRY body {
  x = $T[7,1,300] parameter(0)
  n = $T[7,1,300] negate(x)
  hi = $T[] constant(inf)
  ROOT r = $T[] reduce(n, hi), dimensions={0,1,2}, to_apply=min
})", 1);
}

TEST_F(FusedLoopTest, ReducedColumnsMatchOpByOpAcrossChunks) {
  // Columns of 24 (rows split across chunks of 512) and of 700 (a row
  // longer than a chunk), summed over the leading dims, as a bias
  // gradient is.
  ExpectSameAsOpByOpIn({"f32", "bf16"}, R"(
HloModule m
add {
  a = $T[] parameter(0)
  b = $T[] parameter(1)
  ROOT s = $T[] add(a, b)
}
ENTRY body {
  x = $T[9,100,24] parameter(0)
  y = $T[9,100,24] parameter(1)
  p = $T[9,100,24] multiply(x, y)
  zero = $T[] constant(0)
  ROOT r = $T[24] reduce(p, zero), dimensions={0,1}, to_apply=add
})", 1);
  EXPECT_EQ(fused_->kernel_count(), 0);
  ExpectSameAsOpByOpIn({"f32"}, R"(
HloModule m
add {
  a = $T[] parameter(0)
  b = $T[] parameter(1)
  ROOT s = $T[] add(a, b)
}
ENTRY body {
  x = $T[3,700] parameter(0)
  t = $T[3,700] tanh(x)
  zero = $T[] constant(0)
  ROOT r = $T[700] reduce(t, zero), dimensions={0}, to_apply=add
})", 1);
}

TEST_F(FusedLoopTest, ReducesTheLoopCannotFeedRunTheirKernel) {
  // A reduce of middle dims walks neither rows nor columns; a reduce whose
  // input is also read elsewhere needs it whole; a reducer that is not one
  // binary op runs through the scalar interpreter.
  ExpectSameAsOpByOp(R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY body {
  x = f32[4,8,16] parameter(0)
  e = f32[4,8,16] exponential(x)
  zero = f32[] constant(0)
  ROOT r = f32[4,16] reduce(e, zero), dimensions={1}, to_apply=add
})");
  EXPECT_EQ(fused_->loop_count(), 1);
  EXPECT_EQ(fused_->kernel_count(), 1);
  ExpectSameAsOpByOp(R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY body {
  x = f32[4,64] parameter(0)
  e = f32[4,64] exponential(x)
  zero = f32[] constant(0)
  r = f32[4] reduce(e, zero), dimensions={1}, to_apply=add
  ROOT t = (f32[4], f32[4,64]) tuple(r, e)
})");
  EXPECT_EQ(fused_->loop_count(), 1);
  EXPECT_EQ(fused_->kernel_count(), 2);
  ExpectSameAsOpByOp(R"(
HloModule m
addsq {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  bb = f32[] multiply(b, b)
  ROOT s = f32[] add(a, bb)
}
ENTRY body {
  x = f32[4,64] parameter(0)
  e = f32[4,64] exponential(x)
  zero = f32[] constant(0)
  ROOT r = f32[4] reduce(e, zero), dimensions={1}, to_apply=addsq
})");
  EXPECT_EQ(fused_->kernel_count(), 1);
}

TEST_F(FusedLoopTest, ValueReadByTwoLoopsIsComputedOnce) {
  // `centered` feeds the reduce's loop and the output loop: it is kept
  // whole, and `x - mean` is not computed twice.
  ExpectSameAsOpByOp(R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY body {
  x = f32[4,64] parameter(0)
  mean = f32[4] parameter(1)
  means = f32[4,64] broadcast(mean), dimensions={0}
  centered = f32[4,64] subtract(x, means)
  sq = f32[4,64] multiply(centered, centered)
  zero = f32[] constant(0)
  var = f32[4] reduce(sq, zero), dimensions={1}, to_apply=add
  vars = f32[4,64] broadcast(var), dimensions={0}
  ROOT normed = f32[4,64] divide(centered, vars)
})");
  // centered, sq (feeding the reduce), normed.
  EXPECT_EQ(fused_->loop_count(), 3);
  EXPECT_EQ(fused_->kernel_count(), 0);
}

TEST_F(FusedLoopTest, TupleRootGivesEveryOutput) {
  const Literal result = ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  x = f32[100] parameter(0)
  y = f32[100] parameter(1)
  s = f32[100] add(x, y)
  p = f32[100] multiply(s, y)
  ROOT t = (f32[100], f32[100]) tuple(s, p)
})");
  ASSERT_TRUE(result.shape().IsTuple());
  EXPECT_EQ(result.elements().size(), 2u);
}

TEST_F(FusedLoopTest, ConstantMaskIsFoldedAtCompile) {
  // The causal mask of attention: iota >= iota, broadcast over heads.
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  rows = s32[8,8] iota(), iota_dimension=0
  cols = s32[8,8] iota(), iota_dimension=1
  causal = pred[8,8] compare(rows, cols), direction=GE
  mask = pred[2,4,8,8] broadcast(causal), dimensions={2,3}
  scores = f32[2,4,8,8] parameter(0)
  low = f32[] constant(-1e9)
  lows = f32[2,4,8,8] broadcast(low), dimensions={}
  ROOT masked = f32[2,4,8,8] select(mask, scores, lows)
})");
  EXPECT_EQ(fused_->loop_count(), 1);
  EXPECT_EQ(fused_->kernel_count(), 0);  // No iota or compare at run time.
}

TEST_F(FusedLoopTest, ScalarBodyMatchesOpByOp) {
  ExpectSameAsOpByOp(R"(
HloModule m
ENTRY body {
  step = s32[] parameter(0)
  f = f32[] convert(step)
  one = f32[] constant(1)
  b = f32[] constant(0.9)
  pw = f32[] power(b, f)
  ROOT d = f32[] subtract(one, pw)
})");
}

TEST_F(FusedLoopTest, RootBitcastOfAParameterSharesItsStorage) {
  Load(R"(
HloModule m
ENTRY body {
  x = s32[2,8]{1,0} parameter(0)
  ROOT b = s32[16,1]{1,0} bitcast(x)
})");
  const std::vector<Literal> args = RandomArguments(3);
  absl::StatusOr<Literal> result = RunFused(args);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->shape().dims(), (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(result->untyped_data(), args[0].untyped_data());
}

TEST_F(FusedLoopTest, ErrorsNameTheInstructionInsideTheLoop) {
  Load(R"(
HloModule m
ENTRY body {
  x = pred[40] parameter(0)
  y = pred[40] parameter(1)
  a = pred[40] and(x, y)
  ROOT bad = pred[40] negate(a)
})");
  const std::vector<Literal> args = RandomArguments(4);
  absl::StatusOr<Literal> want = RunOpByOp(args);
  absl::StatusOr<Literal> got = RunFused(args);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), want.status().code());
  EXPECT_THAT(got.status().message(),
              HasSubstr("in instruction 'bad' (line 7) of computation 'body'"));
  EXPECT_THAT(got.status().message(),
              HasSubstr("does not accept element type pred"));
}

TEST_F(FusedLoopTest, CompileLeavesControlFlowToTheEvaluator) {
  auto module = hlo::ParseModule(R"(
HloModule m
cond {
  p = s32[] parameter(0)
  ten = s32[] constant(10)
  ROOT lt = pred[] compare(p, ten), direction=LT
}
step {
  p = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT n = s32[] add(p, one)
}
ENTRY body {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=cond, body=step
})");
  ASSERT_TRUE(module.ok()) << module.status();
  auto fused = FusedLoop::Compile(*(*module)->entry());
  EXPECT_EQ(fused.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(fused.status().message(), HasSubstr("'w'"));
}

TEST_F(FusedLoopTest, KernelsRunInTheCallersFloatingPointMode) {
  // Only the elementwise kernels flush denormals: a dot of denormal inputs
  // inside a fusion must not see them as zeros.
  Load(R"(
HloModule m
ENTRY body {
  a = f32[1,4] parameter(0)
  b = f32[4,1] parameter(1)
  d = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT e = f32[1,1] add(d, d)
})");
  std::vector<Literal> args;
  args.emplace_back(Shape(PrimitiveType::kF32, {1, 4}));
  args.emplace_back(Shape(PrimitiveType::kF32, {4, 1}));
  for (int i = 0; i < 4; ++i) {
    args[0].mutable_data<float>()[i] = 1e-39f;
    args[1].mutable_data<float>()[i] = 1e20f;
  }
  absl::StatusOr<Literal> want = RunOpByOp(args);
  absl::StatusOr<Literal> got = RunFused(args);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_GT(got->data<float>()[0], 0.0f);
  EXPECT_TRUE(*want == *got) << want->ToString() << " vs " << got->ToString();
}

TEST_F(FusedLoopTest, AReduceTheLoopFeedsRunsInTheCallersFloatingPointMode) {
  // The loop's negate runs with denormals flushed (it only flips the sign
  // bit); the reduce, as its kernel op by op, adds the denormals up.
  Load(R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY body {
  x = f32[4] parameter(0)
  n = f32[4] negate(x)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(n, zero), dimensions={0}, to_apply=add
})");
  ASSERT_EQ(fused_->kernel_count(), 0);
  std::vector<Literal> args;
  args.emplace_back(Shape(PrimitiveType::kF32, {4}));
  for (int i = 0; i < 4; ++i) args[0].mutable_data<float>()[i] = 1e-39f;
  absl::StatusOr<Literal> want = RunOpByOp(args);
  absl::StatusOr<Literal> got = RunFused(args);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_LT(got->data<float>()[0], 0.0f);
  EXPECT_TRUE(*want == *got) << want->ToString() << " vs " << got->ToString();
}

TEST_F(FusedLoopTest, CanRunRefusesArgumentsOfOtherShapes) {
  Load(R"(
HloModule m
ENTRY body {
  x = f32[4,8] parameter(0)
  ROOT y = f32[4,8] negate(x)
})");
  const Literal wrong_dims(Shape(PrimitiveType::kF32, {8, 4}));
  const Literal wrong_type(Shape(PrimitiveType::kS32, {4, 8}));
  const Literal right(Shape(PrimitiveType::kF32, {4, 8}));
  const Literal* args[] = {&wrong_dims};
  EXPECT_FALSE(fused_->CanRun(args));
  args[0] = &wrong_type;
  EXPECT_FALSE(fused_->CanRun(args));
  args[0] = &right;
  EXPECT_TRUE(fused_->CanRun(args));
}

TEST_F(FusedLoopTest, CanRunRefusesAColumnMajorArgumentThatABitcastReads) {
  Load(R"(
HloModule m
ENTRY body {
  x = f32[4,8]{1,0} parameter(0)
  ROOT b = f32[32]{0} bitcast(x)
})");
  Shape column_major(PrimitiveType::kF32, {4, 8});
  column_major.set_minor_to_major({0, 1});
  const Literal arg(column_major);
  const Literal* args[] = {&arg};
  EXPECT_FALSE(fused_->CanRun(args));
}

// The evaluator runs fusions through FusedLoop; turning every fusion into a
// call makes it run their bodies op by op instead.
class FusedFusionInEvaluatorTest : public ::testing::Test {
 protected:
  absl::StatusOr<Literal> Evaluate(std::string_view text,
                                   const std::vector<Literal>& args,
                                   bool fusions_as_calls) {
    auto module = hlo::ParseModule(text);
    if (!module.ok()) return module.status();
    for (const auto& computation : (*module)->computations()) {
      for (const auto& instruction : computation->instructions()) {
        if (fusions_as_calls && instruction->opcode == hlo::Opcode::kFusion) {
          instruction->opcode = hlo::Opcode::kCall;
        }
      }
    }
    modules_.push_back(*std::move(module));
    auto evaluator = Evaluator::Create(*modules_.back());
    if (!evaluator.ok()) return evaluator.status();
    return (*evaluator)->Run(args, RunContext{});
  }

  std::vector<std::unique_ptr<hlo::Module>> modules_;
};

TEST_F(FusedFusionInEvaluatorTest, ReducerThatRunsAFusionMatchesOpByOp) {
  // The reduce's reducer is not a plain add, so the kernel calls back into
  // the evaluator, which runs the reducer's own fusion (a nested fused run
  // on the same thread) while the outer fused run holds its scratch.
  constexpr std::string_view kText = R"(
HloModule m
scaled_add_body {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  k = f32[] constant(0.5)
  ROOT r = f32[] multiply(s, k)
}
scaled_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT f = f32[] fusion(a, b), kind=kLoop, calls=scaled_add_body
}
body {
  x = f32[6,300] parameter(0)
  y = f32[300] parameter(1)
  ys = f32[6,300] broadcast(y), dimensions={1}
  p = f32[6,300] multiply(x, ys)
  zero = f32[] constant(0)
  ROOT r = f32[6] reduce(p, zero), dimensions={1}, to_apply=scaled_add
}
ENTRY main {
  x = f32[6,300] parameter(0)
  y = f32[300] parameter(1)
  ROOT f = f32[6] fusion(x, y), kind=kLoop, calls=body
})";
  const std::vector<Literal> args = {
      Random(Shape(PrimitiveType::kF32, {6, 300}), 7),
      Random(Shape(PrimitiveType::kF32, {300}), 8)};
  auto fused = Evaluate(kText, args, /*fusions_as_calls=*/false);
  auto op_by_op = Evaluate(kText, args, /*fusions_as_calls=*/true);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(op_by_op.ok()) << op_by_op.status();
  EXPECT_TRUE(*fused == *op_by_op) << fused->ToString() << "\n"
                                   << op_by_op->ToString();
}

TEST_F(FusedFusionInEvaluatorTest,
       MismatchedOperandsRunOpByOpAndReportTheError) {
  // The body declares f32[4] but receives f32[2,2]: CanRun refuses, and the
  // op-by-op kernel names the problem.
  auto result = Evaluate(R"(
HloModule m
body {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
ENTRY main {
  x = f32[2,2] parameter(0)
  ROOT f = f32[4] fusion(x), kind=kLoop, calls=body
})",
                         {Random(Shape(PrimitiveType::kF32, {2, 2}), 9)},
                         /*fusions_as_calls=*/false);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              HasSubstr("in instruction 'n' (line 5) of computation 'body'"));
}

}  // namespace fused_loop_test
}  // namespace causeway::exec
