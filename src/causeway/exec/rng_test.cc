// Tests for rng-bit-generator. The expected bits are XLA's, drawn on CPU by
// testdata/generate_rng.py (JAX 0.10.2) into testdata/rng_bits.txt, one
// case per line; regenerate or --verify them with that script.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "causeway/exec/kernels.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace rng_test {

using hlo::PrimitiveType;
using hlo::RandomAlgorithm;
using hlo::Shape;
using ::testing::ElementsAreArray;

Literal State(std::vector<uint64_t> values) {
  Literal state{
      Shape(PrimitiveType::kU64, {static_cast<int64_t>(values.size())})};
  std::copy(values.begin(), values.end(),
            state.mutable_data<uint64_t>().begin());
  return state;
}

absl::StatusOr<Literal> Generate(RandomAlgorithm algorithm,
                                 std::vector<uint64_t> state,
                                 PrimitiveType type,
                                 std::vector<int64_t> dims) {
  Instruction instr;
  instr.name = "rng";
  instr.opcode = hlo::Opcode::kRngBitGenerator;
  instr.rng_algorithm = algorithm;
  Shape state_shape(PrimitiveType::kU64, {static_cast<int64_t>(state.size())});
  instr.shape = Shape::Tuple({state_shape, Shape(type, std::move(dims))});
  return EvalRngBitGenerator(instr, State(std::move(state)));
}

// One line of rng_bits.txt.
struct RngCase {
  std::string name;
  RandomAlgorithm algorithm = RandomAlgorithm::kDefault;
  std::vector<uint64_t> state;
  PrimitiveType type = PrimitiveType::kU32;
  std::vector<int64_t> dims;
  std::vector<uint64_t> bits;  // Widened to 64 bits.
  std::vector<uint64_t> new_state;
};

std::vector<uint64_t> Hexes(const std::string& field) {
  std::vector<uint64_t> values;
  if (field == "-") return values;
  for (absl::string_view piece : absl::StrSplit(field, ',')) {
    uint64_t value = 0;
    EXPECT_TRUE(absl::SimpleHexAtoi(piece, &value)) << piece;
    values.push_back(value);
  }
  return values;
}

std::vector<RngCase> ReadCases() {
  const auto path =
      std::filesystem::path(__FILE__).parent_path() / "testdata/rng_bits.txt";
  std::ifstream in(path);
  std::vector<RngCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() != 7) continue;  // CasesAreRead reports a short file.
    RngCase c;
    c.name = f[0];
    c.algorithm = f[1] == "THREE_FRY" ? RandomAlgorithm::kThreeFry
                  : f[1] == "PHILOX"  ? RandomAlgorithm::kPhilox
                                      : RandomAlgorithm::kDefault;
    c.state = Hexes(f[2]);
    c.type = f[3] == "u8"    ? PrimitiveType::kU8
             : f[3] == "u16" ? PrimitiveType::kU16
             : f[3] == "u64" ? PrimitiveType::kU64
                             : PrimitiveType::kU32;
    if (f[4] != "-") {
      for (absl::string_view d : absl::StrSplit(f[4], ',')) {
        int64_t dim = 0;
        EXPECT_TRUE(absl::SimpleAtoi(d, &dim)) << d;
        c.dims.push_back(dim);
      }
    }
    c.bits = Hexes(f[5]);
    c.new_state = Hexes(f[6]);
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<RngCase>& Cases() {
  static const std::vector<RngCase> cases = ReadCases();
  return cases;
}

// The drawn bits widened to 64 bits, to compare with the file.
std::vector<uint64_t> Bits(const Literal& result) {
  const Literal& bits = result.elements()[1];
  std::vector<uint64_t> values;
  for (int64_t i = 0; i < bits.shape().ElementCount(); ++i) {
    switch (bits.shape().type()) {
      case PrimitiveType::kU8:
        values.push_back(bits.data<uint8_t>()[i]);
        break;
      case PrimitiveType::kU16:
        values.push_back(bits.data<uint16_t>()[i]);
        break;
      case PrimitiveType::kU64:
        values.push_back(bits.data<uint64_t>()[i]);
        break;
      default:
        values.push_back(bits.data<uint32_t>()[i]);
    }
  }
  return values;
}

std::vector<uint64_t> NewState(const Literal& result) {
  auto data = result.elements()[0].data<uint64_t>();
  return std::vector<uint64_t>(data.begin(), data.end());
}

TEST(RngBitGeneratorTest, EveryRecordedCaseIsRead) {
  // generate_rng.py writes 10; a lost line must not pass silently.
  EXPECT_EQ(Cases().size(), 10u);
}

class RngCaseTest : public ::testing::TestWithParam<size_t> {};

TEST_P(RngCaseTest, DrawsXlasBitsAndState) {
  ASSERT_LT(GetParam(), Cases().size());
  const RngCase& c = Cases()[GetParam()];
  absl::StatusOr<Literal> result =
      Generate(c.algorithm, c.state, c.type, c.dims);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Bits(*result), ElementsAreArray(c.bits));
  EXPECT_THAT(NewState(*result), ElementsAreArray(c.new_state));
}

INSTANTIATE_TEST_SUITE_P(Recorded, RngCaseTest, ::testing::Range<size_t>(0, 10),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return info.param < Cases().size()
                                      ? Cases()[info.param].name
                                      : "Missing" + std::to_string(info.param);
                         });

TEST(RngBitGeneratorTest, RejectsAThreeFryStateOfThreeWords) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kThreeFry, {0x0123456789ABCDEFu, 1, 2},
               PrimitiveType::kU32, {4});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace rng_test
}  // namespace causeway::exec
