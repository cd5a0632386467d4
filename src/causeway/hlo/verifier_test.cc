#include "causeway/hlo/verifier.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/hlo/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::hlo {
namespace verifier_test {

using ::testing::HasSubstr;

// Parses `text` (which must parse) and verifies it.
absl::Status VerifyText(std::string_view text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModule(text);
  if (!module.ok()) {
    ADD_FAILURE() << "parse failed: " << module.status();
    return module.status();
  }
  return VerifyModule(**module);
}

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

// A module whose entry holds `body` (from line 6 on) after an `add`
// reducer, with `header` attributes.
std::string WithReducer(const std::string& body,
                        const std::string& header = "") {
  return absl::StrCat("HloModule m", header, "\n",       // 1
                      "add { a = f32[] parameter(0)\n",  // 2
                      "  b = f32[] parameter(1)\n",      // 3
                      "  ROOT s = f32[] add(a, b) }\n",  // 4
                      "ENTRY main {\n",                  // 5
                      body, "}\n");
}

TEST(VerifierTest, WellFormedModuleVerifies) {
  EXPECT_TRUE(
      VerifyText(
          WithReducer("  x = f32[4,8] parameter(0)\n"
                      "  w = f32[8,2] parameter(1)\n"
                      "  d = f32[4,2] dot(x, w), lhs_contracting_dims={1}, "
                      "rhs_contracting_dims={0}\n"
                      "  z = f32[] constant(0)\n"
                      "  ROOT r = f32[4] reduce(d, z), dimensions={1}, "
                      "to_apply=add\n"))
          .ok());
}

TEST(VerifierTest, UnknownOpIsUnimplementedWithLineAndName) {
  absl::Status status = VerifyText(
      "HloModule m\n"
      "ENTRY main {\n"
      "  x = f32[4,4] parameter(0)\n"
      "  ROOT f = f32[4,4] cholesky(x), lower=true\n"
      "}\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Message(status),
            "line 4: unsupported op 'cholesky' (instruction 'f')");
}

TEST(VerifierTest, CustomCallIsUnimplementedNamingTheTarget) {
  absl::Status status = VerifyText(
      "HloModule m\n"
      "ENTRY main {\n"
      "  x = f32[5,4] parameter(0)\n"
      "  ROOT t = (f32[5,2], s32[5,2]) custom-call(x), "
      "custom_call_target=\"MyKernel\"\n"
      "}\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Message(status),
            "custom-call 't' (line 4): unsupported custom-call target "
            "'MyKernel'");
}

TEST(VerifierTest, HostCallbacksAreRefusedSayingWhatToDoInstead) {
  absl::Status status = VerifyText(
      "HloModule m\n"
      "ENTRY main {\n"
      "  x = f32[4] parameter(0)\n"
      "  p = () custom-call(x), "
      "custom_call_target=\"xla_ffi_python_cpu_callback\", "
      "custom_call_has_side_effect=true\n"
      "  ROOT y = f32[4] negate(x)\n"
      "}\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(status),
              HasSubstr("custom-call 'p' (line 4) is a host callback"));
  EXPECT_THAT(Message(status), HasSubstr("jax.debug.print"));
  EXPECT_THAT(Message(status), HasSubstr("without Python"));
}

TEST(VerifierTest, TopKAndMapAreVerified) {
  EXPECT_TRUE(VerifyText(R"(
HloModule m
gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=GT
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[5,4] parameter(0)
  m = f32[5,4] map(x, x), dimensions={0,1}, to_apply=add
  ROOT t = (f32[5,2], s32[5,2]) custom-call(m), custom_call_target="TopK", called_computations={gt}
})").ok());
  absl::Status too_many = VerifyText(R"(
HloModule m
gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=GT
}
ENTRY main {
  x = f32[5,4] parameter(0)
  ROOT t = (f32[5,6], s32[5,6]) custom-call(x), custom_call_target="TopK", called_computations={gt}
})");
  EXPECT_THAT(Message(too_many), HasSubstr("top 6 of 4"));
}

TEST(VerifierTest, DeclaredShapeMustMatchInferredShape) {
  absl::Status status = VerifyText(
      "HloModule m\n"
      "ENTRY main {\n"
      "  x = f32[4] parameter(0)\n"
      "  ROOT n = f32[5]{0} negate(x)\n"
      "}\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(status),
            "instruction 'n' (line 4): declared shape f32[5] does not match "
            "the inferred shape f32[4]");
}

