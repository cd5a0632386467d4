// Complex numbers (c64, c128) and fft through the evaluator: HLO text in,
// values out, checked against std::complex and a direct DFT written here
// (independent of the kernels and of Eigen's FFT).
#include <cmath>
#include <complex>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/exec/evaluator.h"
#include "causeway/base/status.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace complex_test {

using hlo::C128;
using hlo::C64;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
Literal Array(PrimitiveType type, std::vector<int64_t> dims,
              const std::vector<T>& values) {
  Literal literal(Shape(type, std::move(dims)));
  auto data = literal.mutable_data<T>();
  EXPECT_EQ(data.size(), values.size());
  for (size_t i = 0; i < data.size() && i < values.size(); ++i) {
    data[i] = values[i];
  }
  return literal;
}

template <typename T>
std::vector<T> ValuesOf(const Literal& literal) {
  auto data = literal.data<T>();
  return std::vector<T>(data.begin(), data.end());
}

// A fixed spread of values: both signs, small and large magnitudes.
template <typename F>
std::vector<std::complex<F>> Spread(int n) {
  std::vector<std::complex<F>> values;
  for (int i = 0; i < n; ++i) {
    const F re = static_cast<F>(std::sin(1.7 * i + 0.3) * (1 + i % 5));
    const F im = static_cast<F>(std::cos(2.3 * i + 0.1) * (1 + i % 3));
    values.emplace_back(re, im);
  }
  return values;
}

class ComplexTest : public ::testing::Test {
 protected:
  absl::Status Load(std::string_view text) {
    auto module = hlo::ParseModule(text);
    if (!module.ok()) return module.status();
    module_ = *std::move(module);
    CW_RETURN_IF_ERROR(hlo::VerifyModule(*module_));
    auto evaluator = Evaluator::Create(*module_);
    if (!evaluator.ok()) return evaluator.status();
    evaluator_ = *std::move(evaluator);
    return absl::OkStatus();
  }

  absl::StatusOr<Literal> Run(std::vector<Literal> args) {
    return evaluator_->Run(args, RunContext{});
  }

  // Runs `op` (unary or binary, as HLO writes it) on c64[n] operands.
  template <typename F>
  std::vector<std::complex<F>> RunElementwise(
      std::string_view op, const std::vector<std::complex<F>>& x,
      const std::vector<std::complex<F>>* y = nullptr) {
    const std::string type =
        std::is_same_v<F, float> ? "c64" : "c128";
    const std::string shape = absl::StrCat(type, "[", x.size(), "]");
    std::string text = absl::StrCat(
        "HloModule m\nENTRY e {\n  x = ", shape, " parameter(0)\n",
        y != nullptr ? absl::StrCat("  y = ", shape, " parameter(1)\n") : "",
        "  ROOT r = ", shape, " ", std::string(op), y != nullptr ? "(x, y)" : "(x)",
        "\n}\n");
    EXPECT_TRUE(Load(text).ok()) << text;
    const PrimitiveType pt =
        std::is_same_v<F, float> ? PrimitiveType::kC64 : PrimitiveType::kC128;
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<Literal> args = {Array(pt, {n}, x)};
    if (y != nullptr) args.push_back(Array(pt, {n}, *y));
    auto result = Run(std::move(args));
    EXPECT_TRUE(result.ok()) << op << ": " << result.status();
    if (!result.ok()) return {};
    return ValuesOf<std::complex<F>>(*result);
  }

  std::unique_ptr<hlo::Module> module_;
  std::unique_ptr<Evaluator> evaluator_;
};

// |got - want| within `tolerance` of |want| (and of 1, near zero).
template <typename F>
void ExpectNear(const std::vector<std::complex<F>>& got,
                const std::vector<std::complex<F>>& want, double tolerance,
                std::string_view what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max(1.0, static_cast<double>(std::abs(want[i])));
    EXPECT_LE(std::abs(std::complex<double>(got[i]) -
                       std::complex<double>(want[i])),
              tolerance * scale)
        << what << " element " << i << ": got " << got[i] << ", want "
        << want[i];
  }
}

