// The entry point of the C++ client API, after IFRT's concepts
// (reference/ifrt_hlo.md A.1): a Client connects to a cluster and opens
// Sessions; a session asks for virtual Slices, compiles programs into
// Executables, and moves Arrays between host and devices and between
// slices. ProgramTrace records several executions and copies as one graph.
//
//   std::unique_ptr<Client> client = Client::Create(channel_factory);
//   Session session = *client->OpenSession({.name = "example"});
//
// Thread-safe.
#ifndef CAUSEWAY_CLIENT_CLIENT_H_
#define CAUSEWAY_CLIENT_CLIENT_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/client/array.h"
#include "causeway/client/executable.h"
#include "causeway/client/program_trace.h"
#include "causeway/client/session.h"
#include "causeway/client/sharding.h"
#include "causeway/client/slice.h"
#include "causeway/transport/session_channel.h"
#include "causeway/transport/topology.h"

namespace causeway::client {

class Client {
 public:
  // Makes a new connection to the head: one per session.
  using ChannelFactory = std::function<
      absl::StatusOr<std::unique_ptr<transport::SessionChannel>>()>;

  // `topology`, when known, lets the client list devices and islands.
  static std::unique_ptr<Client> Create(
      ChannelFactory factory,
      std::shared_ptr<const transport::Topology> topology = nullptr);

  // Opens a session on a new connection.
  absl::StatusOr<Session> OpenSession(SessionOptions options = {});

  // The cluster's devices and islands (empty / 0 when the topology is not
  // known to this client).
  std::vector<transport::DeviceInfo> devices() const;
  int64_t num_islands() const;
  const std::shared_ptr<const transport::Topology>& topology() const {
    return topology_;
  }

 private:
  Client(ChannelFactory factory,
         std::shared_ptr<const transport::Topology> topology)
      : factory_(std::move(factory)), topology_(std::move(topology)) {}

  const ChannelFactory factory_;
  const std::shared_ptr<const transport::Topology> topology_;
};

}  // namespace causeway::client

#endif  // CAUSEWAY_CLIENT_CLIENT_H_
