// The data-plane conformance suite: the same behaviours checked against
// every DataPlane implementation (InProcessDataPlane, TcpDataPlane), with
// real Workers as the receivers, then what only a network data plane can
// meet: peers killed mid-transfer (real child processes), hostile peers,
// authentication and incarnations. See docs/data_plane.md.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/transport/tcp_data_plane.h"
#include "causeway/transport/tcp_wire.h"
#include "causeway/transport/testing/interceptor.h"
#include "causeway/worker/object_store.h"
#include "causeway/worker/worker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::worker {
namespace data_plane_conformance_test {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::HasSubstr;
using transport::DataPlane;
using transport::ExtractPiece;
using transport::InProcessDataPlane;
using transport::InProcessLaunchCollectives;
using transport::PieceMessage;
using transport::PieceOrigin;
using transport::ReceiveSpec;
using transport::TcpDataPlane;
using transport::TcpDataPlaneOptions;
using transport::Topology;
using transport::UndeliveredPiece;
using transport::WorkerBatch;
using transport::WorkerListener;
using transport::testing::Interceptor;
namespace wire = transport::tcp_wire;

constexpr absl::Duration kDeadline = absl::Seconds(30);
// A peer-table address for a host that only ever dials in (a test's raw
// connection or child process).
constexpr char kNowhere[] = "127.0.0.1:1";

// Hosts of one device each, joined by one kind of data plane. Every
// harness makes the planes before the workers (a worker needs its plane),
// then attaches the workers and introduces the hosts to one another.
class InProcessHarness {
 public:
  DataPlane* Plane(HostId) { return &plane_; }
  void Attach(HostId host, Worker* worker) { plane_.Register(host, worker); }
  void Introduce(int64_t) {}
  // `host` can no longer be reached; calls into its worker have ended.
  void Disconnect(HostId host) { plane_.Unregister(host); }

 private:
  InProcessDataPlane plane_;
};

class TcpHarness {
 public:
  DataPlane* Plane(HostId host) { return PlaneOf(host); }
  void Attach(HostId host, Worker* worker) { PlaneOf(host)->Attach(host, worker); }
  void Introduce(int64_t hosts) {
    for (int64_t from = 0; from < hosts; ++from) {
      for (int64_t to = 0; to < hosts; ++to) {
        if (from == to) continue;
        planes_[from]->SetPeer(HostId(to), planes_[to]->address(),
                               planes_[to]->incarnation());
      }
    }
  }
  void Disconnect(HostId host) { PlaneOf(host)->Shutdown(); }

  TcpDataPlane* PlaneOf(HostId host) {
    while (static_cast<int64_t>(planes_.size()) <= host.value()) {
      TcpDataPlaneOptions options = options_;
      auto plane = TcpDataPlane::Create(options);
      CW_CHECK(plane.ok()) << plane.status();
      planes_.push_back(*std::move(plane));
    }
    return planes_[host.value()].get();
  }
  // For the next planes made.
  TcpDataPlaneOptions& options() { return options_; }

 private:
  TcpDataPlaneOptions options_;
  std::vector<std::unique_ptr<TcpDataPlane>> planes_;
};

// The TCP data plane with a token: every frame sealed (AES-256-GCM).
class SealedTcpHarness : public TcpHarness {
 public:
  SealedTcpHarness() { options().auth_token = "the cluster's token"; }
};

class NullListener : public WorkerListener {
 public:
  void OnOpDone(const transport::OpDone&) override {}
  void OnPushFailed(const UndeliveredPiece&) override {}
  void OnWorkerDisconnected(HostId, absl::Status) override {}
  void OnTraceEvents(HostId, std::vector<trace::EventRecord>,
                     absl::Duration) override {}
};

template <typename Harness>
class DataPlaneConformanceTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (size_t h = 0; h < workers_.size(); ++h) {
      harness_.Disconnect(HostId(h));
      workers_[h]->Stop();
    }
  }

  // `hosts` hosts, host h with device h (the first thing every test does).
  void MakeHosts(int64_t hosts, int64_t memory_per_device = int64_t{256}
                                                            << 20) {
    auto topology = Topology::Uniform(1, hosts, 1, memory_per_device);
    ASSERT_TRUE(topology.ok()) << topology.status();
    topology_ = std::make_unique<Topology>(*topology);
    for (int64_t h = 0; h < hosts; ++h) {
      WorkerOptions options;
      options.host = HostId(h);
      options.island = IslandId(0);
      options.devices.push_back(topology_->device(DeviceId(h)));
      options.data_plane = harness_.Plane(HostId(h));
      options.collectives = &collectives_;
      options.listener = &listener_;
      auto worker = Worker::Create(options);
      ASSERT_TRUE(worker.ok()) << worker.status();
      workers_.push_back(*std::move(worker));
      harness_.Attach(HostId(h), workers_.back().get());
    }
    harness_.Introduce(hosts);
  }

  Worker& worker(int64_t host) { return *workers_[host]; }
  DataPlane& plane(int64_t host) { return *harness_.Plane(HostId(host)); }

  // Announces on host `host` a receive of `array` (shard 0) from `origins`
  // (transfer ids 1, 2, ... in order unless given).
  void Receive(int64_t host, uint64_t array, const Shape& shape,
               std::vector<PieceOrigin> origins, bool whole) {
    WorkerBatch batch;
    batch.receives.push_back(ReceiveSpec{DeviceId(host),
                                         BufferId{ArrayHandle(array), 0}, shape,
                                         std::move(origins), {}, whole});
    worker(host).Dispatch(std::move(batch));
  }
  static PieceOrigin From(uint64_t transfer, int64_t host) {
    return PieceOrigin{transfer, DeviceId(host), HostId(host), ""};
  }

  static PieceMessage Piece(uint64_t transfer, int64_t from, int64_t to,
                            uint64_t array, std::vector<int64_t> offsets,
                            absl::StatusOr<Literal> data, bool whole = false) {
    PieceMessage piece;
    piece.transfer_id = transfer;
    piece.source_device = DeviceId(from);
    piece.source_host = HostId(from);
    piece.destination_device = DeviceId(to);
    piece.destination = BufferId{ArrayHandle(array), 0};
    piece.offsets = std::move(offsets);
    piece.whole = whole;
    piece.data = std::move(data);
    return piece;
  }

  absl::Status Push(int64_t from, int64_t to, PieceMessage piece) {
    return plane(from).Push(HostId(to), std::move(piece)).AwaitFor(kDeadline);
  }

  absl::StatusOr<Literal> Fetch(int64_t host, uint64_t array) {
    return worker(host)
        .FetchBuffer({DeviceId(host), BufferId{ArrayHandle(array), 0}})
        .AwaitFor(kDeadline);
  }

  // Distinct bytes for every element (0 or 1 for pred).
  static Literal Pattern(PrimitiveType type, std::vector<int64_t> dims,
                         uint32_t seed) {
    Literal value = Literal::Uninitialized(Shape(type, std::move(dims)));
    auto* bytes = static_cast<uint8_t*>(value.mutable_untyped_data());
    std::mt19937 random(seed);
    const int64_t size = value.size_bytes();
    for (int64_t i = 0; i < size; i += 4) {
      const uint32_t word = random();
      for (int64_t b = i; b < std::min(size, i + 4); ++b) {
        const uint8_t byte = static_cast<uint8_t>(word >> (8 * (b - i)));
        bytes[b] = type == PrimitiveType::kPred ? byte % 2 : byte;
      }
    }
    return value;
  }

  Harness harness_;
  std::unique_ptr<Topology> topology_;
  InProcessLaunchCollectives collectives_;
  NullListener listener_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

class HarnessNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, TcpHarness>) return "Tcp";
    if (std::is_same_v<T, SealedTcpHarness>) return "SealedTcp";
    return "InProcess";
  }
};

using Harnesses =
    ::testing::Types<InProcessHarness, TcpHarness, SealedTcpHarness>;
TYPED_TEST_SUITE(DataPlaneConformanceTest, Harnesses, HarnessNames);

TYPED_TEST(DataPlaneConformanceTest, AWholePieceFillsItsAnnouncedBuffer) {
  this->MakeHosts(3);
  Literal value = this->Pattern(PrimitiveType::kF32, {256, 64}, 1);
  this->Receive(1, 10, value.shape(), {this->From(1, 0)}, true);
  ASSERT_TRUE(
      this->Push(0, 1, this->Piece(1, 0, 1, 10, {0, 0}, value, true)).ok());
  auto received = this->Fetch(1, 10);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, value);
}

TYPED_TEST(DataPlaneConformanceTest, BoxPiecesOfEveryElementTypeAssemble) {
  this->MakeHosts(3);
  uint64_t array = 100;
  for (PrimitiveType type :
       {PrimitiveType::kPred, PrimitiveType::kS8, PrimitiveType::kS16,
        PrimitiveType::kS32, PrimitiveType::kS64, PrimitiveType::kU8,
        PrimitiveType::kU16, PrimitiveType::kU32, PrimitiveType::kU64,
        PrimitiveType::kF16, PrimitiveType::kBF16, PrimitiveType::kF32,
        PrimitiveType::kF64}) {
    SCOPED_TRACE(std::string(hlo::PrimitiveTypeName(type)));
    // Four [3,5] quarters of a [6,10] buffer, two from host 0, two from 2.
    Literal global = this->Pattern(type, {6, 10}, array);
    ++array;
    std::vector<PieceOrigin> origins;
    for (uint64_t q = 0; q < 4; ++q) origins.push_back(this->From(q + 1, q % 2 * 2));
    this->Receive(1, array, global.shape(), origins, false);
    for (uint64_t q = 0; q < 4; ++q) {
      const std::vector<int64_t> offsets = {static_cast<int64_t>(q / 2) * 3,
                                            static_cast<int64_t>(q % 2) * 5};
      // Each quarter a box of the whole source, as a worker sends it.
      const int64_t from = q % 2 * 2;
      PieceMessage piece = this->Piece(q + 1, from, 1, array, offsets, global);
      piece.source_offsets = offsets;
      piece.dims = {3, 5};
      ASSERT_TRUE(this->Push(from, 1, std::move(piece)).ok());
    }
    auto received = this->Fetch(1, array);
    ASSERT_TRUE(received.ok()) << received.status();
    EXPECT_EQ(*received, global);
  }
}

TYPED_TEST(DataPlaneConformanceTest, ABoxOfASourceArrivesAsItsOwnValue) {
  this->MakeHosts(2);
  uint64_t array = 200;
  // Narrow runs (80 B) and wide ones (64 KiB) of the sender's source.
  for (const auto& [rows, columns] :
       {std::pair<int64_t, int64_t>{64, 40}, {16, 32768}}) {
    Literal source = this->Pattern(PrimitiveType::kF32, {rows, columns}, 3);
    const int64_t half = columns / 2;
    const Shape shape(PrimitiveType::kF32, {rows, half});
    this->Receive(1, ++array, shape, {this->From(1, 0)}, true);
    PieceMessage piece = this->Piece(1, 0, 1, array, {0, 0}, source, true);
    piece.source_offsets = {0, half};  // The right half.
    piece.dims = {rows, half};
    ASSERT_TRUE(this->Push(0, 1, std::move(piece)).ok());
    auto received = this->Fetch(1, array);
    ASSERT_TRUE(received.ok()) << received.status();
    EXPECT_EQ(*received, *ExtractPiece(source, {0, half}, {rows, half}));
  }
}

TYPED_TEST(DataPlaneConformanceTest, AWideBoxPieceLandsInItsRows) {
  this->MakeHosts(3);
  // Column halves of [16, 32768] f32: rows of 64 KiB inside the buffer.
  Literal global = this->Pattern(PrimitiveType::kF32, {16, 32768}, 7);
  this->Receive(1, 20, global.shape(), {this->From(1, 0), this->From(2, 2)},
                false);
  for (int64_t half = 0; half < 2; ++half) {
    const std::vector<int64_t> offsets = {0, half * 16384};
    auto piece = ExtractPiece(global, offsets, {16, 16384});
    ASSERT_TRUE(piece.ok());
    ASSERT_TRUE(this->Push(half * 2, 1,
                           this->Piece(half + 1, half * 2, 1, 20, offsets,
                                       *std::move(piece)))
                    .ok());
  }
  auto received = this->Fetch(1, 20);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, global);
}

TYPED_TEST(DataPlaneConformanceTest, AnErrorInPlaceOfDataFailsTheBufferWithIt) {
  this->MakeHosts(3);
  const Shape shape(PrimitiveType::kS32, {4});
  this->Receive(1, 30, shape, {this->From(1, 0)}, true);
  ASSERT_TRUE(this->Push(0, 1,
                         this->Piece(1, 0, 1, 30, {0},
                                     absl::InvalidArgumentError(
                                         "program 'f' failed: bad input"),
                                     true))
                  .ok());
  absl::Status failed = this->Fetch(1, 30).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(failed.message(), "program 'f' failed: bad input");
}

TYPED_TEST(DataPlaneConformanceTest, APieceThatComesBeforeItsReceiveWaitsForIt) {
  this->MakeHosts(3);
  Literal value = this->Pattern(PrimitiveType::kU8, {1000}, 3);
  // Taken by the receiver before it knows of the receive...
  ASSERT_TRUE(this->Push(0, 1, this->Piece(1, 0, 1, 40, {0}, value, true)).ok());
  // ... and used once it does.
  this->Receive(1, 40, value.shape(), {this->From(1, 0)}, true);
  auto received = this->Fetch(1, 40);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, value);
}

