#include "causeway/cli/run_command.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "causeway/base/status.h"
#include "causeway/cli/exit_codes.h"
#include "causeway/exec/spmd_program.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/npy.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/sharding_util.h"

namespace causeway::cli {
namespace {

using hlo::Literal;
using hlo::Shape;
using hlo::Sharding;

constexpr char kRunHelp[] = R"(Usage:
  causeway run PROGRAM.hlo --partitions N --input A.npy [--input B.npy ...]
               --output-dir DIR [--global] [--output-sharding S ...]
               [--collective-timeout SECONDS]

Runs PROGRAM.hlo, the HLO text of a program partitioned for N devices (what
`jax.jit(f).lower(...).compile().as_text()` prints: one module that every
partition runs, with shard-shaped parameters), on N CPU devices of this
machine. Each device runs on its own thread; collectives run in-process.

Inputs and outputs are NumPy .npy files: little-endian, C order; bool,
int8-64, uint8-64, float16/32/64, and bfloat16 stored as '<V2' (save with
np.save(path, x) for an ml_dtypes.bfloat16 array x; read back with
np.load(path).view(ml_dtypes.bfloat16)).

  --partitions N    Number of devices. Must match the module's
                    num_partitions (a module for 1 partition without
                    collectives may run on any N: every device runs it on
                    its own inputs).
  --input FILE      One per entry parameter, in parameter order.
                    By default FILE holds that parameter for all partitions
                    stacked along a new leading axis: shape [N, ...shard
                    shape], row p being partition p's argument.
  --output-dir DIR  Where out0.npy, out1.npy, ... are written, one per
                    output (a tuple result gives one file per element).
                    By default each holds the output of all partitions
                    stacked along a leading axis of size N. Created if
                    missing.
  --global          Inputs and outputs are global (unsharded) arrays instead.
                    Inputs are split by the `sharding=` of each entry
                    parameter; outputs are assembled by the sharding of the
                    ROOT instruction. Compiled JAX text annotates the
                    parameters but not the ROOT: then scalar outputs are
                    taken as replicated and the others need
                    --output-sharding. A parameter without an annotation is
                    refused.
  --output-sharding S
                    With --global: the sharding of output i (given once per
                    output, in order), in XLA syntax, e.g.
                    '{devices=[4,2]<=[8]}' or '{replicated}'. Overrides the
                    ROOT's annotation. Tiles must divide the output evenly.
                    From JAX, for an output x with out_sharding s:
                    str(s._to_xla_hlo_sharding(x.ndim)).
  --collective-timeout SECONDS
                    How long a device waits for its peers in a collective
                    before failing (default 60).
  --help            Show this help.

Exit status: 0 on success, 1 when the program or its inputs are wrong (the
message names the parameter, instruction or file), 2 for a usage error.

Example:
  causeway run step.hlo --partitions 8 --input params.npy --input batch.npy \
      --output-dir out/
)";

struct RunFlags {
  std::string program_path;
  int64_t partitions = 0;
  std::vector<std::string> inputs;
  std::string output_dir;
  bool global = false;
  std::vector<std::string> output_shardings;
  double collective_timeout_s = 60;
};

// A usage error: printed with a pointer to --help, exit status 2.
struct UsageError {
  std::string message;
};

std::variant<RunFlags, UsageError, bool> ParseRunFlags(
    const std::vector<std::string>& args) {
  RunFlags flags;
  bool have_partitions = false;
  // Options that take one value: the value each was given.
  std::map<std::string, std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--help" || arg == "-h") return true;
    std::optional<std::string> value;
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
    } else {
      if (!flags.program_path.empty()) {
        return UsageError{absl::StrCat("unexpected argument '", arg,
                                       "' (the program is '",
                                       flags.program_path, "')")};
      }
      flags.program_path = arg;
      continue;
    }
    if (arg == "--global") {
      if (value) return UsageError{"--global takes no value"};
      if (flags.global) return UsageError{"--global given twice"};
      flags.global = true;
      continue;
    }
    const bool repeatable = arg == "--input" || arg == "--output-sharding";
    if (!repeatable && arg != "--partitions" && arg != "--output-dir" &&
        arg != "--collective-timeout") {
      return UsageError{absl::StrCat("unknown option '", arg, "'")};
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        return UsageError{absl::StrCat(arg, " needs a value")};
      }
      value = args[++i];
    }
    if (!repeatable) {
      auto [first, fresh] = given.try_emplace(arg, *value);
      if (!fresh) {
        return UsageError{absl::StrCat(arg, " given twice ('", first->second,
                                       "' and '", *value, "')")};
      }
    }
    if (arg == "--partitions") {
      if (!absl::SimpleAtoi(*value, &flags.partitions) ||
          flags.partitions < 1 || flags.partitions > 4096) {
        return UsageError{absl::StrCat(
            "--partitions must be a whole number from 1 to 4096, got '", *value,
            "'")};
      }
      have_partitions = true;
    } else if (arg == "--input") {
      flags.inputs.push_back(*value);
    } else if (arg == "--output-dir") {
      flags.output_dir = *value;
    } else if (arg == "--output-sharding") {
      flags.output_shardings.push_back(*value);
    } else if (arg == "--collective-timeout") {
      if (!absl::SimpleAtod(*value, &flags.collective_timeout_s) ||
          !(flags.collective_timeout_s > 0)) {
        return UsageError{absl::StrCat(
            "--collective-timeout must be a positive number of seconds, got '",
            *value, "'")};
      }
    }
  }
  if (flags.program_path.empty()) {
    return UsageError{"missing the program (an .hlo text file)"};
  }
  if (!have_partitions) return UsageError{"missing --partitions N"};
  if (flags.output_dir.empty()) return UsageError{"missing --output-dir DIR"};
  if (!flags.output_shardings.empty() && !flags.global) {
    return UsageError{"--output-sharding only applies with --global"};
  }
  return flags;
}

