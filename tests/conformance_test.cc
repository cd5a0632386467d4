// The JAX conformance suite. Every program the corpus's index lists
// (tests/corpus/programs.txt, written by tools/gen_corpus.py with the
// programs; format in docs/corpus.md) runs through the runtime, as
// `causeway run` runs it: on a slice of as many devices of a LocalCluster
// as it has partitions, each partition fed the input JAX fed it, and every
// device's output is compared with JAX's within the manifest's tolerance
// (exact for integers and pred).
//
// One test per listed program, registered at start-up, so a program added
// to the corpus is tested without touching this file:
//   conformance_test --gtest_filter='Conformance.mlp_train_step_dp4'
// Conformance.CorpusMatchesItsIndex fails when a listed program's directory
// is missing or a directory is not listed (or lacks its manifest): a lost
// program cannot pass silently. CAUSEWAY_CORPUS_DIR in the environment
// points it at another corpus (for example one written by gen_corpus.py
// --bench-only). At the end the binary prints
//   conformance: N programs, M instructions checked
// where N counts the programs that passed and M their instructions.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/npy.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/shape.h"
#include "corpus_runner.h"
#include "gtest/gtest.h"

namespace causeway {
namespace conformance_test {

namespace fs = std::filesystem;
using corpus::ArraySpec;
using corpus::DimsText;
using corpus::ParseManifest;
using corpus::Unstack;

std::string IndexText(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    index[d] = dims[d] == 0 ? 0 : flat % dims[d];
    flat = dims[d] == 0 ? 0 : flat / dims[d];
  }
  return DimsText(index);
}

std::string ValueText(double v) {
  std::ostringstream out;
  out.precision(9);
  out << v;
  return out.str();
}

// Element `i` of a c64 or c128 array.
std::complex<double> ComplexAt(const hlo::Literal& literal, int64_t i) {
  if (literal.shape().type() == hlo::PrimitiveType::kC64) {
    return std::complex<double>(literal.data<hlo::C64>()[i]);
  }
  return literal.data<hlo::C128>()[i];
}

// Empty when `got` matches `want`; otherwise what differs, with the first
// mismatching index and values. Floats (complex: by modulus):
// |got - want| <= atol + rtol*|want|,
// NaN matches NaN and an infinity matches itself. Integers and pred: exact.
std::string CompareArrays(const hlo::Literal& got, const hlo::Literal& want,
                          double rtol, double atol) {
  if (!got.shape().Compatible(want.shape())) {
    return absl::StrCat("shape ", got.shape().ToString(false), ", want ",
                        want.shape().ToString(false));
  }
  const hlo::PrimitiveType type = want.shape().type();
  const int64_t n = want.shape().ElementCount();
  const bool complex = hlo::IsComplex(type);
  // Minifloats as floats too: NaN matches NaN whatever its payload.
  const bool floating =
      hlo::IsFloating(type) || hlo::IsMinifloat(type) || complex;
  const int64_t width = n == 0 ? 0 : want.size_bytes() / n;
  const char* got_bytes = static_cast<const char*>(got.untyped_data());
  const char* want_bytes = static_cast<const char*>(want.untyped_data());
  int64_t mismatches = 0;
  int64_t first = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    if (complex) {
      // |got - want| as complex numbers; NaN and infinite parts as for
      // floats, part by part.
      const std::complex<double> g = ComplexAt(got, i), w = ComplexAt(want, i);
      const bool special = !std::isfinite(g.real()) ||
                           !std::isfinite(g.imag()) ||
                           !std::isfinite(w.real()) || !std::isfinite(w.imag());
      if (special) {
        auto same = [](double a, double b) {
          return (std::isnan(a) && std::isnan(b)) || a == b;
        };
        ok = same(g.real(), w.real()) && same(g.imag(), w.imag());
      } else {
        const double err = std::abs(g - w);
        ok = err <= atol + rtol * std::abs(w);
        worst = std::max(worst, err);
      }
    } else if (floating) {
      const double g = got.GetAsDouble(i);
      const double w = want.GetAsDouble(i);
      if (std::isnan(w) || std::isnan(g)) {
        ok = std::isnan(w) && std::isnan(g);
      } else if (std::isinf(w) || std::isinf(g)) {
        ok = g == w;
      } else {
        const double err = std::fabs(g - w);
        ok = err <= atol + rtol * std::fabs(w);
        worst = std::max(worst, err);
      }
    } else {
      ok = std::memcmp(got_bytes + i * width, want_bytes + i * width, width) == 0;
    }
    if (!ok) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  if (mismatches == 0) return "";
  auto value_at = [&](const hlo::Literal& literal, int64_t i) {
    if (!complex) return ValueText(literal.GetAsDouble(i));
    const std::complex<double> z = ComplexAt(literal, i);
    return absl::StrCat("(", ValueText(z.real()), ", ", ValueText(z.imag()),
                        ")");
  };
  std::string message = absl::StrCat(
      mismatches, " of ", n, " elements differ; first at ",
      IndexText(first, want.shape().dims()), ": got ", value_at(got, first),
      ", want ", value_at(want, first));
  if (floating) {
    absl::StrAppend(&message, " (rtol ", ValueText(rtol), ", atol ",
                    ValueText(atol), ", largest finite |diff| ",
                    ValueText(worst), ")");
  }
  return message;
}

// Totals over the programs that passed, printed when the binary ends.
std::atomic<int64_t> passed_programs{0};
std::atomic<int64_t> passed_instructions{0};
std::atomic<int64_t> failed_programs{0};

class CorpusSummary : public ::testing::Environment {
 public:
  void TearDown() override {
    corpus::Runner::Get().Stop();
    corpus::Runner::Get(/*fused_loops=*/false).Stop();
    std::cout << "conformance: " << passed_programs.load() << " programs, "
              << passed_instructions.load() << " instructions checked"
              << std::endl;
    if (failed_programs.load() > 0) {
      std::cout << "conformance: " << failed_programs.load()
                << " programs failed" << std::endl;
    }
  }
};

int64_t CountInstructions(const std::string& hlo_text) {
  auto module = hlo::ParseModule(hlo_text);
  if (!module.ok()) return 0;
  int64_t count = 0;
  for (const auto& computation : (*module)->computations()) {
    count += static_cast<int64_t>(computation->instructions().size());
  }
  return count;
}

class ConformanceTest : public ::testing::Test {
 public:
  explicit ConformanceTest(fs::path dir) : dir_(std::move(dir)) {}

