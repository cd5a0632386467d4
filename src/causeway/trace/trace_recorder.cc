#include "causeway/trace/trace_recorder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace causeway::trace {
namespace {

// A JSON string literal. Bytes outside printable ASCII are escaped, so the
// output is valid JSON (and ASCII) whatever the names contain.
std::string Quote(std::string_view text) {
  // Most names need no escape: one copy.
  bool plain = true;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f) {
      plain = false;
      break;
    }
  }
  if (plain) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    out.append(text);
    out += '"';
    return out;
  }
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
}

// `value` (microseconds) with three decimals, rounded to the nanosecond,
// without printf's floating-point formatting: events are recorded on device
// threads, and printf's exact decimal conversion cost more than the rest of
// the recording.
std::string Number(double value) {
  const int64_t thousandths = std::llround(value * 1000);
  const uint64_t magnitude = thousandths < 0
                                 ? -static_cast<uint64_t>(thousandths)
                                 : static_cast<uint64_t>(thousandths);
  return absl::StrCat(thousandths < 0 ? "-" : "", magnitude / 1000, ".",
                      absl::Dec(magnitude % 1000, absl::kZeroPad3));
}

std::string StatusText(const absl::Status& status) {
  return status.ok() ? "OK" : status.ToString();
}

const char* WaitName(WaitEvent::Reason reason) {
  return reason == WaitEvent::Reason::kMemory ? "wait for memory"
                                              : "wait for inputs";
}

}  // namespace

TraceRecorder::TraceRecorder(Options options)
    : options_(options), epoch_(absl::Now()) {}

double TraceRecorder::Micros(absl::Time time) const {
  return absl::ToDoubleMicroseconds(time - epoch_);
}

void TraceRecorder::AddLocked(Entry entry) {
  if (events_.size() >= options_.max_events) {
    events_.pop_front();
    ++dropped_;
  }
  events_.push_back(Recorded{absl::Now(), std::move(entry)});
}

void TraceRecorder::NoteTrackLocked(int64_t pid, int64_t tid) {
  tracks_.emplace(pid, tid);
}

void TraceRecorder::LaunchDispatched(const LaunchEvent& event) {
  absl::MutexLock lock(&mu_);
  NoteTrackLocked(kHeadPid, event.island.value());
  AddLocked(event);
}

void TraceRecorder::OpEnqueued(const OpEvent& event) {
  absl::MutexLock lock(&mu_);
  if (enqueued_.size() >= options_.max_events) {
    ++dropped_;
    return;
  }
  enqueued_[{event.device.value(), event.seq, event.partition}] = event.time;
}

void TraceRecorder::OpStarted(const OpEvent& event) {
  absl::MutexLock lock(&mu_);
  if (started_.size() >= options_.max_events) {
    ++dropped_;
    return;
  }
  started_[{event.device.value(), event.seq, event.partition}] = event.time;
}

void TraceRecorder::OpFinished(const OpEvent& event,
                               const absl::Status& status) {
  const OpKey key{event.device.value(), event.seq, event.partition};
  FinishedOp op{event, status, std::nullopt, std::nullopt};
  absl::MutexLock lock(&mu_);
  auto enqueued = enqueued_.find(key);
  auto started = started_.find(key);
  if (enqueued != enqueued_.end()) {
    const absl::Time until =
        started != started_.end() ? started->second : event.time;
    op.queued = until - enqueued->second;
    enqueued_.erase(enqueued);
  }
  if (started != started_.end()) {
    op.started = started->second;
    started_.erase(started);
  }
  NoteTrackLocked(event.host.value(), event.device.value());
  AddLocked(std::move(op));
}

