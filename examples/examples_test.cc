// The examples, run as tests: the same code the example binaries run,
// with their printed values asserted, on the fake head, on an embedded
// cluster, and on a multi-process cluster (`causeway cluster`) the test
// starts.
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/cli/child_process.h"
#include "causeway/cli/cluster_process.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "causeway/client/local_client.h"
#include "causeway/client/testing/fake_session_channel.h"
#include "causeway/cluster/local_cluster.h"
#include "elastic_lib.h"
#include "figure2_lib.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlp_lib.h"
#include "pipeline_lib.h"
#include "sharing_lib.h"

namespace causeway::examples {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

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

// The lines of `lines` that start with `prefix`, in order.
std::vector<std::string> LinesStartingWith(
    const std::vector<std::string>& lines, const std::string& prefix) {
  std::vector<std::string> found;
  for (const std::string& line : lines) {
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  }
  return found;
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

// The MLP demo on four single-device worker processes: its slice spans all
// four, so every step's gradient all-reduce crosses processes (Gloo), and
// the losses still follow JAX's (the demo prints both; JAX ran the same
// steps on the same data).
TEST(MlpDemoTest, TrainsLikeJaxOnFourWorkerProcesses) {
  absl::StatusOr<std::unique_ptr<cli::ClusterProcess>> cluster =
      cli::ClusterProcess::Start(CAUSEWAY_BINARY,
                                 {"--islands", "1", "--hosts-per-island", "4",
                                  "--devices-per-host", "1"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<std::unique_ptr<cli::ChildProcess>> demo =
      cli::ChildProcess::Start({CAUSEWAY_MLP_DEMO_BINARY, CAUSEWAY_MLP_DATA_DIR,
                                "--steps", "30", "--cluster",
                                (*cluster)->address()},
                               /*merge_stderr=*/true);
  ASSERT_TRUE(demo.ok()) << demo.status();
  absl::StatusOr<std::string> line =
      (*demo)->ReadLineStartingWith("final loss: ", absl::Seconds(120));
  ASSERT_TRUE(line.ok()) << line.status();
  double causeway_loss = 0, jax_loss = 0;
  ASSERT_EQ(std::sscanf(line->c_str(), "final loss: causeway %lf jax %lf",
                        &causeway_loss, &jax_loss),
            2)
      << *line;
  EXPECT_NEAR(causeway_loss, jax_loss, 1e-4 * std::abs(jax_loss)) << *line;
  absl::StatusOr<int> status = (*demo)->Wait(absl::Seconds(30));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 0) << cli::ChildProcess::DescribeWaitStatus(*status);
}

// JAX's one-device training run of the pipeline, and the check of a run
// against it.
class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<PipelineData> data =
        LoadPipelineData(CAUSEWAY_PIPELINE_DATA_DIR);
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *std::move(data);
  }

  // Trains the pipeline on `client`'s cluster, each step in `micro_batches`
  // micro-batches: every loss and the final parameters are JAX's.
  void ExpectTrainsLikeJax(client::Client& client, int64_t micro_batches) {
    PipelineOptions options;
    options.learning_rate = data_.learning_rate;
    options.micro_batches = micro_batches;
    absl::StatusOr<PipelineRunResult> run =
        TrainPipeline(client, data_, options);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->losses.size(), data_.reference_losses.size());
    for (size_t i = 0; i < run->losses.size(); ++i) {
      EXPECT_NEAR(run->losses[i], data_.reference_losses[i], 1e-5)
          << "step " << i;
    }
    absl::StatusOr<double> diff =
        MaxParameterDifference(run->final_parameters, data_.reference_final);
    ASSERT_TRUE(diff.ok()) << diff.status();
    EXPECT_LT(*diff, 1e-5);
  }

  PipelineData data_;
};

// The stage programs' math, one micro-batch per step. (The fake head runs
// no collectives across partitions, and the stages all-reduce their
// gradients: the runtime runs them.)
TEST_F(PipelineTest, StageProgramsTrainLikeJaxOnOneDeviceWithOneMicroBatch) {
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create({.islands = 4, .devices_per_host = 2});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ExpectTrainsLikeJax(*client::ConnectLocal(**cluster), /*micro_batches=*/1);
}

