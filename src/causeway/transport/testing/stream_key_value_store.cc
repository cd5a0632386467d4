#include "causeway/transport/testing/stream_key_value_store.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "causeway/base/logging.h"

extern char** environ;

namespace causeway::transport::testing {
namespace {

// Reads '\n'-terminated lines from a file descriptor.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  // False at end of stream or on an error.
  bool Next(std::string* line) {
    while (true) {
      const size_t end = buffer_.find('\n');
      if (end != std::string::npos) {
        *line = buffer_.substr(0, end);
        buffer_.erase(0, end + 1);
        return true;
      }
      char chunk[4096];
      const ssize_t n = ::read(fd_, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  const int fd_;
  std::string buffer_;
};

// Writes all of `line` and a newline; false if the other side is gone.
bool WriteAll(int fd, const std::string& line) {
  const std::string data = line + "\n";
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n =
        ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::vector<std::string> Fields(const std::string& line) {
  return absl::StrSplit(line, ' ');
}

std::string ErrorReply(uint64_t id, const absl::Status& status) {
  return absl::StrCat("E ", id, " ", static_cast<int>(status.code()), " ",
                      ToHex(std::string(status.message())));
}

}  // namespace

std::string ToHex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2 + 1);
  hex.push_back('x');  // Never empty, so fields never vanish.
  for (unsigned char c : bytes) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 15]);
  }
  return hex;
}

absl::StatusOr<std::string> FromHex(const std::string& hex) {
  if (hex.empty() || hex[0] != 'x' || hex.size() % 2 != 1) {
    return absl::InvalidArgumentError(absl::StrCat("bad hex field '", hex, "'"));
  }
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string bytes;
  for (size_t i = 1; i + 1 < hex.size(); i += 2) {
    const int hi = digit(hex[i]);
    const int lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad hex field '", hex, "'"));
    }
    bytes.push_back(static_cast<char>(hi * 16 + lo));
  }
  return bytes;
}

// --- StreamKeyValueStore ---

StreamKeyValueStore::StreamKeyValueStore(
    int in_fd, int out_fd, std::function<void(const std::string&)> on_command)
    : in_fd_(in_fd),
      out_fd_(out_fd),
      on_command_(std::move(on_command)),
      reader_([this] { ReadLoop(); }) {}

StreamKeyValueStore::~StreamKeyValueStore() {
  ::shutdown(in_fd_, SHUT_RD);  // Ends the reader's read.
  reader_.join();
}

void StreamKeyValueStore::WriteLine(const std::string& line) {
  absl::MutexLock lock(&write_mu_);
  WriteAll(out_fd_, line);
}

void StreamKeyValueStore::Report(const std::string& text) {
  WriteLine(absl::StrCat("R ", text));
}

Future<std::string> StreamKeyValueStore::Call(
    const std::string& verb, const std::vector<std::string>& args) {
  auto [promise, future] = MakePromise<std::string>();
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      promise.Set(absl::UnavailableError("the store's parent is gone"));
      return std::move(future);
    }
    id = next_id_++;
    pending_.emplace(id, std::move(promise));
  }
  std::string line = absl::StrCat(verb, " ", id);
  for (const std::string& arg : args) absl::StrAppend(&line, " ", arg);
  WriteLine(line);
  return std::move(future);
}

Future<> StreamKeyValueStore::Set(std::string key, std::string value) {
  return Call("S", {ToHex(key), ToHex(value)})
      .Map(InlineExecutor::Instance(), [](const std::string&) {});
}

Future<std::string> StreamKeyValueStore::Get(std::string key,
                                             absl::Time deadline) {
  const int64_t timeout_ms =
      std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
  return Call("G", {ToHex(key), absl::StrCat(timeout_ms)});
}

Future<> StreamKeyValueStore::DeletePrefix(std::string prefix) {
  return Call("D", {ToHex(prefix)})
      .Map(InlineExecutor::Instance(), [](const std::string&) {});
}