std::string TraceRecorder::ToJson(const Entry& entry) const {
  if (const auto* json = std::get_if<std::string>(&entry)) return *json;
  if (const auto* launch = std::get_if<LaunchEvent>(&entry)) {
    std::vector<int64_t> devices;
    for (DeviceId device : launch->devices) devices.push_back(device.value());
    return absl::StrCat(
        "{\"name\":", Quote(launch->program),
        ",\"cat\":\"launch\",\"ph\":\"i\",\"s\":\"t\",\"pid\":", kHeadPid,
        ",\"tid\":", launch->island.value(),
        ",\"ts\":", Number(Micros(launch->time)),
        ",\"args\":{\"session\":", Quote(launch->session_name),
        ",\"seq\":", launch->seq, ",\"devices\":[",
        absl::StrJoin(devices, ","), "]}}");
  }
  const FinishedOp& op = std::get<FinishedOp>(entry);
  const OpEvent& event = op.event;
  std::string args = absl::StrCat(
      "{\"session\":", Quote(event.session_name), ",\"seq\":", event.seq,
      ",\"partition\":", Quote(absl::StrCat(event.partition, "/",
                                            event.num_partitions)),
      ",\"status\":", Quote(StatusText(op.status)));
  if (op.queued.has_value()) {
    absl::StrAppend(&args, ",\"queued_us\":",
                    Number(absl::ToDoubleMicroseconds(*op.queued)));
  }
  args += "}";
  if (!op.started.has_value()) {
    // Never ran: its inputs failed, or its host lost a peer.
    return absl::StrCat(
        "{\"name\":", Quote(absl::StrCat(event.program, " (not run)")),
        ",\"cat\":\"op\",\"ph\":\"i\",\"s\":\"t\",\"pid\":", event.host.value(),
        ",\"tid\":", event.device.value(),
        ",\"ts\":", Number(Micros(event.time)), ",\"args\":", args, "}");
  }
  const double begin = Micros(*op.started);
  return absl::StrCat(
      "{\"name\":", Quote(event.program),
      ",\"cat\":\"op\",\"ph\":\"X\",\"pid\":", event.host.value(),
      ",\"tid\":", event.device.value(), ",\"ts\":", Number(begin), ",\"dur\":",
      Number(Micros(event.time) - begin), ",\"args\":", args, "}");
}

void TraceRecorder::WaitStarted(const WaitEvent& event) {
  absl::MutexLock lock(&mu_);
  if (waiting_.size() >= options_.max_events) {
    ++dropped_;
    return;
  }
  waiting_[{event.device.value(), event.seq,
            static_cast<int>(event.reason)}] = event.time;
}

void TraceRecorder::WaitFinished(const WaitEvent& event) {
  absl::MutexLock lock(&mu_);
  auto it = waiting_.find(
      {event.device.value(), event.seq, static_cast<int>(event.reason)});
  if (it == waiting_.end()) return;
  const double begin = Micros(it->second);
  waiting_.erase(it);
  NoteTrackLocked(event.host.value(), event.device.value());
  AddLocked(absl::StrCat(
      "{\"name\":", Quote(WaitName(event.reason)),
      ",\"cat\":\"wait\",\"ph\":\"X\",\"pid\":", event.host.value(),
      ",\"tid\":", event.device.value(), ",\"ts\":", Number(begin),
      ",\"dur\":", Number(Micros(event.time) - begin),
      ",\"args\":{\"program\":", Quote(event.program), ",\"seq\":", event.seq,
      ",\"detail\":", Quote(event.detail), "}}"));
}

void TraceRecorder::TransferStarted(const TransferEvent& event) {
  absl::MutexLock lock(&mu_);
  if (transfers_.size() >= options_.max_events) {
    ++dropped_;
    return;
  }
  transfers_[event.transfer_id] = event.time;
}

void TraceRecorder::TransferFinished(const TransferEvent& event,
                                     const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  auto it = transfers_.find(event.transfer_id);
  const absl::Time start = it != transfers_.end() ? it->second : event.time;
  if (it != transfers_.end()) transfers_.erase(it);
  const double begin = Micros(start);
  const double dur = Micros(event.time) - begin;
  const int64_t src_tid = kTransferTidOffset + event.source_device.value();
  const int64_t dst_tid = kTransferTidOffset + event.destination_device.value();
  const std::string args = absl::StrCat(
      "{\"bytes\":", event.bytes, ",\"what\":", Quote(event.description),
      ",\"status\":", Quote(StatusText(status)), "}");
  NoteTrackLocked(event.source_host.value(), src_tid);
  NoteTrackLocked(event.destination_host.value(), dst_tid);
  AddLocked(absl::StrCat(
      "{\"name\":\"send\",\"cat\":\"transfer\",\"ph\":\"X\",\"pid\":",
      event.source_host.value(), ",\"tid\":", src_tid, ",\"ts\":",
      Number(begin), ",\"dur\":", Number(dur), ",\"args\":", args, "}"));
  AddLocked(absl::StrCat(
      "{\"name\":\"recv\",\"cat\":\"transfer\",\"ph\":\"X\",\"pid\":",
      event.destination_host.value(), ",\"tid\":", dst_tid, ",\"ts\":",
      Number(begin), ",\"dur\":", Number(dur), ",\"args\":", args, "}"));
  // A flow arrow from the send to the receive.
  AddLocked(absl::StrCat(
      "{\"name\":\"transfer\",\"cat\":\"transfer\",\"ph\":\"s\",\"id\":",
      event.transfer_id, ",\"pid\":", event.source_host.value(),
      ",\"tid\":", src_tid, ",\"ts\":", Number(begin), "}"));
  AddLocked(absl::StrCat(
      "{\"name\":\"transfer\",\"cat\":\"transfer\",\"ph\":\"f\",\"bp\":\"e\","
      "\"id\":",
      event.transfer_id, ",\"pid\":", event.destination_host.value(),
      ",\"tid\":", dst_tid, ",\"ts\":", Number(begin), "}"));
}

