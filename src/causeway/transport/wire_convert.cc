#include "causeway/transport/wire_convert.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/printer.h"

namespace causeway::transport {
namespace {

// Repeated fields: the count first, then every entry.
template <typename T>
absl::Status CheckCount(const T& repeated, const WireLimits& limits,
                        const FieldPath& path) {
  if (static_cast<int64_t>(repeated.size()) > limits.max_entries) {
    return path.Invalid(absl::StrCat(repeated.size(), " entries (at most ",
                                     limits.max_entries, ")"));
  }
  return absl::OkStatus();
}

// Converts every entry of a repeated message field.
template <typename Out, typename In, typename Convert>
absl::StatusOr<std::vector<Out>> ConvertAll(const In& repeated,
                                            std::string_view name,
                                            const WireLimits& limits,
                                            const FieldPath& parent,
                                            Convert&& convert) {
  FieldPath path = parent.Field(name);
  CW_RETURN_IF_ERROR(CheckCount(repeated, limits, path));
  std::vector<Out> out;
  out.reserve(repeated.size());
  for (int i = 0; i < repeated.size(); ++i) {
    FieldPath entry = parent.Index(name, i);
    CW_ASSIGN_OR_RETURN(Out value, convert(repeated[i], entry));
    out.push_back(std::move(value));
  }
  return out;
}

absl::Status CheckNonNegative(int64_t value, const FieldPath& path) {
  if (value < 0) return path.Invalid(absl::StrCat(value, " is negative"));
  return absl::OkStatus();
}

template <typename Id>
absl::StatusOr<Id> IdFromWire(int64_t value, const FieldPath& path) {
  CW_RETURN_IF_ERROR(CheckNonNegative(value, path));
  return Id(value);
}

template <typename In>
absl::StatusOr<std::vector<int64_t>> NonNegativeList(const In& repeated,
                                                     std::string_view name,
                                                     const WireLimits& limits,
                                                     const FieldPath& parent) {
  CW_RETURN_IF_ERROR(CheckCount(repeated, limits, parent.Field(name)));
  std::vector<int64_t> out(repeated.begin(), repeated.end());
  for (size_t i = 0; i < out.size(); ++i) {
    CW_RETURN_IF_ERROR(CheckNonNegative(out[i], parent.Index(name, i)));
  }
  return out;
}

template <typename Id, typename In>
absl::StatusOr<std::vector<Id>> IdList(const In& repeated,
                                       std::string_view name,
                                       const WireLimits& limits,
                                       const FieldPath& parent) {
  CW_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                      NonNegativeList(repeated, name, limits, parent));
  std::vector<Id> out;
  out.reserve(values.size());
  for (int64_t v : values) out.push_back(Id(v));
  return out;
}

template <typename Handle, typename In>
std::vector<Handle> HandleList(const In& repeated) {
  std::vector<Handle> out;
  out.reserve(repeated.size());
  for (uint64_t v : repeated) out.push_back(Handle(v));
  return out;
}

// Our element types and the wire's, pair by pair (the wire's numbers are
// fixed; ours may move when a type is added).
constexpr std::pair<hlo::PrimitiveType, wire::ElementType> kElementTypes[] = {
    {hlo::PrimitiveType::kPred, wire::PRED},
    {hlo::PrimitiveType::kS8, wire::S8},
    {hlo::PrimitiveType::kS16, wire::S16},
    {hlo::PrimitiveType::kS32, wire::S32},
    {hlo::PrimitiveType::kS64, wire::S64},
    {hlo::PrimitiveType::kU8, wire::U8},
    {hlo::PrimitiveType::kU16, wire::U16},
    {hlo::PrimitiveType::kU32, wire::U32},
    {hlo::PrimitiveType::kU64, wire::U64},
    {hlo::PrimitiveType::kF16, wire::F16},
    {hlo::PrimitiveType::kBF16, wire::BF16},
    {hlo::PrimitiveType::kF32, wire::F32},
    {hlo::PrimitiveType::kF64, wire::F64},
    {hlo::PrimitiveType::kTuple, wire::TUPLE},
    {hlo::PrimitiveType::kToken, wire::TOKEN},
    {hlo::PrimitiveType::kC64, wire::C64},
    {hlo::PrimitiveType::kC128, wire::C128},
    {hlo::PrimitiveType::kS2, wire::S2},
    {hlo::PrimitiveType::kS4, wire::S4},
    {hlo::PrimitiveType::kU2, wire::U2},
    {hlo::PrimitiveType::kU4, wire::U4},
    {hlo::PrimitiveType::kF8E5M2, wire::F8E5M2},
    {hlo::PrimitiveType::kF8E4M3, wire::F8E4M3},
    {hlo::PrimitiveType::kF8E4M3FN, wire::F8E4M3FN},
    {hlo::PrimitiveType::kF8E4M3B11FNUZ, wire::F8E4M3B11FNUZ},
    {hlo::PrimitiveType::kF8E5M2FNUZ, wire::F8E5M2FNUZ},
    {hlo::PrimitiveType::kF8E4M3FNUZ, wire::F8E4M3FNUZ},
    {hlo::PrimitiveType::kF8E3M4, wire::F8E3M4},
    {hlo::PrimitiveType::kF8E8M0FNU, wire::F8E8M0FNU},
    {hlo::PrimitiveType::kF4E2M1FN, wire::F4E2M1FN},
};

std::optional<hlo::PrimitiveType> ElementTypeFromWire(int number) {
  for (const auto& [ours, theirs] : kElementTypes) {
    if (static_cast<int>(theirs) == number) return ours;
  }
  return std::nullopt;
}

wire::ElementType ElementTypeToWire(hlo::PrimitiveType type) {
  for (const auto& [ours, theirs] : kElementTypes) {
    if (ours == type) return theirs;
  }
  return wire::ELEMENT_TYPE_INVALID;
}

absl::StatusOr<hlo::Shape> ShapeFromWire(const wire::Shape& shape,
                                         const WireLimits& limits,
                                         const FieldPath& path, int depth) {
  const int type_number = static_cast<int>(shape.type());
  const std::optional<hlo::PrimitiveType> known =
      ElementTypeFromWire(type_number);
  if (!known.has_value()) {
    return path.Field("type").Invalid(
        absl::StrCat("element type ", type_number, " is not valid"));
  }
  const hlo::PrimitiveType type = *known;
  if (type == hlo::PrimitiveType::kToken) {
    if (shape.dims_size() != 0 || shape.tuple_shapes_size() != 0) {
      return path.Invalid("a token has no dims and no elements");
    }
    return hlo::Shape::Token();
  }
  if (type == hlo::PrimitiveType::kTuple) {
    if (shape.dims_size() != 0 || shape.minor_to_major_size() != 0) {
      return path.Invalid("a tuple has no dims and no layout");
    }
    if (depth >= limits.max_tuple_depth) {
      return path.Invalid(absl::StrCat("tuples nest deeper than ",
                                       limits.max_tuple_depth));
    }
    if (shape.tuple_shapes_size() > limits.max_tuple_elements) {
      return path.Field("tuple_shapes")
          .Invalid(absl::StrCat(shape.tuple_shapes_size(),
                                " elements (at most ",
                                limits.max_tuple_elements, ")"));
    }
    std::vector<hlo::Shape> elements;
    elements.reserve(shape.tuple_shapes_size());
    for (int i = 0; i < shape.tuple_shapes_size(); ++i) {
      CW_ASSIGN_OR_RETURN(
          hlo::Shape element,
          ShapeFromWire(shape.tuple_shapes(i), limits,
                        path.Index("tuple_shapes", i), depth + 1));
      elements.push_back(std::move(element));
    }
    return hlo::Shape::Tuple(std::move(elements));
  }
  if (shape.tuple_shapes_size() != 0) {
    return path.Invalid("an array shape has no tuple elements");
  }
  if (shape.dims_size() > limits.max_rank) {
    return path.Field("dims").Invalid(absl::StrCat(
        "rank ", shape.dims_size(), " (at most ", limits.max_rank, ")"));
  }
  std::vector<int64_t> dims(shape.dims().begin(), shape.dims().end());
  // Bytes, checked dimension by dimension so that nothing overflows.
  int64_t bytes = hlo::ByteWidth(type);
  for (size_t i = 0; i < dims.size(); ++i) {
    FieldPath dim = path.Index("dims", i);
    CW_RETURN_IF_ERROR(CheckNonNegative(dims[i], dim));
    if (dims[i] != 0 && bytes > limits.max_value_bytes / dims[i]) {
      return path.Invalid(absl::StrCat(
          "more than ", limits.max_value_bytes, " bytes"));
    }
    bytes *= dims[i];
  }
  hlo::Shape out(type, std::move(dims));
  if (shape.minor_to_major_size() != 0) {
    FieldPath layout = path.Field("minor_to_major");
    if (shape.minor_to_major_size() != shape.dims_size()) {
      return layout.Invalid(absl::StrCat(shape.minor_to_major_size(),
                                         " entries for rank ",
                                         shape.dims_size()));
    }
    std::vector<bool> seen(shape.dims_size(), false);
    for (int i = 0; i < shape.minor_to_major_size(); ++i) {
      const int64_t d = shape.minor_to_major(i);
      if (d < 0 || d >= shape.dims_size() || seen[d]) {
        return layout.Invalid("is not a permutation of the dimensions");
      }
      seen[d] = true;
    }
    out.set_minor_to_major({shape.minor_to_major().begin(),
                            shape.minor_to_major().end()});
  }
  return out;
}

absl::StatusOr<std::vector<hlo::Shape>> ArrayShapes(
    const google::protobuf::RepeatedPtrField<wire::Shape>& shapes,
    std::string_view name, const WireLimits& limits, const FieldPath& parent) {
  return ConvertAll<hlo::Shape>(
      shapes, name, limits, parent,
      [&](const wire::Shape& shape, const FieldPath& path) {
        return ArrayShapeFromWire(shape, limits, path);
      });
}

absl::StatusOr<std::vector<hlo::Sharding>> Shardings(
    const google::protobuf::RepeatedPtrField<std::string>& texts,
    std::string_view name, const WireLimits& limits, const FieldPath& parent) {
  return ConvertAll<hlo::Sharding>(
      texts, name, limits, parent,
      [&](const std::string& text, const FieldPath& path) {
        return ShardingFromWire(text, limits, path);
      });
}

absl::StatusOr<std::vector<std::string>> Strings(
    const google::protobuf::RepeatedPtrField<std::string>& texts,
    std::string_view name, const WireLimits& limits, const FieldPath& parent) {
  return ConvertAll<std::string>(
      texts, name, limits, parent,
      [&](const std::string& text, const FieldPath& path) {
        return StringFromWire(text, limits.max_string_bytes, path);
      });
}

}  // namespace

