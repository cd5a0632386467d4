#include "causeway/hlo/sharding_util.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"
#include "causeway/hlo/collective_groups.h"

namespace causeway::hlo {
namespace {

std::string Describe(const Sharding& sharding) {
  switch (sharding.kind) {
    case Sharding::Kind::kReplicated:
      return "{replicated}";
    case Sharding::Kind::kMaximal:
      return absl::StrCat("{maximal device=", sharding.maximal_device, "}");
    case Sharding::Kind::kManual:
      return "{manual}";
    case Sharding::Kind::kTuple:
      return absl::StrCat("tuple sharding of ", sharding.tuple_elements.size(),
                          " elements");
    case Sharding::Kind::kUnknown:
      return sharding.unknown_text;
    case Sharding::Kind::kTiled:
      return absl::StrCat(
          "{devices=[", absl::StrJoin(sharding.tile_dims, ","), "]",
          absl::StrJoin(sharding.tile_devices, ","),
          sharding.last_tile_dim_replicate ? " last_tile_dim_replicate" : "",
          "}");
  }
  return "sharding";
}

// Copies the block `extent` at `src_offsets` of `src` (dims `src_dims`) to
// `dst_offsets` of `dst` (dims `dst_dims`). Row-major, `width` bytes each.
void CopyBlock(const std::byte* src, const std::vector<int64_t>& src_dims,
               const std::vector<int64_t>& src_offsets, std::byte* dst,
               const std::vector<int64_t>& dst_dims,
               const std::vector<int64_t>& dst_offsets,
               const std::vector<int64_t>& extent, int64_t width) {
  const size_t rank = extent.size();
  for (int64_t e : extent) {
    if (e == 0) return;
  }
  if (rank == 0) {
    std::memcpy(dst, src, static_cast<size_t>(width));
    return;
  }
  const std::vector<int64_t> src_strides = RowMajorStrides(src_dims);
  const std::vector<int64_t> dst_strides = RowMajorStrides(dst_dims);
  const int64_t run = extent[rank - 1] * width;
  std::vector<int64_t> index(rank - 1, 0);
  while (true) {
    int64_t s = src_offsets[rank - 1], d = dst_offsets[rank - 1];
    for (size_t i = 0; i + 1 < rank; ++i) {
      s += (src_offsets[i] + index[i]) * src_strides[i];
      d += (dst_offsets[i] + index[i]) * dst_strides[i];
    }
    std::memcpy(dst + d * width, src + s * width, static_cast<size_t>(run));
    int64_t i = static_cast<int64_t>(rank) - 2;
    for (; i >= 0; --i) {
      if (++index[i] < extent[i]) break;
      index[i] = 0;
    }
    if (i < 0) return;
  }
}

absl::Status CheckArray(const Shape& shape, const Sharding& sharding) {
  if (!shape.IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharding ", Describe(sharding),
                     " applies to an array, not to ", shape.ToString(false)));
  }
  return absl::OkStatus();
}

// A tiled sharding checked against an array of `global_shape` (rank and
// type already checked) on `num_partitions` partitions: its devices in tile
// order (each in range, none twice) and the dims of one shard (the last
// shards of an uneven split are padded to them).
struct Tiling {
  std::vector<int64_t> devices;
  std::vector<int64_t> shard_dims;
};