void TraceRecorder::HostStateChanged(const HostEvent& event) {
  absl::MutexLock lock(&mu_);
  AddLocked(absl::StrCat(
      "{\"name\":", Quote(absl::StrCat("host ", event.host.value(), ": ",
                                       event.what)),
      ",\"cat\":\"host\",\"ph\":\"i\",\"s\":\"g\",\"pid\":",
      event.host.value(), ",\"tid\":0,\"ts\":", Number(Micros(event.time)),
      "}"));
}

absl::StatusOr<std::string> TraceRecorder::ExportChromeTrace() {
  return ExportChromeTraceSince(absl::InfinitePast());
}

absl::StatusOr<std::string> TraceRecorder::ExportChromeTraceSince(
    absl::Time since) {
  // The events are copied under the lock and formatted after it, so that
  // recording never waits for the formatting.
  std::vector<Entry> events;
  int64_t dropped = 0;
  std::set<std::pair<int64_t, int64_t>> tracks;
  {
    absl::MutexLock lock(&mu_);
    // Recorded in order: the recent ones are at the back.
    auto first = std::partition_point(
        events_.begin(), events_.end(),
        [since](const Recorded& recorded) { return recorded.at < since; });
    events.reserve(events_.end() - first);
    for (auto it = first; it != events_.end(); ++it) {
      events.push_back(it->entry);
    }
    dropped = dropped_;
    tracks = tracks_;
  }
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto add = [&](const std::string& json) {
    if (!first) out += ",\n";
    first = false;
    out += json;
  };
  std::set<int64_t> pids;
  for (const auto& [pid, tid] : tracks) pids.insert(pid);
  for (int64_t pid : pids) {
    const std::string name =
        pid == kHeadPid ? "head" : absl::StrCat("host ", pid);
    add(absl::StrCat("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", pid,
                     ",\"tid\":0,\"args\":{\"name\":", Quote(name), "}}"));
  }
  for (const auto& [pid, tid] : tracks) {
    std::string name;
    int64_t sort;
    if (pid == kHeadPid) {
      name = absl::StrCat("island ", tid);
      sort = tid;
    } else if (tid >= kTransferTidOffset) {
      name = absl::StrCat("device ", tid - kTransferTidOffset, " transfers");
      sort = 2 * (tid - kTransferTidOffset) + 1;
    } else {
      name = absl::StrCat("device ", tid);
      sort = 2 * tid;
    }
    add(absl::StrCat("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", pid,
                     ",\"tid\":", tid, ",\"args\":{\"name\":", Quote(name),
                     "}}"));
    add(absl::StrCat("{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":",
                     pid, ",\"tid\":", tid, ",\"args\":{\"sort_index\":",
                     sort, "}}"));
  }
  for (const Entry& event : events) add(ToJson(event));
  absl::StrAppend(&out, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{",
                  "\"dropped_events\":", dropped, "}}\n");
  return out;
}

size_t TraceRecorder::num_events() const {
  absl::MutexLock lock(&mu_);
  return events_.size();
}

int64_t TraceRecorder::num_dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

void TraceRecorder::Clear() {
  absl::MutexLock lock(&mu_);
  events_.clear();
  dropped_ = 0;
  enqueued_.clear();
  started_.clear();
  waiting_.clear();
  transfers_.clear();
  tracks_.clear();
}

}  // namespace causeway::trace
