#include "causeway/hlo/npy.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/memory_account.h"
#include "causeway/base/status.h"

namespace causeway::hlo {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// Most elements one array may have (matches the HLO parser's bound).
constexpr int64_t kMaxElements = int64_t{1} << 40;

struct DescrEntry {
  const char* descr;
  PrimitiveType type;
};
// What we write, first for each type; extra spellings we accept after.
constexpr DescrEntry kDescrs[] = {
    {"|b1", PrimitiveType::kPred},
    {"|i1", PrimitiveType::kS8},
    {"<i2", PrimitiveType::kS16},
    {"<i4", PrimitiveType::kS32},
    {"<i8", PrimitiveType::kS64},
    {"|u1", PrimitiveType::kU8},
    {"<u2", PrimitiveType::kU16},
    {"<u4", PrimitiveType::kU32},
    {"<u8", PrimitiveType::kU64},
    {"<f2", PrimitiveType::kF16},
    {"<f4", PrimitiveType::kF32},
    {"<f8", PrimitiveType::kF64},
    {"<V2", PrimitiveType::kBF16},
    {"<c8", PrimitiveType::kC64},
    {"<c16", PrimitiveType::kC128},
    // numpy's spelling of ml_dtypes.float8_e5m2; the other 1-byte
    // ml_dtypes types are all '<V1' (OneByteOpaqueType).
    {"<f1", PrimitiveType::kF8E5M2},
    // Accepted spellings numpy may also produce.
    {"<b1", PrimitiveType::kPred},
    {"<i1", PrimitiveType::kS8},
    {"<u1", PrimitiveType::kU8},
    {"|V2", PrimitiveType::kBF16},
    {"=b1", PrimitiveType::kPred},
};

std::string Name(std::string_view name) { return std::string(name); }

// The types numpy writes as '<V1': every 1-byte ml_dtypes type but
// float8_e5m2. Such a file does not say which it holds.
bool IsOpaqueOneByteType(PrimitiveType type) {
  return (IsMinifloat(type) && type != PrimitiveType::kF8E5M2) ||
         IsSubByteInteger(type);
}

absl::Status Malformed(std::string_view name, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(Name(name), ": not a valid .npy file: ", Name(what)));
}

// A tiny reader for the Python dict literal in the header:
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  struct Header {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<int64_t>> shape;
  };

  absl::StatusOr<Header> Parse() {
    Header header;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      CW_ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after a key");
      SkipSpace();
      if (key == "descr") {
        CW_ASSIGN_OR_RETURN(std::string descr, ParseString());
        header.descr = std::move(descr);
      } else if (key == "fortran_order") {
        CW_ASSIGN_OR_RETURN(bool value, ParseBool());
        header.fortran_order = value;
      } else if (key == "shape") {
        CW_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ParseShape());
        header.shape = std::move(shape);
      } else {
        return Error(absl::StrCat("unexpected key '", key, "'"));
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("text after the header dict");
    return header;
  }

 private:
  absl::Status Error(std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("header: ", Name(what), " at offset ", pos_));
  }
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }
  absl::StatusOr<std::string> ParseString() {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Error("expected a quoted string");
    }
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return Error("unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }
  absl::StatusOr<bool> ParseBool() {
    if (ConsumeWord("True")) return true;
    if (ConsumeWord("False")) return false;
    return Error("expected True or False");
  }
  absl::StatusOr<std::vector<int64_t>> ParseShape() {
    std::vector<int64_t> dims;
    if (!Consume('(')) return Error("expected '(' for the shape");
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
        return Error("expected a dimension size");
      }
      int64_t value = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        value = value * 10 + (text_[pos_++] - '0');
        if (value > kMaxElements) return Error("dimension too large");
      }
      // Python 2 era files may write longs as "3L".
      Consume('L');
      dims.push_back(value);
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume(')')) break;
      return Error("expected ',' or ')' in the shape");
    }
    return dims;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

