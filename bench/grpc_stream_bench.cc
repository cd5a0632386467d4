// Which gRPC C++ API carries the worker stream (docs/distributed.md,
// "Choosing the gRPC API"): the synchronous API against the callback
// (reactor) API, on this machine, over loopback, with the real protocol's
// messages. distributed.md §4 cites a report (grpc#31907) of callback
// streams 3.5x slower than the others for small ping-pong; this measures it
// here before we build on either.
//
// The head is the server: it writes commands down the stream a worker
// dialled and reads its notices. Two figures per API:
//   ping-pong  the head writes a Ping, the worker answers a Pong, repeated
//              (round-trip latency: heartbeats, replies);
//   one-way    the head writes N small dispatch messages back to back and
//              the worker answers once at the end (what chained dispatch
//              costs the head per message).
// The worker side is the synchronous client in both cases.
//
//   grpc_stream_bench [--rounds=20000] [--repeats=5]
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <algorithm>
#include <deque>
#include <mutex>
#include <condition_variable>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/transport/proto/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace causeway {
namespace {

using wire::HeadToWorker;
using wire::WorkerToHead;

enum class Mode { kPingPong, kOneWay };

// What one stream should do, set before the worker dials.
struct Job {
  Mode mode = Mode::kPingPong;
  int64_t rounds = 0;
};

HeadToWorker DispatchMessage() {
  HeadToWorker m;
  wire::LaunchOp* op = m.mutable_dispatch()->add_launches();
  op->set_device(1);
  op->set_island(0);
  op->set_seq(7);
  op->set_program(123456789);
  op->set_program_name(1);  // Names by number, as the head sends them.
  op->set_session(1);
  op->set_session_name(2);
  op->add_participant_hosts(0);
  wire::LaunchInput* in = op->add_inputs();
  in->mutable_buffer()->set_array(42);
  in->set_array(5);
  in->set_producer(3);
  wire::LaunchOutput* out = op->add_outputs();
  out->mutable_buffer()->set_array(43);
  out->mutable_shape()->set_type(wire::F32);
  return m;
}

// The synchronous server: the handler thread owns the stream.
class SyncService final : public wire::HeadWorkers::Service {
 public:
  explicit SyncService(const Job* job) : job_(job) {}
  grpc::Status Worker(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<HeadToWorker, WorkerToHead>* stream) override {
    WorkerToHead in;
    if (!stream->Read(&in)) return grpc::Status::OK;  // The hello.
    if (job_->mode == Mode::kPingPong) {
      HeadToWorker ping;
      for (int64_t i = 0; i < job_->rounds; ++i) {
        ping.mutable_ping()->set_head_time_us(i);
        if (!stream->Write(ping) || !stream->Read(&in)) break;
      }
    } else {
      HeadToWorker m = DispatchMessage();
      for (int64_t i = 0; i < job_->rounds; ++i) {
        m.mutable_dispatch()->mutable_launches(0)->set_seq(i);
        if (!stream->Write(m)) break;
      }
      stream->Read(&in);
    }
    return grpc::Status::OK;
  }

 private:
  const Job* job_;
};

// The callback server: a reactor per stream with its own write queue.
class CallbackService final : public wire::HeadWorkers::CallbackService {
 public:
  explicit CallbackService(const Job* job) : job_(job) {}
  grpc::ServerBidiReactor<WorkerToHead, HeadToWorker>* Worker(
      grpc::CallbackServerContext*) override {
    return new Reactor(*job_);
  }

