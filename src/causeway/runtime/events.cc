#include "causeway/runtime/events.h"

namespace causeway::runtime {

EventSink& NullEventSink() {
  static EventSink* const sink = new EventSink();
  return *sink;
}

}  // namespace causeway::runtime
