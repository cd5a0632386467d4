#include "causeway/hlo/parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"
#include "causeway/base/string_view.h"
#include "causeway/hlo/collective_groups.h"
#include "causeway/hlo/float16.h"
#include "causeway/hlo/literal.h"

namespace causeway::hlo {
namespace {

constexpr int kMaxRank = 256;
constexpr int64_t kMaxExpandedDevicesPerModule = int64_t{1} << 24;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-' || c == '$';
}

bool IsNameStart(char c) { return IsNameChar(c) && c != '-'; }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Which interpreted attributes an opcode takes. Everything else is kept raw.
bool InterpretsAttribute(Opcode op, std::string_view name) {
  if (name == "sharding") return true;
  if (name == "dimensions") {
    switch (op) {
      case Opcode::kBroadcast:
      case Opcode::kTranspose:
      case Opcode::kReverse:
      case Opcode::kReduce:
      case Opcode::kConcatenate:
      case Opcode::kAllGather:
      case Opcode::kReduceScatter:
      case Opcode::kAllToAll:
      case Opcode::kSort:
      case Opcode::kMap:
        return true;
      default:
        return false;
    }
  }
  if (name == "slice") return op == Opcode::kSlice;
  if (name == "dynamic_slice_sizes") return op == Opcode::kDynamicSlice;
  if (name == "padding") return op == Opcode::kPad;
  if (name == "direction" || name == "type") return op == Opcode::kCompare;
  if (name == "lhs_batch_dims" || name == "lhs_contracting_dims" ||
      name == "rhs_batch_dims" || name == "rhs_contracting_dims") {
    return op == Opcode::kDot;
  }
  if (name == "window") {
    return op == Opcode::kConvolution || op == Opcode::kReduceWindow ||
           op == Opcode::kSelectAndScatter;
  }
  if (name == "dim_labels" || name == "feature_group_count" ||
      name == "batch_group_count") {
    return op == Opcode::kConvolution;
  }
  if (name == "offset_dims" || name == "collapsed_slice_dims" ||
      name == "start_index_map" || name == "operand_batching_dims" ||
      name == "start_indices_batching_dims" || name == "slice_sizes") {
    return op == Opcode::kGather;
  }
  if (name == "update_window_dims" || name == "inserted_window_dims" ||
      name == "scatter_dims_to_operand_dims" || name == "input_batching_dims" ||
      name == "scatter_indices_batching_dims" || name == "unique_indices") {
    return op == Opcode::kScatter;
  }
  if (name == "index_vector_dim" || name == "indices_are_sorted") {
    return op == Opcode::kGather || op == Opcode::kScatter;
  }
  if (name == "to_apply") {
    switch (op) {
      case Opcode::kCall:
      case Opcode::kReduce:
      case Opcode::kReduceWindow:
      case Opcode::kScatter:
      case Opcode::kAllReduce:
      case Opcode::kReduceScatter:
      case Opcode::kSort:
      case Opcode::kMap:
        return true;
      default:
        return false;
    }
  }
  if (name == "comparator") return op == Opcode::kSort;
  if (name == "calls" || name == "kind") return op == Opcode::kFusion;
  if (name == "condition" || name == "body") return op == Opcode::kWhile;
  if (name == "true_computation" || name == "false_computation" ||
      name == "branch_computations") {
    return op == Opcode::kConditional;
  }
  if (name == "select" || name == "scatter") {
    return op == Opcode::kSelectAndScatter;
  }
  if (name == "is_stable") return op == Opcode::kSort;
  if (name == "algorithm") return op == Opcode::kRngBitGenerator;
  if (name == "fft_type" || name == "fft_length") return op == Opcode::kFft;
  if (name == "exponent_bits" || name == "mantissa_bits") {
    return op == Opcode::kReducePrecision;
  }
  if (name == "replica_groups") {
    return op == Opcode::kAllReduce || op == Opcode::kAllGather ||
           op == Opcode::kReduceScatter || op == Opcode::kAllToAll;
  }
  if (name == "channel_id" || name == "constrain_layout") {
    return IsCollective(op);
  }
  if (name == "use_global_device_ids") {
    return op == Opcode::kAllReduce || op == Opcode::kAllGather ||
           op == Opcode::kReduceScatter;
  }
  if (name == "source_target_pairs") return op == Opcode::kCollectivePermute;
  if (name == "custom_call_target" || name == "called_computations") {
    return op == Opcode::kCustomCall;
  }
  if (name == "index") return op == Opcode::kGetTupleElement;
  if (name == "iota_dimension") return op == Opcode::kIota;
  return false;
}

// Multiplies with overflow and bound checks; false if the product exceeds
// `limit`.
bool MultiplyBounded(int64_t a, int64_t b, int64_t limit, int64_t* out) {
  if (a < 0 || b < 0) return false;
  if (a != 0 && b > limit / a) return false;
  *out = a * b;
  return *out <= limit;
}

// A computation named by an instruction, resolved once all are parsed.
struct PendingCall {
  Instruction* instruction;
  size_t slot;
  std::string name;
  size_t pos;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < text_.size(); ++i) {
      if (text_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<std::unique_ptr<Module>> ParseWholeModule();
  absl::StatusOr<Shape> ParseWholeShape();
  absl::StatusOr<Sharding> ParseWholeSharding();

 private:
  // ---- Lexing ----
  void SkipSpace();
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  // The character right after the current one (no space skipping).
  char PeekNext() const {
    return pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
  }
  bool TryConsume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool TryConsume(std::string_view s) {
    SkipSpace();
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }
  // Consumes `word` if it is the next whole name token.
  bool TryKeyword(std::string_view word) {
    SkipSpace();
    if (text_.substr(pos_, word.size()) != word) return false;
    size_t end = pos_ + word.size();
    if (end < text_.size() && IsNameChar(text_[end])) return false;
    pos_ = end;
    return true;
  }
  std::string_view PeekWord() {
    SkipSpace();
    size_t end = pos_;
    while (end < text_.size() && IsNameChar(text_[end])) ++end;
    return text_.substr(pos_, end - pos_);
  }
  absl::Status Expect(char c) {
    if (TryConsume(c)) return absl::OkStatus();
    return ExpectedError(std::string(1, c));
  }
  absl::Status Expect(std::string_view s) {
    if (TryConsume(s)) return absl::OkStatus();
    return ExpectedError(s);
  }

  // ---- Errors ----
  std::string Where(size_t pos) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    size_t column = pos - line_starts_[line - 1] + 1;
    return absl::StrCat("line ", line, ":", column);
  }
  void LineColumn(size_t pos, int* line, int* column) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    size_t l = static_cast<size_t>(it - line_starts_.begin());
    *line = static_cast<int>(l);
    *column = static_cast<int>(pos - line_starts_[l - 1] + 1);
  }
  absl::Status ErrorAt(size_t pos, std::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(pos), ": ", AbslView(message)));
  }
  // ", a convert" for the instruction whose shape starts at `pos`, read
  // past the shape without parsing it (it failed to parse); empty when no
  // opcode follows on the line.
  std::string OpcodeAfterShape(size_t pos) const {
    auto skip_group = [&](char open, char close) {
      int depth = 0;
      while (pos < text_.size() && text_[pos] != '\n') {
        if (text_[pos] == open) ++depth;
        if (text_[pos] == close && --depth == 0) {
          ++pos;
          return;
        }
        ++pos;
      }
    };
    if (pos < text_.size() && text_[pos] == '(') {
      skip_group('(', ')');
    } else {
      while (pos < text_.size() && IsNameChar(text_[pos])) ++pos;
      if (pos < text_.size() && text_[pos] == '[') skip_group('[', ']');
      if (pos < text_.size() && text_[pos] == '{') skip_group('{', '}');
    }
    while (pos < text_.size() && (text_[pos] == ' ' || text_[pos] == '\t')) {
      ++pos;
    }
    size_t end = pos;
    while (end < text_.size() && IsNameChar(text_[end])) ++end;
    if (end == pos || end >= text_.size() || text_[end] != '(') return "";
    return absl::StrCat(", a ", AbslView(text_.substr(pos, end - pos)));
  }
  absl::Status ErrorHere(std::string_view message) {
    SkipSpace();
    return ErrorAt(pos_, message);
  }
  // The token at the current position, for "got '...'".
  std::string DescribeNext() {
    SkipSpace();
    if (pos_ >= text_.size()) return "end of input";
    size_t end = pos_;
    if (IsNameChar(text_[end])) {
      while (end < text_.size() && IsNameChar(text_[end]) && end - pos_ < 40) {
        ++end;
      }
    } else {
      ++end;
    }
    std::string token(text_.substr(pos_, end - pos_));
    return absl::StrCat("'", absl::CHexEscape(token), "'");
  }
  absl::Status ExpectedError(std::string_view what) {
    std::string got = DescribeNext();
    return ErrorAt(pos_, absl::StrCat("expected '", AbslView(what), "', got ", got));
  }

  // ---- Tokens ----
  absl::StatusOr<std::string> ParseName(std::string_view what = "name");
  absl::StatusOr<std::string> ParseAttributeName();
  absl::StatusOr<int64_t> ParseInt();
  absl::StatusOr<int64_t> ParseNonNegativeInt(std::string_view what);
  absl::StatusOr<std::vector<int64_t>> ParseIntList();
  absl::StatusOr<bool> ParseBool();
  // One of `words` (an attribute's keyword value), or an error naming
  // `what` and listing them.
  template <typename T>
  absl::StatusOr<T> ParseWordOf(
      std::string_view what,
      std::initializer_list<std::pair<std::string_view, T>> words) {
    SkipSpace();
    const size_t value_pos = pos_;
    const std::string_view word = PeekWord();
    std::vector<absl::string_view> names;
    for (const auto& [name, value] : words) {
      if (word == name) {
        pos_ += word.size();
        return value;
      }
      names.push_back(AbslView(name));
    }
    return ErrorAt(value_pos,
                   absl::StrCat("expected ", AbslView(what), " (",
                                absl::StrJoin(names, ", "), "), got '",
                                AbslView(word), "'"));
  }
  absl::StatusOr<std::string> ParseQuotedString();
  absl::StatusOr<std::string> ScanRawValue(std::string_view attribute);
  absl::StatusOr<size_t> SkipString(size_t pos);
  absl::StatusOr<std::string_view> ScanBalancedBraces();
  std::string_view ScanChars(bool (*accept)(char));

  // ---- Grammar ----
  absl::StatusOr<Shape> ParseShapeAt(int depth);
  absl::Status ParseLayout(Shape* shape);
  bool AtShapeStart();
  absl::Status ParseHeader();
  absl::Status ParseStackFrameBlock();
  absl::Status ParseComputation();
  absl::Status ParseSignature();
  absl::Status ParseInstruction(
      Computation* computation,
      std::unordered_map<std::string, Instruction*>* names,
      std::vector<Instruction*>* parameters_seen);
  absl::Status ParseOperands(
      Instruction* instruction, const Computation& computation,
      const std::unordered_map<std::string, Instruction*>& names);
  absl::Status ParseAttribute(Instruction* instruction,
                              std::unordered_set<std::string>* seen,
                              std::vector<int>* slots_filled);
  absl::Status ParseCalledComputation(Instruction* instruction, size_t slot,
                                      std::vector<int>* slots_filled);
  absl::Status ParseBranchComputations(Instruction* instruction,
                                       std::vector<int>* slots_filled);
  absl::StatusOr<Literal> ParseLiteralAt(const Shape& shape,
                                         const std::string& name, int depth);
  absl::Status ParseArrayLevel(const Shape& shape, size_t level,
                               const std::string& name,
                               std::vector<uint8_t>* bytes);
  absl::Status ParseScalarValue(PrimitiveType type,
                                std::vector<uint8_t>* bytes);
  absl::Status CheckNotElided(const std::string& name);
  absl::StatusOr<std::vector<SliceDimension>> ParseSlice();
  absl::StatusOr<std::vector<PaddingDimension>> ParsePadding();
  absl::StatusOr<std::vector<WindowDimension>> ParseWindow();
  absl::StatusOr<ConvolutionDimensionNumbers> ParseDimLabels();
  absl::StatusOr<ReplicaGroups::Iota> ParseIota(bool replica_groups);
  absl::StatusOr<ReplicaGroups> ParseReplicaGroups();
  absl::StatusOr<ReplicaGroups> ParseMeshReplicaGroups(size_t start);
  absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>>
  ParseSourceTargetPairs();
  absl::StatusOr<Sharding> ParseShardingAt(int depth);

  std::string_view text_;
  size_t pos_ = 0;
  std::vector<size_t> line_starts_;

  Module* module_ = nullptr;
  std::unordered_map<std::string, Computation*> computations_;
  std::vector<PendingCall> pending_calls_;
  // Set while reading the element shape written before a tuple constant's
  // element values.
  bool shape_before_values_ = false;
  // Device ids all iota forms of the module may still expand to (bounds
  // memory: one tiny attribute can name a million devices).
  int64_t expansion_budget_ = kMaxExpandedDevicesPerModule;

  absl::Status ChargeExpansion(size_t pos, int64_t count) {
    expansion_budget_ -= count;
    if (expansion_budget_ < 0) {
      return ErrorAt(pos,
                     absl::StrCat("replica groups and tile assignments of this "
                                  "module expand to more than ",
                                  kMaxExpandedDevicesPerModule, " device ids"));
    }
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Lexing helpers.

void Parser::SkipSpace() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
        c == '\v') {
      ++pos_;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '*') {
      size_t end = text_.find("*/", pos_ + 2);
      pos_ = end == std::string_view::npos ? text_.size() : end + 2;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
      size_t end = text_.find('\n', pos_);
      pos_ = end == std::string_view::npos ? text_.size() : end + 1;
    } else {
      break;
    }
  }
}

