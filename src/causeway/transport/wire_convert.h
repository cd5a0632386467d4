// Conversions between the channel interfaces' plain structs
// (session_channel.h, control_channel.h) and the wire protocol's messages
// (proto/*.proto), in one place.
//
// ToWire never fails; it fills a fresh message (repeated fields are
// appended to). FromWire validates every field on arrival, since the
// other side is another process: ids in range of their type, shapes and
// shardings well formed, counts, sizes and string lengths bounded by
// WireLimits. An error is InvalidArgument naming the field by its path from
// the message it came in, e.g.
//   "SessionRequest.execute.outputs[2].global_shape.dims[1]: -5 is negative"
// so that the request (or the session) fails and the process goes on.
// Whether an id names something that exists (a device of the topology, a
// handle of the session) is for the receiver's logic to say: it knows.
//
// Values (array bytes) larger than kInlineValueBytes never ride a message
// of their own: they travel in chunks on the bulk calls (ValueHeader, then
// Chunks of at most kChunkBytes), written by WriteValueStream
// (ForEachValueChunk) and read back by ValueAssembler. Smaller ones come
// whole inside an answer (InlineValue).
#ifndef CAUSEWAY_TRANSPORT_WIRE_CONVERT_H_
#define CAUSEWAY_TRANSPORT_WIRE_CONVERT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"
#include "causeway/trace/events.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/proto/common.pb.h"
#include "causeway/transport/proto/session.pb.h"
#include "causeway/transport/proto/worker.pb.h"
#include "causeway/transport/session_channel.h"
#include "causeway/transport/topology.h"
#include "causeway/transport/wire_names.h"

namespace causeway::transport {

// Bounds on what a peer may send. The defaults admit anything a real
// cluster sends and refuse what would make the receiver allocate or loop
// without bound.
struct WireLimits {
  int64_t max_rank = 64;
  int64_t max_tuple_elements = 1 << 16;
  int64_t max_tuple_depth = 16;
  // One array value (a global upload, a shard).
  int64_t max_value_bytes = int64_t{64} << 30;
  // Entries of any one repeated field (ops of a graph, launches of a batch,
  // buffers, devices, ...).
  int64_t max_entries = 1 << 20;
  // Names, descriptions, sharding text, status messages, status reports.
  int64_t max_string_bytes = int64_t{16} << 20;
  // HLO text of one program.
  int64_t max_program_bytes = int64_t{256} << 20;
};

// The size of one chunk of a value on a bulk call (as IFRT Proxy).
inline constexpr int64_t kChunkBytes = int64_t{1} << 20;

// A field's position in a message, for errors; built on the stack as the
// conversion descends, turned into text only when something is wrong.
class FieldPath {
 public:
  explicit FieldPath(std::string_view root) : root_(root) {}
  FieldPath(const FieldPath& parent, std::string_view field,
            int64_t index = -1)
      : parent_(&parent), root_(field), index_(index) {}
  FieldPath Field(std::string_view name) const { return FieldPath(*this, name); }
  FieldPath Index(std::string_view name, int64_t index) const {
    return FieldPath(*this, name, index);
  }
  std::string ToString() const;
  // InvalidArgument "<path>: <message>".
  absl::Status Invalid(std::string_view message) const;

