#include "causeway/cli/run_command.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/logging.h"
#include "causeway/base/memory_account.h"
#include "causeway/base/status.h"
#include "causeway/cli/exit_codes.h"
#include "causeway/cli/flags.h"
#include "causeway/cli/interrupts.h"
#include "causeway/client/connect.h"
#include "causeway/client/local_client.h"
#include "causeway/client/session.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/npy.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/printer.h"
#include "causeway/hlo/sharding_util.h"

namespace causeway::cli {
namespace {

using hlo::Literal;
using hlo::Shape;
using hlo::Sharding;

constexpr char kRunHelp[] = R"(Usage:
  causeway run PROGRAM.hlo --partitions N --input A.npy [--input B.npy ...]
               --output-dir DIR [--global] [--output-sharding S ...]
               [--timeout SECONDS] [--collective-timeout SECONDS]
               [--cluster HOST:PORT [--token-file F] [--tls-ca F]
                [--tls-cert F --tls-key F]]

Runs PROGRAM.hlo, the HLO text of a program partitioned for N devices (what
XLA compiled for a `jax.jit` function: one module that every partition
runs, with shard-shaped parameters; see the README for how to export it
with its constants in full), on a slice of N CPU devices of an embedded
cluster: the same runtime as `causeway head`/`worker`, in this process.
With --cluster, on a slice of N devices of the running cluster whose head
is at HOST:PORT (`causeway cluster`, or `causeway head` and its workers),
with the same inputs and outputs.

Inputs and outputs are NumPy .npy files: little-endian, C order; bool,
int8-64, uint8-64, float16/32/64, and bfloat16 stored as '<V2' (save with
np.save(path, x) for an ml_dtypes.bfloat16 array x; read back with
np.load(path).view(ml_dtypes.bfloat16)). A file is checked (magic, header)
before it is read, and only the bytes its header declares are read.

  --partitions N    Number of devices, 1 to 1024. Must match the module's
                    num_partitions (a module for 1 partition without
                    collectives may run on any N: every device runs a copy
                    on its own inputs, and reads partition-id 0, as XLA).
  --input FILE      One per entry parameter, in parameter order.
                    By default FILE holds that parameter for all partitions
                    stacked along a new leading axis: shape [N, ...shard
                    shape], row p being partition p's argument (each device
                    keeps its own row, even of a replicated parameter).
  --output-dir DIR  Where out0.npy, out1.npy, ... are written, one per
                    output (a tuple result gives one file per element).
                    By default each holds the output of all partitions
                    stacked along a leading axis of size N. Created if
                    missing.
  --global          Inputs and outputs are global (unsharded) arrays instead.
                    Inputs are split by the `sharding=` of each entry
                    parameter and must divide evenly by it (as JAX requires);
                    a parameter without an annotation is refused. Outputs
                    are assembled by --output-sharding, else by the ROOT's
                    `sharding=` (pre-optimization and hand-written modules
                    carry it; XLA's compiled modules do not), else scalars
                    are taken as replicated and other outputs refused. An
                    output sharding must fit the output's shard shape and N,
                    and replicas it declares must hold the same values.
  --output-sharding S
                    With --global: the sharding of output i (given once per
                    output, in order), in XLA syntax, e.g.
                    '{devices=[4,2]<=[8]}' or '{replicated}'. From JAX, for
                    output i of a compiled function c:
                    c.output_shardings[i]._to_xla_hlo_sharding(c.out_info[i].ndim).
  --timeout SECONDS Stop the program after SECONDS (a program may loop
                    forever): the run ends with an error, exit status 124.
  --collective-timeout SECONDS
                    How long a device waits for its peers in a collective
                    before failing (default 60). Embedded only: a running
                    cluster's workers have their own.
  --cluster HOST:PORT
                    Run on that cluster's devices (its slice request waits
                    until N devices of one island are free: bound it with
                    --timeout).
  --token-file F, --tls-ca F, --tls-cert F, --tls-key F
                    With --cluster: the cluster's token, the CA its head's
                    TLS certificate is checked against, and the client
                    certificate a head with mutual TLS requires (the same
                    flags as every command: causeway head --help).
  --help            Show this help.

A partition that fails stops the others: a peer waiting for it in a
collective fails, and one looping without collectives stops at its next
iteration. SIGINT or SIGTERM stops the run likewise (exit status 130; a
second one exits at once).

Exit status: 0 on success, 1 when the program or its inputs are wrong (the
message names the parameter, instruction or file), 2 for a usage error,
124 past --timeout, 130 when interrupted.

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
  std::optional<double> timeout_s;
  // A running cluster's head; empty: embedded.
  std::string cluster;
  client::ConnectOptions connect;
};

