// libFuzzer target for multi-partition programs: a module compiled for
// 2 to 8 devices (num_partitions × replica_count) runs on that many threads,
// one Evaluator run per device, meeting in InProcessCollectives, on
// arguments filled from the input's bytes. Every device must end with a
// value of the root's shape or a clean error; an Internal error, a crash, a
// sanitizer report or a hang is a bug.
//
// A hang is a finding, not a stuck fuzzer: collectives give up after
// kCollectiveTimeout, the run is cancelled (the evaluator's `cancelled` flag
// and InProcessCollectives::Cancel) at kRunDeadline, and a device that has
// not returned kHangGrace after that aborts the process, naming the devices
// still running. While loops run (a loop that never ends is cancelled at the
// deadline, a clean error); values are bounded as in evaluator_fuzzer.cc
// (under 16 KiB, or past each device's 1 MiB memory limit, which the run
// must refuse).
//
// The custom mutator rewrites the attributes that decide who talks to whom
// (replica_groups, source_target_pairs, num_partitions, channel_id,
// use_global_device_ids) half of the time and leaves the rest to libFuzzer's
// byte mutations. Input: the module text, then optionally "\n#ARGS\n" and
// the bytes that fill the arguments; device d reads them from offset 7·d, so
// devices get different values.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/exec/evaluator.h"
#include "causeway/exec/fuzz_inputs.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/verifier.h"

