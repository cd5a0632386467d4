// Gloo contexts over connections we authenticate (gloo_mesh.h), tried as
// an attacker on the same host would: connecting to the ports a context
// listens on while it is set up, before its real peers, with garbage, an
// idle socket, a hello whose proof is a guess, and a rank holding another
// token. The real ranks still connect to each other, their collectives are
// right, and every intruder is dropped.
#include "causeway/transport/gloo_mesh.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "causeway/transport/gloo_store.h"
#include "causeway/transport/in_process_key_value_store.h"
#include "causeway/transport/sealed_relay.h"
#include "causeway/transport/testing/interceptor.h"
#include "gloo/common/error.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace gloo_mesh_test {

using ::testing::HasSubstr;

constexpr absl::Duration kDeadline = absl::Seconds(60);

std::shared_ptr<::gloo::transport::Device> LoopbackDevice() {
  ::gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return ::gloo::transport::tcp::CreateDevice(attr);
}

// A TCP connection to "IP:PORT" made by someone who is not a rank.
class Intruder {
 public:
  explicit Intruder(const std::string& address)
      : fd_(transport::testing::DialTcp(address)) {}
  ~Intruder() { close(fd_); }

  void Write(const std::vector<uint8_t>& bytes) {
    EXPECT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Reads `n` bytes; false if the connection ends first.
  bool Read(size_t n, std::vector<uint8_t>* bytes) {
    bytes->resize(n);
    size_t got = 0;
    while (got < n) {
      pollfd wait{fd_, POLLIN, 0};
      if (poll(&wait, 1, static_cast<int>(absl::ToInt64Milliseconds(kDeadline))) <= 0) {
        return false;
      }
      const ssize_t r = recv(fd_, bytes->data() + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  // True once the other side closed the connection.
  bool AwaitClosed() {
    char scratch[256];
    while (true) {
      pollfd wait{fd_, POLLIN, 0};
      if (poll(&wait, 1, static_cast<int>(absl::ToInt64Milliseconds(kDeadline))) <= 0) {
        return false;
      }
      const ssize_t r = recv(fd_, scratch, sizeof scratch, 0);
      if (r <= 0) return true;
    }
  }

 private:
  const int fd_;
};

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(random());
  return bytes;
}

// A well-formed hello from rank `from` to rank `to` (gloo_mesh.cc).
std::vector<uint8_t> Hello(uint32_t from, uint32_t to) {
  std::vector<uint8_t> hello = {'C', 'W', 'G', 'L', 2, 0, 1, 0};
  for (uint32_t v : {from, to}) {
    for (int i = 0; i < 4; ++i) hello.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> nonce = RandomBytes(32, from * 7 + to);
  hello.insert(hello.end(), nonce.begin(), nonce.end());
  return hello;
}

class GlooMeshTest : public ::testing::Test {
 protected:
  GlooMeshTest() : device_(LoopbackDevice()) {}

  GlooMeshOptions Options(int rank, int size, std::string token) {
    GlooMeshOptions options;
    options.rank = rank;
    options.size = size;
    options.device = device_;
    options.token = std::move(token);
    options.pair_timeout = std::chrono::seconds(30);
    options.deadline = absl::Now() + kDeadline;
    return options;
  }

  // Every rank sends rank + 1 to every other: each must end with the sum
  // over all ranks (an all-reduce, pair by pair).
  static void ExpectAllReduceWorks(
      const std::vector<std::shared_ptr<::gloo::Context>>& contexts) {
    const int size = static_cast<int>(contexts.size());
    std::vector<std::thread> threads;
    std::vector<int64_t> sums(size, 0);
    for (int rank = 0; rank < size; ++rank) {
      threads.emplace_back([&, rank] {
        ::gloo::Context& context = *contexts[rank];
        std::vector<int64_t> mine(size, rank + 1);
        std::vector<int64_t> theirs(size, 0);
        std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> sends;
        std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> recvs;
        for (int peer = 0; peer < size; ++peer) {
          if (peer == rank) continue;
          sends.push_back(
              context.createUnboundBuffer(&mine[peer], sizeof(int64_t)));
          sends.back()->send(peer, 7);
          recvs.push_back(
              context.createUnboundBuffer(&theirs[peer], sizeof(int64_t)));
          recvs.back()->recv(peer, 7);
        }
        for (auto& recv : recvs) recv->waitRecv();
        for (auto& send : sends) send->waitSend();
        sums[rank] = rank + 1;
        for (int peer = 0; peer < size; ++peer) sums[rank] += theirs[peer];
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int rank = 0; rank < size; ++rank) {
      EXPECT_EQ(sums[rank], size * (size + 1) / 2) << "rank " << rank;
    }
  }

  InProcessKeyValueStore kv_;
  std::shared_ptr<::gloo::transport::Device> device_;
};

// The attack the issue measured (3 of 5 all-reduces broke): connections to
// a context's ports while it is set up, made before its real peers come.
// Five contexts in a row, each attacked; every one connects and its
// all-reduce is right, and every intruder is dropped.
TEST_F(GlooMeshTest, IntrudersDuringSetupAreDroppedAndTheRanksStillConnect) {
  constexpr int kSize = 3;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const std::string prefix = absl::StrCat("test/", attempt, "/");
    const int64_t refused_before = GlooMeshConnectionsRefused();
    std::vector<absl::StatusOr<std::shared_ptr<::gloo::Context>>> built(
        kSize, absl::UnknownError("not built"));
    std::vector<std::unique_ptr<GlooStore>> stores;
    for (int rank = 0; rank < kSize; ++rank) {
      stores.push_back(
          std::make_unique<GlooStore>(kv_, prefix, absl::Now() + kDeadline));
    }
    std::vector<std::thread> ranks;
    // Rank 0 listens first, alone.
    ranks.emplace_back([&] {
      built[0] = ConnectGlooMesh(Options(0, kSize, "token"), *stores[0]);
    });
    // The attacker finds its port (an attacker on the host sees it in
    // /proc/net/tcp; here, the address it published) and gets there first.
    absl::StatusOr<std::string> published =
        kv_.Get(prefix + "mesh/0", absl::Now() + kDeadline).Await();
    ASSERT_TRUE(published.ok()) << published.status();
    const std::string address = published->substr(0, published->find('\n'));
    Intruder garbage(address);
    garbage.Write(RandomBytes(4096, attempt));
    Intruder idle(address);
    // A hello as rank 1, and a guess in place of the proof (it cannot wait
    // for the challenge: rank 0 answers once it has its peers' secrets).
    Intruder guesser(address);
    guesser.Write(Hello(1, 0));
    guesser.Write(RandomBytes(32, 100 + attempt));
    // Now the real peers, whose connections come after the intruders'.
    for (int rank = 1; rank < kSize; ++rank) {
      ranks.emplace_back([&, rank] {
        built[rank] = ConnectGlooMesh(Options(rank, kSize, "token"), *stores[rank]);
      });
    }
    for (std::thread& thread : ranks) thread.join();
    std::vector<std::shared_ptr<::gloo::Context>> contexts;
    for (int rank = 0; rank < kSize; ++rank) {
      ASSERT_TRUE(built[rank].ok()) << "rank " << rank << ": " << built[rank].status();
      contexts.push_back(*built[rank]);
    }
    ExpectAllReduceWorks(contexts);
    // The guesser got the challenge and a refusal (or a hang-up), the
    // garbage a hang-up; the idle one was never a pair: closed when the
    // listener was done.
    std::vector<uint8_t> answer;
    EXPECT_TRUE(!guesser.Read(65, &answer) || answer[64] != 0);
    EXPECT_TRUE(garbage.AwaitClosed());
    EXPECT_TRUE(idle.AwaitClosed());
    EXPECT_GE(GlooMeshConnectionsRefused() - refused_before, 3);
  }
}

// A rank that holds another token proves nothing: it cannot join, and the
// others never hand it a socket.
TEST_F(GlooMeshTest, ARankWithAnotherTokenCannotJoin) {
  const std::string prefix = "test/token/";
  GlooStore store0(kv_, prefix, absl::Now() + absl::Seconds(3));
  GlooStore store1(kv_, prefix, absl::Now() + absl::Seconds(3));
  absl::StatusOr<std::shared_ptr<::gloo::Context>> rank0 =
      absl::UnknownError("not built");
  std::thread listener([&] {
    GlooMeshOptions options = Options(0, 2, "the cluster's token");
    options.deadline = absl::Now() + absl::Seconds(3);
    rank0 = ConnectGlooMesh(options, store0);
  });
  GlooMeshOptions options = Options(1, 2, "a stolen guess");
  options.deadline = absl::Now() + absl::Seconds(3);
  absl::StatusOr<std::shared_ptr<::gloo::Context>> rank1 =
      ConnectGlooMesh(options, store1);
  listener.join();
  EXPECT_EQ(rank1.status().code(), absl::StatusCode::kUnauthenticated)
      << rank1.status();
  EXPECT_THAT(rank1.status().message(), HasSubstr("could not prove"));
  EXPECT_EQ(rank0.status().code(), absl::StatusCode::kDeadlineExceeded)
      << rank0.status();
  EXPECT_THAT(rank0.status().message(), HasSubstr("waiting for ranks 1"));
}

// An abort of the rendezvous (the launch was cancelled) ends a rank that
// waits for its peers at once, with the abort's status.
TEST_F(GlooMeshTest, AnAbortEndsARankWaitingForItsPeers) {
  GlooStore store(kv_, "test/abort/", absl::Now() + kDeadline);
  absl::StatusOr<std::shared_ptr<::gloo::Context>> rank0 =
      absl::UnknownError("not built");
  std::thread waiting([&] {
    rank0 = ConnectGlooMesh(Options(0, 2, ""), store);
  });
  // Once it listens (it published its address), abort it.
  ASSERT_TRUE(kv_.Get("test/abort/mesh/0", absl::Now() + kDeadline).Await().ok());
  store.Abort(absl::CancelledError("the launch was cancelled"));
  waiting.join();
  EXPECT_EQ(rank0.status().code(), absl::StatusCode::kCancelled) << rank0.status();
  EXPECT_THAT(rank0.status().message(), HasSubstr("the launch was cancelled"));
}

// Sealed pairs attacked on the way. Rank 1 reaches rank 0 through a man in
// the middle (the test carries the rendezvous between two stores and gives
// rank 1 the interceptor's address in place of rank 0's).
class SealedGlooMeshTest : public GlooMeshTest {
 protected:
  // Connects ranks 0 and 1 of `prefix`. Once rank 0 listens (at what
  // `target` is set to here), rank 1 dials what `interceptor_address`
  // returns: a man in the middle relaying to `target`, or `target` itself.
  std::vector<std::shared_ptr<::gloo::Context>> ConnectThrough(
      const std::string& prefix, std::string* target,
      const std::function<std::string()>& interceptor_address) {
    InProcessKeyValueStore other;
    GlooStore store0(kv_, prefix, absl::Now() + kDeadline);
    GlooStore store1(other, prefix, absl::Now() + kDeadline);
    absl::StatusOr<std::shared_ptr<::gloo::Context>> rank0 =
        absl::UnknownError("not built");
    absl::StatusOr<std::shared_ptr<::gloo::Context>> rank1 = rank0;
    std::thread listener(
        [&] { rank0 = ConnectGlooMesh(Options(0, 2, "token"), store0); });
    absl::StatusOr<std::string> published =
        kv_.Get(prefix + "mesh/0", absl::Now() + kDeadline).Await();
    CW_CHECK(published.ok()) << published.status();
    const size_t newline = published->find('\n');
    *target = published->substr(0, newline);
    CW_CHECK(other
                 .Set(prefix + "mesh/0",
                      interceptor_address() + published->substr(newline))
                 .Await()
                 .ok());
    std::thread dialler(
        [&] { rank1 = ConnectGlooMesh(Options(1, 2, "token"), store1); });
    absl::StatusOr<std::string> second =
        other.Get(prefix + "mesh/1", absl::Now() + kDeadline).Await();
    CW_CHECK(second.ok()) << second.status();
    CW_CHECK(kv_.Set(prefix + "mesh/1", *second).Await().ok());
    listener.join();
    dialler.join();
    CW_CHECK(rank0.ok()) << rank0.status();
    CW_CHECK(rank1.ok()) << rank1.status();
    return {*rank0, *rank1};
  }

  // Rank 1 sends `message` to rank 0; what rank 0 received, or the
  // failure Gloo reported.
  static absl::StatusOr<std::vector<uint8_t>> Send(
      const std::vector<std::shared_ptr<::gloo::Context>>& contexts,
      std::vector<uint8_t> message) {
    std::vector<uint8_t> received(message.size());
    auto send = contexts[1]->createUnboundBuffer(message.data(), message.size());
    auto recv =
        contexts[0]->createUnboundBuffer(received.data(), received.size());
    try {
      send->send(0, 3);
      recv->recv(1, 3);
      recv->waitRecv(std::chrono::milliseconds(20000));
      send->waitSend(std::chrono::milliseconds(20000));
    } catch (const ::gloo::Exception& e) {
      return absl::DataLossError(e.what());
    }
    return received;
  }
};

// Every byte rank 1 sends to rank 0, as a man in the middle sees it.
class Recording {
 public:
  // Starts relaying to `target`; rank 1 dials the address returned.
  std::string Start(const std::string& target) {
    middle_ = std::make_unique<testing::Interceptor>(
        target, [this](int, uint64_t, uint8_t* bytes, size_t size) {
          absl::MutexLock lock(&mu_);
          wire_.insert(wire_.end(), bytes, bytes + size);
        });
    return middle_->address();
  }
  std::vector<uint8_t> wire() {
    absl::MutexLock lock(&mu_);
    return wire_;
  }

 private:
  absl::Mutex mu_;
  std::vector<uint8_t> wire_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<testing::Interceptor> middle_;  // Last: stopped first.
};

// What crosses the network between sealed ranks is not what Gloo sent:
// 4 MiB of a recognizable pattern arrive whole, and no 64-byte stretch of
// it is seen on the wire.
TEST_F(SealedGlooMeshTest, PairsCarryOnlyCiphertext) {
  std::string target;
  const std::vector<uint8_t> message = RandomBytes(4 << 20, 11);
  Recording recording;
  auto contexts = ConnectThrough("sealed/wire/", &target,
                                 [&] { return recording.Start(target); });
  absl::StatusOr<std::vector<uint8_t>> received = Send(contexts, message);
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(*received, message);
  const std::vector<uint8_t> wire = recording.wire();
  EXPECT_GT(wire.size(), message.size());
  const std::vector<uint8_t> stretch(message.begin() + 4096,
                                     message.begin() + 4096 + 64);
  EXPECT_EQ(std::search(wire.begin(), wire.end(), stretch.begin(),
                        stretch.end()),
            wire.end());
}

// One bit flipped on the way: the relay refuses the record and closes the
// pair, and the receive fails instead of handing Gloo changed bytes.
TEST_F(SealedGlooMeshTest, ATamperedRecordFailsTheCollective) {
  std::string target;
  std::atomic<bool> flipped{false};
  const int64_t refused_before = SealedRelay::RecordsRefused();
  std::unique_ptr<testing::Interceptor> middle;
  auto contexts = ConnectThrough("sealed/tamper/", &target, [&] {
    middle = std::make_unique<testing::Interceptor>(
        target, [&](int, uint64_t offset, uint8_t* bytes, size_t size) {
          // Past the handshake (hello 48, proof 32): inside a record.
          constexpr uint64_t kAt = 80 + 4 + 1000;
          if (offset <= kAt && kAt < offset + size) {
            bytes[kAt - offset] ^= 0x04;
            flipped = true;
          }
        });
    return middle->address();
  });
  absl::StatusOr<std::vector<uint8_t>> received =
      Send(contexts, RandomBytes(64 << 10, 12));
  EXPECT_TRUE(flipped.load());
  EXPECT_FALSE(received.ok()) << "changed bytes were handed to Gloo";
  EXPECT_EQ(SealedRelay::RecordsRefused() - refused_before, 1);
}

// A recorded handshake is worth nothing later: an attacker who saw rank
// 1's hello and proof to rank 0 replays them, first in line, to the next
// context's rank 0. Rank 0's challenge carries a fresh nonce, so the old
// proof does not match: refused, and the real ranks connect.
TEST_F(SealedGlooMeshTest, AReplayedHandshakeIsRefused) {
  std::string target;
  auto recording = std::make_unique<Recording>();
  auto first = ConnectThrough("sealed/recorded/", &target,
                              [&] { return recording->Start(target); });
  ASSERT_TRUE(Send(first, RandomBytes(1024, 21)).ok());
  const std::vector<uint8_t> recorded = recording->wire();
  ASSERT_GE(recorded.size(), 80u);  // Hello (48) and proof (32).
  const std::vector<uint8_t> handshake(recorded.begin(), recorded.begin() + 80);
  first.clear();
  recording.reset();

  // The next context: the replayer is first at rank 0's port.
  const int64_t refused_before = GlooMeshConnectionsRefused();
  std::unique_ptr<Intruder> replayer;
  auto second = ConnectThrough("sealed/replayed/", &target, [&] {
    replayer = std::make_unique<Intruder>(target);
    replayer->Write(handshake);
    return target;
  });
  // The replayer got a challenge and then a refusal (or a hang-up), never
  // a pair.
  std::vector<uint8_t> answer;
  EXPECT_TRUE(!replayer->Read(65, &answer) || answer[64] != 0);
  EXPECT_TRUE(replayer->AwaitClosed());
  EXPECT_GE(GlooMeshConnectionsRefused() - refused_before, 1);
  absl::StatusOr<std::vector<uint8_t>> received =
      Send(second, RandomBytes(4096, 22));
  EXPECT_TRUE(received.ok()) << received.status();
}

// Stopping a relay never waits for the peer: the rank that closes its
// context first goes on at once, while its relay sends on what Gloo wrote
// last and lingers until the peer closes too. Nothing is lost on the way.
TEST_F(SealedGlooMeshTest, StoppingARelayDoesNotWaitForThePeer) {
  const int64_t running_before = SealedRelay::Running();
  std::string target;
  auto contexts = ConnectThrough("sealed/stop/", &target,
                                 [&] { return target; });
  ASSERT_EQ(SealedRelay::Running(), running_before + 2);
  const std::vector<uint8_t> message = RandomBytes(4 << 20, 13);
  std::vector<uint8_t> received(message.size());
  auto recv =
      contexts[0]->createUnboundBuffer(received.data(), received.size());
  recv->recv(1, 5);
  {
    auto send = contexts[1]->createUnboundBuffer(
        const_cast<uint8_t*>(message.data()), message.size());
    send->send(0, 5);
    send->waitSend(std::chrono::milliseconds(20000));
  }
  // Rank 1 closes while rank 0 keeps its context open: the relay's Stop
  // (in the context's deleter) returns, and its thread is still there.
  contexts[1].reset();
  EXPECT_EQ(SealedRelay::Running(), running_before + 2);
  recv->waitRecv(std::chrono::milliseconds(20000));
  EXPECT_EQ(received, message);
  recv.reset();
  contexts[0].reset();
  // Both relays end once both sides have closed.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (SealedRelay::Running() > running_before && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(SealedRelay::Running(), running_before);
}

}  // namespace gloo_mesh_test
}  // namespace causeway::transport
