// Test support (not part of the runtime): one KeyValueStore shared by a
// test process and the child processes it starts, over each child's stdin
// and stdout. The runtime's workers reach the head's store over their gRPC
// stream instead; this exists so that the multi-process collectives tests
// and benchmark need no head.
//
// The child side is StreamKeyValueStore (requests out on one fd, replies in
// on another); the parent side is StoreServer, which answers from an
// InProcessKeyValueStore. The same pipes carry two more kinds of line:
// reports from the child to the parent (what the child did: "ready",
// results) and commands from the parent to the child ("abort ...").
//
// The pipe is a Unix socket pair (writes use MSG_NOSIGNAL: a peer that died
// is an error, not a SIGPIPE). Lines: "S id key value", "G id key
// timeout_ms", "D id prefix" (requests), "O id value" / "E id code message"
// (replies), "R text" (report), "C text" (command); keys, values and
// messages are hex-encoded.
#ifndef CAUSEWAY_TRANSPORT_TESTING_STREAM_KEY_VALUE_STORE_H_
#define CAUSEWAY_TRANSPORT_TESTING_STREAM_KEY_VALUE_STORE_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/transport/in_process_key_value_store.h"
#include "causeway/transport/key_value_store.h"

namespace causeway::transport::testing {

// The child's store. Thread-safe. Futures resolve on the reader thread.
// When the parent goes away (end of stream), every pending call fails with
// Unavailable and later ones fail at once.
class StreamKeyValueStore final : public KeyValueStore {
 public:
  // Reads replies and commands from `in_fd`, writes requests and reports to
  // `out_fd` (ends of the socket pair; 0 and 1 in a child SpawnChild made).
  // `on_command` runs on the reader thread for each command.
  StreamKeyValueStore(int in_fd, int out_fd,
                      std::function<void(const std::string&)> on_command);
  ~StreamKeyValueStore() override;  // Stops and joins the reader.

  Future<> Set(std::string key, std::string value) override;
  Future<std::string> Get(std::string key, absl::Time deadline) override;
  Future<> DeletePrefix(std::string prefix) override;

  // Sends a report line to the parent.
  void Report(const std::string& text);

 private:
  Future<std::string> Call(const std::string& verb,
                           const std::vector<std::string>& args);
  void ReadLoop();
  void WriteLine(const std::string& line);

  const int in_fd_;
  const int out_fd_;
  const std::function<void(const std::string&)> on_command_;
  absl::Mutex write_mu_;
  absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, Promise<std::string>> pending_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
};

// A child process the parent started.
struct Child {
  pid_t pid = -1;
  int fd = -1;  // The parent's end of the socket pair on the child's stdio.
};

// Starts `argv` with one end of a socket pair as its stdin and stdout
// (stderr is inherited).
absl::StatusOr<Child> SpawnChild(const std::vector<std::string>& argv);

// The parent's side: serves one store to many children and collects their
// reports. Thread-safe. Destruction kills (SIGKILL) and reaps every child
// still running, so a failing test leaves no process behind.
class StoreServer {
 public:
  StoreServer();
  ~StoreServer();

  InProcessKeyValueStore& store() { return store_; }

  // Starts a child and serves it; returns its index.
  absl::StatusOr<int> Start(const std::vector<std::string>& argv);
  pid_t pid(int child) const;
  // Sends a command line to a child.
  void Command(int child, const std::string& text);
  // The child's next report line, waiting until `deadline`:
  // DeadlineExceeded, or Unavailable once the child has ended without one.
  absl::StatusOr<std::string> NextReport(int child, absl::Time deadline);
  // Sends `signal` to a child.
  void Signal(int child, int signal);
  // Waits until `deadline` for the child to exit; its wait status.
  absl::StatusOr<int> Reap(int child, absl::Time deadline);

 private:
  // Shared with the store's continuations, which may outlive the child.
  struct Served {
    ~Served();  // Closes the fd.
    Child process;
    std::thread reader;
    absl::Mutex write_mu;
    absl::Mutex mu;
    std::deque<std::string> reports ABSL_GUARDED_BY(mu);
    bool ended ABSL_GUARDED_BY(mu) = false;
    bool reaped ABSL_GUARDED_BY(mu) = false;
    int wait_status ABSL_GUARDED_BY(mu) = 0;
  };
  static void Serve(InProcessKeyValueStore* store,
                    std::shared_ptr<Served> served);
  static void Reply(Served& served, const std::string& line);
  std::shared_ptr<Served> Get(int child) const;

  InProcessKeyValueStore store_;  // Destroyed last.
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<Served>> children_ ABSL_GUARDED_BY(mu_);
};

// Hex for the line format.
std::string ToHex(const std::string& bytes);
absl::StatusOr<std::string> FromHex(const std::string& hex);

}  // namespace causeway::transport::testing

#endif  // CAUSEWAY_TRANSPORT_TESTING_STREAM_KEY_VALUE_STORE_H_
