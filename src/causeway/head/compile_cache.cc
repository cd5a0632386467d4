#include "causeway/head/compile_cache.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/exec/evaluator.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/printer.h"
#include "causeway/hlo/verifier.h"

namespace causeway::head {
namespace {

absl::Status CheckShardingSupported(const hlo::Sharding& sharding,
                                    const std::string& what) {
  switch (sharding.kind) {
    case hlo::Sharding::Kind::kReplicated:
    case hlo::Sharding::Kind::kMaximal:
    case hlo::Sharding::Kind::kTiled:
      return absl::OkStatus();
    default:
      return absl::UnimplementedError(
          absl::StrCat(what, " has sharding ", hlo::PrintSharding(sharding),
                       "; only replicated, maximal and tiled shardings are "
                       "supported for program inputs and outputs"));
  }
}

// Everything about a program but its id.
absl::StatusOr<std::shared_ptr<CompiledProgram>> Compile(
    const std::string& hlo_text) {
  CW_ASSIGN_OR_RETURN(std::unique_ptr<hlo::Module> module,
                      hlo::ParseModule(hlo_text));
  CW_RETURN_IF_ERROR(hlo::VerifyModule(*module));
  if (module->replica_count() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        "module '", module->name(),
        "' has replica_count=", module->replica_count(),
        "; only programs of one replica (JAX's jit) can run here"));
  }
  // Refuses unsupported ops (name and line) before any worker sees them.
  CW_RETURN_IF_ERROR(exec::Evaluator::Create(*module).status());
  auto program = std::make_shared<CompiledProgram>();
  program->name = module->name();
  program->text = hlo_text;
  program->num_partitions = module->num_partitions();
  program->has_collectives = hlo::HasCollectives(*module);
  const hlo::Computation& entry = *module->entry();
  for (const hlo::Instruction* parameter : entry.parameters()) {
    if (!parameter->shape.IsArray()) {
      return absl::UnimplementedError(
          absl::StrCat("parameter ", parameter->parameter_number, " ('",
                       parameter->name, "') of '", module->name(),
                       "' has shape ", parameter->shape.ToString(false),
                       "; only array parameters are supported"));
    }
    program->parameter_shapes.push_back(parameter->shape);
    program->parameter_shardings.push_back(parameter->sharding);
  }
  const hlo::Instruction& root = *entry.root();
  if (root.shape.IsTuple()) {
    for (size_t i = 0; i < root.shape.tuple_shapes().size(); ++i) {
      const hlo::Shape& element = root.shape.tuple_shape(i);
      if (!element.IsArray()) {
        return absl::UnimplementedError(
            absl::StrCat("output ", i, " of '", module->name(), "' has shape ",
                         element.ToString(false),
                         "; nested tuple and token outputs are not supported"));
      }
      program->output_shapes.push_back(element);
      if (root.sharding.has_value() &&
          root.sharding->kind == hlo::Sharding::Kind::kTuple &&
          i < root.sharding->tuple_elements.size()) {
        program->output_shardings.push_back(root.sharding->tuple_elements[i]);
      } else if (root.sharding.has_value() &&
                 root.sharding->kind != hlo::Sharding::Kind::kTuple) {
        program->output_shardings.push_back(root.sharding);
      } else {
        program->output_shardings.push_back(std::nullopt);
      }
    }
  } else if (root.shape.IsArray()) {
    program->output_shapes.push_back(root.shape);
    program->output_shardings.push_back(root.sharding);
  } else {
    return absl::UnimplementedError(
        absl::StrCat("the root of '", module->name(), "' has shape ",
                     root.shape.ToString(false),
                     "; it must be an array or a tuple of arrays"));
  }
  program->module = std::move(module);
  return program;
}

}  // namespace

