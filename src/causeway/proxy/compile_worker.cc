#include "causeway/proxy/compile_worker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"
#include "causeway/proxy/proto/ifrt_types.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "nlohmann/json.hpp"

namespace causeway::proxy {
namespace {

constexpr uint64_t kMaxReplyBytes = uint64_t{4} << 30;

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, char* data, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, data, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    data += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteFrame(int fd, const std::string& data) {
  uint64_t n = data.size();
  char header[8];
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return WriteAll(fd, header, 8) && WriteAll(fd, data.data(), data.size());
}

absl::StatusOr<std::string> ReadFrame(int fd) {
  unsigned char header[8];
  if (!ReadAll(fd, reinterpret_cast<char*>(header), 8)) {
    return absl::UnavailableError("the compile worker exited");
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(header[i]) << (8 * i);
  if (n > kMaxReplyBytes) {
    return absl::InternalError(absl::StrCat("the compile worker sent a frame of ", n, " bytes"));
  }
  std::string data(n, '\0');
  if (!ReadAll(fd, data.data(), n)) {
    return absl::UnavailableError("the compile worker exited mid-reply");
  }
  return data;
}

}  // namespace

struct CompileWorker::Process {
  pid_t pid = -1;
  int to_child = -1;
  int from_child = -1;
  ~Process() {
    if (to_child >= 0) close(to_child);
    if (from_child >= 0) close(from_child);
    if (pid > 0) {
      kill(pid, SIGTERM);
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }
  static absl::StatusOr<std::unique_ptr<Process>> Start(const Options& options) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
    if (pipe2(out, O_CLOEXEC) != 0) {
      close(in[0]);
      close(in[1]);
      return absl::InternalError("pipe failed");
    }
    std::vector<std::string> argv = {options.python, options.script};
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      dup2(in[0], 0);
      dup2(out[1], 1);
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    auto process = std::make_unique<Process>();
    process->pid = pid;
    process->to_child = in[1];
    process->from_child = out[0];
    return process;
  }
};

CompileWorker::CompileWorker(Options options) : options_(std::move(options)) {}
CompileWorker::~CompileWorker() {
  absl::MutexLock lock(&mu_);
  process_.reset();
}

std::string CanonicalOptions(const CompileJob& job) {
  xla::ifrt::XlaCompileOptionsProto options;
  if (job.options_type != kXlaCompileOptionsTypeName ||
      !options.ParseFromString(job.options)) {
    return job.options;  // The worker refuses it; nothing to share.
  }
  std::string canonical;
  google::protobuf::io::StringOutputStream stream(&canonical);
  google::protobuf::io::CodedOutputStream out(&stream);
  out.SetSerializationDeterministic(true);
  options.SerializeToCodedStream(&out);
  out.Trim();
  return canonical;
}

Future<std::shared_ptr<const CompiledProgram>> CompileWorker::Compile(CompileJob job) {
  // Compiling takes seconds: off the caller's thread, one at a time.
  auto [promise, future] = MakePromise<std::shared_ptr<const CompiledProgram>>();
  thread_.Execute([this, job = std::move(job), promise = std::move(promise)]() mutable {
    promise.Set(CompileNow(job));
  });
  return future;
}

absl::StatusOr<std::shared_ptr<const CompiledProgram>> CompileWorker::CompileNow(
    const CompileJob& job) {
  nlohmann::json header = {{"num_devices", job.num_devices},
                           {"program_type", job.program_type},
                           {"options_type", job.options_type}};
  const std::string key =
      absl::StrCat(header.dump(), "\n", job.program, "\n", CanonicalOptions(job));
  absl::MutexLock lock(&mu_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (process_ == nullptr) {
      absl::StatusOr<std::unique_ptr<Process>> started = Process::Start(options_);
      if (!started.ok()) return started.status();
      process_ = *std::move(started);
    }
    if (!WriteFrame(process_->to_child, header.dump()) ||
        !WriteFrame(process_->to_child, job.program) ||
        !WriteFrame(process_->to_child, job.options)) {
      process_.reset();
      continue;
    }
    absl::StatusOr<std::string> reply = ReadFrame(process_->from_child);
    if (!reply.ok()) {
      process_.reset();
      if (attempt == 0) continue;
      return absl::UnavailableError(absl::StrCat(
          "the proxy's compile worker (", options_.python, " ", options_.script,
          ") exited: see the proxy's stderr"));
    }
    nlohmann::json parsed = nlohmann::json::parse(*reply, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      return absl::InternalError("the compile worker's reply does not parse");
    }
    if (!parsed.value("ok", false)) {
      const int code = parsed.value("code", 13);
      return absl::Status(static_cast<absl::StatusCode>(code >= 1 && code <= 16 ? code : 13),
                          parsed.value("message", std::string("compile failed")));
    }
    auto program = std::make_shared<CompiledProgram>();
    program->hlo_text = parsed.value("hlo_text", std::string());
    program->name = parsed.value("name", std::string("program"));
    program->num_partitions = parsed.value("num_partitions", int64_t{1});
    program->num_replicas = parsed.value("num_replicas", int64_t{1});
    if (parsed.contains("donated") && parsed["donated"].is_array()) {
      for (const auto& d : parsed["donated"]) {
        if (d.is_number_integer()) program->donated_inputs.push_back(d.get<int32_t>());
      }
    }
    if (parsed.contains("cost_analysis") && parsed["cost_analysis"].is_object()) {
      for (const auto& [property, value] : parsed["cost_analysis"].items()) {
        if (value.is_number()) program->cost_analysis.emplace_back(property, value.get<double>());
      }
    }
    program->fingerprint = absl::StrCat(std::hash<std::string>()(key));
    if (cache_.size() >= 256) cache_.clear();  // Bounded; the worker caches too.
    cache_.emplace(key, program);
    return std::shared_ptr<const CompiledProgram>(std::move(program));
  }
  return absl::UnavailableError("the proxy's compile worker could not be started");
}

}  // namespace causeway::proxy