TYPED_TEST(DataPlaneConformanceTest, PiecesForABufferWaitingForMemoryLandOnGrant) {
  this->MakeHosts(2, 1024);  // Room for one f32[256].
  const Shape f256(PrimitiveType::kF32, {256});
  ASSERT_TRUE(this->worker(1)
                  .PutBuffer({DeviceId(1), BufferId{ArrayHandle(1), 0},
                              Literal(f256)})
                  .Await()
                  .ok());
  this->Receive(1, 50, f256, {this->From(1, 0), this->From(2, 0)}, false);
  Literal global = this->Pattern(PrimitiveType::kF32, {256}, 5);
  for (int64_t half = 0; half < 2; ++half) {
    auto piece = ExtractPiece(global, {half * 128}, {128});
    ASSERT_TRUE(this->Push(0, 1,
                           this->Piece(half + 1, 0, 1, 50, {half * 128},
                                       *std::move(piece)))
                    .ok());
  }
  this->worker(1).ReleaseBuffers({{DeviceId(1), BufferId{ArrayHandle(1), 0}}});
  auto received = this->Fetch(1, 50);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, global);
}

TYPED_TEST(DataPlaneConformanceTest, ManyTransfersInterleaveInEveryDirection) {
  this->MakeHosts(3);
  // Every host sends 24 pieces to each other host, from two threads each.
  constexpr int kPerPair = 24;
  std::vector<Literal> values;
  std::vector<std::thread> senders;
  std::atomic<int> failures{0};
  auto array_of = [](int64_t from, int64_t to, int i) {
    return static_cast<uint64_t>(1000 + (from * 3 + to) * kPerPair + i);
  };
  for (int64_t from = 0; from < 3; ++from) {
    for (int64_t to = 0; to < 3; ++to) {
      if (from == to) continue;
      for (int i = 0; i < kPerPair; ++i) {
        const Shape shape(PrimitiveType::kS16, {1 + 97 * i});
        this->Receive(to, array_of(from, to, i), shape, {this->From(7, from)},
                      true);
      }
    }
  }
  for (int64_t from = 0; from < 3; ++from) {
    for (int thread = 0; thread < 2; ++thread) {
      senders.emplace_back([&, from, thread] {
        for (int64_t to = 0; to < 3; ++to) {
          if (from == to) continue;
          for (int i = thread; i < kPerPair; i += 2) {
            Literal value = this->Pattern(PrimitiveType::kS16, {1 + 97 * i},
                                          array_of(from, to, i));
            if (!this->Push(from, to,
                            this->Piece(7, from, to, array_of(from, to, i),
                                        {0}, value, true))
                     .ok()) {
              ++failures;
            }
          }
        }
      });
    }
  }
  for (std::thread& sender : senders) sender.join();
  EXPECT_EQ(failures.load(), 0);
  for (int64_t from = 0; from < 3; ++from) {
    for (int64_t to = 0; to < 3; ++to) {
      if (from == to) continue;
      for (int i = 0; i < kPerPair; ++i) {
        auto received = this->Fetch(to, array_of(from, to, i));
        ASSERT_TRUE(received.ok()) << received.status();
        EXPECT_EQ(*received, this->Pattern(PrimitiveType::kS16, {1 + 97 * i},
                                           array_of(from, to, i)));
      }
    }
  }
}

TYPED_TEST(DataPlaneConformanceTest, APushToAnUnreachableHostFailsNamingIt) {
  this->MakeHosts(3);
  this->harness_.Disconnect(HostId(2));
  absl::Status pushed = this->Push(
      0, 2, this->Piece(1, 0, 2, 60, {0}, Literal(Shape(PrimitiveType::kF32, {4})),
                        true));
  EXPECT_EQ(pushed.code(), absl::StatusCode::kUnavailable) << pushed;
  EXPECT_THAT(pushed.message(), HasSubstr("host 2"));
  // The others are unaffected.
  this->Receive(1, 61, Shape(PrimitiveType::kF32, {4}), {this->From(1, 0)}, true);
  EXPECT_TRUE(this->Push(0, 1,
                         this->Piece(1, 0, 1, 61, {0},
                                     Literal(Shape(PrimitiveType::kF32, {4})),
                                     true))
                  .ok());
  EXPECT_TRUE(this->Fetch(1, 61).ok());
}

TYPED_TEST(DataPlaneConformanceTest, APieceThatDoesNotFitItsBufferFailsOnlyIt) {
  this->MakeHosts(2);
  this->Receive(1, 120, Shape(PrimitiveType::kF32, {8}), {this->From(1, 0)}, true);
  this->Receive(1, 121, Shape(PrimitiveType::kF32, {2}), {this->From(2, 0)}, true);
  // Transfer 1 brings 4 elements for a buffer of 8.
  ASSERT_TRUE(this->Push(0, 1, this->Piece(1, 0, 1, 120, {0},
                               this->Pattern(PrimitiveType::kF32, {4}, 1), true))
                  .ok());
  absl::Status refused = this->Fetch(1, 120).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("was reserved as f32[8]"));
  // The same connection carries on.
  Literal value = this->Pattern(PrimitiveType::kF32, {2}, 2);
  ASSERT_TRUE(this->Push(0, 1, this->Piece(2, 0, 1, 121, {0}, value, true)).ok());
  auto received = this->Fetch(1, 121);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, value);
}

// ---------------------------------------------------------------------------
// What only the TCP data plane meets.

// A child process, killed (SIGKILL) and reaped when the object goes, even
// if the test failed half way.
class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    int out[2];
    CW_CHECK(pipe(out) == 0);
    pid_ = fork();
    CW_CHECK(pid_ >= 0);
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    out_ = out[0];
  }
  ~Child() {
    Kill();
    close(out_);
  }

  // The next line the child prints, or "" if none comes by the deadline.
  std::string ReadLine(absl::Duration timeout = kDeadline) {
    const absl::Time deadline = absl::Now() + timeout;
    std::string line;
    while (true) {
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left <= 0) return "";
      pollfd wait{out_, POLLIN, 0};
      if (poll(&wait, 1, static_cast<int>(left)) <= 0) continue;
      char c;
      if (read(out_, &c, 1) != 1) return "";
      if (c == '\n') return line;
      line.push_back(c);
    }
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

std::string PeerBinary() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CW_CHECK(n > 0);
  self[n] = '\0';
  return (std::filesystem::path(self).parent_path() / "data_plane_peer")
      .string();
}

// A raw TCP connection to a data plane, for speaking nonsense to it.
class RawConnection {
 public:
  explicit RawConnection(const std::string& address)
      : fd_(transport::testing::DialTcp(address)) {}
  ~RawConnection() { close(fd_); }