// The largest program text read (constants printed in full make big
// modules; 1 GiB is far past any JAX export that fits in memory).
constexpr int64_t kMaxProgramBytes = int64_t{1} << 30;
// How much is read before the text is known to be HLO.
constexpr int64_t kProgramProbeBytes = 4096;

// Reads HLO text, checking what it is before reading it whole: a directory,
// binary data (/dev/zero) or text without a module header is refused after
// at most kProgramProbeBytes, and nothing past kMaxProgramBytes is read.
absl::StatusOr<std::string> ReadProgramText(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a directory, not an HLO text file"));
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::string text;
  auto read = [&](int64_t n) {
    const size_t had = text.size();
    text.resize(had + static_cast<size_t>(n));
    file.read(text.data() + had, static_cast<std::streamsize>(n));
    text.resize(had + static_cast<size_t>(file.gcount()));
    return !file.bad();
  };
  if (!read(kProgramProbeBytes)) {
    return absl::DataLossError(absl::StrCat(path, ": read failed"));
  }
  if (text.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": not HLO text (it holds NUL bytes); give the file that "
                     "compiled.as_text() or HloModule.to_string() wrote"));
  }
  if (text.find("HloModule") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": not an HLO module: 'HloModule' does not appear "
                     "in its first ",
                     kProgramProbeBytes, " bytes"));
  }
  while (file && static_cast<int64_t>(text.size()) <= kMaxProgramBytes) {
    if (!read(std::min<int64_t>(int64_t{1} << 20,
                                kMaxProgramBytes + 1 - text.size()))) {
      return absl::DataLossError(absl::StrCat(path, ": read failed"));
    }
  }
  if (static_cast<int64_t>(text.size()) > kMaxProgramBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": larger than the limit of ", kMaxProgramBytes,
                     " bytes for a program"));
  }
  return text;
}

std::string ParameterName(const hlo::Instruction& parameter) {
  return absl::StrCat("parameter ", parameter.parameter_number, " ('",
                      parameter.name, "')");
}

std::string ShapeText(const Shape& shape) { return shape.ToString(false); }

std::string DescribeParameters(const hlo::Computation& entry) {
  std::vector<std::string> parts;
  for (const hlo::Instruction* parameter : entry.parameters()) {
    parts.push_back(
        absl::StrCat("'", parameter->name, "': ", ShapeText(parameter->shape)));
  }
  return absl::StrJoin(parts, ", ");
}

