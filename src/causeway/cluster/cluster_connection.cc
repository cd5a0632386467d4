#include "causeway/cluster/cluster_connection.h"

#include <utility>

namespace causeway::cluster {

void ConnectionLink::Cut(const std::string& why) {
  std::unique_ptr<transport::SessionChannel> channel;
  {
    absl::MutexLock lock(&mu_);
    if (channel_ == nullptr) return;
    cut_ = absl::FailedPreconditionError(why);
    channel = std::move(channel_);
  }
  // Closing cancels the session's work on the devices. A channel whose
  // session never opened (or already closed) refuses; nothing to cancel.
  channel->CloseSession().Await().IgnoreError();
}

Future<SessionId> ClusterConnection::OpenSession(
    transport::OpenSessionRequest request) {
  return Forward<SessionId>([&](transport::SessionChannel& channel) {
    return channel.OpenSession(std::move(request));
  });
}

Future<> ClusterConnection::CloseSession() {
  return Forward<void>(
      [](transport::SessionChannel& channel) { return channel.CloseSession(); });
}

Future<transport::SliceInfo> ClusterConnection::RequestSlice(
    transport::SliceRequest request) {
  return Forward<transport::SliceInfo>([&](transport::SessionChannel& channel) {
    return channel.RequestSlice(std::move(request));
  });
}

Future<transport::SliceInfo> ClusterConnection::GetSlice(SliceHandle slice) {
  return Forward<transport::SliceInfo>(
      [&](transport::SessionChannel& channel) {
        return channel.GetSlice(slice);
      });
}

Future<> ClusterConnection::ReleaseSlice(SliceHandle slice) {
  return Forward<void>([&](transport::SessionChannel& channel) {
    return channel.ReleaseSlice(slice);
  });
}

Future<transport::CompileInfo> ClusterConnection::Compile(
    transport::CompileRequest request) {
  return Forward<transport::CompileInfo>(
      [&](transport::SessionChannel& channel) {
        return channel.Compile(std::move(request));
      });
}

Future<> ClusterConnection::PutArray(transport::ArraySpec spec,
                                     hlo::Literal global) {
  return Forward<void>([&](transport::SessionChannel& channel) {
    return channel.PutArray(std::move(spec), std::move(global));
  });
}

Future<> ClusterConnection::PutShards(transport::ArraySpec spec,
                                      std::vector<hlo::Literal> shards) {
  return Forward<void>([&](transport::SessionChannel& channel) {
    return channel.PutShards(std::move(spec), std::move(shards));
  });
}

void ClusterConnection::Execute(transport::ExecuteOp op) {
  Send([&](transport::SessionChannel& channel) {
    channel.Execute(std::move(op));
  });
}

void ClusterConnection::Copy(transport::CopyOp op) {
  Send([&](transport::SessionChannel& channel) { channel.Copy(std::move(op)); });
}

void ClusterConnection::Submit(transport::ProgramGraph graph) {
  Send([&](transport::SessionChannel& channel) {
    channel.Submit(std::move(graph));
  });
}

Future<> ClusterConnection::ArrayReady(ArrayHandle array) {
  return Forward<void>([&](transport::SessionChannel& channel) {
    return channel.ArrayReady(array);
  });
}

Future<hlo::Literal> ClusterConnection::Fetch(ArrayHandle array) {
  return Forward<hlo::Literal>(
      [&](transport::SessionChannel& channel) { return channel.Fetch(array); });
}

Future<std::vector<hlo::Literal>> ClusterConnection::FetchShards(
    ArrayHandle array) {
  return Forward<std::vector<hlo::Literal>>(
      [&](transport::SessionChannel& channel) {
        return channel.FetchShards(array);
      });
}

void ClusterConnection::Delete(std::vector<ArrayHandle> arrays) {
  Send([&](transport::SessionChannel& channel) {
    channel.Delete(std::move(arrays));
  });
}

Future<transport::StatusReport> ClusterConnection::GetStatus() {
  return Forward<transport::StatusReport>(
      [](transport::SessionChannel& channel) { return channel.GetStatus(); });
}

Future<std::string> ClusterConnection::GetTrace() {
  return Forward<std::string>(
      [](transport::SessionChannel& channel) { return channel.GetTrace(); });
}

}  // namespace causeway::cluster