  void Write(const std::vector<uint8_t>& bytes) {
    CW_CHECK(write(fd_, bytes.data(), bytes.size()) ==
             static_cast<ssize_t>(bytes.size()));
  }
  // Reads `n` bytes (false if the connection ends or the deadline passes).
  bool Read(size_t n, std::vector<uint8_t>* bytes) {
    bytes->resize(n);
    size_t got = 0;
    const absl::Time deadline = absl::Now() + kDeadline;
    while (got < n) {
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      pollfd wait{fd_, POLLIN, 0};
      if (left <= 0 || poll(&wait, 1, static_cast<int>(left)) <= 0) return false;
      const ssize_t r = read(fd_, bytes->data() + got, n - got);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  // True once the peer closed the connection (within the deadline).
  bool AwaitClosed() {
    const absl::Time deadline = absl::Now() + kDeadline;
    char scratch[4096];
    while (true) {
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      pollfd wait{fd_, POLLIN, 0};
      if (left <= 0 || poll(&wait, 1, static_cast<int>(left)) <= 0) return false;
      const ssize_t r = read(fd_, scratch, sizeof scratch);
      if (r <= 0) return true;
    }
  }
  // Handshakes as host `host`, proving `token`; the reply's code.
  absl::StatusCode Handshake(HostId host, const std::string& token = "") {
    wire::Hello hello;
    hello.sender = host;
    hello.sender_incarnation = 5;
    hello.sealed = !token.empty();
    return wire::DialHandshake(fd_, hello, token, kDeadline).code();
  }
  // An intruder's handshake: proves `token` whatever the listener proved,
  // and returns the reply's code (Unknown if the connection ended first).
  absl::StatusCode Intrude(HostId host, const std::string& token) {
    wire::Hello hello;
    hello.sender = host;
    hello.sender_incarnation = 5;
    hello.sealed = true;
    hello.nonce = wire::RandomNonce();
    const std::vector<uint8_t> hello_bytes = wire::EncodeHello(hello);
    Write(hello_bytes);
    std::vector<uint8_t> challenge;
    if (!Read(wire::kChallengeBytes, &challenge)) return absl::StatusCode::kUnknown;
    size_t message_bytes = 0;
    auto decoded = wire::DecodeChallenge(challenge, &message_bytes);
    if (!decoded.ok()) return absl::StatusCode::kUnknown;
    const wire::Proof proof =
        wire::DiallerProof(token, hello_bytes, decoded->nonce);
    Write(std::vector<uint8_t>(proof.begin(), proof.end()));
    std::vector<uint8_t> reply;
    if (!Read(wire::kReplyBytes, &reply)) return absl::StatusCode::kUnknown;
    auto code = wire::DecodeReply(reply, &message_bytes);
    return code.ok() ? *code : absl::StatusCode::kUnknown;
  }

 private:
  int fd_ = -1;
};

using TcpDataPlaneTest = DataPlaneConformanceTest<TcpHarness>;

TEST_F(TcpDataPlaneTest, AnnouncedPiecesAreReadStraightIntoTheirBuffers) {
  MakeHosts(3);
  Literal value = Pattern(PrimitiveType::kF32, {1024}, 9);
  Receive(1, 70, value.shape(), {From(1, 0)}, true);
  ASSERT_TRUE(Push(0, 1, Piece(1, 0, 1, 70, {0}, value, true)).ok());
  ASSERT_TRUE(Push(0, 1, Piece(1, 0, 1, 71, {0}, value, true)).ok());  // Early.
  const transport::TcpDataPlaneStats stats = harness_.PlaneOf(HostId(1))->Stats();
  EXPECT_EQ(stats.pieces_received, 2);
  EXPECT_EQ(stats.pieces_in_place, 1);
  EXPECT_EQ(stats.bytes_received, 2 * 4096);
  EXPECT_EQ(harness_.PlaneOf(HostId(0))->Stats().pieces_sent, 2);
}

TEST_F(TcpDataPlaneTest, PiecesThatComeBeforeTheWorkerAttachesWaitForIt) {
  TcpDataPlane& plane = *harness_.PlaneOf(HostId(0));  // No worker yet.
  plane.SetPeer(HostId(9), kNowhere, 0);
  RawConnection early(plane.address());
  ASSERT_EQ(early.Handshake(HostId(9)), absl::StatusCode::kOk);
  Literal value = Pattern(PrimitiveType::kF32, {2}, 8);
  wire::FrameHeader header;
  header.kind = wire::FrameKind::kPiece;
  header.whole = true;
  header.type = PrimitiveType::kF32;
  header.transfer_id = 1;
  header.source_device = DeviceId(9);
  header.destination_device = DeviceId(0);
  header.destination = BufferId{ArrayHandle(300), 0};
  header.dims = {2};
  header.offsets = {0};
  header.payload_bytes = 8;
  std::vector<uint8_t> frame = wire::EncodeFrameHeader(header);
  const auto* bytes = static_cast<const uint8_t*>(value.untyped_data());
  frame.insert(frame.end(), bytes, bytes + 8);
  early.Write(frame);
  MakeHosts(1);  // Worker 0 attaches to the plane now.
  Receive(0, 300, value.shape(), {From(1, 9)}, true);
  auto received = Fetch(0, 300);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, value);
  // And the sender hears that it arrived.
  std::vector<uint8_t> ack;
  ASSERT_TRUE(early.Read(wire::kLengthBytes + wire::kFrameFixedBytes, &ack));
  auto decoded = wire::DecodeFrameHeader(
      absl::MakeConstSpan(ack).subspan(wire::kLengthBytes), 1 << 20);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->kind, wire::FrameKind::kAck);
  EXPECT_EQ(decoded->transfer_id, 1u);
}

TEST_F(TcpDataPlaneTest, ASenderKilledMidTransferFailsWhatWaitsForIt) {
  MakeHosts(3);
  const int64_t bytes = int64_t{64} << 20;
  const Shape shape(PrimitiveType::kF32, {bytes / 4});
  // Host 5 (the child) is to send array 80; array 81 waits for it too.
  Receive(1, 80, shape, {From(3, 5)}, true);
  Receive(1, 81, Shape(PrimitiveType::kF32, {2}), {From(4, 5)}, true);
  TcpDataPlane& receiver = *harness_.PlaneOf(HostId(1));
  receiver.SetPeer(HostId(5), kNowhere, 0);
  Child sender({PeerBinary(), "send", receiver.address(),
                std::to_string(receiver.incarnation()), "5", "3", "1", "80",
                std::to_string(bytes)});
  ASSERT_THAT(sender.ReadLine(), HasSubstr("sent 33554432 of 67108864"));
  sender.Kill();
  absl::Status lost = Fetch(1, 80).status();
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss) << lost;
  EXPECT_THAT(lost.message(), HasSubstr("connection from host 5"));
  EXPECT_THAT(lost.message(), HasSubstr("of 67108864 bytes of transfer 3"));
  absl::Status waiting = Fetch(1, 81).status();
  EXPECT_EQ(waiting.code(), absl::StatusCode::kDataLoss) << waiting;
  EXPECT_THAT(waiting.message(), HasSubstr("was to receive data from"));
  // Everyone else goes on.
  Receive(1, 82, Shape(PrimitiveType::kF32, {2}), {From(1, 0)}, true);
  ASSERT_TRUE(Push(0, 1, Piece(1, 0, 1, 82, {0},
                               Pattern(PrimitiveType::kF32, {2}, 1), true))
                  .ok());
  EXPECT_TRUE(Fetch(1, 82).ok());
}

