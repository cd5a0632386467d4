// The matrix products of exec/gemm.h, shape by shape: our register-tiled
// float kernel against Eigen's blocked GEMM, per instruction set, on one
// thread. What the kSmallGemm* bounds of gemm.h were chosen from.
//
//   gemm_bench [google-benchmark flags]   (pin it: taskset -c 1)
//
// Names: Gemm (the public call, on this process's instruction set) or
// <kernel>_<isa>, then /m/n/k/layout: layout 0 = A and B row-major, 1 = A
// stored transposed, 2 = B stored transposed. Counters: GFLOP/s.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "causeway/exec/cpu_isa.h"
#include "causeway/exec/gemm.h"
#include "causeway/exec/gemm_isa.h"

namespace causeway::exec {
namespace {

struct Operands {
  std::vector<float> a, b, bt, c;
};

Operands MakeOperands(int64_t m, int64_t n, int64_t k) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  Operands o;
  o.a.resize(m * k);
  o.b.resize(k * n);
  o.bt.resize(k * n);
  o.c.resize(m * n);
  for (float& x : o.a) x = normal(rng);
  for (float& x : o.b) x = normal(rng);
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) o.bt[j * k + p] = o.b[p * n + j];
  }
  return o;
}

GemmCall<float> CallOf(Operands& o, int64_t m, int64_t n, int64_t k,
                       int64_t layout) {
  GemmCall<float> call;
  call.m = m;
  call.n = n;
  call.k = k;
  // Layout 1 reads the row-major A buffer as a stored k x m transpose: the
  // values differ, the work does not.
  call.a = {o.a.data(), layout == 1 ? m : k, layout == 1};
  call.b = layout == 2 ? MatrixOperand<float>{o.bt.data(), k, true}
                       : MatrixOperand<float>{o.b.data(), n, false};
  call.c = o.c.data();
  call.ldc = n;
  return call;
}

template <void (*kEigen)(const GemmCall<float>&)>
void BM_Eigen(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Operands o = MakeOperands(m, n, k);
  const GemmCall<float> call = CallOf(o, m, n, k, state.range(3));
  for (auto _ : state) {
    kEigen(call);
    benchmark::DoNotOptimize(o.c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

// The full call (dispatch, transposing a stored-transposed B) on one ISA:
// the kernel of gemm.cc's choice is what runs.
void BM_Gemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Operands o = MakeOperands(m, n, k);
  const GemmCall<float> call = CallOf(o, m, n, k, state.range(3));
  for (auto _ : state) {
    Gemm(call);
    benchmark::DoNotOptimize(o.c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

template <void (*kSmall)(int64_t, int64_t, int64_t, const float*, int64_t,
                         int64_t, const float*, int64_t, float*, int64_t, bool)>
void BM_Small(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int64_t layout = state.range(3);
  Operands o = MakeOperands(m, n, k);
  for (auto _ : state) {
    if (layout == 1) {
      kSmall(m, n, k, o.a.data(), 1, m, o.b.data(), n, o.c.data(), n, false);
    } else {
      kSmall(m, n, k, o.a.data(), k, 1, o.b.data(), n, o.c.data(), n, false);
    }
    benchmark::DoNotOptimize(o.c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  // The scan step of bench's rnn (batch 16, hidden 128), the MLP's layers
  // (batch 64), square products around the bounds, the 1024^3 matmul.
  b->Args({16, 128, 128, 0})->Args({16, 128, 128, 2})->Args({128, 128, 16, 1});
  b->Args({64, 128, 64, 0})->Args({64, 128, 128, 0})->Args({128, 128, 64, 1});
  b->Args({64, 10, 128, 0})->Args({128, 128, 128, 0})->Args({256, 256, 64, 0});
  b->Args({256, 256, 256, 0})->Args({128, 512, 512, 0});
  b->Args({512, 512, 512, 0})->Args({1024, 1024, 1024, 0});
}

}  // namespace
}  // namespace causeway::exec

int main(int argc, char** argv) {
  using namespace causeway::exec;  // NOLINT
  auto shaped = [](const char* name, auto fn) {
    Shapes(benchmark::RegisterBenchmark(name, fn));
  };
  shaped("Gemm", BM_Gemm);
  shaped("Small_avx2", BM_Small<gemm_avx2::SmallGemm>);
  shaped("Eigen_avx2", BM_Eigen<gemm_avx2::EigenGemm>);
  if (CpuSupportsAvx512()) {
    shaped("Small_avx512", BM_Small<gemm_avx512::SmallGemm>);
    shaped("Eigen_avx512", BM_Eigen<gemm_avx512::EigenGemm>);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("cpu_isa",
                              std::string(CpuIsaName(ActiveCpuIsa())));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
