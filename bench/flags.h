// The cluster benchmarks' flags (figure5_bench.cc, figure7_bench.cc,
// scale_failure_bench.cc, scale_tenancy_bench.cc): `--NAME=N`.
#ifndef CAUSEWAY_BENCH_FLAGS_H_
#define CAUSEWAY_BENCH_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace causeway::bench {

// Whether `arg` is `--NAME=N` with N an integer of at least `least`; if it
// is, N is in *value.
inline bool IntFlag(const std::string& arg, const char* name, int64_t* value,
                    int64_t least) {
  const std::string prefix = absl::StrCat("--", name, "=");
  return arg.rfind(prefix, 0) == 0 &&
         absl::SimpleAtoi(arg.substr(prefix.size()), value) && *value >= least;
}

// Whether `arg` is `--NAME=S` with S a positive number of seconds; if it
// is, S is in *value.
inline bool SecondsFlag(const std::string& arg, const char* name,
                        absl::Duration* value) {
  const std::string prefix = absl::StrCat("--", name, "=");
  double seconds = 0;
  if (arg.rfind(prefix, 0) != 0 ||
      !absl::SimpleAtod(arg.substr(prefix.size()), &seconds) || seconds <= 0) {
    return false;
  }
  *value = absl::Seconds(seconds);
  return true;
}

}  // namespace causeway::bench

#endif  // CAUSEWAY_BENCH_FLAGS_H_