TEST_F(ComplexTest, ArithmeticMatchesStdComplex) {
  const std::vector<C64> x = Spread<float>(40);
  std::vector<C64> y = Spread<float>(41);
  y.erase(y.begin());
  std::vector<C64> sum, difference, product, quotient, power;
  for (size_t i = 0; i < x.size(); ++i) {
    sum.push_back(x[i] + y[i]);
    difference.push_back(x[i] - y[i]);
    product.push_back(x[i] * y[i]);
    quotient.push_back(x[i] / y[i]);
    power.push_back(std::pow(x[i], y[i]));
  }
  EXPECT_EQ(RunElementwise<float>("add", x, &y), sum);
  EXPECT_EQ(RunElementwise<float>("subtract", x, &y), difference);
  ExpectNear(RunElementwise<float>("multiply", x, &y), product, 1e-6,
             "multiply");
  ExpectNear(RunElementwise<float>("divide", x, &y), quotient, 1e-6, "divide");
  ExpectNear(RunElementwise<float>("power", x, &y), power, 1e-5, "power");
}

TEST_F(ComplexTest, TranscendentalFunctionsMatchStdComplex) {
  const std::vector<C128> x = Spread<double>(40);
  struct Case {
    const char* op;
    C128 (*f)(const C128&);
  };
  const Case cases[] = {
      {"exponential", [](const C128& z) { return std::exp(z); }},
      {"log", [](const C128& z) { return std::log(z); }},
      {"sqrt", [](const C128& z) { return std::sqrt(z); }},
      {"rsqrt", [](const C128& z) { return 1.0 / std::sqrt(z); }},
      {"tanh", [](const C128& z) { return std::tanh(z); }},
      {"tan", [](const C128& z) { return std::tan(z); }},
      {"sine", [](const C128& z) { return std::sin(z); }},
      {"cosine", [](const C128& z) { return std::cos(z); }},
      {"exponential-minus-one",
       [](const C128& z) { return std::exp(z) - 1.0; }},
      {"log-plus-one", [](const C128& z) { return std::log(1.0 + z); }},
      {"sign", [](const C128& z) { return z / std::abs(z); }},
      {"negate", [](const C128& z) { return -z; }},
  };
  for (const Case& c : cases) {
    std::vector<C128> want;
    for (const C128& z : x) want.push_back(c.f(z));
    ExpectNear(RunElementwise<double>(c.op, x), want, 1e-13, c.op);
  }
  // The same in c64, to float precision.
  const std::vector<C64> x32 = Spread<float>(40);
  std::vector<C64> exp32, sqrt32;
  for (const C64& z : x32) {
    exp32.push_back(std::exp(z));
    sqrt32.push_back(std::sqrt(z));
  }
  ExpectNear(RunElementwise<float>("exponential", x32), exp32, 2e-6, "exp");
  ExpectNear(RunElementwise<float>("sqrt", x32), sqrt32, 2e-6, "sqrt");
}

TEST_F(ComplexTest, SpecialValuesFollowXla) {
  const float inf = std::numeric_limits<float>::infinity();
  // Division by zero: (x * inf) part by part; sqrt of a negative real and
  // of -inf; exp keeps an exact zero imaginary part; sign of 0 is 0.
  std::vector<C64> one = {C64(1, 0), C64(-4, 0), C64(-inf, 1), C64(0, 0)};
  std::vector<C64> zero(4, C64(0, 0));
  std::vector<C64> q = RunElementwise<float>("divide", one, &zero);
  EXPECT_EQ(q[0].real(), inf);
  EXPECT_TRUE(std::isnan(q[0].imag()));
  std::vector<C64> root = RunElementwise<float>("sqrt", one);
  EXPECT_EQ(root[0], C64(1, 0));
  // 2 (cos(pi/2) + i sin(pi/2)) in float, as XLA's formula computes it.
  EXPECT_NEAR(root[1].real(), 0, 1e-7);
  EXPECT_EQ(root[1].imag(), 2);
  EXPECT_EQ(root[2], C64(0, inf));
  EXPECT_EQ(root[3], C64(0, 0));
  std::vector<C64> e = RunElementwise<float>("exponential", one);
  EXPECT_EQ(e[0].imag(), 0.0f);
  EXPECT_EQ(RunElementwise<float>("sign", one)[3], C64(0, 0));
}

