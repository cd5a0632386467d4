// NumPy .npy files <-> Literals: how arrays enter and leave the `causeway`
// command.
//
// Supported: format versions 1.0, 2.0 and 3.0; little-endian C-order arrays
// of bool ('|b1'), int8..int64 ('|i1' '<i2' '<i4' '<i8'), uint8..uint64,
// float16/32/64 ('<f2' '<f4' '<f8'), and bfloat16 written as '<V2' (what
// numpy writes for an ml_dtypes.bfloat16 array; read it back in Python with
// `.view(ml_dtypes.bfloat16)`). Fortran order, big-endian data and other
// dtypes are refused with InvalidArgument naming the file and the problem.
//
// Thread-safe: the functions keep no state.
#ifndef CAUSEWAY_HLO_NPY_H_
#define CAUSEWAY_HLO_NPY_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "causeway/hlo/literal.h"

namespace causeway::hlo {

// Largest header accepted when reading (numpy itself writes < 1 KiB).
inline constexpr int64_t kMaxNpyHeaderBytes = 1 << 20;

// Reads a .npy file: the magic and header first, then exactly the data
// bytes the header declares, so that /dev/zero or an endless pipe is
// refused after a few bytes instead of read until memory runs out. Refused:
// a directory, bytes past the declared data, an array larger than this
// machine's memory (ResourceExhausted).
absl::StatusOr<Literal> ReadNpy(const std::string& path);
// Writes `literal` (an array) as a .npy file, replacing any file there.
absl::Status WriteNpy(const std::string& path, const Literal& literal);

// The same on bytes in memory. `name` labels error messages.
absl::StatusOr<Literal> ParseNpy(std::string_view bytes,
                                 std::string_view name = "<memory>");
absl::StatusOr<std::string> SerializeNpy(const Literal& literal);

// The descr string for `type` ("<f4"), or an error for tuple/token types.
absl::StatusOr<std::string> NpyDescr(PrimitiveType type);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_NPY_H_
