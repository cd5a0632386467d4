// dot and convolution on exec/gemm.h's matrix products.
//
// Both kernels bring their operands into a canonical row-major order in the
// accumulation type (float for f16/bf16/f32, double for f64, int64_t for
// integers: integer results wrap as XLA's do; std::complex for c64/c128),
// run the GEMM (on the calling thread, on the processor's widest vector
// instructions; complex products on Eigen's complex GEMM, as XLA:CPU runs
// them), and convert the result to the output element type once.
#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

// Complex products run on the calling thread, as the others (gemm.h).
#define EIGEN_DONT_PARALLELIZE
#include "Eigen/Core"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/logging.h"
#include "causeway/base/memory_account.h"
#include "causeway/base/status.h"
#include "causeway/exec/gemm.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "causeway/hlo/shape.h"

namespace causeway::exec {
namespace {

using hlo::PrimitiveType;
using hlo::Shape;

// Dimension lists of a dot, built per call: on the stack (a scan step runs
// hundreds of small dots, where heap allocations showed in the profile).
using DimList = absl::InlinedVector<int64_t, 8>;

// The accumulation type for a product of `a` and `b` giving `out`.
enum class AccKind {
  kFloat,
  kDouble,
  kInt,
  kComplexFloat,
  kComplexDouble,
  kUnsupported
};

AccKind ChooseAcc(PrimitiveType a, PrimitiveType b, PrimitiveType out) {
  for (PrimitiveType t : {a, b, out}) {
    if (!hlo::IsArrayType(t)) return AccKind::kUnsupported;
  }
  if (hlo::IsComplex(a) || hlo::IsComplex(b) || hlo::IsComplex(out)) {
    // Complex only with complex (XLA's shape inference asks as much).
    if (!hlo::IsComplex(a) || !hlo::IsComplex(b) || !hlo::IsComplex(out)) {
      return AccKind::kUnsupported;
    }
    return a == PrimitiveType::kC128 || b == PrimitiveType::kC128 ||
                   out == PrimitiveType::kC128
               ? AccKind::kComplexDouble
               : AccKind::kComplexFloat;
  }
  if (a == PrimitiveType::kF64 || b == PrimitiveType::kF64 ||
      out == PrimitiveType::kF64) {
    return AccKind::kDouble;
  }
  // f8 operands widen exactly to f32, s4/u4 to their values: XLA:CPU's
  // float normalization computes such a dot the same way (converts around
  // an f32 or integer dot).
  auto is_float = [](PrimitiveType t) {
    return hlo::IsFloating(t) || hlo::IsMinifloat(t);
  };
  if (is_float(out)) return AccKind::kFloat;
  if (hlo::IsInteger(out) || out == PrimitiveType::kPred) {
    if (is_float(a) || is_float(b)) return AccKind::kUnsupported;
    return AccKind::kInt;
  }
  return AccKind::kUnsupported;
}

// The element type whose storage is Acc itself (read in place, written
// directly).
template <typename Acc>
constexpr PrimitiveType kAccType =
    std::is_same_v<Acc, float>                  ? PrimitiveType::kF32
    : std::is_same_v<Acc, double>               ? PrimitiveType::kF64
    : std::is_same_v<Acc, std::complex<float>>  ? PrimitiveType::kC64
    : std::is_same_v<Acc, std::complex<double>> ? PrimitiveType::kC128
                                                : PrimitiveType::kS64;

// Whether ChooseAcc can pair element type E with Acc: complex with complex
// only. The conversions below are instantiated for every pair; the others
// never run.
template <typename Acc, typename E>
constexpr bool kAccPairs = hlo::kIsComplex<Acc> == hlo::kIsComplex<E>;

template <typename Acc, typename E>
inline Acc ElementToAcc(E value) {
  if constexpr (!kAccPairs<Acc, E>) {
    return Acc{};
  } else if constexpr (std::is_same_v<E, bool>) {
    return value ? Acc{1} : Acc{0};
  } else if constexpr (kIsHalf<E> || hlo::kIsMinifloat<E> ||
                       hlo::kIsNarrowInt<E>) {
    return static_cast<Acc>(ToCompute(value));
  } else {
    return static_cast<Acc>(value);
  }
}

template <typename E, typename Acc>
inline E AccToElement(Acc value) {
  if constexpr (!kAccPairs<Acc, E>) {
    return E{};
  } else if constexpr (std::is_same_v<E, bool>) {
    return value != Acc{0};
  } else if constexpr (kIsHalf<E>) {
    return E(static_cast<float>(value));
  } else if constexpr (hlo::kIsMinifloat<E> || hlo::kIsNarrowInt<E>) {
    // A minifloat through f16, as XLA rounds an f8 dot's f32 result (f32 ->
    // f16 -> f8); a sub-byte integer wraps.
    return FromCompute<E>(static_cast<ComputeType<E>>(value));
  } else {
    // Integer results wrap (two's complement); f64 → f32 rounds once.
    return static_cast<E>(value);
  }
}

// Writes the elements of `src` (row-major, dims `src_dims`), viewed with its
// dimensions permuted by `perm` (result dim i is source dim perm[i]), into
// `dst` in row-major order of the permuted dims, converting each element
// with `convert`.
template <typename Src, typename Dst, typename Convert>
void PermuteConvert(const Src* src, std::span<const int64_t> src_dims,
                    std::span<const int64_t> perm, Dst* dst, Convert convert) {
  const int64_t rank = static_cast<int64_t>(perm.size());
  std::vector<int64_t> src_strides = RowMajorStrides(src_dims);
  std::vector<int64_t> dims(rank), strides(rank);
  int64_t count = 1;
  for (int64_t i = 0; i < rank; ++i) {
    dims[i] = src_dims[perm[i]];
    strides[i] = src_strides[perm[i]];
    count *= dims[i];
  }
  if (count == 0) return;
  if (rank == 0) {
    dst[0] = convert(src[0]);
    return;
  }
  const int64_t inner = dims[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  std::vector<int64_t> index(rank - 1, 0);
  std::span<const int64_t> outer_dims(dims.data(), rank - 1);
  int64_t out = 0;
  do {
    int64_t offset = 0;
    for (int64_t i = 0; i + 1 < rank; ++i) offset += index[i] * strides[i];
    const Src* row = src + offset;
    if (inner_stride == 1) {
      for (int64_t j = 0; j < inner; ++j) dst[out + j] = convert(row[j]);
    } else {
      for (int64_t j = 0; j < inner; ++j) {
        dst[out + j] = convert(row[j * inner_stride]);
      }
    }
    out += inner;
  } while (NextIndex(std::span<int64_t>(index), outer_dims));
}

// `literal` converted to Acc and permuted by `perm` into `dst`.
template <typename Acc>
void LiteralToAcc(const hlo::Literal& literal, std::span<const int64_t> perm,
                  Acc* dst) {
  hlo::VisitType(literal.shape().type(), [&](auto tag) {
    using E = decltype(tag);
    if constexpr (std::is_same_v<E, Acc>) {
      // Same type: a plain transpose, which CopyStrided tiles for the cache.
      const std::vector<int64_t>& dims = literal.shape().dims();
      std::vector<int64_t> src_strides = RowMajorStrides(dims);
      std::vector<int64_t> permuted(perm.size()), strides(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) {
        permuted[i] = dims[perm[i]];
        strides[i] = src_strides[perm[i]];
      }
      CopyStrided(sizeof(Acc), permuted, DataPtr<E>(literal), strides, dst,
                  RowMajorStrides(permuted));
    } else {
      PermuteConvert(DataPtr<E>(literal), literal.shape().dims(), perm, dst,
                     [](E v) { return ElementToAcc<Acc>(v); });
    }
  });
}

// Writes `acc` (row-major over dims `acc_dims`), permuted by `perm`, into
// `out` converted to its element type.
template <typename Acc>
void AccToLiteral(const Acc* acc, std::span<const int64_t> acc_dims,
                  std::span<const int64_t> perm, hlo::Literal& out) {
  hlo::VisitType(out.shape().type(), [&](auto tag) {
    using E = decltype(tag);
    PermuteConvert(acc, acc_dims, perm, MutableDataPtr<E>(out),
                   [](Acc v) { return AccToElement<E>(v); });
  });
}

bool IsIdentity(std::span<const int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

absl::Status CheckDims(std::span<const int64_t> dims, int64_t rank,
                       const char* what) {
  absl::InlinedVector<bool, 8> seen(rank, false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || seen[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dot: ", what, " ", DimsText(dims),
          " are not distinct dimensions of a rank-", rank, " operand"));
    }
    seen[d] = true;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// dot

// One operand of a dot as a batch of matrices.
template <typename Acc>
struct DotOperand {
  ChargedArray<Acc> buffer;  // Used when the literal cannot be read in place.
  const Acc* data = nullptr;
  // True when each batch entry is stored [rows, cols] row-major; false for
  // [cols, rows] (read transposed).
  bool row_major = true;
};

// Prepares `literal` as `batch` matrices of `rows` x `cols`, where the rows
// come from dims `row_dims` and the columns from `col_dims`.
template <typename Acc>
DotOperand<Acc> PrepareDotOperand(const hlo::Literal& literal,
                                  std::span<const int64_t> batch_dims,
                                  std::span<const int64_t> row_dims,
                                  std::span<const int64_t> col_dims) {
  DotOperand<Acc> operand;
  DimList rows_first(batch_dims.begin(), batch_dims.end());
  rows_first.insert(rows_first.end(), row_dims.begin(), row_dims.end());
  DimList cols_first(batch_dims.begin(), batch_dims.end());
  cols_first.insert(cols_first.end(), col_dims.begin(), col_dims.end());
  cols_first.insert(cols_first.end(), row_dims.begin(), row_dims.end());
  rows_first.insert(rows_first.end(), col_dims.begin(), col_dims.end());
  if (literal.shape().type() == kAccType<Acc>) {
    if (IsIdentity(rows_first)) {
      operand.data = DataPtr<Acc>(literal);
      return operand;
    }
    if (IsIdentity(cols_first)) {
      operand.data = DataPtr<Acc>(literal);
      operand.row_major = false;
      return operand;
    }
  }
  operand.buffer = ChargedArray<Acc>(literal.shape().ElementCount());
  LiteralToAcc(literal, rows_first, operand.buffer.data());
  operand.data = operand.buffer.data();
  return operand;
}

// out = lhs x rhs per batch, or out += lhs x rhs when `accumulate`.
template <typename Acc>
void BatchedMatmul(const DotOperand<Acc>& lhs, const DotOperand<Acc>& rhs,
                   int64_t batch, int64_t m, int64_t k, int64_t n, Acc* out,
                   bool accumulate = false) {
  if constexpr (hlo::kIsComplex<Acc>) {
    // Eigen's complex GEMM (gemm.h has the real types only).
    using Matrix =
        Eigen::Matrix<Acc, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using ConstMap =
        Eigen::Map<const Matrix, Eigen::Unaligned, Eigen::OuterStride<>>;
    using Map = Eigen::Map<Matrix, Eigen::Unaligned, Eigen::OuterStride<>>;
    // The row-major copies of one batch entry's operands made below.
    const MemoryCharge copies(k == 0 ? 0
                                     : (m * k + k * n) *
                                           static_cast<int64_t>(sizeof(Acc)));
    for (int64_t b = 0; b < batch; ++b) {
      const Acc* a = lhs.data + b * m * k;
      const Acc* c = rhs.data + b * k * n;
      Map result(out + b * m * n, m, n, Eigen::OuterStride<>(n));
      if (k == 0) {
        if (!accumulate) result.setZero();
        continue;
      }
      // A row-major [cols, rows] matrix is the transpose of what we need.
      Matrix product =
          (lhs.row_major ? ConstMap(a, m, k, Eigen::OuterStride<>(k))
                         : ConstMap(a, k, m, Eigen::OuterStride<>(m)))
              .eval();
      if (!lhs.row_major) product.transposeInPlace();
      Matrix right =
          (rhs.row_major ? ConstMap(c, k, n, Eigen::OuterStride<>(n))
                         : ConstMap(c, n, k, Eigen::OuterStride<>(k)))
              .eval();
      if (!rhs.row_major) right.transposeInPlace();
      if (accumulate) {
        result.noalias() += product * right;
      } else {
        result.noalias() = product * right;
      }
    }
  } else {
    for (int64_t b = 0; b < batch; ++b) {
      // A row-major [cols, rows] matrix is the transpose of what we need.
      GemmCall<Acc> call;
      call.m = m;
      call.n = n;
      call.k = k;
      call.a = {lhs.data + b * m * k, lhs.row_major ? k : m, !lhs.row_major};
      call.b = {rhs.data + b * k * n, rhs.row_major ? n : k, !rhs.row_major};
      call.c = out + b * m * n;
      call.ldc = n;
      call.accumulate = accumulate;
      Gemm(call);
    }
  }
}

template <typename Acc>
absl::StatusOr<Literal> DotWithAcc(const Instruction& instr, const Literal& lhs,
                                   const Literal& rhs,
                                   std::span<const int64_t> lhs_free,
                                   std::span<const int64_t> rhs_free,
                                   int64_t batch, int64_t m, int64_t k,
                                   int64_t n, Literal* accumulator) {
  const hlo::DotDimensionNumbers& dnums = instr.dot_dimension_numbers;
  DotOperand<Acc> a = PrepareDotOperand<Acc>(
      lhs, dnums.lhs_batch_dims, lhs_free, dnums.lhs_contracting_dims);
  DotOperand<Acc> b = PrepareDotOperand<Acc>(
      rhs, dnums.rhs_batch_dims, dnums.rhs_contracting_dims, rhs_free);
  const bool direct = instr.shape.type() == kAccType<Acc> &&
                      !std::is_same_v<Acc, int64_t>;
  if (accumulator != nullptr) {
    // EvalDotAccumulate admits only the direct types.
    CW_CHECK(direct) << "dot " << instr.name;
    Literal result = std::move(*accumulator);
    BatchedMatmul(a, b, batch, m, k, n, MutableDataPtr<Acc>(result),
                  /*accumulate=*/true);
    return result;
  }
  // Every element is written below (the GEMM zeroes before it accumulates).
  Literal result =
      Literal::Uninitialized(Shape(instr.shape.type(), instr.shape.dims()));
  if (direct) {
    BatchedMatmul(a, b, batch, m, k, n, MutableDataPtr<Acc>(result));
    return result;
  }
  const int64_t count = batch * m * n;
  ChargedArray<Acc> acc(count);
  BatchedMatmul(a, b, batch, m, k, n, acc.data());
  hlo::VisitType(instr.shape.type(), [&](auto tag) {
    using E = decltype(tag);
    E* out = MutableDataPtr<E>(result);
    for (int64_t i = 0; i < count; ++i) out[i] = AccToElement<E>(acc.data()[i]);
  });
  return result;
}

// ---------------------------------------------------------------------------
// convolution

// Sizes of one convolution, every dimension in canonical order.
struct ConvGeometry {
  int64_t spatial_rank = 0;
  int64_t input_batch = 0, input_features = 0;
  std::vector<int64_t> input_spatial;
  std::vector<int64_t> kernel_spatial;
  int64_t kernel_input_features = 0, output_features = 0;
  int64_t output_batch = 0;
  std::vector<int64_t> output_spatial;
  int64_t feature_groups = 1, batch_groups = 1;
};

absl::StatusOr<ConvGeometry> ComputeConvGeometry(const Instruction& instr,
                                                 const Shape& input,
                                                 const Shape& kernel) {
  const hlo::ConvolutionDimensionNumbers& d =
      instr.convolution_dimension_numbers;
  ConvGeometry g;
  g.spatial_rank = static_cast<int64_t>(d.input_spatial_dimensions.size());
  const int64_t rank = g.spatial_rank + 2;
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("convolution ", instr.name, ": ", why));
  };
  if (input.rank() != rank || kernel.rank() != rank ||
      instr.shape.rank() != rank ||
      static_cast<int64_t>(d.kernel_spatial_dimensions.size()) !=
          g.spatial_rank ||
      static_cast<int64_t>(d.output_spatial_dimensions.size()) !=
          g.spatial_rank) {
    return bad(absl::StrCat("dim_labels describe ", g.spatial_rank,
                            " spatial dims but input is ", input.ToString(),
                            ", kernel ", kernel.ToString(), ", output ",
                            instr.shape.ToString()));
  }
  if (static_cast<int64_t>(instr.window.size()) != g.spatial_rank) {
    return bad(absl::StrCat("window has ", instr.window.size(), " dims for ",
                            g.spatial_rank, " spatial dims"));
  }
  auto check_perm = [&](int64_t a, int64_t b, const std::vector<int64_t>& s,
                        const char* what) -> absl::Status {
    std::vector<int64_t> all = {a, b};
    all.insert(all.end(), s.begin(), s.end());
    std::vector<bool> seen(rank, false);
    for (int64_t x : all) {
      if (x < 0 || x >= rank || seen[x]) {
        return bad(absl::StrCat(what, " dimension labels ", DimsText(all),
                                " are not a permutation of 0..", rank - 1));
      }
      seen[x] = true;
    }
    return absl::OkStatus();
  };
  CW_RETURN_IF_ERROR(check_perm(d.input_batch_dimension,
                                d.input_feature_dimension,
                                d.input_spatial_dimensions, "input"));
  CW_RETURN_IF_ERROR(check_perm(d.kernel_input_feature_dimension,
                                d.kernel_output_feature_dimension,
                                d.kernel_spatial_dimensions, "kernel"));
  CW_RETURN_IF_ERROR(check_perm(d.output_batch_dimension,
                                d.output_feature_dimension,
                                d.output_spatial_dimensions, "output"));
  g.input_batch = input.dim(d.input_batch_dimension);
  g.input_features = input.dim(d.input_feature_dimension);
  g.kernel_input_features = kernel.dim(d.kernel_input_feature_dimension);
  g.output_features = kernel.dim(d.kernel_output_feature_dimension);
  g.feature_groups = instr.feature_group_count;
  g.batch_groups = instr.batch_group_count;
  if (g.feature_groups < 1 || g.batch_groups < 1) {
    return bad("feature_group_count and batch_group_count must be >= 1");
  }
  if (g.feature_groups > 1 && g.batch_groups > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "convolution ", instr.name,
        ": feature_group_count and batch_group_count both > 1 is not "
        "supported"));
  }
  if (g.input_features != g.kernel_input_features * g.feature_groups) {
    return bad(absl::StrCat("input has ", g.input_features,
                            " features but kernel has ",
                            g.kernel_input_features, " input features x ",
                            g.feature_groups, " feature groups"));
  }
  if (g.output_features % g.feature_groups != 0 ||
      g.output_features % g.batch_groups != 0 ||
      g.input_batch % g.batch_groups != 0) {
    return bad(absl::StrCat("kernel output features ", g.output_features,
                            " and input batch ", g.input_batch,
                            " do not divide into the groups"));
  }
  g.output_batch = g.input_batch / g.batch_groups;
  for (int64_t i = 0; i < g.spatial_rank; ++i) {
    const hlo::WindowDimension& w = instr.window[i];
    const int64_t in = input.dim(d.input_spatial_dimensions[i]);
    const int64_t k = kernel.dim(d.kernel_spatial_dimensions[i]);
    if (w.size != k || w.stride < 1 || w.base_dilation < 1 ||
        w.window_dilation < 1) {
      return bad(absl::StrCat("window dim ", i, " (size ", w.size, ", stride ",
                              w.stride, ") does not fit kernel dim of size ",
                              k));
    }
    g.input_spatial.push_back(in);
    g.kernel_spatial.push_back(k);
    const int64_t dilated_input =
        (in == 0 ? 0 : (in - 1) * w.base_dilation + 1) + w.padding_low +
        w.padding_high;
    const int64_t dilated_window = k == 0 ? 0 : (k - 1) * w.window_dilation + 1;
    int64_t out = dilated_input >= dilated_window
                      ? (dilated_input - dilated_window) / w.stride + 1
                      : 0;
    g.output_spatial.push_back(out);
  }
  std::vector<int64_t> expected(rank);
  expected[d.output_batch_dimension] = g.output_batch;
  expected[d.output_feature_dimension] = g.output_features;
  for (int64_t i = 0; i < g.spatial_rank; ++i) {
    expected[d.output_spatial_dimensions[i]] = g.output_spatial[i];
  }
  if (expected != instr.shape.dims()) {
    return bad(absl::StrCat("output shape ", instr.shape.ToString(),
                            " does not match the computed dims ",
                            DimsText(expected)));
  }
  return g;
}

