// Test support for the multi-process tests (cli/multi_process_test.cc,
// cli/separate_hosts_test.cc): a gtest fixture that starts `causeway head` and
// `causeway worker` as child processes, waits for the lines they print
// when ready (never a sleep), and stops them all even when a test fails;
// and small programs with their expected answers.
//
// A process can be started under a launcher prefix (`ip netns exec NAME`,
// testing/veth_network.h): the prefix must exec the command in place, so
// that the child's pid is the head's or the worker's own.
#ifndef CAUSEWAY_CLI_TESTING_PROCESS_CLUSTER_H_
#define CAUSEWAY_CLI_TESTING_PROCESS_CLUSTER_H_

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "causeway/base/status.h"
#include "causeway/cli/child_process.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "causeway/client/test_programs.h"
#include "causeway/hlo/literal_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace causeway::cli::testing {

inline constexpr absl::Duration kStart = absl::Seconds(30);
inline constexpr absl::Duration kWait = absl::Seconds(30);
// The head's heartbeat interval (StartHead): quick, so that tests do not
// wait long for a silent worker's death.
inline constexpr absl::Duration kHeartbeatInterval = absl::Milliseconds(200);

// y = 2x for f32[partitions] tiled over `partitions` devices, one element
// each: no collectives, so it runs on devices of any processes.
inline std::string TimesTwoProgram(int64_t partitions = 2) {
  return client::testing::ElementwiseProgram("times_two", "multiply", 2,
                                             partitions);
}

// Each partition's f32[2] summed over both partitions.
inline constexpr char kAllReduce[] = R"(
HloModule sum2, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[2] parameter(0), sharding={devices=[2]<=[2]}
  ROOT r = f32[2] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add, sharding={devices=[2]<=[2]}
}
)";

struct Worker {
  std::unique_ptr<ChildProcess> process;
  HostId host;
};

// A session of `client` (named `name`) and a slice of `devices` devices
// in it, requested: it may still wait in the queue (slice.Ready()).
struct SessionSlice {
  client::Session session;
  client::Slice slice;
};
inline absl::StatusOr<SessionSlice> OpenSessionWithSlice(
    client::Client& client, int64_t devices, const std::string& name = "t") {
  CW_ASSIGN_OR_RETURN(client::Session session,
                      client.OpenSession({.name = name}));
  CW_ASSIGN_OR_RETURN(client::Slice slice, session.CreateSlice(devices));
  return SessionSlice{std::move(session), std::move(slice)};
}

// The same with two devices, granted, each on another worker process.
inline absl::StatusOr<SessionSlice> SliceOverTwoProcesses(
    client::Client& client) {
  CW_ASSIGN_OR_RETURN(SessionSlice two, OpenSessionWithSlice(client, 2));
  CW_ASSIGN_OR_RETURN(transport::SliceInfo granted,
                      two.slice.Ready().AwaitFor(kWait));
  if (granted.devices.size() != 2 ||
      client.topology()->HostOf(granted.devices[0]) ==
          client.topology()->HostOf(granted.devices[1])) {
    return absl::FailedPreconditionError(
        "the slice's two devices are not on two worker processes");
  }
  return two;
}

// A head and workers as child processes. The destructor kills whatever
// is still running (ChildProcess does), so a failing test leaves nothing.
class ProcessClusterTest : public ::testing::Test {
 protected:
  // Head flags: heartbeats every kHeartbeatInterval, and `flags`.
  // `launcher` (if any) comes before the command.
  void StartHead(std::vector<std::string> flags = {},
                 const std::string& listen = "127.0.0.1:0",
                 std::vector<std::string> launcher = {}) {
    std::vector<std::string> argv = std::move(launcher);
    argv.insert(
        argv.end(),
        {CAUSEWAY_BINARY, "head", "--listen", listen, "--heartbeat-interval",
         absl::StrCat(absl::ToDoubleSeconds(kHeartbeatInterval))});
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> head =
        ChildProcess::Start(argv);
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = *std::move(head);
    absl::StatusOr<std::string> line =
        head_->ReadLineStartingWith("head listening on ", kStart);
    ASSERT_TRUE(line.ok()) << line.status();
    address_ = line->substr(std::string("head listening on ").size());
  }

