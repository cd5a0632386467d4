#include "causeway/exec/in_process_collectives.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"

namespace causeway::exec {

using hlo::Literal;

struct InProcessCollectives::Rendezvous {
  explicit Rendezvous(std::vector<int64_t> members)
      : group(std::move(members)),
        inputs(group.size()),
        arrived(group.size(), false) {}

  const std::vector<int64_t> group;
  std::vector<std::vector<Literal>> inputs;
  std::vector<bool> arrived;
  int64_t arrived_count = 0;
  int64_t departed_count = 0;
  bool done = false;
  absl::Status status;
  std::vector<Literal> outputs;
  absl::CondVar cv;
};

namespace {

std::string DescribeDevices(const CollectiveOp& op,
                            const std::vector<int64_t>& devices) {
  if (op.replica_count == 1) {
    return absl::StrCat(devices.size() == 1 ? "partition " : "partitions ",
                        absl::StrJoin(devices, ", "));
  }
  std::vector<std::string> names;
  for (int64_t d : devices) {
    names.push_back(absl::StrCat("(replica ", d / op.num_partitions,
                                 ", partition ", d % op.num_partitions, ")"));
  }
  return absl::StrCat("devices ", absl::StrJoin(names, ", "));
}

absl::Status CheckOperandCounts(
    const CollectiveOp& op, const std::vector<std::vector<Literal>>& inputs) {
  for (const auto& member_inputs : inputs) {
    if (member_inputs.size() != inputs[0].size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeCollective(op), ": participants sent ", inputs[0].size(),
          " and ", member_inputs.size(), " operands"));
    }
  }
  return absl::OkStatus();
}

// Returns the operand-`k` literals of every member, in group order.
std::vector<const Literal*> Column(
    const std::vector<std::vector<Literal>>& inputs, size_t k) {
  std::vector<const Literal*> column;
  column.reserve(inputs.size());
  for (const auto& member_inputs : inputs) column.push_back(&member_inputs[k]);
  return column;
}

Literal PackResult(std::vector<Literal> values) {
  if (values.size() == 1) return std::move(values[0]);
  return Literal::MakeTuple(std::move(values));
}

absl::Status Annotate(const CollectiveOp& op, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(DescribeCollective(op), ": ",
                                                  status.message()));
}

}  // namespace

InProcessCollectives::~InProcessCollectives() = default;

void InProcessCollectives::Cancel(absl::Status status) {
  if (status.ok()) status = absl::CancelledError("collectives cancelled");
  absl::MutexLock lock(&mu_);
  if (cancelled_.ok()) cancelled_ = status;
  is_cancelled_.store(true, std::memory_order_release);
  for (auto& [key, rendezvous] : pending_) {
    if (!rendezvous->done) {
      rendezvous->done = true;
      rendezvous->status = cancelled_;
    }
    rendezvous->cv.SignalAll();
  }
}