// Copies a short run of elements (often a handful of channels, where a
// memmove call would cost more than the copy).
template <typename Acc>
inline void CopyChannels(const Acc* src, int64_t count, Acc* dst) {
  if (count >= 64) {
    std::memcpy(dst, src, count * sizeof(Acc));
  } else {
    for (int64_t i = 0; i < count; ++i) dst[i] = src[i];
  }
}

// Convolution as im2col + GEMM. Input canonical: [N, S..., C]; kernel
// canonical: [K..., I, O]; output canonical: [N/bgc, O..., Cout]. Each GEMM
// row is one (output batch, output position) pair, so one product covers
// many batch elements (the weight gradient has few output positions and a
// large window).
template <typename Acc>
void ConvolveCanonical(const Instruction& instr, const ConvGeometry& g,
                       const Acc* input, const Acc* kernel, Acc* output) {
  const int64_t d = g.spatial_rank;
  int64_t window_count = 1;
  for (int64_t k : g.kernel_spatial) window_count *= k;
  int64_t positions = 1;
  for (int64_t o : g.output_spatial) positions *= o;
  const int64_t in_c = g.input_features;
  const int64_t cin_g = g.kernel_input_features;  // Channels per group.
  const int64_t cout = g.output_features;
  const int64_t groups = std::max(g.feature_groups, g.batch_groups);
  const int64_t cout_g = cout / groups;
  const int64_t patch = window_count * cin_g;
  const int64_t total_rows = g.output_batch * positions;
  std::vector<int64_t> in_dims = {g.input_batch};
  in_dims.insert(in_dims.end(), g.input_spatial.begin(), g.input_spatial.end());
  in_dims.push_back(in_c);
  const std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  if (total_rows == 0 || cout == 0) return;
  if (patch == 0) {
    std::fill(output, output + total_rows * cout, Acc{0});
    return;
  }
  // Rows per product: enough for an efficient GEMM, with the im2col
  // buffer bounded (~2 MiB normally, up to 64 MiB for huge patches).
  const int64_t patch_bytes = patch * static_cast<int64_t>(sizeof(Acc));
  int64_t chunk_rows = std::max<int64_t>(
      (int64_t{2} << 20) / patch_bytes,
      std::min<int64_t>(256, (int64_t{64} << 20) / patch_bytes));
  chunk_rows = std::clamp<int64_t>(chunk_rows, 1, total_rows);
  ChargedArray<Acc> columns(chunk_rows * patch);
  // The innermost window dim reads consecutive input positions when it
  // is neither dilated nor reversed.
  const hlo::WindowDimension inner =
      d > 0 ? instr.window[d - 1] : hlo::WindowDimension();
  const bool inner_contiguous = d > 0 && inner.window_dilation == 1 &&
                                inner.base_dilation == 1 &&
                                !inner.window_reversal;
  const int64_t inner_stride = d > 0 ? in_strides[d] : 0;

  // Per spatial dim and window position: the offset in the dilated, padded
  // input relative to output position * stride.
  std::vector<std::vector<int64_t>> window_offset(d);
  for (int64_t i = 0; i < d; ++i) {
    const hlo::WindowDimension& w = instr.window[i];
    for (int64_t k = 0; k < g.kernel_spatial[i]; ++k) {
      const int64_t kk = w.window_reversal ? g.kernel_spatial[i] - 1 - k : k;
      window_offset[i].push_back(kk * w.window_dilation - w.padding_low);
    }
  }

  std::vector<int64_t> out_index(d), win_index(d);
  for (int64_t group = 0; group < groups; ++group) {
    const int64_t channel0 = g.feature_groups > 1 ? group * cin_g : 0;
    const int64_t out_c0 = group * cout_g;
    const int64_t batch0 = g.batch_groups > 1 ? group * g.output_batch : 0;
    for (int64_t row0 = 0; row0 < total_rows; row0 += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, total_rows - row0);
      // Batch element and output index of row0.
      int64_t n = row0 / positions;
      int64_t rem = row0 % positions;
      for (int64_t i = d - 1; i >= 0; --i) {
        out_index[i] = rem % g.output_spatial[i];
        rem /= g.output_spatial[i];
      }
      for (int64_t r = 0; r < rows; ++r) {
        Acc* col = columns.data() + r * patch;
        const int64_t batch_offset = (batch0 + n) * in_strides[0] + channel0;
        // The outer window dims one position at a time; the innermost one
        // as a run of consecutive input positions when it can be.
        std::fill(win_index.begin(), win_index.end(), 0);
        do {
          bool valid = true;
          int64_t offset = batch_offset;
          for (int64_t i = 0; i + 1 < d; ++i) {
            const hlo::WindowDimension& w = instr.window[i];
            int64_t x =
                out_index[i] * w.stride + window_offset[i][win_index[i]];
            if (x < 0 || x % w.base_dilation != 0 ||
                x / w.base_dilation >= g.input_spatial[i]) {
              valid = false;
              break;
            }
            offset += x / w.base_dilation * in_strides[1 + i];
          }
          const int64_t inner_k = d > 0 ? g.kernel_spatial[d - 1] : 1;
          if (!valid) {
            std::fill(col, col + inner_k * cin_g, Acc{0});
          } else if (d == 0) {
            CopyChannels(input + offset, cin_g, col);
          } else if (inner_contiguous) {
            // Input positions base .. base + inner_k - 1.
            const int64_t base =
                out_index[d - 1] * inner.stride - inner.padding_low;
            const int64_t lo = std::clamp<int64_t>(-base, 0, inner_k);
            const int64_t hi =
                std::clamp<int64_t>(g.input_spatial[d - 1] - base, lo, inner_k);
            std::fill(col, col + lo * cin_g, Acc{0});
            if (cin_g == in_c) {  // Positions and channels are contiguous.
              CopyChannels(input + offset + (base + lo) * inner_stride,
                           (hi - lo) * cin_g, col + lo * cin_g);
            } else {
              for (int64_t k = lo; k < hi; ++k) {
                CopyChannels(input + offset + (base + k) * inner_stride, cin_g,
                             col + k * cin_g);
              }
            }
            std::fill(col + hi * cin_g, col + inner_k * cin_g, Acc{0});
          } else {
            for (int64_t k = 0; k < inner_k; ++k) {
              int64_t x =
                  out_index[d - 1] * inner.stride + window_offset[d - 1][k];
              if (x < 0 || x % inner.base_dilation != 0 ||
                  x / inner.base_dilation >= g.input_spatial[d - 1]) {
                std::fill(col + k * cin_g, col + (k + 1) * cin_g, Acc{0});
              } else {
                CopyChannels(
                    input + offset + x / inner.base_dilation * inner_stride,
                    cin_g, col + k * cin_g);
              }
            }
          }
          col += inner_k * cin_g;
        } while (d > 1 && NextIndex(std::span<int64_t>(win_index.data(), d - 1),
                                    std::span<const int64_t>(
                                        g.kernel_spatial.data(), d - 1)));
        if (!NextIndex(std::span<int64_t>(out_index), g.output_spatial)) ++n;
      }
      GemmCall<Acc> call;
      call.m = rows;
      call.n = cout_g;
      call.k = patch;
      call.a = {columns.data(), patch, false};
      call.b = {kernel + out_c0, cout, false};
      call.c = output + row0 * cout + out_c0;
      call.ldc = cout;
      Gemm(call);
    }
  }
}