absl::StatusOr<Tiling> CheckTiling(const Sharding& sharding,
                                   const Shape& global_shape,
                                   int64_t num_partitions) {
  const int64_t rank = global_shape.rank();
  const std::vector<int64_t>& global = global_shape.dims();
  const std::vector<int64_t>& tile_dims = sharding.tile_dims;
  const int64_t extra = static_cast<int64_t>(tile_dims.size()) - rank;
  int64_t expected_extra = sharding.last_tile_dim_replicate ? 1 : 0;
  for (const std::string& kind : sharding.last_tile_dims) {
    if (kind != "replicated") {
      return absl::UnimplementedError(
          absl::StrCat("sharding with last_tile_dims={",
                       absl::StrJoin(sharding.last_tile_dims, ", "),
                       "} is not supported (only replicated subgroups)"));
    }
  }
  if (!sharding.last_tile_dims.empty()) {
    expected_extra = static_cast<int64_t>(sharding.last_tile_dims.size());
  }
  if (extra != expected_extra) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharding ", Describe(sharding), " has ", tile_dims.size(),
                     " tile dimensions; an array of rank ", rank, " needs ",
                     rank + expected_extra));
  }
  std::vector<int64_t> devices = sharding.tile_devices;
  if (devices.empty() && sharding.iota.has_value()) {
    absl::StatusOr<std::vector<int64_t>> expanded =
        ExpandIota(sharding.iota->reshape_dims, sharding.iota->transpose_perm);
    if (!expanded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sharding ", Describe(sharding), ": ", expanded.status().message()));
    }
    devices = *std::move(expanded);
  }
  int64_t tile_count = 1;
  for (int64_t t : tile_dims) {
    if (t < 1 || t > num_partitions) {
      return absl::InvalidArgumentError(
          absl::StrCat("sharding ", Describe(sharding),
                       " has a tile dimension outside 1..", num_partitions));
    }
    tile_count *= t;
  }
  if (tile_count != static_cast<int64_t>(devices.size()) ||
      tile_count != num_partitions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharding ", Describe(sharding), " spans ", tile_count, " tiles over ",
        devices.size(), " devices; the program has ", num_partitions,
        " partitions"));
  }
  std::vector<bool> seen(num_partitions, false);
  for (const int64_t device : devices) {
    if (device < 0 || device >= num_partitions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sharding ", Describe(sharding), " lists device ", device,
          ", outside the program's ", num_partitions, " partitions"));
    }
    if (seen[device]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sharding ", Describe(sharding), " lists device ", device, " twice"));
    }
    seen[device] = true;
  }
  std::vector<int64_t> shard_dims(rank);
  for (int64_t i = 0; i < rank; ++i) {
    shard_dims[i] = (global[i] + tile_dims[i] - 1) / tile_dims[i];
  }
  return Tiling{std::move(devices), std::move(shard_dims)};
}

}  // namespace

absl::StatusOr<std::vector<ShardRegion>> ShardRegions(const Sharding& sharding,
                                                      const Shape& global_shape,
                                                      int64_t num_partitions) {
  CW_RETURN_IF_ERROR(CheckArray(global_shape, sharding));
  if (num_partitions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("need at least one partition, got ", num_partitions));
  }
  const int64_t rank = global_shape.rank();
  const std::vector<int64_t>& global = global_shape.dims();
  std::vector<ShardRegion> regions(num_partitions);
  switch (sharding.kind) {
    case Sharding::Kind::kReplicated:
    case Sharding::Kind::kMaximal: {
      int64_t primary = 0;
      if (sharding.kind == Sharding::Kind::kMaximal) {
        primary = sharding.maximal_device;
        if (primary < 0 || primary >= num_partitions) {
          return absl::InvalidArgumentError(
              absl::StrCat(Describe(sharding), " names device ", primary,
                           ", but there are ", num_partitions, " partitions"));
        }
      }
      for (int64_t p = 0; p < num_partitions; ++p) {
        regions[p] = {std::vector<int64_t>(rank, 0), global, global,
                      p == primary};
      }
      return regions;
    }
    case Sharding::Kind::kTiled:
      break;
    case Sharding::Kind::kManual:
      return absl::UnimplementedError(
          "a {manual} sharding has no global layout to split or assemble");
    case Sharding::Kind::kTuple:
      return absl::InvalidArgumentError(
          absl::StrCat("a tuple sharding does not apply to the array ",
                       global_shape.ToString(false)));
    case Sharding::Kind::kUnknown:
      return absl::UnimplementedError(absl::StrCat(
          "sharding ", sharding.unknown_text, " is not supported"));
  }

  const std::vector<int64_t>& tile_dims = sharding.tile_dims;
  CW_ASSIGN_OR_RETURN(Tiling tiling,
                      CheckTiling(sharding, global_shape, num_partitions));
  const std::vector<int64_t>& shard_dims = tiling.shard_dims;
  std::vector<int64_t> index(tile_dims.size(), 0);
  for (const int64_t device : tiling.devices) {
    ShardRegion& region = regions[device];
    region.dims = shard_dims;
    region.offsets.resize(rank);
    region.valid.resize(rank);
    for (int64_t i = 0; i < rank; ++i) {
      region.offsets[i] = std::min(index[i] * shard_dims[i], global[i]);
      region.valid[i] =
          std::clamp<int64_t>(global[i] - region.offsets[i], 0, shard_dims[i]);
    }
    region.primary = true;
    for (size_t i = rank; i < tile_dims.size(); ++i) {
      if (index[i] != 0) region.primary = false;
    }
    for (int64_t i = static_cast<int64_t>(tile_dims.size()) - 1; i >= 0; --i) {
      if (++index[i] < tile_dims[i]) break;
      index[i] = 0;
    }
  }
  return regions;
}

