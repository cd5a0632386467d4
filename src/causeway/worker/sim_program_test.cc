#include "causeway/worker/sim_program.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "causeway/base/logging.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/hlo/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::worker {
namespace sim_program_test {

using hlo::testutil::Values;
using ::testing::Each;
using ::testing::HasSubstr;

// The scalar all-reduce + add of the paper's Figure 5, on two partitions,
// with 1 ms of its own.
constexpr char kAllReduceAdd[] = R"(
HloModule ar_add, num_partitions=2
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[1] parameter(0), sharding={devices=[2]<=[2]}
  r = f32[1] all-reduce(x), channel_id=1, replica_groups=[1,2]<=[2], use_global_device_ids=true, to_apply=max
  one = f32[1] constant({1})
  ROOT y = f32[1] add(r, one), sharding={devices=[2]<=[2]}, frontend_attributes={causeway_sim_us="1000"}
}
)";

constexpr char kDot[] = R"(
HloModule dot
ENTRY main {
  a = f32[64,32] parameter(0)
  b = f32[32,16] parameter(1)
  d = f32[64,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d2 = f32[2] constant({0, 0})
  ROOT t = (f32[64,16], f32[2]) tuple(d, d2)
}
)";

std::unique_ptr<hlo::Module> Parse(const std::string& text) {
  absl::StatusOr<std::unique_ptr<hlo::Module>> module = hlo::ParseModule(text);
  CW_CHECK(module.ok()) << module.status();
  return *std::move(module);
}

// Only one term of the model at a time, so that each can be checked.
SimModel Only(absl::Duration program_time) {
  return SimModel{.program_time = program_time,
                  .peak_flops = 0,
                  .memory_bandwidth = 0,
                  .interconnect_bandwidth = 0,
                  .collective_latency = absl::ZeroDuration()};
}

TEST(SimProgramTest, AProgramsTimeIsTheFixedTimePlusItsOwnAttribute) {
  std::unique_ptr<hlo::Module> module = Parse(kAllReduceAdd);
  absl::StatusOr<std::unique_ptr<SimProgram>> program =
      SimProgram::Create(*module, Only(absl::Milliseconds(2)));
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->time(), absl::Milliseconds(3));
}

TEST(SimProgramTest, ADotCostsTwoFlopsPerMultiplyAdd) {
  std::unique_ptr<hlo::Module> module = Parse(
      "HloModule dot\nENTRY main {\n"
      "  a = f32[64,32] parameter(0)\n  b = f32[32,16] parameter(1)\n"
      "  ROOT d = f32[64,16] dot(a, b), lhs_contracting_dims={1}, "
      "rhs_contracting_dims={0}\n}\n");
  SimModel model = Only(absl::ZeroDuration());
  model.peak_flops = 2.0 * 64 * 16 * 32 / 1e-3;  // The dot takes 1 ms.
  absl::StatusOr<std::unique_ptr<SimProgram>> program =
      SimProgram::Create(*module, model);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->time(), absl::Milliseconds(1));
}

TEST(SimProgramTest, BytesInAndOutCostTheirTimeAtTheMemoryBandwidth) {
  std::unique_ptr<hlo::Module> module = Parse(
      "HloModule copy\nENTRY main {\n  a = f32[250] parameter(0)\n"
      "  ROOT c = f32[250] copy(a)\n}\n");
  SimModel model = Only(absl::ZeroDuration());
  model.memory_bandwidth = 2000 / 1e-3;  // 2,000 bytes in 1 ms.
  absl::StatusOr<std::unique_ptr<SimProgram>> program =
      SimProgram::Create(*module, model);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->time(), absl::Milliseconds(1));
}

TEST(SimProgramTest, ACollectiveCostsItsLatencyAndARingOverTheInterconnect) {
  std::unique_ptr<hlo::Module> module = Parse(kAllReduceAdd);
  SimModel model = Only(absl::ZeroDuration());
  model.collective_latency = absl::Microseconds(10);
  // Two devices: a ring moves 2·(2-1)/2 · 4 bytes = 4 bytes, in 1 ms.
  model.interconnect_bandwidth = 4 / 1e-3;
  absl::StatusOr<std::unique_ptr<SimProgram>> program =
      SimProgram::Create(*module, model);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->time(),
            absl::Milliseconds(1) + absl::Microseconds(10) +
                absl::Microseconds(1000));  // The attribute's own 1 ms.
}