// The run command's flags (cli/flags.h parses them as every command's).
std::vector<FlagSpec> RunFlagSpecs() {
  return {{"--partitions"},
          {"--input", /*takes_value=*/true, /*repeatable=*/true},
          {"--output-dir"},
          {"--global", /*takes_value=*/false},
          {"--output-sharding", /*takes_value=*/true, /*repeatable=*/true},
          {"--collective-timeout"},
          {"--timeout"},
          {"--cluster"},
          {"--token-file"},
          {"--tls-ca"},
          {"--tls-cert"},
          {"--tls-key"}};
}

// InvalidArgument (a usage error, printed with a pointer to --help) for
// flags that are malformed, missing or do not go together.
absl::StatusOr<RunFlags> RunFlagsOf(const ParsedFlags& parsed) {
  auto usage = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  RunFlags flags;
  if (parsed.positional.empty()) {
    return usage("missing the program (an .hlo text file)");
  }
  flags.program_path = parsed.positional[0];
  if (parsed.positional.size() > 1) {
    return usage("unexpected argument '", parsed.positional[1],
                 "' (the program is '", flags.program_path, "')");
  }
  if (!parsed.Has("--partitions")) return usage("missing --partitions N");
  CW_ASSIGN_OR_RETURN(flags.partitions,
                      IntFlag(parsed, "--partitions", 0, 1,
                              cluster::LocalCluster::kMaxDevices));
  flags.output_dir = parsed.Get("--output-dir").value_or("");
  if (flags.output_dir.empty()) return usage("missing --output-dir DIR");
  flags.global = parsed.Has("--global");
  if (auto it = parsed.values.find("--input"); it != parsed.values.end()) {
    flags.inputs = it->second;
  }
  if (auto it = parsed.values.find("--output-sharding");
      it != parsed.values.end()) {
    flags.output_shardings = it->second;
  }
  if (!flags.output_shardings.empty() && !flags.global) {
    return usage("--output-sharding only applies with --global");
  }
  CW_ASSIGN_OR_RETURN(absl::Duration collective_timeout,
                      SecondsFlag(parsed, "--collective-timeout",
                                  absl::Seconds(flags.collective_timeout_s)));
  flags.collective_timeout_s = absl::ToDoubleSeconds(collective_timeout);
  if (parsed.Has("--timeout")) {
    CW_ASSIGN_OR_RETURN(absl::Duration timeout,
                        SecondsFlag(parsed, "--timeout", absl::ZeroDuration()));
    flags.timeout_s = absl::ToDoubleSeconds(timeout);
  }
  flags.cluster = parsed.Get("--cluster").value_or("");
  flags.connect.token_file = parsed.Get("--token-file").value_or("");
  flags.connect.tls_ca_file = parsed.Get("--tls-ca").value_or("");
  flags.connect.tls_cert_file = parsed.Get("--tls-cert").value_or("");
  flags.connect.tls_key_file = parsed.Get("--tls-key").value_or("");
  if (flags.cluster.empty() &&
      (parsed.Has("--token-file") || parsed.Has("--tls-ca") ||
       parsed.Has("--tls-cert") || parsed.Has("--tls-key"))) {
    return usage(
        "--token-file and --tls-ca need --cluster HOST:PORT (and so do "
        "--tls-cert and --tls-key)");
  }
  if (!flags.cluster.empty() && parsed.Has("--collective-timeout")) {
    return usage(
        "--collective-timeout applies to an embedded run: a cluster's "
        "workers have their own (causeway worker --collective-timeout)");
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

// Stacks one output's shards (one per partition) along a new leading axis.
absl::StatusOr<Literal> Stack(const std::vector<Literal>& shards,
                              size_t index) {
  const Shape& shape = shards[0].shape();
  std::vector<int64_t> dims = {static_cast<int64_t>(shards.size())};
  dims.insert(dims.end(), shape.dims().begin(), shape.dims().end());
  Literal stacked(Shape(shape.type(), dims));
  const int64_t bytes = shape.ByteSize();
  auto* dst = static_cast<std::byte*>(stacked.mutable_untyped_data());
  for (size_t p = 0; p < shards.size(); ++p) {
    if (!shards[p].shape().Compatible(shape)) {
      return absl::InternalError(absl::StrCat(
          "partitions returned different shapes for output ", index));
    }
    if (bytes > 0) {
      std::memcpy(dst + p * bytes, shards[p].untyped_data(),
                  static_cast<size_t>(bytes));
    }
  }
  return stacked;
}

// Reads the inputs as arrays on `slice`: stacked files become one buffer
// per device (FromShards), global ones are split by the parameter's
// sharding (FromHost).
absl::StatusOr<std::vector<client::Array>> ReadInputs(
    const RunFlags& flags, const hlo::Module& module,
    const client::Executable& executable, client::Session& session,
    const client::Slice& slice) {
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
  std::vector<client::Array> arrays;
  for (int64_t i = 0; i < entry.parameter_count(); ++i) {
    const hlo::Instruction& parameter = *entry.parameter(i);
    const std::string& path = flags.inputs[i];
    const Shape& shard = parameter.shape;
    const Shape& global = executable.parameter_shapes()[i];
    const client::Sharding& sharding = executable.parameter_shardings()[i];
    // The parameter's type says what a '<V1' file (f8, int4) holds.
    CW_ASSIGN_OR_RETURN(
        Literal value,
        hlo::ReadNpy(path, shard.IsArray()
                               ? std::optional<hlo::PrimitiveType>(shard.type())
                               : std::nullopt));
    absl::StatusOr<client::Array> array;
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
      if (!value.shape().Compatible(global)) {
        absl::StatusOr<Shape> sharded =
            hlo::ShardShape(sharding.hlo(), value.shape(), n);
        const bool uneven = sharded.ok() && sharded->Compatible(shard);
        return absl::InvalidArgumentError(absl::StrCat(
            path, " for ", ParameterName(parameter), ": a global ",
            ShapeText(value.shape()),
            uneven ? absl::StrCat(" does not divide evenly by the sharding ",
                                  sharding.ToString(),
                                  " (JAX refuses such arguments too); the "
                                  "program's shards of ",
                                  ShapeText(shard), " make a global ",
                                  ShapeText(global))
                   : absl::StrCat(" does not shard into the ", ShapeText(shard),
                                  " the program expects; it takes a global ",
                                  ShapeText(global), " sharded ",
                                  sharding.ToString())));
      }
      array = session.FromHost(value, slice, sharding);
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
      array =
          session.FromShards(Unstack(value, shard, n), global, slice, sharding);
    }
    if (!array.ok()) {
      return absl::Status(array.status().code(),
                          absl::StrCat(path, " for ", ParameterName(parameter),
                                       ": ", array.status().message()));
    }
    arrays.push_back(*std::move(array));
  }
  return arrays;
}

// The sharding of each output in --global mode: --output-sharding flags,
// else the ROOT's annotation, else replicated for scalars (a scalar cannot
// be tiled), else an error saying what to pass.
absl::StatusOr<std::vector<Sharding>> OutputShardings(
    const RunFlags& flags, const hlo::Module& module,
    const std::vector<Shape>& shard_shapes) {
  const size_t output_count = shard_shapes.size();
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
    if (shard_shapes[i].rank() == 0) {
      shardings.push_back(Sharding());  // Replicated.
    } else {
      unknown.push_back(
          absl::StrCat(i, " (", ShapeText(shard_shapes[i]), " per partition)"));
    }
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--global needs the output shardings, and the ROOT '", root.name,
        "' (line ", root.line,
        ") carries no sharding= annotation (XLA's compiled modules do not "
        "record them); give one --output-sharding per output (",
        output_count,
        " in all), e.g. --output-sharding '{replicated}' or "
        "'{devices=[4,1]<=[4]}', or run without --global. Outputs needing "
        "one: ",
        absl::StrJoin(unknown, ", ")));
  }
  return shardings;
}

