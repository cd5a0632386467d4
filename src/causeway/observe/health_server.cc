#include "causeway/observe/health_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/observe/http_connections.h"
#include "causeway/observe/http_server.h"
#include "httplib.h"

namespace causeway::observe {

// Probes come one at a time, from the kubelet; a stalled connection waits
// without a thread (http_connections.h).
HealthServer::HealthServer() : server_(MakeAdmittingServer(2)) {}

HealthServer::~HealthServer() { Shutdown(); }

void HealthServer::Shutdown() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HealthServer::SetReady(std::string what) {
  absl::MutexLock lock(&mu_);
  ready_ = true;
  text_ = std::move(what);
}

void HealthServer::SetNotReady(std::string why) {
  absl::MutexLock lock(&mu_);
  ready_ = false;
  text_ = std::move(why);
}

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    const std::string& listen, std::string why) {
  absl::StatusOr<std::pair<std::string, int>> split = SplitHostPort(listen);
  if (!split.ok()) return split.status();
  auto [host, port] = *std::move(split);
  std::unique_ptr<HealthServer> server(new HealthServer());
  server->SetNotReady(std::move(why));
  httplib::Server& http = *server->server_;
  http.set_payload_max_length(4 << 10);
  http.set_pre_routing_handler([](const httplib::Request& request,
                                  httplib::Response& response) {
    if (request.method != "GET" && request.method != "HEAD") {
      response.status = 405;
      response.set_content(
          absl::StrCat(request.method, " is not served: use GET\n"),
          "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", "text/plain");
  });
  HealthServer* self = server.get();
  http.Get("/readyz", [self](const httplib::Request&,
                             httplib::Response& response) {
    absl::MutexLock lock(&self->mu_);
    response.status = self->ready_ ? 200 : 503;
    response.set_content(absl::StrCat(self->text_, "\n"), "text/plain");
  });
  http.Get(".*", [](const httplib::Request& request,
                    httplib::Response& response) {
    response.status = 404;
    response.set_content(absl::StrCat("no such endpoint '", request.path,
                                      "': see /healthz, /readyz\n"),
                         "text/plain");
  });
  if (port == 0) {
    port = http.bind_to_any_port(host);
    if (port < 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
    }
  } else if (!http.bind_to_port(host, port)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  server->address_ = host.find(':') == std::string::npos
                         ? absl::StrCat(host, ":", port)
                         : absl::StrCat("[", host, "]:", port);
  WidenListenBacklog(http);
  server->thread_ = std::thread([&http] { http.listen_after_bind(); });
  return server;
}

}  // namespace causeway::observe
