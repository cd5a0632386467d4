#include "causeway/proxy/ifrt_convert.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace causeway::proxy {
namespace {

using Kind = xla::ifrt::DTypeProto;
using hlo::PrimitiveType;

struct KindPair {
  int kind;
  PrimitiveType type;
};
constexpr KindPair kKinds[] = {
    {Kind::KIND_PRED, PrimitiveType::kPred},
    {Kind::KIND_S8, PrimitiveType::kS8},
    {Kind::KIND_S16, PrimitiveType::kS16},
    {Kind::KIND_S32, PrimitiveType::kS32},
    {Kind::KIND_S64, PrimitiveType::kS64},
    {Kind::KIND_U8, PrimitiveType::kU8},
    {Kind::KIND_U16, PrimitiveType::kU16},
    {Kind::KIND_U32, PrimitiveType::kU32},
    {Kind::KIND_U64, PrimitiveType::kU64},
    {Kind::KIND_F16, PrimitiveType::kF16},
    {Kind::KIND_BF16, PrimitiveType::kBF16},
    {Kind::KIND_F32, PrimitiveType::kF32},
    {Kind::KIND_F64, PrimitiveType::kF64},
    {Kind::KIND_C64, PrimitiveType::kC64},
    {Kind::KIND_C128, PrimitiveType::kC128},
    {Kind::KIND_S2, PrimitiveType::kS2},
    {Kind::KIND_S4, PrimitiveType::kS4},
    {Kind::KIND_U2, PrimitiveType::kU2},
    {Kind::KIND_U4, PrimitiveType::kU4},
    {Kind::KIND_F8E5M2, PrimitiveType::kF8E5M2},
    {Kind::KIND_F8E4M3, PrimitiveType::kF8E4M3},
    {Kind::KIND_F8E4M3FN, PrimitiveType::kF8E4M3FN},
    {Kind::KIND_F8E4M3B11FNUZ, PrimitiveType::kF8E4M3B11FNUZ},
    {Kind::KIND_F8E5M2FNUZ, PrimitiveType::kF8E5M2FNUZ},
    {Kind::KIND_F8E4M3FNUZ, PrimitiveType::kF8E4M3FNUZ},
    {Kind::KIND_F8E3M4, PrimitiveType::kF8E3M4},
    {Kind::KIND_F8E8M0FNU, PrimitiveType::kF8E8M0FNU},
    {Kind::KIND_F4E2M1FN, PrimitiveType::kF4E2M1FN},
};

absl::Status CheckDevice(int64_t device, int64_t num_devices) {
  if (device < 0 || device >= num_devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", device, " is not one of the ", num_devices, " devices"));
  }
  return absl::OkStatus();
}

// Devices of a DeviceListProto: each in range, none twice.
absl::StatusOr<std::vector<int32_t>> DeviceList(
    const xla::ifrt::DeviceListProto& proto, int64_t num_devices) {
  if (proto.device_ids_size() == 0) {
    return absl::InvalidArgumentError("a sharding names no devices");
  }
  if (proto.device_ids_size() > kMaxDevicesPerSharding) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a sharding names ", proto.device_ids_size(), " devices (at most ",
        kMaxDevicesPerSharding, ")"));
  }
  std::vector<int32_t> devices(proto.device_ids().begin(),
                               proto.device_ids().end());
  std::vector<int32_t> sorted = devices;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (absl::Status s = CheckDevice(sorted[i], num_devices); !s.ok()) return s;
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("a sharding names device ", sorted[i], " twice"));
    }
  }
  return devices;
}