absl::StatusOr<BoundProgram> BindProgram(
    std::shared_ptr<const CompiledProgram> program, int64_t num_devices) {
  const bool independent_copies =
      program->num_partitions == 1 && !program->has_collectives;
  if (program->num_partitions != num_devices && !independent_copies) {
    return absl::InvalidArgumentError(absl::StrCat(
        "module '", program->name, "' was compiled for ",
        program->num_partitions, " partition(s) (num_partitions=",
        program->num_partitions, ") but its slice has ",
        num_devices, " device(s)"));
  }
  // The program's own shardings when it was partitioned for these devices;
  // a one-partition program copied onto each device sees whole arrays.
  const bool partitioned = program->num_partitions == num_devices;
  auto take = [&](const char* what,
                  const std::vector<std::optional<hlo::Sharding>>& declared,
                  std::vector<hlo::Sharding>& out) -> absl::Status {
    for (size_t i = 0; i < declared.size(); ++i) {
      hlo::Sharding sharding = partitioned && declared[i].has_value()
                                   ? *declared[i]
                                   : hlo::Sharding();  // Replicated.
      CW_RETURN_IF_ERROR(CheckShardingSupported(
          sharding, absl::StrCat(what, " ", i, " of '", program->name, "'")));
      out.push_back(std::move(sharding));
    }
    return absl::OkStatus();
  };
  BoundProgram bound;
  bound.num_devices = num_devices;
  CW_RETURN_IF_ERROR(take("parameter", program->parameter_shardings,
                          bound.parameter_shardings));
  CW_RETURN_IF_ERROR(
      take("output", program->output_shardings, bound.output_shardings));
  bound.program = std::move(program);
  return bound;
}

absl::StatusOr<std::shared_ptr<const CompiledProgram>>
CompileCache::GetOrCompile(const std::string& hlo_text) {
  const uint64_t fingerprint = std::hash<std::string>()(hlo_text);
  auto find_locked = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                         mu_) -> std::shared_ptr<const CompiledProgram> {
    auto [first, last] = programs_.equal_range(fingerprint);
    for (auto it = first; it != last; ++it) {
      std::shared_ptr<const CompiledProgram> program = it->second.program.lock();
      if (program != nullptr && program->text == hlo_text) return program;
    }
    return nullptr;
  };
  std::vector<std::shared_ptr<const CompiledProgram>> dropped;
  {
    absl::MutexLock lock(&mu_);
    if (auto program = find_locked()) {
      dropped = KeepLocked(program);
      return program;
    }
  }
  CW_ASSIGN_OR_RETURN(std::shared_ptr<CompiledProgram> compiled,
                      Compile(hlo_text));
  absl::MutexLock lock(&mu_);
  // Another thread may have compiled the same text meanwhile.
  std::shared_ptr<const CompiledProgram> program = find_locked();
  if (program == nullptr) {
    compiled->id = transport::ProgramId(next_id_++);
    program = std::move(compiled);
    programs_.emplace(fingerprint, Known{program->id, program});
  }
  dropped = KeepLocked(program);
  return program;
}

std::vector<std::shared_ptr<const CompiledProgram>> CompileCache::KeepLocked(
    std::shared_ptr<const CompiledProgram> program) {
  std::vector<std::shared_ptr<const CompiledProgram>> dropped;
  auto kept = std::find(kept_.begin(), kept_.end(), program);
  if (kept != kept_.end()) {
    kept_.splice(kept_.begin(), kept_, kept);
    return dropped;
  }
  const int64_t bytes = static_cast<int64_t>(program->text.size());
  if (bytes > keep_bytes_) return dropped;
  kept_.push_front(std::move(program));
  kept_bytes_ += bytes;
  while (kept_bytes_ > keep_bytes_) {
    kept_bytes_ -= static_cast<int64_t>(kept_.back()->text.size());
    dropped.push_back(std::move(kept_.back()));
    kept_.pop_back();
  }
  return dropped;
}

std::vector<transport::ProgramId> CompileCache::TakeUnused() {
  std::vector<transport::ProgramId> unused;
  absl::MutexLock lock(&mu_);
  std::erase_if(programs_, [&](const auto& entry) {
    if (!entry.second.program.expired()) return false;
    unused.push_back(entry.second.id);
    return true;
  });
  return unused;
}

int64_t CompileCache::size() const {
  absl::MutexLock lock(&mu_);
  int64_t live = 0;
  for (const auto& [fingerprint, known] : programs_) {
    if (!known.program.expired()) ++live;
  }
  return live;
}

int64_t CompileCache::kept_bytes() const {
  absl::MutexLock lock(&mu_);
  return kept_bytes_;
}

}  // namespace causeway::head
