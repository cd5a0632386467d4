// Transfers between two worker processes on separate "hosts" (issue #7,
// "Transfers ... also across the veth namespaces"), against raw TCP across
// the same veth pairs in the same run. See bench/transfer_bench.sh and
// BENCHMARKS.md.
//
//   cluster_transfer_bench [--mib=64] [--iterations=4] [--repeats=7]
//
// A `causeway head` and two `causeway worker` processes (one device each),
// each in a network namespace of its own joined by veth pairs to a bridge
// (cli::testing::VethNetwork, as cli/separate_hosts_test.cc); this process is the
// client, on the same bridge. One transfer is an f32 array of --mib MiB
// on a 1-device slice on the first worker, copied whole onto a 1-device
// slice on the second (Session::Copy; not a SingleDevice reshard within
// one slice: an upload with a maximal sharding puts a copy on every device
// of the slice, so that would move nothing): timed at the client from the
// call to the copy's Ready, so it includes
// the head's dispatch and the round trips to the head. The baseline moves
// the same bytes over one plain TCP connection from a socket in the first
// worker's namespace to one in the second's (bench/raw_tcp.h): the same
// path through the bridge. Needs root and `ip netns`: says so and exits 0
// elsewhere.
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"
#include "causeway/cli/child_process.h"
#include "causeway/cli/testing/veth_network.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "raw_tcp.h"
#include "transfer_samples.h"

namespace causeway {
namespace {

constexpr absl::Duration kWait = absl::Seconds(60);

// Starts `argv` and reads its line starting with `prefix`.
std::unique_ptr<cli::ChildProcess> StartAndAwait(std::vector<std::string> argv,
                                                 const std::string& prefix,
                                                 std::string* line) {
  absl::StatusOr<std::unique_ptr<cli::ChildProcess>> process =
      cli::ChildProcess::Start(argv, /*merge_stderr=*/true);
  CW_CHECK(process.ok()) << process.status();
  absl::StatusOr<std::string> ready =
      (*process)->ReadLineStartingWith(prefix, kWait, /*echo=*/false);
  CW_CHECK(ready.ok()) << ready.status();
  *line = *ready;
  return *std::move(process);
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) {
  using namespace causeway;  // NOLINT: a benchmark's main.
  bench::TransferFlags flags{.mib = 64, .iterations = 4, .repeats = 7};
  bench::ParseTransferFlags(argc, argv, flags);
  const int64_t bytes = flags.mib << 20;

  absl::StatusOr<std::unique_ptr<cli::testing::VethNetwork>> network =
      cli::testing::VethNetwork::Create(3);
  if (network.status().code() == absl::StatusCode::kFailedPrecondition) {
    std::printf("cluster_transfer_bench: skipped: %s\n",
                std::string(network.status().message()).c_str());
    return 0;
  }
  CW_CHECK(network.ok()) << network.status();
  // Declared after the network and before the client: the client goes
  // first, then the processes, then their namespaces.
  std::vector<std::unique_ptr<cli::ChildProcess>> processes;
  std::string line;
  std::vector<std::string> head = (*network)->Launcher(0);
  // A benchmark network of its own: no token (--insecure).
  head.insert(head.end(), {CAUSEWAY_BINARY, "head", "--listen",
                           absl::StrCat((*network)->ip(0), ":0"), "--insecure"});
  processes.push_back(StartAndAwait(head, "head listening on ", &line));
  const std::string address = line.substr(std::string("head listening on ").size());
  std::map<HostId, int> namespace_of;
  for (int n = 1; n <= 2; ++n) {
    std::vector<std::string> worker = (*network)->Launcher(n);
    worker.insert(worker.end(),
                  {CAUSEWAY_BINARY, "worker", "--head", address, "--island",
                   "0", "--devices", "1", "--memory-per-device",
                   absl::StrCat(4 * flags.mib + 64, "M"),
                   "--data-plane-listen", absl::StrCat((*network)->ip(n), ":0"),
                   "--insecure"});
    processes.push_back(StartAndAwait(worker, "worker host ", &line));
    const std::vector<std::string> words = absl::StrSplit(line, ' ');
    int64_t host = -1;
    CW_CHECK(words.size() > 2 && absl::SimpleAtoi(words[2], &host)) << line;
    namespace_of[HostId(host)] = n;
  }

  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Connect(address);
  CW_CHECK(client.ok()) << client.status();
  absl::StatusOr<client::Session> session =
      (*client)->OpenSession({.name = "cluster_transfer_bench"});
  CW_CHECK(session.ok()) << session.status();
  // Two 1-device slices: one on each worker (each has one device).
  std::vector<client::Slice> slices;
  std::vector<int> netns_index;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<client::Slice> slice = session->CreateSlice(1);
    CW_CHECK(slice.ok()) << slice.status();
    absl::StatusOr<transport::SliceInfo> granted =
        slice->Ready().AwaitFor(kWait);
    CW_CHECK(granted.ok()) << granted.status();
    slices.push_back(*slice);
    netns_index.push_back(
        namespace_of.at((*client)->topology()->HostOf(granted->devices[0])));
  }
  const int from = netns_index[0];
  const int to = netns_index[1];
  CW_CHECK(from != to);

