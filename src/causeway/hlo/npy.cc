#include "causeway/hlo/npy.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
    // Accepted spellings numpy may also produce.
    {"<b1", PrimitiveType::kPred},
    {"<i1", PrimitiveType::kS8},
    {"<u1", PrimitiveType::kU8},
    {"|V2", PrimitiveType::kBF16},
    {"=b1", PrimitiveType::kPred},
};

std::string Name(std::string_view name) { return std::string(name); }

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
  for (const DescrEntry& entry : kDescrs) {
    if (entry.type == type) return std::string(entry.descr);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "no .npy dtype for ", Name(PrimitiveTypeName(type)), " values"));
}

absl::StatusOr<Literal> ParseNpy(std::string_view bytes,
                                 std::string_view name) {
  if (bytes.size() < kMagicSize + 4 ||
      bytes.substr(0, kMagicSize) != std::string_view(kMagic, kMagicSize)) {
    return Malformed(name, "missing the \\x93NUMPY magic");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_offset = 0;
  size_t header_len = 0;
  if (major == 1) {
    header_len = ReadLittleEndian(bytes, 8, 2);
    header_offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Malformed(name, "truncated header length");
    header_len = ReadLittleEndian(bytes, 8, 4);
    header_offset = 12;
  } else {
    return Malformed(
        name, absl::StrCat("unsupported format version ", major, ".",
                           static_cast<int>(static_cast<uint8_t>(bytes[7]))));
  }
  if (header_len > static_cast<size_t>(kMaxNpyHeaderBytes)) {
    return Malformed(name, absl::StrCat("header of ", header_len,
                                        " bytes is larger than the limit of ",
                                        kMaxNpyHeaderBytes));
  }
  if (bytes.size() < header_offset + header_len) {
    return Malformed(name, "the file ends inside the header");
  }
  HeaderParser parser(bytes.substr(header_offset, header_len));
  absl::StatusOr<HeaderParser::Header> header = parser.Parse();
  if (!header.ok())
    return Malformed(name, std::string(header.status().message()));
  if (!header->descr || !header->fortran_order || !header->shape) {
    return Malformed(name,
                     "the header lacks one of 'descr', 'fortran_order', "
                     "'shape'");
  }
  std::optional<PrimitiveType> type;
  for (const DescrEntry& entry : kDescrs) {
    if (*header->descr == entry.descr) {
      type = entry.type;
      break;
    }
  }
  if (!type) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(name), ": unsupported dtype '", *header->descr,
        "' (supported: little-endian bool, int8-64, uint8-64, float16/32/64 "
        "and bfloat16 as '<V2')"));
  }
  const std::vector<int64_t>& dims = *header->shape;
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d != 0 && elements > kMaxElements / d) {
      return Malformed(name, "the shape has too many elements");
    }
    elements *= d;
  }
  if (*header->fortran_order && dims.size() > 1 && elements > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(name),
        ": Fortran-order arrays are not supported; save a C-order array "
        "(np.ascontiguousarray(x))"));
  }
  const size_t data_offset = header_offset + header_len;
  const int64_t expected = elements * ByteWidth(*type);
  const int64_t actual = static_cast<int64_t>(bytes.size() - data_offset);
  if (actual != expected) {
    return Malformed(name,
                     absl::StrCat("shape (", absl::StrJoin(dims, ", "), ") of ",
                                  *header->descr, " needs ", expected,
                                  " data bytes, the file has ", actual));
  }
  Literal literal(Shape(*type, dims));
  if (expected > 0) {
    std::memcpy(literal.mutable_untyped_data(), bytes.data() + data_offset,
                static_cast<size_t>(expected));
  }
  if (*type == PrimitiveType::kPred) {
    // Normalise any non-zero byte to true.
    uint8_t* data = static_cast<uint8_t*>(literal.mutable_untyped_data());
    for (int64_t i = 0; i < elements; ++i) data[i] = data[i] != 0 ? 1 : 0;
  }
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

absl::StatusOr<Literal> ReadNpy(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": read failed"));
  }
  return ParseNpy(contents.str(), path);
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
