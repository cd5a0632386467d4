// The JAX conformance suite. Every program under tests/corpus (written by
// tools/gen_corpus.py; format in docs/corpus.md) is loaded as an SPMD
// program on as many in-process devices as it has partitions, run on the
// inputs JAX ran it on, and each output is compared with JAX's within the
// manifest's tolerance (exact for integers and pred).
//
// One test per program, registered at start-up from the directory listing,
// so a program added to the corpus is tested without touching this file:
//   conformance_test --gtest_filter='Conformance.mlp_train_step_dp4'
// CAUSEWAY_CORPUS_DIR in the environment points it at another corpus (for
// example one written by gen_corpus.py --bench-only). At the end the binary
// prints
//   conformance: N programs, M instructions checked
// where N counts the programs that passed and M their instructions.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
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
#include "absl/strings/str_split.h"
#include "causeway/exec/spmd_program.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/npy.h"
#include "causeway/hlo/shape.h"
#include "gtest/gtest.h"

namespace causeway {
namespace {

namespace fs = std::filesystem;

// One line of the manifest: `input FILE DTYPE [SHAPE]` or
// `output FILE DTYPE [SHAPE] RTOL ATOL`. SHAPE is one partition's shard.
struct ArraySpec {
  std::string file;
  hlo::PrimitiveType type = hlo::PrimitiveType::kInvalid;
  std::vector<int64_t> shard_dims;
  double rtol = 0;
  double atol = 0;
};

struct Manifest {
  std::string name;
  std::string description;
  int64_t partitions = 0;
  std::vector<ArraySpec> inputs;
  std::vector<ArraySpec> outputs;
};

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::vector<int64_t>> ParseDims(const std::string& text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return absl::InvalidArgumentError(
        absl::StrCat("shape '", text, "' is not of the form [d0,d1,...]"));
  }
  std::vector<int64_t> dims;
  std::string inner = text.substr(1, text.size() - 2);
  if (inner.empty()) return dims;
  for (const auto& piece : absl::StrSplit(inner, ',')) {
    std::string digits(piece.data(), piece.size());
    if (digits.empty() || digits.size() > 12 ||
        !std::all_of(digits.begin(), digits.end(), ::isdigit)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad dimension '", digits, "' in shape ", text));
    }
    dims.push_back(std::stoll(digits));
  }
  return dims;
}

absl::StatusOr<Manifest> ParseManifest(const std::string& text,
                                       const std::string& path) {
  Manifest manifest;
  int line_number = 0;
  for (const auto& raw_line : absl::StrSplit(text, '\n')) {
    ++line_number;
    std::string line(raw_line.data(), raw_line.size());
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": ", what));
    };
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.find(' ');
    std::string key = line.substr(0, space);
    std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
    if (key == "name") {
      manifest.name = rest;
    } else if (key == "description") {
      manifest.description = rest;
    } else if (key == "partitions") {
      if (rest.empty() || rest.size() > 6 ||
          !std::all_of(rest.begin(), rest.end(), ::isdigit)) {
        return error("partitions wants a positive integer");
      }
      manifest.partitions = std::stoll(rest);
      if (manifest.partitions < 1) return error("partitions must be >= 1");
    } else if (key == "input" || key == "output") {
      std::vector<std::string> fields =
          absl::StrSplit(rest, ' ', absl::SkipEmpty());
      size_t want = key == "input" ? 3 : 5;
      if (fields.size() != want) {
        return error(absl::StrCat(key, " wants ", want, " fields, got ",
                                  fields.size()));
      }
      ArraySpec spec;
      spec.file = fields[0];
      if (spec.file.find('/') != std::string::npos) {
        return error("array files must lie in the program's directory");
      }
      auto type = hlo::PrimitiveTypeFromName(fields[1]);
      if (!type.has_value() || !hlo::IsArrayType(*type)) {
        return error(absl::StrCat("unknown dtype '", fields[1], "'"));
      }
      spec.type = *type;
      auto dims = ParseDims(fields[2]);
      if (!dims.ok()) return error(std::string(dims.status().message()));
      spec.shard_dims = *std::move(dims);
      if (key == "output") {
        char* end = nullptr;
        spec.rtol = std::strtod(fields[3].c_str(), &end);
        if (*end != '\0' || spec.rtol < 0) return error("bad rtol");
        spec.atol = std::strtod(fields[4].c_str(), &end);
        if (*end != '\0' || spec.atol < 0) return error("bad atol");
        manifest.outputs.push_back(std::move(spec));
      } else {
        manifest.inputs.push_back(std::move(spec));
      }
    } else {
      return error(absl::StrCat("unknown key '", key, "'"));
    }
  }
  if (manifest.partitions == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no partitions line"));
  }
  if (manifest.outputs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no outputs"));
  }
  return manifest;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

