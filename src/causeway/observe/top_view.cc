#include "causeway/observe/top_view.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace causeway::observe {
namespace {

using nlohmann::json;

std::string Bytes(const json& value) {
  if (!value.is_number()) return "?";
  double n = value.get<double>();
  const char* units[] = {"B", "K", "M", "G", "T"};
  int i = 0;
  while (n >= 1024 && i < 4) {
    n /= 1024;
    ++i;
  }
  return i == 0 ? absl::StrFormat("%.0f%s", n, units[i])
                : absl::StrFormat("%.1f%s", n, units[i]);
}

std::string Bar(double fraction, int width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(std::lround(fraction * width));
  return absl::StrCat("[", std::string(filled, '#'),
                      std::string(width - filled, '.'), "]");
}

std::string Clock(double unix_seconds) {
  const time_t t = static_cast<time_t>(unix_seconds);
  struct tm local;
  localtime_r(&t, &local);
  char text[16];
  strftime(text, sizeof(text), "%H:%M:%S", &local);
  return text;
}

const char* StateColor(const std::string& state) {
  if (state == "busy") return "\x1b[32m";
  if (state == "waiting") return "\x1b[33m";
  if (state == "idle") return "\x1b[34m";
  if (state == "dead") return "\x1b[31m";
  return "\x1b[90m";
}

// Cuts `line` to `width` visible columns (ANSI escapes do not count).
std::string Fit(const std::string& line, int width) {
  std::string out;
  int visible = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b') {
      const size_t end = line.find('m', i);
      if (end == std::string::npos) break;
      out += line.substr(i, end - i + 1);
      i = end;
      continue;
    }
    // A UTF-8 continuation byte takes no column of its own.
    const bool continuation = (static_cast<unsigned char>(line[i]) & 0xC0) == 0x80;
    if (!continuation) {
      if (visible == width) break;
      ++visible;
    }
    out += line[i];
  }
  return out;
}

