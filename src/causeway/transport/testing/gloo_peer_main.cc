// gloo_peer: one process of a multi-process collectives test or benchmark
// (test support, not part of the runtime). Its parent (a StoreServer) starts
// it with the store on stdin/stdout; it reports on the same stream.
//
//   gloo_peer --mode=loop --devices=10,11,12 --local=0,1 [--elements=N]
//             [--iterations=K] [--timeout_ms=T]
//     Each local partition of a launch over `devices` (grid index = position)
//     runs f32 sum all-reduces through GlooCollectives, one launch (seq) per
//     iteration, all at epoch 0, and checks every result. Reports "ready"
//     once every local partition finished its first iteration, then, per
//     partition, "done P" after K iterations (K=0: until one fails) or
//     "failed P CODE MESSAGE" (MESSAGE hex) when one fails. The command
//     "abort MESSAGE" cancels every local partition's launch with DATA_LOSS
//     (what the head's notice that a peer died does to a worker).
//
//   gloo_peer --mode=bench-causeway|bench-sealed|bench-gloo --devices=...
//             --local=P --elements=N --iterations=K [--warmup=W]
//     Times K f32 sum all-reduces of N elements after W untimed ones:
//     through GlooCollectives (a Literal in, a Literal out, as the
//     evaluator calls it; bench-sealed: with a token, so every pair is
//     sealed, gloo_mesh.h), or with plain Gloo (one context, gloo::allreduce
//     in place with gloo::sum). Reports "times S1 S2 ..." (seconds).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"
#include "causeway/exec/collective_test_util.h"
#include "causeway/transport/gloo_collectives.h"
#include "causeway/transport/gloo_store.h"
#include "causeway/transport/testing/stream_key_value_store.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"

namespace causeway::transport::testing {
namespace {

using hlo::Literal;

struct Flags {
  std::string mode;
  std::vector<DeviceId> devices;
  std::vector<int64_t> local;
  int64_t elements = 1024;
  int64_t iterations = 0;
  int64_t warmup = 2;
  int64_t timeout_ms = 60000;
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) return false;
    const std::string name = arg.substr(2, eq - 2);
    const std::string value = arg.substr(eq + 1);
    bool ok = true;
    if (name == "mode") {
      flags->mode = value;
    } else if (name == "devices" || name == "local") {
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        int64_t n = 0;
        ok = ok && absl::SimpleAtoi(part, &n);
        if (name == "devices") {
          flags->devices.push_back(DeviceId(n));
        } else {
          flags->local.push_back(n);
        }
      }
    } else if (name == "elements") {
      ok = absl::SimpleAtoi(value, &flags->elements);
    } else if (name == "iterations") {
      ok = absl::SimpleAtoi(value, &flags->iterations);
    } else if (name == "warmup") {
      ok = absl::SimpleAtoi(value, &flags->warmup);
    } else if (name == "timeout_ms") {
      ok = absl::SimpleAtoi(value, &flags->timeout_ms);
    } else {
      ok = false;
    }
    if (!ok) return false;
  }
  return !flags->devices.empty() && !flags->local.empty();
}

// The participants running now, so that a command can cancel them.
class Running {
 public:
  void Set(int64_t partition, GlooCollectives* participant) {
    absl::MutexLock lock(&mu_);
    current_[partition] = participant;
  }
  void CancelAll(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    aborted_ = status;
    for (auto& [partition, participant] : current_) {
      if (participant != nullptr) participant->Cancel(status);
    }
  }
  absl::Status aborted() {
    absl::MutexLock lock(&mu_);
    return aborted_;
  }

 private:
  absl::Mutex mu_;
  std::map<int64_t, GlooCollectives*> current_;
  absl::Status aborted_;
};

