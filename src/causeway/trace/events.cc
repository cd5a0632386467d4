#include "causeway/trace/events.h"

namespace causeway::trace {

EventSink& NullEventSink() {
  static EventSink* const sink = new EventSink();
  return *sink;
}

}  // namespace causeway::trace