// The global shape output `index` (`shard` on each of `n` partitions) has
// under `sharding`, after checking that the sharding can describe it: a
// supported kind, as many devices as partitions, and the program's shard
// shape on each. `source` says where the sharding came from.
absl::StatusOr<Shape> OutputGlobalShape(const Sharding& sharding,
                                        const Shape& shard, int64_t n,
                                        const std::string& source,
                                        size_t index) {
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output ", index, " (", ShapeText(shard), " per partition) with ",
        source, " ", hlo::PrintSharding(sharding), ": ", why));
  };
  if (sharding.kind != Sharding::Kind::kReplicated &&
      sharding.kind != Sharding::Kind::kMaximal &&
      sharding.kind != Sharding::Kind::kTiled) {
    return refuse("only replicated, maximal and tiled shardings are supported");
  }
  if (sharding.kind == Sharding::Kind::kMaximal &&
      (sharding.maximal_device < 0 || sharding.maximal_device >= n)) {
    return refuse(absl::StrCat("names device ", sharding.maximal_device, " of ",
                               n, " partitions"));
  }
  if (sharding.kind == Sharding::Kind::kTiled &&
      static_cast<int64_t>(sharding.tile_devices.size()) != n) {
    return refuse(
        absl::StrCat("spreads its tiles over ", sharding.tile_devices.size(),
                     " devices, but the program runs on ", n, " partitions"));
  }
  absl::StatusOr<Shape> global = hlo::GlobalShapeFromShard(sharding, shard, n);
  if (!global.ok()) return refuse(std::string(global.status().message()));
  absl::StatusOr<std::vector<hlo::ShardRegion>> regions =
      hlo::ShardRegions(sharding, *global, n);
  if (!regions.ok()) return refuse(std::string(regions.status().message()));
  for (int64_t p = 0; p < n; ++p) {
    if ((*regions)[p].dims != shard.dims()) {
      return refuse(absl::StrCat("gives partition ", p, " a shard of [",
                                 absl::StrJoin((*regions)[p].dims, ","),
                                 "], not the ", ShapeText(shard),
                                 " it computes"));
    }
  }
  return global;
}

