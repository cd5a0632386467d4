// Test helpers: small f32 literals from value lists, and their values back.
// For tests only.
#ifndef CAUSEWAY_HLO_LITERAL_TEST_UTIL_H_
#define CAUSEWAY_HLO_LITERAL_TEST_UTIL_H_

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

// The elements of an f32 array, row-major.
inline std::vector<float> Values(const Literal& literal) {
  auto data = literal.data<float>();
  return {data.begin(), data.end()};
}

}  // namespace causeway::hlo::testutil

#endif  // CAUSEWAY_HLO_LITERAL_TEST_UTIL_H_
