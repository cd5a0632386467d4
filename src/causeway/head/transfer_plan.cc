#include "causeway/head/transfer_plan.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"

namespace causeway::head {

using transport::Box;
using transport::PieceOrigin;
using transport::ReceiveSpec;
using transport::SendSpec;
using transport::Topology;

namespace {

// A box of the global array: [offsets, offsets + dims).
struct GlobalBox {
  std::vector<int64_t> offsets;
  std::vector<int64_t> dims;
  int64_t ElementCount() const {
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    return count;
  }
};

// The part of a shard that lies inside the global array.
GlobalBox ValidBox(const hlo::ShardRegion& region) {
  return GlobalBox{region.offsets, region.valid};
}

bool Intersect(const GlobalBox& a, const GlobalBox& b, GlobalBox* out) {
  out->offsets.resize(a.offsets.size());
  out->dims.resize(a.offsets.size());
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    const int64_t lo = std::max(a.offsets[d], b.offsets[d]);
    const int64_t hi =
        std::min(a.offsets[d] + a.dims[d], b.offsets[d] + b.dims[d]);
    if (hi <= lo) return false;
    out->offsets[d] = lo;
    out->dims[d] = hi - lo;
  }
  return true;
}

std::vector<int64_t> Minus(const std::vector<int64_t>& a,
                           const std::vector<int64_t>& b) {
  std::vector<int64_t> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] - b[i];
  return out;
}

// The padding of a shard (its dims outside `valid`) as disjoint boxes.
std::vector<Box> PaddingBoxes(const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& valid) {
  std::vector<Box> boxes;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (valid[d] >= dims[d]) continue;
    Box box;
    box.offsets.assign(dims.size(), 0);
    box.dims = dims;
    for (size_t k = 0; k < d; ++k) box.dims[k] = valid[k];
    box.offsets[d] = valid[d];
    box.dims[d] = dims[d] - valid[d];
    bool empty = false;
    for (int64_t extent : box.dims) empty = empty || extent == 0;
    if (!empty) boxes.push_back(std::move(box));
  }
  return boxes;
}

std::string DeviceName(const Topology& topology, DeviceId device) {
  return absl::StrCat("device ", device.value(), " (host ",
                      topology.HostOf(device).value(), ")");
}

}  // namespace

absl::StatusOr<std::vector<hlo::ShardRegion>> RegionsOf(
    const ArrayPlacement& placement) {
  return hlo::ShardRegions(placement.sharding, placement.global_shape,
                           static_cast<int64_t>(placement.devices.size()));
}