namespace {

using causeway::exec::Evaluator;
using causeway::exec::InProcessCollectives;
using causeway::exec::RunContext;
using causeway::hlo::Literal;
using causeway::hlo::Module;

constexpr int64_t kMaxDevices = 8;
const absl::Duration kCollectiveTimeout = absl::Milliseconds(500);
const absl::Duration kRunDeadline = absl::Seconds(2);
const absl::Duration kHangGrace = absl::Seconds(20);

bool Runnable(const Module& module) {
  const int64_t devices = module.num_partitions() * module.replica_count();
  return module.num_partitions() >= 1 && module.replica_count() >= 1 &&
         devices >= 2 && devices <= kMaxDevices &&
         causeway::exec::fuzz::QuickModule(module, /*allow_while=*/true);
}

// What one device's thread reports.
struct DeviceRuns {
  absl::Mutex mu;
  int64_t finished ABSL_GUARDED_BY(mu) = 0;
  std::vector<bool> done ABSL_GUARDED_BY(mu);
  std::vector<absl::StatusOr<Literal>> results ABSL_GUARDED_BY(mu);
};

[[noreturn]] void Fail(const std::string& what, const Module& module) {
  std::fprintf(stderr, "spmd_fuzzer: %s (module '%s', %lld partitions x %lld "
               "replicas)\n", what.c_str(), module.name().c_str(),
               static_cast<long long>(module.num_partitions()),
               static_cast<long long>(module.replica_count()));
  std::abort();
}

void RunOnEveryDevice(const Module& module, const Evaluator& evaluator,
                      std::string_view pattern) {
  const int64_t partitions = module.num_partitions();
  const int64_t devices = partitions * module.replica_count();
  const causeway::hlo::Computation& entry = *module.entry();

  InProcessCollectives collectives(
      InProcessCollectives::Options{.timeout = kCollectiveTimeout});
  std::atomic<bool> cancelled{false};
  DeviceRuns runs;
  {
    absl::MutexLock lock(&runs.mu);
    runs.done.assign(devices, false);
    runs.results.resize(devices);
  }
  std::vector<std::thread> threads;
  for (int64_t d = 0; d < devices; ++d) {
    std::vector<Literal> arguments;
    for (int64_t i = 0; i < entry.parameter_count(); ++i) {
      arguments.emplace_back(entry.parameter(i)->shape);
      causeway::exec::fuzz::Fill(arguments.back(), pattern, 7 * d);
    }
    threads.emplace_back([&, d, arguments = std::move(arguments)] {
      RunContext context;
      context.partition_id = d % partitions;
      context.replica_id = d / partitions;
      context.run_id = 1;
      context.collectives = &collectives;
      context.cancelled = &cancelled;
      context.memory_limit_bytes = causeway::exec::fuzz::kMemoryLimitBytes;
      absl::StatusOr<Literal> result = evaluator.Run(arguments, context);
      // Peers waiting for this device in a collective give up now; they
      // fail with Aborted, so an Internal error is always a device's own.
      if (!result.ok()) {
        collectives.Cancel(absl::AbortedError(
            absl::StrCat("device ", d, " failed: ", result.status().message())));
      }
      absl::MutexLock lock(&runs.mu);
      runs.results[d] = std::move(result);
      runs.done[d] = true;
      ++runs.finished;
    });
  }

  auto all_finished = [&runs, devices]() {
    runs.mu.AssertReaderHeld();
    return runs.finished == devices;
  };
  bool finished;
  {
    absl::MutexLock lock(&runs.mu);
    finished = runs.mu.AwaitWithTimeout(absl::Condition(&all_finished),
                                        kRunDeadline);
  }
  if (!finished) {
    cancelled.store(true);
    collectives.Cancel(absl::DeadlineExceededError("the run's deadline passed"));
    absl::MutexLock lock(&runs.mu);
    if (!runs.mu.AwaitWithTimeout(absl::Condition(&all_finished),
                                  kHangGrace)) {
      std::vector<int64_t> running;
      for (int64_t d = 0; d < devices; ++d) {
        if (!runs.done[d]) running.push_back(d);
      }
      Fail(absl::StrCat("devices ", absl::StrJoin(running, ", "),
                        " still run ", absl::FormatDuration(kHangGrace),
                        " after the run was cancelled"),
           module);
    }
  }
  for (std::thread& thread : threads) thread.join();

  absl::MutexLock lock(&runs.mu);
  for (int64_t d = 0; d < devices; ++d) {
    const absl::StatusOr<Literal>& result = runs.results[d];
    if (result.ok() && !result->shape().Compatible(entry.root()->shape)) {
      Fail(absl::StrCat("device ", d, " returned ",
                        result->shape().ToString(false), ", root declares ",
                        entry.root()->shape.ToString(false)),
           module);
    }
    if (!result.ok() && result.status().code() == absl::StatusCode::kInternal) {
      Fail(absl::StrCat("device ", d, ": internal error: ",
                        result.status().ToString()),
           module);
    }
  }
}

// --- The mutator. ---

// The end of an attribute value starting at `begin`: the first ',', ')',
// ' ' or newline outside brackets, braces and parentheses.
size_t ValueEnd(const std::string& text, size_t begin) {
  int depth = 0;
  for (size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{' || c == '[' || c == '(') {
      ++depth;
    } else if (c == '}' || c == ']' || c == ')') {
      if (depth == 0) return i;
      --depth;
    } else if (depth == 0 && (c == ',' || c == ' ' || c == '\n')) {
      return i;
    }
  }
  return text.size();
}

// The device count the module's header declares (2 when it says nothing).
int64_t DeclaredDevices(const std::string& text) {
  int64_t devices = 1;
  for (const char* key : {"num_partitions=", "replica_count="}) {
    const size_t at = text.find(key);
    if (at != std::string::npos) {
      // Each factor clamped first: a mutated count near INT64_MAX must not
      // overflow the product.
      devices *= std::clamp<int64_t>(
          std::atoll(text.c_str() + at + std::strlen(key)), 1, kMaxDevices);
    }
  }
  return devices == 1 ? 2 : std::min<int64_t>(devices, kMaxDevices);
}

// Groups of the devices 0..n-1 in a random order; now and then a wrong
// one (an id out of range, a device twice, an empty group).
std::string RandomGroups(int64_t n, std::minstd_rand& rng) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int64_t> sizes;
  for (int64_t s = 1; s <= n; ++s) {
    if (n % s == 0) sizes.push_back(s);
  }
  const int64_t size = sizes[rng() % sizes.size()];
  if (rng() % 8 == 0) ids[rng() % n] = (rng() % 2) ? n : ids[0];
  if (rng() % 4 == 0) {
    // The iota form: [groups,size]<=[n], sometimes transposed.
    std::string iota = absl::StrCat("[", n / size, ",", size, "]<=[", n, "]");
    if (rng() % 2 == 0 && n % 2 == 0) {
      iota = absl::StrCat("[", n / size, ",", size, "]<=[2,", n / 2, "]T(1,0)");
    }
    return iota;
  }
  std::vector<std::string> groups;
  for (int64_t g = 0; g < n / size; ++g) {
    std::vector<int64_t> group(ids.begin() + g * size,
                               ids.begin() + (g + 1) * size);
    groups.push_back(absl::StrCat("{", absl::StrJoin(group, ","), "}"));
  }
  if (rng() % 16 == 0) groups.push_back("{}");
  return absl::StrCat("{", absl::StrJoin(groups, ","), "}");
}

std::string RandomPairs(int64_t n, std::minstd_rand& rng) {
  std::vector<std::string> pairs;
  const int64_t count = 1 + rng() % n;
  const int64_t shift = 1 + rng() % n;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t source = rng() % 4 == 0 ? rng() % (n + 1) : i;
    pairs.push_back(absl::StrCat("{", source, ",", (i + shift) % n, "}"));
  }
  return absl::StrCat("{", absl::StrJoin(pairs, ","), "}");
}

// Rewrites one occurrence of an attribute that decides who talks to whom.
// Returns false when the text has none.
bool MutateCollectiveAttribute(std::string& text, std::minstd_rand& rng) {
  static const char* const kKeys[] = {
      "replica_groups=", "source_target_pairs=", "num_partitions=",
      "channel_id=",     "use_global_device_ids=", "replica_count="};
  std::vector<std::pair<size_t, std::string_view>> sites;
  for (const char* key : kKeys) {
    for (size_t at = text.find(key); at != std::string::npos;
         at = text.find(key, at + 1)) {
      sites.emplace_back(at, key);
    }
  }
  if (sites.empty()) return false;
  const auto [at, key] = sites[rng() % sites.size()];
  const size_t value_begin = at + key.size();
  const size_t value_end = ValueEnd(text, value_begin);
  const int64_t n = DeclaredDevices(text);
  std::string value;
  if (key == "replica_groups=") {
    value = RandomGroups(n, rng);
  } else if (key == "source_target_pairs=") {
    value = RandomPairs(n, rng);
  } else if (key == "num_partitions=" || key == "replica_count=") {
    value = absl::StrCat(1 + rng() % kMaxDevices);
  } else if (key == "channel_id=") {
    // Without a channel id the groups name replicas, not partitions.
    size_t begin = at;
    if (begin >= 2 && text.compare(begin - 2, 2, ", ") == 0) begin -= 2;
    text.erase(begin, value_end - begin);
    return true;
  } else {
    value = text.compare(value_begin, 4, "true") == 0 ? "false" : "true";
  }
  text.replace(value_begin, value_end - value_begin, value);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const causeway::exec::fuzz::FuzzInput input =
      causeway::exec::fuzz::SplitInput(
          std::string_view(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<std::unique_ptr<Module>> module =
      causeway::exec::fuzz::RunnableModule(input.text, Runnable);
  if (!module.ok()) {
    // Kept out of the corpus (libFuzzer's -1); a seed the replay test
    // fails on (fuzz/replay_main.cc), which says why.
    causeway::exec::fuzz::ReplayNote(module.status());
    return -1;
  }
  absl::StatusOr<std::unique_ptr<Evaluator>> evaluator =
      Evaluator::Create(**module);
  if (!evaluator.ok()) return 0;
  RunOnEveryDevice(**module, **evaluator, input.pattern);
  return 0;
}

// libFuzzer's own mutator; absent (never called) in the replay binary.
extern "C" __attribute__((weak)) size_t LLVMFuzzerMutate(uint8_t* data,
                                                         size_t size,
                                                         size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size,
                                          size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  if (rng() % 2 == 0) {
    std::string text(reinterpret_cast<const char*>(data), size);
    if (MutateCollectiveAttribute(text, rng) && text.size() <= max_size) {
      std::memcpy(data, text.data(), text.size());
      return text.size();
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}
