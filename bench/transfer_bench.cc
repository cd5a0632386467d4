// Transfers between two workers over the TCP data plane, against raw TCP
// measured in the same run (issue #7, "Transfers"). See bench/transfer_bench.sh
// for the loopback and the network-namespace runs, and BENCHMARKS.md.
//
//   transfer_bench [--mib=64] [--iterations=8] [--repeats=5]
//                  [--receiver-netns=NAME --receiver-ip=IP] [--only=TEXT]
//                  [--sealed=1]
//
// --sealed=1 measures encryption instead: two pairs of workers, both with
// a token, one with data-plane encryption off and one with it on
// (TcpDataPlaneOptions::encrypt), samples alternating between them; prints
// each side's rate and sealed / clear.
//
// Two Worker objects in this process, each with its own TcpDataPlane (its
// own I/O thread and sockets): host 0 sends, hosts 1 and 2 receive (host 2
// reads box pieces straight into their runs whatever their width, host 1
// uses the default threshold). One transfer is timed from the dispatch of
// its sends to its destination buffer being ready on the receiver (the
// receive is announced first, as the head's dispatch does). The raw
// baseline moves the same bytes over one plain TCP connection (blocking
// write() of the whole buffer, read() into a buffer, one byte back), timed
// from the first write to the byte coming back. With --receiver-netns the
// receiving side's sockets live in that network namespace (its threads
// setns(2) into it before making them), so the bytes cross the veth pair.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"
#include "causeway/transport/launch_collectives.h"
#include "causeway/transport/tcp_data_plane.h"
#include "causeway/transport/topology.h"
#include "causeway/worker/worker.h"
#include "raw_tcp.h"
#include "transfer_samples.h"

namespace causeway {
namespace {

using transport::Box;
using transport::DeviceBuffer;
using transport::PieceOrigin;
using transport::ReceiveSpec;
using transport::SendSpec;
using transport::TcpDataPlane;
using transport::WorkerBatch;
using worker::Worker;

// Its own flags, besides bench::TransferFlags.
struct Flags {
  std::string receiver_netns;
  std::string receiver_ip = "127.0.0.1";
  std::string only;  // Cases whose name contains this (all when empty).
  std::string sealed;  // "1": clear against sealed, both with a token.
};

// ---------------------------------------------------------------------------
// Causeway: two workers, each on its own TCP data plane.

class WorkerPair {
 public:
  // `token` and `encrypt`: TcpDataPlaneOptions' (the --sealed runs).
  explicit WorkerPair(const Flags& flags, std::string token = "",
                      bool encrypt = true) {
    topology_ = std::make_unique<transport::Topology>(
        *transport::Topology::Uniform(1, 3, 1, int64_t{4} << 30));
    transport::TcpDataPlaneOptions sender_options;
    sender_options.auth_token = token;
    sender_options.encrypt = encrypt;
    planes_.push_back(*TcpDataPlane::Create(sender_options));
    bench::InNetns(flags.receiver_netns, [&] {
      // Host 1 stages every box piece, host 2 reads every one straight in.
      for (int64_t threshold :
           {std::numeric_limits<int64_t>::max(), int64_t{0}}) {
        transport::TcpDataPlaneOptions options;
        options.listen_address = absl::StrCat(flags.receiver_ip, ":0");
        options.min_direct_run_bytes = threshold;
        options.auth_token = token;
        options.encrypt = encrypt;
        planes_.push_back(*TcpDataPlane::Create(options));
      }
    });
    for (int64_t h = 0; h < 3; ++h) {
      worker::WorkerOptions options;
      options.host = HostId(h);
      options.island = IslandId(0);
      options.devices.push_back(topology_->device(DeviceId(h)));
      options.data_plane = planes_[h].get();
      options.collectives = &collectives_;
      workers_.push_back(*Worker::Create(options));
      planes_[h]->Attach(HostId(h), workers_[h].get());
    }
    for (int64_t to = 1; to < 3; ++to) {
      planes_[0]->SetPeer(HostId(to), planes_[to]->address(),
                          planes_[to]->incarnation());
      // A receiver admits only members of its peer table.
      planes_[to]->SetPeer(HostId(0), planes_[0]->address(),
                           planes_[0]->incarnation());
    }
  }
  ~WorkerPair() {
    for (auto& plane : planes_) plane->AwaitIdle(absl::Now() + absl::Seconds(5));
    for (auto& worker : workers_) worker->Stop();
    for (auto& plane : planes_) plane->Shutdown();
  }

