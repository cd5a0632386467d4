#include "causeway/head/health.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "causeway/base/executor.h"

namespace causeway::head {

HealthMonitor::HealthMonitor(Options options, Membership* membership,
                             Callbacks callbacks)
    : options_(std::move(options)),
      membership_(membership),
      callbacks_(std::move(callbacks)),
      hosts_(std::make_shared<Hosts>()) {
  hosts_->clock = options_.clock ? options_.clock : [] { return absl::Now(); };
}

HealthMonitor::~HealthMonitor() { Stop(); }

void HealthMonitor::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Loop(); });
}

void HealthMonitor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void HealthMonitor::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Pings every interval; without pings, a tenth of the shortest lease
      // (at most a second, for leases that come later).
      absl::Duration period = options_.heartbeat_interval;
      if (period <= absl::ZeroDuration()) {
        period = std::min(absl::Seconds(1), shortest_lease_ / 10);
      }
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), period)) return;
    }
    CheckNow();
  }
}

std::map<HostId, absl::Duration> HealthMonitor::HeartbeatAges() const {
  const absl::Time now = hosts_->clock();
  std::map<HostId, absl::Duration> ages;
  absl::MutexLock lock(&hosts_->mu);
  for (const auto& [host, state] : hosts_->hosts) {
    ages.emplace(host, now - state.last_ok);
  }
  return ages;
}

void HealthMonitor::CheckNow() {
  const bool pinging = options_.heartbeat_interval > absl::ZeroDuration();
  const absl::Time now = hosts_->clock();
  std::vector<std::pair<HostId, std::string>> lost;
  if (pinging) {
    absl::MutexLock lock(&hosts_->mu);
    for (auto it = hosts_->hosts.begin(); it != hosts_->hosts.end();) {
      const absl::Duration silent = now - it->second.last_ok;
      if (silent <= options_.heartbeat_timeout) {
        ++it;
        continue;
      }
      lost.emplace_back(
          it->first,
          absl::StrCat("no heartbeat answered for ",
                       absl::FormatDuration(silent), " (timeout ",
                       absl::FormatDuration(options_.heartbeat_timeout), ")"));
      it = hosts_->hosts.erase(it);
    }
  }
  std::vector<std::pair<SessionId, std::string>> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = leases_.begin(); it != leases_.end();) {
      if (now < it->second.expires) {
        ++it;
        continue;
      }
      expired.emplace_back(
          it->first,
          absl::StrCat("its lease of ", absl::FormatDuration(it->second.lease),
                       " expired: the client made no call for that long"));
      it = leases_.erase(it);
    }
  }
  for (const auto& [host, reason] : lost) {
    if (callbacks_.host_lost) callbacks_.host_lost(host, reason);
  }
  for (const auto& [session, reason] : expired) {
    if (callbacks_.lease_expired) callbacks_.lease_expired(session, reason);
  }
  if (!pinging) return;
  // Ping every watched host that has no ping in flight.
  struct Ping {
    HostId host;
    uint64_t watch;
    std::shared_ptr<transport::ControlChannel> channel;
  };
  std::vector<Ping> pings;
  const auto channels = membership_->LiveChannels();
  {
    absl::MutexLock lock(&hosts_->mu);
    for (const auto& [host, channel] : channels) {
      auto it = hosts_->hosts.find(host);
      if (it == hosts_->hosts.end() || it->second.ping_in_flight) continue;
      it->second.ping_in_flight = true;
      pings.push_back(Ping{host, it->second.watch, channel});
    }
  }
  for (Ping& ping : pings) {
    ping.channel->Heartbeat().OnReady(
        InlineExecutor::Instance(),
        [hosts = hosts_, host = ping.host,
         watch = ping.watch](const absl::Status& beat) {
          absl::MutexLock lock(&hosts->mu);
          auto it = hosts->hosts.find(host);
          if (it == hosts->hosts.end() || it->second.watch != watch) return;
          it->second.ping_in_flight = false;
          if (beat.ok()) it->second.last_ok = hosts->clock();
        });
  }
}

void HealthMonitor::WatchHost(HostId host) {
  absl::MutexLock lock(&hosts_->mu);
  hosts_->hosts[host] = Host{hosts_->clock(), false, hosts_->next_watch++};
}

void HealthMonitor::ForgetHost(HostId host) {
  absl::MutexLock lock(&hosts_->mu);
  hosts_->hosts.erase(host);
}

void HealthMonitor::WatchSession(SessionId session, absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  leases_[session] = Lease{lease, hosts_->clock() + lease};
  shortest_lease_ = std::min(shortest_lease_, lease);
}

void HealthMonitor::Touch(SessionId session) {
  absl::MutexLock lock(&mu_);
  auto it = leases_.find(session);
  if (it != leases_.end()) {
    it->second.expires = hosts_->clock() + it->second.lease;
  }
}

void HealthMonitor::ForgetSession(SessionId session) {
  absl::MutexLock lock(&mu_);
  leases_.erase(session);
}

}  // namespace causeway::head
