#include "causeway/hlo/collective_groups.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/hlo/shape.h"

namespace causeway::hlo {

bool HasGlobalDeviceIdsFlag(Opcode opcode) {
  return opcode == Opcode::kAllReduce || opcode == Opcode::kAllGather ||
         opcode == Opcode::kReduceScatter;
}

CollectiveGroupMode GetCollectiveGroupMode(const Instruction& instr) {
  if (!instr.channel_id.has_value()) return CollectiveGroupMode::kCrossReplica;
  if (!HasGlobalDeviceIdsFlag(instr.opcode)) {
    return CollectiveGroupMode::kCrossPartition;
  }
  return instr.use_global_device_ids
             ? CollectiveGroupMode::kFlattenedId
             : CollectiveGroupMode::kCrossReplicaAndPartition;
}

absl::StatusOr<std::vector<int64_t>> ExpandIota(
    const std::vector<int64_t>& reshape_dims,
    const std::vector<int64_t>& transpose_perm) {
  const int64_t rank = static_cast<int64_t>(reshape_dims.size());
  int64_t total = 1;
  for (int64_t d : reshape_dims) {
    if (d < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("iota dimension ", d, " is not positive"));
    }
    if (d > kMaxIotaIds / total) {
      return absl::InvalidArgumentError(
          absl::StrCat("iota expands to more than ", kMaxIotaIds, " ids"));
    }
    total *= d;
  }
  std::vector<int64_t> perm = transpose_perm;
  if (perm.empty()) {
    for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
  }
  if (!IsPermutation(perm, rank)) {
    return absl::InvalidArgumentError(
        "iota transpose is not a permutation of its dimensions");
  }
  // Element k of the transposed array is the iota value
  // sum(index[j] * stride[perm[j]]) for k's multi-index over the transposed
  // dims.
  const std::vector<int64_t> strides = RowMajorStrides(reshape_dims);
  std::vector<int64_t> dims(rank), read_strides(rank);
  for (int64_t j = 0; j < rank; ++j) {
    dims[j] = reshape_dims[perm[j]];
    read_strides[j] = strides[perm[j]];
  }
  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(total));
  std::vector<int64_t> index(rank, 0);
  for (int64_t k = 0; k < total; ++k) {
    int64_t value = 0;
    for (int64_t j = 0; j < rank; ++j) value += index[j] * read_strides[j];
    ids.push_back(value);
    for (int64_t j = rank - 1; j >= 0; --j) {
      if (++index[j] < dims[j]) break;
      index[j] = 0;
    }
  }
  return ids;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> ExpandReplicaGroups(
    const ReplicaGroups& groups) {
  if (!groups.groups.empty() || !groups.iota.has_value()) {
    return groups.groups;
  }
  const ReplicaGroups::Iota& iota = *groups.iota;
  if (iota.num_groups < 1 || iota.group_size < 1 ||
      iota.group_size > kMaxIotaIds / iota.num_groups) {
    return absl::InvalidArgumentError(
        absl::StrCat("iota replica groups [", iota.num_groups, ",",
                     iota.group_size, "] are empty or too large"));
  }
  const int64_t total = iota.num_groups * iota.group_size;
  std::vector<int64_t> dims = iota.reshape_dims;
  if (dims.empty()) dims = {total};
  CW_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                      ExpandIota(dims, iota.transpose_perm));
  if (static_cast<int64_t>(ids.size()) != total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "iota replica groups reshape dims do not multiply to ", total));
  }
  std::vector<std::vector<int64_t>> result;
  result.reserve(static_cast<size_t>(iota.num_groups));
  for (int64_t g = 0; g < iota.num_groups; ++g) {
    result.emplace_back(ids.begin() + g * iota.group_size,
                        ids.begin() + (g + 1) * iota.group_size);
  }
  return result;
}

}  // namespace causeway::hlo