// Expands XLA's iota tile assignment: iota(product) reshaped to
// `reshape_dims`, transposed by `perm`, flattened.
absl::StatusOr<std::vector<int64_t>> ExpandIota(
    const std::vector<int64_t>& reshape_dims, const std::vector<int32_t>& perm,
    int64_t count) {
  if (!perm.empty() && perm.size() != reshape_dims.size()) {
    return absl::InvalidArgumentError(
        "an iota tile assignment's transpose has the wrong rank");
  }
  int64_t total = 1;
  for (int64_t d : reshape_dims) {
    if (d <= 0 || d > kMaxDevicesPerSharding) {
      return absl::InvalidArgumentError("an iota reshape dimension is out of range");
    }
    total *= d;
    if (total > kMaxDevicesPerSharding) {
      return absl::InvalidArgumentError("an iota tile assignment is too large");
    }
  }
  if (total != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an iota tile assignment of ", total, " devices for ", count, " tiles"));
  }
  const size_t rank = reshape_dims.size();
  std::vector<int64_t> order(rank);
  std::iota(order.begin(), order.end(), 0);
  if (!perm.empty()) {
    std::vector<bool> seen(rank, false);
    for (size_t i = 0; i < rank; ++i) {
      if (perm[i] < 0 || static_cast<size_t>(perm[i]) >= rank || seen[perm[i]]) {
        return absl::InvalidArgumentError(
            "an iota tile assignment's transpose is not a permutation");
      }
      seen[perm[i]] = true;
      order[i] = perm[i];
    }
  }
  // Strides of the source (reshaped) array.
  std::vector<int64_t> stride(rank, 1);
  for (size_t i = rank; i-- > 1;) stride[i - 1] = stride[i] * reshape_dims[i];
  std::vector<int64_t> out_dims(rank);
  for (size_t i = 0; i < rank; ++i) out_dims[i] = reshape_dims[order[i]];
  std::vector<int64_t> result;
  result.reserve(count);
  std::vector<int64_t> index(rank, 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t value = 0;
    for (size_t i = 0; i < rank; ++i) value += index[i] * stride[order[i]];
    result.push_back(value);
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < out_dims[i]) break;
      index[i] = 0;
    }
  }
  return result;
}

}  // namespace

absl::StatusOr<PrimitiveType> DTypeFromProto(const xla::ifrt::DTypeProto& dtype) {
  for (const KindPair& pair : kKinds) {
    if (pair.kind == dtype.kind()) return pair.type;
  }
  return absl::UnimplementedError(absl::StrCat(
      "the dtype of kind ", static_cast<int>(dtype.kind()),
      " is not supported by Causeway"));
}

absl::StatusOr<xla::ifrt::DTypeProto> DTypeToProto(PrimitiveType type) {
  for (const KindPair& pair : kKinds) {
    if (pair.type == type) {
      xla::ifrt::DTypeProto proto;
      proto.set_kind(static_cast<xla::ifrt::DTypeProto::Kind>(pair.kind));
      return proto;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "type ", std::string(hlo::PrimitiveTypeName(type)), " has no IFRT dtype"));
}

absl::StatusOr<hlo::Shape> ArrayShapeFromProto(
    const xla::ifrt::DTypeProto& dtype, const xla::ifrt::ShapeProto& shape) {
  absl::StatusOr<PrimitiveType> type = DTypeFromProto(dtype);
  if (!type.ok()) return type.status();
  if (shape.dims_size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an array of rank ", shape.dims_size(), " (at most ", kMaxRank, ")"));
  }
  int64_t bytes = hlo::ByteWidth(*type);
  for (int64_t d : shape.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("an array dimension of ", d, " (negative)"));
    }
    if (d > 0 && bytes > kMaxArrayBytes / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          "an array of more than ", kMaxArrayBytes, " bytes"));
    }
    bytes *= d;
  }
  return hlo::Shape(*type, std::vector<int64_t>(shape.dims().begin(),
                                                shape.dims().end()));
}

xla::ifrt::ShapeProto ShapeToProto(const hlo::Shape& shape) {
  xla::ifrt::ShapeProto proto;
  for (int64_t d : shape.dims()) proto.add_dims(d);
  return proto;
}

