#include "causeway/client/sharding.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include <set>
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/printer.h"
#include "causeway/hlo/sharding_util.h"

namespace causeway::client {
namespace {

std::string DefaultAxisName(size_t i) {
  static constexpr const char* kNames[] = {"x", "y", "z", "w"};
  if (i < 4) return kNames[i];
  return absl::StrCat("a", i);
}

// The iota device list `<=[dims]T(perm)` in its shortest form: size-1 axes
// dropped and axes that stay adjacent after the transpose merged, as XLA
// prints it (`<=[4]` rather than `<=[2,2]T(0,1)`).
std::string IotaText(std::vector<int64_t> dims, std::vector<int64_t> perm) {
  // Drop size-1 axes, renumbering the rest.
  std::vector<int64_t> new_index(dims.size(), -1);
  std::vector<int64_t> kept_dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != 1) {
      new_index[i] = static_cast<int64_t>(kept_dims.size());
      kept_dims.push_back(dims[i]);
    }
  }
  std::vector<int64_t> kept_perm;
  for (int64_t p : perm) {
    if (new_index[p] >= 0) kept_perm.push_back(new_index[p]);
  }
  // Merge runs p, p+1, ... of the permutation into one axis.
  std::vector<std::vector<int64_t>> runs;
  for (int64_t p : kept_perm) {
    if (!runs.empty() && runs.back().back() + 1 == p) {
      runs.back().push_back(p);
    } else {
      runs.push_back({p});
    }
  }
  // Runs sorted by their first source axis give the merged source dims.
  std::vector<size_t> order(runs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return runs[a][0] < runs[b][0]; });
  std::vector<int64_t> merged_dims(runs.size());
  std::vector<int64_t> run_position(runs.size());
  for (size_t k = 0; k < order.size(); ++k) {
    int64_t size = 1;
    for (int64_t axis : runs[order[k]]) size *= kept_dims[axis];
    merged_dims[k] = size;
    run_position[order[k]] = static_cast<int64_t>(k);
  }
  std::vector<int64_t> merged_perm(runs.size());
  bool identity = true;
  for (size_t r = 0; r < runs.size(); ++r) {
    merged_perm[r] = run_position[r];
    if (merged_perm[r] != static_cast<int64_t>(r)) identity = false;
  }
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  if (identity) return absl::StrCat("<=[", total, "]");
  return absl::StrCat("<=[", absl::StrJoin(merged_dims, ","), "]T(",
                      absl::StrJoin(merged_perm, ","), ")");
}

}  // namespace

Mesh Mesh::Linear(int64_t num_devices) {
  Mesh mesh;
  mesh.shape_ = {num_devices};
  mesh.axis_names_ = {"x"};
  return mesh;
}

absl::StatusOr<Mesh> Mesh::Create(std::vector<int64_t> shape,
                                  std::vector<std::string> axis_names) {
  if (shape.empty()) {
    return absl::InvalidArgumentError("a mesh needs at least one axis");
  }
  for (int64_t size : shape) {
    if (size < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh axis sizes must be at least 1, got [",
          absl::StrJoin(shape, ","), "]"));
    }
  }
  if (axis_names.empty()) {
    for (size_t i = 0; i < shape.size(); ++i) {
      axis_names.push_back(DefaultAxisName(i));
    }
  }
  if (axis_names.size() != shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mesh of ", shape.size(), " axes given ", axis_names.size(),
        " axis names"));
  }
  std::set<std::string> seen;
  for (const std::string& name : axis_names) {
    if (name.empty()) {
      return absl::InvalidArgumentError("mesh axis names must be non-empty");
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh axis name '", name, "' is used twice"));
    }
  }
  Mesh mesh;
  mesh.shape_ = std::move(shape);
  mesh.axis_names_ = std::move(axis_names);
  return mesh;
}

int64_t Mesh::num_devices() const {
  int64_t n = 1;
  for (int64_t size : shape_) n *= size;
  return n;
}

absl::StatusOr<int64_t> Mesh::AxisIndex(std::string_view name) const {
  for (size_t i = 0; i < axis_names_.size(); ++i) {
    if (axis_names_[i] == name) return static_cast<int64_t>(i);
  }
  return absl::NotFoundError(absl::StrCat("no axis '", std::string(name),
                                          "' in ", ToString()));
}

std::string Mesh::ToString() const {
  std::vector<std::string> axes;
  for (size_t i = 0; i < shape_.size(); ++i) {
    axes.push_back(absl::StrCat(axis_names_[i], "=", shape_[i]));
  }
  return absl::StrCat("mesh[", absl::StrJoin(axes, ","), "]");
}

Sharding Sharding::Replicated() {
  hlo::Sharding sharding;
  sharding.kind = hlo::Sharding::Kind::kReplicated;
  return Sharding(std::move(sharding));
}

Sharding Sharding::SingleDevice(int64_t device) {
  hlo::Sharding sharding;
  sharding.kind = hlo::Sharding::Kind::kMaximal;
  sharding.maximal_device = device;
  return Sharding(std::move(sharding));
}

