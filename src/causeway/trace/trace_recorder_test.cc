#include "causeway/trace/trace_recorder.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/logging.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace causeway::trace {
namespace trace_recorder_test {

// A small JSON reader, enough to check the export is well-formed and to
// look inside it. Any syntax error makes Parse return null.
struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  const Json* Get(const std::string& key) const {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &it->second;
  }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  std::unique_ptr<Json> ParseDocument() {
    auto value = std::make_unique<Json>();
    if (!Value(*value)) return nullptr;
    Space();
    if (pos_ != text_.size()) return nullptr;
    return value;
  }

 private:
  void Space() {
    while (pos_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }
  bool Eat(char c) {
    Space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool String(std::string& out) {
    if (!Eat('"')) return false;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (pos_ >= text_.size()) return false;
        char e = text_[pos_++];
        if (e == 'u') {
          if (pos_ + 4 > text_.size()) return false;
          for (int i = 0; i < 4; ++i) {
            if (!std::isxdigit(static_cast<unsigned char>(text_[pos_ + i])))
              return false;
          }
          out += static_cast<char>(std::strtol(
              std::string(text_.substr(pos_, 4)).c_str(), nullptr, 16));
          pos_ += 4;
        } else if (std::string_view("\"\\/bfnrt").find(e) !=
                   std::string_view::npos) {
          out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        } else {
          return false;
        }
      } else {
        out += c;
      }
    }
    return Eat('"');
  }
  bool Value(Json& out) {
    Space();
    if (pos_ >= text_.size()) return false;
    char c = text_[pos_];
    if (c == '{') {
      out.kind = Json::Kind::kObject;
      ++pos_;
      if (Eat('}')) return true;
      do {
        std::string key;
        Space();
        if (!String(key) || !Eat(':')) return false;
        if (!Value(out.object[key])) return false;
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      out.kind = Json::Kind::kArray;
      ++pos_;
      if (Eat(']')) return true;
      do {
        out.array.emplace_back();
        if (!Value(out.array.back())) return false;
      } while (Eat(','));
      return Eat(']');
    }
    if (c == '"') {
      out.kind = Json::Kind::kString;
      return String(out.string);
    }
    for (std::string_view word : {"true", "false", "null"}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        out.kind = word == "null" ? Json::Kind::kNull : Json::Kind::kBool;
        return true;
      }
    }
    const char* begin = text_.data() + pos_;
    char* end = nullptr;
    out.number = std::strtod(begin, &end);
    if (end == begin) return false;
    out.kind = Json::Kind::kNumber;
    pos_ += end - begin;
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

class TraceRecorderTest : public ::testing::Test {
 protected:
  OpEvent Op(int64_t device, uint64_t seq, absl::Time time) {
    OpEvent op;
    op.time = time;
    op.device = DeviceId(device);
    op.host = HostId(device / 2);
    op.island = IslandId(0);
    op.seq = seq;
    op.session = SessionId(1);
    op.session_name = "trainer";
    op.program = "jit_step";
    op.partition = device % 2;
    op.num_partitions = 2;
    return op;
  }

  // The exported trace, parsed; fails the test if it is not valid JSON.
  std::unique_ptr<Json> Export() {
    absl::StatusOr<std::string> text = recorder_.ExportChromeTrace();
    EXPECT_TRUE(text.ok()) << text.status();
    std::unique_ptr<Json> json = JsonReader(*text).ParseDocument();
    EXPECT_NE(json, nullptr) << "not valid JSON:\n" << *text;
    return json;
  }

  std::vector<const Json*> Events(const Json& trace, const std::string& ph) {
    std::vector<const Json*> out;
    for (const Json& event : trace.Get("traceEvents")->array) {
      if (event.Get("ph")->string == ph) out.push_back(&event);
    }
    return out;
  }

  absl::Time t0_ = absl::Now();
  TraceRecorder recorder_;
};

TEST_F(TraceRecorderTest, AnOpBecomesACompleteEventOnItsDeviceTrack) {
  recorder_.OpEnqueued(Op(3, 7, t0_));
  recorder_.OpStarted(Op(3, 7, t0_ + absl::Microseconds(100)));
  recorder_.OpFinished(Op(3, 7, t0_ + absl::Microseconds(350)),
                       absl::OkStatus());
  std::unique_ptr<Json> trace = Export();
  ASSERT_NE(trace, nullptr);
  std::vector<const Json*> ops = Events(*trace, "X");
  ASSERT_EQ(ops.size(), 1u);
  const Json& op = *ops[0];
  EXPECT_EQ(op.Get("name")->string, "jit_step");
  EXPECT_EQ(op.Get("pid")->number, 1);  // Host of device 3.
  EXPECT_EQ(op.Get("tid")->number, 3);
  EXPECT_NEAR(op.Get("dur")->number, 250, 0.01);
  EXPECT_EQ(op.Get("args")->Get("seq")->number, 7);
  EXPECT_EQ(op.Get("args")->Get("partition")->string, "1/2");
  EXPECT_NEAR(op.Get("args")->Get("queued_us")->number, 100, 0.01);
  EXPECT_EQ(op.Get("args")->Get("status")->string, "OK");
}

TEST_F(TraceRecorderTest, ExportSinceKeepsOnlyWhatWasRecordedSinceThen) {
  recorder_.OpStarted(Op(0, 1, t0_));
  recorder_.OpFinished(Op(0, 1, t0_ + absl::Microseconds(10)), absl::OkStatus());
  // Recorded strictly before `since`, whatever the clock's resolution.
  const absl::Time since = absl::Now() + absl::Milliseconds(1);
  while (absl::Now() <= since) {
  }
  recorder_.OpStarted(Op(0, 2, t0_ + absl::Microseconds(20)));
  recorder_.OpFinished(Op(0, 2, t0_ + absl::Microseconds(30)), absl::OkStatus());
  auto seqs = [&](absl::Time from) {
    absl::StatusOr<std::string> text = recorder_.ExportChromeTraceSince(from);
    CW_CHECK(text.ok()) << text.status();
    std::unique_ptr<Json> json = JsonReader(*text).ParseDocument();
    CW_CHECK(json != nullptr) << *text;
    std::vector<double> out;
    for (const Json* op : Events(*json, "X")) {
      out.push_back(op->Get("args")->Get("seq")->number);
    }
    return out;
  };
  EXPECT_EQ(seqs(absl::InfinitePast()), (std::vector<double>{1, 2}));
  EXPECT_EQ(seqs(since), (std::vector<double>{2}));
  EXPECT_TRUE(seqs(absl::InfiniteFuture()).empty());
}

TEST_F(TraceRecorderTest, TracksAreNamedByHostAndDevice) {
  recorder_.OpStarted(Op(2, 1, t0_));
  recorder_.OpFinished(Op(2, 1, t0_ + absl::Microseconds(5)),
                       absl::OkStatus());
  std::unique_ptr<Json> trace = Export();
  ASSERT_NE(trace, nullptr);
  std::map<std::string, std::string> names;
  for (const Json* meta : Events(*trace, "M")) {
    if (meta->Get("args")->Get("name") != nullptr) {
      names[meta->Get("name")->string] = meta->Get("args")->Get("name")->string;
    }
  }
  EXPECT_EQ(names["process_name"], "host 1");
  EXPECT_EQ(names["thread_name"], "device 2");
}

TEST_F(TraceRecorderTest, AnOpThatNeverRanIsAnInstantWithItsError) {
  recorder_.OpEnqueued(Op(0, 4, t0_));
  recorder_.OpFinished(Op(0, 4, t0_ + absl::Microseconds(10)),
                       absl::DataLossError("host 1 died"));
  std::unique_ptr<Json> trace = Export();
  ASSERT_NE(trace, nullptr);
  std::vector<const Json*> instants = Events(*trace, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]->Get("name")->string, "jit_step (not run)");
  EXPECT_NE(instants[0]->Get("args")->Get("status")->string.find("host 1 died"),
            std::string::npos);
}

TEST_F(TraceRecorderTest, WaitsAreEventsNamedByTheirReason) {
  WaitEvent wait;
  wait.time = t0_;
  wait.device = DeviceId(1);
  wait.host = HostId(0);
  wait.seq = 9;
  wait.program = "jit_step";
  wait.reason = WaitEvent::Reason::kMemory;
  wait.detail = "needs 4096 bytes, 0 free";
  recorder_.WaitStarted(wait);
  wait.time = t0_ + absl::Microseconds(40);
  recorder_.WaitFinished(wait);
  std::unique_ptr<Json> trace = Export();
  ASSERT_NE(trace, nullptr);
  std::vector<const Json*> waits = Events(*trace, "X");
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0]->Get("name")->string, "wait for memory");
  EXPECT_EQ(waits[0]->Get("cat")->string, "wait");
  EXPECT_NEAR(waits[0]->Get("dur")->number, 40, 0.01);
  EXPECT_EQ(waits[0]->Get("args")->Get("detail")->string,
            "needs 4096 bytes, 0 free");
}