absl::StatusOr<hlo::Sharding> ShardingFromOpSharding(const xla::OpSharding& op,
                                                     int64_t num_devices) {
  hlo::Sharding sharding;
  switch (op.type()) {
    case xla::OpSharding::REPLICATED:
      sharding.kind = hlo::Sharding::Kind::kReplicated;
      return sharding;
    case xla::OpSharding::MAXIMAL: {
      if (op.tile_assignment_devices_size() != 1) {
        return absl::InvalidArgumentError(
            "a maximal sharding must name exactly one device");
      }
      const int64_t device = op.tile_assignment_devices(0);
      if (absl::Status s = CheckDevice(device, num_devices); !s.ok()) return s;
      sharding.kind = hlo::Sharding::Kind::kMaximal;
      sharding.maximal_device = device;
      return sharding;
    }
    case xla::OpSharding::OTHER:
      break;
    default:
      return absl::UnimplementedError(absl::StrCat(
          "an array sharding of type ",
          xla::OpSharding::Type_Name(op.type()), " is not supported"));
  }
  if (op.tile_assignment_dimensions_size() == 0 ||
      op.tile_assignment_dimensions_size() > kMaxRank + 2) {
    return absl::InvalidArgumentError(
        "a tiled sharding needs 1..66 tile assignment dimensions");
  }
  int64_t count = 1;
  for (int64_t d : op.tile_assignment_dimensions()) {
    if (d <= 0 || d > kMaxDevicesPerSharding) {
      return absl::InvalidArgumentError(
          absl::StrCat("a tile assignment dimension of ", d));
    }
    count *= d;
    if (count > kMaxDevicesPerSharding) {
      return absl::InvalidArgumentError("a tile assignment is too large");
    }
  }
  if (count != num_devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a tiled sharding of ", count, " tiles over ", num_devices, " devices"));
  }
  std::vector<int64_t> devices;
  if (op.iota_reshape_dims_size() > 0) {
    absl::StatusOr<std::vector<int64_t>> expanded = ExpandIota(
        {op.iota_reshape_dims().begin(), op.iota_reshape_dims().end()},
        {op.iota_transpose_perm().begin(), op.iota_transpose_perm().end()},
        count);
    if (!expanded.ok()) return expanded.status();
    devices = *std::move(expanded);
  } else if (op.tile_assignment_devices_size() == count) {
    devices.assign(op.tile_assignment_devices().begin(),
                   op.tile_assignment_devices().end());
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "a tiled sharding lists ", op.tile_assignment_devices_size(),
        " devices for ", count, " tiles"));
  }
  std::vector<bool> seen(num_devices, false);
  for (int64_t d : devices) {
    if (absl::Status s = CheckDevice(d, num_devices); !s.ok()) return s;
    if (seen[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("a tiled sharding uses device ", d, " twice"));
    }
    seen[d] = true;
  }
  sharding.kind = hlo::Sharding::Kind::kTiled;
  sharding.tile_dims.assign(op.tile_assignment_dimensions().begin(),
                            op.tile_assignment_dimensions().end());
  sharding.tile_devices = std::move(devices);
  if (op.replicate_on_last_tile_dim()) {
    sharding.last_tile_dim_replicate = true;
  } else {
    for (int type : op.last_tile_dims()) {
      switch (type) {
        case xla::OpSharding::REPLICATED:
          sharding.last_tile_dims.push_back("replicated");
          break;
        case xla::OpSharding::MANUAL:
          sharding.last_tile_dims.push_back("manual");
          break;
        default:
          return absl::UnimplementedError(
              "a sharding's subgroup type is not supported");
      }
    }
    // One subgroup of replicas and nothing else: XLA's canonical form is
    // last_tile_dim_replicate.
    if (sharding.last_tile_dims == std::vector<std::string>{"replicated"}) {
      sharding.last_tile_dims.clear();
      sharding.last_tile_dim_replicate = true;
    }
  }
  // A tiled sharding of one tile everywhere on all devices is replicated.
  if (sharding.last_tile_dim_replicate && sharding.tile_dims.back() == count) {
    hlo::Sharding replicated;
    replicated.kind = hlo::Sharding::Kind::kReplicated;
    return replicated;
  }
  return sharding;
}

