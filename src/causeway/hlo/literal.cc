#include "causeway/hlo/literal.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "causeway/base/block_pool.h"
#include "causeway/base/logging.h"
#include "causeway/base/memory_account.h"

namespace causeway::hlo {

// The bytes of an array, 64-byte aligned, from the process-wide BlockPool
// (large buffers are recycled, small ones come from malloc), charged to the
// thread's MemoryAccount (base/memory_account.h) before they are taken.
struct Literal::Storage {
  explicit Storage(int64_t bytes, bool zero_fill = true)
      : size(bytes),
        charge(bytes),
        block(BlockPool::Global().Allocate(static_cast<size_t>(bytes))) {
    data = static_cast<std::byte*>(block.data);
    if (zero_fill) std::memset(data, 0, static_cast<size_t>(size));
  }
  ~Storage() { BlockPool::Global().Free(block); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  int64_t size;
  MemoryCharge charge;  // Before `block`: charged first, credited last.
  Block block;
  std::byte* data = nullptr;
};

Literal::Literal(Shape shape) : shape_(std::move(shape)) {
  if (shape_.IsTuple()) {
    for (const Shape& element : shape_.tuple_shapes()) {
      elements_.emplace_back(element);
    }
  } else if (shape_.IsArray()) {
    storage_ = std::make_shared<Storage>(shape_.ByteSize());
  }
}

Literal Literal::Uninitialized(Shape shape) {
  Literal literal;
  literal.shape_ = std::move(shape);
  if (literal.shape_.IsTuple()) {
    for (const Shape& element : literal.shape_.tuple_shapes()) {
      literal.elements_.push_back(Uninitialized(element));
    }
  } else if (literal.shape_.IsArray()) {
    literal.storage_ = std::make_shared<Storage>(literal.shape_.ByteSize(),
                                                 /*zero_fill=*/false);
  }
  return literal;
}

Literal Literal::MakeTuple(std::vector<Literal> elements) {
  std::vector<Shape> shapes;
  shapes.reserve(elements.size());
  for (const Literal& element : elements) shapes.push_back(element.shape());
  Literal literal;
  literal.shape_ = Shape::Tuple(std::move(shapes));
  literal.elements_ = std::move(elements);
  return literal;
}

const void* Literal::untyped_data() const {
  CW_CHECK(storage_ != nullptr) << "not an array: " << shape_.ToString();
  return storage_->data;
}

void* Literal::mutable_untyped_data() {
  CW_CHECK(storage_ != nullptr) << "not an array: " << shape_.ToString();
  if (storage_.use_count() > 1) {
    auto copy = std::make_shared<Storage>(storage_->size, /*zero_fill=*/false);
    std::memcpy(copy->data, storage_->data,
                static_cast<size_t>(storage_->size));
    storage_ = std::move(copy);
  }
  return storage_->data;
}

Literal Literal::WithShape(Shape shape) const {
  CW_CHECK(shape.ByteSize() == shape_.ByteSize())
      << shape.ToString() << " vs " << shape_.ToString();
  Literal literal;
  literal.shape_ = std::move(shape);
  literal.storage_ = storage_;
  return literal;
}

double Literal::GetAsDouble(int64_t i) const {
  return VisitType(shape_.type(), [&](auto tag) -> double {
    using E = decltype(tag);
    E value = static_cast<const E*>(untyped_data())[i];
    if constexpr (std::is_same_v<E, BF16> || std::is_same_v<E, F16> ||
                  kIsMinifloat<E>) {
      return static_cast<double>(static_cast<float>(value));
    } else if constexpr (kIsComplex<E>) {
      return static_cast<double>(value.real());
    } else if constexpr (kIsNarrowInt<E>) {
      return static_cast<double>(value.value());
    } else {
      return static_cast<double>(value);
    }
  });
}

bool operator==(const Literal& a, const Literal& b) {
  if (!a.shape_.Compatible(b.shape_)) return false;
  if (a.shape_.IsTuple()) return a.elements_ == b.elements_;
  if (!a.shape_.IsArray()) return true;
  return std::memcmp(a.untyped_data(), b.untyped_data(),
                     static_cast<size_t>(a.size_bytes())) == 0;
}

std::string Literal::ToString() const {
  if (shape_.IsTuple()) {
    std::string text = "(";
    for (size_t i = 0; i < elements_.size(); ++i) {
      if (i > 0) text += ", ";
      text += elements_[i].ToString();
    }
    return text + ")";
  }
  std::string text = shape_.ToString(/*with_layout=*/false);
  if (!shape_.IsArray()) return text;
  text += " {";
  int64_t n = shape_.ElementCount();
  constexpr int64_t kMaxPrinted = 64;
  const bool complex = IsComplex(shape_.type());
  for (int64_t i = 0; i < n && i < kMaxPrinted; ++i) {
    if (i > 0) text += ", ";
    if (complex) {
      VisitType(shape_.type(), [&](auto tag) {
        using E = decltype(tag);
        if constexpr (kIsComplex<E>) {
          const E value = static_cast<const E*>(untyped_data())[i];
          absl::StrAppend(&text, "(", value.real(), ", ", value.imag(), ")");
        }
      });
    } else {
      absl::StrAppend(&text, GetAsDouble(i));
    }
  }
  if (n > kMaxPrinted) text += ", ...";
  return text + "}";
}

}  // namespace causeway::hlo