  void TestBody() override {
    RunProgram();
    if (HasFailure()) {
      ++failed_programs;
    } else {
      ++passed_programs;
      passed_instructions += instructions_;
    }
  }

 private:
  void RunProgram() {
    ASSERT_TRUE(fs::is_directory(dir_))
        << dir_ << " is listed in programs.txt but missing";
    auto manifest_text = corpus::ReadFile(dir_ / "manifest.txt");
    ASSERT_TRUE(manifest_text.ok()) << manifest_text.status();
    auto manifest =
        ParseManifest(*manifest_text, (dir_ / "manifest.txt").string());
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    const int64_t partitions = manifest->partitions;
    SCOPED_TRACE(absl::StrCat(manifest->name, " (", partitions,
                              " partitions): ", manifest->description));

    auto hlo_text = corpus::ReadFile(dir_ / "program.hlo");
    ASSERT_TRUE(hlo_text.ok()) << hlo_text.status();
    instructions_ = CountInstructions(*hlo_text);
    auto inputs = corpus::ReadInputs(dir_, *manifest);
    ASSERT_TRUE(inputs.ok()) << inputs.status();
    auto results =
        corpus::Runner::Get().Run(*hlo_text, partitions, *std::move(inputs));
    ASSERT_TRUE(results.ok()) << results.status();
    ASSERT_EQ(results->size(), manifest->outputs.size())
        << "the program returned " << results->size() << " outputs";

    for (size_t i = 0; i < manifest->outputs.size(); ++i) {
      const ArraySpec& spec = manifest->outputs[i];
      auto stacked = hlo::ReadNpy((dir_ / spec.file).string(), spec.type);
      ASSERT_TRUE(stacked.ok()) << stacked.status();
      auto expected = Unstack(*stacked, spec, partitions);
      ASSERT_TRUE(expected.ok()) << expected.status();
      const std::vector<hlo::Literal>& shards = (*results)[i];
      ASSERT_EQ(static_cast<int64_t>(shards.size()), partitions)
          << "output " << i << " came back from " << shards.size()
          << " devices";
      for (int64_t p = 0; p < partitions; ++p) {
        std::string difference =
            CompareArrays(shards[p], (*expected)[p], spec.rtol, spec.atol);
        EXPECT_EQ(difference, "")
            << spec.file << " (" << hlo::PrimitiveTypeName(spec.type)
            << DimsText(spec.shard_dims) << "), partition " << p << ": "
            << difference;
      }
    }
  }