uint32_t ReadLittleEndian(std::string_view bytes, size_t offset, size_t width) {
  uint32_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    value |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[offset + i]))
             << (8 * i);
  }
  return value;
}

}  // namespace

absl::StatusOr<std::string> NpyDescr(PrimitiveType type) {
  if (IsOpaqueOneByteType(type)) return std::string("<V1");
  for (const DescrEntry& entry : kDescrs) {
    if (entry.type == type) return std::string(entry.descr);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "no .npy dtype for ", Name(PrimitiveTypeName(type)), " values"));
}

namespace {

// Where the header of a .npy file lies, from its first bytes (at least
// kMagicSize + 4; 12 for versions 2 and 3): checked magic and version.
struct HeaderExtent {
  size_t offset = 0;  // Of the header dict.
  size_t length = 0;
};

absl::StatusOr<HeaderExtent> ReadHeaderExtent(std::string_view bytes,
                                              std::string_view name) {
  if (bytes.size() < kMagicSize + 4 ||
      bytes.substr(0, kMagicSize) != std::string_view(kMagic, kMagicSize)) {
    return Malformed(name, "missing the \\x93NUMPY magic");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  HeaderExtent extent;
  if (major == 1) {
    extent.length = ReadLittleEndian(bytes, 8, 2);
    extent.offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Malformed(name, "truncated header length");
    extent.length = ReadLittleEndian(bytes, 8, 4);
    extent.offset = 12;
  } else {
    return Malformed(
        name, absl::StrCat("unsupported format version ", major, ".",
                           static_cast<int>(static_cast<uint8_t>(bytes[7]))));
  }
  if (extent.length > static_cast<size_t>(kMaxNpyHeaderBytes)) {
    return Malformed(name, absl::StrCat("header of ", extent.length,
                                        " bytes is larger than the limit of ",
                                        kMaxNpyHeaderBytes));
  }
  return extent;
}

// What the header says: the array's type and dims, and how many data bytes
// follow it.
struct ArrayLayout {
  PrimitiveType type = PrimitiveType::kInvalid;
  std::vector<int64_t> dims;
  int64_t elements = 0;
  int64_t data_bytes = 0;
};

absl::StatusOr<ArrayLayout> ParseHeader(
    std::string_view header, std::string_view name,
    std::optional<PrimitiveType> expected_type) {
  HeaderParser parser(header);
  absl::StatusOr<HeaderParser::Header> parsed = parser.Parse();
  if (!parsed.ok()) {
    return Malformed(name, std::string(parsed.status().message()));
  }
  if (!parsed->descr || !parsed->fortran_order || !parsed->shape) {
    return Malformed(name,
                     "the header lacks one of 'descr', 'fortran_order', "
                     "'shape'");
  }
  std::optional<PrimitiveType> type;
  for (const DescrEntry& entry : kDescrs) {
    if (*parsed->descr == entry.descr) {
      type = entry.type;
      break;
    }
  }
  if (!type && (*parsed->descr == "<V1" || *parsed->descr == "|V1")) {
    if (!expected_type.has_value() || !IsOpaqueOneByteType(*expected_type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Name(name), ": dtype '", *parsed->descr,
          "' is how numpy writes every 1-byte ml_dtypes type (float8_*, "
          "float4_e2m1fn, int4, uint4, int2, uint2), so the file does not "
          "say which it holds",
          expected_type.has_value()
              ? absl::StrCat("; ", Name(PrimitiveTypeName(*expected_type)),
                             " was expected")
              : std::string("; it can only be read where the program's "
                            "type is known")));
    }
    type = *expected_type;
  }
  if (!type) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(name), ": unsupported dtype '", *parsed->descr,
        "' (supported: little-endian bool, int8-64, uint8-64, float16/32/64, "
        "complex64/128, bfloat16 as '<V2', float8_e5m2 as '<f1' and the "
        "other 1-byte ml_dtypes types as '<V1')"));
  }
  ArrayLayout layout;
  layout.type = *type;
  layout.dims = *parsed->shape;
  layout.elements = 1;
  for (int64_t d : layout.dims) {
    if (d != 0 && layout.elements > kMaxElements / d) {
      return Malformed(name, "the shape has too many elements");
    }
    layout.elements *= d;
  }
  if (*parsed->fortran_order && layout.dims.size() > 1 && layout.elements > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(name),
        ": Fortran-order arrays are not supported; save a C-order array "
        "(np.ascontiguousarray(x))"));
  }
  layout.data_bytes = layout.elements * ByteWidth(layout.type);
  return layout;
}

