#include "causeway/base/ids.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace causeway {

std::string BufferId::ToString() const {
  return absl::StrCat("array ", array.value(), " shard ", shard);
}

}  // namespace causeway