// Output `index`'s value of `global_shape`, assembled from its shards (one
// per partition) by `sharding` (checked by OutputGlobalShape). Partitions
// the sharding says hold the same part (its replicas) must hold the same
// bytes: a per-partition value read as replicated would otherwise come
// back as one partition's.
absl::StatusOr<Literal> AssembleOutput(const std::vector<Literal>& shards,
                                       const Sharding& sharding,
                                       const Shape& global_shape,
                                       const std::string& source,
                                       size_t index) {
  const int64_t n = static_cast<int64_t>(shards.size());
  CW_ASSIGN_OR_RETURN(std::vector<hlo::ShardRegion> regions,
                      hlo::ShardRegions(sharding, global_shape, n));
  if (sharding.kind != Sharding::Kind::kMaximal) {
    std::map<std::vector<int64_t>, int64_t> first_holder;
    for (int64_t p = 0; p < n; ++p) {
      auto [it, fresh] = first_holder.try_emplace(regions[p].offsets, p);
      if (!fresh && !(shards[p] == shards[it->second])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output ", index, " with ", source, " ",
            hlo::PrintSharding(sharding), ": it says partitions ", it->second,
            " and ", p,
            " hold the same part of the output, but their values differ; "
            "give the sharding the program was compiled with"));
      }
    }
  }
  return hlo::AssembleGlobal(shards, sharding, global_shape);
}

