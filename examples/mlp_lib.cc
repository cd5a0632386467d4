#include "mlp_lib.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/hlo/npy.h"

namespace causeway::examples {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

absl::StatusOr<MlpData> LoadMlpData(const std::string& dir) {
  MlpData data;
  CW_ASSIGN_OR_RETURN(data.program, ReadFile(dir + "/program.hlo"));
  for (int i = 0; i < kMlpNumParams; ++i) {
    CW_ASSIGN_OR_RETURN(
        hlo::Literal param,
        hlo::ReadNpy(absl::StrCat(dir, "/param", i, ".npy")));
    data.params.push_back(std::move(param));
  }
  CW_ASSIGN_OR_RETURN(data.x, hlo::ReadNpy(dir + "/x.npy"));
  CW_ASSIGN_OR_RETURN(data.y, hlo::ReadNpy(dir + "/y.npy"));
  if (data.x.shape().rank() < 2 || data.y.shape().rank() < 1 ||
      data.x.shape().dim(0) != data.y.shape().dim(0) ||
      data.x.shape().dim(0) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": x.npy ", data.x.shape().ToString(), " and y.npy ",
        data.y.shape().ToString(),
        " must hold the same number (at least 1) of batches"));
  }
  const std::string loss = dir + "/loss.npy";
  if (std::filesystem::exists(loss)) {
    CW_ASSIGN_OR_RETURN(data.jax_loss, hlo::ReadNpy(loss));
  }
  return data;
}

hlo::Literal Batch(const hlo::Literal& batches, int64_t index) {
  const std::vector<int64_t> dims(batches.shape().dims().begin() + 1,
                                  batches.shape().dims().end());
  hlo::Literal batch(hlo::Shape(batches.shape().type(), dims));
  const auto* source = static_cast<const std::byte*>(batches.untyped_data()) +
                       index * batch.size_bytes();
  std::memcpy(batch.mutable_untyped_data(), source,
              static_cast<size_t>(batch.size_bytes()));
  return batch;
}

absl::StatusOr<std::vector<client::Array>> LaunchMlpStep(
    client::Session& session, const client::Executable& program,
    const std::vector<client::Array>& params, const MlpData& data,
    int64_t batch) {
  const std::vector<client::Sharding>& shardings =
      program.parameter_shardings();
  if (params.size() != kMlpNumParams ||
      shardings.size() != kMlpNumParams + 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the train step takes ", kMlpNumParams, " parameters, x and y; got ",
        params.size(), " parameter arrays for a program of ",
        shardings.size(), " inputs"));
  }
  std::vector<client::Array> args = params;
  CW_ASSIGN_OR_RETURN(client::Array x,
                      session.FromHost(Batch(data.x, batch), program.slice(),
                                       shardings[kMlpNumParams]));
  CW_ASSIGN_OR_RETURN(client::Array y,
                      session.FromHost(Batch(data.y, batch), program.slice(),
                                       shardings[kMlpNumParams + 1]));
  args.push_back(std::move(x));
  args.push_back(std::move(y));
  return program.Execute(args);
}

}  // namespace causeway::examples
