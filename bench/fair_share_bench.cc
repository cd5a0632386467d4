// Weighted fair share on one island: four sessions with weights 1:2:4:8,
// each with a shared slice of all the island's devices and a steady backlog
// of programs (a 2-partition matmul + tanh, chained). The island scheduler
// keeps a small in-flight window, so its fair-share order decides what
// runs. Counts each session's completed programs in a window while all four
// are backlogged, and compares the shares with the weights.
//
//   fair_share_bench [--seconds=4] [--devices=2] [--size=256]
//
// Prints one JSON object per line.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/status.h"
#include "causeway/client/local_client.h"
#include "causeway/cluster/local_cluster.h"

namespace causeway {
namespace {

using client::Array;

std::string MatmulProgram(int64_t devices, int64_t n) {
  const std::string shape = absl::StrCat("f32[", n, ",", n, "]{1,0}");
  return absl::StrCat(
      "HloModule matmul_tanh, num_partitions=", devices, "\n\n",
      "ENTRY %main (x: ", shape, ", w: ", shape, ") -> ", shape, " {\n",
      "  %x = ", shape, " parameter(0), sharding={replicated}\n",
      "  %w = ", shape, " parameter(1), sharding={replicated}\n",
      "  %d = ", shape,
      " dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n",
      "  ROOT %y = ", shape, " tanh(%d), sharding={replicated}\n}\n");
}

struct Tenant {
  double weight = 1;
  std::vector<absl::Time> completions;  // Written by its thread only.
};

absl::Status RunTenant(client::Client& client, int64_t devices, int64_t size,
                       double weight, std::atomic<bool>& stop,
                       Tenant& tenant) {
  CW_ASSIGN_OR_RETURN(client::Session session,
                      client.OpenSession({.name = absl::StrCat("w", weight),
                                          .weight = weight}));
  client::SliceOptions options;
  options.num_devices = devices;
  options.island = IslandId(0);
  options.shared = true;
  CW_ASSIGN_OR_RETURN(client::Slice slice, session.CreateSlice(options));
  CW_RETURN_IF_ERROR(slice.Ready().Await().status());
  CW_ASSIGN_OR_RETURN(client::Executable program,
                      session.Compile(MatmulProgram(devices, size), slice));
  hlo::Literal host(hlo::Shape(hlo::PrimitiveType::kF32, {size, size}));
  for (float& v : host.mutable_data<float>()) v = 0.01f;
  const client::Sharding replicated = client::Sharding::Replicated();
  CW_ASSIGN_OR_RETURN(Array x, session.FromHost(host, slice, replicated));
  CW_ASSIGN_OR_RETURN(Array w, session.FromHost(host, slice, replicated));
  std::deque<Array> outstanding;
  constexpr size_t kBacklog = 64;
  while (!stop.load()) {
    CW_ASSIGN_OR_RETURN(std::vector<Array> y, program.Execute({x, w}));
    x = y[0];
    outstanding.push_back(x);
    if (outstanding.size() >= kBacklog) {
      CW_RETURN_IF_ERROR(outstanding.front().Ready().Await());
      tenant.completions.push_back(absl::Now());
      outstanding.pop_front();
    }
  }
  for (Array& a : outstanding) CW_RETURN_IF_ERROR(a.Ready().Await());
  return session.Close();
}

int Main(int argc, char** argv) {
  int64_t seconds = 4, devices = 2, size = 256;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--seconds=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(10), &seconds)) {
    } else if (arg.rfind("--devices=", 0) == 0 &&
               absl::SimpleAtoi(arg.substr(10), &devices)) {
    } else if (arg.rfind("--size=", 0) == 0 &&
               absl::SimpleAtoi(arg.substr(7), &size)) {
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seconds=4] [--devices=2] [--size=256]\n",
                   argv[0]);
      return 2;
    }
  }
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create({.islands = 1,
                                     .hosts_per_island = 1,
                                     .devices_per_host = devices,
                                     .max_inflight_launches_per_island = 2});
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<client::Client> client = client::ConnectLocal(**cluster);
  const std::vector<double> weights = {1, 2, 4, 8};
  std::vector<Tenant> tenants(weights.size());
  std::vector<absl::Status> statuses(weights.size());
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (size_t i = 0; i < weights.size(); ++i) {
    tenants[i].weight = weights[i];
    threads.emplace_back([&, i] {
      statuses[i] =
          RunTenant(*client, devices, size, weights[i], stop, tenants[i]);
    });
  }
  absl::SleepFor(absl::Seconds(seconds));
  stop.store(true);
  for (std::thread& t : threads) t.join();
  for (const absl::Status& status : statuses) {
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
      return 1;
    }
  }
  // The window: from 1/4 of the run (everyone backlogged) to 3/4 of it.
  const absl::Time from = start + absl::Seconds(seconds) / 4;
  const absl::Time to = start + absl::Seconds(seconds) * 3 / 4;
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (const Tenant& tenant : tenants) {
    int64_t n = std::count_if(
        tenant.completions.begin(), tenant.completions.end(),
        [&](absl::Time t) { return t >= from && t < to; });
    counts.push_back(n);
    total += n;
  }
  double weight_sum = 0;
  for (double w : weights) weight_sum += w;
  double worst = 0;
  std::vector<std::string> shares, expected, ratios;
  for (size_t i = 0; i < weights.size(); ++i) {
    double share = total > 0 ? static_cast<double>(counts[i]) / total : 0;
    double want = weights[i] / weight_sum;
    worst = std::max(worst, std::abs(share - want) / want);
    shares.push_back(absl::StrCat(share));
    expected.push_back(absl::StrCat(want));
    ratios.push_back(absl::StrCat(
        counts[0] > 0 ? static_cast<double>(counts[i]) / counts[0] : 0));
  }
  std::printf(
      "{\"bench\":\"fair_share\",\"weights\":[1,2,4,8],\"devices\":%lld,"
      "\"size\":%lld,\"window_s\":%.2f,\"programs\":[%s],\"shares\":[%s],"
      "\"expected_shares\":[%s],\"ratio_to_weight_1\":[%s],"
      "\"max_relative_error\":%.4f}\n",
      static_cast<long long>(devices), static_cast<long long>(size),
      absl::ToDoubleSeconds(to - from), absl::StrJoin(counts, ",").c_str(),
      absl::StrJoin(shares, ",").c_str(), absl::StrJoin(expected, ",").c_str(),
      absl::StrJoin(ratios, ",").c_str(), worst);
  return 0;
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) { return causeway::Main(argc, argv); }
