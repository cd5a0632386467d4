// The typed loops behind the reduce kernel (EvalReduce, reduction.cc) for
// a reducer that is one binary op, over pieces of the input, so that the
// fused loop evaluator (fused_loop.h) can reduce a value chunk by chunk as
// it computes it instead of materialising it first. Each piece runs the
// kernel's own loop on it, so the bits are the kernel's.
//
// No shape checks: callers have checked the reduce as EvalReduce does.
// Pure functions; thread-safe.
#ifndef CAUSEWAY_EXEC_REDUCTION_H_
#define CAUSEWAY_EXEC_REDUCTION_H_

#include <cstdint>
#include <span>
#include <vector>

#include "causeway/hlo/ir.h"
#include "causeway/hlo/shape.h"

namespace causeway::exec {

// How the kernel walks a reduce's input (of `dims`, reducing the dims
// flagged in `reduced`), when that walk can be fed pieces in row-major
// order:
//  - kRows: the input is rows of `length` contiguous elements, each
//    reduced into one output element (output r is row r's);
//  - kColumns: the input is rows of `length` elements; output element j
//    combines element j of every row, row after row;
//  - kNone: another walk (reduced dims between kept ones).
struct ReduceWalk {
  enum Kind { kNone, kRows, kColumns };
  Kind kind = kNone;
  int64_t length = 0;
};
ReduceWalk ReduceWalkOf(const std::vector<int64_t>& dims,
                        const std::vector<bool>& reduced);

// Whether the kernel has a typed loop for reducer `op` on `type`.
bool HasTypedReducer(hlo::Opcode op, hlo::PrimitiveType type);

// kRows: out[r] = reduce(out[r], row r) for the `rows` rows of `length`
// elements at `in`, exactly as the kernel reduces each row.
void ReduceRowElements(hlo::Opcode op, hlo::PrimitiveType type,
                       const void* in, int64_t rows, int64_t length,
                       void* out);

// kColumns: for i in [0, n), out[(phase + i) % length] combined with in[i]
// (in that order), as the kernel steps through one row after another.
void ReduceColumnElements(hlo::Opcode op, hlo::PrimitiveType type,
                          const void* in, int64_t n, int64_t length,
                          int64_t phase, void* out);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_REDUCTION_H_