int Loop(const Flags& flags) {
  Running running;
  StreamKeyValueStore store(0, 1, [&](const std::string& command) {
    if (command.rfind("abort ", 0) == 0) {
      absl::StatusOr<std::string> message = FromHex(command.substr(6));
      running.CancelAll(absl::DataLossError(message.ok() ? *message : "?"));
    }
  });
  auto communicators = GlooCommunicators::Create({.store = &store});
  if (!communicators.ok()) {
    store.Report(absl::StrCat("error ", ToHex(communicators.status().ToString())));
    return 1;
  }
  exec::testutil::CollectiveBuilder builder;
  hlo::Instruction* ar = builder.Collective(hlo::Opcode::kAllReduce);
  const int64_t n = static_cast<int64_t>(flags.devices.size());
  const float expected = float(n * (n + 1) / 2);
  absl::Mutex mu;
  int64_t warm = 0;
  std::vector<std::thread> threads;
  for (int64_t partition : flags.local) {
    threads.emplace_back([&, partition] {
      for (int64_t i = 0; flags.iterations == 0 || i < flags.iterations; ++i) {
        const uint64_t seq = static_cast<uint64_t>(i + 1);
        GlooCollectives participant(
            **communicators,
            GlooLaunch{.island = IslandId(0), .epoch = 0, .seq = seq,
                       .devices = flags.devices},
            partition,
            GlooCollectives::Options{
                .timeout = absl::Milliseconds(flags.timeout_ms)});
        running.Set(partition, &participant);
        if (absl::Status aborted = running.aborted(); !aborted.ok()) {
          participant.Cancel(aborted);
        }
        Literal value(hlo::Shape(hlo::PrimitiveType::kF32, {flags.elements}));
        for (float& x : value.mutable_data<float>()) x = float(partition + 1);
        absl::StatusOr<Literal> sum = participant.AllReduce(
            exec::testutil::OpFor(ar, partition, n, 1, 0, seq),
            {std::move(value)});
        running.Set(partition, nullptr);
        if (sum.ok() && sum->data<float>()[flags.elements - 1] != expected) {
          sum = absl::InternalError("wrong sum");
        }
        if (!sum.ok()) {
          store.Report(absl::StrCat("failed ", partition, " ",
                                    static_cast<int>(sum.status().code()), " ",
                                    ToHex(std::string(sum.status().message()))));
          return;
        }
        if (i == 0) {
          absl::MutexLock lock(&mu);
          if (++warm == static_cast<int64_t>(flags.local.size())) {
            store.Report("ready");
          }
        }
      }
      store.Report(absl::StrCat("done ", partition));
    });
  }
  for (auto& thread : threads) thread.join();
  return 0;
}

// Waits until each of the `n` partitions of the launch has said it finished
// its last all-reduce (`mine` says so for this process's), up to `timeout`.
// A process tears its contexts down when it ends, and a peer whose context
// is closed reads as broken to the others: an operation still running on
// the context then fails (GlooCommunicators' probe, for a dead peer), even
// if it needs nothing more from that peer. So no process ends while another
// may still be in its last all-reduce.
void AwaitEveryPartition(KeyValueStore& store,
                         const std::vector<int64_t>& mine, int64_t n,
                         absl::Duration timeout) {
  for (int64_t partition : mine) {
    const absl::Status said =
        store.Set(absl::StrCat("finished/", partition), "").AwaitFor(timeout);
    CW_CHECK(said.ok()) << said;
  }
  const absl::Time deadline = absl::Now() + timeout;
  for (int64_t partition = 0; partition < n; ++partition) {
    const absl::StatusOr<std::string> finished =
        store.Get(absl::StrCat("finished/", partition), deadline)
            .AwaitFor(timeout);
    CW_CHECK(finished.ok()) << "partition " << partition << ": "
                            << finished.status();
  }
}

std::string Times(const std::vector<double>& seconds) {
  return absl::StrCat("times ", absl::StrJoin(seconds, " "));
}

