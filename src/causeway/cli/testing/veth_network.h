// Separate "hosts" on one machine, for the tests and benchmarks that need
// a real network between the head and its workers (docs/distributed.md,
// "Separate hosts"): one network namespace per host, joined by veth pairs
// to a bridge that lives in a namespace of its own (the switch).
//
//   this process's namespace          switch namespace (bridge br0)
//     cw<pid>n<k>c  198.18.S.1  <-veth->  cl   ─┐
//   host namespace 0                            │
//     eth0          198.18.S.2  <-veth->  h0   ─┤ br0
//   host namespace 1                            │
//     eth0          198.18.S.3  <-veth->  h1   ─┘
//   ...
//
// The caller's own namespace joins the switch too, so a client in the
// test process reaches every host. Addresses come from 198.18.0.0/15 (set
// aside for benchmarking networks, RFC 2544), one /24 per network, chosen
// from the pid and skipping any /24 an interface here already uses, so
// parallel runs do not clash. Every name carries the pid and a per-process
// counter (`cw<pid>n<k>sw`, `cw<pid>n<k>h<host>`, `cw<pid>n<k>c`); the
// destructor removes the namespaces and the caller's veth end (processes
// still inside a namespace keep it alive until they exit: stop them
// first). A run that was killed never runs its destructor: Create first
// removes what such runs left (RemoveLeftovers), by the pid in the names.
// Nothing else it did not make is touched, and never a live run's.
//
// Needs root, a working `ip netns`, bridges and veth pairs; Create says
// exactly which is missing (FailedPrecondition) where one is.
//
// Not thread-safe: one owner.
#ifndef CAUSEWAY_CLI_TESTING_VETH_NETWORK_H_
#define CAUSEWAY_CLI_TESTING_VETH_NETWORK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace causeway::cli::testing {

class VethNetwork {
 public:
  // `hosts` namespaces (1..200). FailedPrecondition (the reason) when this
  // process cannot make network namespaces, bridges or veth pairs; any
  // other error when making one failed (what is made so far is removed).
  static absl::StatusOr<std::unique_ptr<VethNetwork>> Create(int hosts);
  ~VethNetwork();

  // Removes the namespaces, and the links in this namespace, whose names
  // are a VethNetwork's and carry the pid of a process that no longer
  // exists (pids of this pid namespace: the runs share /var/run/netns with
  // us). A live process's, ours included, stay. The names it removed;
  // FailedPrecondition as Create where there is no `ip`, any other error
  // when listing failed (one that could not be removed is logged).
  static absl::StatusOr<std::vector<std::string>> RemoveLeftovers();

  VethNetwork(const VethNetwork&) = delete;
  VethNetwork& operator=(const VethNetwork&) = delete;

  int hosts() const { return static_cast<int>(namespaces_.size()); }
  // The network namespace of host `host` (a name under /var/run/netns).
  const std::string& netns(int host) const { return namespaces_[host]; }
  // Its address ("198.18.S.H"), reachable from every host and this process.
  const std::string& ip(int host) const { return ips_[host]; }
  // This process's address on the network.
  const std::string& client_ip() const { return client_ip_; }

  // The launcher that runs a command inside host `host`'s namespace
  // (`ip netns exec NAME`; it execs the command in place, so the pid is
  // the command's).
  std::vector<std::string> Launcher(int host) const;
  // Takes host `host`'s link down inside its namespace (`ip link set eth0
  // down`): its packets go nowhere, its peers hear nothing.
  absl::Status CutLink(int host);

 private:
  VethNetwork() = default;

  std::string ip_;  // The `ip` binary.
  std::string switch_;
  std::string client_link_;  // Its end in our namespace.
  std::string client_ip_;
  std::vector<std::string> namespaces_;
  std::vector<std::string> ips_;
  std::vector<std::string> made_;  // Namespaces made, deleted at the end.
};

// Runs `ip ARGS...` (iproute2, found in /usr/sbin, /sbin, /usr/bin or
// /bin); its output, or an error naming the command and what it said
// (FailedPrecondition where there is no `ip`).
absl::StatusOr<std::string> RunIp(std::vector<std::string> args);

}  // namespace causeway::cli::testing

#endif  // CAUSEWAY_CLI_TESTING_VETH_NETWORK_H_