TEST_F(TraceRecorderTest, ATransferIsASendARecvAndAFlowBetweenThem) {
  TransferEvent transfer;
  transfer.time = t0_;
  transfer.transfer_id = 42;
  transfer.source_device = DeviceId(0);
  transfer.source_host = HostId(0);
  transfer.destination_device = DeviceId(5);
  transfer.destination_host = HostId(2);
  transfer.bytes = 1024;
  transfer.description = "array 3 shard 0 -> array 9 shard 1";
  recorder_.TransferStarted(transfer);
  transfer.time = t0_ + absl::Microseconds(30);
  recorder_.TransferFinished(transfer, absl::OkStatus());
  std::unique_ptr<Json> trace = Export();
  ASSERT_NE(trace, nullptr);
  std::vector<const Json*> slices = Events(*trace, "X");
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0]->Get("name")->string, "send");
  EXPECT_EQ(slices[0]->Get("tid")->number,
            TraceRecorder::kTransferTidOffset + 0);
  EXPECT_EQ(slices[1]->Get("name")->string, "recv");
  EXPECT_EQ(slices[1]->Get("pid")->number, 2);
  EXPECT_EQ(slices[1]->Get("args")->Get("bytes")->number, 1024);
  std::vector<const Json*> starts = Events(*trace, "s");
  std::vector<const Json*> finishes = Events(*trace, "f");
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(finishes.size(), 1u);
  EXPECT_EQ(starts[0]->Get("id")->number, 42);
  EXPECT_EQ(finishes[0]->Get("id")->number, 42);
}