// Splits a stacked array (leading axis = partition) into one literal per
// partition, checking it against the manifest's dtype and shard shape.
absl::StatusOr<std::vector<hlo::Literal>> Unstack(const hlo::Literal& stacked,
                                                  const ArraySpec& spec,
                                                  int64_t partitions) {
  const hlo::Shape& shape = stacked.shape();
  std::vector<int64_t> want_dims = {partitions};
  want_dims.insert(want_dims.end(), spec.shard_dims.begin(),
                   spec.shard_dims.end());
  if (shape.type() != spec.type || shape.dims() != want_dims) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.file, " holds ", shape.ToString(false), " but the manifest says ",
        std::string(hlo::PrimitiveTypeName(spec.type)), DimsText(want_dims)));
  }
  hlo::Shape shard_shape(spec.type, spec.shard_dims);
  const int64_t shard_bytes = shard_shape.ByteSize();
  const char* data = static_cast<const char*>(stacked.untyped_data());
  std::vector<hlo::Literal> shards;
  for (int64_t p = 0; p < partitions; ++p) {
    hlo::Literal shard(shard_shape);
    if (shard_bytes > 0) {
      std::memcpy(shard.mutable_untyped_data(), data + p * shard_bytes,
                  shard_bytes);
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

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

// Empty when `got` matches `want`; otherwise what differs, with the first
// mismatching index and values. Floats: |got - want| <= atol + rtol*|want|,
// NaN matches NaN and an infinity matches itself. Integers and pred: exact.
std::string CompareArrays(const hlo::Literal& got, const hlo::Literal& want,
                          double rtol, double atol) {
  if (!got.shape().Compatible(want.shape())) {
    return absl::StrCat("shape ", got.shape().ToString(false), ", want ",
                        want.shape().ToString(false));
  }
  const hlo::PrimitiveType type = want.shape().type();
  const int64_t n = want.shape().ElementCount();
  const bool floating = hlo::IsFloating(type);
  const int64_t width = n == 0 ? 0 : want.size_bytes() / n;
  const char* got_bytes = static_cast<const char*>(got.untyped_data());
  const char* want_bytes = static_cast<const char*>(want.untyped_data());
  int64_t mismatches = 0;
  int64_t first = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    if (floating) {
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
  std::string message = absl::StrCat(
      mismatches, " of ", n, " elements differ; first at ",
      IndexText(first, want.shape().dims()), ": got ",
      ValueText(got.GetAsDouble(first)), ", want ",
      ValueText(want.GetAsDouble(first)));
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
    std::cout << "conformance: " << passed_programs.load() << " programs, "
              << passed_instructions.load() << " instructions checked"
              << std::endl;
    if (failed_programs.load() > 0) {
      std::cout << "conformance: " << failed_programs.load()
                << " programs failed" << std::endl;
    }
  }
};

int64_t CountInstructions(const hlo::Module& module) {
  int64_t count = 0;
  for (const auto& computation : module.computations()) {
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
    auto manifest_text = ReadFile(dir_ / "manifest.txt");
    ASSERT_TRUE(manifest_text.ok()) << manifest_text.status();
    auto manifest =
        ParseManifest(*manifest_text, (dir_ / "manifest.txt").string());
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    const int64_t partitions = manifest->partitions;
    SCOPED_TRACE(absl::StrCat(manifest->name, " (", partitions,
                              " partitions): ", manifest->description));

    auto hlo_text = ReadFile(dir_ / "program.hlo");
    ASSERT_TRUE(hlo_text.ok()) << hlo_text.status();
    auto program = exec::SpmdProgram::Load(*hlo_text, partitions);
    ASSERT_TRUE(program.ok()) << program.status();
    instructions_ = CountInstructions((*program)->module());

    // arguments[p][i]: input i of partition p.
    std::vector<std::vector<hlo::Literal>> arguments(partitions);
    for (const ArraySpec& spec : manifest->inputs) {
      auto stacked = hlo::ReadNpy((dir_ / spec.file).string());
      ASSERT_TRUE(stacked.ok()) << stacked.status();
      auto shards = Unstack(*stacked, spec, partitions);
      ASSERT_TRUE(shards.ok()) << shards.status();
      for (int64_t p = 0; p < partitions; ++p) {
        arguments[p].push_back(std::move((*shards)[p]));
      }
    }

    auto results = (*program)->Run(std::move(arguments));
    ASSERT_TRUE(results.ok()) << results.status();
    ASSERT_EQ(static_cast<int64_t>(results->size()), partitions)
        << "one result list per partition";

    for (size_t i = 0; i < manifest->outputs.size(); ++i) {
      const ArraySpec& spec = manifest->outputs[i];
      auto stacked = hlo::ReadNpy((dir_ / spec.file).string());
      ASSERT_TRUE(stacked.ok()) << stacked.status();
      auto expected = Unstack(*stacked, spec, partitions);
      ASSERT_TRUE(expected.ok()) << expected.status();
      for (int64_t p = 0; p < partitions; ++p) {
        const std::vector<hlo::Literal>& outputs = (*results)[p];
        ASSERT_EQ(outputs.size(), manifest->outputs.size())
            << "partition " << p << " returned " << outputs.size()
            << " outputs";
        std::string difference =
            CompareArrays(outputs[i], (*expected)[p], spec.rtol, spec.atol);
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

// Registers one test per corpus directory (sorted by name), or one failing
// test when the corpus is missing, so that a broken checkout cannot pass.
bool RegisterCorpusTests() {
  ::testing::AddGlobalTestEnvironment(new CorpusSummary);
  const char* override_dir = std::getenv("CAUSEWAY_CORPUS_DIR");
  const fs::path root(override_dir != nullptr && *override_dir != '\0'
                          ? override_dir
                          : CAUSEWAY_CORPUS_DIR);
  std::vector<fs::path> dirs;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    if (entry.is_directory() &&
        fs::exists(entry.path() / "manifest.txt")) {
      dirs.push_back(entry.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) {
    std::string message = absl::StrCat("no programs found in ", root.string(),
                                       error ? ": " + error.message() : "");
    ::testing::RegisterTest(
        "Conformance", "CorpusIsPresent", nullptr, nullptr, __FILE__, __LINE__,
        [message]() -> ::testing::Test* {
          class Missing : public ::testing::Test {
           public:
            explicit Missing(std::string m) : message_(std::move(m)) {}
            void TestBody() override { FAIL() << message_; }

           private:
            std::string message_;
          };
          return new Missing(message);
        });
    return true;
  }
  for (const fs::path& dir : dirs) {
    ::testing::RegisterTest(
        "Conformance", dir.filename().string().c_str(), nullptr, nullptr,
        __FILE__, __LINE__,
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

}  // namespace
}  // namespace causeway
