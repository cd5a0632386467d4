#include "causeway/exec/spmd_program.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "causeway/base/status.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/verifier.h"

namespace causeway::exec {

using hlo::Literal;

namespace {

absl::Status Prefix(int64_t partition, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("partition ", partition, ": ",
                                                  status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SpmdProgram>> SpmdProgram::Load(
    std::string_view hlo_text, int64_t num_partitions) {
  return Load(hlo_text, num_partitions, Options());
}

absl::StatusOr<std::unique_ptr<SpmdProgram>> SpmdProgram::Load(
    std::string_view hlo_text, int64_t num_partitions, Options options) {
  CW_ASSIGN_OR_RETURN(std::unique_ptr<hlo::Module> module,
                      hlo::ParseModule(hlo_text));
  return Create(std::move(module), num_partitions, options);
}

absl::StatusOr<std::unique_ptr<SpmdProgram>> SpmdProgram::Create(
    std::unique_ptr<hlo::Module> module, int64_t num_partitions,
    Options options) {
  if (module == nullptr) {
    return absl::InvalidArgumentError("no module to run");
  }
  if (num_partitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the number of partitions must be at least 1, got ", num_partitions));
  }
  if (module->replica_count() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        "module '", module->name(),
        "' has replica_count=", module->replica_count(),
        "; only programs of one replica (JAX's jit) can run here"));
  }
  if (module->num_partitions() != num_partitions) {
    const bool independent_copies =
        module->num_partitions() == 1 && !hlo::HasCollectives(*module);
    if (!independent_copies) {
      return absl::InvalidArgumentError(
          absl::StrCat("module '", module->name(), "' was compiled for ",
                       module->num_partitions(), " partition",
                       module->num_partitions() == 1 ? "" : "s",
                       " (num_partitions=", module->num_partitions(),
                       ") but is asked to run on ", num_partitions));
    }
  }
  CW_RETURN_IF_ERROR(hlo::VerifyModule(*module));
  CW_ASSIGN_OR_RETURN(std::unique_ptr<Evaluator> evaluator,
                      Evaluator::Create(*module, options.evaluator));
  return std::unique_ptr<SpmdProgram>(new SpmdProgram(
      std::move(module), std::move(evaluator), num_partitions, options));
}

SpmdProgram::SpmdProgram(std::unique_ptr<hlo::Module> module,
                         std::unique_ptr<Evaluator> evaluator,
                         int64_t num_partitions, Options options)
    : module_(std::move(module)),
      evaluator_(std::move(evaluator)),
      num_partitions_(num_partitions),
      collectives_(InProcessCollectives::Options{
          .timeout = options.collective_timeout}) {
  for (int64_t p = 0; p < num_partitions_; ++p) {
    devices_.push_back(std::make_unique<ThreadPool>(absl::StrCat("cpu", p), 1));
  }
}

SpmdProgram::~SpmdProgram() {
  absl::MutexLock lock(&run_mu_);
  devices_.clear();  // Drains and joins.
}

absl::StatusOr<std::vector<std::vector<Literal>>> SpmdProgram::Run(
    std::vector<std::vector<Literal>> per_partition_args) {
  if (static_cast<int64_t>(per_partition_args.size()) != num_partitions_) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected arguments for ", num_partitions_,
                     " partitions, got ", per_partition_args.size()));
  }
  absl::MutexLock run_lock(&run_mu_);
  const uint64_t run_id = next_run_id_++;
  collectives_.Reset();

  std::vector<absl::StatusOr<Literal>> results(num_partitions_);
  absl::Mutex error_mu;
  int64_t first_failed = -1;  // Guarded by error_mu.
  absl::BlockingCounter pending(static_cast<int>(num_partitions_));
  for (int64_t p = 0; p < num_partitions_; ++p) {
    devices_[p]->Execute([&, p, args = std::move(per_partition_args[p])] {
      RunContext context;
      context.partition_id = p;
      context.replica_id = 0;
      context.run_id = run_id;
      context.collectives = &collectives_;
      results[p] = evaluator_->Run(args, context);
      if (!results[p].ok()) {
        bool first = false;
        {
          absl::MutexLock lock(&error_mu);
          if (first_failed < 0) {
            first_failed = p;
            first = true;
          }
        }
        // Peers waiting for this partition in a collective give up now.
        if (first) collectives_.Cancel(Prefix(p, results[p].status()));
      }
      pending.DecrementCount();
    });
  }
  pending.Wait();

  {
    absl::MutexLock lock(&error_mu);
    if (first_failed >= 0) {
      return Prefix(first_failed, results[first_failed].status());
    }
  }
  std::vector<std::vector<Literal>> outputs(num_partitions_);
  for (int64_t p = 0; p < num_partitions_; ++p) {
    Literal& root = *results[p];
    if (root.shape().IsTuple()) {
      outputs[p] = std::move(root.mutable_elements());
    } else {
      outputs[p].push_back(std::move(root));
    }
  }
  return outputs;
}

}  // namespace causeway::exec