bool InProcessCollectives::AwaitWaiting(int64_t count, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return waiting_ >= count;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

absl::Status InProcessCollectives::Cancelled() const {
  if (!is_cancelled_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

void InProcessCollectives::Reset() {
  absl::MutexLock lock(&mu_);
  cancelled_ = absl::OkStatus();
  is_cancelled_.store(false, std::memory_order_release);
  pending_.clear();
}

absl::StatusOr<Literal> InProcessCollectives::Exchange(
    const CollectiveOp& op, const std::vector<int64_t>& group,
    std::vector<Literal> inputs, const CombineFn& combine) {
  const int64_t me = op.device_index();
  const auto position = std::find(group.begin(), group.end(), me);
  if (position == group.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        DescribeCollective(op), ": the caller is not in its own group"));
  }
  const size_t my_index = static_cast<size_t>(position - group.begin());
  const RendezvousKey key{op.key, group[0]};

  std::shared_ptr<Rendezvous> rendezvous;
  bool last = false;
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled_.ok()) {
      return absl::Status(
          cancelled_.code(),
          absl::StrCat(DescribeCollective(op),
                       " was cancelled: ", cancelled_.message()));
    }
    std::shared_ptr<Rendezvous>& slot = pending_[key];
    if (slot == nullptr) slot = std::make_shared<Rendezvous>(group);
    rendezvous = slot;
    if (rendezvous->group != group) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeCollective(op), ": participants disagree on the group ({",
          absl::StrJoin(rendezvous->group, ","), "} vs {",
          absl::StrJoin(group, ","), "})"));
    }
    if (rendezvous->arrived[my_index]) {
      return absl::InternalError(
          absl::StrCat(DescribeCollective(op), ": ", DescribeDevices(op, {me}),
                       " arrived twice for ", op.key.ToString()));
    }
    rendezvous->arrived[my_index] = true;
    rendezvous->inputs[my_index] = std::move(inputs);
    ++rendezvous->arrived_count;
    last = rendezvous->arrived_count == static_cast<int64_t>(group.size()) &&
           !rendezvous->done;
  }

  if (last) {
    // Every input is in and nobody writes them any more: combine unlocked.
    absl::StatusOr<std::vector<Literal>> outputs = combine(rendezvous->inputs);
    if (outputs.ok() && outputs->size() != group.size()) {
      outputs = absl::InternalError("collective produced the wrong count");
    }
    absl::MutexLock lock(&mu_);
    if (!rendezvous->done) {
      rendezvous->done = true;
      if (outputs.ok()) {
        rendezvous->outputs = *std::move(outputs);
      } else {
        rendezvous->status = Annotate(op, outputs.status());
      }
      rendezvous->inputs.clear();
    }
    rendezvous->cv.SignalAll();
  } else {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + options_.timeout;
    while (!rendezvous->done) {
      ++waiting_;
      const bool timed_out = rendezvous->cv.WaitWithDeadline(&mu_, deadline);
      --waiting_;
      if (timed_out && !rendezvous->done) {
        std::vector<int64_t> missing;
        for (size_t i = 0; i < group.size(); ++i) {
          if (!rendezvous->arrived[i]) missing.push_back(group[i]);
        }
        rendezvous->done = true;
        rendezvous->status = absl::DeadlineExceededError(absl::StrCat(
            DescribeCollective(op), ": ", DescribeDevices(op, missing),
            " did not arrive within ", absl::FormatDuration(options_.timeout),
            " (", op.key.ToString(), ")"));
        rendezvous->cv.SignalAll();
      }
    }
  }

  absl::MutexLock lock(&mu_);
  absl::StatusOr<Literal> result;
  if (rendezvous->status.ok()) {
    result = std::move(rendezvous->outputs[my_index]);
  } else {
    result = rendezvous->status;
  }
  if (++rendezvous->departed_count == static_cast<int64_t>(group.size())) {
    auto it = pending_.find(key);
    if (it != pending_.end() && it->second == rendezvous) pending_.erase(it);
  }
  return result;
}

absl::StatusOr<Literal> InProcessCollectives::AllReduce(
    const CollectiveOp& op, std::vector<Literal> operands) {
  CW_ASSIGN_OR_RETURN(std::vector<int64_t> group, GroupOf(op));
  const size_t count = group.size();
  return Exchange(
      op, group, std::move(operands),
      [&op, count](const std::vector<std::vector<Literal>>& inputs)
          -> absl::StatusOr<std::vector<Literal>> {
        CW_RETURN_IF_ERROR(CheckOperandCounts(op, inputs));
        std::vector<Literal> reduced;
        for (size_t k = 0; k < inputs[0].size(); ++k) {
          std::vector<const Literal*> column = Column(inputs, k);
          CW_ASSIGN_OR_RETURN(Literal value, ReduceInputs(op, column));
          reduced.push_back(std::move(value));
        }
        return std::vector<Literal>(count, PackResult(std::move(reduced)));
      });
}

absl::StatusOr<Literal> InProcessCollectives::AllGather(
    const CollectiveOp& op, std::vector<Literal> operands) {
  CW_ASSIGN_OR_RETURN(int64_t dimension, CollectiveDimension(op));
  CW_ASSIGN_OR_RETURN(std::vector<int64_t> group, GroupOf(op));
  const size_t count = group.size();
  return Exchange(
      op, group, std::move(operands),
      [&op, count, dimension](const std::vector<std::vector<Literal>>& inputs)
          -> absl::StatusOr<std::vector<Literal>> {
        CW_RETURN_IF_ERROR(CheckOperandCounts(op, inputs));
        std::vector<Literal> gathered;
        for (size_t k = 0; k < inputs[0].size(); ++k) {
          std::vector<const Literal*> column = Column(inputs, k);
          CW_ASSIGN_OR_RETURN(Literal value,
                              ConcatenateAlong(column, dimension));
          gathered.push_back(std::move(value));
        }
        return std::vector<Literal>(count, PackResult(std::move(gathered)));
      });
}

