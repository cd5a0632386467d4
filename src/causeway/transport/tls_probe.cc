#include "causeway/transport/tls_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace causeway::transport {
namespace {

// What a gRPC client sends first (HTTP/2's connection preface).
constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kPrefaceBytes = sizeof(kPreface) - 1;

// A TCP connection to the head, or -1 when it cannot be reached in time.
int Dial(const std::string& host, const std::string& port, absl::Time deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd wait{fd, POLLOUT, 0};
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      int error = 0;
      socklen_t length = sizeof error;
      if (left > 0 && poll(&wait, 1, static_cast<int>(left)) == 1 &&
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 &&
          error == 0) {
        rc = 0;
      }
    }
    if (rc != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return -1;
  // Blocking from here, every read and write bounded by the deadline.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const int64_t left_us =
      std::max<int64_t>(1000, absl::ToInt64Microseconds(deadline - absl::Now()));
  timeval tv{static_cast<time_t>(left_us / 1000000),
             static_cast<suseconds_t>(left_us % 1000000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

// OpenSSL's reasons for the last failure, most recent last.
std::string SslErrors() {
  std::string text;
  while (unsigned long error = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(error);
    absl::StrAppend(&text, text.empty() ? "" : "; ",
                    reason != nullptr ? reason : "unknown error");
  }
  return text;
}

absl::Status Refused(const std::string& target, absl::string_view why) {
  return absl::UnauthenticatedError(absl::StrCat(
      "the TLS handshake with the head at ", target, " failed: ", why));
}

// Without TLS: a gRPC head answers the preface with HTTP/2 frames; a TLS
// head answers it with an alert or hangs up.
absl::Status ProbePlain(int fd, const std::string& target) {
  if (::send(fd, kPreface, kPrefaceBytes, MSG_NOSIGNAL) !=
      static_cast<ssize_t>(kPrefaceBytes)) {
    return absl::OkStatus();
  }
  uint8_t first[5] = {0};
  const ssize_t n = ::recv(fd, first, sizeof first, 0);
  if (n < 0) return absl::OkStatus();  // No answer in time: nothing known.
  if (n == 0 || first[0] == 0x15 || first[0] == 0x16) {
    return Refused(target,
                   "the head speaks TLS and this side does not: give it "
                   "--tls-ca (and --tls-cert and --tls-key if the head "
                   "requires client certificates)");
  }
  return absl::OkStatus();
}

absl::Status ProbeTls(int fd, const std::string& target,
                      const std::string& host, const GrpcSecurity& security) {
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(
      SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (context == nullptr) return absl::InternalError("OpenSSL: no TLS context");
  if (!security.tls_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(context.get(),
                                      security.tls_ca_file.c_str(),
                                      nullptr) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot load the TLS CA '", security.tls_ca_file, "': ", SslErrors()));
    }
  } else {
    SSL_CTX_set_default_verify_paths(context.get());
  }
  SSL_CTX_set_verify(context.get(), SSL_VERIFY_PEER, nullptr);
  if (!security.tls_cert_file.empty() && !security.tls_key_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(context.get(),
                                           security.tls_cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(context.get(), security.tls_key_file.c_str(),
                                    SSL_FILETYPE_PEM) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot load the TLS certificate '", security.tls_cert_file,
          "' and key '", security.tls_key_file, "': ", SslErrors()));
    }
  }
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(context.get(), kAlpn, sizeof kAlpn);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(context.get()),
                                                SSL_free);
  SSL_set_fd(ssl.get(), fd);
  // The name the certificate must carry: the target's host, as gRPC checks.
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  in6_addr ip{};
  if (inet_pton(AF_INET, host.c_str(), &ip) == 1 ||
      inet_pton(AF_INET6, host.c_str(), &ip) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl.get(), host.c_str());
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  }
  if (SSL_connect(ssl.get()) != 1) {
    const long verify = SSL_get_verify_result(ssl.get());
    const std::string errors = SslErrors();
    if (verify != X509_V_OK) {
      return Refused(target, absl::StrCat(
                                 "the head's certificate is not trusted: ",
                                 X509_verify_cert_error_string(verify),
                                 " (check --tls-ca)"));
    }
    if (absl::StrContains(errors, "wrong version number") ||
        absl::StrContains(errors, "packet length too long") ||
        absl::StrContains(errors, "record layer failure") ||
        absl::StrContains(errors, "unexpected eof")) {
      return Refused(target,
                     "the head does not speak TLS (it runs without "
                     "--tls-cert): drop --tls-ca, --tls-cert and --tls-key "
                     "here, or give the head its certificate");
    }
    return Refused(target, errors.empty() ? "the connection closed" : errors);
  }
  // TLS 1.3: a head that requires a client certificate says so after the
  // handshake, in its answer to the first bytes.
  if (SSL_write(ssl.get(), kPreface, static_cast<int>(kPrefaceBytes)) <= 0) {
    return Refused(target, SslErrors());
  }
  char first[9];
  const int read = SSL_read(ssl.get(), first, sizeof first);
  if (read > 0) return absl::OkStatus();
  const int error = SSL_get_error(ssl.get(), read);
  const int saved_errno = errno;
  const std::string errors = SslErrors();
  if (error == SSL_ERROR_SYSCALL &&
      (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK)) {
    return absl::OkStatus();  // No answer in time: nothing known.
  }
  // The head ended the connection right after the handshake: with mutual
  // TLS, that is how it refuses a client certificate (an alert, or just
  // a hang-up).
  return Refused(
      target,
      absl::StrCat("the head ended the connection after the handshake: it "
                   "requires a client certificate signed by its CA (mutual "
                   "TLS) and refused ",
                   security.tls_cert_file.empty()
                       ? "this side, which has none (--tls-cert, --tls-key)"
                       : absl::StrCat("'", security.tls_cert_file, "'"),
                   errors.empty() ? "" : absl::StrCat(" (", errors, ")")));
}

}  // namespace

absl::Status ProbeHeadTls(const std::string& target,
                          const GrpcSecurity& security, absl::Duration timeout) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos) return absl::OkStatus();
  std::string host = target.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = target.substr(colon + 1);
  const int fd = Dial(host, port, absl::Now() + timeout);
  if (fd < 0) return absl::OkStatus();  // Not up (yet): the caller waits.
  // OpenSSL writes with write(2): a head that hangs up raises SIGPIPE in
  // this thread, held back here and discarded.
  sigset_t pipe_signal;
  sigset_t previous;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &previous);
  absl::Status status = security.tls() ? ProbeTls(fd, target, host, security)
                                       : ProbePlain(fd, target);
  ::close(fd);
  const timespec now = {0, 0};
  while (sigtimedwait(&pipe_signal, nullptr, &now) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return status;
}

}  // namespace causeway::transport