 private:
  const FieldPath* parent_ = nullptr;
  std::string_view root_;
  int64_t index_ = -1;
};

// --- Shared messages. ---

void ToWire(const absl::Status& status, wire::Status* out);
// Sets `*out` to the status the message carries (unknown codes become
// UNKNOWN); InvalidArgument if the message is malformed (too long, an OK
// status with a message).
absl::Status StatusFromWire(const wire::Status& status,
                            const WireLimits& limits, const FieldPath& path,
                            absl::Status* out);

void ToWire(const hlo::Shape& shape, wire::Shape* out);
// Any well-formed shape: arrays (dims >= 0, element count and byte size
// within limits, a layout that is a permutation), tuples (bounded size and
// depth) and tokens.
absl::StatusOr<hlo::Shape> FromWire(const wire::Shape& shape,
                                    const WireLimits& limits,
                                    const FieldPath& path);
// An array shape only.
absl::StatusOr<hlo::Shape> ArrayShapeFromWire(const wire::Shape& shape,
                                              const WireLimits& limits,
                                              const FieldPath& path);

// Shardings travel as XLA's text and are parsed on arrival.
std::string ShardingToWire(const hlo::Sharding& sharding);
absl::StatusOr<hlo::Sharding> ShardingFromWire(std::string_view text,
                                               const WireLimits& limits,
                                               const FieldPath& path);

// Bounded strings.
absl::StatusOr<std::string> StringFromWire(const std::string& text,
                                           int64_t max_bytes,
                                           const FieldPath& path);

// --- Values on bulk calls. ---

// The header of `value` (an array literal).
wire::ValueHeader ValueHeaderOf(const hlo::Literal& value);
// Calls `chunk` with each piece of `value`'s bytes, in order, at most
// kChunkBytes each (one empty call for a zero-byte value); stops at the
// first error `chunk` returns and returns it.
absl::Status ForEachValueChunk(
    const hlo::Literal& value,
    absl::FunctionRef<absl::Status(std::string_view bytes)> chunk);

// Values up to this size travel whole inside an answer (InlineValue)
// instead of on a bulk call of their own: a scalar fetch then costs one
// message, not a call's setup.
inline constexpr int64_t kInlineValueBytes = int64_t{64} << 10;
bool TravelsInline(const hlo::Literal& value);
void ToWire(const hlo::Literal& value, wire::InlineValue* out);
absl::StatusOr<hlo::Literal> FromWire(const wire::InlineValue& value,
                                      const WireLimits& limits,
                                      const FieldPath& path);

// Writes one value stream on a bulk call: `message`, which holds the
// stream's header in its `part` oneof, then the same message with each
// chunk of `value` in place of the header. `writer` is a gRPC
// ClientWriter or ServerWriter of `Message`. False as soon as a write
// fails (the call broke; its Finish, or the handler's caller, says why).
template <typename Writer, typename Message>
bool WriteValueStream(Writer& writer, Message& message,
                      const hlo::Literal& value) {
  if (!writer.Write(message)) return false;
  return ForEachValueChunk(
             value,
             [&](std::string_view bytes) {
               message.mutable_chunk()->set_data(bytes.data(), bytes.size());
               return writer.Write(message)
                          ? absl::OkStatus()
                          : absl::UnavailableError("the stream broke");
             })
      .ok();
}

// Rebuilds a value from its header and chunks. Not thread-safe.
class ValueAssembler {
 public:
  // InvalidArgument if the header is malformed (not an array shape, a byte
  // size that does not match the shape or exceeds the limit). Nothing is
  // allocated before the header is validated.
  static absl::StatusOr<ValueAssembler> Create(const wire::ValueHeader& header,
                                               const WireLimits& limits,
                                               const FieldPath& path);
  // Appends bytes; InvalidArgument if they run past the declared size.
  absl::Status Append(std::string_view bytes);
  // The value; DataLoss if fewer bytes came than the header declared.
  absl::StatusOr<hlo::Literal> Finish() &&;

  int64_t expected_bytes() const { return expected_; }

