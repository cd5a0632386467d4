// The LAPACK custom-calls JAX writes on CPU (jnp.linalg, jax.scipy.linalg:
// cholesky, triangular_solve, lu and what inv, det and solve build on it,
// qr, eigh, svd), run by the LAPACK JAX itself calls (jaxlib's kernels call
// LAPACK; Debian's liblapack here), so that the decompositions come out with
// the same conventions: pivots, Householder reflectors, signs of
// eigenvectors and singular vectors, info codes.
//
// Operands arrive row-major (Causeway's storage whatever the layout says);
// each matrix of the batch (the leading dims) is copied into a
// column-major buffer, as XLA's operand_layout_constraints ask, handed to
// LAPACK, and copied back. Options come from backend_config
// (`{uplo = 76 : ui8}`: the ASCII code of LAPACK's character argument).
// The reference BLAS and LAPACK stop the whole process (xerbla) on an
// argument they refuse, so every letter and every size is checked here
// before the call: a bad one is an InvalidArgument error of the op.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "causeway/hlo/custom_call.h"

extern "C" {
// Fortran LAPACK (gfortran ABI: hidden lengths of character arguments last).
void spotrf_(const char* uplo, const int* n, float* a, const int* lda,
             int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda,
             int* info, size_t);
void strsm_(const char* side, const char* uplo, const char* transa,
            const char* diag, const int* m, const int* n, const float* alpha,
            const float* a, const int* lda, float* b, const int* ldb, size_t,
            size_t, size_t, size_t);
void dtrsm_(const char* side, const char* uplo, const char* transa,
            const char* diag, const int* m, const int* n, const double* alpha,
            const double* a, const int* lda, double* b, const int* ldb, size_t,
            size_t, size_t, size_t);
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv,
             int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv,
             int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau,
             float* work, const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda,
             double* tau, double* work, const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a,
             const int* lda, const float* tau, float* work, const int* lwork,
             int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a,
             const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a,
             const int* lda, float* w, float* work, const int* lwork,
             int* iwork, const int* liwork, int* info, size_t, size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a,
             const int* lda, double* w, double* work, const int* lwork,
             int* iwork, const int* liwork, int* info, size_t, size_t);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a,
             const int* lda, float* s, float* u, const int* ldu, float* vt,
             const int* ldvt, float* work, const int* lwork, int* iwork,
             int* info, size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a,
             const int* lda, double* s, double* u, const int* ldu, double* vt,
             const int* ldvt, double* work, const int* lwork, int* iwork,
             int* info, size_t);
}

