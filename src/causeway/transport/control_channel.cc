#include "causeway/transport/control_channel.h"

#include "absl/strings/str_cat.h"

namespace causeway::transport {
namespace {

// splitmix64's finaliser: every input bit reaches every output bit.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t PeersKey(const std::vector<DeviceId>& devices,
                  const std::vector<HostId>& hosts) {
  uint64_t key = Mix(devices.size());
  for (DeviceId device : devices) {
    key = Mix(key ^ static_cast<uint64_t>(device.value()));
  }
  key = Mix(key ^ hosts.size());
  for (HostId host : hosts) key = Mix(key ^ static_cast<uint64_t>(host.value()));
  return key == 0 ? 1 : key;
}

std::string DescribeInputSource(const LaunchOp& op, size_t input) {
  const LaunchInput& in = op.inputs[input];
  if (in.producer == nullptr) return "";
  const std::string array =
      absl::StrCat("array ", in.array.value(), " (", *in.producer, ")");
  if (!in.release_after_use) return absl::StrCat(array, " on this device");
  // Staged: the pieces of the receive that fills its buffer.
  std::string origins;
  for (const ReceiveSpec& receive : op.staging) {
    if (receive.buffer != in.buffer) continue;
    for (const PieceOrigin& piece : receive.pieces) {
      absl::StrAppend(&origins, origins.empty() ? "" : ", ", "device ",
                      piece.device.value(), " (host ", piece.host.value(),
                      ")");
    }
  }
  return absl::StrCat("transfer of ", array, " from ",
                      origins.empty() ? "nowhere (padding)" : origins);
}

}  // namespace causeway::transport