std::string_view Parser::ScanChars(bool (*accept)(char)) {
  SkipSpace();
  size_t start = pos_;
  while (pos_ < text_.size() && accept(text_[pos_])) ++pos_;
  return text_.substr(start, pos_ - start);
}

absl::StatusOr<std::string> Parser::ParseName(std::string_view what) {
  SkipSpace();
  size_t start = pos_;
  if (pos_ < text_.size() && text_[pos_] == '%') ++pos_;
  if (pos_ >= text_.size() || !IsNameStart(text_[pos_])) {
    pos_ = start;
    return ExpectedError(what);
  }
  size_t name_start = pos_;
  while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
  return std::string(text_.substr(name_start, pos_ - name_start));
}

absl::StatusOr<std::string> Parser::ParseAttributeName() {
  SkipSpace();
  size_t start = pos_;
  while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
  if (pos_ == start) return ExpectedError("attribute name");
  return std::string(text_.substr(start, pos_ - start));
}

absl::StatusOr<int64_t> Parser::ParseInt() {
  SkipSpace();
  size_t start = pos_;
  size_t end = pos_;
  if (end < text_.size() && (text_[end] == '-' || text_[end] == '+')) ++end;
  size_t digits = end;
  while (end < text_.size() && IsDigit(text_[end])) ++end;
  if (end == digits) return ExpectedError("integer");
  std::string_view token = text_.substr(start, end - start);
  if (token[0] == '+') token.remove_prefix(1);
  int64_t value = 0;
  auto result =
      std::from_chars(token.data(), token.data() + token.size(), value);
  if (result.ec != std::errc() || result.ptr != token.data() + token.size()) {
    return ErrorAt(start, absl::StrCat("integer '", AbslView(token),
                                       "' is out of range for s64"));
  }
  pos_ = end;
  return value;
}

absl::StatusOr<int64_t> Parser::ParseNonNegativeInt(std::string_view what) {
  SkipSpace();
  size_t start = pos_;
  CW_ASSIGN_OR_RETURN(int64_t value, ParseInt());
  if (value < 0) {
    return ErrorAt(
        start, absl::StrCat(AbslView(what), " must not be negative, got ", value));
  }
  return value;
}

absl::StatusOr<std::vector<int64_t>> Parser::ParseIntList() {
  CW_RETURN_IF_ERROR(Expect('{'));
  std::vector<int64_t> values;
  if (TryConsume('}')) return values;
  do {
    CW_ASSIGN_OR_RETURN(int64_t value, ParseInt());
    values.push_back(value);
  } while (TryConsume(','));
  CW_RETURN_IF_ERROR(Expect('}'));
  return values;
}

absl::StatusOr<bool> Parser::ParseBool() {
  if (TryKeyword("true")) return true;
  if (TryKeyword("false")) return false;
  return ExpectedError("true' or 'false");
}

absl::StatusOr<size_t> Parser::SkipString(size_t pos) {
  char quote = text_[pos];
  size_t i = pos + 1;
  while (i < text_.size()) {
    if (text_[i] == '\\') {
      i += 2;
      continue;
    }
    if (text_[i] == quote) return i + 1;
    ++i;
  }
  return ErrorAt(pos, "unterminated string");
}

absl::StatusOr<std::string> Parser::ParseQuotedString() {
  if (Peek() != '"') return ExpectedError("\"");
  size_t start = pos_;
  CW_ASSIGN_OR_RETURN(size_t end, SkipString(pos_));
  std::string_view body = text_.substr(start + 1, end - start - 2);
  std::string unescaped;
  std::string error;
  if (!absl::CUnescape(AbslView(body), &unescaped, &error)) {
    return ErrorAt(start, absl::StrCat("bad string escape: ", error));
  }
  pos_ = end;
  return unescaped;
}

// Raw attribute text: everything up to a ',' or newline at bracket depth 0
// (or an unmatched closing bracket, or a comment), with brackets balanced and
// strings skipped.
absl::StatusOr<std::string> Parser::ScanRawValue(std::string_view attribute) {
  SkipSpace();
  size_t start = pos_;
  std::string closers;
  size_t i = pos_;
  while (i < text_.size()) {
    char c = text_[i];
    if (closers.empty()) {
      if (c == ',' || c == '\n' || c == ')' || c == ']' || c == '}') break;
      if (c == '/' && i + 1 < text_.size() &&
          (text_[i + 1] == '/' || text_[i + 1] == '*')) {
        break;
      }
    }
    if (c == '"' || c == '\'') {
      CW_ASSIGN_OR_RETURN(i, SkipString(i));
      continue;
    }
    if (c == '{') {
      closers.push_back('}');
    } else if (c == '[') {
      closers.push_back(']');
    } else if (c == '(') {
      closers.push_back(')');
    } else if (c == '}' || c == ']' || c == ')') {
      if (closers.back() != c) {
        return ErrorAt(
            i, absl::StrCat("expected '", std::string(1, closers.back()),
                            "', got '", std::string(1, c), "' in attribute '",
                            AbslView(attribute), "'"));
      }
      closers.pop_back();
    }
    if (closers.size() > static_cast<size_t>(kMaxNestingDepth)) {
      return ErrorAt(i, absl::StrCat("attribute '", AbslView(attribute),
                                     "' nests deeper than ", kMaxNestingDepth));
    }
    ++i;
  }
  if (!closers.empty()) {
    pos_ = i;
    return ExpectedError(std::string(1, closers.back()));
  }
  size_t end = i;
  while (end > start && (text_[end - 1] == ' ' || text_[end - 1] == '\t' ||
                         text_[end - 1] == '\r')) {
    --end;
  }
  if (end == start) {
    return ErrorAt(
        start, absl::StrCat("expected a value for attribute '", AbslView(attribute),
                            "', got ", DescribeNext()));
  }
  pos_ = end;
  return std::string(text_.substr(start, end - start));
}

absl::StatusOr<std::string_view> Parser::ScanBalancedBraces() {
  SkipSpace();
  size_t start = pos_;
  if (Peek() != '{') return ExpectedError("{");
  int depth = 0;
  size_t i = pos_;
  while (i < text_.size()) {
    char c = text_[i];
    if (c == '"' || c == '\'') {
      CW_ASSIGN_OR_RETURN(i, SkipString(i));
      continue;
    }
    if (c == '{') ++depth;
    if (c == '}' && --depth == 0) {
      pos_ = i + 1;
      return text_.substr(start, pos_ - start);
    }
    ++i;
  }
  pos_ = text_.size();
  return ExpectedError("}");
}

// ---------------------------------------------------------------------------
// Shapes.

bool Parser::AtShapeStart() {
  SkipSpace();
  if (pos_ >= text_.size()) return false;
  if (text_[pos_] == '(') return true;
  size_t end = pos_;
  while (end < text_.size() && IsNameChar(text_[end])) ++end;
  return end > pos_ && end < text_.size() && text_[end] == '[';
}

absl::StatusOr<Shape> Parser::ParseShapeAt(int depth) {
  SkipSpace();
  size_t start = pos_;
  if (depth > kMaxNestingDepth) {
    return ErrorAt(start, absl::StrCat("shape nests deeper than ",
                                       kMaxNestingDepth, " levels"));
  }
  if (TryConsume('(')) {
    std::vector<Shape> elements;
    if (!TryConsume(')')) {
      do {
        CW_ASSIGN_OR_RETURN(Shape element, ParseShapeAt(depth + 1));
        elements.push_back(std::move(element));
      } while (TryConsume(','));
      CW_RETURN_IF_ERROR(Expect(')'));
    }
    return Shape::Tuple(std::move(elements));
  }
  size_t end = pos_;
  while (end < text_.size() && IsNameChar(text_[end])) ++end;
  if (end == pos_ || end >= text_.size() || text_[end] != '[') {
    return ExpectedError("shape");
  }
  std::string type_name(text_.substr(pos_, end - pos_));
  if (type_name == "token") {
    pos_ = end + 1;
    CW_RETURN_IF_ERROR(Expect(']'));
    return Shape::Token();
  }
  std::optional<PrimitiveType> type = PrimitiveTypeFromName(type_name);
  if (!type.has_value() || !IsArrayType(*type)) {
    return ErrorAt(start,
                   absl::StrCat("unsupported element type '", type_name, "'"));
  }
  pos_ = end + 1;
  std::vector<int64_t> dims;
  std::vector<bool> dynamic;
  bool any_dynamic = false;
  int64_t elements = 1;
  if (!TryConsume(']')) {
    do {
      SkipSpace();
      size_t dim_pos = pos_;
      bool is_dynamic = TryConsume("<=");
      if (Peek() == '?') {
        return ErrorHere("unbounded dynamic dimension '?' is not supported");
      }
      CW_ASSIGN_OR_RETURN(int64_t dim, ParseInt());
      if (dim < 0) {
        return ErrorAt(
            dim_pos,
            absl::StrCat("dimension size must not be negative, got ", dim));
      }
      if (dims.size() >= static_cast<size_t>(kMaxRank)) {
        return ErrorAt(dim_pos, absl::StrCat("shape has more than ", kMaxRank,
                                             " dimensions"));
      }
      if (!MultiplyBounded(elements, dim, kMaxElementCount, &elements)) {
        return ErrorAt(start,
                       absl::StrCat("shape has more than 2^40 elements"));
      }
      dims.push_back(dim);
      dynamic.push_back(is_dynamic);
      any_dynamic |= is_dynamic;
    } while (TryConsume(','));
    CW_RETURN_IF_ERROR(Expect(']'));
  }
  Shape shape(*type, std::move(dims));
  if (any_dynamic) shape.set_dynamic_dims(std::move(dynamic));
  // A '{' after the dims is a layout only if it holds a layout: digits, ':'
  // or nothing. (After a computation signature's result shape, '{' opens
  // the body.)
  size_t save = pos_;
  if (Peek() == '{') {
    ++pos_;
    char next = Peek();
    pos_ = save;
    if (IsDigit(next) || next == '}' || next == ':') {
      if (shape_before_values_) {
        // In `f32[2] {1, 2}` the braces hold values: a layout here must be
        // followed by the values' own '{'.
        Shape with_layout = shape;
        if (ParseLayout(&with_layout).ok() &&
            (shape.rank() == 0 || Peek() == '{')) {
          shape = std::move(with_layout);
        } else {
          pos_ = save;
        }
      } else {
        CW_RETURN_IF_ERROR(ParseLayout(&shape));
      }
    }
  }
  return shape;
}

