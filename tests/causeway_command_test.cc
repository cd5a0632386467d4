// End-to-end tests of the `causeway` command: runs the built binary (it
// sits beside this test binary, in build/bin) on small HLO programs and
// checks the .npy files it writes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "causeway/cli/cluster_process.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/hlo/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway {
namespace causeway_command_test {

namespace fs = std::filesystem;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::testutil::F32;
using hlo::testutil::Values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

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

class CausewayCommandTest : public ::testing::Test {
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

  // Runs the binary with `args`, reads its output until a line holding
  // `ready` appears, sends it `signal`, and returns how it ended. The
  // command gets --timeout as a backstop, so nothing waits forever.
  CliResult CliSignalledWhen(const std::vector<std::string>& args,
                             const std::string& ready, int signal) {
    int out[2];
    CliResult result;
    if (pipe(out) != 0) return result;
    const pid_t pid = fork();
    if (pid == 0) {
      dup2(out[1], 1);
      dup2(out[1], 2);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv = {const_cast<char*>(binary_.c_str())};
      for (const std::string& arg : args) {
        argv.push_back(const_cast<char*>(arg.c_str()));
      }
      argv.push_back(nullptr);
      execv(binary_.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    bool signalled = false;
    char buffer[4096];
    ssize_t got;
    while ((got = read(out[0], buffer, sizeof(buffer))) > 0) {
      result.output.append(buffer, static_cast<size_t>(got));
      if (!signalled && result.output.find(ready) != std::string::npos) {
        kill(pid, signal);
        signalled = true;
      }
    }
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
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

  // `causeway run` arguments for `program` (HLO text, written to p.hlo) on
  // `partitions` devices, with `input` (written to x.npy) as its one
  // argument if given, its outputs in OutDir(), then `flags`.
  std::vector<std::string> RunArgs(const std::string& program, int partitions,
                                   const std::optional<Literal>& input,
                                   const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"run", WriteFile("p.hlo", program),
                                     "--partitions",
                                     std::to_string(partitions)};
    if (input.has_value()) {
      args.insert(args.end(), {"--input", WriteArray("x.npy", *input)});
    }
    args.insert(args.end(), {"--output-dir", OutDir()});
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }
  CliResult RunProgram(const std::string& program, int partitions,
                       const std::optional<Literal>& input,
                       const std::vector<std::string>& flags = {}) {
    return Cli(RunArgs(program, partitions, input, flags));
  }

  std::string binary_;
  fs::path dir_;
};

TEST_F(CausewayCommandTest, HelpListsTheRunCommand) {
  CliResult result = Cli({"--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.output, HasSubstr("run"));
}

TEST_F(CausewayCommandTest, RunHelpExplainsEveryOption) {
  CliResult result = Cli({"run", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* option : {"--partitions", "--input", "--output-dir",
                             "--global", "--output-sharding"}) {
    EXPECT_THAT(result.output, HasSubstr(option));
  }
}

TEST_F(CausewayCommandTest, UnknownCommandIsAUsageError) {
  CliResult result = Cli({"launch"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("unknown command 'launch'"));
}

TEST_F(CausewayCommandTest, StackedInputsGiveStackedOutputs) {
  CliResult result =
      RunProgram(kProgram, 2, F32({2, 3}, {1, 2, 3, 10, 20, 30}));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  Literal out0 = ReadOutput("out0.npy");
  EXPECT_EQ(out0.shape().dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_THAT(Values(out0), ElementsAre(12, 23, 34, 12, 23, 34));
  EXPECT_THAT(Values(ReadOutput("out1.npy")), ElementsAre(1, 2, 3, 11, 21, 31));
}

// The same run on a running cluster (a head and a worker process of 2
// devices, started here) gives the same files.
TEST_F(CausewayCommandTest, ARunOnAClusterGivesWhatTheEmbeddedRunGives) {
  absl::StatusOr<std::unique_ptr<cli::ClusterProcess>> cluster =
      cli::ClusterProcess::Start(binary_, {"--islands", "1",
                                           "--hosts-per-island", "1",
                                           "--devices-per-host", "2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  CliResult result =
      RunProgram(kProgram, 2, F32({2, 3}, {1, 2, 3, 10, 20, 30}),
                 {"--cluster", (*cluster)->address(), "--timeout", "60"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(Values(ReadOutput("out0.npy")),
              ElementsAre(12, 23, 34, 12, 23, 34));
  EXPECT_THAT(Values(ReadOutput("out1.npy")), ElementsAre(1, 2, 3, 11, 21, 31));
}

TEST_F(CausewayCommandTest, ClusterFlagsAreCheckedAgainstEachOther) {
  const std::string program = WriteFile("p.hlo", kProgram);
  CliResult result = Cli({"run", program, "--partitions", "2", "--input", "x",
                          "--output-dir", OutDir(), "--token-file", "t"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("--token-file and --tls-ca need --cluster"));
  result = Cli({"run", program, "--partitions", "2", "--input", "x",
                "--output-dir", OutDir(), "--cluster", "127.0.0.1:1",
                "--collective-timeout", "5"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("--collective-timeout applies to an embedded run"));
}

TEST_F(CausewayCommandTest, GlobalInputsAreSplitAndOutputsAssembledByShardings) {
  CliResult result =
      RunProgram(kProgram, 2, F32({6}, {1, 2, 3, 10, 20, 30}),
                 {"--global", "--output-sharding", "{replicated}",
                  "--output-sharding", "{devices=[2]0,1}"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(Values(ReadOutput("out0.npy")), ElementsAre(12, 23, 34));
  EXPECT_THAT(Values(ReadOutput("out1.npy")), ElementsAre(1, 2, 3, 11, 21, 31));
}

TEST_F(CausewayCommandTest, GlobalWithoutOutputShardingsSaysHowToGiveThem) {
  CliResult result =
      RunProgram(kProgram, 2, F32({6}, {1, 2, 3, 4, 5, 6}), {"--global"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("--output-sharding"));
}

TEST_F(CausewayCommandTest, GlobalTakesUnannotatedScalarOutputsAsReplicated) {
  CliResult result = RunProgram(R"(HloModule sum, num_partitions=2
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
)",
                                2, F32({4}, {1, 2, 3, 4}), {"--global"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  Literal total = ReadOutput("out0.npy");
  EXPECT_EQ(total.shape().rank(), 0);
  EXPECT_THAT(Values(total), ElementsAre(10));
}

TEST_F(CausewayCommandTest, GlobalRefusesParametersWithoutSharding) {
  CliResult result = RunProgram(R"(HloModule one
ENTRY main {
  ROOT x = f32[2] parameter(0)
}
)",
                                1, F32({2}, {1, 2}), {"--global"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("parameter 0 ('x') has no sharding= annotation"));
}

TEST_F(CausewayCommandTest, WrongInputShapeNamesTheParameter) {
  CliResult result = RunProgram(kProgram, 2, F32({3, 2}, {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("parameter 0 ('x'): expected f32[2,3] "
                        "(2 partitions × f32[3]), got f32[3,2]"));
}

TEST_F(CausewayCommandTest, WrongInputCountListsTheParameters) {
  CliResult result = RunProgram(kProgram, 2, std::nullopt);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("takes 1 parameter ('x': f32[3])"));
}

TEST_F(CausewayCommandTest, PartitionCountMismatchIsReported) {
  CliResult result = RunProgram(kProgram, 4, F32({4, 3}, {}));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("num_partitions=2"));
}

TEST_F(CausewayCommandTest, ParseErrorsNameTheLine) {
  CliResult result =
      RunProgram("HloModule m\nENTRY e {\n  x = \n}\n", 1, std::nullopt);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("p.hlo: line 4:1:"));
}

TEST_F(CausewayCommandTest, MissingOptionsAreUsageErrors) {
  CliResult result = Cli({"run", "x.hlo", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("missing --partitions"));
}

TEST_F(CausewayCommandTest, AWorkersDataPlaneAddressMustBeOneItsPeersCanDial) {
  for (const char* wildcard : {"0.0.0.0:0", "[::]:7000"}) {
    CliResult result =
        Cli({"worker", "--head", "127.0.0.1:1", "--island", "0", "--devices",
             "1", "--data-plane-listen", wildcard});
    EXPECT_EQ(result.exit_code, 2) << wildcard;
    EXPECT_THAT(result.output, HasSubstr("not a wildcard")) << wildcard;
  }
}

// --tls-ca on the head asks clients for certificates (mutual TLS,
// docs/security.md), which needs the head's own TLS certificate.
TEST_F(CausewayCommandTest, AHeadTakesTlsCaForMutualTlsOnlyWithItsOwnCertificate) {
  CliResult result = Cli({"head", "--tls-ca", "ca.pem"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("mutual TLS"));
  EXPECT_THAT(result.output, HasSubstr("--tls-cert and --tls-key too"));
}

TEST_F(CausewayCommandTest, ADirectoryAsTheProgramIsNamedAsSuch) {
  CliResult result = Cli(
      {"run", dir_.string(), "--partitions", "1", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("is a directory, not an HLO text file"));
}

TEST_F(CausewayCommandTest, BinaryDataAsTheProgramIsRefusedBeforeItIsReadWhole) {
  // /dev/zero never ends; only its first bytes may be read.
  CliResult result =
      Cli({"run", "/dev/zero", "--partitions", "1", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("/dev/zero: not HLO text"));
}

TEST_F(CausewayCommandTest, AnEndlessInputIsRefusedAfterItsHeader) {
  const std::string program = WriteFile("p.hlo", kProgram);
  CliResult result = Cli({"run", program, "--partitions", "2", "--input",
                          "/dev/zero", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("/dev/zero: not a valid .npy file"));
}

TEST_F(CausewayCommandTest, AnOptionOfOneValueGivenTwiceIsAUsageError) {
  const std::string program = WriteFile("p.hlo", kProgram);
  CliResult result = Cli({"run", program, "--partitions", "2", "--partitions",
                          "4", "--output-dir", OutDir()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output,
              HasSubstr("--partitions given twice ('2' and '4')"));
}

// x + 1 forever.
constexpr char kForever[] = R"(HloModule forever, num_partitions=2
always {
  s = f32[3] parameter(0)
  ROOT t = pred[] constant(true)
}
step {
  s = f32[3] parameter(0)
  one = f32[] constant(1)
  b = f32[3] broadcast(one), dimensions={}
  ROOT n = f32[3] add(s, b)
}
ENTRY main {
  x = f32[3] parameter(0), sharding={devices=[2]0,1}
  ROOT w = f32[3] while(x), condition=always, body=step
}
)";

TEST_F(CausewayCommandTest, TimeoutStopsAProgramThatLoopsForever) {
  CliResult result =
      RunProgram(kForever, 2, F32({2, 3}, {}), {"--timeout", "0.5"});
  EXPECT_EQ(result.exit_code, 124) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("did not finish within --timeout 0.5 s and was "
                        "stopped"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "out0.npy"));
}

TEST_F(CausewayCommandTest, SigintStopsTheRunWithAMessage) {
  CliResult result = CliSignalledWhen(
      RunArgs(kForever, 2, F32({2, 3}, {}), {"--timeout", "120"}),
      "running 'forever' on 2 devices", SIGINT);
  EXPECT_EQ(result.exit_code, 130) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("interrupted (signal 2); the program was stopped"));
}

TEST_F(CausewayCommandTest, APartitionLoopingWhileItsPeerWaitsInACollectiveEndsTheRun) {
  // Partition 0 loops forever; partition 1 waits for it in an all-reduce
  // and gives up: the run then stops partition 0 too and exits.
  CliResult result =
      RunProgram(R"(HloModule loop_or_wait, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
forever {
  s = f32[] parameter(0)
  ROOT t = pred[] constant(true)
}
step {
  s = f32[] parameter(0)
  one = f32[] constant(1)
  ROOT n = f32[] add(s, one)
}
loop {
  x = f32[] parameter(0)
  ROOT w = f32[] while(x), condition=forever, body=step
}
wait {
  x = f32[] parameter(0)
  ROOT r = f32[] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}
ENTRY main {
  x = f32[] parameter(0), sharding={replicated}
  p = u32[] partition-id()
  i = s32[] convert(p)
  ROOT y = f32[] conditional(i, x, x), branch_computations={loop, wait}
}
)",
                 2, F32({2}, {1, 1}), {"--collective-timeout", "0.2"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("did not arrive within 200ms"));
}

TEST_F(CausewayCommandTest, AOnePartitionModuleRunsACopyPerDeviceReadingPartitionIdZero) {
  CliResult result = RunProgram(R"(HloModule copies
ENTRY main {
  x = f32[2] parameter(0)
  p = u32[] partition-id()
  pf = f32[] convert(p)
  b = f32[2] broadcast(pf), dimensions={}
  ROOT y = f32[2] add(x, b)
}
)",
                                3, F32({3, 2}, {1, 2, 10, 20, 100, 200}));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  // Each device kept its own row, and partition-id is 0 on every copy.
  EXPECT_THAT(Values(ReadOutput("out0.npy")),
              ElementsAre(1, 2, 10, 20, 100, 200));
}

TEST_F(CausewayCommandTest, GlobalRefusesAnInputTheShardingDoesNotDivideEvenly) {
  // The program's shards are f32[3]: a global f32[5] would be padded.
  CliResult result =
      RunProgram(kProgram, 2, F32({5}, {1, 2, 3, 4, 5}),
                 {"--global", "--output-sharding", "{replicated}",
                  "--output-sharding", "{devices=[2]0,1}"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("a global f32[5] does not divide evenly by the "
                        "sharding {devices=[2]0,1}"));
}

TEST_F(CausewayCommandTest, GlobalRefusesAnOutputShardingForAnotherDeviceCount) {
  CliResult result =
      RunProgram(kProgram, 2, F32({6}, {1, 2, 3, 10, 20, 30}),
                 {"--global", "--output-sharding", "{replicated}",
                  "--output-sharding", "{devices=[4]<=[4]}"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("output 1 (f32[3] per partition) with "
                        "--output-sharding {devices=[4]<=[4]}: spreads its "
                        "tiles over 4 devices, but the program runs on 2"));
  // Refused before the run: nothing is written.
  EXPECT_THAT(result.output, Not(HasSubstr("running")));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "out0.npy"));
}

TEST_F(CausewayCommandTest, GlobalRefusesReplicatedForAnOutputWhosePartitionsDiffer) {
  // Output 1 is x + partition_id: each partition's differs, so reading it
  // as replicated would write one partition's values as the whole.
  CliResult result =
      RunProgram(kProgram, 2, F32({6}, {1, 2, 3, 10, 20, 30}),
                 {"--global", "--output-sharding", "{replicated}",
                  "--output-sharding", "{replicated}"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("says partitions 0 and 1 hold the same part of the "
                        "output, but their values differ"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "out0.npy"));
}

TEST_F(CausewayCommandTest, AValueTooBigForMemoryIsRefusedNamingTheInstruction) {
  CliResult result = RunProgram(R"(HloModule big
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  zero = f32[] parameter(0)
  i = f32[100000000000] iota(), iota_dimension=0
  ROOT r = f32[] reduce(i, zero), dimensions={0}, to_apply=add
}
)",
                                1, F32({1}, {0}));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("instruction 'i' (line 9)"));
  EXPECT_THAT(result.output, HasSubstr("needs a buffer of 400000000000 bytes"));
}

TEST_F(CausewayCommandTest, ReplicaGroupsThatLeaveAPartitionOutAreRefusedAtLoad) {
  CliResult result = RunProgram(R"(HloModule lonely, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[] parameter(0), sharding={replicated}
  ROOT r = f32[] all-reduce(x), channel_id=1, replica_groups={{0}}, use_global_device_ids=true, to_apply=add
}
)",
                                2, F32({2}, {1, 2}));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("replica_groups leave out device id 1"));
  EXPECT_THAT(result.output, Not(HasSubstr("running")));
}

TEST_F(CausewayCommandTest, RunsACorpusProgramLikeJax) {
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

}  // namespace causeway_command_test
}  // namespace causeway