xla::OpSharding ShardingToOpSharding(const hlo::Sharding& sharding) {
  xla::OpSharding op;
  switch (sharding.kind) {
    case hlo::Sharding::Kind::kReplicated:
      op.set_type(xla::OpSharding::REPLICATED);
      break;
    case hlo::Sharding::Kind::kMaximal:
      op.set_type(xla::OpSharding::MAXIMAL);
      op.add_tile_assignment_dimensions(1);
      op.add_tile_assignment_devices(sharding.maximal_device);
      break;
    case hlo::Sharding::Kind::kTiled:
      op.set_type(xla::OpSharding::OTHER);
      for (int64_t d : sharding.tile_dims) op.add_tile_assignment_dimensions(d);
      for (int64_t d : sharding.tile_devices) op.add_tile_assignment_devices(d);
      op.set_replicate_on_last_tile_dim(sharding.last_tile_dim_replicate);
      for (const std::string& t : sharding.last_tile_dims) {
        op.add_last_tile_dims(t == "manual" ? xla::OpSharding::MANUAL
                                            : xla::OpSharding::REPLICATED);
      }
      break;
    default:
      op.set_type(xla::OpSharding::UNKNOWN);
      break;
  }
  return op;
}

absl::StatusOr<IfrtSharding> ShardingFromProto(
    const xla::ifrt::ShardingProto& proto, int64_t num_devices,
    bool allow_unplaced) {
  const xla::ifrt::Serialized& serialized = proto.serialized_sharding();
  IfrtSharding result;
  if (serialized.type_name() == kSingleDeviceShardingTypeName) {
    xla::ifrt::SingleDeviceShardingProto single;
    if (!single.ParseFromString(serialized.data())) {
      return absl::InvalidArgumentError("a SingleDeviceSharding does not parse");
    }
    if (absl::Status s = CheckDevice(single.device_id(), num_devices); !s.ok()) {
      return s;
    }
    result.devices = {single.device_id()};
    result.sharding.kind = hlo::Sharding::Kind::kReplicated;
    result.memory_kind = single.memory_kind();
    return result;
  }
  if (serialized.type_name() == kHloShardingTypeName) {
    xla::ifrt::HloShardingProto hlo_sharding;
    if (!hlo_sharding.ParseFromString(serialized.data())) {
      return absl::InvalidArgumentError("an HloSharding does not parse");
    }
    absl::StatusOr<std::vector<int32_t>> devices =
        DeviceList(hlo_sharding.devices(), num_devices);
    if (!devices.ok()) return devices.status();
    absl::StatusOr<hlo::Sharding> sharding = ShardingFromOpSharding(
        hlo_sharding.xla_op_sharding(), static_cast<int64_t>(devices->size()));
    if (!sharding.ok()) return sharding.status();
    result.devices = *std::move(devices);
    result.sharding = *std::move(sharding);
    result.memory_kind = hlo_sharding.memory_kind();
    return result;
  }
  if (serialized.type_name() == kConcreteEvenShardingTypeName) {
    xla::ifrt::ConcreteEvenShardingProto even;
    if (!even.ParseFromString(serialized.data())) {
      return absl::InvalidArgumentError("a ConcreteEvenSharding does not parse");
    }
    absl::StatusOr<std::vector<int32_t>> devices =
        DeviceList(even.devices(), num_devices);
    if (!devices.ok()) return devices.status();
    if (!even.is_fully_replicated() && devices->size() > 1 && allow_unplaced) {
      result.devices = *std::move(devices);
      result.placed = false;
      result.memory_kind = even.memory_kind();
      return result;
    }
    if (!even.is_fully_replicated() && devices->size() > 1) {
      return absl::UnimplementedError(
          "a ConcreteEvenSharding that is not fully replicated is not "
          "supported (its shards' places are not known)");
    }
    result.devices = *std::move(devices);
    result.sharding.kind = hlo::Sharding::Kind::kReplicated;
    result.memory_kind = even.memory_kind();
    return result;
  }
  return absl::UnimplementedError(absl::StrCat(
      "sharding type '", serialized.type_name().substr(0, 200),
      "' is not supported (Causeway reads ", kHloShardingTypeName, ", ",
      kSingleDeviceShardingTypeName, " and ", kConcreteEvenShardingTypeName,
      ")"));
}

