// The examples, run as tests: the same code the example binaries run,
// with their printed values asserted.
#include <memory>
#include <string>

#include "causeway/client/client.h"
#include "causeway/client/fake_session_channel.h"
#include "causeway/client/local_client.h"
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

// The stage programs' math against JAX's one-device training run, on the
// fake head (programs really run; no runtime in between).
TEST(PipelineTest, StageProgramsTrainLikeJaxOnOneDeviceOnTheFakeHead) {
  absl::StatusOr<PipelineData> data =
      LoadPipelineData(CAUSEWAY_PIPELINE_DATA_DIR);
  ASSERT_TRUE(data.ok()) << data.status();
  std::unique_ptr<client::Client> client = FakeClient();
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

}  // namespace
}  // namespace causeway::examples