template <typename Acc>
constexpr PrimitiveType kAccPrimitiveType = std::is_same_v<Acc, float>
                                                ? PrimitiveType::kF32
                                                : (std::is_same_v<Acc, double>
                                                       ? PrimitiveType::kF64
                                                       : PrimitiveType::kS64);

// `literal` permuted by `perm` in Acc: in place when it already is, else
// copied into `buffer`.
template <typename Acc>
const Acc* CanonicalOperand(const Literal& literal,
                            const std::vector<int64_t>& perm,
                            ChargedArray<Acc>& buffer) {
  if (literal.shape().type() == kAccPrimitiveType<Acc> && IsIdentity(perm)) {
    return DataPtr<Acc>(literal);
  }
  buffer = ChargedArray<Acc>(literal.shape().ElementCount());
  LiteralToAcc(literal, perm, buffer.data());
  return buffer.data();
}

template <typename Acc>
absl::StatusOr<Literal> ConvolutionWithAcc(const Instruction& instr,
                                           const ConvGeometry& g,
                                           const Literal& input,
                                           const Literal& kernel) {
  const hlo::ConvolutionDimensionNumbers& d =
      instr.convolution_dimension_numbers;
  const int64_t sr = g.spatial_rank;
  std::vector<int64_t> in_perm = {d.input_batch_dimension};
  in_perm.insert(in_perm.end(), d.input_spatial_dimensions.begin(),
                 d.input_spatial_dimensions.end());
  in_perm.push_back(d.input_feature_dimension);
  std::vector<int64_t> k_perm(d.kernel_spatial_dimensions);
  k_perm.push_back(d.kernel_input_feature_dimension);
  k_perm.push_back(d.kernel_output_feature_dimension);
  ChargedArray<Acc> in_buf, k_buf;
  const Acc* in = CanonicalOperand(input, in_perm, in_buf);
  const Acc* k = CanonicalOperand(kernel, k_perm, k_buf);

  // Output dim j reads canonical dim out_perm[j].
  std::vector<int64_t> out_perm(sr + 2);
  out_perm[d.output_batch_dimension] = 0;
  for (int64_t i = 0; i < sr; ++i)
    out_perm[d.output_spatial_dimensions[i]] = 1 + i;
  out_perm[d.output_feature_dimension] = sr + 1;
  Literal result(Shape(instr.shape.type(), instr.shape.dims()));
  if (instr.shape.type() == kAccPrimitiveType<Acc> && IsIdentity(out_perm)) {
    ConvolveCanonical(instr, g, in, k, MutableDataPtr<Acc>(result));
    return result;
  }
  std::vector<int64_t> canonical_out = {g.output_batch};
  canonical_out.insert(canonical_out.end(), g.output_spatial.begin(),
                       g.output_spatial.end());
  canonical_out.push_back(g.output_features);
  ChargedArray<Acc> out_buf(instr.shape.ElementCount());
  ConvolveCanonical(instr, g, in, k, out_buf.data());
  AccToLiteral(out_buf.data(), canonical_out, out_perm, result);
  return result;
}

}  // namespace