TEST(VerifierTest, LayoutsAreIgnoredWhenComparingShapes) {
  EXPECT_TRUE(VerifyText("HloModule m\n"
                         "ENTRY main {\n"
                         "  x = f32[2,3]{0,1} parameter(0)\n"
                         "  ROOT c = f32[2,3]{1,0} copy(x)\n"
                         "}\n")
                  .ok());
}

TEST(VerifierTest, ReportsTheFirstErrorInTextOrder) {
  absl::Status status = VerifyText(
      "HloModule m\n"
      "ENTRY main {\n"
      "  x = f32[4] parameter(0)\n"
      "  a = s32[4] negate(x)\n"
      "  ROOT b = f32[4] foo(a)\n"
      "}\n");
  EXPECT_THAT(Message(status), HasSubstr("(line 4)"));
}

TEST(VerifierTest, ShapeInferenceErrorsCarryTheLine) {
  absl::Status status = VerifyText(
      "HloModule m\n"
      "ENTRY main {\n"
      "  x = f32[4,64] parameter(0)\n"
      "  y = f32[32,5] parameter(1)\n"
      "  ROOT dot.3 = f32[4,5] dot(x, y), lhs_contracting_dims={1}, "
      "rhs_contracting_dims={0}\n"
      "}\n");
  EXPECT_EQ(Message(status),
            "instruction 'dot.3' (line 5): lhs contracting dim 1 has size 64 "
            "but rhs contracting dim 0 has size 32");
}

TEST(VerifierTest, ReducerMustTakeTwoScalarsPerOperand) {
  absl::Status status = VerifyText(
      "HloModule m\n"
      "bad { a = f32[] parameter(0)\n"
      "  ROOT n = f32[] negate(a) }\n"
      "ENTRY main {\n"
      "  x = f32[4] parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=bad\n"
      "}\n");
  EXPECT_THAT(Message(status),
              HasSubstr("(line 7): to_apply 'bad' must take 2 scalar "
                        "parameters but takes 1"));
}

TEST(VerifierTest, ReplicaGroupIdsMustBeInRange) {
  absl::Status status = VerifyText(
      WithReducer("  x = f32[4] parameter(0)\n"
                  "  ROOT r = f32[4] all-reduce(x), channel_id=1, "
                  "replica_groups={{0,1},{2,9}}, use_global_device_ids=true, "
                  "to_apply=add\n",
                  ", num_partitions=4"));
  EXPECT_EQ(Message(status),
            "instruction 'r' (line 7): replica group id 9 is outside [0, 4)");
}

TEST(VerifierTest, ReplicaGroupIdsMustNotRepeat) {
  absl::Status status = VerifyText(
      WithReducer("  x = f32[4] parameter(0)\n"
                  "  ROOT r = f32[4] all-reduce(x), channel_id=1, "
                  "replica_groups={{0,1},{1,2}}, use_global_device_ids=true, "
                  "to_apply=add\n",
                  ", num_partitions=4"));
  EXPECT_THAT(Message(status), HasSubstr("replica group id 1 appears twice"));
}

TEST(VerifierTest, ReplicaGroupsMustHaveOneSize) {
  absl::Status status = VerifyText(
      WithReducer("  x = f32[4] parameter(0)\n"
                  "  ROOT r = f32[4] all-reduce(x), channel_id=1, "
                  "replica_groups={{0,1,2},{3}}, use_global_device_ids=true, "
                  "to_apply=add\n",
                  ", num_partitions=4"));
  EXPECT_THAT(Message(status),
              HasSubstr("replica group 1 has 1 members but group 0 has 3"));
}

TEST(VerifierTest, ReplicaGroupsMustHoldEveryDeviceOfTheProgram) {
  // {{0}} on 2 partitions: partition 1 would find no group when it runs.
  absl::Status status = VerifyText(
      WithReducer("  x = f32[4] parameter(0)\n"
                  "  ROOT r = f32[4] all-reduce(x), channel_id=1, "
                  "replica_groups={{0}}, use_global_device_ids=true, "
                  "to_apply=add\n",
                  ", num_partitions=2"));
  EXPECT_EQ(Message(status),
            "instruction 'r' (line 7): replica_groups leave out device id 1: "
            "the groups must hold each of the module's 2 device ids "
            "(num_partitions=2, replica_count=1) exactly once");
}

