#include "causeway/transport/control_channel.h"

#include "absl/strings/str_cat.h"

namespace causeway::transport {

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