namespace {

// EvalDot, or EvalDotAccumulate when `accumulator` is set.
absl::StatusOr<Literal> Dot(const Instruction& instr, const Literal& lhs,
                            const Literal& rhs, Literal* accumulator) {
  const hlo::DotDimensionNumbers& dnums = instr.dot_dimension_numbers;
  const Shape& ls = lhs.shape();
  const Shape& rs = rhs.shape();
  if (!ls.IsArray() || !rs.IsArray() || !instr.shape.IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dot ", instr.name, ": operands must be arrays"));
  }
  CW_RETURN_IF_ERROR(
      CheckDims(dnums.lhs_batch_dims, ls.rank(), "lhs_batch_dims"));
  CW_RETURN_IF_ERROR(
      CheckDims(dnums.rhs_batch_dims, rs.rank(), "rhs_batch_dims"));
  DimList lhs_bc(dnums.lhs_batch_dims.begin(), dnums.lhs_batch_dims.end());
  lhs_bc.insert(lhs_bc.end(), dnums.lhs_contracting_dims.begin(),
                dnums.lhs_contracting_dims.end());
  DimList rhs_bc(dnums.rhs_batch_dims.begin(), dnums.rhs_batch_dims.end());
  rhs_bc.insert(rhs_bc.end(), dnums.rhs_contracting_dims.begin(),
                dnums.rhs_contracting_dims.end());
  CW_RETURN_IF_ERROR(
      CheckDims(lhs_bc, ls.rank(), "lhs batch+contracting dims"));
  CW_RETURN_IF_ERROR(
      CheckDims(rhs_bc, rs.rank(), "rhs batch+contracting dims"));
  if (dnums.lhs_batch_dims.size() != dnums.rhs_batch_dims.size() ||
      dnums.lhs_contracting_dims.size() != dnums.rhs_contracting_dims.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dot ", instr.name,
        ": lhs and rhs need the same number of batch and contracting dims"));
  }
  int64_t batch = 1, k = 1, m = 1, n = 1;
  DimList out_dims;
  for (size_t i = 0; i < dnums.lhs_batch_dims.size(); ++i) {
    int64_t size = ls.dim(dnums.lhs_batch_dims[i]);
    if (size != rs.dim(dnums.rhs_batch_dims[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dot ", instr.name, ": batch dim sizes differ: ", ls.ToString(),
          " vs ", rs.ToString()));
    }
    batch *= size;
    out_dims.push_back(size);
  }
  for (size_t i = 0; i < dnums.lhs_contracting_dims.size(); ++i) {
    int64_t size = ls.dim(dnums.lhs_contracting_dims[i]);
    if (size != rs.dim(dnums.rhs_contracting_dims[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dot ", instr.name, ": contracting dim sizes differ: ", ls.ToString(),
          " vs ", rs.ToString()));
    }
    k *= size;
  }
  DimList lhs_free, rhs_free;
  for (int64_t i = 0; i < ls.rank(); ++i) {
    if (std::find(lhs_bc.begin(), lhs_bc.end(), i) == lhs_bc.end()) {
      lhs_free.push_back(i);
      m *= ls.dim(i);
      out_dims.push_back(ls.dim(i));
    }
  }
  for (int64_t i = 0; i < rs.rank(); ++i) {
    if (std::find(rhs_bc.begin(), rhs_bc.end(), i) == rhs_bc.end()) {
      rhs_free.push_back(i);
      n *= rs.dim(i);
      out_dims.push_back(rs.dim(i));
    }
  }
  if (!std::equal(out_dims.begin(), out_dims.end(), instr.shape.dims().begin(),
                  instr.shape.dims().end())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dot ", instr.name, ": result shape ", instr.shape.ToString(),
        " does not match the operands' dims ", DimsText(out_dims)));
  }
  switch (ChooseAcc(ls.type(), rs.type(), instr.shape.type())) {
    case AccKind::kFloat:
      return DotWithAcc<float>(instr, lhs, rhs, lhs_free, rhs_free, batch, m, k,
                               n, accumulator);
    case AccKind::kDouble:
      return DotWithAcc<double>(instr, lhs, rhs, lhs_free, rhs_free, batch, m,
                                k, n, accumulator);
    case AccKind::kInt:
      return DotWithAcc<int64_t>(instr, lhs, rhs, lhs_free, rhs_free, batch, m,
                                 k, n, accumulator);
    case AccKind::kComplexFloat:
      return DotWithAcc<std::complex<float>>(instr, lhs, rhs, lhs_free,
                                             rhs_free, batch, m, k, n,
                                             accumulator);
    case AccKind::kComplexDouble:
      return DotWithAcc<std::complex<double>>(instr, lhs, rhs, lhs_free,
                                              rhs_free, batch, m, k, n,
                                              accumulator);
    case AccKind::kUnsupported:
      break;
  }
  return absl::UnimplementedError(absl::StrCat(
      "dot ", instr.name, " of ", ls.ToString(), " and ", rs.ToString(),
      " giving ", instr.shape.ToString(), " is not supported"));
}

}  // namespace