// Four stages on four islands, two devices each, arrays crossing islands
// every step.
TEST_F(PipelineTest, PipelinedTrainingOnFourIslandsMatchesJaxOnOneDevice) {
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create({.islands = 4, .devices_per_host = 2});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ExpectTrainsLikeJax(*client::ConnectLocal(**cluster), /*micro_batches=*/4);
}

// The same with every stage's island a worker process of its own: arrays
// cross processes on the TCP data plane every step.
TEST_F(PipelineTest,
       PipelinedTrainingOnAMultiProcessClusterMatchesJaxOnOneDevice) {
  absl::StatusOr<RunningCluster> cluster = StartCluster(
      {"--islands", "4", "--hosts-per-island", "1", "--devices-per-host", "2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ExpectTrainsLikeJax(*cluster->client, /*micro_batches=*/4);
}

// Three sessions want 2 of the island's 4 devices of `client`'s cluster:
// the third waits and is granted when the first ends, before the second
// ends.
void ExpectTheThirdSessionRunsAsSoonAsTheFirstEnds(client::Client& client) {
  absl::StatusOr<SharingResult> result = RunSharing(client);
  ASSERT_TRUE(result.ok()) << result.status();
  SCOPED_TRACE(result->ToString());
  EXPECT_THAT(result->results, ElementsAre(24, 168, 1608));
  ASSERT_GE(result->Index("C", "waits in the queue"), 0);
  EXPECT_LT(result->Index("A", "closed"), result->Index("C", "granted"));
  EXPECT_LT(result->Index("C", "granted"), result->Index("B", "closed"));
  EXPECT_LT(result->Index("C", "granted"), result->Index("C", "finished"));
}

TEST(SharingTest, TheThirdSessionRunsAsSoonAsTheFirstEnds) {
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create({.islands = 1, .devices_per_host = 4});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ExpectTheThirdSessionRunsAsSoonAsTheFirstEnds(
      *client::ConnectLocal(**cluster));
}

// The same on island 0 of a cluster of two worker processes of 2 devices.
TEST(SharingTest, TheThirdSessionRunsAsSoonAsTheFirstEndsOnAMultiProcessCluster) {
  absl::StatusOr<RunningCluster> cluster = StartCluster(
      {"--islands", "1", "--hosts-per-island", "2", "--devices-per-host", "2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ExpectTheThirdSessionRunsAsSoonAsTheFirstEnds(*cluster->client);
}

// Elastic training on an embedded cluster of `hosts` hosts of 4 devices:
// the run's result and every line it printed.
class ElasticTrainingTest : public ::testing::Test {
 protected:
  struct Run {
    absl::StatusOr<ElasticResult> result;
    std::vector<std::string> lines;

    std::vector<std::string> LinesStartingWith(const std::string& prefix) const {
      return examples::LinesStartingWith(lines, prefix);
    }
  };

  void SetUp() override {
    absl::StatusOr<MlpData> data = LoadMlpData(CAUSEWAY_MLP_DATA_DIR);
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *std::move(data);
  }

  // Trains 10 steps, a snapshot every 3; stops the slice's host after
  // launching step `stop_at` (-1: never), and with `restart` brings it
  // back at once as a new host.
  Run Train(int64_t hosts, int64_t stop_at,
            absl::Duration remap_timeout = absl::Seconds(30),
            bool restart = false) {
    absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
        cluster::LocalCluster::Create(
            {.islands = 1, .hosts_per_island = hosts, .devices_per_host = 4});
    CW_CHECK(cluster.ok()) << cluster.status();
    std::unique_ptr<client::Client> client = client::ConnectLocal(**cluster);
    Run run;
    ElasticOptions options;
    options.steps = 10;
    options.snapshot_every = 3;
    options.remap_timeout = remap_timeout;
    options.print = [&run](const std::string& line) {
      run.lines.push_back(line);
    };
    options.after_launch = [&](int64_t step,
                               const transport::SliceInfo& mapping) {
      if (step != stop_at) return absl::OkStatus();
      stopped_ = (*cluster)->topology()->HostOf(mapping.devices.front());
      CW_RETURN_IF_ERROR((*cluster)->StopHost(stopped_));
      if (restart) CW_RETURN_IF_ERROR((*cluster)->RestartHost(stopped_).status());
      return absl::OkStatus();
    };
    run.result = RunElasticTraining(*client, data_, options);
    return run;
  }

  MlpData data_;
  HostId stopped_;
};

TEST_F(ElasticTrainingTest, AStoppedHostCostsOneRecoveryAndNoBitOfTheLoss) {
  Run whole = Train(/*hosts=*/2, /*stop_at=*/-1);
  ASSERT_TRUE(whole.result.ok()) << whole.result.status();
  Run interrupted = Train(/*hosts=*/2, /*stop_at=*/7);
  ASSERT_TRUE(interrupted.result.ok()) << interrupted.result.status();

  EXPECT_TRUE(whole.LinesStartingWith("recovery ").empty());
  ASSERT_EQ(interrupted.LinesStartingWith("recovery ").size(), 1u);
  EXPECT_THAT(interrupted.LinesStartingWith("recovery ")[0],
              HasSubstr("step 7 failed; slice remapped"));
  EXPECT_EQ(whole.lines.back(), interrupted.lines.back());
  EXPECT_EQ(whole.lines.back(), FinalLossLine(whole.result->final_loss));
  // Every step's loss, bit for bit, and the redone steps came from the
  // snapshot before step 6.
  EXPECT_EQ(whole.result->losses, interrupted.result->losses);
  ASSERT_EQ(interrupted.result->recoveries.size(), 1u);
  const Recovery& recovery = interrupted.result->recoveries[0];
  EXPECT_EQ(recovery.failed_step, 7);
  EXPECT_EQ(recovery.restored_step, 6);
  EXPECT_EQ(recovery.error.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(recovery.error.message(),
              HasSubstr(absl::StrCat("host ", stopped_.value())));
  EXPECT_THAT(interrupted.LinesStartingWith("step 6 loss"),
              ElementsAre(HasSubstr("loss"), HasSubstr("(redone)")));
}

TEST_F(ElasticTrainingTest, LearnsLikeJaxStepForStep) {
  Run run = Train(/*hosts=*/1, /*stop_at=*/-1);
  ASSERT_TRUE(run.result.ok()) << run.result.status();
  ASSERT_TRUE(data_.jax_loss.has_value());
  for (int64_t step = 0; step < data_.num_batches(); ++step) {
    EXPECT_NEAR(run.result->losses[step], data_.jax_loss->GetAsDouble(step),
                1e-4)
        << "step " << step;
  }
}

TEST_F(ElasticTrainingTest, ABrokenSliceGoesOnOnceAHostJoins) {
  Run whole = Train(/*hosts=*/1, /*stop_at=*/-1);
  ASSERT_TRUE(whole.result.ok()) << whole.result.status();
  // No spare: the slice breaks, and is repaired by the restarted host.
  Run interrupted = Train(/*hosts=*/1, /*stop_at=*/4, absl::Seconds(30),
                          /*restart=*/true);
  ASSERT_TRUE(interrupted.result.ok()) << interrupted.result.status();
  EXPECT_THAT(interrupted.LinesStartingWith("recovery "),
              ElementsAre(HasSubstr("snapshot before step 3 restored")));
  EXPECT_EQ(whole.lines.back(), interrupted.lines.back());
}

TEST_F(ElasticTrainingTest, WithoutASpareHostTheRunFailsSayingSo) {
  Run run = Train(/*hosts=*/1, /*stop_at=*/4, absl::Milliseconds(300));
  EXPECT_EQ(run.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(run.result.status().message()), HasSubstr("did not remap"));
  EXPECT_THAT(run.LinesStartingWith("step 4 failed"),
              ElementsAre(HasSubstr("DATA_LOSS")));
}

// Elastic training as its binary on a `causeway cluster` of two workers of
// 4 devices (one spare): the worker under the slice is SIGKILLed while the
// run pauses after launching step 4; the run recovers once, onto the other
// worker, and ends with the uninterrupted run's final loss.
class ElasticOnAClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<cli::ClusterProcess>> cluster =
        cli::ClusterProcess::Start(
            CAUSEWAY_BINARY, {"--islands", "1", "--hosts-per-island", "1",
                              "--devices-per-host", "4", "--spare-hosts", "1",
                              "--memory-per-device", "256M"});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  // Starts elastic_training on the cluster: 10 steps, a snapshot every 3.
  void StartTraining(std::vector<std::string> flags = {}) {
    std::vector<std::string> argv = {CAUSEWAY_ELASTIC_TRAINING_BINARY,
                                     "--cluster", cluster_->address(),
                                     "--steps", "10", "--snapshot-every", "3"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<std::unique_ptr<cli::ChildProcess>> training =
        cli::ChildProcess::Start(argv);
    ASSERT_TRUE(training.ok()) << training.status();
    training_ = *std::move(training);
    lines_.clear();
  }

  // The run's next line (kept in lines_).
  absl::StatusOr<std::string> NextLine() {
    absl::StatusOr<std::string> line =
        training_->ReadLineStartingWith("", absl::Seconds(120), /*echo=*/false);
    if (line.ok()) lines_.push_back(*line);
    return line;
  }

  // Reads the run's lines until it exits; its wait status.
  int Finish() {
    while (NextLine().ok()) {
    }
    absl::StatusOr<int> status = training_->Wait(absl::Seconds(30));
    training_.reset();
    return status.ok() ? *status : -1;
  }

  std::vector<std::string> LinesStartingWith(const std::string& prefix) const {
    return examples::LinesStartingWith(lines_, prefix);
  }

  std::unique_ptr<cli::ClusterProcess> cluster_;
  std::unique_ptr<cli::ChildProcess> training_;  // Killed if left running.
  std::vector<std::string> lines_;
};

TEST_F(ElasticOnAClusterTest, AKilledWorkerCostsOneRecoveryAndNoBitOfTheLoss) {
  StartTraining();
  ASSERT_EQ(Finish(), 0);
  ASSERT_THAT(LinesStartingWith("final loss "), SizeIs(1));
  const std::string whole = LinesStartingWith("final loss ")[0];
  EXPECT_THAT(LinesStartingWith("recovery "), IsEmpty());

  StartTraining({"--pause-at-step", "4"});
  // "training ... on slice 1: devices 0..3 on host 0 (generation 1), ..."
  int64_t host = -1;
  const std::string on_host = " on host ";
  for (absl::StatusOr<std::string> line = NextLine(); line.ok();
       line = NextLine()) {
    if (line->rfind("training ", 0) == 0 && line->find(on_host) != std::string::npos) {
      const size_t at = line->find(on_host) + on_host.size();
      ASSERT_TRUE(absl::SimpleAtoi(
          line->substr(at, line->find(' ', at) - at), &host)) << *line;
    }
    if (*line == "paused at step 4") break;
  }
  const std::map<HostId, pid_t>& workers = cluster_->workers();
  ASSERT_EQ(workers.count(HostId(host)), 1u) << "the slice is on host " << host;
  const pid_t victim = workers.at(HostId(host));
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_TRUE(cli::AwaitProcessExit(victim, absl::Seconds(30)).ok());
  training_->Signal(SIGUSR1);
  ASSERT_EQ(Finish(), 0);

  EXPECT_THAT(LinesStartingWith("final loss "), ElementsAre(whole));
  EXPECT_THAT(LinesStartingWith("step 4 failed (DATA_LOSS"), SizeIs(1));
  ASSERT_THAT(LinesStartingWith("recovery "), SizeIs(1));
  const std::string recovery = LinesStartingWith("recovery ")[0];
  EXPECT_THAT(recovery, HasSubstr("step 4 failed; slice remapped"));
  EXPECT_THAT(recovery, HasSubstr("snapshot before step 3 restored"));
  for (const auto& [other, pid] : workers) {
    if (other.value() != host) {
      EXPECT_THAT(recovery, HasSubstr(absl::StrCat("on host ", other.value(), " ")));
    }
  }
}

}  // namespace
}  // namespace causeway::examples
