#include "causeway/client/local_client.h"

#include <memory>

namespace causeway::client {

std::unique_ptr<Client> ConnectLocal(cluster::LocalCluster& cluster) {
  return Client::Create(
      cluster.ConnectionFactory(), cluster.topology());
}

}  // namespace causeway::client