TEST(SimProgramTest, AMalformedTimeAttributeIsRefusedNamingItsInstruction) {
  std::unique_ptr<hlo::Module> module = Parse(
      "HloModule bad\nENTRY main {\n  a = f32[] parameter(0)\n"
      "  ROOT n = f32[] negate(a), frontend_attributes={causeway_sim_us=\"-3\"}"
      "\n}\n");
  absl::StatusOr<std::unique_ptr<SimProgram>> program =
      SimProgram::Create(*module, SimModel());
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(program.status().message(), HasSubstr("line 4"));
  EXPECT_THAT(program.status().message(), HasSubstr("'n'"));
}

TEST(SimProgramTest, ALaunchReadyAProgramsTimeAgoEndsAtItsModelledEnd) {
  std::unique_ptr<hlo::Module> module = Parse(
      "HloModule neg\nENTRY main {\n  a = f32[3] parameter(0)\n"
      "  ROOT n = f32[3] negate(a)\n}\n");
  absl::StatusOr<std::unique_ptr<SimProgram>> program =
      SimProgram::Create(*module, Only(absl::Seconds(5)));
  ASSERT_TRUE(program.ok()) << program.status();
  // Its device was free and it was ready 5 s ago: it is done, and the
  // device was free again at start + 5 s, not now.
  const absl::Time start = absl::Now() - absl::Seconds(5);
  absl::Time end;
  absl::StatusOr<hlo::Literal> result =
      (*program)->Run(exec::RunContext(), start, &end);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(end, start + absl::Seconds(5));
  EXPECT_EQ(result->shape().ToString(false), "f32[3]");
  EXPECT_THAT(Values(*result), Each(0.0f));
}

TEST(SimProgramTest, ATupleResultIsZerosOfEveryElementsShape) {
  std::unique_ptr<hlo::Module> module = Parse(kDot);
  absl::StatusOr<std::unique_ptr<SimProgram>> program =
      SimProgram::Create(*module, Only(absl::ZeroDuration()));
  ASSERT_TRUE(program.ok()) << program.status();
  absl::Time end;
  absl::StatusOr<hlo::Literal> result =
      (*program)->Run(exec::RunContext(), absl::Now(), &end);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->shape().ToString(false), "(f32[64,16], f32[2])");
}

TEST(SimProgramTest, PartitionsMeetAtTheirCollectiveBeforeEitherEnds) {
  std::unique_ptr<hlo::Module> module = Parse(kAllReduceAdd);
  absl::StatusOr<std::unique_ptr<SimProgram>> program =
      SimProgram::Create(*module, Only(absl::ZeroDuration()));
  ASSERT_TRUE(program.ok()) << program.status();
  exec::InProcessCollectives collectives;
  std::vector<absl::Status> ran(2);
  std::vector<std::thread> partitions;
  for (int64_t partition = 0; partition < 2; ++partition) {
    partitions.emplace_back([&, partition] {
      exec::RunContext context;
      context.partition_id = partition;
      context.run_id = 7;
      context.collectives = &collectives;
      absl::Time end;
      ran[partition] = (*program)->Run(context, absl::Now(), &end).status();
    });
  }
  for (std::thread& partition : partitions) partition.join();
  EXPECT_TRUE(ran[0].ok()) << ran[0];
  EXPECT_TRUE(ran[1].ok()) << ran[1];
}

TEST(SimProgramTest, APartitionWhosePeerIsCancelledFailsWithItsReason) {
  std::unique_ptr<hlo::Module> module = Parse(kAllReduceAdd);
  absl::StatusOr<std::unique_ptr<SimProgram>> program =
      SimProgram::Create(*module, Only(absl::ZeroDuration()));
  ASSERT_TRUE(program.ok()) << program.status();
  exec::InProcessCollectives collectives;
  collectives.Cancel(absl::DataLossError("host 3 died"));
  exec::RunContext context;
  context.collectives = &collectives;
  absl::Time end;
  absl::Status ran = (*program)->Run(context, absl::Now(), &end).status();
  EXPECT_EQ(ran.code(), absl::StatusCode::kDataLoss) << ran;
  EXPECT_THAT(ran.message(), HasSubstr("host 3 died"));
}

}  // namespace sim_program_test
}  // namespace causeway::worker
