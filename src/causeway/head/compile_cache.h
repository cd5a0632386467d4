// The head's compile cache: HLO text parsed, verified and checked once
// (errors carry line:column; unsupported ops are refused by building an
// evaluator here, before any worker sees the program), shared by every
// session that compiles the same text.
//
// A compiled program lives as long as an executable uses it, or while the
// cache keeps it among the most recently asked for (up to a budget of HLO
// text bytes): a client that compiles it again after every user has gone (a
// new JAX process, say) finds it parsed, under the same id, and the workers
// that ran it still have it loaded. Each program gets a ProgramId of its
// own, which names it on the workers: two texts never share one, even when
// their fingerprints collide. Once neither an executable nor the cache
// holds a program, TakeUnused names it, once, for the workers to unload.
//
// Thread-safe; compiling happens outside the cache's lock.
#ifndef CAUSEWAY_HEAD_COMPILE_CACHE_H_
#define CAUSEWAY_HEAD_COMPILE_CACHE_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/shape.h"
#include "causeway/transport/control_channel.h"

namespace causeway::head {

// A parsed and verified program. Immutable.
struct CompiledProgram {
  transport::ProgramId id;
  std::string name;  // The module's.
  std::string text;
  std::shared_ptr<const hlo::Module> module;
  int64_t num_partitions = 1;
  bool has_collectives = false;
  std::vector<hlo::Shape> parameter_shapes;  // Per partition.
  std::vector<std::optional<hlo::Sharding>> parameter_shardings;
  std::vector<hlo::Shape> output_shapes;  // Per partition, tuple flattened.
  std::vector<std::optional<hlo::Sharding>> output_shardings;
};

// A program as it runs on a slice of `num_devices` devices: the sharding
// every parameter and output gets there.
struct BoundProgram {
  std::shared_ptr<const CompiledProgram> program;
  int64_t num_devices = 1;
  std::vector<hlo::Sharding> parameter_shardings;
  std::vector<hlo::Sharding> output_shardings;
};

// Binds `program` to `num_devices` devices: a program partitioned for that
// many keeps its own shardings (replicated where it says nothing); a
// one-partition program without collectives runs as its own copy on every
// device and sees whole arrays. InvalidArgument for any other partition
// count, Unimplemented for a sharding inputs and outputs cannot have.
absl::StatusOr<BoundProgram> BindProgram(
    std::shared_ptr<const CompiledProgram> program, int64_t num_devices);

class CompileCache {
 public:
  // Keeps the most recently asked-for programs, up to `keep_bytes` of HLO
  // text in all, whether or not an executable uses them (0: none; a program
  // larger than the budget is not kept).
  explicit CompileCache(int64_t keep_bytes = 0) : keep_bytes_(keep_bytes) {}
  CompileCache(const CompileCache&) = delete;
  CompileCache& operator=(const CompileCache&) = delete;

  // The program of `hlo_text`: the cached one if an executable uses it or
  // the cache keeps it, else compiled now; either way now the most recently
  // asked for. The parser's or verifier's error (with line:column), or
  // Unimplemented for what the runtime cannot run.
  absl::StatusOr<std::shared_ptr<const CompiledProgram>> GetOrCompile(
      const std::string& hlo_text) ABSL_LOCKS_EXCLUDED(mu_);

  // The programs that no executable uses and the cache no longer keeps,
  // each named once: what the workers may unload.
  std::vector<transport::ProgramId> TakeUnused() ABSL_LOCKS_EXCLUDED(mu_);

  // Programs remembered and still alive.
  int64_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  // HLO text bytes of the programs kept.
  int64_t kept_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Known {
    transport::ProgramId id;
    std::weak_ptr<const CompiledProgram> program;
  };
  // Makes `program` the most recently asked for; returns the programs that
  // fell out of the budget, to be let go outside the lock.
  std::vector<std::shared_ptr<const CompiledProgram>> KeepLocked(
      std::shared_ptr<const CompiledProgram> program)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t keep_bytes_;
  mutable absl::Mutex mu_;
  // By fingerprint of the text; each entry's text is compared on lookup.
  std::multimap<uint64_t, Known> programs_ ABSL_GUARDED_BY(mu_);
  // The programs kept, the most recently asked for first.
  std::list<std::shared_ptr<const CompiledProgram>> kept_ ABSL_GUARDED_BY(mu_);
  int64_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_COMPILE_CACHE_H_
