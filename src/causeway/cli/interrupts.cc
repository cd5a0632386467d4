#include "causeway/cli/interrupts.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <utility>

#include "causeway/cli/exit_codes.h"

namespace causeway::cli {
namespace {

std::atomic<int> write_end{-1};
std::atomic<int> signals_seen{0};
struct sigaction previous_int;
struct sigaction previous_term;

// Async-signal-safe: write and _exit only.
void OnSignal(int signal) {
  if (signals_seen.fetch_add(1) > 0) _exit(kExitInterrupted);
  const int fd = write_end.load();
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(signal);
    [[maybe_unused]] ssize_t written = write(fd, &byte, 1);
  }
}

}  // namespace

Interrupts::Interrupts(std::function<void(int)> on_interrupt)
    : on_interrupt_(std::move(on_interrupt)) {
  if (pipe2(pipe_, O_CLOEXEC) != 0) return;  // No watcher: signals kill.
  write_end.store(pipe_[1]);
  signals_seen.store(0);
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
  watcher_ = std::thread([this] { Watch(); });
}

Interrupts::~Interrupts() {
  if (!watcher_.joinable()) return;
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
  write_end.store(-1);
  const unsigned char done = 0;  // Not a signal: ends the watcher.
  [[maybe_unused]] ssize_t written = write(pipe_[1], &done, 1);
  watcher_.join();
  close(pipe_[0]);
  close(pipe_[1]);
}

void Interrupts::Watch() {
  while (true) {
    unsigned char byte = 0;
    const ssize_t got = read(pipe_[0], &byte, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0 || byte == 0) return;
    on_interrupt_(byte);
  }
}

}  // namespace causeway::cli