  // A worker of `devices` devices on `island`, registered; 64M each unless
  // `flags` say otherwise. `launcher` (if any) comes before the command.
  Worker& AddWorker(int64_t devices, int64_t island = 0,
                    std::vector<std::string> flags = {},
                    std::vector<std::string> launcher = {}) {
    std::vector<std::string> argv = std::move(launcher);
    argv.insert(argv.end(),
                {CAUSEWAY_BINARY, "worker", "--head", address_, "--island",
                 absl::StrCat(island), "--devices", absl::StrCat(devices)});
    if (std::find(flags.begin(), flags.end(), "--memory-per-device") ==
        flags.end()) {
      flags.insert(flags.end(), {"--memory-per-device", "64M"});
    }
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> process =
        ChildProcess::Start(argv, /*merge_stderr=*/true);
    CW_CHECK(process.ok()) << process.status();
    workers_.push_back({*std::move(process), HostId()});
    Worker& worker = workers_.back();
    worker.host = AwaitRegistered(worker);
    return worker;
  }

  // Reads the worker's next `worker host H ready` line; its host id.
  HostId AwaitRegistered(Worker& worker) {
    absl::StatusOr<std::string> line =
        worker.process->ReadLineStartingWith("worker host ", kStart);
    CW_CHECK(line.ok()) << line.status();
    std::vector<std::string> words = absl::StrSplit(*line, ' ');
    int64_t host = -1;
    CW_CHECK(words.size() > 2 && absl::SimpleAtoi(words[2], &host)) << *line;
    return HostId(host);
  }

  // The worker process of `host`; dies if there is none.
  Worker& WorkerOf(HostId host) {
    auto it = std::find_if(workers_.begin(), workers_.end(),
                           [host](const Worker& w) { return w.host == host; });
    CW_CHECK(it != workers_.end()) << "no worker process is host " << host;
    return *it;
  }

  // A client in a process of its own (session_holder) holding a granted
  // slice of `devices` devices of this cluster, once it says so.
  std::unique_ptr<ChildProcess> StartSessionHolder(int64_t devices) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> holder =
        ChildProcess::Start({CAUSEWAY_SESSION_HOLDER, "--head", address_,
                             "--devices", absl::StrCat(devices)});
    CW_CHECK(holder.ok()) << holder.status();
    absl::StatusOr<std::string> holding =
        (*holder)->ReadLineStartingWith("holding", kStart);
    CW_CHECK(holding.ok()) << holding.status();
    return *std::move(holder);
  }

  std::unique_ptr<client::Client> Connect() {
    absl::StatusOr<std::unique_ptr<client::Client>> client =
        client::Connect(address_);
    CW_CHECK(client.ok()) << client.status();
    return *std::move(client);
  }

  // Reads the head's membership lines until `host` is declared dead; the
  // reason it gives.
  absl::StatusOr<std::string> AwaitHostDead(HostId host,
                                            absl::Duration timeout) {
    const std::string prefix =
        absl::StrCat("causeway head: host ", host.value(), " dead: ");
    absl::StatusOr<std::string> line =
        head_->ReadLineStartingWith(prefix, timeout, /*echo=*/false);
    if (!line.ok()) return line.status();
    return line->substr(prefix.size());
  }

  // When the head declared `host` dead, by its own record (the `death` of
  // the host in `session`'s status view), on its steady clock: the head
  // runs on this machine, so that is this process's steady clock too.
  // NotFound while the head has not declared it dead.
  static absl::StatusOr<std::chrono::steady_clock::time_point> DeclaredDeadAt(
      client::Session& session, HostId host) {
    CW_ASSIGN_OR_RETURN(transport::StatusReport report,
                        session.Status().AwaitFor(kWait));
    const nlohmann::json status = nlohmann::json::parse(
        report.json, /*cb=*/nullptr, /*allow_exceptions=*/false);
    if (status.is_discarded() || !status.contains("hosts")) {
      return absl::InternalError("the status view is not JSON with hosts");
    }
    for (const nlohmann::json& entry : status["hosts"]) {
      if (entry.value("host", int64_t{-1}) != host.value()) continue;
      if (!entry.contains("death")) break;
      return std::chrono::steady_clock::time_point(std::chrono::microseconds(
          entry["death"].value("declared_steady_us", int64_t{0})));
    }
    return absl::NotFoundError(absl::StrCat("the head has no record of host ",
                                            host.value(), "'s death"));
  }

  // Stops every worker, then the head (SIGKILL; ChildProcess reaps).
  void StopAll() {
    workers_.clear();
    head_.reset();
  }

  std::unique_ptr<ChildProcess> head_;
  std::string address_;
  std::deque<Worker> workers_;  // References stay valid as it grows.
};

