#include "causeway/transport/grpc_stream_writer.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "causeway/transport/proto/session.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace grpc_stream_writer_test {

using ::testing::ElementsAre;

// `options` bounded at `bytes` queued (a message's size is its length);
// each overflow counted in `*overflows`, if given.
StreamWriter<std::string>::Options Bounded(
    StreamWriter<std::string>::Options options, int64_t bytes,
    int* overflows = nullptr) {
  options.max_queued_bytes = bytes;
  options.size = [](const std::string& m) {
    return static_cast<int64_t>(m.size());
  };
  if (overflows != nullptr) options.on_overflow = [overflows] { ++*overflows; };
  return options;
}

// A fake callback stream: records each write started (the message and the
// thread that started it); the test reports it done, as OnWriteDone would.
class FakeCallbackStream {
 public:
  bool Start(const std::string& message) {
    absl::MutexLock lock(&mu_);
    if (refuse_) return false;
    EXPECT_FALSE(in_progress_) << "a write started while one was in progress";
    in_progress_ = true;
    started_.push_back(message);
    threads_.push_back(std::this_thread::get_id());
    return true;
  }
  // The write in progress is over; the writer may start the next now.
  void Done(StreamWriter<std::string>& writer, bool ok = true) {
    {
      absl::MutexLock lock(&mu_);
      ASSERT_TRUE(in_progress_);
      in_progress_ = false;
    }
    writer.WriteDone(ok);
  }
  void Refuse() {
    absl::MutexLock lock(&mu_);
    refuse_ = true;
  }
  std::vector<std::string> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  std::vector<std::thread::id> threads() {
    absl::MutexLock lock(&mu_);
    return threads_;
  }

 private:
  absl::Mutex mu_;
  bool in_progress_ ABSL_GUARDED_BY(mu_) = false;
  bool refuse_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> started_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

StreamWriter<std::string>::Options StartOn(FakeCallbackStream& stream) {
  StreamWriter<std::string>::Options options;
  options.start = [&stream](const std::string& m) { return stream.Start(m); };
  return options;
}

TEST(StreamWriterTest, TheSendersThreadStartsAWriteAndItsDoneStartsTheNext) {
  FakeCallbackStream stream;
  StreamWriter<std::string> writer(StartOn(stream));
  EXPECT_TRUE(writer.Send("a"));  // Nothing in progress: started here.
  EXPECT_THAT(stream.started(), ElementsAre("a"));
  EXPECT_TRUE(writer.Send("b"));  // Waits for "a" to be done.
  EXPECT_TRUE(writer.Send("c"));
  EXPECT_THAT(stream.started(), ElementsAre("a"));
  std::thread done_thread([&] { stream.Done(writer); });  // Starts "b"...
  done_thread.join();
  EXPECT_THAT(stream.started(), ElementsAre("a", "b"));
  stream.Done(writer);  // ...and this one "c".
  stream.Done(writer);  // Nothing left: the next Send starts its own.
  EXPECT_TRUE(writer.Send("d"));
  EXPECT_THAT(stream.started(), ElementsAre("a", "b", "c", "d"));
  const std::vector<std::thread::id> threads = stream.threads();
  EXPECT_EQ(threads[0], std::this_thread::get_id());
  EXPECT_NE(threads[1], std::this_thread::get_id());  // The done's thread.
  EXPECT_EQ(threads[2], std::this_thread::get_id());
  EXPECT_EQ(threads[3], std::this_thread::get_id());
}

TEST(StreamWriterTest, MessagesQueuedBehindAWriteInProgressAreMerged) {
  FakeCallbackStream stream;
  StreamWriter<std::string>::Options options = StartOn(stream);
  options.merge = [](std::string& into, std::string& next) {
    if (into[0] != '+' || next[0] != '+') return false;
    into += next.substr(1);
    return true;
  };
  StreamWriter<std::string> writer(std::move(options));
  for (const char* m : {"first", "+1", "+2", "+3", "x", "+4"}) {
    ASSERT_TRUE(writer.Send(m));
  }
  for (int i = 0; i < 4; ++i) stream.Done(writer);
  EXPECT_THAT(stream.started(), ElementsAre("first", "+123", "x", "+4"));
}

TEST(StreamWriterTest, SendsFromManyThreadsStartOneWriteAtATimeAndLoseNone) {
  FakeCallbackStream stream;
  StreamWriter<std::string> writer(StartOn(stream));
  std::atomic<bool> stop{false};
  // The stream's side: reports each write done as soon as it sees it.
  std::thread completer([&] {
    size_t done = 0;
    while (!stop.load() || done < stream.started().size()) {
      if (stream.started().size() > done) {
        ++done;
        stream.Done(writer);
      } else {
        std::this_thread::yield();
      }
    }
  });
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t) {
    senders.emplace_back([&writer, t] {
      for (int i = 0; i < 500; ++i) {
        ASSERT_TRUE(writer.Send(absl::StrCat(t, ":", i)));
      }
    });
  }
  for (std::thread& sender : senders) sender.join();
  stop.store(true);
  completer.join();
  std::vector<std::string> started = stream.started();
  ASSERT_EQ(started.size(), 2000u);
  // Each sender's messages in its own order.
  std::vector<int> next(4, 0);
  for (const std::string& m : started) {
    const int t = m[0] - '0';
    EXPECT_EQ(m, absl::StrCat(t, ":", next[t]));
    ++next[t];
  }
}

