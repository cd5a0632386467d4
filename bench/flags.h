// The cluster benchmarks' integer flags (figure7_bench.cc,
// scale_failure_bench.cc, scale_tenancy_bench.cc): `--NAME=N`.
#ifndef CAUSEWAY_BENCH_FLAGS_H_
#define CAUSEWAY_BENCH_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace causeway::bench {

// Whether `arg` is `--NAME=N` with N an integer of at least `least`; if it
// is, N is in *value.
inline bool IntFlag(const std::string& arg, const char* name, int64_t* value,
                    int64_t least) {
  const std::string prefix = absl::StrCat("--", name, "=");
  return arg.rfind(prefix, 0) == 0 &&
         absl::SimpleAtoi(arg.substr(prefix.size()), value) && *value >= least;
}

}  // namespace causeway::bench

#endif  // CAUSEWAY_BENCH_FLAGS_H_
