// Small hand-written HLO programs for client tests and examples.
#ifndef CAUSEWAY_CLIENT_TEST_PROGRAMS_H_
#define CAUSEWAY_CLIENT_TEST_PROGRAMS_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace causeway::client::testing {

// y = x <op> c elementwise, for f32[shard_len] shards of an array tiled
// over `partitions` devices (global f32[partitions * shard_len]). `op` is
// an HLO binary opcode: "multiply", "add", "divide", "subtract".
inline std::string ElementwiseProgram(const std::string& name,
                                      const std::string& op, float c,
                                      int64_t partitions,
                                      int64_t shard_len = 1) {
  const std::string shape = absl::StrCat("f32[", shard_len, "]{0}");
  const std::string sharding =
      partitions == 1 ? "{replicated}"
                      : absl::StrCat("{devices=[", partitions, "]<=[",
                                     partitions, "]}");
  return absl::StrCat(
      "HloModule ", name, ", num_partitions=", partitions, "\n\n",
      "ENTRY %main (x: ", shape, ") -> ", shape, " {\n",
      "  %x = ", shape, " parameter(0), sharding=", sharding, "\n",
      "  %c = f32[] constant(", c, ")\n",
      "  %cb = ", shape, " broadcast(%c), dimensions={}\n",
      "  ROOT %y = ", shape, " ", op, "(%x, %cb), sharding=", sharding, "\n",
      "}\n");
}

// (x + y, x * y) for f32[n] replicated on `partitions` devices.
inline std::string SumAndProductProgram(int64_t partitions, int64_t n) {
  const std::string shape = absl::StrCat("f32[", n, "]{0}");
  return absl::StrCat(
      "HloModule sum_and_product, num_partitions=", partitions, "\n\n",
      "ENTRY %main (x: ", shape, ", y: ", shape, ") -> (", shape, ", ", shape,
      ") {\n",
      "  %x = ", shape, " parameter(0), sharding={replicated}\n",
      "  %y = ", shape, " parameter(1), sharding={replicated}\n",
      "  %s = ", shape, " add(%x, %y)\n",
      "  %p = ", shape, " multiply(%x, %y)\n",
      "  ROOT %t = (", shape, ", ", shape,
      ") tuple(%s, %p), sharding={{replicated}, {replicated}}\n",
      "}\n");
}

}  // namespace causeway::client::testing

#endif  // CAUSEWAY_CLIENT_TEST_PROGRAMS_H_