void StreamKeyValueStore::ReadLoop() {
  LineReader reader(in_fd_);
  std::string line;
  while (reader.Next(&line)) {
    const std::vector<std::string> fields = Fields(line);
    if (fields.empty()) continue;
    if (fields[0] == "C") {
      if (on_command_) on_command_(line.size() > 2 ? line.substr(2) : "");
      continue;
    }
    uint64_t id = 0;
    if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &id)) continue;
    Promise<std::string> promise;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_.find(id);
      if (it == pending_.end()) continue;
      promise = std::move(it->second);
      pending_.erase(it);
    }
    int code = 0;
    if (fields[0] == "O" && fields.size() == 3) {
      absl::StatusOr<std::string> value = FromHex(fields[2]);
      promise.Set(std::move(value));
    } else if (fields[0] == "E" && fields.size() == 4 &&
               absl::SimpleAtoi(fields[2], &code)) {
      absl::StatusOr<std::string> message = FromHex(fields[3]);
      promise.Set(absl::Status(static_cast<absl::StatusCode>(code),
                               message.ok() ? *message : "?"));
    } else {
      promise.Set(absl::InternalError(absl::StrCat("bad reply '", line, "'")));
    }
  }
  std::map<uint64_t, Promise<std::string>> pending;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    pending.swap(pending_);
  }
  for (auto& [id, promise] : pending) {
    promise.Set(absl::UnavailableError("the store's parent is gone"));
  }
}

// --- Spawning and serving ---

absl::StatusOr<Child> SpawnChild(const std::vector<std::string>& argv) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(),
                             environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return absl::InternalError(
        absl::StrCat("cannot start ", argv[0], ": ", strerror(rc)));
  }
  return Child{.pid = pid, .fd = fds[0]};
}

StoreServer::Served::~Served() {
  if (process.fd >= 0) ::close(process.fd);
}

StoreServer::StoreServer() = default;

StoreServer::~StoreServer() {
  std::vector<std::shared_ptr<Served>> children;
  {
    absl::MutexLock lock(&mu_);
    children = children_;
  }
  for (auto& served : children) {
    bool reaped;
    {
      absl::MutexLock lock(&served->mu);
      reaped = served->reaped;
    }
    if (!reaped) {
      ::kill(served->process.pid, SIGKILL);
      int status = 0;
      ::waitpid(served->process.pid, &status, 0);
      absl::MutexLock lock(&served->mu);
      served->reaped = true;
    }
    if (served->reader.joinable()) served->reader.join();
  }
}

absl::StatusOr<int> StoreServer::Start(const std::vector<std::string>& argv) {
  absl::StatusOr<Child> child = SpawnChild(argv);
  if (!child.ok()) return child.status();
  auto served = std::make_shared<Served>();
  served->process = *child;
  served->reader = std::thread(&StoreServer::Serve, &store_, served);
  absl::MutexLock lock(&mu_);
  children_.push_back(std::move(served));
  return static_cast<int>(children_.size()) - 1;
}

std::shared_ptr<StoreServer::Served> StoreServer::Get(int child) const {
  absl::MutexLock lock(&mu_);
  CW_CHECK(child >= 0 && child < static_cast<int>(children_.size()));
  return children_[child];
}

pid_t StoreServer::pid(int child) const { return Get(child)->process.pid; }

void StoreServer::Reply(Served& served, const std::string& line) {
  absl::MutexLock lock(&served.write_mu);
  WriteAll(served.process.fd, line);
}

void StoreServer::Command(int child, const std::string& text) {
  Reply(*Get(child), absl::StrCat("C ", text));
}

void StoreServer::Signal(int child, int signal) {
  ::kill(pid(child), signal);
}