std::string DataSizeText(const ArrayLayout& layout, std::string_view descr) {
  return absl::StrCat("shape (", absl::StrJoin(layout.dims, ", "), ") of ",
                      Name(descr), " needs ", layout.data_bytes, " data bytes");
}

// Normalises any non-zero pred byte to true, and keeps only the low bits
// of a sub-byte integer (ml_dtypes reads only those).
void NormaliseBytes(Literal& literal, const ArrayLayout& layout) {
  if (layout.type == PrimitiveType::kPred) {
    uint8_t* data = static_cast<uint8_t*>(literal.mutable_untyped_data());
    for (int64_t i = 0; i < layout.elements; ++i) {
      data[i] = data[i] != 0 ? 1 : 0;
    }
    return;
  }
  if (!IsSubByteInteger(layout.type)) return;
  const uint8_t mask =
      static_cast<uint8_t>((1u << BitWidth(layout.type)) - 1);
  uint8_t* data = static_cast<uint8_t*>(literal.mutable_untyped_data());
  for (int64_t i = 0; i < layout.elements; ++i) data[i] &= mask;
}

}  // namespace

absl::StatusOr<Literal> ParseNpy(std::string_view bytes,
                                 std::string_view name,
                                 std::optional<PrimitiveType> expected_type) {
  CW_ASSIGN_OR_RETURN(HeaderExtent extent, ReadHeaderExtent(bytes, name));
  if (bytes.size() < extent.offset + extent.length) {
    return Malformed(name, "the file ends inside the header");
  }
  CW_ASSIGN_OR_RETURN(
      ArrayLayout layout,
      ParseHeader(bytes.substr(extent.offset, extent.length), name,
                  expected_type));
  const size_t data_offset = extent.offset + extent.length;
  const int64_t actual = static_cast<int64_t>(bytes.size() - data_offset);
  if (actual != layout.data_bytes) {
    return Malformed(
        name,
        absl::StrCat(DataSizeText(layout, NpyDescr(layout.type).value_or("?")),
                     ", the file has ", actual));
  }
  Literal literal(Shape(layout.type, layout.dims));
  if (layout.data_bytes > 0) {
    std::memcpy(literal.mutable_untyped_data(), bytes.data() + data_offset,
                static_cast<size_t>(layout.data_bytes));
  }
  NormaliseBytes(literal, layout);
  return literal;
}