 private:
  ValueAssembler(hlo::Literal value, int64_t expected)
      : value_(std::move(value)), expected_(expected) {}
  hlo::Literal value_;
  int64_t expected_ = 0;
  int64_t received_ = 0;
};

// --- Session protocol (client <-> head). ---

void ToWire(const OpenSessionRequest& request, wire::OpenSession* out);
absl::StatusOr<OpenSessionRequest> FromWire(const wire::OpenSession& request,
                                            const WireLimits& limits,
                                            const FieldPath& path);

void ToWire(const SliceRequest& request, wire::SliceRequest* out);
absl::StatusOr<SliceRequest> FromWire(const wire::SliceRequest& request,
                                      const WireLimits& limits,
                                      const FieldPath& path);

void ToWire(const SliceInfo& info, wire::SliceInfo* out);
absl::StatusOr<SliceInfo> FromWire(const wire::SliceInfo& info,
                                   const WireLimits& limits,
                                   const FieldPath& path);

void ToWire(const ArraySpec& spec, wire::ArraySpec* out);
absl::StatusOr<ArraySpec> FromWire(const wire::ArraySpec& spec,
                                   const WireLimits& limits,
                                   const FieldPath& path);

void ToWire(const CompileRequest& request, wire::CompileRequest* out);
absl::StatusOr<CompileRequest> FromWire(const wire::CompileRequest& request,
                                        const WireLimits& limits,
                                        const FieldPath& path);

void ToWire(const CompileInfo& info, wire::CompileInfo* out);
absl::StatusOr<CompileInfo> FromWire(const wire::CompileInfo& info,
                                     const WireLimits& limits,
                                     const FieldPath& path);

void ToWire(const ExecuteOp& op, wire::ExecuteOp* out);
absl::StatusOr<ExecuteOp> FromWire(const wire::ExecuteOp& op,
                                   const WireLimits& limits,
                                   const FieldPath& path);

void ToWire(const CopyOp& op, wire::CopyOp* out);
absl::StatusOr<CopyOp> FromWire(const wire::CopyOp& op,
                                const WireLimits& limits,
                                const FieldPath& path);

void ToWire(const ProgramGraph& graph, wire::ProgramGraph* out);
absl::StatusOr<ProgramGraph> FromWire(const wire::ProgramGraph& graph,
                                      const WireLimits& limits,
                                      const FieldPath& path);

void ToWire(const StatusReport& report, wire::StatusReport* out);
absl::StatusOr<StatusReport> FromWire(const wire::StatusReport& report,
                                      const WireLimits& limits,
                                      const FieldPath& path);

void ToWire(const DeviceInfo& device, wire::DeviceInfo* out);
absl::StatusOr<DeviceInfo> FromWire(const wire::DeviceInfo& device,
                                    const WireLimits& limits,
                                    const FieldPath& path);

// Hosts in id order; FromWire rebuilds the same snapshot (the same ids),
// refusing hosts out of order, bad specs and unknown states.
void ToWire(const Topology& topology, wire::ClusterTopology* out);
absl::StatusOr<Topology> FromWire(const wire::ClusterTopology& topology,
                                  const WireLimits& limits,
                                  const FieldPath& path);

// --- Worker protocol (worker <-> head). ---

void ToWire(const BufferId& buffer, wire::BufferId* out);
absl::StatusOr<BufferId> FromWire(const wire::BufferId& buffer,
                                  const WireLimits& limits,
                                  const FieldPath& path);

void ToWire(const DeviceBuffer& buffer, wire::DeviceBuffer* out);
absl::StatusOr<DeviceBuffer> FromWire(const wire::DeviceBuffer& buffer,
                                      const WireLimits& limits,
                                      const FieldPath& path);

void ToWire(const Box& box, wire::Box* out);
absl::StatusOr<Box> FromWire(const wire::Box& box, const WireLimits& limits,
                             const FieldPath& path);

// The module travels as its text (the worker parses it again).
void ToWire(const LoadProgramRequest& request, wire::LoadProgram* out);
absl::StatusOr<LoadProgramRequest> FromWire(const wire::LoadProgram& request,
                                            const WireLimits& limits,
                                            const FieldPath& path);

void ToWire(const ReceiveSpec& spec, wire::ReceiveSpec* out);
absl::StatusOr<ReceiveSpec> FromWire(const wire::ReceiveSpec& spec,
                                     const WireLimits& limits,
                                     const FieldPath& path);

// Names (the program's, the session's, each input's producer) travel by
// number (wire_names.h): ToWire defines the ones `names` has not sent in
// the message being written. FromWire resolves them; a name that is not
// defined does not fail the conversion: the launch comes back abandoned
// with that InvalidArgument (its outputs fail with it on the worker).
void ToWire(const LaunchOp& op, NameEncoder& names, wire::LaunchOp* out);
absl::StatusOr<LaunchOp> FromWire(const wire::LaunchOp& op,
                                  const NameDecoder& names,
                                  const WireLimits& limits,
                                  const FieldPath& path);

void ToWire(const SendSpec& spec, wire::SendSpec* out);
absl::StatusOr<SendSpec> FromWire(const wire::SendSpec& spec,
                                  const WireLimits& limits,
                                  const FieldPath& path);

// One message: ToWire begins it on `names` (its definitions go in
// `out->names`); FromWire applies those definitions to `names` first.
void ToWire(const WorkerBatch& batch, NameEncoder& names,
            wire::WorkerBatch* out);
absl::StatusOr<WorkerBatch> FromWire(const wire::WorkerBatch& batch,
                                     NameDecoder& names,
                                     const WireLimits& limits,
                                     const FieldPath& path);

void ToWire(const OpStatus& op, wire::OpStatus* out);
absl::StatusOr<OpStatus> FromWire(const wire::OpStatus& op,
                                  const WireLimits& limits,
                                  const FieldPath& path);

void ToWire(const WorkerStatus& status, wire::WorkerStatus* out);
absl::StatusOr<WorkerStatus> FromWire(const wire::WorkerStatus& status,
                                      const WireLimits& limits,
                                      const FieldPath& path);

void ToWire(const MembershipUpdate& update, wire::MembershipUpdate* out);
absl::StatusOr<MembershipUpdate> FromWire(const wire::MembershipUpdate& update,
                                          const WireLimits& limits,
                                          const FieldPath& path);

// A worker's trace events, one message: times travel as Unix
// microseconds, the program's and session's names by number (ToWire
// begins the message on `names`). FromWire applies the message's
// definitions first; an event that names an undefined name is left out
// and counted in `*unnamed`; a malformed one is an error.
void ToWire(absl::Span<const trace::EventRecord> records, NameEncoder& names,
            wire::TraceEvents* out);
absl::StatusOr<std::vector<trace::EventRecord>> FromWire(
    const wire::TraceEvents& events, NameDecoder& names,
    const WireLimits& limits, const FieldPath& path, int64_t* unnamed);

// A piece that was not delivered. On a push_failed notice the receiver
// overrides `source_host` with the host whose stream it came on.
void ToWire(const UndeliveredPiece& piece, wire::UndeliveredPiece* out);
absl::StatusOr<UndeliveredPiece> FromWire(const wire::UndeliveredPiece& piece,
                                          const WireLimits& limits,
                                          const FieldPath& path);

// `done.host` is not on the wire: the receiver knows which worker's
// stream it came on and fills it in.
void ToWire(const OpDone& done, wire::OpDone* out);
absl::StatusOr<OpDone> FromWire(const wire::OpDone& done, HostId host,
                                const WireLimits& limits,
                                const FieldPath& path);

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_WIRE_CONVERT_H_
