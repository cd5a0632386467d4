// Where the proxy's compile requests go: something that turns the program
// jaxlib's client sends (a serialized IFRT program and XLA compile options)
// into the partitioned HLO text Causeway's head loads. The proxy's own
// implementation is a long-lived Python worker process running XLA's
// compiler from the pinned jaxlib (compile_worker.h); tests may give
// another. Implementations are thread-safe; futures resolve on a thread
// of the implementation's.
#ifndef CAUSEWAY_PROXY_COMPILE_SERVICE_H_
#define CAUSEWAY_PROXY_COMPILE_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "causeway/base/future.h"

namespace causeway::proxy {

struct CompileJob {
  std::string program_type;  // The IFRT program's serialized type name.
  std::string program;       // Its serialized bytes.
  std::string options_type;  // The compile options' serialized type name.
  std::string options;
  int64_t num_devices = 0;   // The devices the options assign.
};

struct CompiledProgram {
  std::string hlo_text;  // Partitioned, constants in full, shardings on
                         // its parameters and root.
  std::string name;
  std::string fingerprint;
  int64_t num_partitions = 1;
  int64_t num_replicas = 1;
  std::vector<int32_t> donated_inputs;  // Parameter numbers.
  // XLA's cost analysis of the module, by property ("flops",
  // "bytes accessed", ...); empty when XLA gave none.
  std::vector<std::pair<std::string, double>> cost_analysis;
};

class CompileService {
 public:
  virtual ~CompileService() = default;
  // XLA's error (as InvalidArgument, or the code it gave) when the program
  // does not compile.
  virtual Future<std::shared_ptr<const CompiledProgram>> Compile(
      CompileJob job) = 0;
};

}  // namespace causeway::proxy

#endif  // CAUSEWAY_PROXY_COMPILE_SERVICE_H_