absl::Status Parser::ParseLayout(Shape* shape) {
  SkipSpace();
  size_t start = pos_;
  CW_RETURN_IF_ERROR(Expect('{'));
  std::vector<int64_t> minor_to_major;
  if (Peek() != '}' && Peek() != ':') {
    do {
      CW_ASSIGN_OR_RETURN(int64_t dim, ParseInt());
      minor_to_major.push_back(dim);
    } while (TryConsume(','));
  }
  if (TryConsume(':')) {
    // Tiles, element size, memory space...: skipped (balanced parens).
    int depth = 0;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (c == '}' && depth <= 0) break;
      if (c == '{' || c == '\n') break;
      ++pos_;
    }
  }
  CW_RETURN_IF_ERROR(Expect('}'));
  if (!minor_to_major.empty()) {
    std::vector<bool> seen(static_cast<size_t>(shape->rank()), false);
    bool valid = static_cast<int64_t>(minor_to_major.size()) == shape->rank();
    for (int64_t d : minor_to_major) {
      if (!valid) break;
      if (d < 0 || d >= shape->rank() || seen[static_cast<size_t>(d)]) {
        valid = false;
      } else {
        seen[static_cast<size_t>(d)] = true;
      }
    }
    if (!valid) {
      return ErrorAt(
          start, absl::StrCat("layout {", absl::StrJoin(minor_to_major, ","),
                              "} is not a permutation of the ", shape->rank(),
                              " dimensions"));
    }
    shape->set_minor_to_major(std::move(minor_to_major));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Module structure.

absl::Status Parser::ParseHeader() {
  if (!TryKeyword("HloModule")) return ExpectedError("HloModule");
  CW_ASSIGN_OR_RETURN(std::string name, ParseName("module name"));
  auto module = std::make_unique<Module>(name);
  module_ = module.release();
  while (TryConsume(',')) {
    CW_ASSIGN_OR_RETURN(std::string attribute, ParseAttributeName());
    CW_RETURN_IF_ERROR(Expect('='));
    if (attribute == "num_partitions" || attribute == "replica_count") {
      SkipSpace();
      size_t value_pos = pos_;
      CW_ASSIGN_OR_RETURN(int64_t value, ParseInt());
      if (value < 1) {
        return ErrorAt(
            value_pos,
            absl::StrCat(attribute, " must be at least 1, got ", value));
      }
      if (attribute == "num_partitions") {
        module_->set_num_partitions(value);
      } else {
        module_->set_replica_count(value);
      }
    } else {
      CW_ASSIGN_OR_RETURN(std::string value, ScanRawValue(attribute));
      module_->raw_attributes().emplace_back(attribute, std::move(value));
    }
  }
  return absl::OkStatus();
}

bool IsStackFrameSection(std::string_view word) {
  return word == "FileNames" || word == "FunctionNames" ||
         word == "FileLocations" || word == "StackFrames";
}

absl::Status Parser::ParseStackFrameBlock() {
  if (!IsStackFrameSection(PeekWord())) return absl::OkStatus();
  size_t start = pos_;
  size_t end = pos_;
  while (true) {
    SkipSpace();
    if (pos_ >= text_.size()) break;
    if (!IsDigit(text_[pos_]) && !IsStackFrameSection(PeekWord())) break;
    size_t line_end = pos_;
    while (line_end < text_.size() && text_[line_end] != '\n') {
      if (text_[line_end] == '"') {
        CW_ASSIGN_OR_RETURN(line_end, SkipString(line_end));
      } else {
        ++line_end;
      }
    }
    end = line_end;
    pos_ = line_end;
  }
  module_->raw_attributes().emplace_back(
      "#stack_frames", std::string(text_.substr(start, end - start)));
  return absl::OkStatus();
}

absl::Status Parser::ParseSignature() {
  CW_RETURN_IF_ERROR(Expect('('));
  if (!TryConsume(')')) {
    do {
      CW_ASSIGN_OR_RETURN(std::string name, ParseName("parameter name"));
      CW_RETURN_IF_ERROR(Expect(':'));
      CW_ASSIGN_OR_RETURN(Shape shape, ParseShapeAt(0));
    } while (TryConsume(','));
    CW_RETURN_IF_ERROR(Expect(')'));
  }
  CW_RETURN_IF_ERROR(Expect("->"));
  CW_ASSIGN_OR_RETURN(Shape result, ParseShapeAt(0));
  return absl::OkStatus();
}

absl::Status Parser::ParseComputation() {
  SkipSpace();
  size_t start = pos_;
  bool is_entry = TryKeyword("ENTRY");
  SkipSpace();
  size_t name_pos = pos_;
  CW_ASSIGN_OR_RETURN(std::string name, ParseName("computation name"));
  if (computations_.count(name) > 0) {
    return ErrorAt(name_pos,
                   absl::StrCat("duplicate computation name '%", name, "'"));
  }
  if (Peek() == '(') CW_RETURN_IF_ERROR(ParseSignature());
  CW_RETURN_IF_ERROR(Expect('{'));
  auto computation = std::make_unique<Computation>(name);
  computation->set_is_entry(is_entry);
  std::unordered_map<std::string, Instruction*> names;
  std::vector<Instruction*> parameters;
  Instruction* root = nullptr;
  while (Peek() != '}') {
    if (AtEnd()) return ExpectedError("}");
    CW_RETURN_IF_ERROR(
        ParseInstruction(computation.get(), &names, &parameters));
    Instruction* added = computation->instructions().back().get();
    if (added->is_root) {
      if (root != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", added->line, ":", added->column,
                         ": computation '", name, "' has more than one ROOT ('",
                         root->name, "' and '", added->name, "')"));
      }
      root = added;
    }
  }
  CW_RETURN_IF_ERROR(Expect('}'));
  if (computation->instructions().empty()) {
    return ErrorAt(
        start, absl::StrCat("computation '", name, "' has no instructions"));
  }
  if (root == nullptr) {
    root = computation->instructions().back().get();
    root->is_root = true;
  }
  computation->set_root(root);
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (parameters[i] == nullptr) {
      return ErrorAt(start, absl::StrCat("computation '", name,
                                         "' has no parameter(", i, ")"));
    }
  }
  // Trailing attributes: `, execution_thread="main"`.
  while (Peek() == ',') {
    ++pos_;
    CW_ASSIGN_OR_RETURN(std::string attribute, ParseAttributeName());
    CW_RETURN_IF_ERROR(Expect('='));
    CW_ASSIGN_OR_RETURN(std::string value, ScanRawValue(attribute));
    computation->raw_attributes().emplace_back(attribute, std::move(value));
  }
  if (is_entry && module_->entry() != nullptr) {
    return ErrorAt(
        start, absl::StrCat("more than one ENTRY computation ('",
                            module_->entry()->name(), "' and '", name, "')"));
  }
  computations_[name] = module_->AddComputation(std::move(computation));
  return absl::OkStatus();
}

absl::Status Parser::ParseInstruction(
    Computation* computation,
    std::unordered_map<std::string, Instruction*>* names,
    std::vector<Instruction*>* parameters_seen) {
  SkipSpace();
  size_t start = pos_;
  auto instruction = std::make_unique<Instruction>();
  Instruction* inst = instruction.get();
  LineColumn(start, &inst->line, &inst->column);
  inst->is_root = TryKeyword("ROOT");
  SkipSpace();
  size_t name_pos = pos_;
  CW_ASSIGN_OR_RETURN(inst->name, ParseName("instruction name"));
  if (names->count(inst->name) > 0) {
    return ErrorAt(
        name_pos, absl::StrCat("duplicate instruction name '%", inst->name,
                               "' in computation '", computation->name(), "'"));
  }
  CW_RETURN_IF_ERROR(Expect('='));
  SkipSpace();
  const size_t shape_pos = pos_;
  absl::StatusOr<Shape> shape = ParseShapeAt(0);
  if (!shape.ok()) {
    return absl::Status(
        shape.status().code(),
        absl::StrCat(shape.status().message(), " (the shape of instruction '",
                     inst->name, "'", OpcodeAfterShape(shape_pos), ")"));
  }
  inst->shape = *std::move(shape);
  SkipSpace();
  std::string_view opcode_name = PeekWord();
  if (opcode_name.empty()) return ExpectedError("opcode");
  pos_ += opcode_name.size();
  inst->opcode_name = std::string(opcode_name);
  inst->opcode = OpcodeFromName(opcode_name);
  inst->unique_id = module_->NextInstructionId();
  CW_RETURN_IF_ERROR(Expect('('));
  if (inst->opcode == Opcode::kParameter) {
    SkipSpace();
    size_t number_pos = pos_;
    CW_ASSIGN_OR_RETURN(inst->parameter_number,
                        ParseNonNegativeInt("parameter number"));
    if (inst->parameter_number > 1000000) {
      return ErrorAt(number_pos, "parameter number is too large");
    }
    size_t number = static_cast<size_t>(inst->parameter_number);
    if (number < parameters_seen->size() &&
        (*parameters_seen)[number] != nullptr) {
      return ErrorAt(number_pos, absl::StrCat("duplicate parameter(", number,
                                              ") in computation '",
                                              computation->name(), "'"));
    }
    if (parameters_seen->size() <= number) {
      parameters_seen->resize(number + 1, nullptr);
    }
    (*parameters_seen)[number] = inst;
    CW_RETURN_IF_ERROR(Expect(')'));
  } else if (inst->opcode == Opcode::kConstant) {
    CW_ASSIGN_OR_RETURN(Literal literal,
                        ParseLiteralAt(inst->shape, inst->name, 0));
    inst->literal = std::move(literal);
    CW_RETURN_IF_ERROR(Expect(')'));
  } else {
    CW_RETURN_IF_ERROR(ParseOperands(inst, *computation, *names));
  }
  std::unordered_set<std::string> seen;
  std::vector<int> slots_filled;
  while (TryConsume(',')) {
    CW_RETURN_IF_ERROR(ParseAttribute(inst, &seen, &slots_filled));
  }
  // Every slot of called_computations must be named.
  for (size_t i = 0; i < slots_filled.size(); ++i) {
    if (slots_filled[i] == 0) {
      std::string_view missing = "a called computation";
      if (inst->opcode == Opcode::kWhile) {
        missing = i == 0 ? "condition=" : "body=";
      } else if (inst->opcode == Opcode::kSelectAndScatter) {
        missing = i == 0 ? "select=" : "scatter=";
      } else if (inst->opcode == Opcode::kConditional) {
        missing = i == 0 ? "true_computation=" : "false_computation=";
      }
      return ErrorAt(start,
                     absl::StrCat(AbslView(inst->opcode_name), " '", inst->name,
                                  "' is missing ", AbslView(missing)));
    }
  }
  if ((inst->opcode == Opcode::kWhile ||
       inst->opcode == Opcode::kSelectAndScatter) &&
      slots_filled.size() < 2) {
    const bool is_while = inst->opcode == Opcode::kWhile;
    std::string_view missing =
        slots_filled.empty()
            ? (is_while ? "condition= and body=" : "select= and scatter=")
            : (is_while ? "body=" : "scatter=");
    return ErrorAt(start, absl::StrCat(AbslView(inst->opcode_name), " '", inst->name,
                                       "' is missing ", AbslView(missing)));
  }
  if (inst->opcode == Opcode::kConditional && seen.count("true_computation") &&
      !seen.count("false_computation")) {
    return ErrorAt(start, absl::StrCat("conditional '", inst->name,
                                       "' is missing false_computation="));
  }
  (*names)[inst->name] = inst;
  computation->AddInstruction(std::move(instruction));
  return absl::OkStatus();
}

absl::Status Parser::ParseOperands(
    Instruction* inst, const Computation& computation,
    const std::unordered_map<std::string, Instruction*>& names) {
  if (TryConsume(')')) return absl::OkStatus();
  do {
    if (AtShapeStart()) {
      CW_ASSIGN_OR_RETURN(Shape ignored, ParseShapeAt(0));
    }
    SkipSpace();
    size_t operand_pos = pos_;
    CW_ASSIGN_OR_RETURN(std::string operand, ParseName("operand name"));
    auto it = names.find(operand);
    if (it == names.end()) {
      return ErrorAt(operand_pos, absl::StrCat("unknown operand '%", operand,
                                               "' in computation '",
                                               computation.name(), "'"));
    }
    inst->operands.push_back(it->second);
  } while (TryConsume(','));
  return Expect(')');
}