// What a run waits for: every output's shards, a failed output, an
// interrupt or the deadline, whichever comes first. Thread-safe.
class RunWatch {
 public:
  enum class Outcome { kDone, kFailed, kInterrupted, kTimedOut };

  // The run's outputs, before any resolves.
  void Expect(size_t outputs) {
    absl::MutexLock lock(&mu_);
    pending_ = outputs;
  }
  // Called as each output resolves (on a thread of the runtime).
  void Resolved(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    --pending_;
    if (!status.ok() && failure_.ok()) failure_ = status;
  }
  void Interrupt(int signal) {
    absl::MutexLock lock(&mu_);
    signal_ = signal;
  }

  // Waits until the first of: all resolved, one failed, an interrupt,
  // `deadline`.
  Outcome Wait(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return pending_ == 0 || !failure_.ok() || signal_ != 0;
    };
    mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
    if (signal_ != 0) return Outcome::kInterrupted;
    if (!failure_.ok()) return Outcome::kFailed;
    if (pending_ == 0) return Outcome::kDone;
    return Outcome::kTimedOut;
  }
  // Waits until every output resolved (after the run was stopped); false
  // if `deadline` passed first.
  bool AwaitAll(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto all = [this]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ == 0; };
    return mu_.AwaitWithDeadline(absl::Condition(&all), deadline);
  }
  absl::Status failure() {
    absl::MutexLock lock(&mu_);
    return failure_;
  }
  int signal() {
    absl::MutexLock lock(&mu_);
    return signal_;
  }

 private:
  absl::Mutex mu_;
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  int signal_ ABSL_GUARDED_BY(mu_) = 0;
};

// How long a stopped run may take to wind down (a cancelled program stops
// at its next loop iteration; one inside a long kernel finishes it) before
// the process exits without waiting for it.
constexpr absl::Duration kStopGrace = absl::Seconds(10);

// The runtime a run uses: a client and one session, of an embedded
// LocalCluster with one island of N devices or of a running cluster.
struct Runtime {
  std::unique_ptr<cluster::LocalCluster> cluster;  // Embedded only.
  std::unique_ptr<client::Client> client;
  std::optional<client::Session> session;

  // Closes the session and stops the cluster, within kStopGrace: a device
  // still inside a kernel it cannot leave makes the process exit with
  // `exit_code` instead of waiting.
  void ShutDown(int exit_code) {
    absl::Notification stopped;
    std::thread stopper([this, &stopped] {
      session.reset();
      client.reset();
      cluster.reset();
      stopped.Notify();
    });
    if (!stopped.WaitForNotificationWithTimeout(kStopGrace)) {
      PrintUserMessage(LogSeverity::kWarning,
                   "causeway run: the devices did not stop within %s; "
                   "exiting without them\n",
                   absl::FormatDuration(kStopGrace).c_str());
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(exit_code);
    }
    stopper.join();
  }
};

absl::Status WithPath(const std::string& path, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(path, ": ", status.message()));
}

