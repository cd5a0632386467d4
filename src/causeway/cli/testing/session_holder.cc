// A client process for the multi-process tests: connects to --head, opens
// a session, takes a slice of --devices devices and, once it is granted,
// prints `holding N devices` and waits to be killed or stopped. The tests
// kill it (its stream breaks) or stop it (it goes silent: its lease ends).
// Continued after a stop (SIGCONT), it asks the head about its slice and
// prints `after the stop: STATUS`, the head's answer: for a session that
// ended, why the head ended it.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "causeway/client/connect.h"

int main(int argc, char** argv) {
  std::string head;
  int64_t devices = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--head") head = argv[i + 1];
    if (flag == "--devices" && !absl::SimpleAtoi(argv[i + 1], &devices)) {
      devices = 0;  // Not a number: the usage below.
    }
  }
  if (head.empty() || devices < 1) {
    std::fprintf(stderr, "usage: session_holder --head HOST:PORT --devices N\n");
    return 2;
  }
  // Blocked before the client starts its threads, so that every thread
  // inherits the mask and the SIGCONT reaches the sigwait below. (A
  // blocked SIGCONT still continues the process.)
  sigset_t continued;
  sigemptyset(&continued);
  sigaddset(&continued, SIGCONT);
  pthread_sigmask(SIG_BLOCK, &continued, nullptr);
  auto client = causeway::client::Connect(head);
  if (!client.ok()) {
    std::fprintf(stderr, "session_holder: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto session = (*client)->OpenSession({.name = "holder"});
  if (!session.ok()) {
    std::fprintf(stderr, "session_holder: %s\n", session.status().ToString().c_str());
    return 1;
  }
  auto slice = session->CreateSlice(devices);
  if (!slice.ok()) {
    std::fprintf(stderr, "session_holder: %s\n", slice.status().ToString().c_str());
    return 1;
  }
  auto granted = slice->Ready().Await();
  if (!granted.ok()) {
    std::fprintf(stderr, "session_holder: %s\n", granted.status().ToString().c_str());
    return 1;
  }
  std::printf("holding %lld devices\n", static_cast<long long>(devices));
  std::fflush(stdout);
  while (true) {
    int signal = 0;
    sigwait(&continued, &signal);
    const absl::Status info =
        slice->Info().AwaitFor(absl::Seconds(30)).status();
    std::printf("after the stop: %s\n", info.ToString().c_str());
    std::fflush(stdout);
  }
}
