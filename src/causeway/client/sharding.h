// Meshes and shardings as the client writes them.
//
// A Sharding says how an array's global shape maps onto the devices of a
// slice (logical devices 0..n-1, as XLA numbers partitions): on one device,
// replicated on all, or tiled. It wraps an hlo::Sharding, so it prints and
// parses exactly as XLA writes shardings (`{devices=[2,1]<=[2]}`), and it is
// what Compile reads from a module's parameters and root.
//
//   Mesh mesh = *Mesh::Create({2, 2}, {"x", "y"});
//   Sharding rows = *Sharding::Tiled(mesh, {"x", std::nullopt});
//   rows.ToString();  // "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"
//
// Immutable value types; thread-safe.
#ifndef CAUSEWAY_CLIENT_SHARDING_H_
#define CAUSEWAY_CLIENT_SHARDING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/shape.h"

namespace causeway::client {

// A logical arrangement of a slice's devices: device i sits at the
// row-major position i of `shape`. Axes have names for Sharding::Tiled.
class Mesh {
 public:
  // One axis "x" of `num_devices`.
  static Mesh Linear(int64_t num_devices);
  // `axis_names` may be empty: the axes are then "x", "y", "z", "w", then
  // "a3", "a4", ... Every size must be at least 1; names must be distinct
  // and non-empty; InvalidArgument otherwise.
  static absl::StatusOr<Mesh> Create(std::vector<int64_t> shape,
                                     std::vector<std::string> axis_names = {});

  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<std::string>& axis_names() const { return axis_names_; }
  int64_t num_devices() const;
  // The axis called `name`, or NotFound listing the mesh's axes.
  absl::StatusOr<int64_t> AxisIndex(std::string_view name) const;

  // "mesh[x=2,y=2]".
  std::string ToString() const;
  friend bool operator==(const Mesh&, const Mesh&) = default;

 private:
  Mesh() = default;
  std::vector<int64_t> shape_;
  std::vector<std::string> axis_names_;
};

class Sharding {
 public:
  // The whole array on every device of the slice.
  static Sharding Replicated();
  // The whole array on logical device `device` of the slice.
  static Sharding SingleDevice(int64_t device);
  // Array dimension d is split over the mesh axis `dim_axes[d]` (nullopt:
  // not split). Mesh axes no dimension uses replicate the tiles. Errors:
  // unknown axis, an axis used twice.
  static absl::StatusOr<Sharding> Tiled(
      const Mesh& mesh, const std::vector<std::optional<std::string>>& dim_axes);
  // Dimension d is cut into tile_dims[d] tiles; tile k (row-major) lives on
  // device k, and `tile_dims`' product must equal the slice's size.
  static absl::StatusOr<Sharding> TiledByDims(std::vector<int64_t> tile_dims);
  // XLA's text: "{replicated}", "{maximal device=1}",
  // "{devices=[2,1]<=[2]}", "{devices=[2,2]0,2,1,3}". Tuple, manual and
  // unknown forms are refused (an array has one sharding).
  static absl::StatusOr<Sharding> Parse(std::string_view text);
  // Wraps a sharding read from a module (tuple/manual/unknown refused).
  static absl::StatusOr<Sharding> FromHlo(hlo::Sharding sharding);

  const hlo::Sharding& hlo() const { return hlo_; }
  bool IsReplicated() const {
    return hlo_.kind == hlo::Sharding::Kind::kReplicated;
  }
  bool IsSingleDevice() const {
    return hlo_.kind == hlo::Sharding::Kind::kMaximal;
  }
  bool IsTiled() const { return hlo_.kind == hlo::Sharding::Kind::kTiled; }

  // OK when the sharding fits an array of `global_shape` on `num_devices`
  // devices, its tiles dividing every dimension evenly (as JAX requires of
  // arrays); InvalidArgument naming both otherwise.
  absl::Status Validate(const hlo::Shape& global_shape,
                        int64_t num_devices) const;
  // The shape of the shard each device holds.
  absl::StatusOr<hlo::Shape> ShardShape(const hlo::Shape& global_shape,
                                        int64_t num_devices) const;
  // True when both put the same part of an array of `global_shape` on every
  // one of `num_devices` devices, however they are written
  // (`{devices=[2]<=[2]}` and `{devices=[2]0,1}` are equivalent).
  bool IsEquivalent(const Sharding& other, const hlo::Shape& global_shape,
                    int64_t num_devices) const;

  // XLA's text, e.g. "{devices=[2,1]<=[2]}".
  std::string ToString() const;
  // Same text (structural equality of the written form).
  friend bool operator==(const Sharding& a, const Sharding& b) {
    return a.hlo_ == b.hlo_;
  }

 private:
  explicit Sharding(hlo::Sharding hlo) : hlo_(std::move(hlo)) {}
  hlo::Sharding hlo_;
};

}  // namespace causeway::client

#endif  // CAUSEWAY_CLIENT_SHARDING_H_