TEST_F(TcpDataPlaneTest, AReceiverKilledMidTransferFailsThePush) {
  MakeHosts(3);
  Child receiver({PeerBinary(), "receive"});
  const std::string line = receiver.ReadLine();
  ASSERT_THAT(line, HasSubstr("listening "));
  harness_.PlaneOf(HostId(0))->SetPeer(HostId(6), line.substr(10), 0);
  Future<> pushed = plane(0).Push(
      HostId(6), Piece(9, 0, 6, 90, {0},
                       Pattern(PrimitiveType::kU8, {int64_t{16} << 20}, 2),
                       true));
  ASSERT_THAT(receiver.ReadLine(), HasSubstr("received transfer 9"));
  receiver.Kill();
  absl::Status status = pushed.AwaitFor(kDeadline);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("host 6"));
  EXPECT_THAT(status.message(), HasSubstr("before it acknowledged"));
}

TEST_F(TcpDataPlaneTest, AReceiverKilledWhileABoxIsGatheredFailsThePush) {
  MakeHosts(1);
  Child receiver({PeerBinary(), "receive"});
  const std::string line = receiver.ReadLine();
  ASSERT_THAT(line, HasSubstr("listening "));
  harness_.PlaneOf(HostId(0))->SetPeer(HostId(6), line.substr(10), 0);
  // The left half of [256, 32768] f32: 256 runs of 64 KiB, sent with
  // sendmsg straight from the source (no SIGPIPE when the peer is gone).
  PieceMessage piece =
      Piece(9, 0, 6, 90, {0, 0},
            Pattern(PrimitiveType::kF32, {256, 32768}, 2), true);
  piece.source_offsets = {0, 0};
  piece.dims = {256, 16384};
  Future<> pushed = plane(0).Push(HostId(6), std::move(piece));
  ASSERT_THAT(receiver.ReadLine(), HasSubstr("received transfer 9"));
  receiver.Kill();
  absl::Status status = pushed.AwaitFor(kDeadline);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("host 6"));
}

TEST_F(TcpDataPlaneTest, GarbageClosesTheConnectionAndTheWorkerGoesOn) {
  MakeHosts(3);
  TcpDataPlane& receiver = *harness_.PlaneOf(HostId(1));
  RawConnection garbage(receiver.address());
  std::mt19937 random(11);
  std::vector<uint8_t> bytes(4096);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(random());
  garbage.Write(bytes);
  EXPECT_TRUE(garbage.AwaitClosed());
  EXPECT_EQ(receiver.Stats().protocol_errors, 1);
  Receive(1, 100, Shape(PrimitiveType::kF32, {2}), {From(1, 0)}, true);
  ASSERT_TRUE(Push(0, 1, Piece(1, 0, 1, 100, {0},
                               Pattern(PrimitiveType::kF32, {2}, 4), true))
                  .ok());
  EXPECT_TRUE(Fetch(1, 100).ok());
}

TEST_F(TcpDataPlaneTest, AHugeClaimedPieceIsRefusedBeforeAnythingIsAllocated) {
  MakeHosts(3);
  TcpDataPlane& receiver = *harness_.PlaneOf(HostId(1));
  receiver.SetPeer(HostId(9), kNowhere, 0);
  RawConnection hostile(receiver.address());
  ASSERT_EQ(hostile.Handshake(HostId(9)), absl::StatusCode::kOk);
  // 2^40 f32 elements (4 TiB): allocating them would end the process.
  wire::FrameHeader header;
  header.kind = wire::FrameKind::kPiece;
  header.type = PrimitiveType::kF32;
  header.transfer_id = 1;
  header.source_device = DeviceId(0);
  header.destination_device = DeviceId(1);
  header.destination = BufferId{ArrayHandle(110), 0};
  header.dims = {int64_t{1} << 40};
  header.offsets = {0};
  header.payload_bytes = uint64_t{4} << 40;
  hostile.Write(wire::EncodeFrameHeader(header));
  EXPECT_TRUE(hostile.AwaitClosed());
  EXPECT_EQ(receiver.Stats().protocol_errors, 1);
  EXPECT_EQ(receiver.Stats().pieces_received, 0);
  // A length prefix far over the bound is refused the same way.
  RawConnection huge(receiver.address());
  ASSERT_EQ(huge.Handshake(HostId(9)), absl::StatusCode::kOk);
  huge.Write({0xff, 0xff, 0xff, 0x7f});
  EXPECT_TRUE(huge.AwaitClosed());
  EXPECT_EQ(receiver.Stats().protocol_errors, 2);
}

