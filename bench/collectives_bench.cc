// The cross-process all-reduce against Gloo alone: a 64 MiB f32 sum over 2
// and 4 processes on loopback, measured two ways in the same run, rounds
// alternating so that a noisy neighbour hurts both alike:
//
//   causeway   GlooCollectives::AllReduce, as the evaluator calls it (the
//              operand moved in, reduced in place, returned as the result;
//              one launch per all-reduce on the cached context), over its
//              own pipelined ring;
//   gloo       a plain Gloo program: one context, gloo::allreduce (ring) in
//              place with gloo::sum<float>.
//
// Each process is a gloo_peer (built beside this binary) with one rank; the
// time of one all-reduce is the slowest rank's. Prints, per process count,
// the median over every timed all-reduce of every round, the algorithm
// bandwidth (bytes / time) and causeway's time over gloo's.
//
//   collectives_bench [--processes=2,4] [--mib=64] [--iterations=5]
//                     [--rounds=3] [--sealed=1]
//
// --sealed=1 measures encryption instead: causeway without a token against
// causeway with one (every Gloo pair sealed, gloo_mesh.h), rounds
// alternating; prints both and sealed / clear time.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"
#include "causeway/transport/testing/stream_key_value_store.h"

namespace causeway {
namespace {

using transport::testing::StoreServer;

std::string PeerBinary() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CW_CHECK(n > 0);
  self[n] = '\0';
  return (std::filesystem::path(self).parent_path() / "gloo_peer").string();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

// One round: `processes` peers in `mode`; per all-reduce, the slowest
// rank's seconds.
std::vector<double> Round(const std::string& mode, int processes,
                          int64_t elements, int iterations) {
  StoreServer server;
  std::vector<std::string> devices;
  for (int p = 0; p < processes; ++p) devices.push_back(absl::StrCat(p));
  for (int p = 0; p < processes; ++p) {
    auto child = server.Start(
        {PeerBinary(), absl::StrCat("--mode=bench-", mode),
         absl::StrCat("--devices=", absl::StrJoin(devices, ",")),
         absl::StrCat("--local=", p), absl::StrCat("--elements=", elements),
         absl::StrCat("--iterations=", iterations), "--warmup=2"});
    CW_CHECK(child.ok()) << child.status();
  }
  std::vector<double> slowest(iterations, 0.0);
  for (int p = 0; p < processes; ++p) {
    auto report = server.NextReport(p, absl::Now() + absl::Minutes(10));
    CW_CHECK(report.ok()) << mode << " rank " << p << ": " << report.status();
    std::vector<std::string> fields = absl::StrSplit(*report, ' ');
    CW_CHECK(fields.size() == static_cast<size_t>(iterations) + 1 &&
             fields[0] == "times")
        << *report;
    for (int i = 0; i < iterations; ++i) {
      double seconds = 0;
      CW_CHECK(absl::SimpleAtod(fields[i + 1], &seconds));
      slowest[i] = std::max(slowest[i], seconds);
    }
  }
  for (int p = 0; p < processes; ++p) {
    CW_CHECK(server.Reap(p, absl::Now() + absl::Seconds(60)).ok());
  }
  return slowest;
}

int Main(int argc, char** argv) {
  std::vector<int> process_counts = {2, 4};
  int64_t mib = 64;
  int iterations = 5;
  int rounds = 3;
  bool sealed = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    bool ok = false;
    if (absl::StartsWith(arg, "--processes=")) {
      process_counts.clear();
      ok = true;
      for (absl::string_view part : absl::StrSplit(arg.substr(12), ',')) {
        int n = 0;
        ok = ok && absl::SimpleAtoi(part, &n) && n >= 2;
        process_counts.push_back(n);
      }
    } else if (absl::StartsWith(arg, "--mib=")) {
      ok = absl::SimpleAtoi(arg.substr(6), &mib) && mib > 0;
    } else if (absl::StartsWith(arg, "--iterations=")) {
      ok = absl::SimpleAtoi(arg.substr(13), &iterations) && iterations > 0;
    } else if (absl::StartsWith(arg, "--rounds=")) {
      ok = absl::SimpleAtoi(arg.substr(9), &rounds) && rounds > 0;
    } else if (arg == "--sealed=1") {
      ok = sealed = true;
    }
    if (!ok) {
      std::fprintf(stderr, "collectives_bench: bad flag '%s'\n", arg.c_str());
      return 2;
    }
  }
  const int64_t elements = mib * (1 << 20) / 4;
  const double bytes = static_cast<double>(elements) * 4;
  if (sealed) {
    std::printf("| processes | clear (ms) | sealed (ms) | clear GB/s | "
                "sealed GB/s | sealed / clear time |\n|---|---|---|---|---|---|\n");
    for (int processes : process_counts) {
      std::vector<double> clear, secret;
      for (int round = 0; round < rounds; ++round) {
        for (double s : Round("causeway", processes, elements, iterations)) {
          clear.push_back(s);
        }
        for (double s : Round("sealed", processes, elements, iterations)) {
          secret.push_back(s);
        }
      }
      const double a = Median(clear);
      const double b = Median(secret);
      std::printf("| %d | %.1f | %.1f | %.2f | %.2f | %.2f |\n", processes,
                  a * 1e3, b * 1e3, bytes / a / 1e9, bytes / b / 1e9, b / a);
      std::fflush(stdout);
    }
    return 0;
  }
  std::printf("| processes | causeway (ms) | gloo alone (ms) | causeway GB/s | "
              "gloo GB/s | causeway / gloo time |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (int processes : process_counts) {
    std::vector<double> causeway, gloo;
    for (int round = 0; round < rounds; ++round) {
      for (double s : Round("causeway", processes, elements, iterations)) {
        causeway.push_back(s);
      }
      for (double s : Round("gloo", processes, elements, iterations)) {
        gloo.push_back(s);
      }
    }
    const double ours = Median(causeway);
    const double theirs = Median(gloo);
    std::printf("| %d | %.1f | %.1f | %.2f | %.2f | %.2f |\n", processes,
                ours * 1e3, theirs * 1e3, bytes / ours / 1e9,
                bytes / theirs / 1e9, ours / theirs);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) { return causeway::Main(argc, argv); }