xla::ifrt::ShardingProto ShardingToProto(const IfrtSharding& sharding) {
  xla::ifrt::HloShardingProto hlo_sharding;
  for (int32_t d : sharding.devices) hlo_sharding.mutable_devices()->add_device_ids(d);
  *hlo_sharding.mutable_xla_op_sharding() = ShardingToOpSharding(sharding.sharding);
  if (!sharding.memory_kind.empty()) hlo_sharding.set_memory_kind(sharding.memory_kind);
  xla::ifrt::ShardingProto proto;
  proto.mutable_serialized_sharding()->set_type_name(kHloShardingTypeName);
  proto.mutable_serialized_sharding()->set_data(hlo_sharding.SerializeAsString());
  return proto;
}

tensorflow::StatusProto StatusToProto(const absl::Status& status) {
  tensorflow::StatusProto proto;
  proto.set_code(static_cast<int>(status.code()));
  proto.set_message(std::string(status.message()));
  return proto;
}

bool IsDenseRowMajor(const hlo::Shape& shape,
                     const std::vector<int64_t>& strides) {
  if (strides.size() != shape.dims().size()) return false;
  int64_t stride = hlo::ByteWidth(shape.type());
  for (size_t i = strides.size(); i-- > 0;) {
    // A dimension of size 1 may carry any stride.
    if (shape.dim(i) != 1 && strides[i] != stride) return false;
    stride *= shape.dim(i);
  }
  return true;
}

absl::StatusOr<hlo::Literal> LiteralFromHostBuffer(
    const hlo::Literal& bytes, const hlo::Shape& shape,
    const std::optional<std::vector<int64_t>>& strides) {
  const int64_t width = hlo::ByteWidth(shape.type());
  const int64_t size = shape.ByteSize();
  const int64_t have = bytes.size_bytes();
  if (!strides.has_value() || IsDenseRowMajor(shape, *strides)) {
    if (have != size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a host buffer of ", have, " bytes for an array ",
          shape.ToString(false), " of ", size, " bytes"));
    }
    return bytes.WithShape(shape);
  }
  hlo::Literal literal = hlo::Literal::Uninitialized(shape);
  const std::vector<int64_t>& s = *strides;
  const int64_t rank = shape.rank();
  if (static_cast<int64_t>(s.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        s.size(), " byte strides for an array of rank ", rank));
  }
  if (size == 0) return literal;
  int64_t extent = width;
  for (int64_t d = 0; d < rank; ++d) {
    if (s[d] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("a negative byte stride (", s[d], ")"));
    }
    if (s[d] > 0 && shape.dim(d) - 1 > (kMaxArrayBytes - extent) / s[d]) {
      return absl::InvalidArgumentError("byte strides reach past any buffer");
    }
    extent += (shape.dim(d) - 1) * s[d];
  }
  if (extent > have) {
    return absl::InvalidArgumentError(absl::StrCat(
        "byte strides reach byte ", extent, " of a host buffer of ", have));
  }
  const char* in = static_cast<const char*>(bytes.untyped_data());
  char* out = static_cast<char*>(literal.mutable_untyped_data());
  std::vector<int64_t> index(rank, 0);
  const int64_t count = shape.ElementCount();
  int64_t offset = 0;  // Of `index` in `bytes`.
  for (int64_t n = 0; n < count; ++n) {
    std::memcpy(out + n * width, in + offset, width);
    for (int64_t d = rank; d-- > 0;) {
      if (++index[d] < shape.dim(d)) {
        offset += s[d];
        break;
      }
      offset -= (index[d] - 1) * s[d];
      index[d] = 0;
    }
  }
  return literal;
}

}  // namespace causeway::proxy
