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
  if (size() >= kMaxNames / 2 || bytes_ >= kMaxNameTableBytes / 2 ||
      static_cast<int64_t>(peer_ids_.size()) >= kMaxPeerLists / 2 ||
      peer_id_count_ >= kMaxPeerIds / 2) {
    ids_.clear();
    bytes_ = 0;
    peer_ids_.clear();
    peer_id_count_ = 0;
    names->set_reset(true);
  }
}

uint32_t NameEncoder::PeersId(uint64_t key, const std::vector<DeviceId>& devices,
                              const std::vector<HostId>& hosts) {
  auto it = peer_ids_.find(key);
  if (it != peer_ids_.end()) return it->second;
  CW_CHECK(names_ != nullptr) << "NameEncoder::PeersId before Begin";
  const uint32_t id = static_cast<uint32_t>(peer_ids_.size() + 1);
  peer_ids_.emplace(key, id);
  peer_id_count_ += static_cast<int64_t>(devices.size() + hosts.size());
  wire::PeerList* definition = names_->add_define_peers();
  definition->set_id(id);
  definition->mutable_devices()->Reserve(static_cast<int>(devices.size()));
  for (DeviceId device : devices) definition->add_devices(device.value());
  definition->mutable_hosts()->Reserve(static_cast<int>(hosts.size()));
  for (HostId host : hosts) definition->add_hosts(host.value());
  return id;
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
    peers_.clear();
    peer_id_count_ = 0;
  }
  for (const wire::PeerList& list : names.define_peers()) {
    const int64_t ids = list.devices_size() + list.hosts_size();
    const char* refused = nullptr;
    if (list.id() != static_cast<uint64_t>(peers_.size()) + 1) {
      refused = "out of order";
    } else if (static_cast<int64_t>(peers_.size()) >= kMaxPeerLists ||
               peer_id_count_ + ids > kMaxPeerIds) {
      refused = "beyond the table's bounds";
    }
    auto peers = std::make_shared<Peers>();
    for (int64_t device : list.devices()) {
      if (device < 0) refused = "a negative device id";
      peers->devices.push_back(DeviceId(device));
    }
    for (int64_t host : list.hosts()) {
      if (host < 0) refused = "a negative host id";
      peers->hosts.push_back(HostId(host));
    }
    if (refused != nullptr) {
      CW_LOG(WARNING) << "peer list " << list.id() << " (" << ids
                      << " ids) is not kept: " << refused << " (the table has "
                      << peers_.size() << " lists, " << peer_id_count_
                      << " ids); its uses will fail";
      continue;
    }
    peer_id_count_ += ids;
    peers_.push_back(std::move(peers));
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

absl::Status NameDecoder::FindPeers(uint32_t id, const FieldPath& path,
                                    std::shared_ptr<const Peers>* out) const {
  if (id == 0 || id > peers_.size()) {
    return path.Invalid(absl::StrCat("peer list ", id,
                                     " is not defined on this stream (",
                                     peers_.size(), " are)"));
  }
  *out = peers_[id - 1];
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