absl::StatusOr<bool> SamePlacement(const ArrayPlacement& a,
                                   const ArrayPlacement& b) {
  if (a.devices != b.devices) return false;
  if (!a.global_shape.Compatible(b.global_shape)) return false;
  if (a.sharding == b.sharding) return true;
  CW_ASSIGN_OR_RETURN(std::vector<hlo::ShardRegion> ra, RegionsOf(a));
  CW_ASSIGN_OR_RETURN(std::vector<hlo::ShardRegion> rb, RegionsOf(b));
  for (size_t i = 0; i < ra.size(); ++i) {
    if (ra[i].offsets != rb[i].offsets || ra[i].dims != rb[i].dims) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<TransferPlan> PlanTransfer(ArrayHandle source,
                                          const ArrayPlacement& from,
                                          ArrayHandle destination,
                                          const ArrayPlacement& to,
                                          const Topology& topology,
                                          uint64_t* next_transfer_id) {
  if (!from.global_shape.IsArray() ||
      !from.global_shape.Compatible(to.global_shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot copy an array of shape ", from.global_shape.ToString(false),
        " into one of shape ", to.global_shape.ToString(false)));
  }
  for (DeviceId device : from.devices) {
    CW_RETURN_IF_ERROR(topology.ValidateDevice(device));
  }
  for (DeviceId device : to.devices) {
    CW_RETURN_IF_ERROR(topology.ValidateDevice(device));
  }
  CW_ASSIGN_OR_RETURN(std::vector<hlo::ShardRegion> sources, RegionsOf(from));
  CW_ASSIGN_OR_RETURN(std::vector<hlo::ShardRegion> targets, RegionsOf(to));
  // Source shards grouped by tile (replicas hold the same region).
  std::map<std::vector<int64_t>, std::vector<int64_t>> tiles;
  for (size_t i = 0; i < sources.size(); ++i) {
    tiles[sources[i].offsets].push_back(static_cast<int64_t>(i));
  }
  const int64_t width = hlo::ByteWidth(to.global_shape.type());
  TransferPlan plan;
  for (size_t j = 0; j < targets.size(); ++j) {
    const hlo::ShardRegion& target = targets[j];
    const DeviceId target_device = to.devices[j];
    const HostId target_host = topology.HostOf(target_device);
    const BufferId target_buffer{destination, static_cast<int64_t>(j)};
    const GlobalBox wanted = ValidBox(target);
    ReceiveSpec receive;
    receive.device = target_device;
    receive.buffer = target_buffer;
    receive.shape = hlo::Shape(to.global_shape.type(), target.dims);
    receive.zero_fill = PaddingBoxes(target.dims, target.valid);
    std::vector<std::pair<HostId, SendSpec>> sends;
    for (const auto& [offsets, replicas] : tiles) {
      GlobalBox overlap;
      if (!Intersect(ValidBox(sources[replicas[0]]), wanted, &overlap)) {
        continue;
      }
      // The replica closest to the destination.
      int64_t chosen = replicas[0];
      int best = 0;
      for (int64_t replica : replicas) {
        const DeviceId device = from.devices[replica];
        const int score = device == target_device                        ? 2
                          : topology.HostOf(device) == target_host ? 1
                                                                   : 0;
        if (score > best) {
          best = score;
          chosen = replica;
        }
      }
      const hlo::ShardRegion& tile = sources[chosen];
      const DeviceId source_device = from.devices[chosen];
      SendSpec send;
      send.transfer_id = (*next_transfer_id)++;
      send.device = source_device;
      send.source = BufferId{source, chosen};
      send.region = Box{Minus(overlap.offsets, tile.offsets), overlap.dims};
      send.destination_host = target_host;
      send.destination_device = target_device;
      send.destination = target_buffer;
      send.destination_offsets = Minus(overlap.offsets, target.offsets);
      plan.bytes += overlap.ElementCount() * width;
      receive.pieces.push_back(PieceOrigin{
          send.transfer_id, source_device, topology.HostOf(source_device),
          absl::StrCat("array ", source.value(), " shard ", chosen, " on ",
                       DeviceName(topology, source_device))});
      sends.emplace_back(topology.HostOf(source_device), std::move(send));
    }
    // One piece that is the whole buffer on both sides moves without a
    // copy.
    if (sends.size() == 1 && receive.zero_fill.empty()) {
      SendSpec& send = sends[0].second;
      const hlo::ShardRegion& tile = sources[send.source.shard];
      if (send.region.dims == target.dims && tile.dims == target.dims) {
        send.whole = true;
        receive.whole = true;
      }
    }
    plan.receives.emplace_back(target_host, std::move(receive));
    for (auto& send : sends) plan.sends.push_back(std::move(send));
  }
  return plan;
}

absl::StatusOr<TransferPlan> PlanAssembly(
    const std::vector<AssemblyPiece>& pieces, ArrayHandle destination,
    const ArrayPlacement& to, const Topology& topology,
    uint64_t* next_transfer_id) {
  CW_ASSIGN_OR_RETURN(std::vector<hlo::ShardRegion> targets, RegionsOf(to));
  if (pieces.size() != targets.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("an assembly of ", pieces.size(),
                     " piece(s) into an array of ", targets.size(), " shards"));
  }
  const int64_t width = hlo::ByteWidth(to.global_shape.type());
  TransferPlan plan;
  for (size_t j = 0; j < targets.size(); ++j) {
    const hlo::ShardRegion& target = targets[j];
    const AssemblyPiece& piece = pieces[j];
    CW_RETURN_IF_ERROR(topology.ValidateDevice(piece.device));
    CW_RETURN_IF_ERROR(topology.ValidateDevice(to.devices[j]));
    if (piece.region.valid != target.valid ||
        piece.region.dims.size() != target.dims.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "piece ", j, " holds ",
          hlo::Shape(to.global_shape.type(), piece.region.valid).ToString(false),
          "; shard ", j, " of the assembled array is ",
          hlo::Shape(to.global_shape.type(), target.valid).ToString(false)));
    }
    const DeviceId target_device = to.devices[j];
    const HostId target_host = topology.HostOf(target_device);
    SendSpec send;
    send.transfer_id = (*next_transfer_id)++;
    send.device = piece.device;
    send.source = piece.buffer;
    send.region = Box{std::vector<int64_t>(target.valid.size(), 0), target.valid};
    send.destination_host = target_host;
    send.destination_device = target_device;
    send.destination = BufferId{destination, static_cast<int64_t>(j)};
    send.destination_offsets.assign(target.valid.size(), 0);
    ReceiveSpec receive;
    receive.device = target_device;
    receive.buffer = send.destination;
    receive.shape = hlo::Shape(to.global_shape.type(), target.dims);
    receive.zero_fill = PaddingBoxes(target.dims, target.valid);
    receive.pieces.push_back(PieceOrigin{
        send.transfer_id, piece.device, topology.HostOf(piece.device),
        absl::StrCat("array ", piece.buffer.array.value(), " shard ",
                     piece.buffer.shard, " on ",
                     DeviceName(topology, piece.device))});
    // The whole buffer on both sides moves without a copy.
    if (piece.region.dims == target.dims && target.valid == target.dims) {
      send.whole = true;
      receive.whole = true;
    }
    int64_t elements = 1;
    for (int64_t d : target.valid) elements *= d;
    plan.bytes += elements * width;
    plan.receives.emplace_back(target_host, std::move(receive));
    plan.sends.emplace_back(topology.HostOf(piece.device), std::move(send));
  }
  return plan;
}

}  // namespace causeway::head