absl::StatusOr<Literal> EvalDot(const Instruction& instr, const Literal& lhs,
                                const Literal& rhs) {
  return Dot(instr, lhs, rhs, nullptr);
}

bool CanAccumulateDot(const Instruction& dot) {
  if (dot.opcode != hlo::Opcode::kDot || dot.operands.size() != 2 ||
      !dot.shape.IsArray()) {
    return false;
  }
  const PrimitiveType type = dot.shape.type();
  return (type == PrimitiveType::kF32 || type == PrimitiveType::kF64) &&
         dot.operands[0]->shape.IsArray() &&
         dot.operands[0]->shape.type() == type &&
         dot.operands[1]->shape.IsArray() &&
         dot.operands[1]->shape.type() == type;
}

absl::StatusOr<Literal> EvalDotAccumulate(const Instruction& instr,
                                          const Literal& lhs,
                                          const Literal& rhs,
                                          Literal accumulator) {
  if (!CanAccumulateDot(instr) || !accumulator.shape().IsArray() ||
      accumulator.shape().type() != instr.shape.type() ||
      accumulator.shape().dims() != instr.shape.dims() ||
      lhs.shape().type() != instr.shape.type() ||
      rhs.shape().type() != instr.shape.type()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dot ", instr.name, " cannot accumulate into ",
        accumulator.shape().ToString(false), " from ",
        lhs.shape().ToString(false), " and ", rhs.shape().ToString(false)));
  }
  return Dot(instr, lhs, rhs, &accumulator);
}