TEST_F(ComplexTest, AbsRealImagAndComplexMoveBetweenPartsAndWholes) {
  ASSERT_EQ(Load(R"(
HloModule m
ENTRY e {
  z = c64[3] parameter(0)
  re = f32[3] real(z)
  im = f32[3] imag(z)
  abs = f32[3] abs(z)
  neg = f32[3] negate(im)
  conj = c64[3] complex(re, neg)
  ROOT t = (f32[3], f32[3], f32[3], c64[3]) tuple(re, im, abs, conj)
})"),
              absl::OkStatus());
  auto result = Run({Array(PrimitiveType::kC64, {3},
                           std::vector<C64>{{3, 4}, {-1, 0}, {0, -2}})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(ValuesOf<float>(result->elements()[0]), ElementsAre(3, -1, 0));
  EXPECT_THAT(ValuesOf<float>(result->elements()[1]), ElementsAre(4, 0, -2));
  EXPECT_THAT(ValuesOf<float>(result->elements()[2]), ElementsAre(5, 1, 2));
  EXPECT_THAT(ValuesOf<C64>(result->elements()[3]),
              ElementsAre(C64(3, -4), C64(-1, 0), C64(0, 2)));
}

TEST_F(ComplexTest, ComparesPartByPartForEqualityOnly) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY e {
  a = c128[3] parameter(0)
  b = c128[3] parameter(1)
  eq = pred[3] compare(a, b), direction=EQ
  ne = pred[3] compare(a, b), direction=NE
  ROOT t = (pred[3], pred[3]) tuple(eq, ne)
})")
                  .ok());
  const double nan = std::nan("");
  auto result =
      Run({Array(PrimitiveType::kC128, {3},
                 std::vector<C128>{{1, 2}, {1, 2}, {nan, 0}}),
           Array(PrimitiveType::kC128, {3},
                 std::vector<C128>{{1, 2}, {1, -2}, {nan, 0}})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(ValuesOf<bool>(result->elements()[0]),
              ElementsAre(true, false, false));
  EXPECT_THAT(ValuesOf<bool>(result->elements()[1]),
              ElementsAre(false, true, true));
  EXPECT_THAT(std::string(Load(R"(
HloModule m
ENTRY e {
  a = c64[3] parameter(0)
  ROOT lt = pred[3] compare(a, a), direction=LT
})")
                              .message()),
              HasSubstr("complex values compare only for EQ and NE"));
}

TEST_F(ComplexTest, ConvertsRealsIntoComplexAndWidensAndNarrowsParts) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  i = s32[2] parameter(1)
  z = c64[2] convert(x)
  zi = c64[2] convert(i)
  wide = c128[2] convert(z)
  narrow = c64[2] convert(wide)
  ROOT t = (c64[2], c64[2], c128[2], c64[2]) tuple(z, zi, wide, narrow)
})")
                  .ok());
  auto result = Run({Array(PrimitiveType::kF32, {2}, std::vector<float>{1.5f, -2}),
                     Array(PrimitiveType::kS32, {2}, std::vector<int32_t>{7, -3})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(ValuesOf<C64>(result->elements()[0]),
              ElementsAre(C64(1.5f, 0), C64(-2, 0)));
  EXPECT_THAT(ValuesOf<C64>(result->elements()[1]),
              ElementsAre(C64(7, 0), C64(-3, 0)));
  EXPECT_THAT(ValuesOf<C128>(result->elements()[2]),
              ElementsAre(C128(1.5, 0), C128(-2, 0)));
  EXPECT_THAT(ValuesOf<C64>(result->elements()[3]),
              ElementsAre(C64(1.5f, 0), C64(-2, 0)));
}

TEST_F(ComplexTest, ReduceSumsAndMultipliesComplexValues) {
  ASSERT_TRUE(Load(R"(
HloModule m
add {
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  ROOT s = c64[] add(a, b)
}
mul {
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  ROOT p = c64[] multiply(a, b)
}
ENTRY e {
  z = c64[2,3] parameter(0)
  zero = c64[] constant((0, 0))
  one = c64[] constant((1, 0))
  sum = c64[2] reduce(z, zero), dimensions={1}, to_apply=add
  prod = c64[3] reduce(z, one), dimensions={0}, to_apply=mul
  ROOT t = (c64[2], c64[3]) tuple(sum, prod)
})")
                  .ok());
  auto result = Run({Array(PrimitiveType::kC64, {2, 3},
                           std::vector<C64>{{1, 1}, {2, -1}, {0, 3},  //
                                            {1, 0}, {0, 1}, {-1, -1}})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(ValuesOf<C64>(result->elements()[0]),
              ElementsAre(C64(3, 3), C64(0, 0)));
  EXPECT_THAT(ValuesOf<C64>(result->elements()[1]),
              ElementsAre(C64(1, 1), C64(1, 2), C64(3, -3)));
}

TEST_F(ComplexTest, DotMultipliesComplexMatrices) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY e {
  a = c128[2,3] parameter(0)
  b = c128[3,2] parameter(1)
  ROOT d = c128[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})")
                  .ok());
  const std::vector<C128> a = Spread<double>(6);
  std::vector<C128> b = Spread<double>(12);
  b.erase(b.begin(), b.begin() + 6);
  std::vector<C128> want(4);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      for (int k = 0; k < 3; ++k) want[i * 2 + j] += a[i * 3 + k] * b[k * 2 + j];
    }
  }
  auto result = Run({Array(PrimitiveType::kC128, {2, 3}, a),
                     Array(PrimitiveType::kC128, {3, 2}, b)});
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectNear(ValuesOf<C128>(*result), want, 1e-14, "dot");
}

