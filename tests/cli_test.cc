// End-to-end tests of the `causeway` command: runs the built binary (it
// sits beside this test binary, in build/bin) on small HLO programs and
// checks the .npy files it writes.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "causeway/hlo/literal.h"
#include "causeway/hlo/npy.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway {
namespace {

namespace fs = std::filesystem;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::testutil::F32;
using hlo::testutil::Values;

std::string Quote(const std::string& arg) {
  std::string quoted;
  quoted.push_back('\'');
  for (char c : arg) {
    if (c == '\'') {
      quoted.append("'\\''");
    } else {
      quoted.push_back(c);
    }
  }
  quoted.push_back('\'');
  return quoted;
}

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together.
};

// Two partitions: y = x + partition_id; out0 = all-reduce(y), out1 = y.
constexpr char kProgram[] = R"(HloModule two, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[3] parameter(0), sharding={devices=[2]0,1}
  p = u32[] partition-id()
  pf = f32[] convert(p)
  b = f32[3] broadcast(pf), dimensions={}
  y = f32[3] add(x, b)
  r = f32[3] all-reduce(y), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
  ROOT t = (f32[3], f32[3]) tuple(r, y)
}
)";

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ASSERT_GT(n, 0);
    self[n] = '\0';
    binary_ = (fs::path(self).parent_path() / "causeway").string();
    ASSERT_TRUE(fs::exists(binary_))
        << binary_ << " is missing: build the `causeway` target first";
    dir_ = fs::path(::testing::TempDir()) /
           ("cli_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliResult Cli(const std::vector<std::string>& args) {
    std::string command = Quote(binary_);
    for (const std::string& arg : args) {
      command.push_back(' ');
      command.append(Quote(arg));
    }
    command.append(" 2>&1");
    CliResult result;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    char buffer[4096];
    size_t read;
    while ((read = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
      result.output.append(buffer, read);
    }
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string WriteArray(const std::string& name, const Literal& value) {
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(hlo::WriteNpy(path, value).ok());
    return path;
  }
  Literal ReadOutput(const std::string& name) {
    auto value = hlo::ReadNpy((dir_ / "out" / name).string());
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *std::move(value) : Literal();
  }
  std::string OutDir() const { return (dir_ / "out").string(); }

  std::string binary_;
  fs::path dir_;
};

TEST_F(CliTest, HelpListsTheRunCommand) {
  CliResult result = Cli({"--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.output, HasSubstr("run"));
}

TEST_F(CliTest, RunHelpExplainsEveryOption) {
  CliResult result = Cli({"run", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* option : {"--partitions", "--input", "--output-dir",
                             "--global", "--output-sharding"}) {
    EXPECT_THAT(result.output, HasSubstr(option));
  }
}

TEST_F(CliTest, UnknownCommandIsAUsageError) {
  CliResult result = Cli({"launch"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("unknown command 'launch'"));
}

TEST_F(CliTest, StackedInputsGiveStackedOutputs) {
  const std::string program = WriteFile("p.hlo", kProgram);
  const std::string input =
      WriteArray("x.npy", F32({2, 3}, {1, 2, 3, 10, 20, 30}));
  CliResult result = Cli({"run", program, "--partitions", "2", "--input", input,
                          "--output-dir", OutDir()});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  Literal out0 = ReadOutput("out0.npy");
  EXPECT_EQ(out0.shape().dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_THAT(Values(out0), ElementsAre(12, 23, 34, 12, 23, 34));
  EXPECT_THAT(Values(ReadOutput("out1.npy")), ElementsAre(1, 2, 3, 11, 21, 31));
}

TEST_F(CliTest, GlobalInputsAreSplitAndOutputsAssembledByShardings) {
  const std::string program = WriteFile("p.hlo", kProgram);
  const std::string input =
      WriteArray("x.npy", F32({6}, {1, 2, 3, 10, 20, 30}));
  CliResult result =
      Cli({"run", program, "--partitions", "2", "--input", input,
           "--output-dir", OutDir(), "--global", "--output-sharding",
           "{replicated}", "--output-sharding", "{devices=[2]0,1}"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(Values(ReadOutput("out0.npy")), ElementsAre(12, 23, 34));
  EXPECT_THAT(Values(ReadOutput("out1.npy")), ElementsAre(1, 2, 3, 11, 21, 31));
}

TEST_F(CliTest, GlobalWithoutOutputShardingsSaysHowToGiveThem) {
  const std::string program = WriteFile("p.hlo", kProgram);
  const std::string input = WriteArray("x.npy", F32({6}, {1, 2, 3, 4, 5, 6}));
  CliResult result = Cli({"run", program, "--partitions", "2", "--input", input,
                          "--output-dir", OutDir(), "--global"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("--output-sharding"));
}

TEST_F(CliTest, GlobalTakesUnannotatedScalarOutputsAsReplicated) {
  const std::string program =
      WriteFile("p.hlo", R"(HloModule sum, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[2] parameter(0), sharding={devices=[2]0,1}
  zero = f32[] constant(0)
  local = f32[] reduce(x, zero), dimensions={0}, to_apply=add
  ROOT total = f32[] all-reduce(local), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}
)");
  const std::string input = WriteArray("x.npy", F32({4}, {1, 2, 3, 4}));
  CliResult result = Cli({"run", program, "--partitions", "2", "--input", input,
                          "--output-dir", OutDir(), "--global"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  Literal total = ReadOutput("out0.npy");
  EXPECT_EQ(total.shape().rank(), 0);
  EXPECT_THAT(Values(total), ElementsAre(10));
}

TEST_F(CliTest, GlobalRefusesParametersWithoutSharding) {
  const std::string program = WriteFile("p.hlo", R"(HloModule one
ENTRY main {
  ROOT x = f32[2] parameter(0)
}
)");
  const std::string input = WriteArray("x.npy", F32({2}, {1, 2}));
  CliResult result = Cli({"run", program, "--partitions", "1", "--input", input,
                          "--output-dir", OutDir(), "--global"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("parameter 0 ('x') has no sharding= annotation"));
}

TEST_F(CliTest, WrongInputShapeNamesTheParameter) {
  const std::string program = WriteFile("p.hlo", kProgram);
  const std::string input =
      WriteArray("x.npy", F32({3, 2}, {1, 2, 3, 4, 5, 6}));
  CliResult result = Cli({"run", program, "--partitions", "2", "--input", input,
                          "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("parameter 0 ('x'): expected f32[2,3] "
                        "(2 partitions × f32[3]), got f32[3,2]"));
}

TEST_F(CliTest, WrongInputCountListsTheParameters) {
  const std::string program = WriteFile("p.hlo", kProgram);
  CliResult result =
      Cli({"run", program, "--partitions", "2", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("takes 1 parameter ('x': f32[3])"));
}

TEST_F(CliTest, PartitionCountMismatchIsReported) {
  const std::string program = WriteFile("p.hlo", kProgram);
  const std::string input = WriteArray("x.npy", F32({4, 3}, {}));
  CliResult result = Cli({"run", program, "--partitions", "4", "--input", input,
                          "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("num_partitions=2"));
}

TEST_F(CliTest, ParseErrorsNameTheLine) {
  const std::string program =
      WriteFile("p.hlo", "HloModule m\nENTRY e {\n  x = \n}\n");
  CliResult result =
      Cli({"run", program, "--partitions", "1", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("p.hlo: line 4:1:"));
}

TEST_F(CliTest, MissingOptionsAreUsageErrors) {
  CliResult result = Cli({"run", "x.hlo", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("missing --partitions"));
}

TEST_F(CliTest, ADirectoryAsTheProgramIsNamedAsSuch) {
  CliResult result = Cli(
      {"run", dir_.string(), "--partitions", "1", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("is a directory, not an HLO text file"));
}

TEST_F(CliTest, BinaryDataAsTheProgramIsRefusedBeforeItIsReadWhole) {
  // /dev/zero never ends; only its first bytes may be read.
  CliResult result =
      Cli({"run", "/dev/zero", "--partitions", "1", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("/dev/zero: not HLO text"));
}

TEST_F(CliTest, AnEndlessInputIsRefusedAfterItsHeader) {
  const std::string program = WriteFile("p.hlo", kProgram);
  CliResult result = Cli({"run", program, "--partitions", "2", "--input",
                          "/dev/zero", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("/dev/zero: not a valid .npy file"));
}

TEST_F(CliTest, AnOptionOfOneValueGivenTwiceIsAUsageError) {
  const std::string program = WriteFile("p.hlo", kProgram);
  CliResult result = Cli({"run", program, "--partitions", "2", "--partitions",
                          "4", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output,
              HasSubstr("--partitions given twice ('2' and '4')"));
}

TEST_F(CliTest, RunsACorpusProgramLikeJax) {
  const fs::path corpus =
      fs::path(CAUSEWAY_CORPUS_DIR) / "shard_map_collectives_4";
  std::vector<std::string> args = {
      "run",          (corpus / "program.hlo").string(),
      "--partitions", "4",
      "--output-dir", OutDir()};
  for (int i = 0; fs::exists(corpus / ("in" + std::to_string(i) + ".npy"));
       ++i) {
    args.push_back("--input");
    args.push_back((corpus / ("in" + std::to_string(i) + ".npy")).string());
  }
  CliResult result = Cli(args);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  int outputs = 0;
  for (; fs::exists(corpus / ("out" + std::to_string(outputs) + ".npy"));
       ++outputs) {
    const std::string name = "out" + std::to_string(outputs) + ".npy";
    auto expected = hlo::ReadNpy((corpus / name).string());
    ASSERT_TRUE(expected.ok()) << expected.status();
    Literal actual = ReadOutput(name);
    ASSERT_TRUE(actual.shape().Compatible(expected->shape())) << name;
    for (int64_t i = 0; i < actual.shape().ElementCount(); ++i) {
      const double want = expected->GetAsDouble(i);
      EXPECT_NEAR(actual.GetAsDouble(i), want, 1e-5 + 1e-4 * std::abs(want))
          << name << " element " << i;
    }
  }
  EXPECT_GT(outputs, 0);
}

}  // namespace
}  // namespace causeway
