// What the transfer benchmarks (transfer_bench.cc, cluster_transfer_bench.cc)
// share: their common flags, random payloads, and the timing loop that
// samples a transfer against raw TCP in alternation, so that a noisy
// neighbour on the shared machine hurts both alike (BENCHMARKS.md).
#ifndef CAUSEWAY_BENCH_TRANSFER_SAMPLES_H_
#define CAUSEWAY_BENCH_TRANSFER_SAMPLES_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "causeway/base/logging.h"
#include "causeway/hlo/literal.h"
#include "raw_tcp.h"

namespace causeway::bench {

// An array of `shape` (4-byte elements) filled with random words from
// `seed`.
inline hlo::Literal RandomLiteral(const hlo::Shape& shape, uint32_t seed) {
  hlo::Literal value = hlo::Literal::Uninitialized(shape);
  auto* words = static_cast<uint32_t*>(value.mutable_untyped_data());
  std::mt19937 random(seed);
  const int64_t count = value.size_bytes() / 4;
  for (int64_t i = 0; i < count; ++i) words[i] = random();
  return value;
}

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// --mib=N (the bytes of one transfer), --iterations=N (transfers per
// sample), --repeats=N (samples).
struct TransferFlags {
  int64_t mib = 64;
  int iterations = 8;
  int repeats = 5;
};

// Parses `--NAME=VALUE` flags into `flags` (whose values are the
// defaults); `other(name, value)` takes a benchmark's own flags and says
// whether it knew the name. Exits with status 2 on an unknown flag or a
// bad number.
inline void ParseTransferFlags(
    int argc, char** argv, TransferFlags& flags,
    const std::function<bool(const std::string&, const std::string&)>& other =
        nullptr) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t equals = arg.find('=');
    bool known = arg.rfind("--", 0) == 0 && equals != std::string::npos;
    bool parsed = true;
    if (known) {
      const std::string name = arg.substr(2, equals - 2);
      const std::string value = arg.substr(equals + 1);
      if (name == "mib") {
        parsed = absl::SimpleAtoi(value, &flags.mib) && flags.mib > 0;
      } else if (name == "iterations") {
        parsed =
            absl::SimpleAtoi(value, &flags.iterations) && flags.iterations > 0;
      } else if (name == "repeats") {
        parsed = absl::SimpleAtoi(value, &flags.repeats) && flags.repeats > 0;
      } else {
        known = other != nullptr && other(name, value);
      }
    }
    if (!known || !parsed) {
      std::fprintf(stderr, "%s flag %s\n", known ? "bad" : "unknown", argv[i]);
      std::exit(2);
    }
  }
}

// GB/s per sample of a transfer and of raw TCP moving the same bytes, and
// their ratio per sample.
struct TransferRates {
  std::vector<double> causeway;
  std::vector<double> raw;
  std::vector<double> ratio;
};

// One sample: `iterations` raw TCP transfers of `bytes` right before
// `iterations` of `transfer` (which returns the seconds one took).
inline void SampleAgainstRaw(RawTcp& raw, int64_t bytes, int iterations,
                             const std::function<double()>& transfer,
                             TransferRates& rates) {
  const double gb = static_cast<double>(bytes) / 1e9;
  double raw_seconds = 0;
  for (int i = 0; i < iterations; ++i) raw_seconds += raw.Transfer();
  rates.raw.push_back(gb * iterations / raw_seconds);
  double seconds = 0;
  for (int i = 0; i < iterations; ++i) seconds += transfer();
  rates.causeway.push_back(gb * iterations / seconds);
  rates.ratio.push_back(rates.causeway.back() / rates.raw.back());
}

// `| label | Causeway GB/s | raw TCP GB/s | ratio |`: the medians.
inline void PrintRatesRow(const std::string& label,
                          const TransferRates& rates) {
  std::printf("| %s | %.2f | %.2f | %.2f |\n", label.c_str(),
              Median(rates.causeway), Median(rates.raw), Median(rates.ratio));
}

}  // namespace causeway::bench

#endif  // CAUSEWAY_BENCH_TRANSFER_SAMPLES_H_