// Starts the runtime and compiles the program on a slice of `flags.partitions`
// devices.
absl::StatusOr<client::Executable> StartRuntime(const RunFlags& flags,
                                                const std::string& text,
                                                Runtime& runtime,
                                                client::Slice& slice) {
  if (!flags.cluster.empty()) {
    CW_ASSIGN_OR_RETURN(runtime.client,
                        client::Connect(flags.cluster, flags.connect));
  } else {
    cluster::LocalClusterOptions options;
    options.islands = 1;
    options.hosts_per_island = 1;
    options.devices_per_host = flags.partitions;
    // Each device may use all of this machine's memory; a program that
    // needs more is refused with the instruction and the bytes.
    options.memory_per_device = PhysicalMemoryBytes();
    options.collective_timeout = absl::Seconds(flags.collective_timeout_s);
    CW_ASSIGN_OR_RETURN(runtime.cluster,
                        cluster::LocalCluster::Create(options));
    runtime.client = client::ConnectLocal(*runtime.cluster);
  }
  CW_ASSIGN_OR_RETURN(runtime.session,
                      runtime.client->OpenSession({.name = "causeway run"}));
  CW_ASSIGN_OR_RETURN(slice, runtime.session->CreateSlice(flags.partitions));
  absl::StatusOr<client::Executable> executable =
      runtime.session->Compile(text, slice);
  if (!executable.ok()) {
    return WithPath(flags.program_path, executable.status());
  }
  return executable;
}

// Why a run ended: OK, or the error, with the exit status it gives.
struct RunResult {
  absl::Status status;
  int exit_code = kExitOk;
};

RunResult Failed(absl::Status status) {
  return {std::move(status), kExitFailure};
}