absl::StatusOr<Literal> EvalConvolution(const Instruction& instr,
                                        const Literal& input,
                                        const Literal& kernel) {
  if (!input.shape().IsArray() || !kernel.shape().IsArray() ||
      !instr.shape.IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat("convolution ", instr.name, ": operands must be arrays"));
  }
  CW_ASSIGN_OR_RETURN(ConvGeometry g, ComputeConvGeometry(instr, input.shape(),
                                                          kernel.shape()));
  switch (ChooseAcc(input.shape().type(), kernel.shape().type(),
                    instr.shape.type())) {
    case AccKind::kFloat:
      return ConvolutionWithAcc<float>(instr, g, input, kernel);
    case AccKind::kDouble:
      return ConvolutionWithAcc<double>(instr, g, input, kernel);
    case AccKind::kInt:
      if (instr.shape.type() != PrimitiveType::kPred) {
        return ConvolutionWithAcc<int64_t>(instr, g, input, kernel);
      }
      break;
    case AccKind::kComplexFloat:
    case AccKind::kComplexDouble:
    case AccKind::kUnsupported:
      break;
  }
  return absl::UnimplementedError(
      absl::StrCat("convolution ", instr.name, " of ", input.shape().ToString(),
                   " and ", kernel.shape().ToString(), " giving ",
                   instr.shape.ToString(), " is not supported"));
}

}  // namespace causeway::exec
