#include "causeway/client/client.h"

#include <utility>

#include "causeway/base/status.h"

namespace causeway::client {

std::unique_ptr<Client> Client::Create(
    ChannelFactory factory,
    std::shared_ptr<const transport::Topology> topology) {
  return std::unique_ptr<Client>(
      new Client(std::move(factory), std::move(topology)));
}

absl::StatusOr<Session> Client::OpenSession(SessionOptions options) {
  CW_ASSIGN_OR_RETURN(std::unique_ptr<transport::SessionChannel> channel,
                      factory_());
  return Session::Open(std::move(channel), std::move(options));
}

std::vector<transport::DeviceInfo> Client::devices() const {
  std::vector<transport::DeviceInfo> out;
  if (topology_ == nullptr) return out;
  for (int64_t i = 0; i < topology_->num_devices(); ++i) {
    out.push_back(topology_->device(DeviceId(i)));
  }
  return out;
}

int64_t Client::num_islands() const {
  return topology_ == nullptr ? 0 : topology_->num_islands();
}

}  // namespace causeway::client
