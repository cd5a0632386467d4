// The Pathways paper's Figure 2, on Causeway's client API: three SPMD
// programs on three 2-device virtual slices,
//
//   a(x) = x * 2,   b(x) = x + 1,   c(x) = x / 2,
//   f(v) = (b(a(v)), a(c(a(v)))),
//
// with f traced as ONE program graph (four executions and the transfers
// between the slices, dispatched at once). f([1., 2.]) = ([3, 5], [2, 4]).
#ifndef CAUSEWAY_EXAMPLES_FIGURE2_LIB_H_
#define CAUSEWAY_EXAMPLES_FIGURE2_LIB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/client/client.h"

namespace causeway::examples {

struct Figure2Result {
  std::vector<float> first;   // b(a(v))
  std::vector<float> second;  // a(c(a(v)))
  // "([3, 5], [2, 4])".
  std::string ToString() const;
};

// The HLO text of `name(x) = x <op> constant` for f32[2] split over 2
// devices, built with the C++ HLO builder.
absl::StatusOr<std::string> ElementwiseProgram(const std::string& name,
                                               const std::string& op,
                                               float constant);

// Runs f(v) in a new session of `client` (three slices of 2 devices).
absl::StatusOr<Figure2Result> RunFigure2(client::Client& client,
                                         std::vector<float> v = {1, 2});

}  // namespace causeway::examples

#endif  // CAUSEWAY_EXAMPLES_FIGURE2_LIB_H_