void StoreServer::Serve(InProcessKeyValueStore* store,
                        std::shared_ptr<Served> served) {
  LineReader reader(served->process.fd);
  std::string line;
  while (reader.Next(&line)) {
    const std::vector<std::string> fields = Fields(line);
    if (fields.empty()) continue;
    if (fields[0] == "R") {
      absl::MutexLock lock(&served->mu);
      served->reports.push_back(line.size() > 2 ? line.substr(2) : "");
      continue;
    }
    uint64_t id = 0;
    if (fields.size() < 3 || !absl::SimpleAtoi(fields[1], &id)) {
      CW_LOG(WARNING) << "store server: bad request '" << line << "'";
      continue;
    }
    absl::StatusOr<std::string> key = FromHex(fields[2]);
    if (!key.ok()) {
      Reply(*served, ErrorReply(id, key.status()));
      continue;
    }
    auto reply_value = [served, id](const absl::StatusOr<std::string>& value) {
      Reply(*served, value.ok() ? absl::StrCat("O ", id, " ", ToHex(*value))
                                : ErrorReply(id, value.status()));
    };
    auto reply_status = [served, id](const absl::Status& status) {
      Reply(*served, status.ok() ? absl::StrCat("O ", id, " ", ToHex(""))
                                 : ErrorReply(id, status));
    };
    int64_t timeout_ms = 0;
    if (fields[0] == "S" && fields.size() == 4) {
      absl::StatusOr<std::string> value = FromHex(fields[3]);
      if (!value.ok()) {
        reply_status(value.status());
        continue;
      }
      store->Set(*key, *value).OnReady(InlineExecutor::Instance(),
                                       reply_status);
    } else if (fields[0] == "G" && fields.size() == 4 &&
               absl::SimpleAtoi(fields[3], &timeout_ms)) {
      store->Get(*key, absl::Now() + absl::Milliseconds(timeout_ms))
          .OnReady(InlineExecutor::Instance(), reply_value);
    } else if (fields[0] == "D") {
      store->DeletePrefix(*key).OnReady(InlineExecutor::Instance(),
                                        reply_status);
    } else {
      reply_status(absl::InvalidArgumentError(
          absl::StrCat("bad request '", line, "'")));
    }
  }
  absl::MutexLock lock(&served->mu);
  served->ended = true;
}

absl::StatusOr<std::string> StoreServer::NextReport(int child,
                                                    absl::Time deadline) {
  std::shared_ptr<Served> served = Get(child);
  absl::MutexLock lock(&served->mu);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(served->mu) {
    return !served->reports.empty() || served->ended;
  };
  served->mu.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (!served->reports.empty()) {
    std::string report = std::move(served->reports.front());
    served->reports.pop_front();
    return report;
  }
  if (served->ended) {
    return absl::UnavailableError(
        absl::StrCat("child ", child, " ended without a report"));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("child ", child, " sent no report in time"));
}

absl::StatusOr<int> StoreServer::Reap(int child, absl::Time deadline) {
  std::shared_ptr<Served> served = Get(child);
  {
    absl::MutexLock lock(&served->mu);
    if (served->reaped) return served->wait_status;
  }
  const pid_t pid = served->process.pid;
  // A pidfd becomes readable when the process exits: a wait with a deadline.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    return absl::InternalError(absl::StrCat("pidfd_open: ", strerror(errno)));
  }
  struct pollfd poll_fd = {.fd = pidfd, .events = POLLIN, .revents = 0};
  int ready = 0;
  do {
    const int64_t timeout_ms = std::max<int64_t>(
        0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    ready = ::poll(&poll_fd, 1, static_cast<int>(timeout_ms));
  } while (ready < 0 && errno == EINTR);
  ::close(pidfd);
  if (ready == 0) {
    return absl::DeadlineExceededError(
        absl::StrCat("child ", child, " (pid ", pid, ") did not exit in time"));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  absl::MutexLock lock(&served->mu);
  served->reaped = true;
  served->wait_status = status;
  return status;
}

}  // namespace causeway::transport::testing