TEST(VerifierTest, ReplicaGroupsNumberTheIdsOfTheirGroupMode) {
  // Without channel_id the ids are replica ids: one replica, so {{0}} is
  // every replica, and each partition all-reduces alone.
  EXPECT_TRUE(VerifyText(WithReducer("  x = f32[4] parameter(0)\n"
                                     "  ROOT r = f32[4] all-reduce(x), "
                                     "replica_groups={{0}}, to_apply=add\n",
                                     ", num_partitions=2"))
                  .ok());
  // With channel_id and no flag, all-to-all numbers partitions.
  absl::Status status =
      VerifyText(WithReducer("  x = f32[4] parameter(0)\n"
                             "  ROOT r = f32[4] all-to-all(x), channel_id=1, "
                             "replica_groups={{0,1}}, dimensions={0}\n",
                             ", num_partitions=4"));
  EXPECT_THAT(Message(status), HasSubstr("leave out partition id 2"));
}

TEST(VerifierTest, IotaReplicaGroupsAreCheckedLikeExplicitOnes) {
  std::string body =
      "  x = f32[4] parameter(0)\n"
      "  ROOT g = f32[16] all-gather(x), channel_id=1, "
      "replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0}, "
      "use_global_device_ids=true\n";
  EXPECT_TRUE(VerifyText(WithReducer(body, ", num_partitions=8")).ok());
  EXPECT_THAT(Message(VerifyText(WithReducer(body, ", num_partitions=4"))),
              HasSubstr("is outside [0, 4)"));
}

TEST(VerifierTest, CollectivePermuteTargetsMustNotRepeat) {
  absl::Status status = VerifyText(
      "HloModule m, num_partitions=4\n"
      "ENTRY main {\n"
      "  x = f32[4] parameter(0)\n"
      "  ROOT p = f32[4] collective-permute(x), channel_id=1, "
      "source_target_pairs={{0,1},{2,1}}\n"
      "}\n");
  EXPECT_EQ(Message(status),
            "instruction 'p' (line 4): target 1 appears twice in "
            "source_target_pairs");
}

TEST(VerifierTest, CollectivePermuteIdsMustBeInRange) {
  absl::Status status = VerifyText(
      "HloModule m, num_partitions=2\n"
      "ENTRY main {\n"
      "  x = f32[4] parameter(0)\n"
      "  ROOT p = f32[4] collective-permute(x), channel_id=1, "
      "source_target_pairs={{0,1},{1,2}}\n"
      "}\n");
  EXPECT_THAT(Message(status),
              HasSubstr("source_target_pairs id 2 is outside [0, 2)"));
}

TEST(VerifierTest, AllGatherSizeFollowsModulePartitionCount) {
  // channel_id without use_global_device_ids and no groups: every
  // partition takes part.
  std::string text =
      "HloModule m, num_partitions=4\n"
      "ENTRY main {\n"
      "  x = f32[2,3] parameter(0)\n"
      "  ROOT g = f32[8,3] all-gather(x), channel_id=1, dimensions={0}\n"
      "}\n";
  EXPECT_TRUE(VerifyText(text).ok());
  absl::Status status = VerifyText(absl::StrCat(
      "HloModule m, num_partitions=2\n", text.substr(text.find('\n') + 1)));
  EXPECT_THAT(Message(status), HasSubstr("inferred shape f32[4,3]"));
}

// ---- Structure built by hand (the parser never produces these) ----------

class VerifierStructureTest : public ::testing::Test {
 protected:
  VerifierStructureTest() : module_("m") {}

  Computation* AddComputation(std::string name, bool entry = false) {
    auto comp = std::make_unique<Computation>(std::move(name));
    comp->set_is_entry(entry);
    return module_.AddComputation(std::move(comp));
  }

  static Instruction* Param(Computation* comp, int64_t number, Shape shape) {
    auto instr = std::make_unique<Instruction>();
    instr->name = absl::StrCat("p", number);
    instr->opcode = Opcode::kParameter;
    instr->parameter_number = number;
    instr->shape = std::move(shape);
    instr->line = 10 + static_cast<int>(number);
    return comp->AddInstruction(std::move(instr));
  }