// --- FieldPath. ---

std::string FieldPath::ToString() const {
  std::string text(root_);
  if (parent_ != nullptr) text = absl::StrCat(parent_->ToString(), ".", text);
  if (index_ >= 0) absl::StrAppend(&text, "[", index_, "]");
  return text;
}

absl::Status FieldPath::Invalid(std::string_view message) const {
  return absl::InvalidArgumentError(
      absl::StrCat(ToString(), ": ", std::string(message)));
}

// --- Shared messages. ---

void ToWire(const absl::Status& status, wire::Status* out) {
  out->set_code(static_cast<int32_t>(status.code()));
  out->set_message(std::string(status.message()));
}

absl::Status StatusFromWire(const wire::Status& status,
                            const WireLimits& limits, const FieldPath& path,
                            absl::Status* out) {
  CW_ASSIGN_OR_RETURN(std::string message,
                      StringFromWire(status.message(), limits.max_string_bytes,
                                     path.Field("message")));
  int code = status.code();
  // absl's canonical codes are 0 (OK) .. 16 (UNAUTHENTICATED).
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    code = static_cast<int>(absl::StatusCode::kUnknown);
  }
  if (code == 0) {
    if (!message.empty()) {
      return path.Invalid("an OK status carries no message");
    }
    *out = absl::OkStatus();
    return absl::OkStatus();
  }
  *out = absl::Status(static_cast<absl::StatusCode>(code), message);
  return absl::OkStatus();
}

void ToWire(const hlo::Shape& shape, wire::Shape* out) {
  out->set_type(ElementTypeToWire(shape.type()));
  if (shape.IsTuple()) {
    for (const hlo::Shape& element : shape.tuple_shapes()) {
      ToWire(element, out->add_tuple_shapes());
    }
    return;
  }
  if (!shape.IsArray()) return;
  out->mutable_dims()->Add(shape.dims().begin(), shape.dims().end());
  out->mutable_minor_to_major()->Add(shape.minor_to_major().begin(),
                                     shape.minor_to_major().end());
}

absl::StatusOr<hlo::Shape> FromWire(const wire::Shape& shape,
                                    const WireLimits& limits,
                                    const FieldPath& path) {
  return ShapeFromWire(shape, limits, path, 0);
}

absl::StatusOr<hlo::Shape> ArrayShapeFromWire(const wire::Shape& shape,
                                              const WireLimits& limits,
                                              const FieldPath& path) {
  CW_ASSIGN_OR_RETURN(hlo::Shape out, ShapeFromWire(shape, limits, path, 0));
  if (!out.IsArray()) {
    return path.Invalid(
        absl::StrCat("must be an array shape, not ", out.ToString()));
  }
  return out;
}

std::string ShardingToWire(const hlo::Sharding& sharding) {
  return hlo::PrintSharding(sharding);
}

absl::StatusOr<hlo::Sharding> ShardingFromWire(std::string_view text,
                                               const WireLimits& limits,
                                               const FieldPath& path) {
  if (static_cast<int64_t>(text.size()) > limits.max_string_bytes) {
    return path.Invalid(absl::StrCat(text.size(), " bytes (at most ",
                                     limits.max_string_bytes, ")"));
  }
  absl::StatusOr<hlo::Sharding> sharding = hlo::ParseSharding(text);
  if (!sharding.ok()) {
    return path.Invalid(absl::StrCat("not a sharding: ",
                                     sharding.status().message()));
  }
  return sharding;
}

absl::StatusOr<std::string> StringFromWire(const std::string& text,
                                           int64_t max_bytes,
                                           const FieldPath& path) {
  if (static_cast<int64_t>(text.size()) > max_bytes) {
    return path.Invalid(
        absl::StrCat(text.size(), " bytes (at most ", max_bytes, ")"));
  }
  return text;
}

// --- Values. ---

wire::ValueHeader ValueHeaderOf(const hlo::Literal& value) {
  wire::ValueHeader header;
  ToWire(value.shape(), header.mutable_shape());
  header.set_byte_size(value.size_bytes());
  return header;
}