TEST(StreamWriterTest, AFailedWriteOrARefusedStartStopsTheWriter) {
  FakeCallbackStream stream;
  StreamWriter<std::string> writer(StartOn(stream));
  writer.Send("a");
  writer.Send("lost");
  stream.Done(writer, /*ok=*/false);
  EXPECT_TRUE(writer.broken());
  EXPECT_FALSE(writer.Send("after"));
  EXPECT_THAT(stream.started(), ElementsAre("a"));

  FakeCallbackStream ending;
  StreamWriter<std::string> refused(StartOn(ending));
  ending.Refuse();  // The stream is finishing.
  refused.Send("a");
  EXPECT_TRUE(refused.broken());
  EXPECT_FALSE(refused.Send("b"));
  EXPECT_TRUE(ending.started().empty());
}

TEST(StreamWriterTest, CloseDropsOrDrainsWhatIsQueued) {
  FakeCallbackStream stream;
  StreamWriter<std::string> writer(StartOn(stream));
  writer.Send("a");
  writer.Send("dropped");
  writer.Close(/*drain=*/false);
  EXPECT_FALSE(writer.Send("late"));
  stream.Done(writer);  // The write in progress ends; nothing follows.
  EXPECT_THAT(stream.started(), ElementsAre("a"));

  // What was taken from the queue already (behind the write in progress)
  // goes too.
  FakeCallbackStream batched;
  StreamWriter<std::string> taking(StartOn(batched));
  taking.Send("a");
  taking.Send("b");
  taking.Send("c");
  batched.Done(taking);  // "b" and "c" are taken; "b" starts.
  taking.Close(/*drain=*/false);
  batched.Done(taking);
  EXPECT_THAT(batched.started(), ElementsAre("a", "b"));

  FakeCallbackStream drained;
  StreamWriter<std::string> draining(StartOn(drained));
  draining.Send("a");
  draining.Send("b");
  draining.Close(/*drain=*/true);
  EXPECT_FALSE(draining.Send("late"));
  drained.Done(draining);
  drained.Done(draining);
  EXPECT_THAT(drained.started(), ElementsAre("a", "b"));
}

TEST(StreamWriterTest, WhenDrainedRunsOnceTheLastQueuedWriteIsOverOrTheStreamBroke) {
  FakeCallbackStream idle;
  StreamWriter<std::string> nothing_queued(StartOn(idle));
  int drained = 0;
  nothing_queued.WhenDrained([&] { ++drained; });  // At once, here.
  EXPECT_EQ(drained, 1);

  FakeCallbackStream stream;
  StreamWriter<std::string> writer(StartOn(stream));
  writer.Send("a");
  writer.Send("b");
  writer.Close(/*drain=*/true);
  std::thread::id drained_on;
  writer.WhenDrained([&] {
    ++drained;
    drained_on = std::this_thread::get_id();
  });
  stream.Done(writer);  // "b" starts: not drained yet.
  EXPECT_EQ(drained, 1);
  std::thread done_thread([&] { stream.Done(writer); });  // "b" is over.
  const std::thread::id done_id = done_thread.get_id();
  done_thread.join();
  EXPECT_EQ(drained, 2);
  EXPECT_EQ(drained_on, done_id);
  EXPECT_THAT(stream.started(), ElementsAre("a", "b"));

  FakeCallbackStream breaking;
  StreamWriter<std::string> broken(StartOn(breaking));
  broken.Send("a");
  broken.Send("never");
  broken.WhenDrained([&] { ++drained; });
  breaking.Done(broken, /*ok=*/false);
  EXPECT_EQ(drained, 3);
  EXPECT_THAT(breaking.started(), ElementsAre("a"));
}

TEST(StreamWriterTest, APeerThatDoesNotReadOverflowsTheBoundAndDoneGivesBytesBack) {
  FakeCallbackStream stream;
  int overflows = 0;
  StreamWriter<std::string> writer(Bounded(StartOn(stream), 10, &overflows));
  EXPECT_TRUE(writer.Send("abcde"));  // 5 bytes, started, never done...
  EXPECT_TRUE(writer.Send("abcd"));   // 9 in all.
  EXPECT_TRUE(writer.Send("e"));      // 10: at the bound.
  stream.Done(writer);                // "abcde" is over: its 5 back.
  EXPECT_TRUE(writer.Send("fghij"));  // 10 again.
  EXPECT_FALSE(writer.Send("k"));     // 11 would be past the bound.
  EXPECT_EQ(overflows, 1);
  EXPECT_FALSE(writer.Send("l"));
  EXPECT_EQ(overflows, 1);
  EXPECT_TRUE(writer.overflowed());
}

TEST(StreamWriterTest, AProtobufMessageIsBoundedByItsSerializedSizeByDefault) {
  wire::SessionRequest request;
  request.mutable_compile()->set_hlo_text(std::string(100, 'x'));
  const int64_t bytes = static_cast<int64_t>(request.ByteSizeLong());
  ASSERT_GT(bytes, 100);
  StreamWriter<wire::SessionRequest>::Options options;
  options.start = [](const wire::SessionRequest&) { return true; };  // Never done.
  options.max_queued_bytes = 2 * bytes;  // No `size`: the message's own.
  int overflows = 0;
  options.on_overflow = [&overflows] { ++overflows; };
  StreamWriter<wire::SessionRequest> writer(std::move(options));
  EXPECT_TRUE(writer.Send(request));
  EXPECT_TRUE(writer.Send(request));   // 2 × its size: at the bound.
  EXPECT_FALSE(writer.Send(request));  // Past it.
  EXPECT_EQ(overflows, 1);
}

}  // namespace grpc_stream_writer_test
}  // namespace causeway::transport