  // Puts `value` on the sender as array `array`, shard `shard`.
  void Put(uint64_t array, int64_t shard, hlo::Literal value) {
    CW_CHECK(workers_[0]
                 ->PutBuffer({DeviceId(0), BufferId{ArrayHandle(array), shard},
                              std::move(value)})
                 .Await()
                 .ok());
  }

  // Seconds to move the boxes `boxes` of the sender's array `source`
  // (shard 0) into a new buffer of `shape` on host `to`, box i at
  // `offsets[i]` (one box that is all of both: a whole transfer).
  double Transfer(uint64_t source, const std::vector<Box>& boxes,
                  const std::vector<std::vector<int64_t>>& offsets,
                  const hlo::Shape& shape, int64_t to, bool whole) {
    const uint64_t destination = next_array_++;
    WorkerBatch receive;
    ReceiveSpec spec{DeviceId(to), BufferId{ArrayHandle(destination), 0},
                     shape, {}, {}, whole};
    WorkerBatch send;
    for (size_t p = 0; p < boxes.size(); ++p) {
      const uint64_t transfer = next_transfer_++;
      spec.pieces.push_back(PieceOrigin{transfer, DeviceId(0), HostId(0), ""});
      send.sends.push_back(SendSpec{
          transfer, DeviceId(0), BufferId{ArrayHandle(source), 0}, boxes[p],
          whole, HostId(to), DeviceId(to),
          BufferId{ArrayHandle(destination), 0}, offsets[p]});
    }
    receive.receives.push_back(std::move(spec));
    workers_[to]->Dispatch(std::move(receive));
    const DeviceBuffer buffer{DeviceId(to),
                              BufferId{ArrayHandle(destination), 0}};
    const absl::Time start = absl::Now();
    workers_[0]->Dispatch(std::move(send));
    absl::Status ready = workers_[to]->AwaitBuffers({buffer}).Await();
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    CW_CHECK(ready.ok()) << ready;
    workers_[to]->ReleaseBuffers({buffer});
    return seconds;
  }

