// Causeway's IFRT proxy server: the gRPC service jaxlib's proxy client
// dials (GrpcIfrtService: GetVersion, the IfrtSession stream, the host
// buffer store), in front of a Causeway cluster reached through the C++
// client library. Each IfrtSession stream is one ProxySession, one Causeway
// session; when the stream ends (the JAX process exits or dies) the session
// closes and its devices, arrays and executables are released.
//
// Bounds: a message is at most `max_message_bytes`; host buffers are
// bounded per session (HostBufferStore::Limits) and arrive in chunks; a
// request that breaks a bound fails alone with a message naming the bound.
//
// Thread-safe. Stop() (or the destructor) ends every stream and waits for
// the handlers.
#ifndef CAUSEWAY_PROXY_PROXY_SERVER_H_
#define CAUSEWAY_PROXY_PROXY_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "causeway/client/client.h"
#include "causeway/proxy/compile_service.h"
#include "causeway/proxy/host_buffer_store.h"
#include "grpcpp/grpcpp.h"

namespace causeway::proxy {

struct ProxyServerOptions {
  // HOST:PORT (port 0 picks one), or unix:PATH: a Unix socket that only
  // this user can connect to (made under umask 077: no access for group or
  // others), which is
  // how the proxy keeps other local users out (jaxlib's proxy client
  // authenticates nothing). A stale socket at PATH is replaced; any other
  // file there is refused. Removed again by Stop.
  std::string listen = "127.0.0.1:0";
  int64_t max_message_bytes = int64_t{1} << 30;
  HostBufferStore::Limits host_buffer_limits;
  int executor_threads = 4;
  // Hosts per island left out of jax.devices() (ProxyDevices).
  int spare_hosts_per_island = 0;
};

class ProxyServer {
 public:
  // `client` and `compiler` outlive the server.
  static absl::StatusOr<std::unique_ptr<ProxyServer>> Start(
      client::Client* client, CompileService* compiler,
      ProxyServerOptions options);
  ~ProxyServer();

  // HOST:PORT it listens on (the port it got when asked for 0), or
  // unix:PATH.
  const std::string& address() const { return address_; }
  void Wait();
  void Stop();

 private:
  class Service;
  ProxyServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::string socket_path_;  // With unix:PATH.
};

}  // namespace causeway::proxy

#endif  // CAUSEWAY_PROXY_PROXY_SERVER_H_
