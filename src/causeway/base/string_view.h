// Debian's Abseil (20220623) has a string_view of its own, not
// std::string_view, and its StrCat does not take the standard one:
// AbslView passes a std::string_view where Abseil takes its own.
#ifndef CAUSEWAY_BASE_STRING_VIEW_H_
#define CAUSEWAY_BASE_STRING_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace causeway {

inline absl::string_view AbslView(std::string_view s) {
  return {s.data(), s.size()};
}

}  // namespace causeway

#endif  // CAUSEWAY_BASE_STRING_VIEW_H_
