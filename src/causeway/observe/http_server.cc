#include "causeway/observe/http_server.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "causeway/base/constant_time.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/observe/http_connections.h"
#include "causeway/observe/status_json.h"
#include "causeway/observe/web_page.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace causeway::observe {
namespace {

constexpr char kJson[] = "application/json";
constexpr char kPrometheus[] = "text/plain; version=0.0.4; charset=utf-8";
// Requests served at once (http_connections.h).
constexpr int kMaxThreads = 32;
constexpr double kMaxTraceSeconds = 3600;

void Error(httplib::Response& response, int status, const std::string& what) {
  response.status = status;
  response.set_content(
      nlohmann::json{{"error", what}}.dump(-1, ' ', false,
                                           nlohmann::json::error_handler_t::replace),
      kJson);
}

// OK when `given` (a request's Authorization header) proves the token
// ("Causeway-Proof PROOF", call_proof.h) or, where `bearer_allowed`, is
// "Bearer TOKEN" (compared in constant time); why not otherwise.
absl::Status Authorize(const std::string& given,
                       const transport::ProofCheck& proofs,
                       bool bearer_allowed, const std::string& bearer) {
  constexpr absl::string_view kProof = "Causeway-Proof ";
  constexpr absl::string_view kBearer = "Bearer ";
  const absl::string_view header = given;
  if (absl::StartsWith(header, kProof)) {
    return proofs.Check(header.substr(kProof.size()), absl::Now());
  }
  if (absl::StartsWith(header, kBearer)) {
    if (!bearer_allowed) {
      return absl::UnauthenticatedError(
          "a bearer token is refused over plain HTTP, where it would cross "
          "in clear text: prove the token instead ('Authorization: "
          "Causeway-Proof v1:MICROS:NONCE:MAC', docs/security.md), or serve "
          "HTTPS (--tls-cert) for scrapers that send a bearer token");
    }
    return ConstantTimeEquals(given, bearer)
               ? absl::OkStatus()
               : absl::UnauthenticatedError("wrong token");
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "this head needs a token: send the header 'Authorization: "
      "Causeway-Proof v1:MICROS:NONCE:MAC' (docs/security.md)",
      bearer_allowed ? " or 'Authorization: Bearer TOKEN'" : ""));
}

}  // namespace

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(
    const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = -1;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "': the port must be 0..65535"));
  }
  return std::make_pair(host, port);
}

HttpServer::HttpServer(HttpServerOptions options,
                       std::unique_ptr<httplib::Server> server)
    : options_(std::move(options)),
      proofs_(options_.token),
      server_(std::move(server)) {}

HttpServer::~HttpServer() { Shutdown(); }