TEST_F(ComplexTest, DataMovementAndSelectKeepSixteenByteElementsWhole) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY e {
  z = c128[2,3] parameter(0)
  p = pred[3,2] parameter(1)
  t = c128[3,2] transpose(z), dimensions={1,0}
  r = c128[3,2] reverse(t), dimensions={0}
  s = c128[3,2] select(p, t, r)
  c = c128[6,2] concatenate(t, s), dimensions={0}
  ROOT sl = c128[2,2] slice(c), slice={[2:6:2], [0:2]}
})")
                  .ok());
  std::vector<C128> z;
  for (int i = 0; i < 6; ++i) z.emplace_back(i, -i);
  auto result =
      Run({Array(PrimitiveType::kC128, {2, 3}, z),
           Array(PrimitiveType::kPred, {3, 2},
                 std::vector<bool>{true, false, false, true, true, true})});
  ASSERT_TRUE(result.ok()) << result.status();
  // t = [[0,3],[1,4],[2,5]], r = [[2,5],[1,4],[0,3]],
  // s = [[0,5],[1,4],[2,5]]; rows 2 and 4 of concat(t, s): t[2], s[1].
  EXPECT_THAT(ValuesOf<C128>(*result),
              ElementsAre(C128(2, -2), C128(5, -5), C128(1, -1), C128(4, -4)));
}

// ---------------------------------------------------------------------------
// fft

// The DFT of `x` (row-major `dims`) over its trailing `rank` dims, by the
// definition: sum over k of x[k] e^(-+2 pi i j.k / n), scaled 1/N inverse.
std::vector<C128> Dft(const std::vector<C128>& x,
                      const std::vector<int64_t>& dims, int rank,
                      bool inverse) {
  std::vector<C128> data = x;
  const int64_t total = static_cast<int64_t>(x.size());
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1;
       d >= static_cast<int64_t>(dims.size()) - rank; --d) {
    const int64_t n = dims[d];
    std::vector<C128> out(data.size());
    for (int64_t i = 0; i < total; ++i) {
      const int64_t j = (i / stride) % n;
      const int64_t base = i - j * stride;
      C128 acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double angle = (inverse ? 2 : -2) * std::numbers::pi *
                             static_cast<double>(j * k) / n;
        acc += data[base + k * stride] * std::polar(1.0, angle);
      }
      out[i] = inverse ? acc / static_cast<double>(n) : acc;
    }
    data = out;
    stride *= n;
  }
  return data;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::string Length(const std::vector<int64_t>& dims, int rank) {
  return absl::StrCat(
      "{", absl::StrJoin(dims.end() - rank, dims.end(), ","), "}");
}