 private:
  std::unique_ptr<transport::Topology> topology_;
  transport::InProcessLaunchCollectives collectives_;
  std::vector<std::unique_ptr<TcpDataPlane>> planes_;
  std::vector<std::unique_ptr<Worker>> workers_;
  uint64_t next_array_ = 1000;
  uint64_t next_transfer_ = 1;
};

struct Case {
  std::string name;
  std::string description;
  uint64_t source;
  hlo::Shape source_shape;
  std::vector<Box> boxes;
  std::vector<std::vector<int64_t>> offsets;
  hlo::Shape shape;
  int64_t to;
  bool whole;
};

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) {
  using namespace causeway;  // NOLINT: a benchmark's main.
  bench::TransferFlags common{.mib = 64, .iterations = 8, .repeats = 5};
  Flags flags;
  bench::ParseTransferFlags(
      argc, argv, common,
      [&flags](const std::string& name, const std::string& value) {
        std::string* field = name == "receiver-netns" ? &flags.receiver_netns
                             : name == "receiver-ip"  ? &flags.receiver_ip
                             : name == "only"         ? &flags.only
                             : name == "sealed"       ? &flags.sealed
                                                      : nullptr;
        if (field != nullptr) *field = value;
        return field != nullptr;
      });
  const int64_t bytes = common.mib << 20;
  const int64_t elements = bytes / 4;
  const hlo::PrimitiveType f32 = hlo::PrimitiveType::kF32;

  const bool sealed = flags.sealed == "1";
  std::optional<bench::RawTcp> raw;
  if (!sealed) raw.emplace(bytes, flags.receiver_ip, flags.receiver_netns);
  WorkerPair pair(flags, sealed ? "bench token" : "", /*encrypt=*/false);
  std::optional<WorkerPair> sealed_pair;
  if (sealed) sealed_pair.emplace(flags, "bench token", /*encrypt=*/true);
  std::vector<Case> cases;
  cases.push_back({"whole", absl::StrCat("one whole f32[", elements, "] shard"),
                   1, hlo::Shape(f32, {elements}), {Box{{0}, {elements}}},
                   {{0}}, hlo::Shape(f32, {elements}), 1, true});
  // The two column halves of one source, sent as boxes of it (gathered
  // from its runs) into the same places of the destination (scattered into
  // its runs), each run width both ways: host 1 stages the runs, host 2
  // reads them straight in.
  std::vector<std::tuple<std::string, int64_t, int64_t>> boxes;
  for (int64_t run : {64, 256, 512, 1024, 2048, 4096, 16384}) {
    boxes.emplace_back(absl::StrCat("runs of ", run, " B, staged"), 1, run);
    boxes.emplace_back(absl::StrCat("runs of ", run, " B, direct"), 2, run);
  }
  for (const auto& [name, to, run_bytes] : boxes) {
    const int64_t half = run_bytes / 4;
    const int64_t height = elements / (2 * half);
    const hlo::Shape shape(f32, {height, 2 * half});
    cases.push_back({name,
                     absl::StrCat("column halves of f32[", height, ",",
                                  2 * half, "]"),
                     cases.size() + 1,
                     shape,
                     {Box{{0, 0}, {height, half}}, Box{{0, half}, {height, half}}},
                     {{0, 0}, {0, half}},
                     shape,
                     to,
                     false});
  }
  cases.erase(std::remove_if(cases.begin(), cases.end(),
                             [&](const Case& c) {
                               return c.name.find(flags.only) ==
                                      std::string::npos;
                             }),
              cases.end());
  for (const Case& c : cases) {
    pair.Put(
        c.source, 0,
        bench::RandomLiteral(c.source_shape, static_cast<uint32_t>(c.source)));
    if (sealed) {
      sealed_pair->Put(c.source, 0,
                       bench::RandomLiteral(c.source_shape,
                                            static_cast<uint32_t>(c.source)));
    }
  }
  if (sealed) {
    // Clear and sealed samples alternate, so a noisy neighbour hurts both.
    auto sample = [&](WorkerPair& on, const Case& c) {
      double seconds = 0;
      for (int i = 0; i < common.iterations; ++i) {
        seconds += on.Transfer(c.source, c.boxes, c.offsets, c.shape, c.to,
                               c.whole);
      }
      return static_cast<double>(bytes) * common.iterations / seconds / 1e9;
    };
    for (const Case& c : cases) {
      sample(pair, c);
      sample(*sealed_pair, c);
    }
    std::printf("transfer_bench --sealed: %lld MiB, %d transfers per sample, "
                "%d samples, loopback, token set on both sides\n",
                static_cast<long long>(common.mib), common.iterations,
                common.repeats);
    std::printf("| transfer | clear GB/s | sealed GB/s | sealed / clear |\n"
                "|---|---|---|---|\n");
    for (const Case& c : cases) {
      std::vector<double> clear, secret, ratios;
      for (int r = 0; r < common.repeats; ++r) {
        clear.push_back(sample(pair, c));
        secret.push_back(sample(*sealed_pair, c));
        ratios.push_back(secret.back() / clear.back());
      }
      std::printf("| %s: %s | %.2f | %.2f | %.2f |\n", c.name.c_str(),
                  c.description.c_str(), bench::Median(clear),
                  bench::Median(secret), bench::Median(ratios));
      std::fflush(stdout);
    }
    std::printf("(medians of %d samples; the ratio is the median of "
                "per-sample ratios)\n",
                common.repeats);
    return 0;
  }
  std::printf(
      "transfer_bench: %lld MiB, %d transfers per sample, %d samples; "
      "receiver %s%s\n",
      static_cast<long long>(common.mib), common.iterations, common.repeats,
      flags.receiver_ip.c_str(),
      flags.receiver_netns.empty()
          ? " (loopback)"
          : absl::StrCat(" in netns ", flags.receiver_netns).c_str());
  // Warm up both (connections, buffer pools).
  raw->Transfer();
  for (const Case& c : cases) {
    pair.Transfer(c.source, c.boxes, c.offsets, c.shape, c.to, c.whole);
  }
  std::vector<bench::TransferRates> rates(cases.size());
  for (int r = 0; r < common.repeats; ++r) {
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      bench::SampleAgainstRaw(
          *raw, bytes, common.iterations,
          [&] {
            return pair.Transfer(c.source, c.boxes, c.offsets, c.shape, c.to,
                                 c.whole);
          },
          rates[k]);
    }
  }
  std::printf("| transfer | Causeway GB/s | raw TCP GB/s | ratio |\n"
              "|---|---|---|---|\n");
  for (size_t k = 0; k < cases.size(); ++k) {
    bench::PrintRatesRow(
        absl::StrCat(cases[k].name, ": ", cases[k].description), rates[k]);
  }
  std::printf(
      "(medians of %d samples of %d transfers; ratio: the median of "
      "per-sample ratios against raw TCP measured right before)\n",
      common.repeats, common.iterations);
  return 0;
}