absl::Status ForEachValueChunk(
    const hlo::Literal& value,
    absl::FunctionRef<absl::Status(std::string_view bytes)> chunk) {
  const int64_t size = value.size_bytes();
  const char* data = static_cast<const char*>(value.untyped_data());
  if (size == 0) return chunk(std::string_view());
  for (int64_t offset = 0; offset < size; offset += kChunkBytes) {
    const int64_t n = std::min(kChunkBytes, size - offset);
    CW_RETURN_IF_ERROR(chunk(std::string_view(data + offset, n)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ValueAssembler> ValueAssembler::Create(
    const wire::ValueHeader& header, const WireLimits& limits,
    const FieldPath& path) {
  CW_ASSIGN_OR_RETURN(
      hlo::Shape shape,
      ArrayShapeFromWire(header.shape(), limits, path.Field("shape")));
  if (header.byte_size() != shape.ByteSize()) {
    return path.Field("byte_size")
        .Invalid(absl::StrCat(header.byte_size(), " bytes for ",
                              shape.ToString(), ", which holds ",
                              shape.ByteSize()));
  }
  const int64_t bytes = shape.ByteSize();
  return ValueAssembler(hlo::Literal::Uninitialized(std::move(shape)), bytes);
}

absl::Status ValueAssembler::Append(std::string_view bytes) {
  if (static_cast<int64_t>(bytes.size()) > expected_ - received_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "value data runs past its declared ", expected_, " bytes"));
  }
  if (!bytes.empty()) {
    std::memcpy(static_cast<char*>(value_.mutable_untyped_data()) + received_,
                bytes.data(), bytes.size());
  }
  received_ += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::StatusOr<hlo::Literal> ValueAssembler::Finish() && {
  if (received_ != expected_) {
    return absl::DataLossError(absl::StrCat("value data ended after ",
                                            received_, " of ", expected_,
                                            " bytes"));
  }
  return std::move(value_);
}

bool TravelsInline(const hlo::Literal& value) {
  return value.shape().IsArray() && value.size_bytes() <= kInlineValueBytes;
}

void ToWire(const hlo::Literal& value, wire::InlineValue* out) {
  *out->mutable_header() = ValueHeaderOf(value);
  out->set_data(static_cast<const char*>(value.untyped_data()),
                static_cast<size_t>(value.size_bytes()));
}

absl::StatusOr<hlo::Literal> FromWire(const wire::InlineValue& value,
                                      const WireLimits& limits,
                                      const FieldPath& path) {
  if (static_cast<int64_t>(value.data().size()) > kInlineValueBytes) {
    return path.Field("data").Invalid(absl::StrCat(
        value.data().size(), " bytes (an inline value has at most ",
        kInlineValueBytes, ")"));
  }
  CW_ASSIGN_OR_RETURN(ValueAssembler assembler,
                      ValueAssembler::Create(value.header(), limits,
                                             path.Field("header")));
  CW_RETURN_IF_ERROR(assembler.Append(value.data()));
  absl::StatusOr<hlo::Literal> whole = std::move(assembler).Finish();
  if (!whole.ok()) {
    return path.Field("data").Invalid(std::string(whole.status().message()));
  }
  return whole;
}

// --- Session protocol. ---

void ToWire(const OpenSessionRequest& request, wire::OpenSession* out) {
  out->set_name(request.name);
  out->set_weight(request.weight);
  out->set_priority(request.priority);
}

absl::StatusOr<OpenSessionRequest> FromWire(const wire::OpenSession& request,
                                            const WireLimits& limits,
                                            const FieldPath& path) {
  OpenSessionRequest out;
  CW_ASSIGN_OR_RETURN(out.name, StringFromWire(request.name(),
                                               limits.max_string_bytes,
                                               path.Field("name")));
  // The head bounds the weight's range; here only that it is a number.
  if (!std::isfinite(request.weight()) || request.weight() <= 0) {
    return path.Field("weight").Invalid(absl::StrCat(
        request.weight(), " is not a positive number"));
  }
  out.weight = request.weight();
  out.priority = request.priority();
  return out;
}

void ToWire(const SliceRequest& request, wire::SliceRequest* out) {
  out->set_handle(request.handle.value());
  out->set_num_devices(request.num_devices);
  out->mutable_mesh_shape()->Add(request.mesh_shape.begin(),
                                 request.mesh_shape.end());
  out->set_has_island(request.island.has_value());
  if (request.island.has_value()) out->set_island(request.island->value());
  out->set_has_priority(request.priority.has_value());
  if (request.priority.has_value()) out->set_priority(*request.priority);
  out->set_allow_smaller(request.allow_smaller);
  out->set_shared(request.shared);
}

absl::StatusOr<SliceRequest> FromWire(const wire::SliceRequest& request,
                                      const WireLimits& limits,
                                      const FieldPath& path) {
  SliceRequest out;
  out.handle = SliceHandle(request.handle());
  if (request.num_devices() < 1 ||
      request.num_devices() > Topology::kMaxDevices) {
    return path.Field("num_devices")
        .Invalid(absl::StrCat(request.num_devices(), " is not in [1, ",
                              Topology::kMaxDevices, "]"));
  }
  out.num_devices = request.num_devices();
  FieldPath mesh = path.Field("mesh_shape");
  if (request.mesh_shape_size() > limits.max_rank) {
    return mesh.Invalid(absl::StrCat(request.mesh_shape_size(),
                                     " axes (at most ", limits.max_rank, ")"));
  }
  for (int i = 0; i < request.mesh_shape_size(); ++i) {
    if (request.mesh_shape(i) < 1) {
      return path.Index("mesh_shape", i)
          .Invalid(absl::StrCat(request.mesh_shape(i), " is not positive"));
    }
    out.mesh_shape.push_back(request.mesh_shape(i));
  }
  if (request.has_island()) {
    CW_ASSIGN_OR_RETURN(out.island,
                        IdFromWire<IslandId>(request.island(),
                                             path.Field("island")));
  }
  if (request.has_priority()) out.priority = request.priority();
  out.allow_smaller = request.allow_smaller();
  out.shared = request.shared();
  return out;
}

void ToWire(const SliceInfo& info, wire::SliceInfo* out) {
  out->set_handle(info.handle.value());
  out->set_island(info.island.value());
  for (DeviceId device : info.devices) out->add_devices(device.value());
  out->mutable_mesh_shape()->Add(info.mesh_shape.begin(),
                                 info.mesh_shape.end());
  out->set_generation(info.generation);
}

absl::StatusOr<SliceInfo> FromWire(const wire::SliceInfo& info,
                                   const WireLimits& limits,
                                   const FieldPath& path) {
  SliceInfo out;
  out.handle = SliceHandle(info.handle());
  CW_ASSIGN_OR_RETURN(out.island,
                      IdFromWire<IslandId>(info.island(), path.Field("island")));
  CW_ASSIGN_OR_RETURN(out.devices,
                      IdList<DeviceId>(info.devices(), "devices", limits, path));
  CW_ASSIGN_OR_RETURN(out.mesh_shape, NonNegativeList(info.mesh_shape(),
                                                      "mesh_shape", limits,
                                                      path));
  out.generation = info.generation();
  return out;
}

void ToWire(const ArraySpec& spec, wire::ArraySpec* out) {
  out->set_handle(spec.handle.value());
  ToWire(spec.global_shape, out->mutable_global_shape());
  out->set_sharding(ShardingToWire(spec.sharding));
  out->set_slice(spec.slice.value());
}

absl::StatusOr<ArraySpec> FromWire(const wire::ArraySpec& spec,
                                   const WireLimits& limits,
                                   const FieldPath& path) {
  ArraySpec out;
  out.handle = ArrayHandle(spec.handle());
  CW_ASSIGN_OR_RETURN(out.global_shape,
                      ArrayShapeFromWire(spec.global_shape(), limits,
                                         path.Field("global_shape")));
  CW_ASSIGN_OR_RETURN(out.sharding, ShardingFromWire(spec.sharding(), limits,
                                                     path.Field("sharding")));
  out.slice = SliceHandle(spec.slice());
  return out;
}

void ToWire(const CompileRequest& request, wire::CompileRequest* out) {
  out->set_handle(request.handle.value());
  out->set_hlo_text(request.hlo_text);
  out->set_slice(request.slice.value());
}

absl::StatusOr<CompileRequest> FromWire(const wire::CompileRequest& request,
                                        const WireLimits& limits,
                                        const FieldPath& path) {
  CompileRequest out;
  out.handle = ExecutableHandle(request.handle());
  CW_ASSIGN_OR_RETURN(out.hlo_text, StringFromWire(request.hlo_text(),
                                                   limits.max_program_bytes,
                                                   path.Field("hlo_text")));
  out.slice = SliceHandle(request.slice());
  return out;
}

void ToWire(const CompileInfo& info, wire::CompileInfo* out) {
  out->set_handle(info.handle.value());
  out->set_num_partitions(info.num_partitions);
  for (const hlo::Shape& shape : info.parameter_shapes) {
    ToWire(shape, out->add_parameter_shapes());
  }
  for (const hlo::Sharding& sharding : info.parameter_shardings) {
    out->add_parameter_shardings(ShardingToWire(sharding));
  }
  for (const hlo::Shape& shape : info.output_shapes) {
    ToWire(shape, out->add_output_shapes());
  }
  for (const hlo::Sharding& sharding : info.output_shardings) {
    out->add_output_shardings(ShardingToWire(sharding));
  }
}

absl::StatusOr<CompileInfo> FromWire(const wire::CompileInfo& info,
                                     const WireLimits& limits,
                                     const FieldPath& path) {
  CompileInfo out;
  out.handle = ExecutableHandle(info.handle());
  if (info.num_partitions() < 1 ||
      info.num_partitions() > Topology::kMaxDevices) {
    return path.Field("num_partitions")
        .Invalid(absl::StrCat(info.num_partitions(), " is not in [1, ",
                              Topology::kMaxDevices, "]"));
  }
  out.num_partitions = info.num_partitions();
  CW_ASSIGN_OR_RETURN(out.parameter_shapes,
                      ArrayShapes(info.parameter_shapes(), "parameter_shapes",
                                  limits, path));
  CW_ASSIGN_OR_RETURN(out.parameter_shardings,
                      Shardings(info.parameter_shardings(),
                                "parameter_shardings", limits, path));
  CW_ASSIGN_OR_RETURN(out.output_shapes,
                      ArrayShapes(info.output_shapes(), "output_shapes",
                                  limits, path));
  CW_ASSIGN_OR_RETURN(out.output_shardings,
                      Shardings(info.output_shardings(), "output_shardings",
                                limits, path));
  if (out.parameter_shardings.size() != out.parameter_shapes.size()) {
    return path.Field("parameter_shardings")
        .Invalid(absl::StrCat(out.parameter_shardings.size(), " for ",
                              out.parameter_shapes.size(), " parameters"));
  }
  if (out.output_shardings.size() != out.output_shapes.size()) {
    return path.Field("output_shardings")
        .Invalid(absl::StrCat(out.output_shardings.size(), " for ",
                              out.output_shapes.size(), " outputs"));
  }
  return out;
}

void ToWire(const ExecuteOp& op, wire::ExecuteOp* out) {
  out->set_executable(op.executable.value());
  for (ArrayHandle argument : op.arguments) {
    out->add_arguments(argument.value());
  }
  for (const ArraySpec& spec : op.outputs) ToWire(spec, out->add_outputs());
}

absl::StatusOr<ExecuteOp> FromWire(const wire::ExecuteOp& op,
                                   const WireLimits& limits,
                                   const FieldPath& path) {
  ExecuteOp out;
  out.executable = ExecutableHandle(op.executable());
  CW_RETURN_IF_ERROR(CheckCount(op.arguments(), limits, path.Field("arguments")));
  out.arguments = HandleList<ArrayHandle>(op.arguments());
  CW_ASSIGN_OR_RETURN(
      out.outputs,
      ConvertAll<ArraySpec>(op.outputs(), "outputs", limits, path,
                            [&](const wire::ArraySpec& spec,
                                const FieldPath& entry) {
                              return FromWire(spec, limits, entry);
                            }));
  return out;
}

void ToWire(const CopyOp& op, wire::CopyOp* out) {
  out->set_source(op.source.value());
  ToWire(op.destination, out->mutable_destination());
  for (const CopyOp::Piece& piece : op.pieces) {
    wire::CopyOp::Piece* p = out->add_pieces();
    p->set_array(piece.array.value());
    p->set_shard(piece.shard);
  }
}

absl::StatusOr<CopyOp> FromWire(const wire::CopyOp& op,
                                const WireLimits& limits,
                                const FieldPath& path) {
  CopyOp out;
  out.source = ArrayHandle(op.source());
  if (!op.has_destination()) return path.Field("destination").Invalid("missing");
  CW_ASSIGN_OR_RETURN(out.destination, FromWire(op.destination(), limits,
                                                path.Field("destination")));
  CW_ASSIGN_OR_RETURN(
      out.pieces,
      ConvertAll<CopyOp::Piece>(
          op.pieces(), "pieces", limits, path,
          [](const wire::CopyOp::Piece& piece,
             const FieldPath& entry) -> absl::StatusOr<CopyOp::Piece> {
            CW_RETURN_IF_ERROR(
                CheckNonNegative(piece.shard(), entry.Field("shard")));
            return CopyOp::Piece{ArrayHandle(piece.array()), piece.shard()};
          }));
  return out;
}

void ToWire(const ProgramGraph& graph, wire::ProgramGraph* out) {
  for (const std::variant<ExecuteOp, CopyOp>& op : graph.ops) {
    wire::GraphOp* entry = out->add_ops();
    if (const auto* execute = std::get_if<ExecuteOp>(&op)) {
      ToWire(*execute, entry->mutable_execute());
    } else {
      ToWire(std::get<CopyOp>(op), entry->mutable_copy());
    }
  }
}

absl::StatusOr<ProgramGraph> FromWire(const wire::ProgramGraph& graph,
                                      const WireLimits& limits,
                                      const FieldPath& path) {
  ProgramGraph out;
  CW_ASSIGN_OR_RETURN(
      out.ops,
      (ConvertAll<std::variant<ExecuteOp, CopyOp>>(
          graph.ops(), "ops", limits, path,
          [&](const wire::GraphOp& op, const FieldPath& entry)
              -> absl::StatusOr<std::variant<ExecuteOp, CopyOp>> {
            switch (op.op_case()) {
              case wire::GraphOp::kExecute: {
                CW_ASSIGN_OR_RETURN(
                    ExecuteOp execute,
                    FromWire(op.execute(), limits, entry.Field("execute")));
                return execute;
              }
              case wire::GraphOp::kCopy: {
                CW_ASSIGN_OR_RETURN(
                    CopyOp copy, FromWire(op.copy(), limits, entry.Field("copy")));
                return copy;
              }
              case wire::GraphOp::OP_NOT_SET:
                break;
            }
            return entry.Invalid("neither an execute nor a copy");
          })));
  return out;
}

void ToWire(const StatusReport& report, wire::StatusReport* out) {
  out->set_text(report.text);
  out->set_json(report.json);
}

absl::StatusOr<StatusReport> FromWire(const wire::StatusReport& report,
                                      const WireLimits& limits,
                                      const FieldPath& path) {
  StatusReport out;
  CW_ASSIGN_OR_RETURN(out.text, StringFromWire(report.text(),
                                               limits.max_string_bytes,
                                               path.Field("text")));
  CW_ASSIGN_OR_RETURN(out.json, StringFromWire(report.json(),
                                               limits.max_string_bytes,
                                               path.Field("json")));
  return out;
}

void ToWire(const DeviceInfo& device, wire::DeviceInfo* out) {
  out->set_id(device.id.value());
  out->set_host(device.host.value());
  out->set_island(device.island.value());
  out->set_index_on_host(device.index_on_host);
  out->set_kind(device.kind);
  out->set_memory_bytes(device.memory_bytes);
}

absl::StatusOr<DeviceInfo> FromWire(const wire::DeviceInfo& device,
                                    const WireLimits& limits,
                                    const FieldPath& path) {
  DeviceInfo out;
  CW_ASSIGN_OR_RETURN(out.id, IdFromWire<DeviceId>(device.id(), path.Field("id")));
  CW_ASSIGN_OR_RETURN(out.host,
                      IdFromWire<HostId>(device.host(), path.Field("host")));
  CW_ASSIGN_OR_RETURN(out.island, IdFromWire<IslandId>(device.island(),
                                                       path.Field("island")));
  CW_RETURN_IF_ERROR(
      CheckNonNegative(device.index_on_host(), path.Field("index_on_host")));
  out.index_on_host = device.index_on_host();
  CW_ASSIGN_OR_RETURN(out.kind, StringFromWire(device.kind(), 64,
                                               path.Field("kind")));
  if (out.kind.empty()) return path.Field("kind").Invalid("empty");
  if (device.memory_bytes() <= 0) {
    return path.Field("memory_bytes")
        .Invalid(absl::StrCat(device.memory_bytes(), " is not positive"));
  }
  out.memory_bytes = device.memory_bytes();
  return out;
}

void ToWire(const Topology& topology, wire::ClusterTopology* out) {
  out->set_version(topology.version());
  for (int64_t h = 0; h < topology.num_hosts(); ++h) {
    const HostInfo& host = topology.host(HostId(h));
    wire::HostInfo* entry = out->add_hosts();
    entry->set_id(h);
    entry->set_island(host.island.value());
    entry->set_num_devices(static_cast<int64_t>(host.devices.size()));
    const DeviceInfo& first = topology.device(host.devices.front());
    entry->set_device_kind(first.kind);
    entry->set_memory_per_device(first.memory_bytes);
    switch (host.state) {
      case HostState::kJoining:
        entry->set_state(wire::HOST_JOINING);
        break;
      case HostState::kAlive:
        entry->set_state(wire::HOST_ALIVE);
        break;
      case HostState::kDead:
        entry->set_state(wire::HOST_DEAD);
        break;
    }
    entry->set_data_plane_address(host.address);
  }
}

absl::StatusOr<Topology> FromWire(const wire::ClusterTopology& topology,
                                  const WireLimits& limits,
                                  const FieldPath& path) {
  if (topology.hosts_size() > Topology::kMaxHosts) {
    return path.Field("hosts").Invalid(absl::StrCat(
        topology.hosts_size(), " hosts (at most ", Topology::kMaxHosts, ")"));
  }
  Topology out = Topology::Empty();
  for (int i = 0; i < topology.hosts_size(); ++i) {
    const wire::HostInfo& host = topology.hosts(i);
    const FieldPath entry = path.Index("hosts", i);
    if (host.id() != i) {
      return entry.Field("id").Invalid(
          absl::StrCat(host.id(), " is out of order (expected ", i, ")"));
    }
    if (host.island() < 0) return entry.Field("island").Invalid("is negative");
    HostSpec spec;
    spec.num_devices = host.num_devices();
    CW_ASSIGN_OR_RETURN(spec.kind, StringFromWire(host.device_kind(), 64,
                                                  entry.Field("device_kind")));
    spec.memory_per_device = host.memory_per_device();
    CW_ASSIGN_OR_RETURN(std::string address,
                        StringFromWire(host.data_plane_address(), 1024,
                                       entry.Field("data_plane_address")));
    absl::StatusOr<Topology> next =
        out.WithHost(IslandId(host.island()), spec, "", std::move(address));
    if (!next.ok()) return entry.Invalid(std::string(next.status().message()));
    switch (host.state()) {
      case wire::HOST_JOINING:
        out = *std::move(next);
        break;
      case wire::HOST_ALIVE:
        out = next->WithHostAlive(HostId(i));
        break;
      case wire::HOST_DEAD:
        out = next->WithHostDead(HostId(i));
        break;
      default:
        return entry.Field("state").Invalid(
            absl::StrCat("unknown host state ", host.state()));
    }
  }
  return out;
}

// --- Worker protocol. ---

void ToWire(const BufferId& buffer, wire::BufferId* out) {
  out->set_array(buffer.array.value());
  out->set_shard(buffer.shard);
}

absl::StatusOr<BufferId> FromWire(const wire::BufferId& buffer,
                                  const WireLimits& limits,
                                  const FieldPath& path) {
  BufferId out;
  out.array = ArrayHandle(buffer.array());
  if (buffer.shard() < 0 || buffer.shard() >= Topology::kMaxDevices) {
    return path.Field("shard").Invalid(absl::StrCat(
        buffer.shard(), " is not in [0, ", Topology::kMaxDevices, ")"));
  }
  out.shard = buffer.shard();
  return out;
}

void ToWire(const DeviceBuffer& buffer, wire::DeviceBuffer* out) {
  out->set_device(buffer.device.value());
  ToWire(buffer.buffer, out->mutable_buffer());
}

absl::StatusOr<DeviceBuffer> FromWire(const wire::DeviceBuffer& buffer,
                                      const WireLimits& limits,
                                      const FieldPath& path) {
  DeviceBuffer out;
  CW_ASSIGN_OR_RETURN(out.device, IdFromWire<DeviceId>(buffer.device(),
                                                       path.Field("device")));
  CW_ASSIGN_OR_RETURN(out.buffer,
                      FromWire(buffer.buffer(), limits, path.Field("buffer")));
  return out;
}

void ToWire(const Box& box, wire::Box* out) {
  out->mutable_offsets()->Add(box.offsets.begin(), box.offsets.end());
  out->mutable_dims()->Add(box.dims.begin(), box.dims.end());
}

absl::StatusOr<Box> FromWire(const wire::Box& box, const WireLimits& limits,
                             const FieldPath& path) {
  if (box.offsets_size() != box.dims_size()) {
    return path.Invalid(absl::StrCat(box.offsets_size(), " offsets for ",
                                     box.dims_size(), " dims"));
  }
  if (box.dims_size() > limits.max_rank) {
    return path.Invalid(absl::StrCat("rank ", box.dims_size(), " (at most ",
                                     limits.max_rank, ")"));
  }
  Box out;
  CW_ASSIGN_OR_RETURN(out.offsets,
                      NonNegativeList(box.offsets(), "offsets", limits, path));
  CW_ASSIGN_OR_RETURN(out.dims, NonNegativeList(box.dims(), "dims", limits, path));
  return out;
}

void ToWire(const LoadProgramRequest& request, wire::LoadProgram* out) {
  out->set_program(request.program.value());
  out->set_name(request.name);
  out->set_hlo_text(request.hlo_text);
}

absl::StatusOr<LoadProgramRequest> FromWire(const wire::LoadProgram& request,
                                            const WireLimits& limits,
                                            const FieldPath& path) {
  LoadProgramRequest out;
  out.program = ProgramId(request.program());
  CW_ASSIGN_OR_RETURN(out.name, StringFromWire(request.name(),
                                               limits.max_string_bytes,
                                               path.Field("name")));
  CW_ASSIGN_OR_RETURN(out.hlo_text, StringFromWire(request.hlo_text(),
                                                   limits.max_program_bytes,
                                                   path.Field("hlo_text")));
  if (out.hlo_text.empty()) return path.Field("hlo_text").Invalid("empty");
  return out;
}

void ToWire(const ReceiveSpec& spec, wire::ReceiveSpec* out) {
  out->set_device(spec.device.value());
  ToWire(spec.buffer, out->mutable_buffer());
  ToWire(spec.shape, out->mutable_shape());
  for (const PieceOrigin& piece : spec.pieces) {
    wire::PieceOrigin* origin = out->add_pieces();
    origin->set_transfer_id(piece.transfer_id);
    origin->set_device(piece.device.value());
    origin->set_host(piece.host.value());
    origin->set_description(piece.description);
  }
  for (const Box& box : spec.zero_fill) ToWire(box, out->add_zero_fill());
  out->set_whole(spec.whole);
}

absl::StatusOr<ReceiveSpec> FromWire(const wire::ReceiveSpec& spec,
                                     const WireLimits& limits,
                                     const FieldPath& path) {
  ReceiveSpec out;
  CW_ASSIGN_OR_RETURN(out.device, IdFromWire<DeviceId>(spec.device(),
                                                       path.Field("device")));
  CW_ASSIGN_OR_RETURN(out.buffer,
                      FromWire(spec.buffer(), limits, path.Field("buffer")));
  CW_ASSIGN_OR_RETURN(out.shape, ArrayShapeFromWire(spec.shape(), limits,
                                                    path.Field("shape")));
  CW_ASSIGN_OR_RETURN(
      out.pieces,
      ConvertAll<PieceOrigin>(
          spec.pieces(), "pieces", limits, path,
          [&](const wire::PieceOrigin& piece,
              const FieldPath& entry) -> absl::StatusOr<PieceOrigin> {
            PieceOrigin origin;
            origin.transfer_id = piece.transfer_id();
            CW_ASSIGN_OR_RETURN(origin.device,
                                IdFromWire<DeviceId>(piece.device(),
                                                     entry.Field("device")));
            CW_ASSIGN_OR_RETURN(origin.host, IdFromWire<HostId>(
                                                 piece.host(),
                                                 entry.Field("host")));
            CW_ASSIGN_OR_RETURN(origin.description,
                                StringFromWire(piece.description(),
                                               limits.max_string_bytes,
                                               entry.Field("description")));
            return origin;
          }));
  CW_ASSIGN_OR_RETURN(
      out.zero_fill,
      ConvertAll<Box>(spec.zero_fill(), "zero_fill", limits, path,
                      [&](const wire::Box& box, const FieldPath& entry) {
                        return FromWire(box, limits, entry);
                      }));
  out.whole = spec.whole();
  if (out.whole && out.pieces.size() != 1) {
    return path.Field("whole").Invalid(absl::StrCat(
        "a whole receive has one piece, not ", out.pieces.size()));
  }
  return out;
}

void ToWire(const LaunchOp& op, NameEncoder& names, wire::LaunchOp* out) {
  out->set_device(op.device.value());
  out->set_island(op.island.value());
  out->set_seq(op.seq);
  out->set_program(op.program.value());
  out->set_program_name(names.Id(op.program_name));
  out->set_session(op.session.value());
  out->set_session_name(names.Id(op.session_name));
  out->set_partition(op.partition);
  out->set_num_partitions(op.num_partitions);
  out->set_epoch(op.epoch);
  if (op.peers_key != 0) {
    out->set_peers(names.PeersId(op.peers_key, op.devices,
                                 op.participant_hosts));
  } else {
    for (DeviceId device : op.devices) out->add_devices(device.value());
    for (HostId host : op.participant_hosts) {
      out->add_participant_hosts(host.value());
    }
  }
  for (const ReceiveSpec& spec : op.staging) ToWire(spec, out->add_staging());
  for (const LaunchInput& input : op.inputs) {
    wire::LaunchInput* in = out->add_inputs();
    ToWire(input.buffer, in->mutable_buffer());
    in->set_release_after_use(input.release_after_use);
    in->set_array(input.array.value());
    if (input.producer != nullptr) {
      in->set_producer(names.Id(*input.producer));
    }
  }
  for (const LaunchOutput& output : op.outputs) {
    wire::LaunchOutput* o = out->add_outputs();
    ToWire(output.buffer, o->mutable_buffer());
    ToWire(output.shape, o->mutable_shape());
  }
  if (!op.abandoned.ok()) ToWire(op.abandoned, out->mutable_abandoned());
}

absl::StatusOr<LaunchOp> FromWire(const wire::LaunchOp& op,
                                  const NameDecoder& names,
                                  const WireLimits& limits,
                                  const FieldPath& path) {
  LaunchOp out;
  // The first name that is not defined: the launch is abandoned with it.
  absl::Status unnamed;
  auto name = [&](uint32_t id, const FieldPath& field, auto* value) {
    absl::Status found = names.Find(id, field, value);
    if (!found.ok() && unnamed.ok()) unnamed = found;
  };
  CW_ASSIGN_OR_RETURN(out.device,
                      IdFromWire<DeviceId>(op.device(), path.Field("device")));
  CW_ASSIGN_OR_RETURN(out.island,
                      IdFromWire<IslandId>(op.island(), path.Field("island")));
  out.seq = op.seq();
  out.program = ProgramId(op.program());
  name(op.program_name(), path.Field("program_name"), &out.program_name);
  CW_ASSIGN_OR_RETURN(out.session, IdFromWire<SessionId>(op.session(),
                                                         path.Field("session")));
  name(op.session_name(), path.Field("session_name"), &out.session_name);
  if (op.num_partitions() < 1 || op.num_partitions() > Topology::kMaxDevices) {
    return path.Field("num_partitions")
        .Invalid(absl::StrCat(op.num_partitions(), " is not in [1, ",
                              Topology::kMaxDevices, "]"));
  }
  out.num_partitions = op.num_partitions();
  if (op.partition() < 0 || op.partition() >= op.num_partitions()) {
    return path.Field("partition")
        .Invalid(absl::StrCat(op.partition(), " is not in [0, ",
                              op.num_partitions(), ")"));
  }
  out.partition = op.partition();
  out.epoch = op.epoch();
  if (op.peers() != 0) {
    std::shared_ptr<const Peers> peers;
    absl::Status found = names.FindPeers(op.peers(), path.Field("peers"), &peers);
    if (!found.ok()) {
      if (unnamed.ok()) unnamed = found;
    } else if (op.devices_size() != 0 || op.participant_hosts_size() != 0) {
      return path.Field("peers").Invalid(
          "given with devices or participant_hosts");
    } else {
      out.devices = peers->devices;
      out.participant_hosts = peers->hosts;
    }
  } else {
    CW_ASSIGN_OR_RETURN(out.devices,
                        IdList<DeviceId>(op.devices(), "devices", limits, path));
  }
  if (!out.devices.empty() &&
      (static_cast<int64_t>(out.devices.size()) != out.num_partitions ||
       out.devices[out.partition] != out.device)) {
    return path.Field("devices").Invalid(absl::StrCat(
        out.devices.size(), " devices for ", out.num_partitions,
        " partitions, or partition ", out.partition, "'s is not device ",
        out.device.value()));
  }
  if (op.peers() == 0) {
    CW_ASSIGN_OR_RETURN(out.participant_hosts,
                        IdList<HostId>(op.participant_hosts(),
                                       "participant_hosts", limits, path));
  }
  CW_ASSIGN_OR_RETURN(
      out.staging,
      ConvertAll<ReceiveSpec>(op.staging(), "staging", limits, path,
                              [&](const wire::ReceiveSpec& spec,
                                  const FieldPath& entry) {
                                return FromWire(spec, limits, entry);
                              }));
  CW_ASSIGN_OR_RETURN(
      out.inputs,
      ConvertAll<LaunchInput>(
          op.inputs(), "inputs", limits, path,
          [&](const wire::LaunchInput& input,
              const FieldPath& entry) -> absl::StatusOr<LaunchInput> {
            LaunchInput in;
            CW_ASSIGN_OR_RETURN(in.buffer, FromWire(input.buffer(), limits,
                                                    entry.Field("buffer")));
            in.release_after_use = input.release_after_use();
            in.array = ArrayHandle(input.array());
            name(input.producer(), entry.Field("producer"), &in.producer);
            return in;
          }));
  CW_ASSIGN_OR_RETURN(
      out.outputs,
      ConvertAll<LaunchOutput>(
          op.outputs(), "outputs", limits, path,
          [&](const wire::LaunchOutput& output,
              const FieldPath& entry) -> absl::StatusOr<LaunchOutput> {
            LaunchOutput o;
            CW_ASSIGN_OR_RETURN(o.buffer, FromWire(output.buffer(), limits,
                                                   entry.Field("buffer")));
            CW_ASSIGN_OR_RETURN(o.shape,
                                ArrayShapeFromWire(output.shape(), limits,
                                                   entry.Field("shape")));
            return o;
          }));
  if (op.has_abandoned()) {
    CW_RETURN_IF_ERROR(StatusFromWire(op.abandoned(), limits,
                                      path.Field("abandoned"), &out.abandoned));
  }
  if (out.abandoned.ok() && !unnamed.ok()) {
    out.abandoned = absl::InvalidArgumentError(absl::StrCat(
        "program ",
        out.program_name.empty()
            ? absl::StrCat(absl::Hex(out.program.value()))
            : absl::StrCat("'", out.program_name, "'"),
        " (seq ", out.seq, ") cannot run: ", unnamed.message()));
  }
  return out;
}

void ToWire(const SendSpec& spec, wire::SendSpec* out) {
  out->set_transfer_id(spec.transfer_id);
  out->set_device(spec.device.value());
  ToWire(spec.source, out->mutable_source());
  ToWire(spec.region, out->mutable_region());
  out->set_whole(spec.whole);
  out->set_destination_host(spec.destination_host.value());
  out->set_destination_device(spec.destination_device.value());
  ToWire(spec.destination, out->mutable_destination());
  out->mutable_destination_offsets()->Add(spec.destination_offsets.begin(),
                                          spec.destination_offsets.end());
}

absl::StatusOr<SendSpec> FromWire(const wire::SendSpec& spec,
                                  const WireLimits& limits,
                                  const FieldPath& path) {
  SendSpec out;
  out.transfer_id = spec.transfer_id();
  CW_ASSIGN_OR_RETURN(out.device,
                      IdFromWire<DeviceId>(spec.device(), path.Field("device")));
  CW_ASSIGN_OR_RETURN(out.source,
                      FromWire(spec.source(), limits, path.Field("source")));
  CW_ASSIGN_OR_RETURN(out.region,
                      FromWire(spec.region(), limits, path.Field("region")));
  out.whole = spec.whole();
  CW_ASSIGN_OR_RETURN(out.destination_host,
                      IdFromWire<HostId>(spec.destination_host(),
                                         path.Field("destination_host")));
  CW_ASSIGN_OR_RETURN(out.destination_device,
                      IdFromWire<DeviceId>(spec.destination_device(),
                                           path.Field("destination_device")));
  CW_ASSIGN_OR_RETURN(out.destination, FromWire(spec.destination(), limits,
                                                path.Field("destination")));
  CW_ASSIGN_OR_RETURN(out.destination_offsets,
                      NonNegativeList(spec.destination_offsets(),
                                      "destination_offsets", limits, path));
  if (!out.whole &&
      out.destination_offsets.size() != out.region.offsets.size()) {
    return path.Field("destination_offsets")
        .Invalid(absl::StrCat(out.destination_offsets.size(),
                              " offsets for a region of rank ",
                              out.region.offsets.size()));
  }
  return out;
}

void ToWire(const WorkerBatch& batch, NameEncoder& names,
            wire::WorkerBatch* out) {
  names.Begin(out->mutable_names());
  for (const ReceiveSpec& spec : batch.receives) {
    ToWire(spec, out->add_receives());
  }
  for (const LaunchOp& op : batch.launches) {
    ToWire(op, names, out->add_launches());
  }
  for (const SendSpec& spec : batch.sends) ToWire(spec, out->add_sends());
  for (const DeviceBuffer& buffer : batch.releases) {
    ToWire(buffer, out->add_releases());
  }
}

absl::StatusOr<WorkerBatch> FromWire(const wire::WorkerBatch& batch,
                                     NameDecoder& names,
                                     const WireLimits& limits,
                                     const FieldPath& path) {
  WorkerBatch out;
  names.Define(batch.names());
  CW_ASSIGN_OR_RETURN(
      out.receives,
      ConvertAll<ReceiveSpec>(batch.receives(), "receives", limits, path,
                              [&](const wire::ReceiveSpec& spec,
                                  const FieldPath& entry) {
                                return FromWire(spec, limits, entry);
                              }));
  CW_ASSIGN_OR_RETURN(
      out.launches,
      ConvertAll<LaunchOp>(batch.launches(), "launches", limits, path,
                           [&](const wire::LaunchOp& op,
                               const FieldPath& entry) {
                             return FromWire(op, names, limits, entry);
                           }));
  CW_ASSIGN_OR_RETURN(
      out.sends,
      ConvertAll<SendSpec>(batch.sends(), "sends", limits, path,
                           [&](const wire::SendSpec& spec,
                               const FieldPath& entry) {
                             return FromWire(spec, limits, entry);
                           }));
  CW_ASSIGN_OR_RETURN(
      out.releases,
      ConvertAll<DeviceBuffer>(batch.releases(), "releases", limits, path,
                               [&](const wire::DeviceBuffer& buffer,
                                   const FieldPath& entry) {
                                 return FromWire(buffer, limits, entry);
                               }));
  return out;
}

void ToWire(const OpStatus& op, wire::OpStatus* out) {
  out->set_seq(op.seq);
  out->set_island(op.island.value());
  out->set_program(op.program);
  out->set_session(op.session);
  out->set_partition(op.partition);
  for (const std::string& w : op.waiting_for) out->add_waiting_for(w);
  out->set_waiting_for_memory(op.waiting_for_memory);
}

absl::StatusOr<OpStatus> FromWire(const wire::OpStatus& op,
                                  const WireLimits& limits,
                                  const FieldPath& path) {
  OpStatus out;
  out.seq = op.seq();
  CW_ASSIGN_OR_RETURN(out.island,
                      IdFromWire<IslandId>(op.island(), path.Field("island")));
  CW_ASSIGN_OR_RETURN(out.program, StringFromWire(op.program(),
                                                  limits.max_string_bytes,
                                                  path.Field("program")));
  CW_ASSIGN_OR_RETURN(out.session, StringFromWire(op.session(),
                                                  limits.max_string_bytes,
                                                  path.Field("session")));
  CW_RETURN_IF_ERROR(CheckNonNegative(op.partition(), path.Field("partition")));
  out.partition = op.partition();
  CW_ASSIGN_OR_RETURN(out.waiting_for,
                      Strings(op.waiting_for(), "waiting_for", limits, path));
  out.waiting_for_memory = op.waiting_for_memory();
  return out;
}

void ToWire(const WorkerStatus& status, wire::WorkerStatus* out) {
  out->set_host(status.host.value());
  for (const DeviceStatus& device : status.devices) {
    wire::DeviceStatus* d = out->add_devices();
    d->set_device(device.device.value());
    if (device.running.has_value()) ToWire(*device.running, d->mutable_running());
    for (const OpStatus& op : device.queued) ToWire(op, d->add_queued());
    wire::ObjectStoreStats* m = d->mutable_memory();
    m->set_budget_bytes(device.memory.budget_bytes);
    m->set_used_bytes(device.memory.used_bytes);
    m->set_reserved_bytes(device.memory.reserved_bytes);
    m->set_waiting_bytes(device.memory.waiting_bytes);
    m->set_num_waiting(device.memory.num_waiting);
    m->set_num_reserved(device.memory.num_reserved);
    m->set_num_ready(device.memory.num_ready);
    m->set_num_error(device.memory.num_error);
    d->set_ops_completed(device.ops_completed);
  }
  for (const std::string& r : status.pending_receives) {
    out->add_pending_receives(r);
  }
}

absl::StatusOr<WorkerStatus> FromWire(const wire::WorkerStatus& status,
                                      const WireLimits& limits,
                                      const FieldPath& path) {
  WorkerStatus out;
  CW_ASSIGN_OR_RETURN(out.host,
                      IdFromWire<HostId>(status.host(), path.Field("host")));
  CW_ASSIGN_OR_RETURN(
      out.devices,
      ConvertAll<DeviceStatus>(
          status.devices(), "devices", limits, path,
          [&](const wire::DeviceStatus& device,
              const FieldPath& entry) -> absl::StatusOr<DeviceStatus> {
            DeviceStatus d;
            CW_ASSIGN_OR_RETURN(d.device,
                                IdFromWire<DeviceId>(device.device(),
                                                     entry.Field("device")));
            if (device.has_running()) {
              CW_ASSIGN_OR_RETURN(d.running, FromWire(device.running(), limits,
                                                      entry.Field("running")));
            }
            CW_ASSIGN_OR_RETURN(
                d.queued,
                ConvertAll<OpStatus>(device.queued(), "queued", limits, entry,
                                     [&](const wire::OpStatus& op,
                                         const FieldPath& e) {
                                       return FromWire(op, limits, e);
                                     }));
            const wire::ObjectStoreStats& m = device.memory();
            FieldPath memory = entry.Field("memory");
            for (int64_t value :
                 {m.budget_bytes(), m.used_bytes(), m.reserved_bytes(),
                  m.waiting_bytes(), m.num_waiting(), m.num_reserved(),
                  m.num_ready(), m.num_error()}) {
              CW_RETURN_IF_ERROR(CheckNonNegative(value, memory));
            }
            d.memory.budget_bytes = m.budget_bytes();
            d.memory.used_bytes = m.used_bytes();
            d.memory.reserved_bytes = m.reserved_bytes();
            d.memory.waiting_bytes = m.waiting_bytes();
            d.memory.num_waiting = m.num_waiting();
            d.memory.num_reserved = m.num_reserved();
            d.memory.num_ready = m.num_ready();
            d.memory.num_error = m.num_error();
            CW_RETURN_IF_ERROR(CheckNonNegative(device.ops_completed(),
                                                entry.Field("ops_completed")));
            d.ops_completed = device.ops_completed();
            return d;
          }));
  CW_ASSIGN_OR_RETURN(out.pending_receives,
                      Strings(status.pending_receives(), "pending_receives",
                              limits, path));
  return out;
}

namespace {

wire::HostState HostStateToWire(HostState state) {
  switch (state) {
    case HostState::kJoining:
      return wire::HOST_JOINING;
    case HostState::kAlive:
      return wire::HOST_ALIVE;
    case HostState::kDead:
      return wire::HOST_DEAD;
  }
  return wire::HOST_DEAD;
}

absl::StatusOr<HostState> HostStateFromWire(int state, const FieldPath& path) {
  switch (state) {
    case wire::HOST_JOINING:
      return HostState::kJoining;
    case wire::HOST_ALIVE:
      return HostState::kAlive;
    case wire::HOST_DEAD:
      return HostState::kDead;
    default:
      return path.Invalid(absl::StrCat("unknown host state ", state));
  }
}

int64_t MicrosOf(absl::Time time) { return absl::ToUnixMicros(time); }

}  // namespace

void ToWire(const MembershipUpdate& update, wire::MembershipUpdate* out) {
  out->set_version(update.version);
  for (const PeerInfo& peer : update.hosts) {
    wire::PeerInfo* entry = out->add_hosts();
    entry->set_host(peer.host.value());
    entry->set_island(peer.island.value());
    entry->set_data_plane_address(peer.address);
    entry->set_state(HostStateToWire(peer.state));
    entry->set_incarnation(peer.incarnation);
  }
  out->mutable_island_epochs()->Add(update.island_epochs.begin(),
                                    update.island_epochs.end());
}

absl::StatusOr<MembershipUpdate> FromWire(const wire::MembershipUpdate& update,
                                          const WireLimits& limits,
                                          const FieldPath& path) {
  MembershipUpdate out;
  out.version = update.version();
  CW_ASSIGN_OR_RETURN(
      out.hosts,
      ConvertAll<PeerInfo>(
          update.hosts(), "hosts", limits, path,
          [&](const wire::PeerInfo& peer,
              const FieldPath& entry) -> absl::StatusOr<PeerInfo> {
            PeerInfo info;
            CW_ASSIGN_OR_RETURN(info.host, IdFromWire<HostId>(
                                               peer.host(),
                                               entry.Field("host")));
            CW_ASSIGN_OR_RETURN(info.island,
                                IdFromWire<IslandId>(peer.island(),
                                                     entry.Field("island")));
            CW_ASSIGN_OR_RETURN(
                info.address,
                StringFromWire(peer.data_plane_address(), 1024,
                               entry.Field("data_plane_address")));
            CW_ASSIGN_OR_RETURN(info.state,
                                HostStateFromWire(peer.state(),
                                                  entry.Field("state")));
            CW_ASSIGN_OR_RETURN(info.incarnation,
                                StringFromWire(peer.incarnation(), 1024,
                                               entry.Field("incarnation")));
            return info;
          }));
  CW_RETURN_IF_ERROR(CheckCount(update.island_epochs(), limits,
                                path.Field("island_epochs")));
  out.island_epochs.assign(update.island_epochs().begin(),
                           update.island_epochs().end());
  return out;
}

namespace {

void EventToWire(const trace::EventRecord& record, NameEncoder& names,
                 wire::TraceEvent* out) {
  using Kind = trace::EventRecord::Kind;
  switch (record.kind) {
    case Kind::kOpEnqueued:
      out->set_kind(wire::TraceEvent::OP_ENQUEUED);
      break;
    case Kind::kOpStarted:
      out->set_kind(wire::TraceEvent::OP_STARTED);
      break;
    case Kind::kOpFinished:
      out->set_kind(wire::TraceEvent::OP_FINISHED);
      break;
    case Kind::kWaitStarted:
      out->set_kind(wire::TraceEvent::WAIT_STARTED);
      break;
    case Kind::kWaitFinished:
      out->set_kind(wire::TraceEvent::WAIT_FINISHED);
      break;
    case Kind::kTransferStarted:
      out->set_kind(wire::TraceEvent::TRANSFER_STARTED);
      break;
    case Kind::kTransferFinished:
      out->set_kind(wire::TraceEvent::TRANSFER_FINISHED);
      break;
  }
  if (const auto* op = std::get_if<trace::OpEvent>(&record.event)) {
    out->set_time_us(MicrosOf(op->time));
    out->set_device(op->device.value());
    out->set_host(op->host.value());
    out->set_island(op->island.value());
    out->set_seq(op->seq);
    out->set_session(op->session.value());
    out->set_session_name(names.Id(op->session_name));
    out->set_program(names.Id(op->program));
    out->set_partition(op->partition);
    out->set_num_partitions(op->num_partitions);
    out->set_collective_ns(absl::ToInt64Nanoseconds(op->collective_time));
    out->set_collectives(op->collectives);
  } else if (const auto* wait = std::get_if<trace::WaitEvent>(&record.event)) {
    out->set_time_us(MicrosOf(wait->time));
    out->set_device(wait->device.value());
    out->set_host(wait->host.value());
    out->set_seq(wait->seq);
    out->set_program(names.Id(wait->program));
    out->set_waits_for_memory(wait->reason ==
                              trace::WaitEvent::Reason::kMemory);
    out->set_detail(wait->detail);
  } else if (const auto* transfer =
                 std::get_if<trace::TransferEvent>(&record.event)) {
    out->set_time_us(MicrosOf(transfer->time));
    out->set_transfer_id(transfer->transfer_id);
    out->set_source_device(transfer->source_device.value());
    out->set_source_host(transfer->source_host.value());
    out->set_destination_device(transfer->destination_device.value());
    out->set_destination_host(transfer->destination_host.value());
    out->set_bytes(transfer->bytes);
    out->set_description(transfer->description);
  }
  if (!record.status.ok()) ToWire(record.status, out->mutable_status());
}

// Every name `event` uses is defined in `names` (the caller checked).
absl::StatusOr<trace::EventRecord> EventFromWire(
    const wire::TraceEvent& event, const NameDecoder& names,
    const WireLimits& limits, const FieldPath& path) {
  using Kind = trace::EventRecord::Kind;
  trace::EventRecord out;
  const absl::Time time = absl::FromUnixMicros(event.time_us());
  auto text = [&](const std::string& value, const char* name) {
    return StringFromWire(value, limits.max_string_bytes, path.Field(name));
  };
  switch (event.kind()) {
    case wire::TraceEvent::OP_ENQUEUED:
    case wire::TraceEvent::OP_STARTED:
    case wire::TraceEvent::OP_FINISHED: {
      out.kind = event.kind() == wire::TraceEvent::OP_ENQUEUED ? Kind::kOpEnqueued
                 : event.kind() == wire::TraceEvent::OP_STARTED
                     ? Kind::kOpStarted
                     : Kind::kOpFinished;
      trace::OpEvent op;
      op.time = time;
      CW_ASSIGN_OR_RETURN(op.device, IdFromWire<DeviceId>(
                                         event.device(), path.Field("device")));
      CW_ASSIGN_OR_RETURN(op.host,
                          IdFromWire<HostId>(event.host(), path.Field("host")));
      CW_ASSIGN_OR_RETURN(op.island, IdFromWire<IslandId>(
                                         event.island(), path.Field("island")));
      op.seq = event.seq();
      CW_ASSIGN_OR_RETURN(op.session, IdFromWire<SessionId>(
                                          event.session(),
                                          path.Field("session")));
      CW_RETURN_IF_ERROR(names.Find(event.session_name(),
                                    path.Field("session_name"),
                                    &op.session_name));
      CW_RETURN_IF_ERROR(
          names.Find(event.program(), path.Field("program"), &op.program));
      op.partition = event.partition();
      op.num_partitions = event.num_partitions();
      if (event.collective_ns() < 0) {
        return path.Field("collective_ns")
            .Invalid(absl::StrCat(event.collective_ns(), " is negative"));
      }
      if (event.collectives() < 0) {
        return path.Field("collectives")
            .Invalid(absl::StrCat(event.collectives(), " is negative"));
      }
      op.collective_time = absl::Nanoseconds(event.collective_ns());
      op.collectives = event.collectives();
      out.event = std::move(op);
      break;
    }
    case wire::TraceEvent::WAIT_STARTED:
    case wire::TraceEvent::WAIT_FINISHED: {
      out.kind = event.kind() == wire::TraceEvent::WAIT_STARTED
                     ? Kind::kWaitStarted
                     : Kind::kWaitFinished;
      trace::WaitEvent wait;
      wait.time = time;
      CW_ASSIGN_OR_RETURN(wait.device, IdFromWire<DeviceId>(
                                           event.device(),
                                           path.Field("device")));
      CW_ASSIGN_OR_RETURN(wait.host,
                          IdFromWire<HostId>(event.host(), path.Field("host")));
      wait.seq = event.seq();
      CW_RETURN_IF_ERROR(
          names.Find(event.program(), path.Field("program"), &wait.program));
      wait.reason = event.waits_for_memory() ? trace::WaitEvent::Reason::kMemory
                                             : trace::WaitEvent::Reason::kInputs;
      CW_ASSIGN_OR_RETURN(wait.detail, text(event.detail(), "detail"));
      out.event = std::move(wait);
      break;
    }
    case wire::TraceEvent::TRANSFER_STARTED:
    case wire::TraceEvent::TRANSFER_FINISHED: {
      out.kind = event.kind() == wire::TraceEvent::TRANSFER_STARTED
                     ? Kind::kTransferStarted
                     : Kind::kTransferFinished;
      trace::TransferEvent transfer;
      transfer.time = time;
      transfer.transfer_id = event.transfer_id();
      CW_ASSIGN_OR_RETURN(transfer.source_device,
                          IdFromWire<DeviceId>(event.source_device(),
                                               path.Field("source_device")));
      CW_ASSIGN_OR_RETURN(transfer.source_host,
                          IdFromWire<HostId>(event.source_host(),
                                             path.Field("source_host")));
      CW_ASSIGN_OR_RETURN(
          transfer.destination_device,
          IdFromWire<DeviceId>(event.destination_device(),
                               path.Field("destination_device")));
      CW_ASSIGN_OR_RETURN(transfer.destination_host,
                          IdFromWire<HostId>(event.destination_host(),
                                             path.Field("destination_host")));
      CW_RETURN_IF_ERROR(CheckNonNegative(event.bytes(), path.Field("bytes")));
      transfer.bytes = event.bytes();
      CW_ASSIGN_OR_RETURN(transfer.description,
                          text(event.description(), "description"));
      out.event = std::move(transfer);
      break;
    }
    default:
      return path.Field("kind").Invalid(
          absl::StrCat("unknown event kind ", event.kind()));
  }
  if (event.has_status()) {
    CW_RETURN_IF_ERROR(StatusFromWire(event.status(), limits,
                                      path.Field("status"), &out.status));
  }
  return out;
}

}  // namespace

void ToWire(absl::Span<const trace::EventRecord> records, NameEncoder& names,
            wire::TraceEvents* out) {
  names.Begin(out->mutable_names());
  for (const trace::EventRecord& record : records) {
    EventToWire(record, names, out->add_events());
  }
}

absl::StatusOr<std::vector<trace::EventRecord>> FromWire(
    const wire::TraceEvents& events, NameDecoder& names,
    const WireLimits& limits, const FieldPath& path, int64_t* unnamed) {
  names.Define(events.names());
  CW_RETURN_IF_ERROR(CheckCount(events.events(), limits, path.Field("events")));
  std::vector<trace::EventRecord> records;
  records.reserve(events.events().size());
  for (int i = 0; i < events.events().size(); ++i) {
    const wire::TraceEvent& event = events.events(i);
    if (!names.Has(event.session_name()) || !names.Has(event.program())) {
      ++*unnamed;
      continue;
    }
    CW_ASSIGN_OR_RETURN(trace::EventRecord record,
                        EventFromWire(event, names, limits,
                                      path.Index("events", i)));
    records.push_back(std::move(record));
  }
  return records;
}

void ToWire(const UndeliveredPiece& piece, wire::UndeliveredPiece* out) {
  out->set_transfer_id(piece.transfer_id);
  out->set_source_host(piece.source_host.value());
  out->set_source_device(piece.source_device.value());
  out->set_destination_host(piece.destination_host.value());
  ToWire(piece.destination, out->mutable_destination());
  ToWire(piece.status, out->mutable_status());
}

absl::StatusOr<UndeliveredPiece> FromWire(const wire::UndeliveredPiece& piece,
                                          const WireLimits& limits,
                                          const FieldPath& path) {
  UndeliveredPiece out;
  out.transfer_id = piece.transfer_id();
  CW_ASSIGN_OR_RETURN(out.source_host, IdFromWire<HostId>(
                                           piece.source_host(),
                                           path.Field("source_host")));
  CW_ASSIGN_OR_RETURN(out.source_device, IdFromWire<DeviceId>(
                                             piece.source_device(),
                                             path.Field("source_device")));
  CW_ASSIGN_OR_RETURN(out.destination_host, IdFromWire<HostId>(
                                                piece.destination_host(),
                                                path.Field("destination_host")));
  CW_ASSIGN_OR_RETURN(out.destination, FromWire(piece.destination(), limits,
                                                path.Field("destination")));
  CW_RETURN_IF_ERROR(StatusFromWire(piece.status(), limits,
                                    path.Field("status"), &out.status));
  // A piece that failed always says why: an OK status would leave its
  // destination waiting.
  if (out.status.ok()) return path.Field("status").Invalid("is OK");
  return out;
}

void ToWire(const OpDone& done, wire::OpDone* out) {
  out->set_device(done.device.value());
  out->set_island(done.island.value());
  out->set_seq(done.seq);
  if (!done.status.ok()) ToWire(done.status, out->mutable_status());
}

absl::StatusOr<OpDone> FromWire(const wire::OpDone& done, HostId host,
                                const WireLimits& limits,
                                const FieldPath& path) {
  OpDone out;
  out.host = host;
  CW_ASSIGN_OR_RETURN(out.device,
                      IdFromWire<DeviceId>(done.device(), path.Field("device")));
  CW_ASSIGN_OR_RETURN(out.island,
                      IdFromWire<IslandId>(done.island(), path.Field("island")));
  out.seq = done.seq();
  if (done.has_status()) {
    CW_RETURN_IF_ERROR(StatusFromWire(done.status(), limits,
                                      path.Field("status"), &out.status));
  }
  return out;
}

}  // namespace causeway::transport
