// Elastic data-parallel training (elastic_lib.h): the JAX-compiled MLP
// train step on a slice of a cluster, snapshotting to the host, recovering
// from lost hosts by remap, reload, restore and redo.
//
//   build/bin/elastic_training [--cluster HOST:PORT] [--steps N]
//       [--devices D] [--snapshot-every K] [--data DIR]
//       [--kill-at-step K | --pause-at-step K] [--token-file F] ...
//
// With --cluster it trains on a running cluster (`causeway cluster ...
// --spare-hosts 1`); --pause-at-step K stops after launching step K,
// prints `paused at step K`, and goes on when it gets SIGUSR1 (a test or
// script kills a worker meanwhile). Without --cluster it runs on an
// embedded cluster of two hosts of D devices (one spare); --kill-at-step K
// stops the slice's host right after launching step K.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "elastic_lib.h"
#include "example_cluster.h"

namespace causeway {
namespace {

constexpr char kUsage[] = R"(Usage:
  elastic_training [--steps N] [--devices D] [--snapshot-every K]
                   [--data DIR] [--kill-at-step K | --pause-at-step K]
                   [--cluster HOST:PORT [--token-file F] [--tls-ca F]]

Trains the JAX-compiled data-parallel MLP for N steps (default 20) on a
slice of D devices (default 4: the program's partitions), with a snapshot
of its parameters on the host every K steps (default 5). When a step fails
with DATA_LOSS it waits for the slice's remap, reloads the program,
restores the snapshot and redoes the lost steps. Prints each step's loss,
one line per recovery with its time, and `final loss X`.

  --cluster HOST:PORT  A running cluster (causeway cluster, with a spare
                       worker to remap onto). Default: an embedded cluster
                       of two hosts of D devices.
  --data DIR           The program and data (tools/mlp_demo_reference.py
                       writes them; default examples/data/mlp).
  --kill-at-step K     Embedded only: stop the slice's host right after
                       launching step K.
  --pause-at-step K    With --cluster: after launching step K print
                       `paused at step K` and wait (at most 60 s) for
                       SIGUSR1, while someone kills a worker.
)";

constexpr absl::Duration kPauseLimit = absl::Seconds(60);

// Waits for SIGUSR1 (blocked in every thread since main began).
absl::Status AwaitResume() {
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  timespec limit = absl::ToTimespec(kPauseLimit);
  while (true) {
    if (sigtimedwait(&usr1, nullptr, &limit) == SIGUSR1) {
      return absl::OkStatus();
    }
    if (errno != EINTR) {
      return absl::DeadlineExceededError(
          absl::StrCat("no SIGUSR1 within ", absl::FormatDuration(kPauseLimit),
                       " of pausing"));
    }
  }
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "elastic_training: %s\n", status.ToString().c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

// "--name N" or "--name=N" at argv[i] with N a whole number >= `min`: sets
// *value and moves `i` past it. An error for a bad number.
absl::StatusOr<bool> TakeInt(int argc, char** argv, int& i,
                             const std::string& name, int64_t min,
                             int64_t* value) {
  const std::string arg = argv[i];
  std::string text;
  if (arg == name && i + 1 < argc) {
    text = argv[++i];
  } else if (arg.rfind(name + "=", 0) == 0) {
    text = arg.substr(name.size() + 1);
  } else {
    return false;
  }
  if (!absl::SimpleAtoi(text, value) || *value < min) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " must be a whole number of at least ", min, ", got '", text,
        "'"));
  }
  return true;
}

int Main(int argc, char** argv) {
  // Before any thread starts, so that only AwaitResume takes it.
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);

  examples::ElasticOptions options;
  examples::ExampleClusterFlags cluster_flags;
  std::string data_dir = CAUSEWAY_MLP_DATA_DIR;
  int64_t kill_at = -1, pause_at = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (examples::TakeClusterFlag(argc, argv, i, cluster_flags)) continue;
    bool taken = false;
    for (auto [name, min, value] :
         {std::tuple{"--steps", 1, &options.steps},
          std::tuple{"--devices", 1, &options.devices},
          std::tuple{"--snapshot-every", 1, &options.snapshot_every},
          std::tuple{"--kill-at-step", 0, &kill_at},
          std::tuple{"--pause-at-step", 0, &pause_at}}) {
      absl::StatusOr<bool> took = TakeInt(argc, argv, i, name, min, value);
      if (!took.ok()) return Fail(took.status());
      if ((taken = *took)) break;
    }
    if (taken) continue;
    if (arg == "--data" && i + 1 < argc) {
      data_dir = argv[++i];
    } else if (arg.rfind("--data=", 0) == 0) {
      data_dir = arg.substr(7);
    } else {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "unknown argument '", arg, "' (see --help)")));
    }
  }
  const bool running = !cluster_flags.cluster.empty();
  if (running && kill_at >= 0) {
    return Fail(absl::InvalidArgumentError(
        "--kill-at-step needs the embedded cluster; with --cluster, use "
        "--pause-at-step and kill a worker"));
  }
  if (!running && pause_at >= 0) {
    return Fail(absl::InvalidArgumentError("--pause-at-step needs --cluster"));
  }
  absl::StatusOr<examples::MlpData> data = examples::LoadMlpData(data_dir);
  if (!data.ok()) return Fail(data.status());
  // Embedded: the slice's host and a spare.
  absl::StatusOr<examples::ExampleCluster> cluster =
      examples::ExampleCluster::Connect(
          cluster_flags, {.islands = 1,
                          .hosts_per_island = 2,
                          .devices_per_host = options.devices});
  if (!cluster.ok()) return Fail(cluster.status());
  cluster::LocalCluster* local = cluster->local();
  options.after_launch = [&](int64_t step,
                             const transport::SliceInfo& mapping) {
    if (step == kill_at) {
      const HostId host = local->topology()->HostOf(mapping.devices.front());
      CW_RETURN_IF_ERROR(local->StopHost(host));
      std::printf("stopped host %lld after launching step %lld\n",
                  static_cast<long long>(host.value()),
                  static_cast<long long>(step));
      std::fflush(stdout);
    }
    if (step == pause_at) {
      std::printf("paused at step %lld\n", static_cast<long long>(step));
      std::fflush(stdout);
      CW_RETURN_IF_ERROR(AwaitResume());
    }
    return absl::OkStatus();
  };
  absl::StatusOr<examples::ElasticResult> result =
      examples::RunElasticTraining(cluster->client(), *data, options);
  if (!result.ok()) return Fail(result.status());
  return 0;
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) { return causeway::Main(argc, argv); }