  fs::path dir_;
  int64_t instructions_ = 0;
};

// A test that fails with `message`.
class Failing : public ::testing::Test {
 public:
  explicit Failing(std::string message) : message_(std::move(message)) {}
  void TestBody() override { FAIL() << message_; }

 private:
  std::string message_;
};

// The corpus directories are exactly the listed programs, each with its
// manifest.
class CorpusMatchesItsIndex : public ::testing::Test {
 public:
  CorpusMatchesItsIndex(fs::path root, std::vector<std::string> listed)
      : root_(std::move(root)), listed_(std::move(listed)) {}
  void TestBody() override {
    std::vector<std::string> found = corpus::ProgramDirectories(root_);
    std::vector<std::string> unlisted, missing;
    std::set_difference(found.begin(), found.end(), listed_.begin(),
                        listed_.end(), std::back_inserter(unlisted));
    std::set_difference(listed_.begin(), listed_.end(), found.begin(),
                        found.end(), std::back_inserter(missing));
    EXPECT_TRUE(unlisted.empty())
        << "directories programs.txt does not list (regenerate the corpus "
           "with tools/gen_corpus.py): "
        << absl::StrJoin(unlisted, ", ");
    EXPECT_TRUE(missing.empty()) << "listed programs without a directory: "
                                 << absl::StrJoin(missing, ", ");
    for (const std::string& name : found) {
      EXPECT_TRUE(fs::exists(root_ / name / "manifest.txt"))
          << name << " has a program.hlo but no manifest.txt";
    }
  }

