#include "causeway/transport/grpc_stream_writer.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace grpc_stream_writer_test {

using ::testing::ElementsAre;

// A fake stream: records what was written; can block a write of "block"
// (and of "block2") until told, and can break.
class FakeStream {
 public:
  bool Write(const std::string& message) {
    if (message == "block" || message == "block2") {
      Gate& gate = message == "block" ? first_ : second_;
      gate.entered.Notify();
      gate.open.WaitForNotification();
    }
    absl::MutexLock lock(&mu_);
    if (broken_) return false;
    written_.push_back(message);
    return true;
  }
  void Open() { first_.open.Notify(); }
  void Open2() { second_.open.Notify(); }
  // Wait until a write of "block" ("block2") has started.
  void AwaitBlocked() { first_.entered.WaitForNotification(); }
  void AwaitBlocked2() { second_.entered.WaitForNotification(); }
  void Break() {
    absl::MutexLock lock(&mu_);
    broken_ = true;
  }
  std::vector<std::string> AwaitWritten(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return written_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
    return written_;
  }
  std::vector<std::string> written() {
    absl::MutexLock lock(&mu_);
    return written_;
  }

 private:
  struct Gate {
    absl::Notification entered;
    absl::Notification open;
  };
  Gate first_;
  Gate second_;
  absl::Mutex mu_;
  std::vector<std::string> written_ ABSL_GUARDED_BY(mu_);
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
};

StreamWriter<std::string>::Options WriteTo(FakeStream& stream) {
  StreamWriter<std::string>::Options options;
  options.write = [&stream](const std::string& m) { return stream.Write(m); };
  return options;
}

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

TEST(StreamWriterTest, WritesEveryMessageInOrder) {
  FakeStream stream;
  StreamWriter<std::string> writer(WriteTo(stream));
  for (const char* m : {"a", "b", "c"}) EXPECT_TRUE(writer.Send(m));
  writer.Close(/*drain=*/true);
  EXPECT_THAT(stream.written(), ElementsAre("a", "b", "c"));
}

TEST(StreamWriterTest, MessagesQueuedBehindASlowWriteAreMerged) {
  FakeStream stream;
  StreamWriter<std::string>::Options options = WriteTo(stream);
  // "+x" merges into a preceding "+..." message.
  options.merge = [](std::string& into, std::string& next) {
    if (into[0] != '+' || next[0] != '+') return false;
    into += next.substr(1);
    return true;
  };
  StreamWriter<std::string> writer(std::move(options));
  writer.Send("block");
  stream.AwaitBlocked();  // The writer is stuck in this write...
  writer.Send("+1");      // ...while these queue up.
  writer.Send("+2");
  writer.Send("+3");
  writer.Send("x");
  writer.Send("+4");
  stream.Open();
  writer.Close(/*drain=*/true);
  EXPECT_THAT(stream.written(), ElementsAre("block", "+123", "x", "+4"));
}

TEST(StreamWriterTest, CloseWithoutDrainDropsWhatIsQueuedAndRefusesMore) {
  FakeStream stream;
  StreamWriter<std::string> writer(WriteTo(stream));
  writer.Send("block");
  stream.AwaitBlocked();  // The writer is inside that write now...
  writer.Send("dropped");  // ...so this waits in the queue.
  std::thread closer([&] { writer.Close(/*drain=*/false); });
  // Close refuses new messages once it has dropped the queued ones: probe
  // until it does (a few iterations), then let the blocked write end.
  while (writer.Send("probe")) {
  }
  stream.Open();
  closer.join();
  EXPECT_FALSE(writer.Send("late"));
  EXPECT_THAT(stream.written(), ElementsAre("block"));
}

TEST(StreamWriterTest, CloseWithoutDrainAbandonsTheRestOfABatchTakenAlready) {
  FakeStream stream;
  StreamWriter<std::string> writer(WriteTo(stream));
  writer.Send("block");
  stream.AwaitBlocked();
  writer.Send("block2");  // Both queue behind "block" and are taken by
  writer.Send("after");   // the writer together once it returns.
  stream.Open();
  stream.AwaitBlocked2();  // "after" is in the writer's hands now.
  std::thread closer([&] { writer.Close(/*drain=*/false); });
  while (writer.Send("probe")) {
  }
  stream.Open2();
  closer.join();
  EXPECT_THAT(stream.written(), ElementsAre("block", "block2"));
}

TEST(StreamWriterTest, APeerThatDoesNotReadOverflowsTheBoundOnce) {
  FakeStream stream;
  int overflows = 0;
  StreamWriter<std::string> writer(Bounded(WriteTo(stream), 10, &overflows));
  EXPECT_TRUE(writer.Send("block"));  // 5 bytes, being written...
  stream.AwaitBlocked();               // ...and the peer takes nothing.
  EXPECT_TRUE(writer.Send("abcd"));   // 9 in all.
  EXPECT_TRUE(writer.Send("e"));      // 10: at the bound, not past it.
  EXPECT_FALSE(writer.Send("f"));     // 11: refused, and the queue dropped.
  EXPECT_FALSE(writer.Send("g"));     // Refused from then on.
  EXPECT_EQ(overflows, 1);
  EXPECT_TRUE(writer.overflowed());
  stream.Open();
  writer.Close(/*drain=*/true);
  EXPECT_THAT(stream.written(), ElementsAre("block"));
}

TEST(StreamWriterTest, BytesWrittenAreGivenBackToTheBound) {
  FakeStream stream;
  // Room for two: the one just written may not be counted out yet when the
  // next is sent (the writer gives its bytes back after the write returns).
  StreamWriter<std::string> writer(Bounded(WriteTo(stream), 6));
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(writer.Send("abc")) << i;
    stream.AwaitWritten(static_cast<size_t>(i + 1));
  }
  writer.Close(/*drain=*/true);
  EXPECT_EQ(stream.written().size(), 100u);
}

TEST(StreamWriterTest, ABrokenStreamStopsTheWriter) {
  FakeStream stream;
  StreamWriter<std::string> writer(WriteTo(stream));
  stream.Break();
  writer.Send("lost");
  writer.Close(/*drain=*/true);
  EXPECT_TRUE(writer.broken());
  EXPECT_FALSE(writer.Send("after"));
  EXPECT_TRUE(stream.written().empty());
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

TEST(StreamWriterStartTest, TheSendersThreadStartsAWriteAndItsDoneStartsTheNext) {
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

TEST(StreamWriterStartTest, MessagesQueuedBehindAWriteInProgressAreMerged) {
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

TEST(StreamWriterStartTest, SendsFromManyThreadsStartOneWriteAtATimeAndLoseNone) {
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

TEST(StreamWriterStartTest, AFailedWriteOrARefusedStartStopsTheWriter) {
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

TEST(StreamWriterStartTest, CloseDropsOrDrainsWhatIsQueued) {
  FakeCallbackStream stream;
  StreamWriter<std::string> writer(StartOn(stream));
  writer.Send("a");
  writer.Send("dropped");
  writer.Close(/*drain=*/false);
  EXPECT_FALSE(writer.Send("late"));
  stream.Done(writer);  // The write in progress ends; nothing follows.
  EXPECT_THAT(stream.started(), ElementsAre("a"));

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

TEST(StreamWriterStartTest, WhenDrainedRunsOnceTheLastQueuedWriteIsOverOrTheStreamBroke) {
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

TEST(StreamWriterStartTest, APeerThatDoesNotReadOverflowsTheBoundAndDoneGivesBytesBack) {
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

}  // namespace grpc_stream_writer_test
}  // namespace causeway::transport
