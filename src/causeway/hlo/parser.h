// HLO text parser: reads the text XLA prints (`HloModule::ToString()`,
// `compile().as_text()`, `*.after_optimizations.txt`) and hand-written HLO
// into the IR of ir.h.
//
// What it keeps: every attribute the runtime interprets lands in its
// Instruction field; every other attribute (metadata, backend_config,
// frontend_attributes, control-predecessors, ...) is kept as written in
// Instruction::raw_attributes, so printing round-trips it. Module header
// attributes other than num_partitions/replica_count go to
// Module::raw_attributes. The stack-frame index XLA prints between the
// header and the first computation (FileNames/FunctionNames/FileLocations/
// StackFrames) is kept as one Module raw attribute named "#stack_frames"
// whose text is the whole block; the printer writes it back as a block.
//
// Replica groups: explicit `{{0,1},{2,3}}`, `{}`, iota `[2,4]<=[4,2]T(1,0)`
// and the mesh-axes form newer XLA prints (`mesh['a'=2,'b'=4] {'a'}`, sub-axes
// `a:(2)2`, `, device_ids=(...)`) all expand into ReplicaGroups::groups; the
// iota and mesh forms also fill ReplicaGroups::iota (a mesh is an iota over
// its axes with the grouped axes transposed last), so a mesh form prints
// back as the equivalent iota form. Shardings drop their `metadata={...}`.
// Iota expansions are bounded (kMaxIotaDevices each, 2^24 ids per module).
//
// Unknown opcodes parse (Opcode::kUnknown, opcode_name kept) so that the
// verifier can refuse them by name and line; their attributes are all kept
// raw (except sharding). Errors are InvalidArgument with
// "line L:C: ..." messages. The parser never crashes, recurses at most
// kMaxNestingDepth deep, and refuses shapes of more than 2^40 elements.
//
// Thread-safe: the functions keep no state.
#ifndef CAUSEWAY_HLO_PARSER_H_
#define CAUSEWAY_HLO_PARSER_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "causeway/hlo/collective_groups.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/shape.h"

namespace causeway::hlo {

// Deepest nesting of tuples (shapes, literals, shardings) the parser accepts.
inline constexpr int kMaxNestingDepth = 256;
// Most elements one array shape may have.
inline constexpr int64_t kMaxElementCount = int64_t{1} << 40;
// Most devices an iota device list (sharding, replica groups) may expand to.
inline constexpr int64_t kMaxIotaDevices = kMaxIotaIds;

// Parses a whole module. If no computation is marked ENTRY, the last one is
// the entry. Instructions get unique ids in order of appearance.
absl::StatusOr<std::unique_ptr<Module>> ParseModule(std::string_view text);

// Parses one sharding, braces included: "{devices=[2,1]<=[2]}",
// "{replicated}", "{{maximal device=0}, {manual}}". Forms the runtime does
// not know come back as Sharding::Kind::kUnknown with the text kept.
absl::StatusOr<Sharding> ParseSharding(std::string_view text);

// Parses one shape: "f32[2,3]{1,0}", "(s32[], f32[4])", "token[]".
absl::StatusOr<Shape> ParseShape(std::string_view text);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_PARSER_H_
