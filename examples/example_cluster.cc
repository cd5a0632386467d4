#include "example_cluster.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/client/local_client.h"

namespace causeway::examples {
namespace {

constexpr absl::Duration kAnswer = absl::Seconds(30);

// "--name X" or "--name=X" at argv[i]: the value, `i` past it.
bool TakeValue(int argc, char** argv, int& i, const std::string& name,
               std::string& value, std::string& error) {
  const std::string arg = argv[i];
  if (arg == name) {
    if (i + 1 >= argc) {
      error = absl::StrCat(name, " needs a value");
      return true;
    }
    value = argv[++i];
    return true;
  }
  if (arg.rfind(name + "=", 0) == 0) {
    value = arg.substr(name.size() + 1);
    return true;
  }
  return false;
}

}  // namespace

bool TakeClusterFlag(int argc, char** argv, int& i,
                     ExampleClusterFlags& flags) {
  return TakeValue(argc, argv, i, "--cluster", flags.cluster, flags.error) ||
         TakeValue(argc, argv, i, "--token-file", flags.connect.token_file,
                   flags.error) ||
         TakeValue(argc, argv, i, "--tls-ca", flags.connect.tls_ca_file,
                   flags.error);
}

absl::StatusOr<ExampleCluster> ExampleCluster::Connect(
    const ExampleClusterFlags& flags, cluster::LocalClusterOptions embedded) {
  if (!flags.error.empty()) return absl::InvalidArgumentError(flags.error);
  ExampleCluster out;
  if (!flags.cluster.empty()) {
    CW_ASSIGN_OR_RETURN(out.client_,
                        client::Connect(flags.cluster, flags.connect));
    out.description_ = absl::StrCat("the cluster at ", flags.cluster);
    return out;
  }
  if (!flags.connect.token_file.empty() || !flags.connect.tls_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--token-file and --tls-ca need --cluster HOST:PORT");
  }
  out.recorder_ = std::make_shared<trace::TraceRecorder>();
  embedded.event_sink = out.recorder_;
  CW_ASSIGN_OR_RETURN(out.local_,
                      cluster::LocalCluster::Create(std::move(embedded)));
  out.client_ = client::ConnectLocal(*out.local_);
  out.description_ = "an embedded cluster";
  return out;
}

absl::StatusOr<transport::StatusReport> ExampleCluster::Status() {
  if (local_ != nullptr) return local_->Status();
  CW_ASSIGN_OR_RETURN(client::Session session,
                      client_->OpenSession({.name = "status"}));
  absl::StatusOr<transport::StatusReport> report =
      session.Status().AwaitFor(kAnswer);
  session.Close().IgnoreError();
  return report;
}

absl::StatusOr<std::string> ExampleCluster::Trace() {
  if (local_ == nullptr) {
    CW_ASSIGN_OR_RETURN(client::Session session,
                        client_->OpenSession({.name = "trace"}));
    absl::StatusOr<std::string> trace = session.Trace().AwaitFor(kAnswer);
    session.Close().IgnoreError();
    return trace;
  }
  return recorder_->ExportChromeTrace();
}

}  // namespace causeway::examples