  static Instruction* Op(Computation* comp, std::string name, Opcode opcode,
                         std::vector<Instruction*> operands, Shape shape) {
    auto instr = std::make_unique<Instruction>();
    instr->name = std::move(name);
    instr->opcode = opcode;
    instr->operands = std::move(operands);
    instr->shape = std::move(shape);
    instr->line = 20;
    return comp->AddInstruction(std::move(instr));
  }

  Module module_;
  const Shape f32_4_{PrimitiveType::kF32, {4}};
};

TEST_F(VerifierStructureTest, ModuleWithoutEntryIsRejected) {
  AddComputation("main");
  EXPECT_EQ(Message(VerifyModule(module_)),
            "module 'm' has no entry computation");
}

TEST_F(VerifierStructureTest, ComputationWithoutRootIsRejected) {
  Computation* main = AddComputation("main", true);
  Param(main, 0, f32_4_);
  EXPECT_EQ(Message(VerifyModule(module_)), "computation 'main' has no root");
}

TEST_F(VerifierStructureTest, ParameterNumbersMustBeDense) {
  Computation* main = AddComputation("main", true);
  Param(main, 0, f32_4_);
  main->set_root(Param(main, 2, f32_4_));
  EXPECT_THAT(Message(VerifyModule(module_)),
              HasSubstr("instruction 'p2' (line 12): parameter number 2 is "
                        "out of range: computation 'main' has 2 parameters"));
}

TEST_F(VerifierStructureTest, ParameterNumbersMustNotRepeat) {
  Computation* main = AddComputation("main", true);
  Param(main, 0, f32_4_);
  Instruction* again = Param(main, 1, f32_4_);
  again->parameter_number = 0;
  again->name = "q";
  main->set_root(again);
  EXPECT_THAT(Message(VerifyModule(module_)),
              HasSubstr("parameter number 0 is already used by 'p0'"));
}

TEST_F(VerifierStructureTest, OperandFromAnotherComputationIsRejected) {
  Computation* other = AddComputation("other");
  Instruction* foreign = Param(other, 0, f32_4_);
  other->set_root(foreign);
  Computation* main = AddComputation("main", true);
  main->set_root(Op(main, "n", Opcode::kNegate, {foreign}, f32_4_));
  EXPECT_EQ(Message(VerifyModule(module_)),
            "instruction 'n' (line 20): operand 0 'p0' is not an instruction "
            "of computation 'main'");
}

TEST_F(VerifierStructureTest, OperandMustBeDefinedBeforeUse) {
  Computation* main = AddComputation("main", true);
  Instruction* x = Param(main, 0, f32_4_);
  Instruction* a = Op(main, "a", Opcode::kNegate, {x}, f32_4_);
  Instruction* b = Op(main, "b", Opcode::kNegate, {x}, f32_4_);
  a->operands[0] = b;
  main->set_root(b);
  EXPECT_THAT(Message(VerifyModule(module_)),
              HasSubstr("operand 0 'b' is defined after its use"));
}

TEST_F(VerifierStructureTest, RecursiveCallsAreRejected) {
  Computation* loop = AddComputation("loop");
  Instruction* p = Param(loop, 0, f32_4_);
  Instruction* call = Op(loop, "self", Opcode::kCall, {p}, f32_4_);
  call->called_computations = {loop};
  loop->set_root(call);
  Computation* main = AddComputation("main", true);
  Instruction* x = Param(main, 0, f32_4_);
  Instruction* outer = Op(main, "c", Opcode::kCall, {x}, f32_4_);
  outer->called_computations = {loop};
  main->set_root(outer);
  EXPECT_THAT(Message(VerifyModule(module_)),
              HasSubstr("instruction 'self' (line 20): calls computation "
                        "'loop', which is already on the call stack"));
}

TEST_F(VerifierStructureTest, CalledComputationMustBelongToTheModule) {
  Computation stray("stray");
  Computation* main = AddComputation("main", true);
  Instruction* x = Param(main, 0, f32_4_);
  Instruction* call = Op(main, "c", Opcode::kCall, {x}, f32_4_);
  call->called_computations = {&stray};
  main->set_root(call);
  EXPECT_THAT(Message(VerifyModule(module_)),
              HasSubstr("called computation 0 is not a computation of this "
                        "module"));
}

