#include "causeway/head/compile_cache.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace compile_cache_test {

using ::testing::HasSubstr;

// y = x * 2 on f32[4] shards of an array tiled over `partitions` devices.
std::string Doubler(int64_t partitions, const std::string& name = "double") {
  const std::string sharding =
      partitions == 1
          ? "{replicated}"
          : absl::StrCat("{devices=[", partitions, "]<=[", partitions, "]}");
  return absl::StrCat("HloModule ", name, ", num_partitions=", partitions,
                      "\n\n", "ENTRY %main (x: f32[4]) -> f32[4] {\n",
                      "  %x = f32[4]{0} parameter(0), sharding=", sharding,
                      "\n", "  %c = f32[] constant(2)\n",
                      "  %cb = f32[4]{0} broadcast(%c), dimensions={}\n",
                      "  ROOT %y = f32[4]{0} multiply(%x, %cb), sharding=",
                      sharding, "\n", "}\n");
}

// Compiles `text` and lets the program go at once: its id.
transport::ProgramId IdOfCompiled(CompileCache& cache, const std::string& text) {
  auto program = cache.GetOrCompile(text);
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? (*program)->id : transport::ProgramId();
}

TEST(CompileCacheTest, TheSameTextGivesTheSameProgramWhileItIsInUse) {
  CompileCache cache;
  auto first = cache.GetOrCompile(Doubler(2));
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = cache.GetOrCompile(Doubler(2));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ((*first)->name, "double");
  EXPECT_EQ((*first)->num_partitions, 2);
  EXPECT_EQ(cache.size(), 1);
}

TEST(CompileCacheTest, EveryProgramGetsItsOwnId) {
  CompileCache cache;
  auto a = cache.GetOrCompile(Doubler(2, "a"));
  auto b = cache.GetOrCompile(Doubler(2, "b"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->id, (*b)->id);
}

TEST(CompileCacheTest, AProgramNoOneUsesIsForgottenAndCompiledAnew) {
  CompileCache cache;
  const transport::ProgramId old_id = IdOfCompiled(cache, Doubler(1));
  EXPECT_EQ(cache.size(), 0);
  EXPECT_NE(IdOfCompiled(cache, Doubler(1)), old_id);
}

TEST(CompileCacheTest, AProgramNobodyHoldsIsNamedUnusedOnce) {
  CompileCache cache;
  transport::ProgramId id;
  {
    auto program = cache.GetOrCompile(Doubler(1));
    ASSERT_TRUE(program.ok());
    id = (*program)->id;
    EXPECT_TRUE(cache.TakeUnused().empty());  // Still in use.
  }
  EXPECT_THAT(cache.TakeUnused(), ::testing::ElementsAre(id));
  EXPECT_TRUE(cache.TakeUnused().empty());
}

// Kept within its budget, a program outlives its users under the same id:
// a client that compiles it again gets it as it was.
TEST(CompileCacheTest, AKeptProgramOutlivesItsUsersUnderTheSameId) {
  CompileCache cache(/*keep_bytes=*/1 << 20);
  const transport::ProgramId id = IdOfCompiled(cache, Doubler(1));
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(cache.kept_bytes(), static_cast<int64_t>(Doubler(1).size()));
  EXPECT_TRUE(cache.TakeUnused().empty());
  EXPECT_EQ(IdOfCompiled(cache, Doubler(1)), id);
}

// Past the budget the least recently asked-for program goes (asking for a
// kept program again makes it the most recent), and is named unused once
// nobody else holds it; one larger than the budget is never kept.
TEST(CompileCacheTest, PastItsBudgetTheLeastRecentlyAskedForProgramGoes) {
  const int64_t one = static_cast<int64_t>(Doubler(1, "a").size());
  CompileCache cache(/*keep_bytes=*/2 * one);
  auto id_of = [&](const std::string& text) { return IdOfCompiled(cache, text); };
  const transport::ProgramId a = id_of(Doubler(1, "a"));
  const transport::ProgramId b = id_of(Doubler(1, "b"));
  EXPECT_EQ(id_of(Doubler(1, "a")), a);  // Now the most recent.
  const transport::ProgramId c = id_of(Doubler(1, "c"));
  EXPECT_THAT(cache.TakeUnused(), ::testing::ElementsAre(b));
  EXPECT_EQ(cache.kept_bytes(), 2 * one);
  EXPECT_EQ(id_of(Doubler(1, "a")), a);
  EXPECT_EQ(id_of(Doubler(1, "c")), c);
  // Too large to keep: compiled, used, and gone with its user.
  const std::string large =
      absl::StrCat(Doubler(1, "large"), std::string(2 * one, '\n'));
  EXPECT_NE(id_of(large), transport::ProgramId());
  EXPECT_EQ(cache.TakeUnused().size(), 1u);
  EXPECT_EQ(cache.size(), 2);
}

TEST(CompileCacheTest, AMalformedProgramIsRefusedWithItsLine) {
  CompileCache cache;
  auto program = cache.GetOrCompile(
      "HloModule m\n\nENTRY %main () -> f32[] {\n  ROOT %y = f32[] "
      "bogus()\n}\n");
  ASSERT_FALSE(program.ok());
  EXPECT_THAT(program.status().message(), HasSubstr("4:"));
  EXPECT_EQ(cache.size(), 0);
}

TEST(CompileCacheTest, BindingKeepsThePartitionedProgramsShardings) {
  CompileCache cache;
  auto program = cache.GetOrCompile(Doubler(2));
  ASSERT_TRUE(program.ok());
  absl::StatusOr<BoundProgram> bound = BindProgram(*program, 2);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(bound->parameter_shardings[0].kind, hlo::Sharding::Kind::kTiled);
  EXPECT_EQ(bound->output_shardings[0].kind, hlo::Sharding::Kind::kTiled);
}

TEST(CompileCacheTest, AOnePartitionProgramRunsReplicatedOnAnyDeviceCount) {
  CompileCache cache;
  auto program = cache.GetOrCompile(Doubler(1));
  ASSERT_TRUE(program.ok());
  absl::StatusOr<BoundProgram> bound = BindProgram(*program, 3);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(bound->num_devices, 3);
  EXPECT_EQ(bound->parameter_shardings[0].kind,
            hlo::Sharding::Kind::kReplicated);
}

TEST(CompileCacheTest, BindingToTheWrongDeviceCountSaysBoth) {
  CompileCache cache;
  auto program = cache.GetOrCompile(Doubler(2));
  ASSERT_TRUE(program.ok());
  absl::StatusOr<BoundProgram> bound = BindProgram(*program, 4);
  ASSERT_FALSE(bound.ok());
  EXPECT_EQ(bound.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bound.status().message(),
              HasSubstr("compiled for 2 partition(s) (num_partitions=2) but its slice has 4"));
}

}  // namespace compile_cache_test
}  // namespace causeway::head