TEST_F(TcpDataPlaneTest, AWrongAuthTokenIsRefused) {
  harness_.options().auth_token = "the right token";
  MakeHosts(2, int64_t{1} << 20);
  RawConnection intruder(harness_.PlaneOf(HostId(1))->address());
  EXPECT_EQ(intruder.Intrude(HostId(0), "a guess"),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(intruder.AwaitClosed());
  RawConnection anonymous(harness_.PlaneOf(HostId(1))->address());
  EXPECT_EQ(anonymous.Intrude(HostId(0), ""),
            absl::StatusCode::kUnauthenticated);
  // A dialler checks the listener's proof first: one with the wrong token
  // learns the worker is not its cluster's before it proves anything.
  RawConnection careful(harness_.PlaneOf(HostId(1))->address());
  EXPECT_EQ(careful.Handshake(HostId(0), "a guess"),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(harness_.PlaneOf(HostId(1))->Stats().connections_refused, 2);
  // Workers that share the token still talk.
  Receive(1, 130, Shape(PrimitiveType::kF32, {2}), {From(1, 0)}, true);
  EXPECT_TRUE(Push(0, 1, Piece(1, 0, 1, 130, {0},
                               Pattern(PrimitiveType::kF32, {2}, 3), true))
                  .ok());
  EXPECT_TRUE(Fetch(1, 130).ok());
}

// An attacker who recorded a whole handshake of a worker that holds the
// token replays it on a new connection: the listener's nonce is new, the
// recorded proof does not match it, and the connection is refused.
TEST_F(TcpDataPlaneTest, AReplayedHandshakeIsRefused) {
  harness_.options().auth_token = "the right token";
  MakeHosts(2, int64_t{1} << 20);
  TcpDataPlane& receiver = *harness_.PlaneOf(HostId(1));
  // The recorded handshake: the hello and the proof a token holder sent.
  RawConnection recorded(receiver.address());
  wire::Hello hello;
  hello.sender = HostId(0);
  hello.sender_incarnation = harness_.PlaneOf(HostId(0))->incarnation();
  hello.receiver_incarnation = receiver.incarnation();
  hello.sealed = true;
  hello.nonce = wire::RandomNonce();
  const std::vector<uint8_t> hello_bytes = wire::EncodeHello(hello);
  recorded.Write(hello_bytes);
  std::vector<uint8_t> challenge;
  ASSERT_TRUE(recorded.Read(wire::kChallengeBytes, &challenge));
  size_t message_bytes = 0;
  auto decoded = wire::DecodeChallenge(challenge, &message_bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const wire::Proof proof =
      wire::DiallerProof("the right token", hello_bytes, decoded->nonce);
  recorded.Write(std::vector<uint8_t>(proof.begin(), proof.end()));
  std::vector<uint8_t> reply;
  ASSERT_TRUE(recorded.Read(wire::kReplyBytes, &reply));
  ASSERT_EQ(*wire::DecodeReply(reply, &message_bytes), absl::StatusCode::kOk);
  // The replay, byte for byte.
  RawConnection replay(receiver.address());
  replay.Write(hello_bytes);
  ASSERT_TRUE(replay.Read(wire::kChallengeBytes, &challenge));
  decoded = wire::DecodeChallenge(challenge, &message_bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_NE(decoded->nonce, wire::Nonce{});
  replay.Write(std::vector<uint8_t>(proof.begin(), proof.end()));
  ASSERT_TRUE(replay.Read(wire::kReplyBytes, &reply));
  EXPECT_EQ(*wire::DecodeReply(reply, &message_bytes),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(replay.AwaitClosed());
  EXPECT_EQ(receiver.Stats().connections_refused, 1);
}

// The dialler checks the listener too: something listening at a peer's
// address that cannot prove the token is sent no proof and no piece.
TEST_F(TcpDataPlaneTest, AListenerThatCannotProveTheTokenIsSentNothing) {
  harness_.options().auth_token = "the right token";
  MakeHosts(1, int64_t{1} << 20);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&local), sizeof local), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t size = sizeof local;
  getsockname(listener, reinterpret_cast<sockaddr*>(&local), &size);
  harness_.PlaneOf(HostId(0))->SetPeer(
      HostId(6), absl::StrCat("127.0.0.1:", ntohs(local.sin_port)), 0);
  Future<> pushed = plane(0).Push(
      HostId(6), Piece(1, 0, 6, 95, {0}, Pattern(PrimitiveType::kU8, {64}, 1),
                       true));
  const int fd = accept(listener, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  absl::StatusOr<wire::Hello> answered =
      wire::AnswerHandshake(fd, "a guess", kDeadline);
  // The dialler hung up instead of proving anything to it.
  EXPECT_EQ(answered.status().code(), absl::StatusCode::kUnavailable)
      << answered.status();
  absl::Status status = pushed.AwaitFor(kDeadline);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("could not prove"));
  close(fd);
  close(listener);
}

// A proven peer that is not in the peer table waits for the head's update
// a while (it may come just after the peer's first piece), and is refused
// if it never comes.
TEST_F(TcpDataPlaneTest, AHostNotInThePeerTableIsAdmittedOnlyOnceItIs) {
  harness_.options().handshake_timeout = absl::Milliseconds(300);
  MakeHosts(1);
  TcpDataPlane& receiver = *harness_.PlaneOf(HostId(0));
  RawConnection stranger(receiver.address());
  EXPECT_EQ(stranger.Handshake(HostId(9)), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(stranger.AwaitClosed());
  EXPECT_EQ(receiver.Stats().connections_refused, 1);
  EXPECT_EQ(receiver.Stats().connections_accepted, 0);
  // One that joins while its handshake waits is admitted (a plane that
  // waits long enough for the test to add it).
  harness_.options().handshake_timeout = kDeadline;
  TcpDataPlane& patient = *harness_.PlaneOf(HostId(1));
  RawConnection joining(patient.address());
  wire::Hello hello;
  hello.sender = HostId(8);
  hello.sender_incarnation = 5;
  hello.nonce = wire::RandomNonce();
  const std::vector<uint8_t> hello_bytes = wire::EncodeHello(hello);
  joining.Write(hello_bytes);
  std::vector<uint8_t> challenge;
  ASSERT_TRUE(joining.Read(wire::kChallengeBytes, &challenge));
  size_t message_bytes = 0;
  auto decoded = wire::DecodeChallenge(challenge, &message_bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const wire::Proof proof = wire::DiallerProof("", hello_bytes, decoded->nonce);
  joining.Write(std::vector<uint8_t>(proof.begin(), proof.end()));
  patient.SetPeer(HostId(8), kNowhere, 5);
  std::vector<uint8_t> reply;
  ASSERT_TRUE(joining.Read(wire::kReplyBytes, &reply));
  EXPECT_EQ(*wire::DecodeReply(reply, &message_bytes), absl::StatusCode::kOk);
  EXPECT_EQ(patient.Stats().connections_accepted, 1);
}

// A known peer sends a valid handshake, then garbage: the connection
// closes, nothing lands anywhere, and everyone else goes on.
TEST_F(TcpDataPlaneTest, GarbageAfterAValidHandshakeClosesOnlyThatConnection) {
  MakeHosts(3);
  TcpDataPlane& receiver = *harness_.PlaneOf(HostId(1));
  const Shape shape(PrimitiveType::kF32, {2});
  Receive(1, 160, shape, {From(1, 0)}, true);
  RawConnection hostile(receiver.address());
  // Posing as a member at another incarnation is refused.
  EXPECT_EQ(hostile.Handshake(HostId(2)), absl::StatusCode::kFailedPrecondition);
  receiver.SetPeer(HostId(9), kNowhere, 0);
  RawConnection garbage(receiver.address());
  ASSERT_EQ(garbage.Handshake(HostId(9)), absl::StatusCode::kOk);
  std::mt19937 random(5);
  std::vector<uint8_t> bytes(4096);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(random());
  garbage.Write(bytes);
  EXPECT_TRUE(garbage.AwaitClosed());
  EXPECT_EQ(receiver.Stats().protocol_errors, 1);
  EXPECT_EQ(receiver.Stats().pieces_received, 0);
  const Literal value = Pattern(PrimitiveType::kF32, {2}, 6);
  ASSERT_TRUE(Push(0, 1, Piece(1, 0, 1, 160, {0}, value, true)).ok());
  auto received = Fetch(1, 160);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, value);
}

// A header claiming a 2 GiB piece for a buffer nobody announced: over the
// bound on early pieces, it is refused without allocating (the sender
// hears why at once, naming the limit), and the worker holds nothing.
TEST_F(TcpDataPlaneTest, AnEarlyPieceOverTheBoundIsRefusedWithoutAllocating) {
  harness_.options().max_early_piece_bytes = int64_t{1} << 20;
  harness_.options().early_piece_wait = absl::Milliseconds(50);
  MakeHosts(2);
  TcpDataPlane& receiver = *harness_.PlaneOf(HostId(1));
  receiver.SetPeer(HostId(9), kNowhere, 0);
  RawConnection hostile(receiver.address());
  ASSERT_EQ(hostile.Handshake(HostId(9)), absl::StatusCode::kOk);
  wire::FrameHeader header;
  header.kind = wire::FrameKind::kPiece;
  header.whole = true;
  header.type = PrimitiveType::kU8;
  header.transfer_id = 1;
  header.source_device = DeviceId(0);
  header.destination_device = DeviceId(1);
  header.destination = BufferId{ArrayHandle(170), 0};
  header.dims = {int64_t{2} << 30};
  header.offsets = {0};
  header.payload_bytes = uint64_t{2} << 30;
  hostile.Write(wire::EncodeFrameHeader(header));
  std::vector<uint8_t> ack;
  ASSERT_TRUE(hostile.Read(wire::kLengthBytes + wire::kFrameFixedBytes, &ack));
  auto decoded = wire::DecodeFrameHeader(
      absl::MakeConstSpan(ack).subspan(wire::kLengthBytes), 1);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->kind, wire::FrameKind::kAck);
  EXPECT_EQ(decoded->code, absl::StatusCode::kResourceExhausted);
  std::vector<uint8_t> text;
  ASSERT_TRUE(hostile.Read(decoded->payload_bytes, &text));
  EXPECT_THAT(std::string(text.begin(), text.end()),
              HasSubstr("max-early-piece-bytes"));
  const transport::TcpDataPlaneStats stats = receiver.Stats();
  EXPECT_EQ(stats.pieces_refused, 1);
  EXPECT_EQ(stats.early_piece_bytes, 0);
  EXPECT_EQ(stats.pieces_received, 0);
  // Early pieces within the bound are still held for their receive, and
  // their hold is given back once the worker takes them.
  const Literal value = Pattern(PrimitiveType::kF32, {2}, 7);
  ASSERT_TRUE(Push(0, 1, Piece(1, 0, 1, 171, {0}, value, true)).ok());
  EXPECT_GT(receiver.Stats().early_piece_bytes, 0);
  Receive(1, 171, value.shape(), {From(1, 0)}, true);
  auto received = Fetch(1, 171);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, value);
  EXPECT_EQ(receiver.Stats().early_piece_bytes, 0);
}

// An early piece over the bound whose receive is announced while it waits
// is read straight into its buffer: a slow announcement costs a wait, not
// the transfer.
TEST_F(TcpDataPlaneTest, AnEarlyPieceOverTheBoundLandsOnceItsReceiveComes) {
  harness_.options().max_early_piece_bytes = 1024;
  harness_.options().early_piece_wait = kDeadline;
  MakeHosts(2);
  const Literal value = Pattern(PrimitiveType::kF32, {4096}, 8);
  Future<> pushed = plane(0).Push(HostId(1), Piece(1, 0, 1, 180, {0}, value, true));
  // It waits, unread, for room or for its receive.
  TcpDataPlane& receiver = *harness_.PlaneOf(HostId(1));
  const absl::Time deadline = absl::Now() + kDeadline;
  while (receiver.Stats().early_pieces_waiting == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(receiver.Stats().early_pieces_waiting, 1);
  Receive(1, 180, value.shape(), {From(1, 0)}, true);
  ASSERT_TRUE(pushed.AwaitFor(kDeadline).ok());
  auto received = Fetch(1, 180);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, value);
  EXPECT_EQ(receiver.Stats().pieces_in_place, 1);
  EXPECT_EQ(receiver.Stats().early_pieces_waiting, 0);
}

// A flood of connections that never finish their handshake costs no more
// than max_pending_handshakes of them: the oldest are dropped, and a real
// peer that comes after the flood is served.
TEST_F(TcpDataPlaneTest, AFloodOfIdleConnectionsNeitherCrashesNorStallsAWorker) {
  harness_.options().max_pending_handshakes = 64;
  MakeHosts(2);
  TcpDataPlane& receiver = *harness_.PlaneOf(HostId(1));
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 500; ++i) {
    flood.push_back(std::make_unique<RawConnection>(receiver.address()));
  }
  const Literal value = Pattern(PrimitiveType::kF32, {2}, 9);
  Receive(1, 190, value.shape(), {From(1, 0)}, true);
  ASSERT_TRUE(Push(0, 1, Piece(1, 0, 1, 190, {0}, value, true)).ok());
  auto received = Fetch(1, 190);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, value);
  // Every flooder beyond the bound was dropped to make room.
  EXPECT_GE(receiver.Stats().protocol_errors, 500 - 64);
  EXPECT_TRUE(flood.front()->AwaitClosed());
}

