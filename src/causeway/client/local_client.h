// A Client for a LocalCluster (embedded mode: the whole runtime in this
// process).
//
//   auto cluster = *cluster::LocalCluster::Create({.islands = 3});
//   std::unique_ptr<client::Client> client = client::ConnectLocal(*cluster);
#ifndef CAUSEWAY_CLIENT_LOCAL_CLIENT_H_
#define CAUSEWAY_CLIENT_LOCAL_CLIENT_H_

#include <memory>

#include "causeway/client/client.h"
#include "causeway/cluster/local_cluster.h"

namespace causeway::client {

// Each session gets its own in-process connection. Once the cluster is
// gone, the client and its sessions fail every call with
// FailedPrecondition (they may outlive it: nothing dangles).
std::unique_ptr<Client> ConnectLocal(cluster::LocalCluster& cluster);

}  // namespace causeway::client

#endif  // CAUSEWAY_CLIENT_LOCAL_CLIENT_H_