  const hlo::Shape shape(hlo::PrimitiveType::kF32, {bytes / 4});
  const hlo::Literal value = bench::RandomLiteral(shape, 1);
  const client::Sharding whole = client::Sharding::Replicated();
  absl::StatusOr<client::Array> x = session->FromHost(value, slices[0], whole);
  CW_CHECK(x.ok()) << x.status();
  CW_CHECK(x->Ready().AwaitFor(kWait).ok());
  // One copy, checked: the bytes arrive as they left.
  {
    absl::StatusOr<client::Array> y = session->Copy(*x, slices[1], whole);
    CW_CHECK(y.ok()) << y.status();
    absl::StatusOr<hlo::Literal> back = y->ToHost().AwaitFor(kWait);
    CW_CHECK(back.ok()) << back.status();
    CW_CHECK(back->size_bytes() == value.size_bytes() &&
             std::memcmp(back->untyped_data(), value.untyped_data(),
                         value.size_bytes()) == 0)
        << "the copy differs from the original";
    y->Delete();
  }
  auto causeway_transfer = [&]() {
    const absl::Time start = absl::Now();
    absl::StatusOr<client::Array> y = session->Copy(*x, slices[1], whole);
    CW_CHECK(y.ok()) << y.status();
    absl::Status ready = y->Ready().AwaitFor(kWait);
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    CW_CHECK(ready.ok()) << ready;
    y->Delete();
    return seconds;
  };
  bench::RawTcp raw(bytes, (*network)->ip(to), (*network)->netns(to),
                    (*network)->netns(from));
  raw.Transfer();
  causeway_transfer();

  bench::TransferRates rates;
  for (int r = 0; r < flags.repeats; ++r) {
    bench::SampleAgainstRaw(raw, bytes, flags.iterations, causeway_transfer,
                            rates);
  }
  std::printf("cluster_transfer_bench: %lld MiB, worker processes in "
              "namespaces %s -> %s (%s -> %s), %d transfers per sample, %d "
              "samples\n",
              static_cast<long long>(flags.mib),
              (*network)->netns(from).c_str(), (*network)->netns(to).c_str(),
              (*network)->ip(from).c_str(), (*network)->ip(to).c_str(),
              flags.iterations, flags.repeats);
  std::printf(
      "| transfer | Causeway GB/s | raw TCP GB/s | ratio |\n"
      "|---|---|---|---|\n");
  bench::PrintRatesRow(absl::StrCat("whole f32[", bytes / 4,
                                    "], worker process to worker process"),
                       rates);
  std::printf("(medians of %d samples; ratio: the median of per-sample "
              "ratios against raw TCP measured right before)\n",
              flags.repeats);
  return 0;
}