RunResult RunProgram(const RunFlags& flags, RunWatch& watch, Runtime& runtime) {
  absl::StatusOr<std::string> text = ReadProgramText(flags.program_path);
  if (!text.ok()) return Failed(text.status());
  absl::StatusOr<std::unique_ptr<hlo::Module>> module = hlo::ParseModule(*text);
  if (!module.ok())
    return Failed(WithPath(flags.program_path, module.status()));
  client::Slice slice;
  absl::StatusOr<client::Executable> executable =
      StartRuntime(flags, *text, runtime, slice);
  if (!executable.ok()) return Failed(executable.status());
  absl::StatusOr<std::vector<client::Array>> arguments =
      ReadInputs(flags, **module, *executable, *runtime.session, slice);
  if (!arguments.ok()) return Failed(arguments.status());
  // The outputs' shard shapes, and their shardings in --global mode, are
  // known before the run: a wrong --output-sharding is refused first.
  std::vector<Shape> shard_shapes;
  const hlo::Instruction& root = *(*module)->entry()->root();
  if (root.shape.IsTuple()) {
    shard_shapes = root.shape.tuple_shapes();
  } else {
    shard_shapes.push_back(root.shape);
  }
  std::vector<Sharding> shardings;
  std::vector<Shape> global_shapes;
  const std::string sharding_source =
      !flags.output_shardings.empty() ? "--output-sharding"
      : root.sharding.has_value()     ? "the ROOT's sharding"
                                      : "the default sharding";
  if (flags.global) {
    absl::StatusOr<std::vector<Sharding>> resolved =
        OutputShardings(flags, **module, shard_shapes);
    if (!resolved.ok()) return Failed(resolved.status());
    shardings = *std::move(resolved);
    for (size_t i = 0; i < shardings.size(); ++i) {
      absl::StatusOr<Shape> global = OutputGlobalShape(
          shardings[i], shard_shapes[i], flags.partitions, sharding_source, i);
      if (!global.ok()) return Failed(global.status());
      global_shapes.push_back(*std::move(global));
    }
  }
  if (watch.signal() != 0) {
    return {absl::CancelledError(
                absl::StrCat("interrupted (signal ", watch.signal(), ")")),
            kExitInterrupted};
  }
  absl::StatusOr<std::vector<client::Array>> outputs =
      executable->Execute(*arguments);
  if (!outputs.ok()) return Failed(outputs.status());
  arguments->clear();
  watch.Expect(outputs->size());
  PrintUserMessage(LogSeverity::kInfo, "causeway run: running '%s' on %lld devices\n",
               (*module)->name().c_str(),
               static_cast<long long>(flags.partitions));

  std::vector<Future<std::vector<Literal>>> shards;
  for (const client::Array& output : *outputs) {
    shards.push_back(output.ShardsToHost());
  }
  RunWatch* watching = &watch;
  for (const auto& future : shards) {
    future.OnReady(InlineExecutor::Instance(),
                   [watching](const absl::StatusOr<std::vector<Literal>>& v) {
                     watching->Resolved(v.status());
                   });
  }
  const absl::Time deadline =
      flags.timeout_s.has_value()
          ? absl::Now() + absl::Seconds(*flags.timeout_s)
          : absl::InfiniteFuture();
  const RunWatch::Outcome outcome = watch.Wait(deadline);
  if (outcome != RunWatch::Outcome::kDone) {
    // Stop whatever still runs: closing the session cancels its launches
    // (a loop stops at its next iteration; peers waiting in collectives
    // fail), then every output resolves.
    runtime.session->Close().IgnoreError();
    watch.AwaitAll(absl::Now() + kStopGrace);
  }
  switch (outcome) {
    case RunWatch::Outcome::kInterrupted:
      return {absl::CancelledError(absl::StrCat("interrupted (signal ",
                                                watch.signal(),
                                                "); the program was stopped")),
              kExitInterrupted};
    case RunWatch::Outcome::kTimedOut:
      return {absl::DeadlineExceededError(
                  absl::StrCat("the program did not finish within --timeout ",
                               *flags.timeout_s, " s and was stopped")),
              kExitTimeout};
    case RunWatch::Outcome::kFailed:
      return Failed(watch.failure());
    case RunWatch::Outcome::kDone:
      break;
  }

  // Every output is assembled before any is written: a refused one leaves
  // no partial results behind.
  std::vector<Literal> values;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::vector<Literal>& parts = *shards[i].Await();
    absl::StatusOr<Literal> value =
        flags.global ? AssembleOutput(parts, shardings[i], global_shapes[i],
                                      sharding_source, i)
                     : Stack(parts, i);
    if (!value.ok()) return Failed(value.status());
    values.push_back(*std::move(value));
  }
  std::error_code error;
  std::filesystem::create_directories(flags.output_dir, error);
  if (error) {
    return Failed(absl::PermissionDeniedError(absl::StrCat(
        flags.output_dir,
        ": cannot create the output directory: ", error.message())));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string path = (std::filesystem::path(flags.output_dir) /
                              absl::StrCat("out", i, ".npy"))
                                 .string();
    if (absl::Status written = hlo::WriteNpy(path, values[i]); !written.ok()) {
      return Failed(written);
    }
    std::printf("%s: %s\n", path.c_str(), ShapeText(values[i].shape()).c_str());
  }
  return {};
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(args, RunFlagSpecs());
  if (parsed.ok() && parsed->help) {
    std::fputs(kRunHelp, stdout);
    return kExitOk;
  }
  absl::StatusOr<RunFlags> run_flags =
      parsed.ok() ? RunFlagsOf(*parsed)
                  : absl::StatusOr<RunFlags>(parsed.status());
  if (!run_flags.ok()) {
    PrintUserMessage(LogSeverity::kError,
                 "causeway run: %s\nTry 'causeway run --help' for the "
                 "options.\n",
                 std::string(run_flags.status().message()).c_str());
    return kExitUsage;
  }
  const RunFlags& flags = *run_flags;
  RunWatch watch;
  Runtime runtime;
  RunResult result;
  {
    Interrupts interrupts([&watch](int signal) { watch.Interrupt(signal); });
    result = RunProgram(flags, watch, runtime);
  }
  if (!result.status.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway run: error: %s\n",
                 std::string(result.status.message()).c_str());
  }
  runtime.ShutDown(result.exit_code);
  return result.exit_code;
}

}  // namespace causeway::cli
