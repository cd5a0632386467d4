#include "causeway/cli/cluster_process.h"

#include <utility>

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
  CW_ASSIGN_OR_RETURN(std::string line,
                      process->ReadLineStartingWith(kReady, timeout));
  return std::unique_ptr<ClusterProcess>(new ClusterProcess(
      std::move(process), line.substr(sizeof(kReady) - 1)));
}

ClusterProcess::~ClusterProcess() { Stop(); }

int ClusterProcess::Stop() {
  if (process_ != nullptr && !process_->reaped()) {
    status_ = process_->Stop(absl::Seconds(10));
  }
  return status_;
}

}  // namespace causeway::cli
