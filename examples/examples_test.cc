// The examples, run as tests: the same code the example binaries run,
// with their printed values asserted, on the fake head, on an embedded
// cluster, and on a multi-process cluster (`causeway cluster`) the test
// starts.
#include <memory>
#include <string>
#include <vector>

#include "causeway/cli/child_process.h"
#include "causeway/cli/cluster_process.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "causeway/client/fake_session_channel.h"
#include "causeway/client/local_client.h"
#include "causeway/base/status.h"
#include "causeway/cluster/local_cluster.h"
#include "figure2_lib.h"
#include "pipeline_lib.h"
#include "sharing_lib.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::examples {
namespace {

using ::testing::ElementsAre;

std::unique_ptr<client::Client> FakeClient() {
  return client::Client::Create(
      []() -> absl::StatusOr<std::unique_ptr<transport::SessionChannel>> {
        return std::make_unique<client::FakeSessionChannel>();
      });
}

// `causeway cluster` with `flags`, and a client of it.
struct RunningCluster {
  std::unique_ptr<cli::ClusterProcess> process;
  std::unique_ptr<client::Client> client;
};
absl::StatusOr<RunningCluster> StartCluster(std::vector<std::string> flags) {
  RunningCluster out;
  CW_ASSIGN_OR_RETURN(out.process,
                      cli::ClusterProcess::Start(CAUSEWAY_BINARY, flags));
  CW_ASSIGN_OR_RETURN(out.client, client::Connect(out.process->address()));
  return out;
}

TEST(Figure2Test, FOfOneTwoIsThreeFiveAndTwoFourOnTheFakeHead) {
  std::unique_ptr<client::Client> client = FakeClient();
  absl::StatusOr<Figure2Result> result = RunFigure2(*client);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->first, ElementsAre(3, 5));
  EXPECT_THAT(result->second, ElementsAre(2, 4));
  EXPECT_EQ(result->ToString(), "([3, 5], [2, 4])");
}

TEST(Figure2Test, FOfOneTwoIsThreeFiveAndTwoFourOnALocalCluster) {
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create({.islands = 3, .devices_per_host = 2});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<client::Client> client = client::ConnectLocal(**cluster);
  absl::StatusOr<Figure2Result> result = RunFigure2(*client);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->ToString(), "([3, 5], [2, 4])");
}

TEST(Figure2Test, FOfOneTwoIsThreeFiveAndTwoFourOnAMultiProcessCluster) {
  absl::StatusOr<RunningCluster> cluster = StartCluster(
      {"--islands", "3", "--hosts-per-island", "1", "--devices-per-host", "2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<Figure2Result> result = RunFigure2(*cluster->client);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->ToString(), "([3, 5], [2, 4])");
}

// The figure2 binary itself, pointed at a running cluster by its flag.
TEST(Figure2Test, TheBinaryRunsOnTheClusterItsFlagNames) {
  absl::StatusOr<std::unique_ptr<cli::ClusterProcess>> cluster =
      cli::ClusterProcess::Start(CAUSEWAY_BINARY,
                                 {"--islands", "3", "--hosts-per-island", "1",
                                  "--devices-per-host", "2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<std::unique_ptr<cli::ChildProcess>> figure2 =
      cli::ChildProcess::Start(
          {CAUSEWAY_FIGURE2_BINARY, "--cluster", (*cluster)->address()},
          /*merge_stderr=*/true);
  ASSERT_TRUE(figure2.ok()) << figure2.status();
  absl::StatusOr<std::string> line =
      (*figure2)->ReadLineStartingWith("f([1, 2]) = ", absl::Seconds(60));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "f([1, 2]) = ([3, 5], [2, 4])");
  absl::StatusOr<int> status = (*figure2)->Wait(absl::Seconds(30));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 0) << cli::ChildProcess::DescribeWaitStatus(*status);
}

// The stage programs' math against JAX's one-device training run, one
// micro-batch per step. (The fake head runs no collectives across
// partitions, and the stages all-reduce their gradients: the runtime runs
// them.)
TEST(PipelineTest, StageProgramsTrainLikeJaxOnOneDeviceWithOneMicroBatch) {
  absl::StatusOr<PipelineData> data =
      LoadPipelineData(CAUSEWAY_PIPELINE_DATA_DIR);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create({.islands = 4, .devices_per_host = 2});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<client::Client> client = client::ConnectLocal(**cluster);
  PipelineOptions options;
  options.learning_rate = data->learning_rate;
  absl::StatusOr<PipelineRunResult> run =
      TrainPipeline(*client, *data, options);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->losses.size(), data->reference_losses.size());
  for (size_t i = 0; i < run->losses.size(); ++i) {
    EXPECT_NEAR(run->losses[i], data->reference_losses[i], 1e-5) << "step " << i;
  }
  absl::StatusOr<double> diff =
      MaxParameterDifference(run->final_parameters, data->reference_final);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_LT(*diff, 1e-5);
}

// Four stages on four islands, two devices each, arrays crossing islands
// every step: the parameters after training equal JAX's one-device run.
TEST(PipelineTest, PipelinedTrainingOnFourIslandsMatchesJaxOnOneDevice) {
  absl::StatusOr<PipelineData> data =
      LoadPipelineData(CAUSEWAY_PIPELINE_DATA_DIR);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create({.islands = 4, .devices_per_host = 2});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<client::Client> client = client::ConnectLocal(**cluster);
  PipelineOptions options;
  options.learning_rate = data->learning_rate;
  options.micro_batches = 4;
  absl::StatusOr<PipelineRunResult> run =
      TrainPipeline(*client, *data, options);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->losses.size(), data->reference_losses.size());
  for (size_t i = 0; i < run->losses.size(); ++i) {
    EXPECT_NEAR(run->losses[i], data->reference_losses[i], 1e-5) << "step " << i;
  }
  absl::StatusOr<double> diff =
      MaxParameterDifference(run->final_parameters, data->reference_final);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_LT(*diff, 1e-5);
}