absl::StatusOr<Literal> InProcessCollectives::ReduceScatter(
    const CollectiveOp& op, std::vector<Literal> operands) {
  CW_ASSIGN_OR_RETURN(int64_t dimension, CollectiveDimension(op));
  CW_ASSIGN_OR_RETURN(std::vector<int64_t> group, GroupOf(op));
  const int64_t count = static_cast<int64_t>(group.size());
  return Exchange(
      op, group, std::move(operands),
      [&op, count, dimension](const std::vector<std::vector<Literal>>& inputs)
          -> absl::StatusOr<std::vector<Literal>> {
        CW_RETURN_IF_ERROR(CheckOperandCounts(op, inputs));
        std::vector<std::vector<Literal>> per_member(count);
        for (size_t k = 0; k < inputs[0].size(); ++k) {
          std::vector<const Literal*> column = Column(inputs, k);
          CW_ASSIGN_OR_RETURN(Literal reduced, ReduceInputs(op, column));
          for (int64_t m = 0; m < count; ++m) {
            CW_ASSIGN_OR_RETURN(Literal block,
                                BlockAlong(reduced, dimension, count, m));
            per_member[m].push_back(std::move(block));
          }
        }
        std::vector<Literal> outputs;
        for (auto& values : per_member) {
          outputs.push_back(PackResult(std::move(values)));
        }
        return outputs;
      });
}

absl::StatusOr<Literal> InProcessCollectives::AllToAll(
    const CollectiveOp& op, std::vector<Literal> operands) {
  CW_ASSIGN_OR_RETURN(std::vector<int64_t> group, GroupOf(op));
  const int64_t count = static_cast<int64_t>(group.size());
  const bool array_form = !op.instruction->dimensions.empty();
  CW_RETURN_IF_ERROR(CheckAllToAllOperands(op, operands.size(), group.size()));
  int64_t dimension = 0;
  if (array_form) {
    CW_ASSIGN_OR_RETURN(dimension, CollectiveDimension(op));
  }
  return Exchange(
      op, group, std::move(operands),
      [&op, count, dimension,
       array_form](const std::vector<std::vector<Literal>>& inputs)
          -> absl::StatusOr<std::vector<Literal>> {
        CW_RETURN_IF_ERROR(CheckOperandCounts(op, inputs));
        std::vector<Literal> outputs;
        outputs.reserve(count);
        for (int64_t m = 0; m < count; ++m) {
          if (array_form) {
            std::vector<Literal> blocks;
            for (int64_t i = 0; i < count; ++i) {
              CW_ASSIGN_OR_RETURN(
                  Literal block, BlockAlong(inputs[i][0], dimension, count, m));
              blocks.push_back(std::move(block));
            }
            std::vector<const Literal*> parts;
            for (const Literal& block : blocks) parts.push_back(&block);
            CW_ASSIGN_OR_RETURN(Literal value,
                                ConcatenateAlong(parts, dimension));
            outputs.push_back(std::move(value));
          } else {
            std::vector<Literal> received;
            for (int64_t i = 0; i < count; ++i)
              received.push_back(inputs[i][m]);
            outputs.push_back(Literal::MakeTuple(std::move(received)));
          }
        }
        return outputs;
      });
}

absl::StatusOr<Literal> InProcessCollectives::CollectivePermute(
    const CollectiveOp& op, Literal operand) {
  if (op.instruction == nullptr) {
    return absl::InvalidArgumentError("collective without an instruction");
  }
  const std::vector<int64_t> group = PermuteDomainOf(op);
  // Validates the pairs once, on the caller's own thread.
  CW_RETURN_IF_ERROR(PermutePeersOf(op).status());
  std::vector<Literal> inputs;
  inputs.push_back(std::move(operand));
  return Exchange(
      op, group, std::move(inputs),
      [&op, group](const std::vector<std::vector<Literal>>& inputs)
          -> absl::StatusOr<std::vector<Literal>> {
        std::vector<Literal> outputs;
        outputs.reserve(group.size());
        for (size_t m = 0; m < group.size(); ++m) {
          CollectiveOp member = op;
          member.replica_id = group[m] / op.num_partitions;
          member.partition_id = group[m] % op.num_partitions;
          CW_ASSIGN_OR_RETURN(PermutePeers peers, PermutePeersOf(member));
          if (peers.source < 0) {
            outputs.emplace_back(inputs[m][0].shape());  // Zeros.
            continue;
          }
          auto it = std::find(group.begin(), group.end(), peers.source);
          const Literal& received = inputs[it - group.begin()][0];
          if (!received.shape().Compatible(inputs[m][0].shape())) {
            return absl::InvalidArgumentError(absl::StrCat(
                "device ", peers.source, " sent ",
                received.shape().ToString(false), " but device ", group[m],
                " expects ", inputs[m][0].shape().ToString(false)));
          }
          outputs.push_back(received);
        }
        return outputs;
      });
}

}  // namespace causeway::exec