absl::StatusOr<Shape> ShardShape(const Sharding& sharding,
                                 const Shape& global_shape,
                                 int64_t num_partitions) {
  if (sharding.kind == Sharding::Kind::kTuple || global_shape.IsTuple()) {
    if (sharding.kind != Sharding::Kind::kTuple || !global_shape.IsTuple() ||
        sharding.tuple_elements.size() != global_shape.tuple_shapes().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sharding ", Describe(sharding), " does not fit ",
                       global_shape.ToString(false)));
    }
    std::vector<Shape> elements;
    for (size_t i = 0; i < sharding.tuple_elements.size(); ++i) {
      CW_ASSIGN_OR_RETURN(Shape element, ShardShape(sharding.tuple_elements[i],
                                                    global_shape.tuple_shape(i),
                                                    num_partitions));
      elements.push_back(std::move(element));
    }
    return Shape::Tuple(std::move(elements));
  }
  // Replicated and tiled shardings directly (this runs for every argument
  // and output of every launch); the others through ShardRegions, which
  // also gives their errors.
  if (sharding.kind == Sharding::Kind::kTiled && num_partitions >= 1) {
    CW_RETURN_IF_ERROR(CheckArray(global_shape, sharding));
    CW_ASSIGN_OR_RETURN(Tiling tiling,
                        CheckTiling(sharding, global_shape, num_partitions));
    return Shape(global_shape.type(), std::move(tiling.shard_dims));
  }
  if (sharding.kind == Sharding::Kind::kReplicated && num_partitions >= 1) {
    CW_RETURN_IF_ERROR(CheckArray(global_shape, sharding));
    return Shape(global_shape.type(), global_shape.dims());
  }
  CW_ASSIGN_OR_RETURN(std::vector<ShardRegion> regions,
                      ShardRegions(sharding, global_shape, num_partitions));
  return Shape(global_shape.type(), regions[0].dims);
}

absl::StatusOr<Shape> GlobalShapeFromShard(const Sharding& sharding,
                                           const Shape& shard_shape,
                                           int64_t num_partitions) {
  if (sharding.kind == Sharding::Kind::kTuple || shard_shape.IsTuple()) {
    if (sharding.kind != Sharding::Kind::kTuple || !shard_shape.IsTuple() ||
        sharding.tuple_elements.size() != shard_shape.tuple_shapes().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sharding ", Describe(sharding), " does not fit ",
                       shard_shape.ToString(false)));
    }
    std::vector<Shape> elements;
    for (size_t i = 0; i < sharding.tuple_elements.size(); ++i) {
      CW_ASSIGN_OR_RETURN(
          Shape element,
          GlobalShapeFromShard(sharding.tuple_elements[i],
                               shard_shape.tuple_shape(i), num_partitions));
      elements.push_back(std::move(element));
    }
    return Shape::Tuple(std::move(elements));
  }
  CW_RETURN_IF_ERROR(CheckArray(shard_shape, sharding));
  std::vector<int64_t> dims = shard_shape.dims();
  if (sharding.kind == Sharding::Kind::kTiled) {
    if (sharding.tile_dims.size() < dims.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sharding ", Describe(sharding), " does not fit ",
                       shard_shape.ToString(false)));
    }
    for (size_t i = 0; i < dims.size(); ++i) dims[i] *= sharding.tile_dims[i];
  }
  Shape global(shard_shape.type(), std::move(dims));
  // Validates the sharding against the partition count.
  CW_RETURN_IF_ERROR(ShardRegions(sharding, global, num_partitions).status());
  return global;
}

