#include "causeway/cli/top_command.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"
#include "causeway/cli/exit_codes.h"
#include "causeway/cli/flags.h"
#include "causeway/cli/head_http_client.h"
#include "causeway/cli/stop_signals.h"
#include "causeway/observe/http_server.h"
#include "causeway/observe/top_view.h"
#include "causeway/transport/grpc_common.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace causeway::cli {
namespace {

constexpr char kTopHelp[] = R"(Usage:
  causeway top --head HOST:PORT [--token-file F] [--interval S] [--once]
               [--width N] [--tls-ca F [--tls-cert F --tls-key F]]

A terminal view of a running cluster, repainted every second: every device
as a row (state, utilisation over the last minute, queue length, memory
used against its budget, the op it runs), the sessions and their slices,
queued slice requests, the last failures and host deaths. `q` quits (or
Ctrl-C). Plain ANSI escapes: any terminal, over ssh too.

  --head HOST:PORT  The head's HTTP endpoint: what `causeway head
                    --http-listen` printed as `http listening on HOST:PORT`.
  --token-file F    The cluster's token (proven, never sent).
  --tls-ca F        HTTPS: the CA that signed the head's certificate (a
  --tls-cert F      head with --tls-cert serves HTTPS only); the client
  --tls-key F       certificate to present where the head requires one.
  --interval S      Seconds between repaints (default 1).
  --once            Print one screen, without escapes, and exit.
  --width N         Columns (default: the terminal's, or 120).
)";

// The terminal in the mode top needs (keys one at a time, no echo, cursor
// hidden), restored when it goes.
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    // The alternate screen, the cursor hidden.
    std::fputs("\x1b[?1049h\x1b[?25l", stdout);
  }
  ~RawTerminal() {
    std::fputs("\x1b[?25h\x1b[?1049l", stdout);
    std::fflush(stdout);
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }

 private:
  termios saved_{};
  bool active_ = false;
};

int TerminalWidth() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 120;
}

int TerminalHeight() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > 0) {
    return size.ws_row;
  }
  return 1000;
}

absl::StatusOr<nlohmann::json> FetchStatus(
    httplib::Client& client, const transport::GrpcSecurity& security) {
  httplib::Result result =
      client.Get("/api/status", HeadHttpHeaders(security));
  if (!result) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach the head: ", httplib::to_string(result.error())));
  }
  if (result->status != 200) {
    std::string why = result->body;
    nlohmann::json body = nlohmann::json::parse(result->body, nullptr, false);
    if (body.is_object() && body.contains("error") && body["error"].is_string()) {
      why = body["error"].get<std::string>();
    }
    return absl::UnavailableError(
        absl::StrCat("the head answered ", result->status, ": ", why));
  }
  nlohmann::json status = nlohmann::json::parse(result->body, nullptr, false);
  if (status.is_discarded()) {
    return absl::DataLossError("the head's answer is not JSON");
  }
  return status;
}

}  // namespace

int TopCommand(const std::vector<std::string>& args) {
  StopSignals& signals = StopSignals::Install();
  absl::StatusOr<ParsedFlags> parsed =
      ParseFlags(args, {{"--head"},
                        {"--token-file"},
                        {"--tls-ca"},
                        {"--tls-cert"},
                        {"--tls-key"},
                        {"--interval"},
                        {"--width"},
                        {"--once", /*takes_value=*/false}});
  if (parsed.ok() && parsed->help) {
    std::printf("%s", kTopHelp);
    return kExitOk;
  }
  absl::Status usage = parsed.status();
  std::string head;
  transport::GrpcSecurity security;
  absl::Duration interval = absl::Seconds(1);
  std::optional<int64_t> width;
  if (usage.ok()) {
    absl::StatusOr<std::string> address = AddressFlag(*parsed, "--head");
    usage = address.status();
    if (usage.ok()) {
      head = *address;
      usage = observe::SplitHostPort(head).status();
    }
  }
  if (usage.ok()) {
    absl::StatusOr<absl::Duration> seconds =
        SecondsFlag(*parsed, "--interval", absl::Seconds(1));
    usage = seconds.status();
    if (usage.ok()) interval = *seconds;
  }
  if (usage.ok() && parsed->Has("--width")) {
    absl::StatusOr<int64_t> columns = IntFlag(*parsed, "--width", 120, 20, 1000);
    usage = columns.status();
    if (usage.ok()) width = *columns;
  }
  std::unique_ptr<httplib::Client> http;
  if (usage.ok()) usage = HeadHttpFromFlags(*parsed, head, &security, &http);
  if (usage.ok() && !parsed->positional.empty()) {
    usage = absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed->positional.front(), "'"));
  }
  if (!usage.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway top: %s\n(see causeway top --help)\n",
                 std::string(usage.message()).c_str());
    return kExitUsage;
  }

  httplib::Client& client = *http;
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  client.set_keep_alive(true);
  observe::TopViewOptions view{.width = 120, .color = false, .title = head};

  if (parsed->Has("--once")) {
    absl::StatusOr<nlohmann::json> status = FetchStatus(client, security);
    if (!status.ok()) {
      PrintUserMessage(LogSeverity::kError, "causeway top: %s\n",
                   std::string(status.status().message()).c_str());
      return kExitFailure;
    }
    view.width = static_cast<int>(width.value_or(120));
    for (const std::string& line : observe::RenderTop(*status, view)) {
      std::printf("%s\n", line.c_str());
    }
    return kExitOk;
  }

  // A pipe the signal thread writes to, so that a signal ends the wait.
  int wake[2];
  if (pipe(wake) != 0) return kExitFailure;
  signals.SetHandler([fd = wake[1]] { (void)!write(fd, "x", 1); });
  {
    RawTerminal terminal;
    view.color = isatty(STDOUT_FILENO);
    bool keys = true;  // Stdin is open.
    while (!signals.stopped()) {
      view.width = static_cast<int>(width.value_or(TerminalWidth()));
      absl::StatusOr<nlohmann::json> status = FetchStatus(client, security);
      std::vector<std::string> lines;
      if (status.ok()) {
        lines = observe::RenderTop(*status, view);
      } else {
        lines = {absl::StrCat("causeway top  ", head),
                 std::string(status.status().message()), "retrying..."};
      }
      lines.push_back("");
      lines.push_back("q quits");
      // Home, each line cleared to its end, the rest of the screen cleared:
      // no flicker.
      std::string frame = "\x1b[H";
      const size_t rows = static_cast<size_t>(TerminalHeight());
      for (size_t i = 0; i < lines.size() && i < rows; ++i) {
        absl::StrAppend(&frame, lines[i], "\x1b[K", i + 1 < rows ? "\r\n" : "");
      }
      frame += "\x1b[J";
      std::fwrite(frame.data(), 1, frame.size(), stdout);
      std::fflush(stdout);
      // Keys until the next repaint.
      const absl::Time next = absl::Now() + interval;
      bool quit = false;
      while (!quit && !signals.stopped()) {
        const absl::Duration left = next - absl::Now();
        if (left <= absl::ZeroDuration()) break;
        pollfd fds[2] = {{keys ? STDIN_FILENO : -1, POLLIN, 0},
                         {wake[0], POLLIN, 0}};
        const int ready = poll(
            fds, 2, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
        if (ready <= 0) continue;
        if (fds[1].revents != 0) break;
        if (fds[0].revents == 0) continue;
        char key = 0;
        const ssize_t n = read(STDIN_FILENO, &key, 1);
        if (n <= 0) {
          keys = false;  // No keyboard (stdin at its end): Ctrl-C stops.
        } else if (key == 'q' || key == 'Q') {
          quit = true;
        }
      }
      if (quit) break;
    }
  }
  signals.SetHandler(nullptr);
  close(wake[0]);
  close(wake[1]);
  return kExitOk;
}

}  // namespace causeway::cli
