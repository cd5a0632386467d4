// NumPy .npy files <-> Literals: how arrays enter and leave the `causeway`
// command.
//
// Supported: format versions 1.0, 2.0 and 3.0; little-endian C-order arrays
// of bool ('|b1'), int8..int64 ('|i1' '<i2' '<i4' '<i8'), uint8..uint64,
// float16/32/64 ('<f2' '<f4' '<f8'), complex64/128 ('<c8' '<c16'), and
// the ml_dtypes types as numpy writes them: bfloat16 as '<V2',
// float8_e5m2 as '<f1', and every other 1-byte one (float8_e4m3fn and the
// other float8 types, float4_e2m1fn, int4, uint4, int2, uint2) as '<V1'
// (read them back in Python with `.view(ml_dtypes.bfloat16)` and so on).
// A '<V1' file does not say which type it holds: the reader must be told
// (`expected`). Sub-byte integers are stored as ml_dtypes stores them,
// their bits in the low bits of a byte. Fortran order, big-endian data and
// other dtypes are refused with InvalidArgument naming the file and the
// problem.
//
// Thread-safe: the functions keep no state.
#ifndef CAUSEWAY_HLO_NPY_H_
#define CAUSEWAY_HLO_NPY_H_

#include <optional>
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
// machine's memory (ResourceExhausted). `expected` is the element type the
// caller wants; it decides only what a '<V1' file holds (a file of another
// dtype is read as it says, whatever `expected` is).
absl::StatusOr<Literal> ReadNpy(
    const std::string& path,
    std::optional<PrimitiveType> expected = std::nullopt);
// Writes `literal` (an array) as a .npy file, replacing any file there.
absl::Status WriteNpy(const std::string& path, const Literal& literal);

// The same on bytes in memory. `name` labels error messages.
absl::StatusOr<Literal> ParseNpy(
    std::string_view bytes, std::string_view name = "<memory>",
    std::optional<PrimitiveType> expected = std::nullopt);
absl::StatusOr<std::string> SerializeNpy(const Literal& literal);

// The descr string for `type` ("<f4"), or an error for tuple/token types.
absl::StatusOr<std::string> NpyDescr(PrimitiveType type);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_NPY_H_
