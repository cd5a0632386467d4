// Secrets compared without telling an attacker, through the time it takes,
// how much of a guess was right.
#ifndef CAUSEWAY_BASE_CONSTANT_TIME_H_
#define CAUSEWAY_BASE_CONSTANT_TIME_H_

#include <string_view>

namespace causeway {

// Equal strings, in time that depends on their lengths only, not on where
// they differ. (The length of a guess is not secret.)
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace causeway

#endif  // CAUSEWAY_BASE_CONSTANT_TIME_H_