 private:
  class Reactor final
      : public grpc::ServerBidiReactor<WorkerToHead, HeadToWorker> {
   public:
    explicit Reactor(Job job) : job_(job), dispatch_(DispatchMessage()) {
      StartRead(&in_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) return Finish(grpc::Status::OK);
      if (job_.mode == Mode::kOneWay) {
        if (sent_ == 0) return WriteNext();
        return Finish(grpc::Status::OK);  // The final answer.
      }
      if (sent_ == job_.rounds) return Finish(grpc::Status::OK);
      WriteNext();
    }
    void OnWriteDone(bool ok) override {
      if (!ok) return Finish(grpc::Status::OK);
      if (job_.mode == Mode::kPingPong) return StartRead(&in_);
      if (sent_ < job_.rounds) return WriteNext();
      StartRead(&in_);
    }
    void OnDone() override { delete this; }

   private:
    void WriteNext() {
      if (job_.mode == Mode::kPingPong) {
        out_.mutable_ping()->set_head_time_us(sent_++);
        StartWrite(&out_);
      } else {
        dispatch_.mutable_dispatch()->mutable_launches(0)->set_seq(sent_++);
        StartWrite(&dispatch_);
      }
    }
    const Job job_;
    WorkerToHead in_;
    HeadToWorker out_;
    HeadToWorker dispatch_;
    int64_t sent_ = 0;
  };
  const Job* job_;
};

// The worker: dials, says hello, answers every ping (ping-pong) or reads
// every dispatch and answers once (one-way). Returns seconds elapsed.
double RunWorker(const std::string& address, const Job& job) {
  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = wire::HeadWorkers::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->Worker(&context);
  WorkerToHead hello;
  hello.mutable_registration()->set_island(0);
  HeadToWorker in;
  absl::Time start = absl::Now();
  stream->Write(hello);
  WorkerToHead pong;
  int64_t read = 0;
  while (read < job.rounds && stream->Read(&in)) {
    ++read;
    if (job.mode == Mode::kPingPong) {
      pong.mutable_pong()->set_seq(in.ping().head_time_us());
      stream->Write(pong);
    }
  }
  if (job.mode == Mode::kOneWay) stream->Write(pong);
  double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  stream->WritesDone();
  grpc::Status status = stream->Finish();
  if (!status.ok() || read != job.rounds) {
    std::fprintf(stderr, "stream failed: %s (read %lld of %lld)\n",
                 status.error_message().c_str(), static_cast<long long>(read),
                 static_cast<long long>(job.rounds));
    std::exit(1);
  }
  return seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  int64_t rounds = 20000;
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--rounds=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(9), &rounds) && rounds > 0) {
      continue;
    }
    if (arg.rfind("--repeats=", 0) == 0 &&
        absl::SimpleAtoi(arg.substr(10), &repeats) && repeats > 0) {
      continue;
    }
    std::fprintf(stderr, "usage: grpc_stream_bench [--rounds=N] [--repeats=N]\n");
    return 2;
  }
  Job job;
  SyncService sync(&job);
  CallbackService callback(&job);
  struct Server {
    const char* name;
    grpc::Service* service;
    std::unique_ptr<grpc::Server> server;
    std::string address;
  };
  std::vector<Server> servers(2);
  servers[0].name = "sync";
  servers[0].service = &sync;
  servers[1].name = "callback";
  servers[1].service = &callback;
  for (Server& s : servers) {
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(s.service);
    s.server = builder.BuildAndStart();
    s.address = absl::StrCat("127.0.0.1:", port);
  }
  std::printf("%-9s %-10s %12s\n", "api", "pattern", "us/message");
  for (Mode mode : {Mode::kPingPong, Mode::kOneWay}) {
    job.mode = mode;
    job.rounds = rounds;
    // Alternate the APIs within every repeat so that both see the same
    // machine load.
    std::vector<std::vector<double>> us(servers.size());
    for (int r = 0; r < repeats; ++r) {
      for (size_t s = 0; s < servers.size(); ++s) {
        double seconds = RunWorker(servers[s].address, job);
        us[s].push_back(seconds * 1e6 / static_cast<double>(rounds));
      }
    }
    for (size_t s = 0; s < servers.size(); ++s) {
      const char* pattern = mode == Mode::kPingPong ? "ping-pong" : "one-way";
      std::printf("%-9s %-10s %12.2f\n", servers[s].name, pattern,
                  Median(us[s]));
      std::printf(
          "{\"api\":\"%s\",\"pattern\":\"%s\",\"us_per_message\":%.3f}\n",
          servers[s].name, pattern, Median(us[s]));
    }
  }
  for (Server& s : servers) s.server->Shutdown();
  return 0;
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) { return causeway::Main(argc, argv); }