int BenchCauseway(const Flags& flags, StreamKeyValueStore& store,
                  bool sealed) {
  auto communicators = GlooCommunicators::Create(
      {.store = &store, .auth_token = sealed ? "bench token" : ""});
  CW_CHECK(communicators.ok()) << communicators.status();
  exec::testutil::CollectiveBuilder builder;
  hlo::Instruction* ar = builder.Collective(hlo::Opcode::kAllReduce);
  const int64_t n = static_cast<int64_t>(flags.devices.size());
  const int64_t partition = flags.local[0];
  std::vector<double> seconds;
  for (int64_t i = 0; i < flags.warmup + flags.iterations; ++i) {
    const uint64_t seq = static_cast<uint64_t>(i + 1);
    GlooCollectives participant(
        **communicators,
        GlooLaunch{.island = IslandId(0), .epoch = 0, .seq = seq,
                   .devices = flags.devices},
        partition, GlooCollectives::Options{});
    // The evaluator hands a collective the operand it no longer needs (the
    // all-reduce then reduces in place); making it is not timed, as the
    // plain Gloo side refills its buffer untimed.
    Literal value(hlo::Shape(hlo::PrimitiveType::kF32, {flags.elements}));
    for (float& x : value.mutable_data<float>()) x = 1.0f;
    std::vector<Literal> operands;
    operands.push_back(std::move(value));
    const absl::Time start = absl::Now();
    absl::StatusOr<Literal> sum = participant.AllReduce(
        exec::testutil::OpFor(ar, partition, n, 1, 0, seq), std::move(operands));
    const absl::Duration took = absl::Now() - start;
    CW_CHECK(sum.ok()) << "all-reduce " << i + 1 << " of "
                       << flags.warmup + flags.iterations << ": "
                       << sum.status();
    for (float x : sum->data<float>()) CW_CHECK(x == float(n)) << x;
    if (i >= flags.warmup) seconds.push_back(absl::ToDoubleSeconds(took));
  }
  AwaitEveryPartition(store, flags.local, n, absl::Minutes(10));
  store.Report(Times(seconds));
  return 0;
}

int BenchGloo(const Flags& flags, StreamKeyValueStore& store) {
  const int size = static_cast<int>(flags.devices.size());
  const int rank = static_cast<int>(flags.local[0]);
  ::gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = ::gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
  GlooStore rendezvous(store, "plain-gloo/", absl::Now() + absl::Seconds(60));
  context->connectFullMesh(rendezvous, device);
  std::vector<float> data(static_cast<size_t>(flags.elements), 1.0f);
  std::vector<double> seconds;
  for (int64_t i = 0; i < flags.warmup + flags.iterations; ++i) {
    std::fill(data.begin(), data.end(), 1.0f);
    ::gloo::AllreduceOptions options(context);
    options.setOutput(data.data(), data.size());
    options.setAlgorithm(::gloo::AllreduceOptions::Algorithm::RING);
    options.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &::gloo::sum<float>));
    options.setTag(static_cast<uint32_t>(i));
    const absl::Time start = absl::Now();
    ::gloo::allreduce(options);
    const absl::Duration took = absl::Now() - start;
    for (float x : data) CW_CHECK(x == float(size)) << x;
    if (i >= flags.warmup) seconds.push_back(absl::ToDoubleSeconds(took));
  }
  AwaitEveryPartition(store, flags.local, size, absl::Minutes(10));
  store.Report(Times(seconds));
  return 0;
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr, "gloo_peer: bad flags (see the file comment)\n");
    return 2;
  }
  if (flags.mode == "loop") return Loop(flags);
  StreamKeyValueStore store(0, 1, nullptr);
  if (flags.mode == "bench-causeway") return BenchCauseway(flags, store, false);
  if (flags.mode == "bench-sealed") return BenchCauseway(flags, store, true);
  if (flags.mode == "bench-gloo") return BenchGloo(flags, store);
  std::fprintf(stderr, "gloo_peer: unknown --mode=%s\n", flags.mode.c_str());
  return 2;
}

}  // namespace
}  // namespace causeway::transport::testing

int main(int argc, char** argv) {
  return causeway::transport::testing::Main(argc, argv);
}
