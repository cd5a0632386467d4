// HLO text printer: writes a Module as text that ParseModule reads back
// into an equal module (ModulesEqual), in the form XLA prints (`%` names,
// layouts, constants in full, raw attributes as they were written).
//
// Thread-safe: the functions keep no state.
#ifndef CAUSEWAY_HLO_PRINTER_H_
#define CAUSEWAY_HLO_PRINTER_H_

#include <string>

#include "causeway/hlo/ir.h"

namespace causeway::hlo {

std::string PrintModule(const Module& module);
// One instruction line, without indentation: "%add.1 = f32[2]{0} add(%a, %b)".
std::string PrintInstruction(const Instruction& instruction);
// "{devices=[2,1]<=[2]}", "{replicated}", ...
std::string PrintSharding(const Sharding& sharding);
// A literal's values as `constant(...)` takes them: "3", "{1, 2}",
// "({1, 2}, 3)". Floats are printed so that they parse back bit-exactly.
std::string PrintLiteralValues(const Literal& literal);

// Structural equality: names, shapes (with layouts), operands and called
// computations by name, every attribute field, literals bit for bit, raw
// attributes. Ignores unique ids and source positions. On mismatch fills
// *diff (if non-null) with the first difference.
bool ModulesEqual(const Module& a, const Module& b,
                  std::string* diff = nullptr);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_PRINTER_H_