 private:
  fs::path root_;
  std::vector<std::string> listed_;
};

// Registers one test per listed program, and the completeness test; or one
// failing test when the index cannot be read, so that a broken checkout
// cannot pass.
bool RegisterCorpusTests() {
  ::testing::AddGlobalTestEnvironment(new CorpusSummary);
  const fs::path root = corpus::CorpusDir();
  absl::StatusOr<std::vector<std::string>> listed =
      corpus::ListedPrograms(root);
  if (!listed.ok()) {
    const std::string message = absl::StrCat(
        "no corpus index in ", root.string(), ": ", listed.status().message());
    ::testing::RegisterTest(
        "Conformance", "CorpusIsPresent", nullptr, nullptr, __FILE__, __LINE__,
        [message]() -> ::testing::Test* { return new Failing(message); });
    return true;
  }
  std::vector<std::string> sorted = *listed;
  std::sort(sorted.begin(), sorted.end());
  ::testing::RegisterTest("Conformance", "CorpusMatchesItsIndex", nullptr,
                          nullptr, __FILE__, __LINE__,
                          [root, sorted]() -> ::testing::Test* {
                            return new CorpusMatchesItsIndex(root, sorted);
                          });
  for (const std::string& name : sorted) {
    const fs::path dir = root / name;
    ::testing::RegisterTest(
        "Conformance", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
        [dir]() -> ::testing::Test* { return new ConformanceTest(dir); });
  }
  return true;
}

const bool registered = RegisterCorpusTests();

// The helpers above decide pass or fail for every program, so they get
// tests of their own.

TEST(ConformanceHelpersTest, ManifestParsesEveryKey) {
  auto manifest = ParseManifest(
      "# comment\nname p\ndescription two words\npartitions 4\n"
      "input in0.npy f32 [2,3]\noutput out0.npy bf16 [] 0.01 0.001\n",
      "m");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->name, "p");
  EXPECT_EQ(manifest->description, "two words");
  EXPECT_EQ(manifest->partitions, 4);
  ASSERT_EQ(manifest->inputs.size(), 1u);
  EXPECT_EQ(manifest->inputs[0].type, hlo::PrimitiveType::kF32);
  EXPECT_EQ(manifest->inputs[0].shard_dims, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(manifest->outputs.size(), 1u);
  EXPECT_EQ(manifest->outputs[0].type, hlo::PrimitiveType::kBF16);
  EXPECT_TRUE(manifest->outputs[0].shard_dims.empty());
  EXPECT_DOUBLE_EQ(manifest->outputs[0].rtol, 0.01);
  EXPECT_DOUBLE_EQ(manifest->outputs[0].atol, 0.001);
}

TEST(ConformanceHelpersTest, ManifestErrorsNameTheLine) {
  auto manifest = ParseManifest("partitions 2\ninput a.npy f99 [1]\n", "m");
  ASSERT_FALSE(manifest.ok());
  EXPECT_NE(manifest.status().message().find("m:2: unknown dtype 'f99'"),
            std::string::npos)
      << manifest.status();
}

TEST(ConformanceHelpersTest, UnstackGivesEachPartitionItsSlice) {
  hlo::Literal stacked(hlo::Shape(hlo::PrimitiveType::kS32, {3, 2}));
  auto data = stacked.mutable_data<int32_t>();
  for (int i = 0; i < 6; ++i) data[i] = 10 * i;
  ArraySpec spec{"x.npy", hlo::PrimitiveType::kS32, {2}};
  auto shards = Unstack(stacked, spec, 3);
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ(shards->size(), 3u);
  EXPECT_EQ((*shards)[2].data<int32_t>()[0], 40);
  EXPECT_EQ((*shards)[2].data<int32_t>()[1], 50);
  EXPECT_FALSE(Unstack(stacked, spec, 2).ok());
}

TEST(ConformanceHelpersTest, CompareHonoursToleranceAndNaN) {
  hlo::Literal want(hlo::Shape(hlo::PrimitiveType::kF32, {2, 2}));
  auto w = want.mutable_data<float>();
  w[0] = 1.0f; w[1] = NAN; w[2] = 100.0f; w[3] = INFINITY;
  hlo::Literal got = want;
  got.mutable_data<float>()[2] = 100.001f;
  EXPECT_EQ(CompareArrays(got, want, 1e-4, 0), "");
  std::string difference = CompareArrays(got, want, 1e-6, 0);
  EXPECT_NE(difference.find("1 of 4 elements differ; first at [1,0]"),
            std::string::npos)
      << difference;
}

TEST(ConformanceHelpersTest, CompareIsExactForIntegers) {
  hlo::Literal want(hlo::Shape(hlo::PrimitiveType::kU32, {3}));
  want.mutable_data<uint32_t>()[1] = 7;
  hlo::Literal got = want;
  EXPECT_EQ(CompareArrays(got, want, 1.0, 1.0), "");
  got.mutable_data<uint32_t>()[1] = 8;
  EXPECT_NE(CompareArrays(got, want, 1.0, 1.0), "");
}

}  // namespace conformance_test
}  // namespace causeway
