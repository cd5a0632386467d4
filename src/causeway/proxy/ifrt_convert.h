// Conversions between the IFRT proxy protocol's messages (dtypes, shapes,
// shardings, statuses) and Causeway's own types, with every size bounded:
// a malformed or hostile message gets InvalidArgument (or Unimplemented for
// a form Causeway does not serve) naming what is wrong, never a crash.
//
// Shardings. IFRT names an array's devices explicitly (a device list) and
// says how the array maps onto them (an xla::OpSharding whose device numbers
// index that list). Causeway's sharding uses the same logical numbering over
// the devices of a slice, so a sharding travels unchanged and the device
// list picks (or makes) the slice.
//
// Pure functions; thread-safe.
#ifndef CAUSEWAY_PROXY_IFRT_CONVERT_H_
#define CAUSEWAY_PROXY_IFRT_CONVERT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"
#include "causeway/proxy/proto/ifrt_types.pb.h"
#include "causeway/proxy/proto/tsl_status.pb.h"
#include "causeway/proxy/proto/xla_data.pb.h"

namespace causeway::proxy {

// Bounds on what one message may describe.
inline constexpr int kMaxRank = 64;
inline constexpr int64_t kMaxArrayBytes = int64_t{1} << 40;  // 1 TiB.
inline constexpr int kMaxDevicesPerSharding = 1 << 16;

// The serialized type names of the IFRT objects Causeway reads and writes.
inline constexpr char kHloShardingTypeName[] = "xla::ifrt::HloSharding";
inline constexpr char kSingleDeviceShardingTypeName[] =
    "xla::ifrt::SingleDeviceSharding";
inline constexpr char kConcreteEvenShardingTypeName[] =
    "xla::ifrt::ConcreteEvenSharding";

absl::StatusOr<hlo::PrimitiveType> DTypeFromProto(
    const xla::ifrt::DTypeProto& dtype);
// InvalidArgument for a type IFRT has no kind for (tuple, token).
absl::StatusOr<xla::ifrt::DTypeProto> DTypeToProto(hlo::PrimitiveType type);

// The array shape of `dtype` and `shape`: rank at most kMaxRank, every
// dimension non-negative, at most kMaxArrayBytes in all.
absl::StatusOr<hlo::Shape> ArrayShapeFromProto(
    const xla::ifrt::DTypeProto& dtype, const xla::ifrt::ShapeProto& shape);
xla::ifrt::ShapeProto ShapeToProto(const hlo::Shape& shape);

// An IFRT sharding: the devices (JAX device ids, in order) and how the
// array maps onto them (logical numbers index `devices`).
struct IfrtSharding {
  std::vector<int32_t> devices;
  hlo::Sharding sharding;
  std::string memory_kind;  // Empty when not given.
  // False for a ConcreteEvenSharding that is not fully replicated: the
  // devices are known, not which shard each holds (`sharding` is unset).
  bool placed = true;
};

// Reads HloSharding, SingleDeviceSharding and ConcreteEvenSharding (fully
// replicated; with `allow_unplaced`, any, as an unplaced sharding).
// `num_devices` bounds device ids (0..num_devices-1); every device at most
// once. Unimplemented names another type.
absl::StatusOr<IfrtSharding> ShardingFromProto(
    const xla::ifrt::ShardingProto& proto, int64_t num_devices,
    bool allow_unplaced = false);
// As an HloSharding (what XLA's own runtime hands back for program
// outputs).
xla::ifrt::ShardingProto ShardingToProto(const IfrtSharding& sharding);

// xla::OpSharding <-> hlo::Sharding. `num_devices` is the device list's
// size: every device number must be below it, and a tiled sharding's tiles
// must use each exactly once.
absl::StatusOr<hlo::Sharding> ShardingFromOpSharding(
    const xla::OpSharding& op, int64_t num_devices);
xla::OpSharding ShardingToOpSharding(const hlo::Sharding& sharding);

tensorflow::StatusProto StatusToProto(const absl::Status& status);

// Row-major (descending) byte strides of `shape`; true when `strides`
// equals them (the only layout Causeway copies without a transpose).
bool IsDenseRowMajor(const hlo::Shape& shape,
                     const std::vector<int64_t>& strides);

// The array of `shape` whose element at index i lies at byte
// sum(i[d] * strides[d]) of the bytes of `bytes` (an array literal of any
// shape: a host buffer; IFRT's byte strides; none: dense row-major). Dense
// row-major bytes are not copied: the result shares `bytes`' storage.
// InvalidArgument when a stride is negative, the rank differs or an element
// lies outside the bytes.
absl::StatusOr<hlo::Literal> LiteralFromHostBuffer(
    const hlo::Literal& bytes, const hlo::Shape& shape,
    const std::optional<std::vector<int64_t>>& strides);

}  // namespace causeway::proxy

#endif  // CAUSEWAY_PROXY_IFRT_CONVERT_H_
