#include "causeway/cli/testing/veth_network.h"

#include <unistd.h>

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/cli/child_process.h"

namespace causeway::cli::testing {
namespace {

// A command of ours that does not answer in this time is broken.
constexpr absl::Duration kIpTimeout = absl::Seconds(20);

std::atomic<int> next_network{0};

// Runs `ip ARGS...`; its output when it succeeds, otherwise an error with
// the command and what it said.
absl::StatusOr<std::string> RunIp(const std::string& ip,
                                  std::vector<std::string> args) {
  std::vector<std::string> argv = {ip};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string command = absl::StrJoin(argv, " ");
  CW_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> process,
                      ChildProcess::Start(argv, /*merge_stderr=*/true));
  std::string output;
  while (true) {
    absl::StatusOr<std::string> line =
        process->ReadLineStartingWith("", kIpTimeout, /*echo=*/false);
    if (!line.ok()) {
      if (line.status().code() == absl::StatusCode::kDeadlineExceeded) {
        return absl::DeadlineExceededError(
            absl::StrCat("`", command, "` did not finish"));
      }
      break;  // Its output ended.
    }
    absl::StrAppend(&output, *line, "\n");
  }
  CW_ASSIGN_OR_RETURN(int status, process->Wait(kIpTimeout));
  if (status != 0) {
    return absl::InternalError(absl::StrCat(
        "`", command, "` ", ChildProcess::DescribeWaitStatus(status), ": ",
        output));
  }
  return output;
}

std::string FindIp() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip",
                           "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<VethNetwork>> VethNetwork::Create(int hosts) {
  if (hosts < 1 || hosts > 200) {
    return absl::InvalidArgumentError(
        absl::StrCat("a network of ", hosts, " hosts (1..200)"));
  }
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "making network namespaces needs root (this process's euid is ",
        geteuid(), ")"));
  }
  std::unique_ptr<VethNetwork> network(new VethNetwork());
  network->ip_ = FindIp();
  if (network->ip_.empty()) {
    return absl::FailedPreconditionError(
        "no `ip` command (iproute2) in /usr/sbin, /sbin, /usr/bin or /bin");
  }
  const std::string stem =
      absl::StrCat("cw", getpid(), "n", next_network.fetch_add(1));
  network->switch_ = stem + "sw";
  // The first namespace tells whether namespaces work here at all.
  if (absl::StatusOr<std::string> made =
          RunIp(network->ip_, {"netns", "add", network->switch_});
      !made.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "network namespaces do not work here: ", made.status().message()));
  }
  network->made_.push_back(network->switch_);

  // A /24 of 198.18.0.0/15 that no interface here uses.
  CW_ASSIGN_OR_RETURN(std::string used,
                      RunIp(network->ip_, {"-o", "-4", "addr", "show"}));
  std::string subnet;
  for (int i = 0; i < 512 && subnet.empty(); ++i) {
    const int index = (getpid() + i) % 512;
    const std::string candidate =
        absl::StrCat("198.", 18 + index / 256, ".", index % 256, ".");
    if (used.find(" " + candidate) == std::string::npos) subnet = candidate;
  }
  if (subnet.empty()) {
    return absl::ResourceExhaustedError(
        "every /24 of 198.18.0.0/15 is in use by an interface here");
  }

  auto make = [&]() -> absl::Status {
    const std::string& ip = network->ip_;
    const std::string& sw = network->switch_;
    // The first bridge and the first veth pair tell whether this kernel
    // has them.
    auto supported = [](absl::StatusOr<std::string> made,
                        const char* what) -> absl::Status {
      if (made.ok()) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat(
          what, " do not work here: ", made.status().message()));
    };
    CW_RETURN_IF_ERROR(supported(
        RunIp(ip, {"-n", sw, "link", "add", "br0", "type", "bridge"}),
        "bridges"));
    CW_RETURN_IF_ERROR(
        RunIp(ip, {"-n", sw, "link", "set", "br0", "up"}).status());
    // Our own end.
    const std::string link = stem + "c";
    CW_RETURN_IF_ERROR(supported(RunIp(ip, {"link", "add", link, "type",
                                            "veth", "peer", "name", "cl",
                                            "netns", sw}),
                                 "veth pairs"));
    network->client_link_ = link;
    network->client_ip_ = subnet + "1";
    CW_RETURN_IF_ERROR(RunIp(ip, {"addr", "add", network->client_ip_ + "/24",
                                  "dev", network->client_link_})
                           .status());
    CW_RETURN_IF_ERROR(
        RunIp(ip, {"link", "set", network->client_link_, "up"}).status());
    CW_RETURN_IF_ERROR(
        RunIp(ip, {"-n", sw, "link", "set", "cl", "master", "br0", "up"})
            .status());
    for (int h = 0; h < hosts; ++h) {
      const std::string ns = absl::StrCat(stem, "h", h);
      const std::string port = absl::StrCat("h", h);
      CW_RETURN_IF_ERROR(RunIp(ip, {"netns", "add", ns}).status());
      network->made_.push_back(ns);
      network->namespaces_.push_back(ns);
      network->ips_.push_back(absl::StrCat(subnet, h + 2));
      CW_RETURN_IF_ERROR(RunIp(ip, {"-n", ns, "link", "add", "eth0", "type",
                                    "veth", "peer", "name", port, "netns", sw})
                             .status());
      CW_RETURN_IF_ERROR(RunIp(ip, {"-n", ns, "addr", "add",
                                    network->ips_.back() + "/24", "dev",
                                    "eth0"})
                             .status());
      CW_RETURN_IF_ERROR(
          RunIp(ip, {"-n", ns, "link", "set", "lo", "up"}).status());
      CW_RETURN_IF_ERROR(
          RunIp(ip, {"-n", ns, "link", "set", "eth0", "up"}).status());
      CW_RETURN_IF_ERROR(
          RunIp(ip, {"-n", sw, "link", "set", port, "master", "br0", "up"})
              .status());
    }
    return absl::OkStatus();
  };
  // On an error, `network`'s destructor removes what was made.
  CW_RETURN_IF_ERROR(make());
  return network;
}

VethNetwork::~VethNetwork() {
  // Deleting a namespace deletes the veth ends in it, and with them their
  // peers; our own end goes first all the same, in case a process still
  // holds the switch's namespace.
  if (!client_link_.empty()) {
    absl::StatusOr<std::string> removed =
        RunIp(ip_, {"link", "del", client_link_});
    if (!removed.ok()) {
      CW_LOG(WARNING) << removed.status();
    }
  }
  for (const std::string& ns : made_) {
    absl::StatusOr<std::string> removed = RunIp(ip_, {"netns", "del", ns});
    if (!removed.ok()) {
      CW_LOG(WARNING) << removed.status();
    }
  }
}

std::vector<std::string> VethNetwork::Launcher(int host) const {
  return {ip_, "netns", "exec", namespaces_.at(host)};
}

absl::Status VethNetwork::CutLink(int host) {
  return RunIp(ip_, {"-n", namespaces_.at(host), "link", "set", "eth0",
                     "down"})
      .status();
}

}  // namespace causeway::cli::testing
