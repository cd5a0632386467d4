// A Literal is a value of an HLO shape: a dense array (row-major, descending
// layout in memory whatever the shape's printed layout says) or a tuple of
// literals. Storage is shared between copies and copied on the first write
// (copy on write), so passing literals around, reshaping and tupling is
// cheap. Thread-compatible: distinct literals may be used from different
// threads even when they share storage; one literal needs external sync.
#ifndef CAUSEWAY_HLO_LITERAL_H_
#define CAUSEWAY_HLO_LITERAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "causeway/hlo/element_types.h"
#include "causeway/hlo/float16.h"
#include "causeway/hlo/shape.h"

namespace causeway::hlo {

class Literal {
 public:
  Literal() = default;
  // A zero-filled value of `shape` (tuples hold zero-filled elements).
  // Its bytes are charged to the MemoryAccount open on this thread, if any
  // (base/memory_account.h): over its limit, this throws
  // MemoryLimitExceeded before allocating. So do Uninitialized and the
  // copy a first write makes of shared storage.
  explicit Literal(Shape shape);
  // A value of `shape` whose array bytes are left uninitialised (tuple
  // elements too): for kernels that write every element before anything
  // reads it, saving the zero fill.
  static Literal Uninitialized(Shape shape);
  static Literal MakeTuple(std::vector<Literal> elements);
  // A scalar of a C++ type that maps to an HLO type.
  template <typename T>
  static Literal Scalar(PrimitiveType type, T value);

  const Shape& shape() const { return shape_; }

  // Arrays. Data is aligned to 64 bytes.
  const void* untyped_data() const;
  void* mutable_untyped_data();  // Copies shared storage first.
  int64_t size_bytes() const { return shape_.ByteSize(); }
  template <typename T>
  std::span<const T> data() const {
    return {static_cast<const T*>(untyped_data()),
            static_cast<size_t>(shape_.ElementCount())};
  }
  template <typename T>
  std::span<T> mutable_data() {
    return {static_cast<T*>(mutable_untyped_data()),
            static_cast<size_t>(shape_.ElementCount())};
  }
  // The same bytes viewed with another shape of equal byte size (shares
  // storage; used by reshape, bitcast and layout-only copies).
  Literal WithShape(Shape shape) const;

  // Tuples.
  const std::vector<Literal>& elements() const { return elements_; }
  std::vector<Literal>& mutable_elements() { return elements_; }

  // Element `i` (row-major index) converted to double (complex: the real
  // part); for tests and printing.
  double GetAsDouble(int64_t i) const;

  // Same shape (ignoring layout) and the same bytes.
  friend bool operator==(const Literal& a, const Literal& b);

  // "f32[2] {1, 2}" style text, for messages and tests.
  std::string ToString() const;

 private:
  struct Storage;
  Shape shape_;
  std::shared_ptr<Storage> storage_;  // Arrays only.
  std::vector<Literal> elements_;     // Tuples only.
};

// Invokes `fn(T{})` with the C++ type that stores elements of `type`
// (bool for pred, BF16, F16, float, double, int8_t, ..., uint64_t, C64,
// C128, S4, ..., F8E4M3FN, ...: element_types.h). Every array type is
// visited, so `fn` must compile for all of them (kIsComplex,
// kIsNarrowInt and kIsMinifloat tell the new ones apart).
template <typename Fn>
auto VisitType(PrimitiveType type, Fn&& fn) {
  switch (type) {
    case PrimitiveType::kC64: return fn(C64{});
    case PrimitiveType::kC128: return fn(C128{});
    case PrimitiveType::kS2: return fn(S2{});
    case PrimitiveType::kS4: return fn(S4{});
    case PrimitiveType::kU2: return fn(U2{});
    case PrimitiveType::kU4: return fn(U4{});
    case PrimitiveType::kF8E5M2: return fn(F8E5M2{});
    case PrimitiveType::kF8E4M3: return fn(F8E4M3{});
    case PrimitiveType::kF8E4M3FN: return fn(F8E4M3FN{});
    case PrimitiveType::kF8E4M3B11FNUZ: return fn(F8E4M3B11FNUZ{});
    case PrimitiveType::kF8E5M2FNUZ: return fn(F8E5M2FNUZ{});
    case PrimitiveType::kF8E4M3FNUZ: return fn(F8E4M3FNUZ{});
    case PrimitiveType::kF8E3M4: return fn(F8E3M4{});
    case PrimitiveType::kF8E8M0FNU: return fn(F8E8M0FNU{});
    case PrimitiveType::kF4E2M1FN: return fn(F4E2M1FN{});
    case PrimitiveType::kPred: return fn(bool{});
    case PrimitiveType::kS8: return fn(int8_t{});
    case PrimitiveType::kS16: return fn(int16_t{});
    case PrimitiveType::kS32: return fn(int32_t{});
    case PrimitiveType::kS64: return fn(int64_t{});
    case PrimitiveType::kU8: return fn(uint8_t{});
    case PrimitiveType::kU16: return fn(uint16_t{});
    case PrimitiveType::kU32: return fn(uint32_t{});
    case PrimitiveType::kU64: return fn(uint64_t{});
    case PrimitiveType::kF16: return fn(F16{});
    case PrimitiveType::kBF16: return fn(BF16{});
    case PrimitiveType::kF32: return fn(float{});
    case PrimitiveType::kF64: return fn(double{});
    default: return fn(float{});  // Callers check IsArrayType first.
  }
}

template <typename T>
Literal Literal::Scalar(PrimitiveType type, T value) {
  Literal literal(Shape::Scalar(type));
  VisitType(type, [&](auto tag) {
    using E = decltype(tag);
    if constexpr (std::is_same_v<E, BF16> || std::is_same_v<E, F16>) {
      literal.mutable_data<E>()[0] = E(static_cast<float>(value));
    } else if constexpr (kIsMinifloat<E>) {
      literal.mutable_data<E>()[0] = E::FromDouble(static_cast<double>(value));
    } else if constexpr (kIsNarrowInt<E>) {
      literal.mutable_data<E>()[0] = E::Wrap(static_cast<int64_t>(value));
    } else {
      literal.mutable_data<E>()[0] = static_cast<E>(value);
    }
  });
  return literal;
}

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_LITERAL_H_
