// A connection into a LocalCluster that the cluster can cut. A Session keeps
// its channel, so a Session (or a Client) that outlives its LocalCluster, an
// easy mistake of declaration order, would call into a destroyed head; and a
// cluster destroyed while a session's program loops must stop that program.
// So LocalCluster::Connect hands out ClusterConnections, and the cluster,
// when destroyed, cuts every link: the connection's session is closed (its
// launches are cancelled on the devices, a loop stops at its next
// iteration), calls in progress finish, and every later call fails with
// FailedPrecondition naming why.
//
// Thread-safe.
#ifndef CAUSEWAY_CLUSTER_CLUSTER_CONNECTION_H_
#define CAUSEWAY_CLUSTER_CLUSTER_CONNECTION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "causeway/transport/session_channel.h"

namespace causeway::cluster {

// Holds a channel into the cluster until Cut.
class ConnectionLink {
 public:
  explicit ConnectionLink(std::unique_ptr<transport::SessionChannel> channel)
      : channel_(std::move(channel)) {}

  // Runs `call(channel)` while the link holds (the cluster waits for it
  // before it goes), or returns `on_cut(why)` once it is cut.
  template <typename Call, typename OnCut>
  auto With(Call&& call, OnCut&& on_cut) {
    absl::ReaderMutexLock lock(&mu_);
    if (channel_ == nullptr) return on_cut(cut_);
    return call(*channel_);
  }

  // Closes the connection's session, waits for calls in progress and drops
  // the channel; later calls fail with FailedPrecondition(`why`).
  void Cut(const std::string& why);

 private:
  absl::Mutex mu_;
  std::unique_ptr<transport::SessionChannel> channel_ ABSL_GUARDED_BY(mu_);
  absl::Status cut_ ABSL_GUARDED_BY(mu_);
};

class ClusterConnection final : public transport::SessionChannel {
 public:
  explicit ClusterConnection(std::shared_ptr<ConnectionLink> link)
      : link_(std::move(link)) {}

  Future<SessionId> OpenSession(transport::OpenSessionRequest request) override;
  Future<> CloseSession() override;
  Future<transport::SliceInfo> RequestSlice(
      transport::SliceRequest request) override;
  Future<transport::SliceInfo> GetSlice(SliceHandle slice) override;
  Future<> ReleaseSlice(SliceHandle slice) override;
  Future<transport::CompileInfo> Compile(
      transport::CompileRequest request) override;
  Future<> PutArray(transport::ArraySpec spec, hlo::Literal global) override;
  Future<> PutShards(transport::ArraySpec spec,
                     std::vector<hlo::Literal> shards) override;
  void Execute(transport::ExecuteOp op) override;
  void Copy(transport::CopyOp op) override;
  void Submit(transport::ProgramGraph graph) override;
  Future<> ArrayReady(ArrayHandle array) override;
  Future<hlo::Literal> Fetch(ArrayHandle array) override;
  Future<std::vector<hlo::Literal>> FetchShards(ArrayHandle array) override;
  void Delete(std::vector<ArrayHandle> arrays) override;
  Future<transport::StatusReport> GetStatus() override;
  Future<std::string> GetTrace() override;

 private:
  // Forwards a call that returns a future; an error future once cut.
  template <typename T, typename Call>
  Future<T> Forward(Call&& call) {
    return link_->With(std::forward<Call>(call), [](const absl::Status& why) {
      return MakeErrorFuture<T>(why);
    });
  }
  // Forwards a fire-and-forget call; dropped once cut.
  template <typename Call>
  void Send(Call&& call) {
    link_->With(std::forward<Call>(call), [](const absl::Status&) {});
  }

  const std::shared_ptr<ConnectionLink> link_;
};

}  // namespace causeway::cluster

#endif  // CAUSEWAY_CLUSTER_CLUSTER_CONNECTION_H_