TEST_F(ComplexTest, FftAndIfftMatchTheDftOverOneToThreeTrailingDims) {
  for (int rank = 1; rank <= 3; ++rank) {
    for (const char* type : {"FFT", "IFFT"}) {
      const std::vector<int64_t> dims = {2, 3, 5, 4};
      SCOPED_TRACE(absl::StrCat(type, " of rank ", rank));
      ASSERT_TRUE(Load(absl::StrCat(
                           "HloModule m\nENTRY e {\n  x = c128", DimsText(dims),
                           " parameter(0)\n  ROOT f = c128", DimsText(dims),
                           " fft(x), fft_type=", type,
                           ", fft_length=", Length(dims, rank), "\n}\n"))
                      .ok());
      const std::vector<C128> x = Spread<double>(120);
      auto result = Run({Array(PrimitiveType::kC128, dims, x)});
      ASSERT_TRUE(result.ok()) << result.status();
      ExpectNear(ValuesOf<C128>(*result),
                 Dft(x, dims, rank, std::string(type) == "IFFT"), 1e-12,
                 type);
    }
  }
}

TEST_F(ComplexTest, RfftKeepsTheHalfSpectrumAndIrfftInvertsIt) {
  // Even and odd last dims, 1-D and 2-D, c64.
  for (const auto& [dims, rank] :
       std::vector<std::pair<std::vector<int64_t>, int>>{
           {{3, 8}, 1}, {{3, 7}, 1}, {{4, 6}, 2}, {{2, 3, 5}, 2}}) {
    SCOPED_TRACE(DimsText(dims));
    std::vector<int64_t> half = dims;
    half.back() = dims.back() / 2 + 1;
    ASSERT_TRUE(Load(absl::StrCat(
                         "HloModule m\nENTRY e {\n  x = f32", DimsText(dims),
                         " parameter(0)\n  r = c64", DimsText(half),
                         " fft(x), fft_type=RFFT, fft_length=",
                         Length(dims, rank), "\n  i = f32", DimsText(dims),
                         " fft(r), fft_type=IRFFT, fft_length=",
                         Length(dims, rank),
                         "\n  ROOT t = (c64", DimsText(half), ", f32",
                         DimsText(dims), ") tuple(r, i)\n}\n"))
                    .ok());
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    std::vector<float> x;
    std::vector<C128> x128;
    for (int64_t i = 0; i < count; ++i) {
      x.push_back(static_cast<float>(std::sin(0.7 * i) * 3));
      x128.emplace_back(x.back(), 0);
    }
    auto result = Run({Array(PrimitiveType::kF32, dims, x)});
    ASSERT_TRUE(result.ok()) << result.status();
    const std::vector<C128> full = Dft(x128, dims, rank, false);
    std::vector<C64> want;
    for (int64_t i = 0; i < count; ++i) {
      if (i % dims.back() < half.back()) want.push_back(C64(full[i]));
    }
    ExpectNear(ValuesOf<C64>(result->elements()[0]), want, 1e-5, "rfft");
    std::vector<float> back = ValuesOf<float>(result->elements()[1]);
    ASSERT_EQ(back.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(back[i], x[i], 1e-5) << "irfft element " << i;
    }
  }
}

TEST_F(ComplexTest, IrfftIgnoresTheImaginaryPartsOfTheRealBins) {
  // fft_length 4: bins 0 and 2 must be real; their imaginary parts drop out
  // (numpy.fft.irfft gives the same).
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY e {
  x = c64[3] parameter(0)
  ROOT i = f32[4] fft(x), fft_type=IRFFT, fft_length={4}
})")
                  .ok());
  auto result = Run({Array(PrimitiveType::kC64, {3},
                           std::vector<C64>{{4, 9}, {0, -2}, {0, 7}})});
  ASSERT_TRUE(result.ok()) << result.status();
  // x(t) = (4 + 2 Re((-2i) e^(i pi t / 2))) / 4 = 1 + sin(pi t / 2).
  std::vector<float> got = ValuesOf<float>(*result);
  const float want[] = {1, 2, 1, 0};
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(got[t], want[t], 1e-6) << t;
}

TEST_F(ComplexTest, FftOfTheWrongTypeIsRefusedNamingTheOpAndLine) {
  absl::Status status = Load(R"(
HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  ROOT f = c64[8] fft(x), fft_type=FFT, fft_length={8}
})");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("'f' (line 5): fft FFT needs a complex operand"));
}

}  // namespace complex_test
}  // namespace causeway::exec
