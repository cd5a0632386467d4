#include "causeway/trace/trace_recorder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace causeway::trace {
namespace {

using Json = nlohmann::json;

// Microseconds with three decimals (the nanosecond): what the viewers read.
double Rounded(double micros) { return std::round(micros * 1000) / 1000; }

// One trace event per line. Names are UTF-8 as the user wrote them; bytes
// that are not UTF-8 become U+FFFD rather than an invalid document.
void AppendEvent(const Json& event, std::string& out) {
  if (!out.empty() && out.back() != '[') out += ",";
  out += "\n";
  out += event.dump(-1, ' ', false, Json::error_handler_t::replace);
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

void TraceRecorder::AppendJson(const Entry& entry, std::string& out) const {
  if (const auto* launch = std::get_if<LaunchEvent>(&entry)) {
    Json devices = Json::array();
    for (DeviceId device : launch->devices) devices.push_back(device.value());
    AppendEvent({{"name", launch->program},
                 {"cat", "launch"},
                 {"ph", "i"},
                 {"s", "t"},
                 {"pid", kHeadPid},
                 {"tid", launch->island.value()},
                 {"ts", Rounded(Micros(launch->time))},
                 {"args",
                  {{"session", launch->session_name},
                   {"seq", launch->seq},
                   {"devices", std::move(devices)}}}},
                out);
    return;
  }
  if (const auto* wait = std::get_if<FinishedWait>(&entry)) {
    const WaitEvent& event = wait->event;
    const double begin = Micros(wait->started);
    AppendEvent({{"name", WaitName(event.reason)},
                 {"cat", "wait"},
                 {"ph", "X"},
                 {"pid", event.host.value()},
                 {"tid", event.device.value()},
                 {"ts", Rounded(begin)},
                 {"dur", Rounded(Micros(event.time) - begin)},
                 {"args",
                  {{"program", event.program},
                   {"seq", event.seq},
                   {"detail", event.detail}}}},
                out);
    return;
  }
  if (const auto* transfer = std::get_if<FinishedTransfer>(&entry)) {
    const TransferEvent& event = transfer->event;
    const double begin = Rounded(Micros(transfer->started));
    const double dur = Rounded(Micros(event.time) - Micros(transfer->started));
    const int64_t src_tid = kTransferTidOffset + event.source_device.value();
    const int64_t dst_tid =
        kTransferTidOffset + event.destination_device.value();
    const Json args = {{"bytes", event.bytes},
                       {"what", event.description},
                       {"status", StatusText(transfer->status)}};
    AppendEvent({{"name", "send"},
                 {"cat", "transfer"},
                 {"ph", "X"},
                 {"pid", event.source_host.value()},
                 {"tid", src_tid},
                 {"ts", begin},
                 {"dur", dur},
                 {"args", args}},
                out);
    AppendEvent({{"name", "recv"},
                 {"cat", "transfer"},
                 {"ph", "X"},
                 {"pid", event.destination_host.value()},
                 {"tid", dst_tid},
                 {"ts", begin},
                 {"dur", dur},
                 {"args", args}},
                out);
    // A flow arrow from the send to the receive.
    AppendEvent({{"name", "transfer"},
                 {"cat", "transfer"},
                 {"ph", "s"},
                 {"id", event.transfer_id},
                 {"pid", event.source_host.value()},
                 {"tid", src_tid},
                 {"ts", begin}},
                out);
    AppendEvent({{"name", "transfer"},
                 {"cat", "transfer"},
                 {"ph", "f"},
                 {"bp", "e"},
                 {"id", event.transfer_id},
                 {"pid", event.destination_host.value()},
                 {"tid", dst_tid},
                 {"ts", begin}},
                out);
    return;
  }
  if (const auto* host = std::get_if<HostEvent>(&entry)) {
    AppendEvent(
        {{"name", absl::StrCat("host ", host->host.value(), ": ", host->what)},
         {"cat", "host"},
         {"ph", "i"},
         {"s", "g"},
         {"pid", host->host.value()},
         {"tid", 0},
         {"ts", Rounded(Micros(host->time))}},
        out);
    return;
  }
  const FinishedOp& op = std::get<FinishedOp>(entry);
  const OpEvent& event = op.event;
  Json args = {
      {"session", event.session_name},
      {"seq", event.seq},
      {"partition", absl::StrCat(event.partition, "/", event.num_partitions)},
      {"status", StatusText(op.status)}};
  if (op.queued.has_value()) {
    args["queued_us"] = Rounded(absl::ToDoubleMicroseconds(*op.queued));
  }
  if (!op.started.has_value()) {
    // Never ran: its inputs failed, or its host lost a peer.
    AppendEvent({{"name", absl::StrCat(event.program, " (not run)")},
                 {"cat", "op"},
                 {"ph", "i"},
                 {"s", "t"},
                 {"pid", event.host.value()},
                 {"tid", event.device.value()},
                 {"ts", Rounded(Micros(event.time))},
                 {"args", std::move(args)}},
                out);
    return;
  }
  const double begin = Micros(*op.started);
  AppendEvent({{"name", event.program},
               {"cat", "op"},
               {"ph", "X"},
               {"pid", event.host.value()},
               {"tid", event.device.value()},
               {"ts", Rounded(begin)},
               {"dur", Rounded(Micros(event.time) - begin)},
               {"args", std::move(args)}},
              out);
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
  const absl::Time started = it->second;
  waiting_.erase(it);
  NoteTrackLocked(event.host.value(), event.device.value());
  AddLocked(FinishedWait{event, started});
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
  NoteTrackLocked(event.source_host.value(),
                  kTransferTidOffset + event.source_device.value());
  NoteTrackLocked(event.destination_host.value(),
                  kTransferTidOffset + event.destination_device.value());
  AddLocked(FinishedTransfer{event, status, start});
}

void TraceRecorder::HostStateChanged(const HostEvent& event) {
  absl::MutexLock lock(&mu_);
  AddLocked(event);
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
  std::string out = "{\"traceEvents\":[";
  std::set<int64_t> pids;
  for (const auto& [pid, tid] : tracks) pids.insert(pid);
  for (int64_t pid : pids) {
    const std::string name =
        pid == kHeadPid ? "head" : absl::StrCat("host ", pid);
    AppendEvent({{"name", "process_name"},
                 {"ph", "M"},
                 {"pid", pid},
                 {"tid", 0},
                 {"args", {{"name", name}}}},
                out);
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
    AppendEvent({{"name", "thread_name"},
                 {"ph", "M"},
                 {"pid", pid},
                 {"tid", tid},
                 {"args", {{"name", name}}}},
                out);
    AppendEvent({{"name", "thread_sort_index"},
                 {"ph", "M"},
                 {"pid", pid},
                 {"tid", tid},
                 {"args", {{"sort_index", sort}}}},
                out);
  }
  for (const Entry& event : events) AppendJson(event, out);
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