TEST_F(TcpDataPlaneTest, AStaleIncarnationIsNeverReached) {
  MakeHosts(3);
  TcpDataPlane& sender = *harness_.PlaneOf(HostId(0));
  TcpDataPlane& receiver = *harness_.PlaneOf(HostId(1));
  // The peer table names an older incarnation at the same address.
  sender.SetPeer(HostId(1), receiver.address(), receiver.incarnation() + 1);
  absl::Status pushed =
      Push(0, 1, Piece(1, 0, 1, 140, {0}, Pattern(PrimitiveType::kF32, {2}, 1),
                       true));
  EXPECT_EQ(pushed.code(), absl::StatusCode::kUnavailable) << pushed;
  EXPECT_THAT(pushed.message(), HasSubstr("refused: this worker is incarnation"));
}

TEST_F(TcpDataPlaneTest, RemovingAPeerFailsWhatWaitsForItInBothDirections) {
  MakeHosts(3);
  // Host 1 has a connection to host 0 (it sent it something), and host 0
  // waits for more from it.
  ASSERT_TRUE(Push(1, 0, Piece(2, 1, 0, 150, {0},
                               Pattern(PrimitiveType::kF32, {2}, 2), true))
                  .ok());
  Receive(0, 151, Shape(PrimitiveType::kF32, {2}), {From(3, 1)}, true);
  harness_.PlaneOf(HostId(0))->RemovePeer(HostId(1));
  absl::Status lost = Fetch(0, 151).status();
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss) << lost;
  EXPECT_THAT(lost.message(), HasSubstr("host 1 is gone"));
  absl::Status pushed =
      Push(0, 1, Piece(1, 0, 1, 152, {0}, Pattern(PrimitiveType::kF32, {2}, 1),
                       true));
  EXPECT_EQ(pushed.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(pushed.message(), HasSubstr("host 1 is not in the peer table"));
}

// ---------------------------------------------------------------------------
// Sealed connections attacked on the way: a man in the middle between two
// workers that share the token.

// A receiver that takes nothing in place and drops what it is given.
class NullReceiver : public transport::PieceReceiver {
 public:
  void ReceivePiece(PieceMessage) override {}
  absl::StatusOr<std::unique_ptr<transport::PieceWriter>> BeginPiece(
      const transport::PieceHeader&) override {
    return nullptr;
  }
  void ConnectionLost(HostId, absl::Status) override {}
};

// What the dialler sends before its first frame: the hello and its proof.
constexpr uint64_t kDiallerHandshakeBytes = wire::kHelloBytes + wire::kProofBytes;

class SealedDataPlaneTest : public DataPlaneConformanceTest<SealedTcpHarness> {
 protected:
  // Host 0 reaches host 1 through `interceptor`.
  void Through(const Interceptor& interceptor) {
    harness_.PlaneOf(HostId(0))->SetPeer(
        HostId(1), interceptor.address(),
        harness_.PlaneOf(HostId(1))->incarnation());
  }
};

