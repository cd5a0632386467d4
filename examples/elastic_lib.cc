#include "elastic_lib.h"

#include <cstdio>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"

namespace causeway::examples {
namespace {

std::string LossText(float loss) { return absl::StrFormat("%.9g", loss); }

double UnixSeconds(absl::Time t) {
  return static_cast<double>(absl::ToUnixMicros(t)) / 1e6;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// "devices 4..7 on host 1", "devices 0,2 on hosts 0,3" (hosts only where
// the client's topology knows the devices).
std::string DescribeMapping(const transport::SliceInfo& info,
                            const transport::Topology* topology) {
  bool contiguous = !info.devices.empty();
  for (size_t i = 1; i < info.devices.size(); ++i) {
    contiguous &= info.devices[i].value() == info.devices[i - 1].value() + 1;
  }
  std::string text =
      contiguous && info.devices.size() > 1
          ? absl::StrCat("devices ", info.devices.front().value(), "..",
                         info.devices.back().value())
          : absl::StrCat("devices ",
                         absl::StrJoin(info.devices, ",",
                                       [](std::string* out, DeviceId d) {
                                         absl::StrAppend(out, d.value());
                                       }));
  std::set<int64_t> hosts;
  for (DeviceId device : info.devices) {
    if (topology == nullptr || !topology->HasDevice(device)) return text;
    hosts.insert(topology->HostOf(device).value());
  }
  absl::StrAppend(&text, hosts.size() == 1 ? " on host " : " on hosts ",
                  absl::StrJoin(hosts, ","));
  return text;
}

// The training state on the host: the parameters before step `step`.
struct Snapshot {
  int64_t step = 0;
  std::vector<hlo::Literal> params;
};

class ElasticRun {
 public:
  ElasticRun(client::Client& client, const MlpData& data,
             const ElasticOptions& options)
      : client_(client), data_(data), options_(options) {}

  absl::StatusOr<ElasticResult> Run();

 private:
  void Print(const std::string& line) const {
    if (options_.print) {
      options_.print(line);
    } else {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
  }
  // Compiles the train step for the slice's current mapping.
  absl::Status Load();
  // Uploads `snapshot_` as the current parameters.
  absl::Status Restore();
  // Copies the current parameters to the host as the snapshot before
  // `step`. DATA_LOSS when they were lost.
  absl::Status TakeSnapshot(int64_t step);
  // After `error` (DATA_LOSS) at `step`: waits for the remap, reloads,
  // restores; training goes on from the snapshot's step.
  absl::Status Recover(int64_t step, absl::Status error);
  // Waits until the head maps the slice anew (generation past mapping_'s).
  absl::Status AwaitRemap();

  client::Client& client_;
  const MlpData& data_;
  const ElasticOptions& options_;
  std::optional<client::Session> session_;
  client::Slice slice_;
  transport::SliceInfo mapping_;
  client::Executable program_;
  std::vector<client::Array> params_;
  Snapshot snapshot_;
  // The recovery whose next good step has not come yet.
  std::optional<Recovery> pending_;
  int64_t recoveries_started_ = 0;
  ElasticResult result_;
};

absl::Status ElasticRun::Load() {
  // The head refuses a program whose partitions do not match the slice.
  CW_ASSIGN_OR_RETURN(program_, session_->Compile(data_.program, slice_));
  return absl::OkStatus();
}

absl::Status ElasticRun::Restore() {
  const std::vector<client::Sharding>& shardings =
      program_.parameter_shardings();
  params_.clear();
  for (int i = 0; i < kMlpNumParams; ++i) {
    CW_ASSIGN_OR_RETURN(
        client::Array param,
        session_->FromHost(snapshot_.params[i], slice_, shardings[i]));
    params_.push_back(std::move(param));
  }
  return absl::OkStatus();
}

absl::Status ElasticRun::TakeSnapshot(int64_t step) {
  std::vector<Future<hlo::Literal>> fetches;
  for (const client::Array& param : params_) fetches.push_back(param.ToHost());
  Snapshot taken;
  taken.step = step;
  for (const Future<hlo::Literal>& fetch : fetches) {
    CW_ASSIGN_OR_RETURN(hlo::Literal value,
                        fetch.AwaitFor(options_.step_timeout));
    taken.params.push_back(std::move(value));
  }
  snapshot_ = std::move(taken);
  Print(absl::StrCat("snapshot before step ", step));
  return absl::OkStatus();
}

absl::Status ElasticRun::AwaitRemap() {
  const absl::Time deadline = absl::Now() + options_.remap_timeout;
  // The session protocol has no remap notice: ask for the mapping until it
  // moves, backing off from 1 ms to 20 ms. A slice without spares is
  // broken: its generation moves but it keeps its lost devices until a
  // host joins; a remap replaces them.
  const absl::Status too_late = absl::DeadlineExceededError(absl::StrCat(
      "the head did not remap ", slice_.ToString(), " within ",
      absl::FormatDuration(options_.remap_timeout),
      " (no spare devices on its island?)"));
  absl::Duration pause = absl::Milliseconds(1);
  while (true) {
    absl::StatusOr<transport::SliceInfo> info =
        slice_.Info().AwaitUntil(deadline);
    if (info.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return too_late;
    }
    CW_RETURN_IF_ERROR(info.status());
    if (info->generation > mapping_.generation &&
        info->devices != mapping_.devices) {
      mapping_ = *std::move(info);
      return absl::OkStatus();
    }
    if (absl::Now() + pause > deadline) return too_late;
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(20));
  }
}

absl::Status ElasticRun::Recover(int64_t step, absl::Status error) {
  if (recoveries_started_ >= options_.max_recoveries) {
    return absl::Status(
        error.code(), absl::StrCat("giving up after ", recoveries_started_,
                                   " recoveries: ", error.message()));
  }
  ++recoveries_started_;
  // A failure before the last recovery's next good step is part of it: its
  // time still runs from the first error.
  Recovery recovery = pending_.value_or(Recovery{});
  if (!pending_.has_value()) {
    recovery.failed_step = step;
    recovery.error = error;
    recovery.error_at = absl::Now();
  }
  recovery.restored_step = snapshot_.step;
  const absl::Time started = absl::Now();
  Print(absl::StrCat("step ", step, " failed (", error.ToString(),
                     "); waiting for the slice to be remapped"));
  CW_RETURN_IF_ERROR(AwaitRemap());
  const absl::Time remapped = absl::Now();
  CW_RETURN_IF_ERROR(Load());
  const absl::Time loaded = absl::Now();
  CW_RETURN_IF_ERROR(Restore());
  recovery.generation = mapping_.generation;
  recovery.remap += remapped - started;
  recovery.reload += loaded - remapped;
  recovery.restore += absl::Now() - loaded;
  pending_ = std::move(recovery);
  return absl::OkStatus();
}

absl::StatusOr<ElasticResult> ElasticRun::Run() {
  if (options_.steps < 1 || options_.snapshot_every < 1 ||
      options_.devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps (", options_.steps, "), snapshot_every (",
                     options_.snapshot_every, ") and devices (",
                     options_.devices, ") must be at least 1"));
  }
  CW_ASSIGN_OR_RETURN(session_, client_.OpenSession({.name = "elastic"}));
  CW_ASSIGN_OR_RETURN(slice_, session_->CreateSlice(options_.devices));
  CW_ASSIGN_OR_RETURN(mapping_,
                      slice_.Ready().AwaitFor(options_.remap_timeout));
  CW_RETURN_IF_ERROR(Load());
  snapshot_.params = data_.params;
  CW_RETURN_IF_ERROR(Restore());
  Print(absl::StrCat("training the data-parallel MLP for ", options_.steps,
                     " steps on slice ", slice_.handle().value(), ": ",
                     DescribeMapping(mapping_, client_.topology().get()),
                     " (generation ", mapping_.generation,
                     "), a snapshot every ", options_.snapshot_every,
                     " steps"));

  result_.losses.assign(options_.steps, 0);
  int64_t launched = -1;  // The furthest step launched.
  int64_t step = 0;
  while (step < options_.steps) {
    if (step % options_.snapshot_every == 0 && step != snapshot_.step) {
      absl::Status taken = TakeSnapshot(step);
      if (taken.code() == absl::StatusCode::kDataLoss) {
        CW_RETURN_IF_ERROR(Recover(step, taken));
        step = snapshot_.step;
        continue;
      }
      CW_RETURN_IF_ERROR(taken);
    }
    CW_ASSIGN_OR_RETURN(
        std::vector<client::Array> out,
        LaunchMlpStep(*session_, program_, params_, data_,
                      step % data_.num_batches()));
    const bool redone = step <= launched;
    if (!redone) {
      launched = step;
      if (options_.after_launch) {
        CW_RETURN_IF_ERROR(options_.after_launch(step, mapping_));
      }
    }
    absl::StatusOr<hlo::Literal> loss =
        out[kMlpNumParams].ToHost().AwaitFor(options_.step_timeout);
    if (loss.status().code() == absl::StatusCode::kDataLoss) {
      CW_RETURN_IF_ERROR(Recover(step, loss.status()));
      step = snapshot_.step;
      continue;
    }
    CW_RETURN_IF_ERROR(loss.status());
    if (pending_.has_value()) {
      Recovery& r = *pending_;
      r.good_at = absl::Now();
      Print(absl::StrFormat(
          "recovery %d: step %d failed; slice remapped to %s (generation %d), "
          "program reloaded, snapshot before step %d restored; %.3f s from "
          "the error to the next good step (remap %.3f s, reload %.3f s, "
          "restore %.3f s, step %.3f s); error at unix %.6f, next good step "
          "at unix %.6f",
          result_.recoveries.size() + 1, r.failed_step,
          DescribeMapping(mapping_, client_.topology().get()), r.generation,
          r.restored_step, Seconds(r.good_at - r.error_at), Seconds(r.remap),
          Seconds(r.reload), Seconds(r.restore),
          Seconds(r.good_at - r.error_at - r.remap - r.reload - r.restore),
          UnixSeconds(r.error_at), UnixSeconds(r.good_at)));
      result_.recoveries.push_back(std::move(r));
      pending_.reset();
    }
    const float value = static_cast<float>(loss->GetAsDouble(0));
    result_.losses[step] = value;
    Print(absl::StrCat("step ", step, " loss ", LossText(value),
                       redone ? " (redone)" : ""));
    params_.assign(out.begin(), out.begin() + kMlpNumParams);
    ++step;
  }
  result_.final_loss = result_.losses.back();
  Print(FinalLossLine(result_.final_loss));
  CW_RETURN_IF_ERROR(session_->Close());
  return std::move(result_);
}

}  // namespace

absl::StatusOr<ElasticResult> RunElasticTraining(
    client::Client& client, const MlpData& data,
    const ElasticOptions& options) {
  ElasticRun run(client, data, options);
  return run.Run();
}

std::string FinalLossLine(float loss) {
  return absl::StrCat("final loss ", LossText(loss));
}

}  // namespace causeway::examples
