#include "causeway/cli/testing/veth_network.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/cli/child_process.h"

namespace causeway::cli::testing {
namespace {

// A command of ours that does not answer in this time is broken.
constexpr absl::Duration kIpTimeout = absl::Seconds(20);

std::atomic<int> next_network{0};

// Runs `ip ARGS...` with `ip` the binary; its output when it succeeds,
// otherwise an error with the command and what it said.
absl::StatusOr<std::string> RunIpAt(const std::string& ip,
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

constexpr char kNoIp[] =
    "no `ip` command (iproute2) in /usr/sbin, /sbin, /usr/bin or /bin";

std::string FindIp() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip",
                           "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// The pid in `name` if it is one of ours (`cw<pid>n<k>` and then `sw`, `c`
// or `h<host>`); nullopt for any other name.
std::optional<pid_t> OwnerOf(absl::string_view name) {
  auto digits = [&name]() -> absl::string_view {
    size_t n = 0;
    while (n < name.size() && absl::ascii_isdigit(name[n])) ++n;
    absl::string_view taken = name.substr(0, n);
    name.remove_prefix(n);
    return taken;
  };
  auto consume = [&name](absl::string_view prefix) {
    if (name.substr(0, prefix.size()) != prefix) return false;
    name.remove_prefix(prefix.size());
    return true;
  };
  if (!consume("cw")) return std::nullopt;
  const absl::string_view pid_text = digits();
  int64_t pid = 0;
  if (!absl::SimpleAtoi(pid_text, &pid) || pid <= 0 || pid > (1 << 22)) {
    return std::nullopt;
  }
  if (!consume("n") || digits().empty()) return std::nullopt;
  const bool ours = name == "sw" || name == "c" ||
                    (consume("h") && !digits().empty() && name.empty());
  if (!ours) return std::nullopt;
  return static_cast<pid_t>(pid);
}

bool ProcessExists(pid_t pid) {
  // EPERM: it exists, and is not ours to signal.
  return kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> VethNetwork::RemoveLeftovers() {
  auto stale = [](absl::string_view name) {
    const std::optional<pid_t> owner = OwnerOf(name);
    return owner.has_value() && !ProcessExists(*owner);
  };
  std::vector<std::string> removed;
  auto remove = [&](std::vector<std::string> args, const std::string& name) {
    args.push_back(name);
    if (absl::StatusOr<std::string> done = RunIp(std::move(args)); done.ok()) {
      removed.push_back(name);
    } else {
      CW_LOG(WARNING) << "a dead run's " << name << " stays: " << done.status();
    }
  };
  // The links first: each takes its peer in the dead run's switch with it
  // (a namespace's own links go when it does, but later, in the kernel's
  // own time). `ip -o link show` lines read "5: NAME@if4: <...".
  CW_ASSIGN_OR_RETURN(std::string links, RunIp({"-o", "link", "show"}));
  for (absl::string_view line : absl::StrSplit(links, '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ": ");
    if (fields.size() < 2) continue;
    const absl::string_view name = fields[1].substr(0, fields[1].find('@'));
    if (stale(name)) remove({"link", "del"}, std::string(name));
  }
  // `ip netns list` lines read "NAME" or "NAME (id: 3)".
  CW_ASSIGN_OR_RETURN(std::string namespaces, RunIp({"netns", "list"}));
  for (absl::string_view line : absl::StrSplit(namespaces, '\n')) {
    const absl::string_view name = line.substr(0, line.find(' '));
    if (stale(name)) remove({"netns", "del"}, std::string(name));
  }
  return removed;
}

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
    return absl::FailedPreconditionError(kNoIp);
  }
  // What killed runs left holds addresses and names: gone first.
  if (absl::StatusOr<std::vector<std::string>> removed = RemoveLeftovers();
      !removed.ok()) {
    CW_LOG(WARNING) << "dead runs' namespaces stay: " << removed.status();
  } else if (!removed->empty()) {
    CW_LOG(INFO) << "removed what dead runs left: "
                 << absl::StrJoin(*removed, " ");
  }
  const std::string stem =
      absl::StrCat("cw", getpid(), "n", next_network.fetch_add(1));
  network->switch_ = stem + "sw";
  // The first namespace tells whether namespaces work here at all.
  if (absl::StatusOr<std::string> made =
          RunIpAt(network->ip_, {"netns", "add", network->switch_});
      !made.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "network namespaces do not work here: ", made.status().message()));
  }
  network->made_.push_back(network->switch_);

