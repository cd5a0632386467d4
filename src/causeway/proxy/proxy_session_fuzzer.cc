// libFuzzer target for what a JAX process sends the proxy (fuzz/README.md):
// a session's requests, as jaxlib's client or a hostile peer would send
// them, served by a ProxySession on an embedded cluster.
//
// The input is a sequence of records, each a tag byte, a length (u16,
// little-endian) and that many bytes:
// * an even tag: an IfrtRequest (serialized) for ProxySession::Process;
// * an odd tag: a host buffer, its handle (u64, little-endian) and then its
//   bytes, as the HostBufferStore call stores it.
// A program to compile is HLO text (the compile service here loads the
// request's program bytes as the partitioned module the Python compile
// worker would give, on the devices the options assign), so programs reach
// the head's parser and verifier as well.
//
// Each request is sent once the answers before it have come, or after
// 250 ms (a request may wait for a host buffer a later record stores).
//
// What must hold, for every input:
// * every request is answered exactly once: once Close() has ended the
//   session, every answer has come (a request may wait, for a host buffer
//   that never comes or an array that is never made, but not past Close);
// * nothing crashes, leaks or reads out of bounds (the fuzzer's
//   sanitizers), and nothing allocates past the cluster's memory;
// * the cluster keeps serving: a new session then puts an array on a
//   device and reads it back, byte for byte.
// An input with no request that parses is refused (-1).
// CAUSEWAY_FUZZ_VERBOSE=1 prints each answer (op id, code, message).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/executor.h"
#include "causeway/client/local_client.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/proxy/proxy_session.h"
#include "causeway/proxy/testing/requests.h"

namespace causeway::proxy {
namespace {

namespace pb = xla::ifrt::proxy;

// The program bytes are the module; the options' device count is its
// partition count.
class HloTextCompiler final : public CompileService {
 public:
  Future<std::shared_ptr<const CompiledProgram>> Compile(CompileJob job) override {
    auto program = std::make_shared<CompiledProgram>();
    program->hlo_text = job.program;
    program->name = "fuzzed";
    program->fingerprint = job.program;
    program->num_partitions = job.num_devices;
    return MakeReadyFuture<std::shared_ptr<const CompiledProgram>>(
        std::shared_ptr<const CompiledProgram>(std::move(program)));
  }
};

struct Cluster {
  Cluster() {
    cluster::LocalClusterOptions options;
    options.islands = 2;
    options.hosts_per_island = 1;
    options.devices_per_host = 2;
    options.memory_per_device = int64_t{64} << 20;
    absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> made =
        cluster::LocalCluster::Create(options);
    if (!made.ok()) std::abort();
    local = *std::move(made);
    client = client::ConnectLocal(*local);
  }
  std::unique_ptr<cluster::LocalCluster> local;
  std::unique_ptr<client::Client> client;
  HloTextCompiler compiler;
  ThreadPool executor{"proxy-fuzz", 2};
};

// Answers counted, for the wait after Close.
class Answers {
 public:
  void Expect() {
    absl::MutexLock lock(&mu_);
    ++expected_;
  }
  void Got() {
    absl::MutexLock lock(&mu_);
    ++got_;
  }
  bool AllWithin(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    const auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return got_ == expected_;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&all), timeout) && got_ == expected_;
  }

 private:
  absl::Mutex mu_;
  int64_t expected_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t got_ ABSL_GUARDED_BY(mu_) = 0;
};

uint64_t LittleEndian(const uint8_t* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = value << 8 | p[i];
  return value;
}

std::shared_ptr<ProxySession> Open(Cluster& cluster, uint64_t id) {
  ProxySession::Options options;
  options.session_id = id;
  options.host_buffer_limits.max_buffer_bytes = int64_t{1} << 20;
  options.host_buffer_limits.max_total_bytes = int64_t{4} << 20;
  absl::StatusOr<std::shared_ptr<ProxySession>> session = ProxySession::Create(
      cluster.client.get(), &cluster.compiler, &cluster.executor, options);
  if (!session.ok()) std::abort();
  return *std::move(session);
}

// One request's answer, waited for.
pb::IfrtResponse Call(ProxySession& session, const pb::IfrtRequest& request) {
  auto [promise, future] = MakePromise<pb::IfrtResponse>();
  auto shared = std::make_shared<Promise<pb::IfrtResponse>>(std::move(promise));
  session.Process(request, [shared](pb::IfrtResponse r) { shared->Set(std::move(r)); });
  absl::StatusOr<pb::IfrtResponse> response = future.AwaitFor(absl::Seconds(30));
  if (!response.ok()) std::abort();  // Unanswered: a hang.
  return *std::move(response);
}

// A new session puts f32[4] on device 1 and reads it back.
void CheckTheClusterStillServes(Cluster& cluster, uint64_t id) {
  std::shared_ptr<ProxySession> session = Open(cluster, id);
  const std::string bytes("0123456789abcdef");
  if (!session->host_buffers().Store(1, HostBuffer::Copy(bytes)).ok()) std::abort();
  if (Call(*session, testing::MakeArrayRequest(2, 1, 1, 4))
          .response_metadata().status().code() != 0) {
    std::abort();
  }
  if (Call(*session, testing::CopyToHostBufferRequest(2, 3))
          .response_metadata().status().code() != 0) {
    std::abort();
  }
  absl::StatusOr<HostBuffer> back =
      session->host_buffers().Lookup(3).AwaitFor(absl::Seconds(30));
  if (!back.ok() || back->bytes() != bytes) std::abort();
  session->Close();
}

}  // namespace
}  // namespace causeway::proxy

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace causeway::proxy;
  static Cluster* const cluster = new Cluster();
  static uint64_t next_session = 1;
  // CAUSEWAY_FUZZ_VERBOSE=1: each answer's op id, code and message.
  static const bool verbose = std::getenv("CAUSEWAY_FUZZ_VERBOSE") != nullptr;
  if (size > (size_t{1} << 16)) return -1;
  Answers answers;
  std::shared_ptr<ProxySession> session = Open(*cluster, next_session++);
  int requests = 0;
  size_t at = 0;
  while (size - at >= 3) {
    const uint8_t tag = data[at];
    const size_t length = LittleEndian(data + at + 1, 2);
    at += 3;
    if (length > size - at) break;
    const uint8_t* record = data + at;
    at += length;
    if (tag % 2 == 1) {
      if (length < 8) continue;
      // Refused when past the store's bounds or named twice: that is fine.
      session->host_buffers()
          .Store(LittleEndian(record, 8),
                 HostBuffer::Copy(std::string_view(
                     reinterpret_cast<const char*>(record + 8), length - 8)))
          .IgnoreError();
      continue;
    }
    pb::IfrtRequest request;
    if (!request.ParseFromArray(record, static_cast<int>(length))) continue;
    ++requests;
    answers.Expect();
    session->Process(request, [&answers](pb::IfrtResponse response) {
      if (verbose) {
        std::fprintf(stderr, "op %llu: %d %s\n",
                     static_cast<unsigned long long>(response.response_metadata().op_id()),
                     response.response_metadata().status().code(),
                     response.response_metadata().status().message().c_str());
      }
      answers.Got();
    });
    // As a client that waits for each answer it needs (a compile's
    // handle, say) before its next request; one that waits for a later
    // host buffer is left waiting.
    answers.AllWithin(absl::Milliseconds(250));
  }
  session->Close();
  if (!answers.AllWithin(absl::Seconds(30))) std::abort();  // A hang.
  session.reset();
  CheckTheClusterStillServes(*cluster, next_session++);
  return requests > 0 ? 0 : -1;
}