absl::StatusOr<Sharding> Sharding::Tiled(
    const Mesh& mesh, const std::vector<std::optional<std::string>>& dim_axes) {
  std::vector<int64_t> tile_dims;
  std::vector<int64_t> perm;  // Mesh axes in tile order.
  std::vector<bool> used(mesh.shape().size(), false);
  for (const std::optional<std::string>& axis_name : dim_axes) {
    if (!axis_name.has_value()) {
      tile_dims.push_back(1);
      continue;
    }
    CW_ASSIGN_OR_RETURN(int64_t axis, mesh.AxisIndex(*axis_name));
    if (used[axis]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh axis '", *axis_name, "' shards two dimensions of one array"));
    }
    used[axis] = true;
    tile_dims.push_back(mesh.shape()[axis]);
    perm.push_back(axis);
  }
  int64_t replicated = 1;
  for (size_t axis = 0; axis < used.size(); ++axis) {
    if (!used[axis]) {
      perm.push_back(static_cast<int64_t>(axis));
      replicated *= mesh.shape()[axis];
    }
  }
  int64_t tiles = 1;
  for (int64_t t : tile_dims) tiles *= t;
  if (tiles == 1) return Replicated();
  bool replicate = replicated > 1;
  if (replicate) tile_dims.push_back(replicated);
  std::string text =
      absl::StrCat("{devices=[", absl::StrJoin(tile_dims, ","), "]",
                   IotaText(mesh.shape(), perm),
                   replicate ? " last_tile_dim_replicate" : "", "}");
  return Parse(text);
}

absl::StatusOr<Sharding> Sharding::TiledByDims(std::vector<int64_t> tile_dims) {
  if (tile_dims.empty()) {
    return absl::InvalidArgumentError(
        "TiledByDims needs one tile count per array dimension (a scalar "
        "cannot be tiled: use Replicated)");
  }
  int64_t total = 1;
  for (int64_t t : tile_dims) {
    if (t < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tile counts must be at least 1, got [",
          absl::StrJoin(tile_dims, ","), "]"));
    }
    total *= t;
  }
  return Parse(absl::StrCat("{devices=[", absl::StrJoin(tile_dims, ","),
                            "]<=[", total, "]}"));
}

absl::StatusOr<Sharding> Sharding::Parse(std::string_view text) {
  CW_ASSIGN_OR_RETURN(hlo::Sharding sharding, hlo::ParseSharding(text));
  return FromHlo(std::move(sharding));
}

absl::StatusOr<Sharding> Sharding::FromHlo(hlo::Sharding sharding) {
  switch (sharding.kind) {
    case hlo::Sharding::Kind::kReplicated:
    case hlo::Sharding::Kind::kMaximal:
      return Sharding(std::move(sharding));
    case hlo::Sharding::Kind::kTiled:
      if (!sharding.last_tile_dims.empty()) {
        return absl::UnimplementedError(absl::StrCat(
            "sharding ", hlo::PrintSharding(sharding),
            " has last_tile_dims subgroups, which arrays do not support"));
      }
      return Sharding(std::move(sharding));
    case hlo::Sharding::Kind::kTuple:
      return absl::InvalidArgumentError(absl::StrCat(
          "an array has one sharding, not the tuple sharding ",
          hlo::PrintSharding(sharding)));
    case hlo::Sharding::Kind::kManual:
    case hlo::Sharding::Kind::kUnknown:
      break;
  }
  return absl::UnimplementedError(absl::StrCat(
      "sharding ", hlo::PrintSharding(sharding), " is not supported for arrays"));
}

absl::Status Sharding::Validate(const hlo::Shape& global_shape,
                                int64_t num_devices) const {
  if (hlo_.kind == hlo::Sharding::Kind::kMaximal &&
      (hlo_.maximal_device < 0 || hlo_.maximal_device >= num_devices)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharding ", ToString(), " names device ", hlo_.maximal_device,
        " of a slice of ", num_devices, " devices"));
  }
  absl::StatusOr<std::vector<hlo::ShardRegion>> regions =
      hlo::ShardRegions(hlo_, global_shape, num_devices);
  if (!regions.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharding ", ToString(), " does not fit ", global_shape.ToString(false),
        " on ", num_devices, " devices: ", regions.status().message()));
  }
  // As JAX: an array's tiles divide it evenly (XLA would pad the last
  // shards, and the padding would come back in the outputs).
  if (IsTiled() && global_shape.IsArray()) {
    for (int64_t d = 0; d < global_shape.rank(); ++d) {
      const int64_t tiles = hlo_.tile_dims[d];
      if (global_shape.dims()[d] % tiles != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sharding ", ToString(), " cuts dimension ", d, " of ",
            global_shape.ToString(false), " into ", tiles,
            " tiles, which does not divide its size ", global_shape.dims()[d],
            " evenly (JAX refuses such shardings too; pad the array or "
            "choose a sharding that divides it)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<hlo::Shape> Sharding::ShardShape(const hlo::Shape& global_shape,
                                                int64_t num_devices) const {
  CW_RETURN_IF_ERROR(Validate(global_shape, num_devices));
  return hlo::ShardShape(hlo_, global_shape, num_devices);
}

bool Sharding::IsEquivalent(const Sharding& other,
                            const hlo::Shape& global_shape,
                            int64_t num_devices) const {
  if (*this == other) return true;
  // A maximal sharding puts data on one device only; no other kind does.
  if (IsSingleDevice() || other.IsSingleDevice()) return false;
  absl::StatusOr<std::vector<hlo::ShardRegion>> a =
      hlo::ShardRegions(hlo_, global_shape, num_devices);
  absl::StatusOr<std::vector<hlo::ShardRegion>> b =
      hlo::ShardRegions(other.hlo_, global_shape, num_devices);
  if (!a.ok() || !b.ok() || a->size() != b->size()) return false;
  for (size_t i = 0; i < a->size(); ++i) {
    if ((*a)[i].offsets != (*b)[i].offsets || (*a)[i].dims != (*b)[i].dims ||
        (*a)[i].valid != (*b)[i].valid) {
      return false;
    }
  }
  return true;
}

std::string Sharding::ToString() const { return hlo::PrintSharding(hlo_); }

}  // namespace causeway::client