// Splits [N, ...] into N literals of `shape`.
std::vector<Literal> Unstack(const Literal& stacked, const Shape& shape,
                             int64_t n) {
  std::vector<Literal> parts;
  const int64_t bytes = shape.ByteSize();
  const auto* src = static_cast<const std::byte*>(stacked.untyped_data());
  for (int64_t p = 0; p < n; ++p) {
    Literal part(shape);
    if (bytes > 0) {
      std::memcpy(part.mutable_untyped_data(), src + p * bytes,
                  static_cast<size_t>(bytes));
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

// Loads the stacked or global inputs as per-partition arguments.
absl::StatusOr<std::vector<std::vector<Literal>>> LoadInputs(
    const RunFlags& flags, const hlo::Module& module) {
  const hlo::Computation& entry = *module.entry();
  const int64_t n = flags.partitions;
  if (static_cast<int64_t>(flags.inputs.size()) != entry.parameter_count()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the program takes ", entry.parameter_count(),
                     " parameter", entry.parameter_count() == 1 ? "" : "s",
                     " (", DescribeParameters(entry), ") but ",
                     flags.inputs.size(), " --input file",
                     flags.inputs.size() == 1 ? " was" : "s were", " given"));
  }
  std::vector<std::vector<Literal>> args(n);
  for (int64_t i = 0; i < entry.parameter_count(); ++i) {
    const hlo::Instruction& parameter = *entry.parameter(i);
    const std::string& path = flags.inputs[i];
    CW_ASSIGN_OR_RETURN(Literal value, hlo::ReadNpy(path));
    const Shape& shard = parameter.shape;
    if (!shard.IsArray()) {
      return absl::UnimplementedError(
          absl::StrCat(ParameterName(parameter), " is ", ShapeText(shard),
                       "; only array parameters can be read from .npy files"));
    }
    std::vector<Literal> parts;
    if (flags.global) {
      if (!parameter.sharding.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            ParameterName(parameter),
            " has no sharding= annotation, so --global cannot split '", path,
            "'; pass stacked per-partition inputs without --global"));
      }
      if (value.shape().type() != shard.type()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, " for ", ParameterName(parameter), ": expected ",
                         std::string(hlo::PrimitiveTypeName(shard.type())),
                         " values, got ", ShapeText(value.shape())));
      }
      absl::StatusOr<Shape> expected =
          hlo::ShardShape(*parameter.sharding, value.shape(), n);
      if (!expected.ok() || !expected->Compatible(shard)) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, " for ", ParameterName(parameter), ": a global ",
            ShapeText(value.shape()), " does not shard into the ",
            ShapeText(shard), " the program expects",
            expected.ok()
                ? absl::StrCat(" (it gives ", ShapeText(*expected), ")")
                : absl::StrCat(": ", expected.status().message())));
      }
      CW_ASSIGN_OR_RETURN(parts,
                          hlo::SplitGlobal(value, *parameter.sharding, n));
    } else {
      std::vector<int64_t> dims = {n};
      dims.insert(dims.end(), shard.dims().begin(), shard.dims().end());
      const Shape stacked(shard.type(), dims);
      if (!value.shape().Compatible(stacked)) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, " for ", ParameterName(parameter), ": expected ",
            ShapeText(stacked), " (", n, " partitions × ", ShapeText(shard),
            "), got ", ShapeText(value.shape())));
      }
      parts = Unstack(value, shard, n);
    }
    for (int64_t p = 0; p < n; ++p) args[p].push_back(std::move(parts[p]));
  }
  return args;
}

// The sharding of each output in --global mode: --output-sharding flags,
// else the ROOT's annotation, else replicated for scalars (a scalar cannot
// be tiled), else an error saying what to pass.
absl::StatusOr<std::vector<Sharding>> OutputShardings(
    const RunFlags& flags, const hlo::Module& module,
    const std::vector<Literal>& outputs) {
  const size_t output_count = outputs.size();
  std::vector<Sharding> shardings;
  if (!flags.output_shardings.empty()) {
    if (flags.output_shardings.size() != output_count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the program has ", output_count, " output",
          output_count == 1 ? "" : "s", " but ", flags.output_shardings.size(),
          " --output-sharding given"));
    }
    for (size_t i = 0; i < output_count; ++i) {
      absl::StatusOr<Sharding> sharding =
          hlo::ParseSharding(flags.output_shardings[i]);
      if (!sharding.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--output-sharding '", flags.output_shardings[i], "' for output ",
            i, ": ", sharding.status().message()));
      }
      shardings.push_back(*std::move(sharding));
    }
    return shardings;
  }
  const hlo::Instruction& root = *module.entry()->root();
  if (root.sharding.has_value()) {
    if (root.shape.IsTuple() && root.sharding->kind == Sharding::Kind::kTuple) {
      shardings = root.sharding->tuple_elements;
    } else if (root.shape.IsTuple()) {
      shardings.assign(output_count, *root.sharding);  // Same for all.
    } else {
      shardings.push_back(*root.sharding);
    }
    if (shardings.size() != output_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ROOT's sharding has ", shardings.size(),
                       " elements for ", output_count, " outputs"));
    }
    return shardings;
  }
  std::vector<std::string> unknown;
  for (size_t i = 0; i < output_count; ++i) {
    if (outputs[i].shape().rank() == 0) {
      shardings.push_back(Sharding());  // Replicated.
    } else {
      unknown.push_back(absl::StrCat(i, " (", ShapeText(outputs[i].shape()),
                                     " per partition)"));
    }
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--global needs the output shardings, and the ROOT '", root.name,
        "' (line ", root.line,
        ") carries no sharding= annotation (compiled JAX text does not print "
        "them); give one --output-sharding per output (",
        output_count,
        " in all), e.g. --output-sharding '{replicated}' or "
        "'{devices=[4,1]<=[4]}', or run without --global. Outputs needing "
        "one: ",
        absl::StrJoin(unknown, ", ")));
  }
  return shardings;
}

