// The proxy's compiler: a long-lived Python child process (the project's
// python/causeway/_proxy_compile.py, run as a script by a Python with the
// pinned jaxlib) that turns a
// serialized program and XLA compile options into partitioned HLO text, one
// request at a time over its stdin/stdout. Started on the first compile;
// restarted if it dies. Results are cached by fingerprint (a hash of the
// program, options and device count). Thread-safe.
#ifndef CAUSEWAY_PROXY_COMPILE_WORKER_H_
#define CAUSEWAY_PROXY_COMPILE_WORKER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/executor.h"
#include "causeway/proxy/compile_service.h"

namespace causeway::proxy {

// The compile options of `job` as its cache key: XlaCompileOptions parsed
// and written again deterministically (protobuf maps sorted by key; jaxlib
// writes them in hash order, which differs between JAX processes, so the
// raw bytes of one program's options differ from process to process).
// Options of another type, or that do not parse, are their own bytes.
std::string CanonicalOptions(const CompileJob& job);

// The type name of the compile options jaxlib's client sends.
inline constexpr char kXlaCompileOptionsTypeName[] = "xla::ifrt::XlaCompileOptions";

class CompileWorker final : public CompileService {
 public:
  struct Options {
    std::string python = "python3";
    std::string script;  // The path of _proxy_compile.py.
  };
  explicit CompileWorker(Options options);
  ~CompileWorker() override;

  Future<std::shared_ptr<const CompiledProgram>> Compile(CompileJob job) override;

 private:
  struct Process;
  absl::StatusOr<std::shared_ptr<const CompiledProgram>> CompileNow(
      const CompileJob& job);
  const Options options_;
  absl::Mutex mu_;  // One compile at a time on the one worker.
  std::unique_ptr<Process> process_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<const CompiledProgram>> cache_
      ABSL_GUARDED_BY(mu_);
  // Compiles run here, one at a time (declared last: joined first).
  ThreadPool thread_{"proxy-compile", 1};
};

}  // namespace causeway::proxy

#endif  // CAUSEWAY_PROXY_COMPILE_WORKER_H_