namespace causeway::exec {
namespace {

using hlo::PrimitiveType;
using hlo::Shape;

// The typed LAPACK entry points for float (s) and double (d).
template <typename T>
struct Lapack;

template <>
struct Lapack<float> {
  static constexpr auto potrf = spotrf_;
  static constexpr auto trsm = strsm_;
  static constexpr auto getrf = sgetrf_;
  static constexpr auto geqrf = sgeqrf_;
  static constexpr auto orgqr = sorgqr_;
  static constexpr auto syevd = ssyevd_;
  static constexpr auto gesdd = sgesdd_;
};

template <>
struct Lapack<double> {
  static constexpr auto potrf = dpotrf_;
  static constexpr auto trsm = dtrsm_;
  static constexpr auto getrf = dgetrf_;
  static constexpr auto geqrf = dgeqrf_;
  static constexpr auto orgqr = dorgqr_;
  static constexpr auto syevd = dsyevd_;
  static constexpr auto gesdd = dgesdd_;
};

// `{uplo = 76 : ui8, mode = 86 : ui8}` -> {"uplo": 'L', "mode": 'V'}.
std::map<std::string, char> BackendOptions(const Instruction& instr) {
  std::map<std::string, char> options;
  for (const auto& [name, value] : instr.raw_attributes) {
    if (name != "backend_config") continue;
    size_t pos = 0;
    while (pos < value.size()) {
      const size_t eq = value.find('=', pos);
      if (eq == std::string::npos) break;
      size_t key_end = eq;
      while (key_end > pos && value[key_end - 1] == ' ') --key_end;
      size_t key_start =
          key_end == 0 ? std::string::npos : value.find_last_of("{, ", key_end - 1);
      key_start = key_start == std::string::npos ? 0 : key_start + 1;
      const std::string key = value.substr(key_start, key_end - key_start);
      size_t digits = eq + 1;
      while (digits < value.size() && value[digits] == ' ') ++digits;
      int code = 0;
      while (digits < value.size() && value[digits] >= '0' &&
             value[digits] <= '9') {
        code = code * 10 + (value[digits] - '0');
        if (code > 255) break;
        ++digits;
      }
      if (code > 0 && code < 128) options[key] = static_cast<char>(code);
      pos = digits + 1;
    }
  }
  return options;
}

// A batch of matrices: the leading dims of a literal, then rows x cols.
struct Batch {
  int64_t count = 1;
  int64_t rows = 0;
  int64_t cols = 0;
};

absl::StatusOr<Batch> MatrixBatch(const Instruction& instr, const Shape& shape,
                                  const char* what) {
  if (!shape.IsArray() || shape.rank() < 2) {
    return Invalid(instr, absl::StrCat(what, " must be a batch of matrices, not ",
                                       shape.ToString(false)));
  }
  Batch batch;
  for (int64_t d = 0; d + 2 < shape.rank(); ++d) batch.count *= shape.dim(d);
  batch.rows = shape.dim(shape.rank() - 2);
  batch.cols = shape.dim(shape.rank() - 1);
  if (batch.rows > INT32_MAX / 2 || batch.cols > INT32_MAX / 2) {
    return Invalid(instr, absl::StrCat(what, " is too large for LAPACK"));
  }
  return batch;
}

// Matrix b of a row-major batch, to and from a column-major buffer.
template <typename T>
void ToColumnMajor(const T* batch, const Batch& shape, int64_t b, T* out) {
  const T* m = batch + b * shape.rows * shape.cols;
  for (int64_t i = 0; i < shape.rows; ++i) {
    for (int64_t j = 0; j < shape.cols; ++j) out[j * shape.rows + i] = m[i * shape.cols + j];
  }
}
template <typename T>
void FromColumnMajor(const T* in, const Batch& shape, int64_t b, T* batch) {
  T* m = batch + b * shape.rows * shape.cols;
  for (int64_t i = 0; i < shape.rows; ++i) {
    for (int64_t j = 0; j < shape.cols; ++j) m[i * shape.cols + j] = in[j * shape.rows + i];
  }
}

int Int(int64_t v) { return static_cast<int>(v); }

template <typename T>
absl::StatusOr<Literal> Potrf(const Instruction& instr, const Literal& a,
                              char uplo) {
  CW_ASSIGN_OR_RETURN(Batch batch, MatrixBatch(instr, a.shape(), "the operand"));
  if (batch.rows != batch.cols) return Invalid(instr, "potrf needs square matrices");
  Literal factor = a;
  Literal info(instr.shape.tuple_shape(1));
  T* data = factor.mutable_data<T>().data();
  int32_t* infos = info.mutable_data<int32_t>().data();
  std::vector<T> work(static_cast<size_t>(batch.rows * batch.cols));
  const int n = Int(batch.rows), lda = std::max(1, n);
  for (int64_t b = 0; b < batch.count; ++b) {
    ToColumnMajor(data, batch, b, work.data());
    int result = 0;
    Lapack<T>::potrf(&uplo, &n, work.data(), &lda, &result, 1);
    infos[b] = result;
    FromColumnMajor(work.data(), batch, b, data);
  }
  return Literal::MakeTuple({std::move(factor), std::move(info)});
}

template <typename T>
absl::StatusOr<Literal> Trsm(const Instruction& instr, const Literal& a,
                             const Literal& rhs, char side, char uplo,
                             char trans, char diag) {
  CW_ASSIGN_OR_RETURN(Batch ab, MatrixBatch(instr, a.shape(), "the matrix"));
  CW_ASSIGN_OR_RETURN(Batch bb, MatrixBatch(instr, rhs.shape(), "the right-hand side"));
  const int64_t k = side == 'L' ? bb.rows : bb.cols;
  if (ab.rows != ab.cols || ab.rows != k || ab.count != bb.count) {
    return Invalid(instr, absl::StrCat("trsm of ", a.shape().ToString(false),
                                       " and ", rhs.shape().ToString(false)));
  }
  Literal x = rhs;
  const T* matrices = a.data<T>().data();
  T* data = x.mutable_data<T>().data();
  std::vector<T> am(static_cast<size_t>(ab.rows * ab.cols));
  std::vector<T> bm(static_cast<size_t>(bb.rows * bb.cols));
  const int m = Int(bb.rows), n = Int(bb.cols);
  const int lda = std::max(1, Int(ab.rows)), ldb = std::max(1, m);
  const T one = 1;
  for (int64_t b = 0; b < bb.count; ++b) {
    ToColumnMajor(matrices, ab, b, am.data());
    ToColumnMajor(data, bb, b, bm.data());
    if (m > 0 && n > 0) {
      Lapack<T>::trsm(&side, &uplo, &trans, &diag, &m, &n, &one, am.data(),
                      &lda, bm.data(), &ldb, 1, 1, 1, 1);
    }
    FromColumnMajor(bm.data(), bb, b, data);
  }
  return x;
}

template <typename T>
absl::StatusOr<Literal> Getrf(const Instruction& instr, const Literal& a) {
  CW_ASSIGN_OR_RETURN(Batch batch, MatrixBatch(instr, a.shape(), "the operand"));
  Literal lu = a;
  Literal pivots(instr.shape.tuple_shape(1));
  Literal info(instr.shape.tuple_shape(2));
  T* data = lu.mutable_data<T>().data();
  int32_t* ipiv = pivots.mutable_data<int32_t>().data();
  int32_t* infos = info.mutable_data<int32_t>().data();
  const int64_t k = std::min(batch.rows, batch.cols);
  std::vector<T> work(static_cast<size_t>(batch.rows * batch.cols));
  std::vector<int> piv(static_cast<size_t>(std::max<int64_t>(k, 1)));
  const int m = Int(batch.rows), n = Int(batch.cols), lda = std::max(1, m);
  for (int64_t b = 0; b < batch.count; ++b) {
    ToColumnMajor(data, batch, b, work.data());
    int result = 0;
    Lapack<T>::getrf(&m, &n, work.data(), &lda, piv.data(), &result);
    infos[b] = result;
    for (int64_t i = 0; i < k; ++i) ipiv[b * k + i] = piv[i];
    FromColumnMajor(work.data(), batch, b, data);
  }
  return Literal::MakeTuple({std::move(lu), std::move(pivots), std::move(info)});
}

template <typename T>
absl::StatusOr<Literal> Geqrf(const Instruction& instr, const Literal& a) {
  CW_ASSIGN_OR_RETURN(Batch batch, MatrixBatch(instr, a.shape(), "the operand"));
  Literal qr = a;
  Literal taus(instr.shape.tuple_shape(1));
  T* data = qr.mutable_data<T>().data();
  T* tau = taus.mutable_data<T>().data();
  const int64_t k = std::min(batch.rows, batch.cols);
  std::vector<T> matrix(static_cast<size_t>(batch.rows * batch.cols));
  std::vector<T> t(static_cast<size_t>(std::max<int64_t>(k, 1)));
  const int m = Int(batch.rows), n = Int(batch.cols), lda = std::max(1, m);
  for (int64_t b = 0; b < batch.count; ++b) {
    ToColumnMajor(data, batch, b, matrix.data());
    int info = 0, query = -1;
    T size = 0;
    Lapack<T>::geqrf(&m, &n, matrix.data(), &lda, t.data(), &size, &query, &info);
    int lwork = std::max(1, static_cast<int>(size));
    std::vector<T> work(static_cast<size_t>(lwork));
    Lapack<T>::geqrf(&m, &n, matrix.data(), &lda, t.data(), work.data(), &lwork, &info);
    for (int64_t i = 0; i < k; ++i) tau[b * k + i] = t[i];
    FromColumnMajor(matrix.data(), batch, b, data);
  }
  return Literal::MakeTuple({std::move(qr), std::move(taus)});
}

template <typename T>
absl::StatusOr<Literal> Orgqr(const Instruction& instr, const Literal& a,
                              const Literal& taus) {
  CW_ASSIGN_OR_RETURN(Batch batch, MatrixBatch(instr, a.shape(), "the reflectors"));
  const int64_t k = taus.shape().rank() >= 1 ? taus.shape().dims().back() : 0;
  if (k > batch.cols || batch.cols > batch.rows ||
      taus.shape().ElementCount() != batch.count * k) {
    return Invalid(instr, absl::StrCat("orgqr of ", a.shape().ToString(false),
                                       " and ", taus.shape().ToString(false)));
  }
  Literal q = a;
  T* data = q.mutable_data<T>().data();
  const T* tau = taus.data<T>().data();
  std::vector<T> matrix(static_cast<size_t>(batch.rows * batch.cols));
  const int m = Int(batch.rows), n = Int(batch.cols), kk = Int(k);
  const int lda = std::max(1, m);
  for (int64_t b = 0; b < batch.count; ++b) {
    ToColumnMajor(data, batch, b, matrix.data());
    if (m > 0 && n > 0) {
      int info = 0, query = -1;
      T size = 0;
      Lapack<T>::orgqr(&m, &n, &kk, matrix.data(), &lda, tau + b * k, &size,
                       &query, &info);
      int lwork = std::max(1, static_cast<int>(size));
      std::vector<T> work(static_cast<size_t>(lwork));
      Lapack<T>::orgqr(&m, &n, &kk, matrix.data(), &lda, tau + b * k,
                       work.data(), &lwork, &info);
    }
    FromColumnMajor(matrix.data(), batch, b, data);
  }
  return q;
}

template <typename T>
absl::StatusOr<Literal> Syevd(const Instruction& instr, const Literal& a,
                              char jobz, char uplo) {
  CW_ASSIGN_OR_RETURN(Batch batch, MatrixBatch(instr, a.shape(), "the operand"));
  if (batch.rows != batch.cols) return Invalid(instr, "syevd needs square matrices");
  Literal vectors = a;
  Literal values(instr.shape.tuple_shape(1));
  Literal info(instr.shape.tuple_shape(2));
  T* data = vectors.mutable_data<T>().data();
  T* w = values.mutable_data<T>().data();
  int32_t* infos = info.mutable_data<int32_t>().data();
  std::vector<T> matrix(static_cast<size_t>(batch.rows * batch.cols));
  const int n = Int(batch.rows), lda = std::max(1, n);
  for (int64_t b = 0; b < batch.count; ++b) {
    ToColumnMajor(data, batch, b, matrix.data());
    int result = 0;
    if (n > 0) {
      int query = -1, iwork_size = 0;
      T size = 0;
      Lapack<T>::syevd(&jobz, &uplo, &n, matrix.data(), &lda, w + b * n, &size,
                       &query, &iwork_size, &query, &result, 1, 1);
      int lwork = std::max(1, static_cast<int>(size));
      int liwork = std::max(1, iwork_size);
      std::vector<T> work(static_cast<size_t>(lwork));
      std::vector<int> iwork(static_cast<size_t>(liwork));
      Lapack<T>::syevd(&jobz, &uplo, &n, matrix.data(), &lda, w + b * n,
                       work.data(), &lwork, iwork.data(), &liwork, &result, 1,
                       1);
    }
    infos[b] = result;
    FromColumnMajor(matrix.data(), batch, b, data);
  }
  return Literal::MakeTuple({std::move(vectors), std::move(values), std::move(info)});
}

template <typename T>
absl::StatusOr<Literal> Gesdd(const Instruction& instr, const Literal& a,
                              char jobz) {
  CW_ASSIGN_OR_RETURN(Batch batch, MatrixBatch(instr, a.shape(), "the operand"));
  const Shape& u_shape = instr.shape.tuple_shape(2);
  const Shape& vt_shape = instr.shape.tuple_shape(3);
  CW_ASSIGN_OR_RETURN(Batch ub, MatrixBatch(instr, u_shape, "u"));
  CW_ASSIGN_OR_RETURN(Batch vb, MatrixBatch(instr, vt_shape, "vt"));
  // LAPACK writes u as m x m ('A') or m x min(m, n) ('S'), vt as n x n or
  // min(m, n) x n, whatever buffers it is given.
  const int64_t k_min = std::min(batch.rows, batch.cols);
  const bool full = jobz == 'A';
  if (jobz != 'N' &&
      (ub.cols != (full ? batch.rows : k_min) ||
       vb.rows != (full ? batch.cols : k_min))) {
    return Invalid(instr, absl::StrCat("gesdd with mode '", std::string(1, jobz),
                                       "' of ", a.shape().ToString(false),
                                       " cannot give u ", u_shape.ToString(false),
                                       " and vt ", vt_shape.ToString(false)));
  }
  Literal destroyed = a;
  Literal s(instr.shape.tuple_shape(1));
  Literal u(u_shape), vt(vt_shape);
  Literal info(instr.shape.tuple_shape(4));
  const int64_t k = std::min(batch.rows, batch.cols);
  T* data = destroyed.mutable_data<T>().data();
  T* sv = s.mutable_data<T>().data();
  T* ud = u.mutable_data<T>().data();
  T* vd = vt.mutable_data<T>().data();
  int32_t* infos = info.mutable_data<int32_t>().data();
  std::vector<T> matrix(static_cast<size_t>(batch.rows * batch.cols));
  std::vector<T> um(static_cast<size_t>(std::max<int64_t>(ub.rows * ub.cols, 1)));
  std::vector<T> vm(static_cast<size_t>(std::max<int64_t>(vb.rows * vb.cols, 1)));
  std::vector<int> iwork(static_cast<size_t>(std::max<int64_t>(8 * k, 1)));
  const int m = Int(batch.rows), n = Int(batch.cols), lda = std::max(1, m);
  const int ldu = std::max(1, Int(ub.rows)), ldvt = std::max(1, Int(vb.rows));
  for (int64_t b = 0; b < batch.count; ++b) {
    ToColumnMajor(data, batch, b, matrix.data());
    int result = 0;
    if (m > 0 && n > 0) {
      int query = -1;
      T size = 0;
      Lapack<T>::gesdd(&jobz, &m, &n, matrix.data(), &lda, sv + b * k,
                       um.data(), &ldu, vm.data(), &ldvt, &size, &query,
                       iwork.data(), &result, 1);
      int lwork = std::max(1, static_cast<int>(size));
      std::vector<T> work(static_cast<size_t>(lwork));
      Lapack<T>::gesdd(&jobz, &m, &n, matrix.data(), &lda, sv + b * k,
                       um.data(), &ldu, vm.data(), &ldvt, work.data(), &lwork,
                       iwork.data(), &result, 1);
    }
    infos[b] = result;
    FromColumnMajor(matrix.data(), batch, b, data);
    if (jobz != 'N') {
      FromColumnMajor(um.data(), ub, b, ud);
      FromColumnMajor(vm.data(), vb, b, vd);
    }
  }
  return Literal::MakeTuple({std::move(destroyed), std::move(s), std::move(u),
                             std::move(vt), std::move(info)});
}

}  // namespace

absl::StatusOr<Literal> EvalLapack(const Instruction& instr,
                                   std::span<const Literal* const> operands) {
  const std::optional<hlo::LapackCall> call =
      hlo::ParseLapackTarget(instr.custom_call_target);
  if (!call.has_value() || operands.empty()) {
    return hlo::UnsupportedCustomCall(instr);
  }
  const PrimitiveType type = operands[0]->shape().type();
  if (type != call->type) {
    return Invalid(instr, absl::StrCat(instr.custom_call_target, " takes ",
                                       std::string(hlo::PrimitiveTypeName(call->type)),
                                       ", not ", operands[0]->shape().ToString(false)));
  }
  const std::map<std::string, char> options = BackendOptions(instr);
  // The option's letter (upper case), which must be one of `allowed`.
  auto option = [&](const char* name, char fallback,
                    std::string_view allowed) -> absl::StatusOr<char> {
    auto it = options.find(name);
    const char raw = it == options.end() ? fallback : it->second;
    const char value =
        static_cast<char>(std::toupper(static_cast<unsigned char>(raw)));
    if (allowed.find(value) == std::string_view::npos) {
      return Invalid(instr, absl::StrCat("backend_config ", name, " = ",
                                         static_cast<int>(raw),
                                         " is not one of the letters '",
                                         std::string(allowed), "'"));
    }
    return value;
  };
  auto run = [&](auto tag) -> absl::StatusOr<Literal> {
    using T = decltype(tag);
    switch (call->routine) {
      case hlo::LapackRoutine::kPotrf: {
        CW_ASSIGN_OR_RETURN(const char uplo, option("uplo", 'L', "UL"));
        return Potrf<T>(instr, *operands[0], uplo);
      }
      case hlo::LapackRoutine::kTrsm: {
        if (operands.size() != 2) return Invalid(instr, "trsm takes two operands");
        CW_ASSIGN_OR_RETURN(const char side, option("side", 'L', "LR"));
        CW_ASSIGN_OR_RETURN(const char uplo, option("uplo", 'L', "UL"));
        CW_ASSIGN_OR_RETURN(const char trans, option("trans_x", 'N', "NTC"));
        CW_ASSIGN_OR_RETURN(const char diag, option("diag", 'N', "NU"));
        return Trsm<T>(instr, *operands[0], *operands[1], side, uplo, trans,
                       diag);
      }
      case hlo::LapackRoutine::kGetrf:
        return Getrf<T>(instr, *operands[0]);
      case hlo::LapackRoutine::kGeqrf:
        return Geqrf<T>(instr, *operands[0]);
      case hlo::LapackRoutine::kOrgqr:
        if (operands.size() != 2) return Invalid(instr, "orgqr takes two operands");
        return Orgqr<T>(instr, *operands[0], *operands[1]);
      case hlo::LapackRoutine::kSyevd: {
        CW_ASSIGN_OR_RETURN(const char jobz, option("mode", 'V', "NV"));
        CW_ASSIGN_OR_RETURN(const char uplo, option("uplo", 'L', "UL"));
        return Syevd<T>(instr, *operands[0], jobz, uplo);
      }
      case hlo::LapackRoutine::kGesdd: {
        // 'O' (u or vt overwrites a) is not something JAX asks for.
        CW_ASSIGN_OR_RETURN(const char jobz, option("mode", 'A', "ASN"));
        return Gesdd<T>(instr, *operands[0], jobz);
      }
    }
    return hlo::UnsupportedCustomCall(instr);
  };
  if (type == PrimitiveType::kF32) return run(float{});
  return run(double{});
}

}  // namespace causeway::exec
