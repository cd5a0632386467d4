#include "corpus_runner.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "causeway/base/status.h"
#include "causeway/client/connect.h"
#include "causeway/client/local_client.h"
#include "causeway/client/session.h"
#include "causeway/hlo/npy.h"

namespace causeway::corpus {

namespace fs = std::filesystem;

namespace {

// The corpus's outputs are what JAX computed on the processor that wrote
// them (Intel with AVX512-FP16: docs/hlo.md, "Rounding"), so its programs
// run as XLA runs there, on any processor: the evaluator emulates native f16
// (exec/xla_cpu_target.h), and the clusters this binary starts inherit it.
// Set before main, so before anything reads it; an explicit
// CAUSEWAY_XLA_CPU wins. What XLA computes on the processor at hand is
// checked against live JAX by python/tests/test_rounding_vs_jax.py.
const bool kRunsAsTheCorpusWasWritten = [] {
  setenv("CAUSEWAY_XLA_CPU", "avx512fp16,intel", /*overwrite=*/0);
  return true;
}();

}  // namespace

fs::path CorpusDir() {
  const char* dir = std::getenv("CAUSEWAY_CORPUS_DIR");
  return fs::path(dir != nullptr && *dir != '\0' ? dir : CAUSEWAY_CORPUS_DIR);
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::vector<std::string>> ListedPrograms(const fs::path& root) {
  CW_ASSIGN_OR_RETURN(std::string text, ReadFile(root / "programs.txt"));
  std::vector<std::string> names;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    names.emplace_back(line);
  }
  if (names.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat((root / "programs.txt").string(), " lists no programs"));
  }
  return names;
}

std::vector<std::string> ProgramDirectories(const fs::path& root) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    if (entry.is_directory() && fs::exists(entry.path() / "program.hlo")) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

absl::StatusOr<std::vector<int64_t>> ParseDims(const std::string& text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return absl::InvalidArgumentError(
        absl::StrCat("shape '", text, "' is not of the form [d0,d1,...]"));
  }
  std::vector<int64_t> dims;
  std::string inner = text.substr(1, text.size() - 2);
  if (inner.empty()) return dims;
  for (const auto& piece : absl::StrSplit(inner, ',')) {
    std::string digits(piece.data(), piece.size());
    if (digits.empty() || digits.size() > 12 ||
        !std::all_of(digits.begin(), digits.end(), ::isdigit)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad dimension '", digits, "' in shape ", text));
    }
    dims.push_back(std::stoll(digits));
  }
  return dims;
}

}  // namespace

absl::StatusOr<Manifest> ParseManifest(const std::string& text,
                                       const std::string& path) {
  Manifest manifest;
  int line_number = 0;
  for (const auto& raw_line : absl::StrSplit(text, '\n')) {
    ++line_number;
    std::string line(raw_line.data(), raw_line.size());
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": ", what));
    };
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.find(' ');
    std::string key = line.substr(0, space);
    std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
    if (key == "name") {
      manifest.name = rest;
    } else if (key == "description") {
      manifest.description = rest;
    } else if (key == "partitions") {
      if (rest.empty() || rest.size() > 6 ||
          !std::all_of(rest.begin(), rest.end(), ::isdigit)) {
        return error("partitions wants a positive integer");
      }
      manifest.partitions = std::stoll(rest);
      if (manifest.partitions < 1) return error("partitions must be >= 1");
    } else if (key == "input" || key == "output") {
      std::vector<std::string> fields =
          absl::StrSplit(rest, ' ', absl::SkipEmpty());
      size_t want = key == "input" ? 3 : 5;
      if (fields.size() != want) {
        return error(absl::StrCat(key, " wants ", want, " fields, got ",
                                  fields.size()));
      }
      ArraySpec spec;
      spec.file = fields[0];
      if (spec.file.find('/') != std::string::npos) {
        return error("array files must lie in the program's directory");
      }
      auto type = hlo::PrimitiveTypeFromName(fields[1]);
      if (!type.has_value() || !hlo::IsArrayType(*type)) {
        return error(absl::StrCat("unknown dtype '", fields[1], "'"));
      }
      spec.type = *type;
      auto dims = ParseDims(fields[2]);
      if (!dims.ok()) return error(std::string(dims.status().message()));
      spec.shard_dims = *std::move(dims);
      if (key == "output") {
        char* end = nullptr;
        spec.rtol = std::strtod(fields[3].c_str(), &end);
        if (*end != '\0' || spec.rtol < 0) return error("bad rtol");
        spec.atol = std::strtod(fields[4].c_str(), &end);
        if (*end != '\0' || spec.atol < 0) return error("bad atol");
        manifest.outputs.push_back(std::move(spec));
      } else {
        manifest.inputs.push_back(std::move(spec));
      }
    } else {
      return error(absl::StrCat("unknown key '", key, "'"));
    }
  }
  if (manifest.partitions == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no partitions line"));
  }
  if (manifest.outputs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no outputs"));
  }
  return manifest;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

