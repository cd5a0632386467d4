// Element types and shapes of HLO values: arrays (dtype + dims + layout) and
// tuples. Immutable value types; thread-compatible. A Shape shares its dims,
// layout and elements with its copies (copying one costs a reference count,
// not an allocation: shapes are copied with every value and every launch);
// scalars hold nothing at all.
#ifndef CAUSEWAY_HLO_SHAPE_H_
#define CAUSEWAY_HLO_SHAPE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace causeway::hlo {

enum class PrimitiveType {
  kInvalid,
  kPred,
  kS8,
  kS16,
  kS32,
  kS64,
  kU8,
  kU16,
  kU32,
  kU64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kC64,
  kC128,
  kS2,
  kS4,
  kU2,
  kU4,
  kF8E5M2,
  kF8E4M3,
  kF8E4M3FN,
  kF8E4M3B11FNUZ,
  kF8E5M2FNUZ,
  kF8E4M3FNUZ,
  kF8E3M4,
  kF8E8M0FNU,
  kF4E2M1FN,
  kTuple,
  kToken,
};

// "f32", "pred", ... ; nullopt for an unknown name.
std::optional<PrimitiveType> PrimitiveTypeFromName(std::string_view name);
std::string_view PrimitiveTypeName(PrimitiveType type);
// Bytes per element in memory; 0 for tuple, token and invalid. The
// sub-byte integers (s2, s4, u2, u4) and f4e2m1fn take one byte each
// (hlo/element_types.h).
int64_t ByteWidth(PrimitiveType type);
// Bits of the value: 4 for s4, 8 for f8e4m3fn, 64 for c64, ...
int64_t BitWidth(PrimitiveType type);
// f16, bf16, f32, f64: the floats the kernels compute in. The minifloats
// (f8*, f4e2m1fn) are IsMinifloat instead; complex types are IsComplex.
bool IsFloating(PrimitiveType type);
bool IsMinifloat(PrimitiveType type);
bool IsComplex(PrimitiveType type);  // c64, c128
// f32 for c64, f64 for c128; kInvalid for other types.
PrimitiveType ComplexComponentType(PrimitiveType type);
// c64 for f32 (and narrower floats), c128 for f64; kInvalid otherwise.
PrimitiveType ComplexTypeOf(PrimitiveType component);
bool IsSignedInteger(PrimitiveType type);    // s2, s4, s8, ..., s64
bool IsUnsignedInteger(PrimitiveType type);  // u2, u4, u8, ..., u64
bool IsInteger(PrimitiveType type);  // signed or unsigned, not pred
bool IsSubByteInteger(PrimitiveType type);  // s2, s4, u2, u4
bool IsArrayType(PrimitiveType type);  // everything but tuple/token/invalid

class Shape {
 public:
  Shape() = default;
  // An array shape with the default (descending) layout.
  Shape(PrimitiveType type, std::vector<int64_t> dims);
  static Shape Tuple(std::vector<Shape> elements);
  static Shape Token();
  static Shape Scalar(PrimitiveType type) { return Shape(type, {}); }

  PrimitiveType type() const { return type_; }
  bool IsTuple() const { return type_ == PrimitiveType::kTuple; }
  bool IsToken() const { return type_ == PrimitiveType::kToken; }
  bool IsArray() const { return IsArrayType(type_); }

  // Array shapes.
  const std::vector<int64_t>& dims() const { return rep().dims; }
  int64_t rank() const { return static_cast<int64_t>(dims().size()); }
  int64_t dim(int64_t i) const { return dims()[i]; }
  int64_t ElementCount() const;
  int64_t ByteSize() const;  // Elements × width (arrays); sum (tuples).
  // Minor-to-major order as printed in `{1,0}`; empty means "not given"
  // (the default descending layout). Values are always stored row-major
  // (descending) in memory whatever the layout says: layouts are kept for
  // printing and round trips only.
  const std::vector<int64_t>& minor_to_major() const {
    return rep().minor_to_major;
  }
  void set_minor_to_major(std::vector<int64_t> m2m) {
    MutableRep().minor_to_major = std::move(m2m);
  }
  // Dimensions printed as `<=N` (dynamic). Kept for round trips only.
  const std::vector<bool>& dynamic_dims() const { return rep().dynamic_dims; }
  void set_dynamic_dims(std::vector<bool> d) {
    MutableRep().dynamic_dims = std::move(d);
  }

  // Tuple shapes.
  const std::vector<Shape>& tuple_shapes() const { return rep().tuple_shapes; }
  const Shape& tuple_shape(int64_t i) const { return tuple_shapes()[i]; }

  // Equal type and dims (and tuple elements), ignoring layouts.
  bool Compatible(const Shape& other) const;
  // Equal in every respect, layouts included.
  friend bool operator==(const Shape& a, const Shape& b);

  // "f32[2,3]{1,0}", "(f32[], s32[4]{0})". With `with_layout` false the
  // layout is omitted.
  std::string ToString(bool with_layout = true) const;

 private:
  struct Rep {
    std::vector<int64_t> dims;
    std::vector<int64_t> minor_to_major;
    std::vector<bool> dynamic_dims;
    std::vector<Shape> tuple_shapes;
  };
  static const Rep& EmptyRep();
  const Rep& rep() const { return rep_ != nullptr ? *rep_ : EmptyRep(); }
  // The rep, first copied if another Shape shares it (copy on write).
  Rep& MutableRep();

  PrimitiveType type_ = PrimitiveType::kInvalid;
  // Shared with copies and never changed while shared; null when every
  // field is empty.
  std::shared_ptr<Rep> rep_;
};

// Row-major strides (in elements) for `dims`.
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims);

// True when `perm` holds each of 0..rank-1 exactly once (a transpose's
// permutation, a layout's minor_to_major).
bool IsPermutation(std::span<const int64_t> perm, int64_t rank);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_SHAPE_H_
