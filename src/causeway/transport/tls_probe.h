// Why a connection to the head would fail before any call, said at once.
//
// gRPC reports a TLS handshake that fails (a certificate the other side
// does not trust, a head that requires a client certificate, one side
// speaking TLS and the other not) only as a channel that never becomes
// ready: a client waited its whole connect timeout and then said "no head
// answered". So before its first call a client or worker makes one TCP
// connection of its own and tries the handshake the way its channel will
// (OpenSSL, with the same CA, certificate and key, checking the head's
// name), and reports what went wrong in words.
#ifndef CAUSEWAY_TRANSPORT_TLS_PROBE_H_
#define CAUSEWAY_TRANSPORT_TLS_PROBE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "causeway/transport/grpc_common.h"

namespace causeway::transport {

// OK when the head at `target` ("HOST:PORT") accepts this side's TLS
// settings, or cannot be reached at all (the caller's own wait and retries
// deal with a head that is not up yet). Unauthenticated naming the cause
// when the TLS handshake fails or the two sides disagree on TLS.
absl::Status ProbeHeadTls(const std::string& target,
                          const GrpcSecurity& security, absl::Duration timeout);

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_TLS_PROBE_H_