// 2 * [x0, x1] on a 2-device slice of `session`.
inline absl::StatusOr<std::vector<float>> TimesTwo(client::Session& session,
                                                   const client::Slice& slice,
                                                   float x0, float x1) {
  CW_ASSIGN_OR_RETURN(client::Executable program,
                      session.Compile(TimesTwoProgram(), slice));
  CW_ASSIGN_OR_RETURN(client::Sharding tiled,
                      client::Sharding::TiledByDims({2}));
  CW_ASSIGN_OR_RETURN(client::Array x,
                      session.FromHost(hlo::testutil::F32({2}, {x0, x1}),
                                       slice, tiled));
  CW_ASSIGN_OR_RETURN(std::vector<client::Array> y, program.Execute({x}));
  CW_ASSIGN_OR_RETURN(hlo::Literal value, y[0].ToHost().AwaitFor(kWait));
  return hlo::testutil::Values(value);
}

// The all-reduce of [1,2] and [10,20] on `session`'s 2-device `slice`:
// [11, 22, 11, 22] when right.
inline absl::StatusOr<std::vector<float>> SumOfTwo(client::Session& session,
                                                   const client::Slice& slice) {
  CW_ASSIGN_OR_RETURN(client::Executable program,
                      session.Compile(kAllReduce, slice));
  CW_ASSIGN_OR_RETURN(client::Sharding tiled,
                      client::Sharding::TiledByDims({2}));
  CW_ASSIGN_OR_RETURN(client::Array x,
                      session.FromHost(hlo::testutil::F32({4}, {1, 2, 10, 20}),
                                       slice, tiled));
  CW_ASSIGN_OR_RETURN(std::vector<client::Array> y, program.Execute({x}));
  CW_ASSIGN_OR_RETURN(hlo::Literal value, y[0].ToHost().AwaitFor(kWait));
  return hlo::testutil::Values(value);
}

// [x0, x1] tiled over `session`'s 2-device `slice`, copied so that each
// device takes the other's half (both halves cross between the devices'
// processes on the data plane), read back; then doubled by TimesTwoProgram,
// which moves them back into its own sharding. Both results: [x0, x1] and
// [2 x0, 2 x1] when right.
inline absl::StatusOr<std::pair<std::vector<float>, std::vector<float>>>
SwappedThenDoubled(client::Session& session, const client::Slice& slice,
                   float x0, float x1) {
  CW_ASSIGN_OR_RETURN(client::Sharding tiled,
                      client::Sharding::TiledByDims({2}));
  CW_ASSIGN_OR_RETURN(client::Array x,
                      session.FromHost(hlo::testutil::F32({2}, {x0, x1}),
                                       slice, tiled));
  CW_ASSIGN_OR_RETURN(client::Sharding swapped,
                      client::Sharding::Parse("{devices=[2]1,0}"));
  CW_ASSIGN_OR_RETURN(client::Array moved, session.Copy(x, slice, swapped));
  CW_ASSIGN_OR_RETURN(hlo::Literal value, moved.ToHost().AwaitFor(kWait));
  CW_ASSIGN_OR_RETURN(client::Executable program,
                      session.Compile(TimesTwoProgram(), slice));
  CW_ASSIGN_OR_RETURN(std::vector<client::Array> y, program.Execute({moved}));
  CW_ASSIGN_OR_RETURN(hlo::Literal doubled, y[0].ToHost().AwaitFor(kWait));
  return std::make_pair(hlo::testutil::Values(value),
                        hlo::testutil::Values(doubled));
}

}  // namespace causeway::cli::testing

#endif  // CAUSEWAY_CLI_TESTING_PROCESS_CLUSTER_H_