TEST_F(TraceRecorderTest, LaunchesAreInstantsOnTheHeadTrack) {
  LaunchEvent launch;
  launch.time = t0_;
  launch.island = IslandId(1);
  launch.seq = 3;
  launch.session_name = "s";
  launch.program = "prog \"quoted\"\n";
  launch.devices = {DeviceId(4), DeviceId(5)};
  recorder_.LaunchDispatched(launch);
  std::unique_ptr<Json> trace = Export();
  ASSERT_NE(trace, nullptr);
  std::vector<const Json*> instants = Events(*trace, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]->Get("pid")->number, TraceRecorder::kHeadPid);
  EXPECT_EQ(instants[0]->Get("name")->string, "prog \"quoted\"\n");
  EXPECT_EQ(instants[0]->Get("args")->Get("devices")->array.size(), 2u);
}

TEST_F(TraceRecorderTest, KeepsOnlyTheNewestEventsAndCountsTheRest) {
  TraceRecorder small(TraceRecorder::Options{.max_events = 4});
  for (int i = 0; i < 10; ++i) {
    OpEvent op = Op(0, i, t0_ + absl::Microseconds(i));
    small.OpStarted(op);
    small.OpFinished(op, absl::OkStatus());
  }
  EXPECT_EQ(small.num_events(), 4u);
  EXPECT_EQ(small.num_dropped(), 6);
  absl::StatusOr<std::string> text = small.ExportChromeTrace();
  ASSERT_TRUE(text.ok());
  std::unique_ptr<Json> trace = JsonReader(*text).ParseDocument();
  ASSERT_NE(trace, nullptr);
  EXPECT_EQ(trace->Get("otherData")->Get("dropped_events")->number, 6);
  std::vector<const Json*> ops = Events(*trace, "X");
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0]->Get("args")->Get("seq")->number, 6);  // Oldest kept.
}

TEST_F(TraceRecorderTest, NonAsciiProgramNamesComeBackAsWritten) {
  // UTF-8 of two, three and four bytes a character, read back by a JSON
  // library that decodes the text as UTF-8.
  const std::string program = "\u0448\u0430\u0433 \u5b66\u4e60 \U0001F680";
  OpEvent op = Op(1, 4, t0_);
  op.program = program;
  op.session_name = "s\u00e9ance";
  recorder_.OpStarted(op);
  op.time += absl::Microseconds(5);
  recorder_.OpFinished(op, absl::OkStatus());
  absl::StatusOr<std::string> text = recorder_.ExportChromeTrace();
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json trace = nlohmann::json::parse(*text);
  std::vector<nlohmann::json> ops;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["ph"] == "X") ops.push_back(event);
  }
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0]["name"].get<std::string>(), program);
  EXPECT_EQ(ops[0]["args"]["session"].get<std::string>(), "s\u00e9ance");
}

TEST_F(TraceRecorderTest, BytesThatAreNotUtf8StillExportValidJson) {
  OpEvent op = Op(0, 1, t0_);
  op.program = "step\xff\xfe";
  recorder_.OpStarted(op);
  recorder_.OpFinished(op, absl::OkStatus());
  absl::StatusOr<std::string> text = recorder_.ExportChromeTrace();
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json trace = nlohmann::json::parse(*text);
  bool found = false;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    found = true;
    // Each invalid byte is U+FFFD (EF BF BD).
    EXPECT_EQ(event["name"].get<std::string>(), "step\xef\xbf\xbd\xef\xbf\xbd");
  }
  EXPECT_TRUE(found);
}

TEST_F(TraceRecorderTest, AnEmptyRecorderExportsAnEmptyValidTrace) {
  std::unique_ptr<Json> trace = Export();
  ASSERT_NE(trace, nullptr);
  EXPECT_TRUE(trace->Get("traceEvents")->array.empty());
}

}  // namespace trace_recorder_test
}  // namespace causeway::trace