std::string Str(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

std::vector<std::string> RenderTop(const json& status,
                                   const TopViewOptions& options) {
  std::vector<std::string> lines;
  const char* bold = options.color ? "\x1b[1m" : "";
  const char* reset = options.color ? "\x1b[0m" : "";
  if (!status.is_object() || !status.contains("summary") ||
      !status.contains("devices")) {
    lines.push_back("the head's answer is not a causeway /api/status");
    return lines;
  }
  const json& summary = status["summary"];
  const json& states = summary.value("device_states", json::object());
  double launches_per_second = 0;
  if (status.contains("history") && !status["history"].empty()) {
    launches_per_second =
        status["history"].back().value("launches_per_second", 0.0);
  }
  lines.push_back(absl::StrCat(
      bold, "causeway top", reset, "  ", options.title, "  ",
      Clock(status.value("time_unix_seconds", 0.0))));
  lines.push_back(absl::StrFormat(
      "%d islands, %d/%d hosts alive, %d devices (%d busy, %d waiting, %d "
      "idle, %d spare, %d dead), %d sessions, %d launches (%d failed), "
      "%.1f launches/s",
      summary.value("islands", 0), summary.value("hosts_alive", 0),
      summary.value("hosts", 0), summary.value("devices", 0),
      states.value("busy", 0), states.value("waiting", 0),
      states.value("idle", 0), states.value("spare", 0),
      states.value("dead", 0), summary.value("sessions", 0),
      summary.value("launches", 0), summary.value("launch_failures", 0),
      launches_per_second));
  lines.push_back("");
  lines.push_back(absl::StrCat(
      bold,
      absl::StrFormat("%4s %4s %3s %-8s %-23s %5s %-23s %s", "DEV", "HOST",
                      "ISL", "STATE", "UTIL (1 min)", "QUEUE", "MEMORY",
                      "RUNNING"),
      reset));
  for (const json& device : status["devices"]) {
    const std::string state = device.value("state", "?");
    const json& memory = device.value("memory", json::object());
    double memory_fraction = 0;
    if (memory.value("used_bytes", json()).is_number() &&
        memory.value("budget_bytes", 0.0) > 0) {
      memory_fraction = memory["used_bytes"].get<double>() /
                        memory["budget_bytes"].get<double>();
    }
    const double busy = device.value("busy_ratio", 0.0);
    std::string running;
    if (device.contains("running") && device["running"].is_object()) {
      const json& op = device["running"];
      running = absl::StrCat(Str(op, "program"), " seq ", Str(op, "seq"),
                             " [", Str(op, "session"), "]");
    } else if (state == "waiting" && !device["queued"].empty()) {
      const json& op = device["queued"][0];
      running = absl::StrCat("(waits) ", Str(op, "program"), ": ",
                             op["waiting_for_memory"].get<bool>()
                                 ? std::string("memory")
                                 : absl::StrJoin(op["waiting_for"].get<std::vector<std::string>>(), "; "));
    }
    const std::string memory_text = absl::StrCat(
        Bytes(memory.value("used_bytes", json())), "/",
        Bytes(memory.value("budget_bytes", json())));
    lines.push_back(absl::StrFormat(
        "%4d %4d %3d %s%-8s%s %s %3.0f%% %5d %-12s %-10s %s",
        device.value("device", -1), device.value("host", -1),
        device.value("island", -1), options.color ? StateColor(state) : "",
        state, reset, Bar(busy, 16), 100 * busy,
        device.value("queue_length", 0), memory_text, Bar(memory_fraction, 8),
        running));
  }
  lines.push_back("");
  lines.push_back(absl::StrCat(bold, "SESSIONS", reset));
  if (status["sessions"].empty()) lines.push_back("  none");
  for (const json& session : status["sessions"]) {
    std::vector<std::string> slices;
    for (const json& slice : session["slices"]) {
      std::vector<std::string> devices;
      for (const json& d : slice["devices"]) devices.push_back(d.dump());
      slices.push_back(absl::StrCat("#", Str(slice, "slice"), " ",
                                    Str(slice, "state"), " [",
                                    absl::StrJoin(devices, ","), "]"));
    }
    lines.push_back(absl::StrFormat(
        "  %4s %-20s %d arrays, %d executables, slices: %s",
        Str(session, "session"), Str(session, "name"),
        session.value("arrays", 0), session.value("executables", 0),
        slices.empty() ? std::string("none") : absl::StrJoin(slices, " ")));
  }
  if (!status["slice_requests"].empty()) {
    lines.push_back("");
    lines.push_back(absl::StrCat(bold, "QUEUED SLICE REQUESTS", reset));
    for (const json& request : status["slice_requests"]) {
      lines.push_back(absl::StrCat("  slice ", Str(request, "slice_id"),
                                   " of session ", Str(request, "session"),
                                   ": ", Str(request, "blocked_by")));
    }
  }
  lines.push_back("");
  lines.push_back(absl::StrCat(bold, "LAST FAILURES", reset));
  if (status["failures"].empty()) lines.push_back("  none");
  int shown = 0;
  for (const json& failure : status["failures"]) {
    if (++shown > 5) break;
    lines.push_back(absl::StrCat(
        "  ", Clock(failure.value("time_unix_seconds", 0.0)), " device ",
        Str(failure, "device"), " ", Str(failure, "program"), ": ",
        Str(failure, "code"), " ", Str(failure, "message")));
  }
  if (!status["deaths"].empty()) {
    lines.push_back("");
    lines.push_back(absl::StrCat(bold, "HOST DEATHS", reset));
    shown = 0;
    for (const json& death : status["deaths"]) {
      if (++shown > 5) break;
      lines.push_back(absl::StrCat(
          "  host ", Str(death, "host"), " at ",
          Clock(death.value("time_unix_seconds", 0.0)), ": ",
          Str(death, "reason")));
    }
  }
  for (std::string& line : lines) line = Fit(line, options.width);
  return lines;
}

}  // namespace causeway::observe