  // A /24 of 198.18.0.0/15 that no interface here uses.
  CW_ASSIGN_OR_RETURN(std::string used,
                      RunIpAt(network->ip_, {"-o", "-4", "addr", "show"}));
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
        RunIpAt(ip, {"-n", sw, "link", "add", "br0", "type", "bridge"}),
        "bridges"));
    CW_RETURN_IF_ERROR(
        RunIpAt(ip, {"-n", sw, "link", "set", "br0", "up"}).status());
    // Our own end.
    const std::string link = stem + "c";
    CW_RETURN_IF_ERROR(
        supported(RunIpAt(ip, {"link", "add", link, "type", "veth", "peer",
                               "name", "cl", "netns", sw}),
                  "veth pairs"));
    network->client_link_ = link;
    network->client_ip_ = subnet + "1";
    CW_RETURN_IF_ERROR(RunIpAt(ip, {"addr", "add", network->client_ip_ + "/24",
                                    "dev", network->client_link_})
                           .status());
    CW_RETURN_IF_ERROR(
        RunIpAt(ip, {"link", "set", network->client_link_, "up"}).status());
    CW_RETURN_IF_ERROR(
        RunIpAt(ip, {"-n", sw, "link", "set", "cl", "master", "br0", "up"})
            .status());
    for (int h = 0; h < hosts; ++h) {
      const std::string ns = absl::StrCat(stem, "h", h);
      const std::string port = absl::StrCat("h", h);
      CW_RETURN_IF_ERROR(RunIpAt(ip, {"netns", "add", ns}).status());
      network->made_.push_back(ns);
      network->namespaces_.push_back(ns);
      network->ips_.push_back(absl::StrCat(subnet, h + 2));
      CW_RETURN_IF_ERROR(
          RunIpAt(ip, {"-n", ns, "link", "add", "eth0", "type", "veth", "peer",
                       "name", port, "netns", sw})
              .status());
      CW_RETURN_IF_ERROR(
          RunIpAt(ip, {"-n", ns, "addr", "add", network->ips_.back() + "/24",
                       "dev", "eth0"})
              .status());
      CW_RETURN_IF_ERROR(
          RunIpAt(ip, {"-n", ns, "link", "set", "lo", "up"}).status());
      CW_RETURN_IF_ERROR(
          RunIpAt(ip, {"-n", ns, "link", "set", "eth0", "up"}).status());
      CW_RETURN_IF_ERROR(
          RunIpAt(ip, {"-n", sw, "link", "set", port, "master", "br0", "up"})
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
        RunIpAt(ip_, {"link", "del", client_link_});
    if (!removed.ok()) {
      CW_LOG(WARNING) << removed.status();
    }
  }
  for (const std::string& ns : made_) {
    absl::StatusOr<std::string> removed = RunIpAt(ip_, {"netns", "del", ns});
    if (!removed.ok()) {
      CW_LOG(WARNING) << removed.status();
    }
  }
}

std::vector<std::string> VethNetwork::Launcher(int host) const {
  return {ip_, "netns", "exec", namespaces_.at(host)};
}

absl::Status VethNetwork::CutLink(int host) {
  return RunIpAt(ip_,
                 {"-n", namespaces_.at(host), "link", "set", "eth0", "down"})
      .status();
}

absl::StatusOr<std::string> RunIp(std::vector<std::string> args) {
  const std::string ip = FindIp();
  if (ip.empty()) return absl::FailedPreconditionError(kNoIp);
  return RunIpAt(ip, std::move(args));
}

}  // namespace causeway::cli::testing
