// Global arrays <-> per-partition shards, following an hlo::Sharding the
// way XLA's SPMD partitioner lays them out.
//
// Tiled: dimension i is cut into tile_dims[i] tiles of ceil(dim / tiles)
// elements; the device at row-major position k of `tile_devices` holds the
// tile whose index is k's multi-index over tile_dims (extra trailing tile
// dims, from last_tile_dim_replicate or last_tile_dims={replicated},
// replicate the tile). When a dimension does not divide evenly, the last
// shards are padded (with zeros here) to the common shard shape, as the
// partitioned program expects, and assembling crops the padding.
// Replicated and maximal: every partition holds the whole array; assembly
// takes partition 0 (replicated) or the maximal device. Manual and unknown
// shardings are refused with Unimplemented.
//
// Thread-safe: the functions keep no state.
#ifndef CAUSEWAY_HLO_SHARDING_UTIL_H_
#define CAUSEWAY_HLO_SHARDING_UTIL_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"

namespace causeway::hlo {

// Where one partition's shard of an array lies in the global array.
struct ShardRegion {
  std::vector<int64_t> offsets;  // Per dimension, into the global array.
  std::vector<int64_t> dims;     // The shard's (padded) shape.
  std::vector<int64_t> valid;    // Elements per dim inside the global array.
  // True for the partition that is the source of truth for this region when
  // assembling (the first replica of each tile).
  bool primary = false;
};

// One region per partition, for an array `global_shape`. InvalidArgument
// when the sharding does not fit the shape or the partition count.
absl::StatusOr<std::vector<ShardRegion>> ShardRegions(const Sharding& sharding,
                                                      const Shape& global_shape,
                                                      int64_t num_partitions);

// The shape every partition holds (the parameter shape of the partitioned
// program). Tuple shardings apply element by element to tuple shapes.
absl::StatusOr<Shape> ShardShape(const Sharding& sharding,
                                 const Shape& global_shape,
                                 int64_t num_partitions);

// The global shape whose shards are `shard_shape`, assuming even tiling
// (the partitioned program only knows shard shapes).
absl::StatusOr<Shape> GlobalShapeFromShard(const Sharding& sharding,
                                           const Shape& shard_shape,
                                           int64_t num_partitions);

// Splits `global` into one literal per partition.
absl::StatusOr<std::vector<Literal>> SplitGlobal(const Literal& global,
                                                 const Sharding& sharding,
                                                 int64_t num_partitions);

// Assembles the global value of shape `global_shape` from one shard per
// partition (cropping padding; replicas are not compared).
absl::StatusOr<Literal> AssembleGlobal(std::span<const Literal> shards,
                                       const Sharding& sharding,
                                       const Shape& global_shape);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_SHARDING_UTIL_H_