absl::StatusOr<Literal> ReadNpy(const std::string& path,
                                std::optional<PrimitiveType> expected) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a directory, not a .npy file"));
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  // Reads at most `n` more bytes onto `bytes`; false at the end of input.
  auto read = [&](std::string& bytes, size_t n) {
    const size_t had = bytes.size();
    bytes.resize(had + n);
    file.read(bytes.data() + had, static_cast<std::streamsize>(n));
    bytes.resize(had + static_cast<size_t>(file.gcount()));
    return bytes.size() == had + n;
  };
  // The header is checked before anything else is read, and exactly the
  // bytes it declares are read after it: neither /dev/zero nor an endless
  // pipe is read on and on.
  std::string prefix;
  read(prefix, 12);
  if (file.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": read failed"));
  }
  CW_ASSIGN_OR_RETURN(HeaderExtent extent, ReadHeaderExtent(prefix, path));
  const size_t header_end = extent.offset + extent.length;
  if (header_end > prefix.size() && !read(prefix, header_end - prefix.size())) {
    return Malformed(path, "the file ends inside the header");
  }
  CW_ASSIGN_OR_RETURN(
      ArrayLayout layout,
      ParseHeader(std::string_view(prefix).substr(extent.offset, extent.length),
                  path, expected));
  const std::string descr = NpyDescr(layout.type).value_or("?");
  if (layout.data_bytes > PhysicalMemoryBytes()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": ", DataSizeText(layout, descr),
                     ", more than this machine's memory (",
                     PhysicalMemoryBytes(), " bytes)"));
  }
  // Bytes read past the header with the first read belong to the data.
  const std::string_view early =
      std::string_view(prefix).substr(std::min(header_end, prefix.size()));
  if (static_cast<int64_t>(early.size()) > layout.data_bytes) {
    return Malformed(
        path, absl::StrCat(DataSizeText(layout, descr), ", the file has more"));
  }
  Literal literal(Shape(layout.type, layout.dims));
  if (layout.data_bytes > 0) {
    char* data = static_cast<char*>(literal.mutable_untyped_data());
    std::memcpy(data, early.data(), early.size());
    const int64_t rest = layout.data_bytes - static_cast<int64_t>(early.size());
    file.read(data + early.size(), static_cast<std::streamsize>(rest));
    if (file.gcount() != rest) {
      if (file.bad()) {
        return absl::DataLossError(absl::StrCat(path, ": read failed"));
      }
      return Malformed(
          path, absl::StrCat(DataSizeText(layout, descr), ", the file has ",
                             early.size() + file.gcount()));
    }
  }
  if (file.peek() != std::char_traits<char>::eof()) {
    return Malformed(
        path, absl::StrCat(DataSizeText(layout, descr), ", the file has more"));
  }
  NormaliseBytes(literal, layout);
  return literal;
}

absl::StatusOr<std::string> SerializeNpy(const Literal& literal) {
  const Shape& shape = literal.shape();
  if (!shape.IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "only arrays can be written as .npy, not ", shape.ToString(false)));
  }
  CW_ASSIGN_OR_RETURN(std::string descr, NpyDescr(shape.type()));
  std::string dims;
  for (int64_t d : shape.dims()) absl::StrAppend(&dims, d, ", ");
  if (shape.rank() > 1) dims.resize(dims.size() - 2);   // (2, 3)
  if (shape.rank() == 1) dims.resize(dims.size() - 1);  // (3,)
  std::string dict =
      absl::StrCat("{'descr': '", descr,
                   "', 'fortran_order': False, 'shape': (", dims, "), }");
  // Pad with spaces and a newline so the data starts 64-byte aligned.
  size_t prefix = kMagicSize + 2 + 2;
  int major = 1;
  if (dict.size() + 1 + 64 > 65535) {
    major = 2;
    prefix = kMagicSize + 2 + 4;
  }
  const size_t padded = ((prefix + dict.size() + 1 + 63) / 64) * 64;
  dict.append(padded - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicSize);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  const uint32_t len = static_cast<uint32_t>(dict.size());
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) {
    out.push_back(static_cast<char>((len >> (8 * i)) & 0xFF));
  }
  out += dict;
  const size_t data_offset = out.size();
  out.resize(data_offset + static_cast<size_t>(literal.size_bytes()));
  if (literal.size_bytes() > 0) {
    std::memcpy(out.data() + data_offset, literal.untyped_data(),
                static_cast<size_t>(literal.size_bytes()));
  }
  return out;
}

absl::Status WriteNpy(const std::string& path, const Literal& literal) {
  CW_ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(literal));
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot create: ", std::strerror(errno)));
  }
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) {
    return absl::DataLossError(absl::StrCat(path, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace causeway::hlo