// One bit of a piece's payload flipped on the way: the receiver refuses
// the record, the destination fails naming the sender and holds none of
// the bytes, and the next transfer between the same workers goes through.
TEST_F(SealedDataPlaneTest, ATamperedPayloadFailsItsTransferAndNothingElse) {
  MakeHosts(2);
  // Past the handshake, the frame's length and sealed header (rank 1):
  // inside the payload's first record.
  constexpr uint64_t target = kDiallerHandshakeBytes + wire::kLengthBytes +
                              wire::kFrameFixedBytes + 16 + transport::kSealTagBytes + 100;
  Interceptor interceptor(
      harness_.PlaneOf(HostId(1))->address(),
      [](int connection, uint64_t offset, uint8_t* bytes, size_t size) {
        if (connection == 0 && offset <= target && target < offset + size) {
          bytes[target - offset] ^= 0x01;
        }
      });
  Through(interceptor);
  const Literal value = Pattern(PrimitiveType::kF32, {4096}, 1);
  Receive(1, 200, value.shape(), {From(1, 0)}, true);
  absl::Status pushed = Push(0, 1, Piece(1, 0, 1, 200, {0}, value, true));
  EXPECT_EQ(pushed.code(), absl::StatusCode::kUnavailable) << pushed;
  absl::Status received = Fetch(1, 200).status();
  EXPECT_EQ(received.code(), absl::StatusCode::kDataLoss) << received;
  EXPECT_THAT(received.message(), HasSubstr("failed its authentication"));
  EXPECT_THAT(received.message(), HasSubstr("host 0"));
  EXPECT_THAT(received.message(), HasSubstr("transfer 1"));
  const transport::TcpDataPlaneStats stats =
      harness_.PlaneOf(HostId(1))->Stats();
  EXPECT_EQ(stats.records_refused, 1);
  EXPECT_EQ(stats.pieces_received, 0);
  EXPECT_EQ(stats.bytes_received, 0);
  // A new connection (the interceptor leaves it alone) carries the next.
  Receive(1, 201, value.shape(), {From(2, 0)}, true);
  ASSERT_TRUE(Push(0, 1, Piece(2, 0, 1, 201, {0}, value, true)).ok());
  auto again = Fetch(1, 201);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, value);
}

// A changed header (the destination array's id) is refused before the
// receiver looks at it.
TEST_F(SealedDataPlaneTest, ATamperedHeaderIsRefusedBeforeItIsRead) {
  MakeHosts(2);
  constexpr uint64_t target = kDiallerHandshakeBytes + wire::kLengthBytes + 32;
  Interceptor interceptor(
      harness_.PlaneOf(HostId(1))->address(),
      [](int connection, uint64_t offset, uint8_t* bytes, size_t size) {
        if (connection == 0 && offset <= target && target < offset + size) {
          bytes[target - offset] ^= 0x80;
        }
      });
  Through(interceptor);
  const Literal value = Pattern(PrimitiveType::kF32, {16}, 2);
  absl::Status pushed = Push(0, 1, Piece(1, 0, 1, 210, {0}, value, true));
  EXPECT_EQ(pushed.code(), absl::StatusCode::kUnavailable) << pushed;
  const transport::TcpDataPlaneStats stats =
      harness_.PlaneOf(HostId(1))->Stats();
  EXPECT_EQ(stats.records_refused, 1);
  EXPECT_EQ(stats.pieces_received, 0);
  EXPECT_EQ(stats.early_piece_bytes, 0);
}

// Frames recorded on one connection and replayed, byte for byte in place
// of the sender's own, on the next: the keys are new, nothing opens, and
// the replayed piece lands nowhere.
TEST_F(SealedDataPlaneTest, FramesReplayedOnANewConnectionAreRefused) {
  MakeHosts(2);
  std::vector<uint8_t> recorded;
  absl::Mutex mu;  // The interceptor's thread writes, the test reads.
  Interceptor interceptor(
      harness_.PlaneOf(HostId(1))->address(),
      [&](int connection, uint64_t offset, uint8_t* bytes, size_t size) {
        absl::MutexLock lock(&mu);
        for (size_t i = 0; i < size; ++i) {
          const uint64_t at = offset + i;
          if (at < kDiallerHandshakeBytes) continue;
          if (connection == 0) {
            if (recorded.size() == at - kDiallerHandshakeBytes) {
              recorded.push_back(bytes[i]);
            }
          } else if (at - kDiallerHandshakeBytes < recorded.size()) {
            bytes[i] = recorded[at - kDiallerHandshakeBytes];
          }
        }
      });
  Through(interceptor);
  const Literal first = Pattern(PrimitiveType::kF32, {1024}, 3);
  Receive(1, 220, first.shape(), {From(1, 0)}, true);
  ASSERT_TRUE(Push(0, 1, Piece(1, 0, 1, 220, {0}, first, true)).ok());
  // A new connection: host 1 restarts its side of it.
  harness_.PlaneOf(HostId(1))->RemovePeer(HostId(0));
  harness_.PlaneOf(HostId(1))->SetPeer(
      HostId(0), harness_.PlaneOf(HostId(0))->address(),
      harness_.PlaneOf(HostId(0))->incarnation());
  // The first pushes after the close may go out on the dying connection
  // and fail there; one dials anew, and the replay replaces its frame.
  const Literal second = Pattern(PrimitiveType::kF32, {1024}, 4);
  for (uint64_t array = 221; array < 231 &&
                             harness_.PlaneOf(HostId(1))->Stats().records_refused == 0;
       ++array) {
    Receive(1, array, second.shape(), {From(1, 0)}, true);
    absl::Status pushed = Push(0, 1, Piece(1, 0, 1, array, {0}, second, true));
    EXPECT_FALSE(pushed.ok()) << "the replayed frame was accepted";
  }
  EXPECT_GE(harness_.PlaneOf(HostId(1))->Stats().records_refused, 1);
  EXPECT_EQ(harness_.PlaneOf(HostId(1))->Stats().pieces_received, 1);
  auto landed = Fetch(1, 220);
  ASSERT_TRUE(landed.ok()) << landed.status();
  EXPECT_EQ(*landed, first);
}

// Peers must agree on sealing: one that dials in clear is refused, naming
// why.
TEST_F(SealedDataPlaneTest, APeerWithoutEncryptionIsRefusedNamingWhy) {
  MakeHosts(1);
  TcpDataPlaneOptions clear;
  clear.auth_token = "the cluster's token";
  clear.encrypt = false;
  auto plain = TcpDataPlane::Create(clear);
  ASSERT_TRUE(plain.ok()) << plain.status();
  transport::TcpDataPlane& sender = **plain;
  NullReceiver receiver;
  sender.Attach(HostId(7), &receiver);
  sender.SetPeer(HostId(0), harness_.PlaneOf(HostId(0))->address(), 0);
  harness_.PlaneOf(HostId(0))->SetPeer(HostId(7), kNowhere, 0);
  absl::Status pushed =
      sender
          .Push(HostId(0), Piece(1, 7, 0, 230, {0},
                                 Pattern(PrimitiveType::kF32, {2}, 5), true))
          .AwaitFor(kDeadline);
  EXPECT_EQ(pushed.code(), absl::StatusCode::kUnavailable) << pushed;
  EXPECT_THAT(pushed.message(),
              HasSubstr("dials with data-plane encryption off, and this "
                        "worker has it on"));
  sender.Shutdown();
}

}  // namespace data_plane_conformance_test
}  // namespace causeway::worker