absl::StatusOr<std::vector<Literal>> SplitGlobal(const Literal& global,
                                                 const Sharding& sharding,
                                                 int64_t num_partitions) {
  const Shape& shape = global.shape();
  if (sharding.kind == Sharding::Kind::kTuple || shape.IsTuple()) {
    if (sharding.kind != Sharding::Kind::kTuple || !shape.IsTuple() ||
        sharding.tuple_elements.size() != global.elements().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sharding ", Describe(sharding), " does not fit ",
                       shape.ToString(false)));
    }
    std::vector<std::vector<Literal>> per_partition(num_partitions);
    for (size_t i = 0; i < global.elements().size(); ++i) {
      CW_ASSIGN_OR_RETURN(
          std::vector<Literal> parts,
          SplitGlobal(global.elements()[i], sharding.tuple_elements[i],
                      num_partitions));
      for (int64_t p = 0; p < num_partitions; ++p) {
        per_partition[p].push_back(std::move(parts[p]));
      }
    }
    std::vector<Literal> out;
    for (auto& elements : per_partition) {
      out.push_back(Literal::MakeTuple(std::move(elements)));
    }
    return out;
  }
  CW_ASSIGN_OR_RETURN(std::vector<ShardRegion> regions,
                      ShardRegions(sharding, shape, num_partitions));
  std::vector<Literal> shards;
  shards.reserve(num_partitions);
  const int64_t width = ByteWidth(shape.type());
  for (const ShardRegion& region : regions) {
    if (region.dims == shape.dims()) {
      shards.push_back(global);  // Whole array: share the storage.
      continue;
    }
    Literal shard(Shape(shape.type(), region.dims));
    if (shard.size_bytes() > 0) {
      CopyBlock(static_cast<const std::byte*>(global.untyped_data()),
                shape.dims(), region.offsets,
                static_cast<std::byte*>(shard.mutable_untyped_data()),
                region.dims, std::vector<int64_t>(region.dims.size(), 0),
                region.valid, width);
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

absl::StatusOr<Literal> AssembleGlobal(std::span<const Literal> shards,
                                       const Sharding& sharding,
                                       const Shape& global_shape) {
  const int64_t num_partitions = static_cast<int64_t>(shards.size());
  if (sharding.kind == Sharding::Kind::kTuple || global_shape.IsTuple()) {
    if (sharding.kind != Sharding::Kind::kTuple || !global_shape.IsTuple() ||
        sharding.tuple_elements.size() != global_shape.tuple_shapes().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sharding ", Describe(sharding), " does not fit ",
                       global_shape.ToString(false)));
    }
    std::vector<Literal> elements;
    for (size_t i = 0; i < sharding.tuple_elements.size(); ++i) {
      std::vector<Literal> parts;
      for (const Literal& shard : shards) {
        if (!shard.shape().IsTuple() || shard.elements().size() <= i) {
          return absl::InvalidArgumentError(absl::StrCat(
              "expected tuple shards of ", global_shape.tuple_shapes().size(),
              " elements, got ", shard.shape().ToString(false)));
        }
        parts.push_back(shard.elements()[i]);
      }
      CW_ASSIGN_OR_RETURN(Literal element,
                          AssembleGlobal(parts, sharding.tuple_elements[i],
                                         global_shape.tuple_shape(i)));
      elements.push_back(std::move(element));
    }
    return Literal::MakeTuple(std::move(elements));
  }
  CW_ASSIGN_OR_RETURN(std::vector<ShardRegion> regions,
                      ShardRegions(sharding, global_shape, num_partitions));
  for (int64_t p = 0; p < num_partitions; ++p) {
    const Shape& s = shards[p].shape();
    if (!s.IsArray() || s.type() != global_shape.type() ||
        s.dims() != regions[p].dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "partition ", p, " holds ", s.ToString(false), "; sharding ",
          Describe(sharding), " of ", global_shape.ToString(false), " needs ",
          Shape(global_shape.type(), regions[p].dims).ToString(false)));
    }
  }
  Literal global(global_shape);
  const int64_t width = ByteWidth(global_shape.type());
  for (int64_t p = 0; p < num_partitions; ++p) {
    const ShardRegion& region = regions[p];
    if (!region.primary) continue;
    if (region.dims == global_shape.dims()) {
      global = shards[p].WithShape(global_shape);
      continue;
    }
    if (global.size_bytes() == 0) continue;
    CopyBlock(static_cast<const std::byte*>(shards[p].untyped_data()),
              region.dims, std::vector<int64_t>(region.dims.size(), 0),
              static_cast<std::byte*>(global.mutable_untyped_data()),
              global_shape.dims(), region.offsets, region.valid, width);
  }
  return global;
}

}  // namespace causeway::hlo
