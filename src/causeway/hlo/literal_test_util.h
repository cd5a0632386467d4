// Test helpers: small literals from value lists, and their values back.
// For tests only.
#ifndef CAUSEWAY_HLO_LITERAL_TEST_UTIL_H_
#define CAUSEWAY_HLO_LITERAL_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "causeway/hlo/literal.h"

namespace causeway::hlo::testutil {

// An f32 array of `dims`, its first values.size() elements set (row-major),
// the rest zero.
inline Literal F32(std::vector<int64_t> dims, std::vector<float> values) {
  Literal literal(Shape(PrimitiveType::kF32, std::move(dims)));
  auto data = literal.mutable_data<float>();
  for (size_t i = 0; i < values.size() && i < data.size(); ++i) {
    data[i] = values[i];
  }
  return literal;
}

// A rank-1 f32 array of `values`.
inline Literal Vector(std::vector<float> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return F32({n}, std::move(values));
}

// The elements of an f32 array, row-major.
inline std::vector<float> Values(const Literal& literal) {
  auto data = literal.data<float>();
  return {data.begin(), data.end()};
}

// An array of any type from its C++ element values (T is the type that
// stores `type`'s elements: float, int32_t, BF16, bool, ...).
template <typename T>
Literal Array(PrimitiveType type, std::vector<int64_t> dims,
              std::vector<T> values) {
  Literal literal{Shape(type, std::move(dims))};
  std::copy(values.begin(), values.end(), literal.mutable_data<T>().begin());
  return literal;
}

// The elements of an array of any type, as doubles, row-major.
inline std::vector<double> DoubleValues(const Literal& literal) {
  std::vector<double> values;
  for (int64_t i = 0; i < literal.shape().ElementCount(); ++i) {
    values.push_back(literal.GetAsDouble(i));
  }
  return values;
}

}  // namespace causeway::hlo::testutil

#endif  // CAUSEWAY_HLO_LITERAL_TEST_UTIL_H_
