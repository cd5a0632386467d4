// The fused loop evaluator (exec/fused_loop.h) must give exactly the bits
// of evaluating fusion bodies op by op. Every program of the conformance
// corpus runs twice on its inputs: as written (fusions run as fused loops)
// and with the fused loops off (every fusion body runs op by op); the
// outputs must be identical, byte for byte. CAUSEWAY_CORPUS_DIR in the
// environment points it at another corpus (gen_corpus.py --bench-only).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "causeway/exec/spmd_program.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/npy.h"
#include "causeway/hlo/parser.h"
#include "gtest/gtest.h"

namespace causeway {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path CorpusDir() {
  const char* dir = std::getenv("CAUSEWAY_CORPUS_DIR");
  return dir != nullptr ? fs::path(dir) : fs::path(CAUSEWAY_CORPUS_DIR);
}

// The partition count and the per-partition arguments of a corpus program.
struct Inputs {
  int64_t partitions = 0;
  std::vector<std::vector<hlo::Literal>> per_partition;
};

Inputs ReadInputs(const fs::path& dir) {
  Inputs inputs;
  std::vector<std::string> files;
  for (const auto& line :
       absl::StrSplit(ReadFile(dir / "manifest.txt"), '\n')) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() >= 2 && fields[0] == "partitions") {
      inputs.partitions = std::stoll(fields[1]);
    } else if (fields.size() >= 2 && fields[0] == "input") {
      files.push_back(fields[1]);
    }
  }
  inputs.per_partition.resize(inputs.partitions);
  for (const std::string& file : files) {
    auto stacked = hlo::ReadNpy((dir / file).string());
    EXPECT_TRUE(stacked.ok()) << stacked.status();
    if (!stacked.ok()) return Inputs();
    const hlo::Shape& shape = stacked->shape();
    hlo::Shape shard(
        shape.type(),
        std::vector<int64_t>(shape.dims().begin() + 1, shape.dims().end()));
    const int64_t bytes = shard.ByteSize();
    for (int64_t p = 0; p < inputs.partitions; ++p) {
      hlo::Literal literal(shard);
      if (bytes > 0) {
        std::memcpy(
            literal.mutable_untyped_data(),
            static_cast<const char*>(stacked->untyped_data()) + p * bytes,
            bytes);
      }
      inputs.per_partition[p].push_back(std::move(literal));
    }
  }
  return inputs;
}

// Runs `text` on `inputs`; without `fused_loops`, every fusion body runs
// op by op.
std::vector<std::vector<hlo::Literal>> RunProgram(const std::string& text,
                                                  const Inputs& inputs,
                                                  bool fused_loops) {
  auto module = hlo::ParseModule(text);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  int fusions = 0;
  for (const auto& computation : (*module)->computations()) {
    for (const auto& instruction : computation->instructions()) {
      if (instruction->opcode == hlo::Opcode::kFusion) ++fusions;
    }
  }
  exec::SpmdProgram::Options options;
  options.evaluator.fused_loops = fused_loops;
  auto program = exec::SpmdProgram::Create(*std::move(module),
                                           inputs.partitions, options);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  auto outputs = (*program)->Run(inputs.per_partition);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  if (!outputs.ok()) return {};
  return *std::move(outputs);
}

TEST(FusedEquivalenceTest, EveryCorpusProgramGivesTheSameBitsFusedAndOpByOp) {
  int programs = 0;
  for (const auto& entry : fs::directory_iterator(CorpusDir())) {
    const fs::path dir = entry.path();
    if (!fs::exists(dir / "program.hlo")) continue;
    SCOPED_TRACE(dir.filename().string());
    const std::string text = ReadFile(dir / "program.hlo");
    const Inputs inputs = ReadInputs(dir);
    ASSERT_GT(inputs.partitions, 0);
    const auto fused = RunProgram(text, inputs, /*fused_loops=*/true);
    const auto op_by_op = RunProgram(text, inputs, /*fused_loops=*/false);
    ASSERT_EQ(fused.size(), op_by_op.size());
    for (size_t p = 0; p < fused.size(); ++p) {
      ASSERT_EQ(fused[p].size(), op_by_op[p].size());
      for (size_t i = 0; i < fused[p].size(); ++i) {
        EXPECT_TRUE(fused[p][i] == op_by_op[p][i])
            << "partition " << p << " output " << i << " differs";
      }
    }
    ++programs;
  }
  EXPECT_GT(programs, 0);
}

}  // namespace
}  // namespace causeway