void HttpServer::Shutdown() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    HttpServerOptions options) {
  CW_CHECK(options.observer != nullptr);
  auto [host, port] = SplitHostPort(options.listen).value_or(
      std::make_pair(std::string(), -1));
  if (port < 0) return SplitHostPort(options.listen).status();
  std::unique_ptr<httplib::Server> http_server;
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "HTTPS needs both a certificate and its key (--tls-cert, --tls-key)");
  }
  if (!options.tls_cert_file.empty()) {
    CW_ASSIGN_OR_RETURN(
        http_server,
        MakeAdmittingTlsServer(
            kMaxThreads, TlsFiles{options.tls_cert_file, options.tls_key_file,
                                  options.tls_ca_file}));
  } else if (!options.tls_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "a client CA for the HTTP endpoint (mutual TLS) needs its own "
        "certificate and key too");
  } else {
    http_server = MakeAdmittingServer(kMaxThreads);
  }
  std::unique_ptr<HttpServer> server(
      new HttpServer(std::move(options), std::move(http_server)));
  httplib::Server& http = *server->server_;
  const HttpServerOptions& opts = server->options_;
  http.set_payload_max_length(64 << 10);
  http.set_keep_alive_max_count(1000);

  const transport::ProofCheck* proofs = &server->proofs_;
  // A bearer token crosses the wire as it is: only inside TLS, or where
  // the operator said the network may read it (--insecure).
  const bool bearer_allowed =
      !opts.tls_cert_file.empty() || opts.accept_bearer_in_clear_text;
  const std::string bearer = absl::StrCat("Bearer ", opts.token);
  http.set_pre_routing_handler(
      [proofs, bearer_allowed, bearer](const httplib::Request& request,
                                       httplib::Response& response) {
        if (request.method != "GET" && request.method != "HEAD") {
          Error(response, 405, absl::StrCat(request.method,
                                            " is not served: use GET"));
          return httplib::Server::HandlerResponse::Handled;
        }
        // The page's HTML and the liveness probe say nothing about the
        // cluster: the page asks for the token itself.
        if (!proofs->needed() || request.path == "/" ||
            request.path == "/healthz") {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        const absl::Status authorized =
            Authorize(request.get_header_value("Authorization"), *proofs,
                      bearer_allowed, bearer);
        if (authorized.ok()) return httplib::Server::HandlerResponse::Unhandled;
        if (authorized.code() == absl::StatusCode::kUnauthenticated) {
          response.set_header("WWW-Authenticate",
                              bearer_allowed
                                  ? "Causeway-Proof realm=\"causeway\", "
                                    "Bearer realm=\"causeway\""
                                  : "Causeway-Proof realm=\"causeway\"");
        }
        Error(response,
              authorized.code() == absl::StatusCode::kUnauthenticated ? 401
                                                                      : 429,
              std::string(authorized.message()));
        return httplib::Server::HandlerResponse::Handled;
      });

  ClusterObserver* observer = opts.observer;
  http.Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_header("Cache-Control", "no-store");
    response.set_content(std::string(WebPage()), "text/html; charset=utf-8");
  });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", "text/plain");
  });
  http.Get("/api/status", [observer](const httplib::Request&,
                                     httplib::Response& response) {
    const std::string body = StatusJson(observer->Observe())
                                 .dump(-1, ' ', false,
                                       nlohmann::json::error_handler_t::replace);
    response.set_header("Cache-Control", "no-store");
    response.set_content(body, kJson);
  });
  const HistoryRecorder* history = opts.history;
  http.Get("/api/history", [history](const httplib::Request&,
                                     httplib::Response& response) {
    if (history == nullptr) {
      Error(response, 501, "this head keeps no history");
      return;
    }
    const std::string body = HistoryJson(history->Snapshot())
                                 .dump(-1, ' ', false,
                                       nlohmann::json::error_handler_t::replace);
    response.set_header("Cache-Control", "no-store");
    response.set_content(body, kJson);
  });
  http.Get("/metrics", [observer](const httplib::Request&,
                                  httplib::Response& response) {
    response.set_content(PrometheusText(observer->Observe()), kPrometheus);
  });
  auto trace = opts.trace;
  http.Get("/trace", [trace](const httplib::Request& request,
                             httplib::Response& response) {
    if (trace == nullptr) {
      Error(response, 501, "this head records no trace");
      return;
    }
    double seconds = 10;
    if (request.has_param("seconds") &&
        (!absl::SimpleAtod(request.get_param_value("seconds"), &seconds) ||
         !(seconds > 0 && seconds <= kMaxTraceSeconds))) {
      Error(response, 400,
            absl::StrCat("seconds must be a number in (0, ", kMaxTraceSeconds,
                         "], not '", request.get_param_value("seconds"), "'"));
      return;
    }
    absl::StatusOr<std::string> exported =
        trace(absl::Now() - absl::Seconds(seconds));
    if (!exported.ok()) {
      Error(response, 500, std::string(exported.status().message()));
      return;
    }
    response.set_content(*std::move(exported), kJson);
  });
  http.Get(".*", [](const httplib::Request& request,
                    httplib::Response& response) {
    Error(response, 404,
          absl::StrCat("no such endpoint '", request.path,
                       "': see / , /api/status, /api/history, /metrics, /trace, "
                       "/healthz"));
  });
  http.set_exception_handler([](const httplib::Request&,
                                httplib::Response& response,
                                std::exception_ptr) {
    Error(response, 500, "internal error");
  });

  if (port == 0) {
    port = http.bind_to_any_port(host);
    if (port < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", opts.listen));
    }
  } else if (!http.bind_to_port(host, port)) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", opts.listen));
  }
  server->address_ = host.find(':') == std::string::npos
                         ? absl::StrCat(host, ":", port)
                         : absl::StrCat("[", host, "]:", port);
  WidenListenBacklog(http);
  server->thread_ = std::thread([&http] { http.listen_after_bind(); });
  return server;
}

}  // namespace causeway::observe