// The same with every stage's island a worker process of its own: arrays
// cross processes on the TCP data plane every step.
TEST(PipelineTest, PipelinedTrainingOnAMultiProcessClusterMatchesJaxOnOneDevice) {
  absl::StatusOr<PipelineData> data =
      LoadPipelineData(CAUSEWAY_PIPELINE_DATA_DIR);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<RunningCluster> cluster = StartCluster(
      {"--islands", "4", "--hosts-per-island", "1", "--devices-per-host", "2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  PipelineOptions options;
  options.learning_rate = data->learning_rate;
  options.micro_batches = 4;
  absl::StatusOr<PipelineRunResult> run =
      TrainPipeline(*cluster->client, *data, options);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->losses.size(), data->reference_losses.size());
  for (size_t i = 0; i < run->losses.size(); ++i) {
    EXPECT_NEAR(run->losses[i], data->reference_losses[i], 1e-5) << "step " << i;
  }
  absl::StatusOr<double> diff =
      MaxParameterDifference(run->final_parameters, data->reference_final);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_LT(*diff, 1e-5);
}

// Three sessions want 2 of the island's 4 devices: the third waits and is
// granted when the first ends, before the second ends.
TEST(SharingTest, TheThirdSessionRunsAsSoonAsTheFirstEnds) {
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create({.islands = 1, .devices_per_host = 4});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<client::Client> client = client::ConnectLocal(**cluster);
  absl::StatusOr<SharingResult> result = RunSharing(*client);
  ASSERT_TRUE(result.ok()) << result.status();
  SCOPED_TRACE(result->ToString());
  EXPECT_THAT(result->results, ElementsAre(24, 168, 1608));
  ASSERT_GE(result->Index("C", "waits in the queue"), 0);
  EXPECT_LT(result->Index("A", "closed"), result->Index("C", "granted"));
  EXPECT_LT(result->Index("C", "granted"), result->Index("B", "closed"));
  EXPECT_LT(result->Index("C", "granted"), result->Index("C", "finished"));
}

// The same on island 0 of a cluster of two worker processes of 2 devices.
TEST(SharingTest, TheThirdSessionRunsAsSoonAsTheFirstEndsOnAMultiProcessCluster) {
  absl::StatusOr<RunningCluster> cluster = StartCluster(
      {"--islands", "1", "--hosts-per-island", "2", "--devices-per-host", "2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<SharingResult> result = RunSharing(*cluster->client);
  ASSERT_TRUE(result.ok()) << result.status();
  SCOPED_TRACE(result->ToString());
  EXPECT_THAT(result->results, ElementsAre(24, 168, 1608));
  ASSERT_GE(result->Index("C", "waits in the queue"), 0);
  EXPECT_LT(result->Index("A", "closed"), result->Index("C", "granted"));
  EXPECT_LT(result->Index("C", "granted"), result->Index("B", "closed"));
  EXPECT_LT(result->Index("C", "granted"), result->Index("C", "finished"));
}

}  // namespace
}  // namespace causeway::examples
