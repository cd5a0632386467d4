#include "causeway/cli/cluster_process.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "causeway/base/status.h"

namespace causeway::cli {

namespace {
constexpr char kReady[] = "head listening on ";
}  // namespace

absl::StatusOr<std::unique_ptr<ClusterProcess>> ClusterProcess::Start(
    const std::string& binary, std::vector<std::string> flags,
    absl::Duration timeout) {
  std::vector<std::string> argv = {binary, "cluster"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  CW_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> process,
                      ChildProcess::Start(std::move(argv)));
  // "pid P: worker host H ready: ..." for each worker, then the address.
  const absl::Time deadline = absl::Now() + timeout;
  std::map<HostId, pid_t> workers;
  while (true) {
    CW_ASSIGN_OR_RETURN(
        std::string line,
        process->ReadLineStartingWith("", deadline - absl::Now()));
    if (line.rfind(kReady, 0) == 0) {
      return std::unique_ptr<ClusterProcess>(
          new ClusterProcess(std::move(process),
                             line.substr(sizeof(kReady) - 1), std::move(workers)));
    }
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    int pid = 0;
    int64_t host = 0;
    if (words.size() > 4 && words[0] == "pid" && words[2] == "worker" &&
        absl::SimpleAtoi(absl::StripSuffix(words[1], ":"), &pid) &&
        absl::SimpleAtoi(words[4], &host)) {
      workers[HostId(host)] = pid;
    }
  }
}

ClusterProcess::~ClusterProcess() { Stop(); }

int ClusterProcess::Stop() {
  if (process_ != nullptr && !process_->reaped()) {
    status_ = process_->Stop(absl::Seconds(10));
  }
  return status_;
}

}  // namespace causeway::cli