absl::StatusOr<Literal> Stack(const std::vector<std::vector<Literal>>& outputs,
                              size_t index) {
  const Shape& shape = outputs[0][index].shape();
  std::vector<int64_t> dims = {static_cast<int64_t>(outputs.size())};
  dims.insert(dims.end(), shape.dims().begin(), shape.dims().end());
  Literal stacked(Shape(shape.type(), dims));
  const int64_t bytes = shape.ByteSize();
  auto* dst = static_cast<std::byte*>(stacked.mutable_untyped_data());
  for (size_t p = 0; p < outputs.size(); ++p) {
    const Literal& part = outputs[p][index];
    if (!part.shape().Compatible(shape)) {
      return absl::InternalError(absl::StrCat(
          "partitions returned different shapes for output ", index));
    }
    if (bytes > 0) {
      std::memcpy(dst + p * bytes, part.untyped_data(),
                  static_cast<size_t>(bytes));
    }
  }
  return stacked;
}

absl::Status RunProgram(const RunFlags& flags) {
  CW_ASSIGN_OR_RETURN(std::string text, ReadProgramText(flags.program_path));
  absl::StatusOr<std::unique_ptr<hlo::Module>> parsed = hlo::ParseModule(text);
  if (!parsed.ok()) {
    return absl::Status(
        parsed.status().code(),
        absl::StrCat(flags.program_path, ": ", parsed.status().message()));
  }
  exec::SpmdProgram::Options options;
  options.collective_timeout = absl::Seconds(flags.collective_timeout_s);
  absl::StatusOr<std::unique_ptr<exec::SpmdProgram>> program =
      exec::SpmdProgram::Create(*std::move(parsed), flags.partitions, options);
  if (!program.ok()) {
    return absl::Status(
        program.status().code(),
        absl::StrCat(flags.program_path, ": ", program.status().message()));
  }
  const hlo::Module& module = (*program)->module();
  CW_ASSIGN_OR_RETURN(std::vector<std::vector<Literal>> args,
                      LoadInputs(flags, module));
  CW_ASSIGN_OR_RETURN(std::vector<std::vector<Literal>> outputs,
                      (*program)->Run(std::move(args)));

  // Outputs: the flattened root, the same count on every partition.
  const size_t output_count = outputs[0].size();
  for (size_t i = 0; i < output_count; ++i) {
    if (!outputs[0][i].shape().IsArray()) {
      return absl::UnimplementedError(
          absl::StrCat("output ", i, " is ", ShapeText(outputs[0][i].shape()),
                       "; only arrays can be written as .npy"));
    }
  }
  std::vector<Sharding> shardings;
  if (flags.global) {
    CW_ASSIGN_OR_RETURN(shardings, OutputShardings(flags, module, outputs[0]));
  }
  std::error_code error;
  std::filesystem::create_directories(flags.output_dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat(
        flags.output_dir,
        ": cannot create the output directory: ", error.message()));
  }
  for (size_t i = 0; i < output_count; ++i) {
    Literal value;
    if (flags.global) {
      std::vector<Literal> shards;
      for (auto& partition_outputs : outputs) {
        shards.push_back(partition_outputs[i]);
      }
      absl::StatusOr<Shape> global_shape = hlo::GlobalShapeFromShard(
          shardings[i], shards[0].shape(), flags.partitions);
      if (!global_shape.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("output ", i, ": ", global_shape.status().message()));
      }
      absl::StatusOr<Literal> assembled =
          hlo::AssembleGlobal(shards, shardings[i], *global_shape);
      if (!assembled.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("output ", i, ": ", assembled.status().message()));
      }
      value = *std::move(assembled);
    } else {
      CW_ASSIGN_OR_RETURN(value, Stack(outputs, i));
    }
    const std::string path = (std::filesystem::path(flags.output_dir) /
                              absl::StrCat("out", i, ".npy"))
                                 .string();
    CW_RETURN_IF_ERROR(hlo::WriteNpy(path, value));
    std::printf("%s: %s\n", path.c_str(), ShapeText(value.shape()).c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  auto parsed = ParseRunFlags(args);
  if (std::holds_alternative<bool>(parsed)) {
    std::fputs(kRunHelp, stdout);
    return kExitOk;
  }
  if (auto* usage = std::get_if<UsageError>(&parsed)) {
    std::fprintf(stderr,
                 "causeway run: %s\nTry 'causeway run --help' for the "
                 "options.\n",
                 usage->message.c_str());
    return kExitUsage;
  }
  absl::Status status = RunProgram(std::get<RunFlags>(parsed));
  if (!status.ok()) {
    std::fprintf(stderr, "causeway run: error: %s\n",
                 std::string(status.message()).c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace causeway::cli
