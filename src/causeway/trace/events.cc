#include "causeway/trace/events.h"

#include <utility>

namespace causeway::trace {

EventSink& NullEventSink() {
  static EventSink* const sink = new EventSink();
  return *sink;
}

namespace {

void Cut(std::string& text) {
  if (text.size() > kMaxReplayedString) text.resize(kMaxReplayedString);
}

}  // namespace

int64_t Replay(absl::Span<const EventRecord> records,
               absl::Duration clock_offset, EventSink& sink) {
  using Kind = EventRecord::Kind;
  int64_t replayed = 0;
  for (const EventRecord& record : records) {
    switch (record.kind) {
      case Kind::kOpEnqueued:
      case Kind::kOpStarted:
      case Kind::kOpFinished: {
        const auto* found = std::get_if<OpEvent>(&record.event);
        if (found == nullptr) continue;
        OpEvent event = *found;
        event.time += clock_offset;
        Cut(event.session_name);
        Cut(event.program);
        if (record.kind == Kind::kOpEnqueued) {
          sink.OpEnqueued(event);
        } else if (record.kind == Kind::kOpStarted) {
          sink.OpStarted(event);
        } else {
          sink.OpFinished(event, record.status);
        }
        break;
      }
      case Kind::kWaitStarted:
      case Kind::kWaitFinished: {
        const auto* found = std::get_if<WaitEvent>(&record.event);
        if (found == nullptr) continue;
        WaitEvent event = *found;
        event.time += clock_offset;
        Cut(event.program);
        Cut(event.detail);
        if (record.kind == Kind::kWaitStarted) {
          sink.WaitStarted(event);
        } else {
          sink.WaitFinished(event);
        }
        break;
      }
      case Kind::kTransferStarted:
      case Kind::kTransferFinished: {
        const auto* found = std::get_if<TransferEvent>(&record.event);
        if (found == nullptr) continue;
        TransferEvent event = *found;
        event.time += clock_offset;
        Cut(event.description);
        if (record.kind == Kind::kTransferStarted) {
          sink.TransferStarted(event);
        } else {
          sink.TransferFinished(event, record.status);
        }
        break;
      }
      default:
        continue;
    }
    ++replayed;
  }
  return replayed;
}

void EventBuffer::Add(EventRecord record) {
  absl::MutexLock lock(&mu_);
  if (max_events_ == 0) {
    ++dropped_;
    return;
  }
  if (records_.size() >= max_events_) {
    records_.pop_front();
    ++dropped_;
  }
  records_.push_back(std::move(record));
}

void EventBuffer::OpEnqueued(const OpEvent& event) {
  Add({EventRecord::Kind::kOpEnqueued, event, absl::OkStatus()});
}
void EventBuffer::OpStarted(const OpEvent& event) {
  Add({EventRecord::Kind::kOpStarted, event, absl::OkStatus()});
}
void EventBuffer::OpFinished(const OpEvent& event, const absl::Status& status) {
  Add({EventRecord::Kind::kOpFinished, event, status});
}
void EventBuffer::WaitStarted(const WaitEvent& event) {
  Add({EventRecord::Kind::kWaitStarted, event, absl::OkStatus()});
}
void EventBuffer::WaitFinished(const WaitEvent& event) {
  Add({EventRecord::Kind::kWaitFinished, event, absl::OkStatus()});
}
void EventBuffer::TransferStarted(const TransferEvent& event) {
  Add({EventRecord::Kind::kTransferStarted, event, absl::OkStatus()});
}
void EventBuffer::TransferFinished(const TransferEvent& event,
                                   const absl::Status& status) {
  Add({EventRecord::Kind::kTransferFinished, event, status});
}

std::vector<EventRecord> EventBuffer::Take() {
  // Swapped out under the lock, moved outside it: the device threads that
  // add events never wait for a whole batch to be moved.
  std::deque<EventRecord> taken;
  {
    absl::MutexLock lock(&mu_);
    taken.swap(records_);
  }
  return std::vector<EventRecord>(std::make_move_iterator(taken.begin()),
                                  std::make_move_iterator(taken.end()));
}

int64_t EventBuffer::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace causeway::trace