// Splits a stacked array (leading axis = partition) into one literal per
// partition, checking it against the manifest's dtype and shard shape.
absl::StatusOr<std::vector<hlo::Literal>> Unstack(const hlo::Literal& stacked,
                                                  const ArraySpec& spec,
                                                  int64_t partitions) {
  const hlo::Shape& shape = stacked.shape();
  std::vector<int64_t> want_dims = {partitions};
  want_dims.insert(want_dims.end(), spec.shard_dims.begin(),
                   spec.shard_dims.end());
  if (shape.type() != spec.type || shape.dims() != want_dims) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.file, " holds ", shape.ToString(false), " but the manifest says ",
        std::string(hlo::PrimitiveTypeName(spec.type)), DimsText(want_dims)));
  }
  hlo::Shape shard_shape(spec.type, spec.shard_dims);
  const int64_t shard_bytes = shard_shape.ByteSize();
  const char* data = static_cast<const char*>(stacked.untyped_data());
  std::vector<hlo::Literal> shards;
  for (int64_t p = 0; p < partitions; ++p) {
    hlo::Literal shard(shard_shape);
    if (shard_bytes > 0) {
      std::memcpy(shard.mutable_untyped_data(), data + p * shard_bytes,
                  shard_bytes);
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

absl::StatusOr<std::vector<std::vector<hlo::Literal>>> ReadInputs(
    const fs::path& dir, const Manifest& manifest) {
  std::vector<std::vector<hlo::Literal>> inputs;
  for (const ArraySpec& spec : manifest.inputs) {
    CW_ASSIGN_OR_RETURN(hlo::Literal stacked,
                        hlo::ReadNpy((dir / spec.file).string(), spec.type));
    CW_ASSIGN_OR_RETURN(std::vector<hlo::Literal> shards,
                        Unstack(stacked, spec, manifest.partitions));
    inputs.push_back(std::move(shards));
  }
  return inputs;
}

Runner& Runner::Get(bool fused_loops) {
  static Runner* const fused = new Runner(true);
  static Runner* const op_by_op = new Runner(false);
  return fused_loops ? *fused : *op_by_op;
}

absl::Status Runner::EnsureDevices(int64_t devices) {
  if (devices <= devices_) return absl::OkStatus();
  const char* on_cluster = std::getenv("CAUSEWAY_CORPUS_CLUSTER");
  if (fused_loops_ && on_cluster != nullptr &&
      std::string(on_cluster) == "1") {
    if (devices > kClusterHosts) {
      return absl::InvalidArgumentError(absl::StrCat(
          devices, " partitions: the multi-process cluster has ",
          kClusterHosts, " devices"));
    }
    CW_ASSIGN_OR_RETURN(
        processes_,
        cli::ClusterProcess::Start(
            CAUSEWAY_BINARY,
            {"--islands", "1", "--hosts-per-island",
             absl::StrCat(kClusterHosts), "--devices-per-host", "1",
             "--memory-per-device", "4G"}));
    CW_ASSIGN_OR_RETURN(client_, client::Connect(processes_->address()));
    devices_ = kClusterHosts;
    return absl::OkStatus();
  }
  client_.reset();
  cluster_.reset();
  devices_ = 0;
  cluster::LocalClusterOptions options;
  options.devices_per_host = std::max<int64_t>(devices, 8);
  options.evaluator.fused_loops = fused_loops_;
  CW_ASSIGN_OR_RETURN(cluster_, cluster::LocalCluster::Create(options));
  client_ = client::ConnectLocal(*cluster_);
  devices_ = std::max<int64_t>(devices, 8);
  return absl::OkStatus();
}

void Runner::Stop() {
  client_.reset();
  cluster_.reset();
  processes_.reset();
  devices_ = 0;
}

absl::StatusOr<std::vector<std::vector<hlo::Literal>>> Runner::Run(
    const std::string& hlo_text, int64_t partitions,
    std::vector<std::vector<hlo::Literal>> inputs) {
  CW_RETURN_IF_ERROR(EnsureDevices(partitions));
  CW_ASSIGN_OR_RETURN(client::Session session,
                      client_->OpenSession({.name = "corpus"}));
  CW_ASSIGN_OR_RETURN(client::Slice slice, session.CreateSlice(partitions));
  if (processes_ != nullptr && partitions >= 2) {
    CW_ASSIGN_OR_RETURN(transport::SliceInfo granted,
                        slice.Ready().AwaitFor(absl::Seconds(60)));
    std::set<HostId> hosts;
    for (DeviceId device : granted.devices) {
      hosts.insert(client_->topology()->HostOf(device));
    }
    if (hosts.size() < 2) {
      return absl::InternalError(
          "the slice is not spread over two worker processes");
    }
  }
  CW_ASSIGN_OR_RETURN(client::Executable executable,
                      session.Compile(hlo_text, slice));
  if (inputs.size() != executable.parameter_shapes().size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the program takes ", executable.parameter_shapes().size(),
        " parameters, the corpus gives ", inputs.size(), " inputs"));
  }
  std::vector<client::Array> arguments;
  for (size_t i = 0; i < inputs.size(); ++i) {
    CW_ASSIGN_OR_RETURN(
        client::Array argument,
        session.FromShards(std::move(inputs[i]),
                           executable.parameter_shapes()[i], slice,
                           executable.parameter_shardings()[i]));
    arguments.push_back(std::move(argument));
  }
  CW_ASSIGN_OR_RETURN(std::vector<client::Array> outputs,
                      executable.Execute(arguments));
  std::vector<Future<std::vector<hlo::Literal>>> fetched;
  for (const client::Array& output : outputs) {
    fetched.push_back(output.ShardsToHost());
  }
  std::vector<std::vector<hlo::Literal>> results;
  for (const auto& future : fetched) {
    CW_ASSIGN_OR_RETURN(std::vector<hlo::Literal> shards, future.Await());
    results.push_back(std::move(shards));
  }
  return results;
}

}  // namespace causeway::corpus