absl::Status Parser::ParseCalledComputation(Instruction* inst, size_t slot,
                                            std::vector<int>* slots_filled) {
  SkipSpace();
  size_t name_pos = pos_;
  CW_ASSIGN_OR_RETURN(std::string name, ParseName("computation name"));
  if (slots_filled->size() <= slot) slots_filled->resize(slot + 1, 0);
  if ((*slots_filled)[slot] != 0) {
    return ErrorAt(name_pos, "called computation given twice");
  }
  (*slots_filled)[slot] = 1;
  if (inst->called_computations.size() <= slot) {
    inst->called_computations.resize(slot + 1, nullptr);
  }
  pending_calls_.push_back({inst, slot, std::move(name), name_pos});
  return absl::OkStatus();
}

absl::Status Parser::ParseBranchComputations(Instruction* inst,
                                             std::vector<int>* slots_filled) {
  CW_RETURN_IF_ERROR(Expect('{'));
  size_t slot = 0;
  if (!TryConsume('}')) {
    do {
      CW_RETURN_IF_ERROR(ParseCalledComputation(inst, slot++, slots_filled));
    } while (TryConsume(','));
    CW_RETURN_IF_ERROR(Expect('}'));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseAttribute(Instruction* inst,
                                    std::unordered_set<std::string>* seen,
                                    std::vector<int>* slots_filled) {
  SkipSpace();
  size_t attr_pos = pos_;
  CW_ASSIGN_OR_RETURN(std::string name, ParseAttributeName());
  CW_RETURN_IF_ERROR(Expect('='));
  if (!InterpretsAttribute(inst->opcode, name)) {
    CW_ASSIGN_OR_RETURN(std::string value, ScanRawValue(name));
    inst->raw_attributes.emplace_back(std::move(name), std::move(value));
    return absl::OkStatus();
  }
  if (!seen->insert(name).second) {
    return ErrorAt(attr_pos, absl::StrCat("duplicate attribute '", name,
                                          "' on '", inst->name, "'"));
  }
  const Opcode op = inst->opcode;
  if (name == "sharding") {
    CW_ASSIGN_OR_RETURN(Sharding sharding, ParseShardingAt(0));
    inst->sharding = std::move(sharding);
  } else if (name == "dimensions") {
    CW_ASSIGN_OR_RETURN(inst->dimensions, ParseIntList());
  } else if (name == "slice") {
    CW_ASSIGN_OR_RETURN(inst->slice, ParseSlice());
  } else if (name == "dynamic_slice_sizes") {
    CW_ASSIGN_OR_RETURN(inst->dynamic_slice_sizes, ParseIntList());
  } else if (name == "padding") {
    CW_ASSIGN_OR_RETURN(inst->padding, ParsePadding());
  } else if (name == "direction") {
    SkipSpace();
    size_t value_pos = pos_;
    std::string_view word = PeekWord();
    static constexpr std::pair<std::string_view, ComparisonDirection>
        kDirections[] = {
            {"EQ", ComparisonDirection::kEq}, {"NE", ComparisonDirection::kNe},
            {"LT", ComparisonDirection::kLt}, {"LE", ComparisonDirection::kLe},
            {"GT", ComparisonDirection::kGt}, {"GE", ComparisonDirection::kGe}};
    bool found = false;
    for (const auto& [text, direction] : kDirections) {
      if (word == text) {
        inst->comparison_direction = direction;
        found = true;
      }
    }
    if (!found) {
      return ErrorAt(value_pos, absl::StrCat("expected a comparison direction "
                                             "(EQ, NE, LT, LE, GT, GE), got '",
                                             AbslView(word), "'"));
    }
    pos_ += word.size();
  } else if (name == "type") {
    SkipSpace();
    size_t value_pos = pos_;
    std::string_view word = PeekWord();
    if (word == "FLOAT") {
      inst->comparison_type = ComparisonType::kFloat;
    } else if (word == "TOTALORDER") {
      inst->comparison_type = ComparisonType::kTotalOrder;
    } else if (word == "SIGNED") {
      inst->comparison_type = ComparisonType::kSigned;
    } else if (word == "UNSIGNED") {
      inst->comparison_type = ComparisonType::kUnsigned;
    } else {
      return ErrorAt(value_pos,
                     absl::StrCat("expected a comparison type (FLOAT, "
                                  "TOTALORDER, SIGNED, UNSIGNED), got '",
                                  AbslView(word), "'"));
    }
    pos_ += word.size();
  } else if (name == "lhs_batch_dims") {
    CW_ASSIGN_OR_RETURN(inst->dot_dimension_numbers.lhs_batch_dims,
                        ParseIntList());
  } else if (name == "lhs_contracting_dims") {
    CW_ASSIGN_OR_RETURN(inst->dot_dimension_numbers.lhs_contracting_dims,
                        ParseIntList());
  } else if (name == "rhs_batch_dims") {
    CW_ASSIGN_OR_RETURN(inst->dot_dimension_numbers.rhs_batch_dims,
                        ParseIntList());
  } else if (name == "rhs_contracting_dims") {
    CW_ASSIGN_OR_RETURN(inst->dot_dimension_numbers.rhs_contracting_dims,
                        ParseIntList());
  } else if (name == "window") {
    CW_ASSIGN_OR_RETURN(inst->window, ParseWindow());
  } else if (name == "dim_labels") {
    CW_ASSIGN_OR_RETURN(inst->convolution_dimension_numbers, ParseDimLabels());
  } else if (name == "feature_group_count") {
    SkipSpace();
    size_t value_pos = pos_;
    CW_ASSIGN_OR_RETURN(inst->feature_group_count, ParseInt());
    if (inst->feature_group_count < 1) {
      return ErrorAt(value_pos, "feature_group_count must be at least 1");
    }
  } else if (name == "batch_group_count") {
    SkipSpace();
    size_t value_pos = pos_;
    CW_ASSIGN_OR_RETURN(inst->batch_group_count, ParseInt());
    if (inst->batch_group_count < 1) {
      return ErrorAt(value_pos, "batch_group_count must be at least 1");
    }
  } else if (name == "offset_dims") {
    CW_ASSIGN_OR_RETURN(inst->gather_dimension_numbers.offset_dims,
                        ParseIntList());
  } else if (name == "collapsed_slice_dims") {
    CW_ASSIGN_OR_RETURN(inst->gather_dimension_numbers.collapsed_slice_dims,
                        ParseIntList());
  } else if (name == "start_index_map") {
    CW_ASSIGN_OR_RETURN(inst->gather_dimension_numbers.start_index_map,
                        ParseIntList());
  } else if (name == "operand_batching_dims") {
    CW_ASSIGN_OR_RETURN(inst->gather_dimension_numbers.operand_batching_dims,
                        ParseIntList());
  } else if (name == "start_indices_batching_dims") {
    CW_ASSIGN_OR_RETURN(
        inst->gather_dimension_numbers.start_indices_batching_dims,
        ParseIntList());
  } else if (name == "slice_sizes") {
    CW_ASSIGN_OR_RETURN(inst->gather_slice_sizes, ParseIntList());
  } else if (name == "index_vector_dim") {
    CW_ASSIGN_OR_RETURN(int64_t dim, ParseNonNegativeInt("index_vector_dim"));
    if (op == Opcode::kGather) {
      inst->gather_dimension_numbers.index_vector_dim = dim;
    } else {
      inst->scatter_dimension_numbers.index_vector_dim = dim;
    }
  } else if (name == "update_window_dims") {
    CW_ASSIGN_OR_RETURN(inst->scatter_dimension_numbers.update_window_dims,
                        ParseIntList());
  } else if (name == "inserted_window_dims") {
    CW_ASSIGN_OR_RETURN(inst->scatter_dimension_numbers.inserted_window_dims,
                        ParseIntList());
  } else if (name == "scatter_dims_to_operand_dims") {
    CW_ASSIGN_OR_RETURN(
        inst->scatter_dimension_numbers.scatter_dims_to_operand_dims,
        ParseIntList());
  } else if (name == "input_batching_dims") {
    CW_ASSIGN_OR_RETURN(inst->scatter_dimension_numbers.input_batching_dims,
                        ParseIntList());
  } else if (name == "scatter_indices_batching_dims") {
    CW_ASSIGN_OR_RETURN(
        inst->scatter_dimension_numbers.scatter_indices_batching_dims,
        ParseIntList());
  } else if (name == "indices_are_sorted") {
    CW_ASSIGN_OR_RETURN(inst->indices_are_sorted, ParseBool());
  } else if (name == "unique_indices") {
    CW_ASSIGN_OR_RETURN(inst->unique_indices, ParseBool());
  } else if (name == "to_apply" || name == "calls" || name == "comparator") {
    if (name == "comparator" && seen->count("to_apply")) {
      return ErrorAt(attr_pos, "both to_apply= and comparator= given");
    }
    if (name == "to_apply" && seen->count("comparator")) {
      return ErrorAt(attr_pos, "both to_apply= and comparator= given");
    }
    CW_RETURN_IF_ERROR(ParseCalledComputation(inst, 0, slots_filled));
  } else if (name == "condition" || name == "select" ||
             name == "true_computation") {
    if (seen->count("branch_computations")) {
      return ErrorAt(attr_pos,
                     "branch_computations= and true_computation= both given");
    }
    CW_RETURN_IF_ERROR(ParseCalledComputation(inst, 0, slots_filled));
  } else if (name == "body" || name == "scatter" ||
             name == "false_computation") {
    if (seen->count("branch_computations")) {
      return ErrorAt(attr_pos,
                     "branch_computations= and false_computation= both given");
    }
    CW_RETURN_IF_ERROR(ParseCalledComputation(inst, 1, slots_filled));
  } else if (name == "called_computations") {
    CW_RETURN_IF_ERROR(ParseBranchComputations(inst, slots_filled));
  } else if (name == "branch_computations") {
    if (seen->count("true_computation") || seen->count("false_computation")) {
      return ErrorAt(attr_pos,
                     "branch_computations= and true_computation= both given");
    }
    CW_RETURN_IF_ERROR(ParseBranchComputations(inst, slots_filled));
  } else if (name == "kind") {
    CW_ASSIGN_OR_RETURN(
        inst->fusion_kind,
        ParseWordOf<FusionKind>("a fusion kind",
                                {{"kLoop", FusionKind::kLoop},
                                 {"kInput", FusionKind::kInput},
                                 {"kOutput", FusionKind::kOutput},
                                 {"kCustom", FusionKind::kCustom}}));
  } else if (name == "is_stable") {
    CW_ASSIGN_OR_RETURN(inst->is_stable, ParseBool());
  } else if (name == "algorithm") {
    CW_ASSIGN_OR_RETURN(
        inst->rng_algorithm,
        ParseWordOf<RandomAlgorithm>(
            "an rng algorithm", {{"rng_default", RandomAlgorithm::kDefault},
                                 {"rng_three_fry", RandomAlgorithm::kThreeFry},
                                 {"rng_philox", RandomAlgorithm::kPhilox}}));
  } else if (name == "fft_type") {
    CW_ASSIGN_OR_RETURN(inst->fft_type,
                        ParseWordOf<FftType>("an fft type",
                                             {{"FFT", FftType::kFft},
                                              {"IFFT", FftType::kIfft},
                                              {"RFFT", FftType::kRfft},
                                              {"IRFFT", FftType::kIrfft}}));
  } else if (name == "fft_length") {
    CW_ASSIGN_OR_RETURN(inst->fft_length, ParseIntList());
  } else if (name == "exponent_bits") {
    CW_ASSIGN_OR_RETURN(inst->exponent_bits,
                        ParseNonNegativeInt("exponent_bits"));
  } else if (name == "mantissa_bits") {
    CW_ASSIGN_OR_RETURN(inst->mantissa_bits,
                        ParseNonNegativeInt("mantissa_bits"));
  } else if (name == "replica_groups") {
    CW_ASSIGN_OR_RETURN(inst->replica_groups, ParseReplicaGroups());
  } else if (name == "channel_id") {
    CW_ASSIGN_OR_RETURN(int64_t channel, ParseNonNegativeInt("channel_id"));
    inst->channel_id = channel;
  } else if (name == "use_global_device_ids") {
    CW_ASSIGN_OR_RETURN(inst->use_global_device_ids, ParseBool());
  } else if (name == "constrain_layout") {
    CW_ASSIGN_OR_RETURN(inst->constrain_layout, ParseBool());
  } else if (name == "source_target_pairs") {
    CW_ASSIGN_OR_RETURN(inst->source_target_pairs, ParseSourceTargetPairs());
  } else if (name == "custom_call_target") {
    CW_ASSIGN_OR_RETURN(inst->custom_call_target, ParseQuotedString());
  } else if (name == "index") {
    CW_ASSIGN_OR_RETURN(inst->tuple_index, ParseNonNegativeInt("index"));
  } else if (name == "iota_dimension") {
    CW_ASSIGN_OR_RETURN(inst->iota_dimension,
                        ParseNonNegativeInt("iota_dimension"));
  } else {
    return ErrorAt(attr_pos, absl::StrCat("internal: attribute '", name,
                                          "' is not handled"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Literals.

absl::Status Parser::CheckNotElided(const std::string& name) {
  SkipSpace();
  size_t start = pos_;
  if (start < text_.size() && text_[start] == '{') {
    size_t i = start + 1;
    while (i < text_.size() && (text_[i] == ' ' || text_[i] == '\n')) ++i;
    if (text_.substr(i, 3) == "...") {
      return ErrorAt(
          start,
          absl::StrCat("constant '", name,
                       "' has its values elided ('{...}'); print the module "
                       "with large constants: from JAX, "
                       "compiled.runtime_executable().hlo_modules()[0]"
                       ".to_string(opts) with "
                       "opts.print_large_constants = True (as_text() "
                       "elides them); in XLA dumps, "
                       "--xla_dump_large_constants=true"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Literal> Parser::ParseLiteralAt(const Shape& shape,
                                               const std::string& name,
                                               int depth) {
  SkipSpace();
  if (depth > kMaxNestingDepth) {
    return ErrorHere(absl::StrCat("constant nests deeper than ",
                                  kMaxNestingDepth, " levels"));
  }
  CW_RETURN_IF_ERROR(CheckNotElided(name));
  if (shape.IsTuple()) {
    CW_RETURN_IF_ERROR(Expect('('));
    std::vector<Literal> elements;
    for (size_t i = 0; i < shape.tuple_shapes().size(); ++i) {
      if (i > 0) CW_RETURN_IF_ERROR(Expect(','));
      const Shape& element_shape = shape.tuple_shapes()[i];
      // XLA may print each element's shape before its values.
      SkipSpace();
      size_t element_pos = pos_;
      if (AtShapeStart() && Peek() != '(') {
        shape_before_values_ = true;
        absl::StatusOr<Shape> parsed = ParseShapeAt(depth + 1);
        shape_before_values_ = false;
        CW_RETURN_IF_ERROR(parsed.status());
        const Shape& written = *parsed;
        if (!written.Compatible(element_shape)) {
          return ErrorAt(
              element_pos,
              absl::StrCat("constant '", name, "' element ", i,
                           " is written as ", written.ToString(),
                           " but the shape says ", element_shape.ToString()));
        }
      }
      CW_ASSIGN_OR_RETURN(Literal element,
                          ParseLiteralAt(element_shape, name, depth + 1));
      elements.push_back(std::move(element));
    }
    CW_RETURN_IF_ERROR(Expect(')'));
    return Literal::MakeTuple(std::move(elements));
  }
  if (!shape.IsArray()) {
    return ErrorHere(absl::StrCat("constant '", name, "' has shape ",
                                  shape.ToString(),
                                  ", which cannot hold values"));
  }
  std::vector<uint8_t> bytes;
  if (shape.rank() == 0) {
    CW_RETURN_IF_ERROR(ParseScalarValue(shape.type(), &bytes));
  } else {
    CW_RETURN_IF_ERROR(ParseArrayLevel(shape, 0, name, &bytes));
  }
  Literal literal(shape);
  if (!bytes.empty()) {
    std::memcpy(literal.mutable_untyped_data(), bytes.data(), bytes.size());
  }
  return literal;
}

absl::Status Parser::ParseArrayLevel(const Shape& shape, size_t level,
                                     const std::string& name,
                                     std::vector<uint8_t>* bytes) {
  CW_RETURN_IF_ERROR(CheckNotElided(name));
  SkipSpace();
  size_t start = pos_;
  CW_RETURN_IF_ERROR(Expect('{'));
  const int64_t expected = shape.dim(static_cast<int64_t>(level));
  const bool innermost = static_cast<int64_t>(level) + 1 == shape.rank();
  int64_t count = 0;
  if (!TryConsume('}')) {
    do {
      if (count == expected) {
        return ErrorHere(absl::StrCat("constant '", name, "' has more than ",
                                      expected, " values in dimension ", level,
                                      " of shape ", shape.ToString()));
      }
      if (innermost) {
        CW_RETURN_IF_ERROR(ParseScalarValue(shape.type(), bytes));
      } else {
        CW_RETURN_IF_ERROR(ParseArrayLevel(shape, level + 1, name, bytes));
      }
      ++count;
    } while (TryConsume(','));
    CW_RETURN_IF_ERROR(Expect('}'));
  }
  if (count != expected) {
    return ErrorAt(start,
                   absl::StrCat("constant '", name, "' has ", count,
                                " values in dimension ", level, " but shape ",
                                shape.ToString(), " needs ", expected));
  }
  return absl::OkStatus();
}

template <typename T>
void AppendBytes(T value, std::vector<uint8_t>* bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  bytes->insert(bytes->end(), p, p + sizeof(T));
}

// NaN bits with a sign and mantissa payload, for a float format with
// `mantissa_bits` of mantissa and `exponent_mask` in place.
uint64_t NanBits(bool negative, uint64_t payload, int total_bits,
                 int mantissa_bits) {
  uint64_t exponent_mask =
      ((uint64_t{1} << (total_bits - 1 - mantissa_bits)) - 1) << mantissa_bits;
  uint64_t sign = negative ? uint64_t{1} << (total_bits - 1) : 0;
  return sign | exponent_mask | payload;
}

absl::Status Parser::ParseScalarValue(PrimitiveType type,
                                      std::vector<uint8_t>* bytes) {
  SkipSpace();
  if (IsComplex(type)) {
    // (real, imag), each a value of the component type.
    CW_RETURN_IF_ERROR(Expect('('));
    CW_RETURN_IF_ERROR(ParseScalarValue(ComplexComponentType(type), bytes));
    CW_RETURN_IF_ERROR(Expect(','));
    CW_RETURN_IF_ERROR(ParseScalarValue(ComplexComponentType(type), bytes));
    return Expect(')');
  }
  size_t start = pos_;
  size_t end = pos_;
  while (end < text_.size() && (IsNameChar(text_[end]) || text_[end] == '+')) {
    ++end;
  }
  std::string_view token = text_.substr(start, end - start);
  // nan(0x...) payloads.
  if (end < text_.size() && text_[end] == '(' &&
      (token == "nan" || token == "-nan" || token == "+nan")) {
    size_t close = text_.find(')', end);
    if (close == std::string_view::npos) {
      pos_ = end;
      return ExpectedError(")");
    }
    end = close + 1;
    token = text_.substr(start, end - start);
  }
  if (token.empty()) return ExpectedError("value");
  auto bad = [&](std::string_view why) {
    return ErrorAt(
        start,
        absl::StrCat("invalid ", PrimitiveTypeName(type).data(), " value '",
                     AbslView(token), "'", why.empty() ? "" : ": ", AbslView(why)));
  };
  if (type == PrimitiveType::kPred) {
    if (token == "true" || token == "1") {
      AppendBytes<uint8_t>(1, bytes);
    } else if (token == "false" || token == "0") {
      AppendBytes<uint8_t>(0, bytes);
    } else {
      return bad("expected true or false");
    }
    pos_ = end;
    return absl::OkStatus();
  }
  if (IsInteger(type)) {
    std::string_view digits = token;
    bool negative = false;
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
      negative = digits[0] == '-';
      digits.remove_prefix(1);
    }
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), IsDigit)) {
      return bad("expected an integer");
    }
    uint64_t magnitude = 0;
    auto result = std::from_chars(digits.data(), digits.data() + digits.size(),
                                  magnitude);
    if (result.ec != std::errc()) return bad("out of range");
    const int bits = static_cast<int>(BitWidth(type));
    if (IsUnsignedInteger(type)) {
      if (negative && magnitude != 0) return bad("out of range");
      const uint64_t max =
          bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      if (magnitude > max) return bad("out of range");
      switch (type) {
        case PrimitiveType::kU2:
        case PrimitiveType::kU4:
        case PrimitiveType::kU8:
          AppendBytes(static_cast<uint8_t>(magnitude), bytes);
          break;
        case PrimitiveType::kU16:
          AppendBytes(static_cast<uint16_t>(magnitude), bytes);
          break;
        case PrimitiveType::kU32:
          AppendBytes(static_cast<uint32_t>(magnitude), bytes);
          break;
        default:
          AppendBytes(magnitude, bytes);
          break;
      }
    } else {
      uint64_t max_positive = (uint64_t{1} << (bits - 1)) - 1;
      uint64_t limit = negative ? max_positive + 1 : max_positive;
      if (magnitude > limit) return bad("out of range");
      int64_t value = negative ? static_cast<int64_t>(0 - magnitude)
                               : static_cast<int64_t>(magnitude);
      switch (type) {
        case PrimitiveType::kS2:
        case PrimitiveType::kS4:
          // The low `bits` bits (element_types.h).
          AppendBytes(static_cast<uint8_t>(static_cast<uint64_t>(value) &
                                           ((uint64_t{1} << bits) - 1)),
                      bytes);
          break;
        case PrimitiveType::kS8:
          AppendBytes(static_cast<int8_t>(value), bytes);
          break;
        case PrimitiveType::kS16:
          AppendBytes(static_cast<int16_t>(value), bytes);
          break;
        case PrimitiveType::kS32:
          AppendBytes(static_cast<int32_t>(value), bytes);
          break;
        default:
          AppendBytes(value, bytes);
          break;
      }
    }
    pos_ = end;
    return absl::OkStatus();
  }
  // Floating point.
  std::string_view body = token;
  bool negative = false;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (IsMinifloat(type)) {
    // The value as a double, rounded once into the format (XLA prints the
    // shortest decimal that does).
    double value;
    if (body == "nan") {
      value = std::numeric_limits<double>::quiet_NaN();
    } else if (body == "inf" || body == "infinity") {
      value = std::numeric_limits<double>::infinity();
    } else {
      if (body.empty() || !(IsDigit(body[0]) || body[0] == '.')) return bad("");
      for (char c : body) {
        if (!(IsDigit(c) || c == '.' || c == 'e' || c == 'E' || c == '-' ||
              c == '+')) {
          return bad("");
        }
      }
      std::string copy(body);
      char* parse_end = nullptr;
      value = std::strtod(copy.c_str(), &parse_end);
      if (parse_end != copy.c_str() + copy.size()) return bad("");
    }
    if (negative) value = -value;
    uint8_t encoded = VisitType(type, [&](auto tag) -> uint8_t {
      using E = decltype(tag);
      if constexpr (kIsMinifloat<E>) {
        return E::FromDouble(value).bits;
      } else {
        return 0;
      }
    });
    const float decoded = VisitType(type, [&](auto tag) -> float {
      using E = decltype(tag);
      if constexpr (kIsMinifloat<E>) {
        return static_cast<float>(E::FromBits(encoded));
      } else {
        return 0;
      }
    });
    if (std::isnan(decoded) != std::isnan(value) ||
        std::isinf(decoded) != std::isinf(value) ||
        (std::isinf(value) && std::signbit(value) != std::signbit(decoded))) {
      return bad(std::isnan(value) || std::isinf(value)
                     ? "the type has no such value"
                     : "out of range");
    }
    AppendBytes(encoded, bytes);
    pos_ = end;
    return absl::OkStatus();
  }
  int total_bits = static_cast<int>(ByteWidth(type)) * 8;
  int mantissa_bits = type == PrimitiveType::kF64    ? 52
                      : type == PrimitiveType::kF32  ? 23
                      : type == PrimitiveType::kBF16 ? 7
                                                     : 10;
  auto append_bits = [&](uint64_t bits) {
    switch (type) {
      case PrimitiveType::kF64:
        AppendBytes(bits, bytes);
        break;
      case PrimitiveType::kF32:
        AppendBytes(static_cast<uint32_t>(bits), bytes);
        break;
      default:
        AppendBytes(static_cast<uint16_t>(bits), bytes);
        break;
    }
  };
  if (body.substr(0, 3) == "nan") {
    uint64_t payload = uint64_t{1} << (mantissa_bits - 1);  // quiet NaN
    if (body.size() > 3) {
      std::string_view hex = body.substr(3);
      if (hex.size() < 5 || hex.substr(0, 3) != "(0x" || hex.back() != ')') {
        return bad("expected nan or nan(0x<payload>)");
      }
      hex = hex.substr(3, hex.size() - 4);
      auto result =
          std::from_chars(hex.data(), hex.data() + hex.size(), payload, 16);
      if (result.ec != std::errc() || result.ptr != hex.data() + hex.size() ||
          payload == 0 || payload >= (uint64_t{1} << mantissa_bits)) {
        return bad("NaN payload does not fit the mantissa");
      }
    }
    append_bits(NanBits(negative, payload, total_bits, mantissa_bits));
    pos_ = end;
    return absl::OkStatus();
  }
  if (body.empty() || !(IsDigit(body[0]) || body[0] == '.' || body == "inf" ||
                        body == "infinity")) {
    return bad("");
  }
  double as_double = 0;
  float as_float = 0;
  if (body == "inf" || body == "infinity") {
    as_double = std::numeric_limits<double>::infinity();
    as_float = std::numeric_limits<float>::infinity();
  } else {
    for (char c : body) {
      if (!(IsDigit(c) || c == '.' || c == 'e' || c == 'E' || c == '-' ||
            c == '+')) {
        return bad("");
      }
    }
    std::string copy(body);
    char* parse_end = nullptr;
    errno = 0;
    if (type == PrimitiveType::kF64) {
      as_double = std::strtod(copy.c_str(), &parse_end);
    } else {
      as_float = std::strtof(copy.c_str(), &parse_end);
    }
    if (parse_end != copy.c_str() + copy.size()) return bad("");
    if (errno == ERANGE && (std::isinf(as_double) || std::isinf(as_float))) {
      return bad("out of range");
    }
  }
  if (negative) {
    as_double = -as_double;
    as_float = -as_float;
  }
  switch (type) {
    case PrimitiveType::kF64:
      AppendBytes(as_double, bytes);
      break;
    case PrimitiveType::kF32:
      AppendBytes(as_float, bytes);
      break;
    case PrimitiveType::kBF16: {
      if (std::isfinite(as_float) &&
          !std::isfinite(static_cast<float>(BF16(as_float)))) {
        return bad("out of range");
      }
      AppendBytes(BF16(as_float).bits, bytes);
      break;
    }
    default: {
      if (std::isfinite(as_float) &&
          !std::isfinite(static_cast<float>(F16(as_float)))) {
        return bad("out of range");
      }
      AppendBytes(F16(as_float).bits, bytes);
      break;
    }
  }
  pos_ = end;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Attribute values.

bool IsPaddingChar(char c) {
  return IsDigit(c) || c == '_' || c == 'x' || c == '-' || c == '+';
}

// "1_2x3_4_1" into groups of integers: {{1,2},{3,4,1}}.
bool SplitDims(std::string_view text, std::vector<std::vector<int64_t>>* out) {
  out->clear();
  if (text.empty()) return true;
  size_t start = 0;
  while (true) {
    size_t x = text.find('x', start);
    std::string_view part =
        text.substr(start, x == std::string_view::npos ? std::string_view::npos
                                                       : x - start);
    std::vector<int64_t> numbers;
    size_t p = 0;
    while (true) {
      size_t u = part.find('_', p);
      std::string_view number = part.substr(
          p, u == std::string_view::npos ? std::string_view::npos : u - p);
      if (!number.empty() && number[0] == '+') number.remove_prefix(1);
      int64_t value = 0;
      auto result =
          std::from_chars(number.data(), number.data() + number.size(), value);
      if (number.empty() || result.ec != std::errc() ||
          result.ptr != number.data() + number.size()) {
        return false;
      }
      numbers.push_back(value);
      if (u == std::string_view::npos) break;
      p = u + 1;
    }
    out->push_back(std::move(numbers));
    if (x == std::string_view::npos) break;
    start = x + 1;
  }
  return true;
}

absl::StatusOr<std::vector<SliceDimension>> Parser::ParseSlice() {
  CW_RETURN_IF_ERROR(Expect('{'));
  std::vector<SliceDimension> slice;
  if (TryConsume('}')) return slice;
  do {
    CW_RETURN_IF_ERROR(Expect('['));
    SliceDimension dim;
    CW_ASSIGN_OR_RETURN(dim.start, ParseInt());
    CW_RETURN_IF_ERROR(Expect(':'));
    CW_ASSIGN_OR_RETURN(dim.limit, ParseInt());
    if (TryConsume(':')) {
      CW_ASSIGN_OR_RETURN(dim.stride, ParseInt());
    }
    CW_RETURN_IF_ERROR(Expect(']'));
    slice.push_back(dim);
  } while (TryConsume(','));
  CW_RETURN_IF_ERROR(Expect('}'));
  return slice;
}

absl::StatusOr<std::vector<PaddingDimension>> Parser::ParsePadding() {
  SkipSpace();
  size_t start = pos_;
  std::string_view text = ScanChars(IsPaddingChar);
  std::vector<std::vector<int64_t>> groups;
  std::vector<PaddingDimension> padding;
  if (!SplitDims(text, &groups)) {
    return ErrorAt(start, absl::StrCat("expected padding like '0_0_0x1_1_0', "
                                       "got '",
                                       AbslView(text), "'"));
  }
  for (const auto& group : groups) {
    if (group.size() != 2 && group.size() != 3) {
      return ErrorAt(start, absl::StrCat("padding '", AbslView(text),
                                         "' needs low_high[_interior] per "
                                         "dimension"));
    }
    PaddingDimension dim;
    dim.low = group[0];
    dim.high = group[1];
    if (group.size() == 3) dim.interior = group[2];
    padding.push_back(dim);
  }
  return padding;
}

absl::StatusOr<std::vector<WindowDimension>> Parser::ParseWindow() {
  CW_RETURN_IF_ERROR(Expect('{'));
  std::vector<std::pair<std::string, std::vector<std::vector<int64_t>>>> fields;
  size_t start = pos_;
  while (Peek() != '}') {
    if (AtEnd()) return ExpectedError("}");
    SkipSpace();
    size_t key_pos = pos_;
    CW_ASSIGN_OR_RETURN(std::string key, ParseAttributeName());
    if (key != "size" && key != "stride" && key != "pad" &&
        key != "lhs_dilate" && key != "rhs_dilate" && key != "rhs_reversal") {
      return ErrorAt(key_pos, absl::StrCat("unknown window field '", key,
                                           "' (expected size, stride, pad, "
                                           "lhs_dilate, rhs_dilate, "
                                           "rhs_reversal)"));
    }
    for (const auto& field : fields) {
      if (field.first == key) {
        return ErrorAt(key_pos,
                       absl::StrCat("window field '", key, "' given twice"));
      }
    }
    CW_RETURN_IF_ERROR(Expect('='));
    SkipSpace();
    size_t value_pos = pos_;
    std::string_view value = ScanChars(IsPaddingChar);
    std::vector<std::vector<int64_t>> groups;
    if (value.empty() || !SplitDims(value, &groups)) {
      return ErrorAt(value_pos,
                     absl::StrCat("bad window ", key, " '", AbslView(value), "'"));
    }
    for (const auto& group : groups) {
      if (group.size() != (key == "pad" ? 2u : 1u)) {
        return ErrorAt(value_pos,
                       absl::StrCat("bad window ", key, " '", AbslView(value), "'"));
      }
    }
    fields.emplace_back(std::move(key), std::move(groups));
  }
  CW_RETURN_IF_ERROR(Expect('}'));
  std::vector<WindowDimension> window;
  if (fields.empty()) return window;
  size_t rank = 0;
  bool have_size = false;
  for (const auto& field : fields) {
    if (field.first == "size") {
      rank = field.second.size();
      have_size = true;
    }
  }
  if (!have_size) return ErrorAt(start, "window has no size=");
  window.resize(rank);
  for (const auto& [key, groups] : fields) {
    if (groups.size() != rank) {
      return ErrorAt(start, absl::StrCat("window ", key, " has ", groups.size(),
                                         " dimensions but size has ", rank));
    }
    for (size_t i = 0; i < rank; ++i) {
      WindowDimension& dim = window[i];
      if (key == "size") {
        dim.size = groups[i][0];
      } else if (key == "stride") {
        dim.stride = groups[i][0];
      } else if (key == "pad") {
        dim.padding_low = groups[i][0];
        dim.padding_high = groups[i][1];
      } else if (key == "lhs_dilate") {
        dim.base_dilation = groups[i][0];
      } else if (key == "rhs_dilate") {
        dim.window_dilation = groups[i][0];
      } else {
        if (groups[i][0] != 0 && groups[i][0] != 1) {
          return ErrorAt(start, "window rhs_reversal entries must be 0 or 1");
        }
        dim.window_reversal = groups[i][0] == 1;
      }
    }
  }
  return window;
}

bool IsDimLabelChar(char c) {
  return (c >= 'a' && c <= 'z') || IsDigit(c) || c == '_' || c == '-' ||
         c == '>';
}

absl::StatusOr<ConvolutionDimensionNumbers> Parser::ParseDimLabels() {
  SkipSpace();
  size_t start = pos_;
  std::string_view text = ScanChars(IsDimLabelChar);
  auto bad = [&](std::string_view why) {
    return ErrorAt(start,
                   absl::StrCat("bad dim_labels '", AbslView(text), "': ", AbslView(why)));
  };
  size_t underscore = text.find('_');
  size_t arrow = text.find("->");
  if (underscore == std::string_view::npos || arrow == std::string_view::npos ||
      arrow < underscore) {
    return bad("expected the form b01f_01io->b01f");
  }
  std::string_view lhs = text.substr(0, underscore);
  std::string_view rhs = text.substr(underscore + 1, arrow - underscore - 1);
  std::string_view out = text.substr(arrow + 2);
  if (lhs.size() < 2 || lhs.size() != rhs.size() || lhs.size() != out.size()) {
    return bad("the three parts must have the same length");
  }
  if (lhs.size() > 12) return bad("more than 10 spatial dimensions");
  const size_t spatial = lhs.size() - 2;
  ConvolutionDimensionNumbers numbers;
  numbers.input_spatial_dimensions.assign(spatial, -1);
  numbers.kernel_spatial_dimensions.assign(spatial, -1);
  numbers.output_spatial_dimensions.assign(spatial, -1);
  // Parses one part: `a` and `b` are the two non-spatial labels.
  auto parse_part = [&](std::string_view part, char a, char b, int64_t* a_dim,
                        int64_t* b_dim, std::vector<int64_t>* spatial_dims) {
    bool seen_a = false, seen_b = false;
    for (size_t i = 0; i < part.size(); ++i) {
      char c = part[i];
      if (c == a && !seen_a) {
        *a_dim = static_cast<int64_t>(i);
        seen_a = true;
      } else if (c == b && !seen_b) {
        *b_dim = static_cast<int64_t>(i);
        seen_b = true;
      } else if (IsDigit(c) && static_cast<size_t>(c - '0') < spatial &&
                 (*spatial_dims)[static_cast<size_t>(c - '0')] == -1) {
        (*spatial_dims)[static_cast<size_t>(c - '0')] = static_cast<int64_t>(i);
      } else {
        return false;
      }
    }
    return seen_a && seen_b;
  };
  if (!parse_part(lhs, 'b', 'f', &numbers.input_batch_dimension,
                  &numbers.input_feature_dimension,
                  &numbers.input_spatial_dimensions)) {
    return bad("input labels must be b, f and each spatial digit once");
  }
  if (!parse_part(rhs, 'i', 'o', &numbers.kernel_input_feature_dimension,
                  &numbers.kernel_output_feature_dimension,
                  &numbers.kernel_spatial_dimensions)) {
    return bad("kernel labels must be i, o and each spatial digit once");
  }
  if (!parse_part(out, 'b', 'f', &numbers.output_batch_dimension,
                  &numbers.output_feature_dimension,
                  &numbers.output_spatial_dimensions)) {
    return bad("output labels must be b, f and each spatial digit once");
  }
  return numbers;
}

// `[G,S]<=[dims]T(perm)` (replica groups) or `<=[dims]T(perm)` (after a
// sharding's tile dims, `replica_groups` false: no [G,S] part).
absl::StatusOr<ReplicaGroups::Iota> Parser::ParseIota(bool replica_groups) {
  SkipSpace();
  size_t start = pos_;
  ReplicaGroups::Iota iota;
  if (replica_groups) {
    CW_RETURN_IF_ERROR(Expect('['));
    CW_ASSIGN_OR_RETURN(iota.num_groups, ParseNonNegativeInt("group count"));
    CW_RETURN_IF_ERROR(Expect(','));
    CW_ASSIGN_OR_RETURN(iota.group_size, ParseNonNegativeInt("group size"));
    CW_RETURN_IF_ERROR(Expect(']'));
  }
  CW_RETURN_IF_ERROR(Expect("<="));
  CW_RETURN_IF_ERROR(Expect('['));
  int64_t total = 1;
  do {
    SkipSpace();
    size_t dim_pos = pos_;
    CW_ASSIGN_OR_RETURN(int64_t dim, ParseInt());
    if (dim < 1) return ErrorAt(dim_pos, "iota dimensions must be positive");
    if (iota.reshape_dims.size() >= static_cast<size_t>(kMaxRank)) {
      return ErrorAt(dim_pos, "iota has too many dimensions");
    }
    if (!MultiplyBounded(total, dim, kMaxIotaDevices, &total)) {
      return ErrorAt(start, absl::StrCat("iota device list has more than ",
                                         kMaxIotaDevices, " devices"));
    }
    iota.reshape_dims.push_back(dim);
  } while (TryConsume(','));
  CW_RETURN_IF_ERROR(Expect(']'));
  SkipSpace();
  if (pos_ < text_.size() && text_[pos_] == 'T' && PeekNext() == '(') {
    size_t perm_pos = pos_;
    pos_ += 2;
    do {
      CW_ASSIGN_OR_RETURN(int64_t p, ParseInt());
      iota.transpose_perm.push_back(p);
    } while (TryConsume(','));
    CW_RETURN_IF_ERROR(Expect(')'));
    std::vector<bool> used(iota.reshape_dims.size(), false);
    bool valid = iota.transpose_perm.size() == iota.reshape_dims.size();
    for (int64_t p : iota.transpose_perm) {
      if (!valid) break;
      if (p < 0 || static_cast<size_t>(p) >= used.size() ||
          used[static_cast<size_t>(p)]) {
        valid = false;
      } else {
        used[static_cast<size_t>(p)] = true;
      }
    }
    if (!valid) {
      return ErrorAt(
          perm_pos, absl::StrCat("T(", absl::StrJoin(iota.transpose_perm, ","),
                                 ") is not a permutation of the ",
                                 iota.reshape_dims.size(), " iota dimensions"));
    }
  }
  if (replica_groups) {
    int64_t product = 0;
    if (!MultiplyBounded(iota.num_groups, iota.group_size, kMaxIotaDevices,
                         &product) ||
        product != total) {
      return ErrorAt(start,
                     absl::StrCat("replica groups [", iota.num_groups, ",",
                                  iota.group_size, "] do not cover the ", total,
                                  " devices of the iota"));
    }
  }
  return iota;
}

absl::StatusOr<ReplicaGroups> Parser::ParseReplicaGroups() {
  SkipSpace();
  size_t start = pos_;
  ReplicaGroups groups;
  char c = Peek();
  if (c == '[') {
    CW_ASSIGN_OR_RETURN(ReplicaGroups::Iota iota, ParseIota(true));
    CW_RETURN_IF_ERROR(
        ChargeExpansion(start, iota.num_groups * (iota.group_size + 4)));
    groups.iota = std::move(iota);
    absl::StatusOr<std::vector<std::vector<int64_t>>> expanded =
        ExpandReplicaGroups(groups);
    if (!expanded.ok()) {
      return ErrorAt(start, std::string(expanded.status().message()));
    }
    groups.groups = *std::move(expanded);
    return groups;
  }
  if (PeekWord() == "mesh") return ParseMeshReplicaGroups(start);
  CW_RETURN_IF_ERROR(Expect('{'));
  if (TryConsume('}')) return groups;
  do {
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> group, ParseIntList());
    groups.groups.push_back(std::move(group));
  } while (TryConsume(','));
  CW_RETURN_IF_ERROR(Expect('}'));
  return groups;
}

// `mesh['a'=2,'b'=4] {'a'}`, `mesh[a=8] {a:(2)2}` and the form with
// `, device_ids=(...)` after the axes: groups span the listed axes.
absl::StatusOr<ReplicaGroups> Parser::ParseMeshReplicaGroups(size_t start) {
  TryKeyword("mesh");
  auto parse_axis_name = [&]() -> absl::StatusOr<std::string> {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '\'') {
      CW_ASSIGN_OR_RETURN(size_t end, SkipString(pos_));
      std::string name(text_.substr(pos_ + 1, end - pos_ - 2));
      pos_ = end;
      return name;
    }
    return ParseName("mesh axis name");
  };
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  int64_t total = 1;
  CW_RETURN_IF_ERROR(Expect('['));
  do {
    CW_ASSIGN_OR_RETURN(std::string name, parse_axis_name());
    CW_RETURN_IF_ERROR(Expect('='));
    SkipSpace();
    size_t size_pos = pos_;
    CW_ASSIGN_OR_RETURN(int64_t size, ParseInt());
    if (size < 1) return ErrorAt(size_pos, "mesh axis sizes must be positive");
    if (names.size() >= static_cast<size_t>(kMaxRank) ||
        !MultiplyBounded(total, size, kMaxIotaDevices, &total)) {
      return ErrorAt(start, "mesh is too large");
    }
    names.push_back(std::move(name));
    sizes.push_back(size);
  } while (TryConsume(','));
  CW_RETURN_IF_ERROR(Expect(']'));
  std::vector<int64_t> device_ids;
  bool explicit_ids = false;
  {
    size_t save = pos_;
    if (TryConsume(',') && TryKeyword("device_ids")) {
      explicit_ids = true;
      CW_RETURN_IF_ERROR(Expect('='));
      CW_RETURN_IF_ERROR(Expect('('));
      SkipSpace();
      size_t ids_pos = pos_;
      if (Peek() == '[') {
        // An iota device order: `[2,4]T(1,0)` (what XLA prints) or
        // `[2,4]<=[8]`-style with the iota part only.
        std::vector<int64_t> dims;
        int64_t count = 1;
        ++pos_;
        do {
          CW_ASSIGN_OR_RETURN(int64_t dim, ParseInt());
          if (dim < 1 || dims.size() >= static_cast<size_t>(kMaxRank) ||
              !MultiplyBounded(count, dim, kMaxIotaDevices, &count)) {
            return ErrorAt(ids_pos, "bad mesh device_ids iota");
          }
          dims.push_back(dim);
        } while (TryConsume(','));
        CW_RETURN_IF_ERROR(Expect(']'));
        std::vector<int64_t> perm;
        SkipSpace();
        if (pos_ < text_.size() && text_[pos_] == 'T' && PeekNext() == '(') {
          pos_ += 2;
          do {
            CW_ASSIGN_OR_RETURN(int64_t p, ParseInt());
            perm.push_back(p);
          } while (TryConsume(','));
          CW_RETURN_IF_ERROR(Expect(')'));
          std::vector<int64_t> sorted = perm;
          std::sort(sorted.begin(), sorted.end());
          for (size_t i = 0; i < sorted.size(); ++i) {
            if (sorted.size() != dims.size() ||
                sorted[i] != static_cast<int64_t>(i)) {
              return ErrorAt(ids_pos,
                             "mesh device_ids transpose is not a "
                             "permutation of its dimensions");
            }
          }
        }
        if (count != total) {
          return ErrorAt(ids_pos,
                         absl::StrCat("mesh device_ids has ", count,
                                      " entries, the mesh has ", total));
        }
        absl::StatusOr<std::vector<int64_t>> ids = ExpandIota(dims, perm);
        if (!ids.ok()) {
          return ErrorAt(ids_pos, std::string(ids.status().message()));
        }
        device_ids = *std::move(ids);
      } else {
        do {
          CW_ASSIGN_OR_RETURN(int64_t id, ParseNonNegativeInt("device id"));
          device_ids.push_back(id);
        } while (TryConsume(','));
      }
      CW_RETURN_IF_ERROR(Expect(')'));
      if (static_cast<int64_t>(device_ids.size()) != total) {
        return ErrorAt(start,
                       absl::StrCat("mesh device_ids has ", device_ids.size(),
                                    " entries, the mesh has ", total));
      }
    } else {
      pos_ = save;
    }
  }
  // The grouped axes.
  struct AxisRef {
    size_t axis;
    int64_t pre_size = 0;  // 0: the whole axis.
    int64_t size = 0;
  };
  std::vector<AxisRef> refs;
  CW_RETURN_IF_ERROR(Expect('{'));
  if (!TryConsume('}')) {
    do {
      SkipSpace();
      size_t ref_pos = pos_;
      CW_ASSIGN_OR_RETURN(std::string name, parse_axis_name());
      auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end()) {
        return ErrorAt(ref_pos, absl::StrCat("unknown mesh axis '", name, "'"));
      }
      if (refs.size() >= static_cast<size_t>(kMaxRank)) {
        return ErrorAt(ref_pos, "too many mesh axes in replica groups");
      }
      AxisRef ref{static_cast<size_t>(it - names.begin())};
      if (TryConsume(':')) {
        CW_RETURN_IF_ERROR(Expect('('));
        CW_ASSIGN_OR_RETURN(ref.pre_size, ParseInt());
        CW_RETURN_IF_ERROR(Expect(')'));
        CW_ASSIGN_OR_RETURN(ref.size, ParseInt());
        int64_t axis_size = sizes[ref.axis];
        if (ref.pre_size < 1 || ref.size < 2 || axis_size % ref.pre_size != 0 ||
            (axis_size / ref.pre_size) % ref.size != 0) {
          return ErrorAt(ref_pos, absl::StrCat("sub-axis ", name, ":(",
                                               ref.pre_size, ")", ref.size,
                                               " does not divide the axis of "
                                               "size ",
                                               axis_size));
        }
      }
      for (const AxisRef& other : refs) {
        if (other.axis == ref.axis &&
            (other.pre_size == 0 || ref.pre_size == 0)) {
          return ErrorAt(
              ref_pos, absl::StrCat("mesh axis '", name, "' is grouped twice"));
        }
      }
      refs.push_back(ref);
    } while (TryConsume(','));
    CW_RETURN_IF_ERROR(Expect('}'));
  }
  // Split each mesh axis into the sub-dims the refs name, then move the
  // grouped sub-dims last (in the order listed).
  std::vector<int64_t> reshape_dims;
  std::vector<int64_t> ref_dim(refs.size(), -1);
  for (size_t axis = 0; axis < sizes.size(); ++axis) {
    std::vector<size_t> on_axis;
    for (size_t r = 0; r < refs.size(); ++r) {
      if (refs[r].axis == axis) on_axis.push_back(r);
    }
    if (on_axis.empty()) {
      reshape_dims.push_back(sizes[axis]);
      continue;
    }
    if (on_axis.size() == 1 && refs[on_axis[0]].pre_size == 0) {
      ref_dim[on_axis[0]] = static_cast<int64_t>(reshape_dims.size());
      reshape_dims.push_back(sizes[axis]);
      continue;
    }
    std::sort(on_axis.begin(), on_axis.end(), [&](size_t x, size_t y) {
      return refs[x].pre_size < refs[y].pre_size;
    });
    int64_t prefix = 1;
    for (size_t r : on_axis) {
      if (refs[r].pre_size % prefix != 0 || refs[r].pre_size < prefix) {
        return ErrorAt(start, "overlapping mesh sub-axes");
      }
      if (refs[r].pre_size != prefix) {
        reshape_dims.push_back(refs[r].pre_size / prefix);
        prefix = refs[r].pre_size;
      }
      ref_dim[r] = static_cast<int64_t>(reshape_dims.size());
      reshape_dims.push_back(refs[r].size);
      prefix *= refs[r].size;
    }
    if (sizes[axis] % prefix != 0) {
      return ErrorAt(start, "mesh sub-axes do not divide their axis");
    }
    if (prefix != sizes[axis]) reshape_dims.push_back(sizes[axis] / prefix);
  }
  std::vector<int64_t> perm;
  std::vector<bool> grouped(reshape_dims.size(), false);
  for (int64_t d : ref_dim) grouped[static_cast<size_t>(d)] = true;
  for (size_t d = 0; d < reshape_dims.size(); ++d) {
    if (!grouped[d]) perm.push_back(static_cast<int64_t>(d));
  }
  int64_t group_size = 1;
  for (int64_t d : ref_dim) {
    perm.push_back(d);
    group_size *= reshape_dims[static_cast<size_t>(d)];
  }
  CW_RETURN_IF_ERROR(ChargeExpansion(start, total + 4 * (total / group_size)));
  absl::StatusOr<std::vector<int64_t>> expanded =
      ExpandIota(reshape_dims, perm);
  if (!expanded.ok()) {
    return ErrorAt(start, std::string(expanded.status().message()));
  }
  const std::vector<int64_t>& order = *expanded;
  ReplicaGroups groups;
  int64_t num_groups = total / group_size;
  for (int64_t g = 0; g < num_groups; ++g) {
    std::vector<int64_t> group;
    for (int64_t i = 0; i < group_size; ++i) {
      int64_t index = order[static_cast<size_t>(g * group_size + i)];
      group.push_back(explicit_ids ? device_ids[static_cast<size_t>(index)]
                                   : index);
    }
    groups.groups.push_back(std::move(group));
  }
  if (!explicit_ids) {
    ReplicaGroups::Iota iota;
    iota.num_groups = num_groups;
    iota.group_size = group_size;
    iota.reshape_dims = std::move(reshape_dims);
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) {
      identity &= perm[i] == static_cast<int64_t>(i);
    }
    if (!identity) iota.transpose_perm = std::move(perm);
    groups.iota = std::move(iota);
  }
  return groups;
}

absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>>
Parser::ParseSourceTargetPairs() {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  CW_RETURN_IF_ERROR(Expect('{'));
  if (TryConsume('}')) return pairs;
  do {
    SkipSpace();
    size_t pair_pos = pos_;
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> pair, ParseIntList());
    if (pair.size() != 2) {
      return ErrorAt(pair_pos,
                     "source_target_pairs entries must be "
                     "{source,target}");
    }
    pairs.emplace_back(pair[0], pair[1]);
  } while (TryConsume(','));
  CW_RETURN_IF_ERROR(Expect('}'));
  return pairs;
}

// ---------------------------------------------------------------------------
// Shardings.

absl::StatusOr<Sharding> Parser::ParseShardingAt(int depth) {
  SkipSpace();
  size_t start = pos_;
  if (depth > kMaxNestingDepth) {
    return ErrorAt(start, absl::StrCat("sharding nests deeper than ",
                                       kMaxNestingDepth, " levels"));
  }
  CW_RETURN_IF_ERROR(Expect('{'));
  Sharding sharding;
  if (Peek() == '{' || Peek() == '}') {
    sharding.kind = Sharding::Kind::kTuple;
    if (TryConsume('}')) return sharding;
    do {
      CW_ASSIGN_OR_RETURN(Sharding element, ParseShardingAt(depth + 1));
      sharding.tuple_elements.push_back(std::move(element));
    } while (TryConsume(','));
    CW_RETURN_IF_ERROR(Expect('}'));
    return sharding;
  }
  bool unknown = false;
  std::string_view word = PeekWord();
  if (word == "replicated") {
    pos_ += word.size();
    sharding.kind = Sharding::Kind::kReplicated;
  } else if (word == "manual") {
    pos_ += word.size();
    sharding.kind = Sharding::Kind::kManual;
  } else if (word == "maximal") {
    pos_ += word.size();
    sharding.kind = Sharding::Kind::kMaximal;
    if (!TryKeyword("device")) return ExpectedError("device");
    CW_RETURN_IF_ERROR(Expect('='));
    CW_ASSIGN_OR_RETURN(sharding.maximal_device,
                        ParseNonNegativeInt("maximal device"));
  } else if (word == "devices") {
    pos_ += word.size();
    sharding.kind = Sharding::Kind::kTiled;
    CW_RETURN_IF_ERROR(Expect('='));
    CW_RETURN_IF_ERROR(Expect('['));
    SkipSpace();
    size_t dims_pos = pos_;
    int64_t total = 1;
    do {
      SkipSpace();
      size_t dim_pos = pos_;
      CW_ASSIGN_OR_RETURN(int64_t dim, ParseInt());
      if (dim < 1) return ErrorAt(dim_pos, "tile dimensions must be positive");
      if (sharding.tile_dims.size() >= static_cast<size_t>(kMaxRank) ||
          !MultiplyBounded(total, dim, kMaxIotaDevices, &total)) {
        return ErrorAt(dims_pos, "tile assignment is too large");
      }
      sharding.tile_dims.push_back(dim);
    } while (TryConsume(','));
    CW_RETURN_IF_ERROR(Expect(']'));
    SkipSpace();
    size_t devices_pos = pos_;
    if (text_.substr(pos_, 2) == "<=") {
      CW_ASSIGN_OR_RETURN(ReplicaGroups::Iota iota, ParseIota(false));
      int64_t iota_total = 1;
      for (int64_t d : iota.reshape_dims) iota_total *= d;
      if (iota_total != total) {
        return ErrorAt(
            devices_pos,
            absl::StrCat("iota device list has ", iota_total,
                         " devices but the tile assignment needs ", total));
      }
      CW_RETURN_IF_ERROR(ChargeExpansion(devices_pos, total));
      absl::StatusOr<std::vector<int64_t>> devices =
          ExpandIota(iota.reshape_dims, iota.transpose_perm);
      if (!devices.ok()) {
        return ErrorAt(devices_pos, std::string(devices.status().message()));
      }
      sharding.tile_devices = *std::move(devices);
      sharding.iota = std::move(iota);
    } else {
      do {
        CW_ASSIGN_OR_RETURN(int64_t device, ParseNonNegativeInt("device"));
        sharding.tile_devices.push_back(device);
        // Stop at a ',' that starts the next tuple element.
        SkipSpace();
        if (!(Peek() == ',' && pos_ + 1 < text_.size())) break;
        size_t save = pos_;
        ++pos_;
        SkipSpace();
        bool more = pos_ < text_.size() && IsDigit(text_[pos_]);
        pos_ = save;
        if (!more) break;
        ++pos_;
      } while (true);
      if (static_cast<int64_t>(sharding.tile_devices.size()) != total) {
        return ErrorAt(devices_pos,
                       absl::StrCat("tile assignment [",
                                    absl::StrJoin(sharding.tile_dims, ","),
                                    "] needs ", total, " devices, got ",
                                    sharding.tile_devices.size()));
      }
    }
  } else {
    unknown = true;
  }
  while (!unknown && Peek() != '}') {
    if (AtEnd()) return ExpectedError("}");
    std::string_view option = PeekWord();
    if (option == "last_tile_dim_replicate" &&
        sharding.kind == Sharding::Kind::kTiled &&
        !sharding.last_tile_dim_replicate) {
      pos_ += option.size();
      sharding.last_tile_dim_replicate = true;
    } else if (option == "last_tile_dims" &&
               sharding.kind == Sharding::Kind::kTiled &&
               sharding.last_tile_dims.empty()) {
      pos_ += option.size();
      CW_RETURN_IF_ERROR(Expect('='));
      CW_RETURN_IF_ERROR(Expect('{'));
      do {
        std::string_view type = PeekWord();
        if (type.empty()) return ExpectedError("sharding type");
        pos_ += type.size();
        sharding.last_tile_dims.emplace_back(type);
      } while (TryConsume(','));
      CW_RETURN_IF_ERROR(Expect('}'));
    } else if (option == "metadata") {
      // Sharding metadata only records where a sharding came from.
      pos_ += option.size();
      CW_RETURN_IF_ERROR(Expect('='));
      CW_ASSIGN_OR_RETURN(std::string_view ignored, ScanBalancedBraces());
      (void)ignored;
    } else {
      unknown = true;
    }
  }
  if (unknown) {
    pos_ = start;
    CW_ASSIGN_OR_RETURN(std::string_view text, ScanBalancedBraces());
    Sharding result;
    result.kind = Sharding::Kind::kUnknown;
    result.unknown_text = std::string(text);
    return result;
  }
  CW_RETURN_IF_ERROR(Expect('}'));
  if (sharding.kind == Sharding::Kind::kTiled) {
    size_t extra = (sharding.last_tile_dim_replicate ? 1 : 0) +
                   sharding.last_tile_dims.size();
    if (sharding.tile_dims.size() < extra) {
      return ErrorAt(start,
                     "tile assignment has fewer dimensions than its "
                     "replicated/subgroup dimensions");
    }
  }
  return sharding;
}

// ---------------------------------------------------------------------------
// Entry points.

absl::StatusOr<std::unique_ptr<Module>> Parser::ParseWholeModule() {
  absl::Status status = [&]() -> absl::Status {
    CW_RETURN_IF_ERROR(ParseHeader());
    CW_RETURN_IF_ERROR(ParseStackFrameBlock());
    while (!AtEnd()) CW_RETURN_IF_ERROR(ParseComputation());
    return absl::OkStatus();
  }();
  std::unique_ptr<Module> module(module_);
  module_ = nullptr;
  CW_RETURN_IF_ERROR(status);
  if (module->computations().empty()) {
    return ErrorAt(text_.size(), "module has no computations");
  }
  for (const PendingCall& call : pending_calls_) {
    auto it = computations_.find(call.name);
    if (it == computations_.end()) {
      return ErrorAt(call.pos,
                     absl::StrCat("unknown computation '%", call.name, "'"));
    }
    call.instruction->called_computations[call.slot] = it->second;
  }
  if (module->entry() == nullptr) {
    Computation* last = module->computations().back().get();
    last->set_is_entry(true);
    module->set_entry(last);
  }
  return module;
}

absl::StatusOr<Shape> Parser::ParseWholeShape() {
  CW_ASSIGN_OR_RETURN(Shape shape, ParseShapeAt(0));
  if (!AtEnd()) return ExpectedError("end of shape");
  return shape;
}

absl::StatusOr<Sharding> Parser::ParseWholeSharding() {
  CW_ASSIGN_OR_RETURN(Sharding sharding, ParseShardingAt(0));
  if (!AtEnd()) return ExpectedError("end of sharding");
  return sharding;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Module>> ParseModule(std::string_view text) {
  Parser parser(text);
  return parser.ParseWholeModule();
}

absl::StatusOr<Sharding> ParseSharding(std::string_view text) {
  Parser parser(text);
  return parser.ParseWholeSharding();
}

absl::StatusOr<Shape> ParseShape(std::string_view text) {
  Parser parser(text);
  return parser.ParseWholeShape();
}

}  // namespace causeway::hlo
