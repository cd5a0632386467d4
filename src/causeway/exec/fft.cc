// fft: FFT, IFFT, RFFT and IRFFT over the 1 to 3 trailing dims, on Eigen's
// FFT module (unsupported/Eigen/FFT, its kissfft backend; MPL2, shipped
// with libeigen3-dev). The module transforms one contiguous line at a time,
// so a transform of rank r is r passes of 1-D transforms, one per
// transformed dim: each line along that dim is gathered into a buffer,
// transformed, and written back (docs/hlo.md "fft" says why this library).
//
// Semantics are XLA's (and numpy's): FFT is unscaled, IFFT divides by the
// product of fft_length; RFFT keeps the fft_length.back() / 2 + 1 first
// bins of the last dim; IRFFT reads those bins as a Hermitian half spectrum
// (the imaginary parts of the bins that must be real are ignored) and gives
// fft_length.back() real values. c64 transforms in float, c128 in double,
// as XLA:CPU's DUCC does.
#include <algorithm>
#include <complex>
#include <cstdint>
#include <vector>

#include "unsupported/Eigen/FFT"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "causeway/hlo/shape_inference.h"

namespace causeway::exec {
namespace {

using hlo::FftType;
using hlo::PrimitiveType;

// Strides of row-major `dims`.
std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * dims[i + 1];
  }
  return strides;
}

// Transforms every line along `dim` of `data` (row-major `dims`) in place:
// forward, or inverse scaled by 1 / dims[dim].
template <typename F>
void TransformAlong(std::vector<std::complex<F>>& data,
                    const std::vector<int64_t>& dims, int64_t dim,
                    bool inverse, Eigen::FFT<F>& fft) {
  const int64_t n = dims[dim];
  if (n <= 1 || data.empty()) return;  // A length-1 transform is the identity.
  const int64_t stride = Strides(dims)[dim];
  const int64_t outer = static_cast<int64_t>(data.size()) / (n * stride);
  std::vector<std::complex<F>> line(n), out(n);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t s = 0; s < stride; ++s) {
      std::complex<F>* base = data.data() + o * n * stride + s;
      for (int64_t i = 0; i < n; ++i) line[i] = base[i * stride];
      if (inverse) {
        fft.inv(out.data(), line.data(), n);  // Scaled by 1 / n.
      } else {
        fft.fwd(out.data(), line.data(), n);
      }
      for (int64_t i = 0; i < n; ++i) base[i * stride] = out[i];
    }
  }
}

template <typename F>
absl::StatusOr<Literal> FftTyped(const Instruction& instr,
                                 const Literal& operand) {
  using C = std::complex<F>;
  const std::vector<int64_t>& in_dims = operand.shape().dims();
  const int64_t rank = static_cast<int64_t>(in_dims.size());
  const int64_t fft_rank = static_cast<int64_t>(instr.fft_length.size());
  const int64_t first = rank - fft_rank;
  const int64_t last = rank - 1;
  Eigen::FFT<F> fft;
  Literal result = Literal::Uninitialized(instr.shape);
  switch (instr.fft_type) {
    case FftType::kFft:
    case FftType::kIfft: {
      const C* in = DataPtr<C>(operand);
      std::vector<C> data(in, in + operand.shape().ElementCount());
      const bool inverse = instr.fft_type == FftType::kIfft;
      for (int64_t d = last; d >= first; --d) {
        TransformAlong(data, in_dims, d, inverse, fft);
      }
      std::copy(data.begin(), data.end(), MutableDataPtr<C>(result));
      return result;
    }
    case FftType::kRfft: {
      // The full complex transform of the real input, then the first
      // n / 2 + 1 bins of the last dim.
      const F* in = DataPtr<F>(operand);
      std::vector<C> data(in, in + operand.shape().ElementCount());
      for (int64_t d = last; d >= first; --d) {
        TransformAlong(data, in_dims, d, /*inverse=*/false, fft);
      }
      const int64_t n = in_dims.back();
      const int64_t bins = instr.shape.dims().back();
      C* out = MutableDataPtr<C>(result);
      const int64_t lines = n == 0 ? 0 : static_cast<int64_t>(data.size()) / n;
      for (int64_t l = 0; l < lines; ++l) {
        std::copy(data.begin() + l * n, data.begin() + l * n + bins,
                  out + l * bins);
      }
      return result;
    }
    case FftType::kIrfft: {
      // The inverse over the outer transformed dims on the half spectrum,
      // then the half spectrum of each last-dim line extended by Hermitian
      // symmetry (X[n-k] = conj X[k]) and inverted; the real part is the
      // result (the imaginary parts of X[0] and X[n/2] drop out there).
      const C* in = DataPtr<C>(operand);
      std::vector<C> half(in, in + operand.shape().ElementCount());
      for (int64_t d = last - 1; d >= first; --d) {
        TransformAlong(half, in_dims, d, /*inverse=*/true, fft);
      }
      const int64_t n = instr.shape.dims().back();
      const int64_t bins = in_dims.back();
      F* out = MutableDataPtr<F>(result);
      const int64_t lines =
          bins == 0 ? 0 : static_cast<int64_t>(half.size()) / bins;
      std::vector<C> full(n), time(n);
      for (int64_t l = 0; l < lines; ++l) {
        const C* x = half.data() + l * bins;
        for (int64_t k = 0; k < n; ++k) {
          full[k] = k < bins ? x[k] : std::conj(x[n - k]);
        }
        if (n > 1) {
          fft.inv(time.data(), full.data(), n);
        } else if (n == 1) {
          time[0] = full[0];
        }
        for (int64_t k = 0; k < n; ++k) out[l * n + k] = time[k].real();
      }
      return result;
    }
  }
  return absl::InternalError("unknown fft type");
}

}  // namespace

absl::StatusOr<Literal> EvalFft(const Instruction& instr,
                                const Literal& operand) {
  const hlo::Shape& in = operand.shape();
  absl::StatusOr<hlo::Shape> want =
      hlo::InferFftShape(in, instr.fft_type, instr.fft_length);
  if (!want.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fft ", instr.name, ": ", want.status().message()));
  }
  if (!instr.shape.IsArray() || want->type() != instr.shape.type() ||
      want->dims() != instr.shape.dims()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fft ", instr.name, ": operand ", in.ToString(false), " gives ",
        want->ToString(false), ", not ", instr.shape.ToString(false)));
  }
  const PrimitiveType part = hlo::IsComplex(in.type())
                                 ? hlo::ComplexComponentType(in.type())
                                 : in.type();
  if (part == PrimitiveType::kF64) return FftTyped<double>(instr, operand);
  return FftTyped<float>(instr, operand);
}

}  // namespace causeway::exec
