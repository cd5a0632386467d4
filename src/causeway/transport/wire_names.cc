#include "causeway/transport/wire_names.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"
#include "causeway/transport/wire_convert.h"

namespace causeway::transport {
namespace {

// `name` cut to at most kMaxNameBytes, at a UTF-8 character boundary (a
// proto string must stay valid UTF-8).
std::string_view Cut(const std::string& name) {
  std::string_view text(name);
  if (static_cast<int64_t>(text.size()) <= kMaxNameBytes) return text;
  size_t end = kMaxNameBytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return text.substr(0, end);
}

}  // namespace

void NameEncoder::Begin(wire::Names* names) {
  names_ = names;
  if (size() >= kMaxNames / 2 || bytes_ >= kMaxNameTableBytes / 2) {
    ids_.clear();
    bytes_ = 0;
    names->set_reset(true);
  }
}

uint32_t NameEncoder::Id(const std::string& name) {
  if (name.empty()) return 0;
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  CW_CHECK(names_ != nullptr) << "NameEncoder::Id before Begin";
  const uint32_t id = static_cast<uint32_t>(ids_.size() + 1);
  ids_.emplace(name, id);
  const std::string_view text = Cut(name);
  bytes_ += static_cast<int64_t>(text.size());
  wire::Name* definition = names_->add_define();
  definition->set_id(id);
  definition->set_text(text.data(), text.size());
  return id;
}

void NameDecoder::Define(const wire::Names& names) {
  if (names.reset()) {
    names_.clear();
    bytes_ = 0;
  }
  for (const wire::Name& name : names.define()) {
    const int64_t bytes = static_cast<int64_t>(name.text().size());
    const char* refused = nullptr;
    if (name.id() != static_cast<uint64_t>(names_.size()) + 1) {
      refused = "out of order";
    } else if (bytes > kMaxNameBytes) {
      refused = "too long";
    } else if (size() >= kMaxNames || bytes_ + bytes > kMaxNameTableBytes) {
      refused = "beyond the table's bounds";
    }
    if (refused != nullptr) {
      CW_LOG(WARNING) << "name " << name.id() << " (" << bytes
                      << " bytes) is not kept: " << refused
                      << " (the table has " << size() << " names, "
                      << bytes_ << " bytes); its uses will fail";
      continue;
    }
    bytes_ += bytes;
    names_.push_back(std::make_shared<const std::string>(name.text()));
  }
}

absl::Status NameDecoder::Find(
    uint32_t id, const FieldPath& path,
    std::shared_ptr<const std::string>* out) const {
  if (id == 0) {
    out->reset();
    return absl::OkStatus();
  }
  if (!Has(id)) {
    return path.Invalid(absl::StrCat("name ", id,
                                     " is not defined on this stream (",
                                     names_.size(), " names are)"));
  }
  *out = names_[id - 1];
  return absl::OkStatus();
}

absl::Status NameDecoder::Find(uint32_t id, const FieldPath& path,
                               std::string* out) const {
  std::shared_ptr<const std::string> name;
  absl::Status found = Find(id, path, &name);
  if (!found.ok()) return found;
  if (name == nullptr) {
    out->clear();
  } else {
    *out = *name;
  }
  return absl::OkStatus();
}

}  // namespace causeway::transport