TEST_F(VerifierStructureTest, BuiltInstructionsWithoutLinesOmitThem) {
  Computation* main = AddComputation("main", true);
  auto instr = std::make_unique<Instruction>();
  instr->name = "f";
  instr->opcode_name = "cholesky";
  main->set_root(main->AddInstruction(std::move(instr)));
  EXPECT_EQ(Message(VerifyModule(module_)),
            "unsupported op 'cholesky' (instruction 'f')");
}

// ---- Real JAX modules ----------------------------------------------------

std::filesystem::path TestdataDir() {
  return std::filesystem::path(__FILE__).parent_path() / "testdata";
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(VerifierJaxTest, GeneratedJaxModulesParseAndVerify) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TestdataDir())) {
    std::string name = entry.path().filename().string();
    if (name.rfind("verifier_", 0) != 0 || entry.path().extension() != ".hlo") {
      continue;
    }
    absl::StatusOr<std::unique_ptr<Module>> module =
        ParseModule(ReadFile(entry.path()));
    ASSERT_TRUE(module.ok()) << name << ": " << module.status();
    absl::Status status = VerifyModule(**module);
    EXPECT_TRUE(status.ok()) << name << ": " << status;
    ++count;
  }
  EXPECT_EQ(count, 11);
}

std::filesystem::path CorpusDir() {
  return std::filesystem::path(__FILE__).parent_path().parent_path()
             .parent_path().parent_path() /
         "tests" / "corpus";
}

// The programs tools/gen_corpus.py wrote, as its index lists them.
std::vector<std::string> CorpusPrograms() {
  std::vector<std::string> names;
  std::istringstream index(ReadFile(CorpusDir() / "programs.txt"));
  for (std::string line; std::getline(index, line);) {
    if (!line.empty() && line[0] != '#') names.push_back(line);
  }
  return names;
}

TEST(VerifierJaxTest, TheCorpusIndexListsEveryProgramDirectory) {
  std::vector<std::string> directories;
  for (const auto& entry : std::filesystem::directory_iterator(CorpusDir())) {
    if (entry.is_directory()) {
      directories.push_back(entry.path().filename().string());
    }
  }
  std::sort(directories.begin(), directories.end());
  EXPECT_EQ(CorpusPrograms(), directories);
  EXPECT_EQ(directories.size(), 64u);
}

// Every program of the JAX corpus parses and verifies: one test each.
class CorpusProgramVerifies : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusProgramVerifies, ParsesAndVerifies) {
  const std::filesystem::path program =
      CorpusDir() / GetParam() / "program.hlo";
  ASSERT_TRUE(std::filesystem::exists(program)) << program;
  absl::StatusOr<std::unique_ptr<Module>> module =
      ParseModule(ReadFile(program));
  ASSERT_TRUE(module.ok()) << program << ": " << module.status();
  absl::Status status = VerifyModule(**module);
  EXPECT_TRUE(status.ok()) << program << ": " << status;
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, CorpusProgramVerifies, ::testing::ValuesIn(CorpusPrograms()),
    [](const ::testing::TestParamInfo<std::string>& info) {
      return info.param;
    });

TEST(VerifierJaxTest, ShardMapModuleUsesEveryCollectiveForm) {
  absl::StatusOr<std::unique_ptr<Module>> module =
      ParseModule(ReadFile(TestdataDir() / "verifier_shard_map.hlo"));
  ASSERT_TRUE(module.ok()) << module.status();
  ASSERT_TRUE(VerifyModule(**module).ok());
  int tuple_all_reduce = 0, tuple_all_to_all = 0, others = 0;
  for (const auto& comp : (*module)->computations()) {
    for (const auto& instr : comp->instructions()) {
      if (instr->opcode == Opcode::kAllReduce && instr->shape.IsTuple()) {
        ++tuple_all_reduce;
      } else if (instr->opcode == Opcode::kAllToAll && instr->shape.IsTuple()) {
        ++tuple_all_to_all;
      } else if (instr->opcode == Opcode::kAllGather ||
                 instr->opcode == Opcode::kReduceScatter ||
                 instr->opcode == Opcode::kCollectivePermute) {
        ++others;
      }
    }
  }
  EXPECT_GE(tuple_all_reduce, 1);
  EXPECT_GE(tuple_all_to_all, 1);
  EXPECT_GE(others, 3);
}

}  // namespace verifier_test
}  // namespace causeway::hlo
