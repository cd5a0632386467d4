// The fused loop evaluator (exec/fused_loop.h) must give exactly the bits
// of evaluating fusion bodies op by op. Every program of the conformance
// corpus runs twice on its inputs, through the runtime (corpus_runner.h):
// on devices that run fusion bodies as fused loops, and on devices with
// the fused loops off (Evaluator::Options::fused_loops: every body runs op
// by op, as a fusion still); every device's outputs must be identical, byte
// for byte. A program none of whose fusion bodies compiles
// to a fused loop would compare a path with itself: it is not counted, and
// the test requires that every program with a fused loop was compared.
// CAUSEWAY_CORPUS_DIR in the environment points it at another corpus
// (gen_corpus.py --bench-only).
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "causeway/exec/evaluator.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/parser.h"
#include "corpus_runner.h"
#include "gtest/gtest.h"

namespace causeway {
namespace fused_equivalence_test {

namespace fs = std::filesystem;

// How many of the module's fusion bodies run as fused loops.
int64_t FusedLoops(const hlo::Module& module) {
  auto evaluator = exec::Evaluator::Create(module);
  EXPECT_TRUE(evaluator.ok()) << evaluator.status();
  return evaluator.ok() ? (*evaluator)->num_fused_loops() : 0;
}

TEST(FusedEquivalenceTest, EveryCorpusProgramGivesTheSameBitsFusedAndOpByOp) {
  const fs::path root = corpus::CorpusDir();
  auto listed = corpus::ListedPrograms(root);
  ASSERT_TRUE(listed.ok()) << listed.status();
  int64_t with_fused_loops = 0;
  int64_t compared = 0;
  for (const std::string& name : *listed) {
    SCOPED_TRACE(name);
    const fs::path dir = root / name;
    auto text = corpus::ReadFile(dir / "program.hlo");
    ASSERT_TRUE(text.ok()) << text.status();
    auto manifest_text = corpus::ReadFile(dir / "manifest.txt");
    ASSERT_TRUE(manifest_text.ok()) << manifest_text.status();
    auto manifest = corpus::ParseManifest(*manifest_text, name);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    auto module = hlo::ParseModule(*text);
    ASSERT_TRUE(module.ok()) << module.status();
    if (FusedLoops(**module) == 0) continue;  // Nothing fused to compare.
    ++with_fused_loops;

    auto fused_inputs = corpus::ReadInputs(dir, *manifest);
    auto op_by_op_inputs = corpus::ReadInputs(dir, *manifest);
    ASSERT_TRUE(fused_inputs.ok() && op_by_op_inputs.ok());
    auto fused = corpus::Runner::Get().Run(*text, manifest->partitions,
                                           *std::move(fused_inputs));
    ASSERT_TRUE(fused.ok()) << fused.status();
    auto op_by_op = corpus::Runner::Get(/*fused_loops=*/false)
                        .Run(*text, manifest->partitions,
                             *std::move(op_by_op_inputs));
    ASSERT_TRUE(op_by_op.ok()) << op_by_op.status();
    ASSERT_EQ(fused->size(), op_by_op->size());
    for (size_t o = 0; o < fused->size(); ++o) {
      ASSERT_EQ((*fused)[o].size(), (*op_by_op)[o].size());
      for (size_t p = 0; p < (*fused)[o].size(); ++p) {
        EXPECT_TRUE((*fused)[o][p] == (*op_by_op)[o][p])
            << "output " << o << " of partition " << p << " differs";
      }
    }
    ++compared;
  }
  EXPECT_GT(with_fused_loops, 0) << "no corpus program has a fused loop";
  EXPECT_EQ(compared, with_fused_loops);
  std::cout << "fused equivalence: " << compared << " of " << listed->size()
            << " programs have fused loops and gave identical bits\n";
}

}  // namespace fused_equivalence_test
}  // namespace causeway
