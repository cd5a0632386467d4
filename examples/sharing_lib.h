// Sharing one island between sessions: three sessions each ask for 2 of
// the island's 4 devices. The first two are granted at once; the third
// waits in the resource manager's queue (its program is compiled and its
// work submitted meanwhile: compile before provisioning) and runs as soon
// as the first session ends and gives its devices back.
#ifndef CAUSEWAY_EXAMPLES_SHARING_LIB_H_
#define CAUSEWAY_EXAMPLES_SHARING_LIB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/client/client.h"

namespace causeway::examples {

struct TimelineEvent {
  absl::Duration at;    // Since the start.
  std::string session;  // "A", "B", "C".
  std::string what;
};

struct SharingResult {
  std::vector<TimelineEvent> timeline;
  // What each session computed (x * 2 + session index, summed), to check.
  std::vector<float> results;
  // "  0.0 ms  A  granted devices [0, 1]" lines.
  std::string ToString() const;
  // The first time `session` did `what_prefix...`; -1 if never.
  int Index(const std::string& session, const std::string& what_prefix) const;
};

// Runs the scenario on `client`, whose cluster must have an island of 4
// devices (island 0) and no other session on it.
absl::StatusOr<SharingResult> RunSharing(client::Client& client);

}  // namespace causeway::examples

#endif  // CAUSEWAY_EXAMPLES_SHARING_LIB_H_
