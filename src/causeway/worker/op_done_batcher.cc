#include "causeway/worker/op_done_batcher.h"

namespace causeway::worker {

void OpDoneBatcher::Expect(IslandId island, uint64_t seq, int ops) {
  absl::MutexLock lock(&mu_);
  launches_[{island.value(), seq}].expected += ops;
}

void OpDoneBatcher::OnOpDone(const transport::OpDone& done) {
  std::vector<transport::OpDone> out;
  {
    absl::MutexLock lock(&mu_);
    auto it = launches_.find({done.island.value(), done.seq});
    if (it == launches_.end()) {
      out.push_back(done);
    } else {
      Launch& launch = it->second;
      --launch.expected;
      launch.held.push_back(done);
      if (launch.open || !done.status.ok() || launch.expected <= 0) {
        launch.open = true;
        out.swap(launch.held);
      }
      if (launch.expected <= 0) launches_.erase(it);
    }
  }
  if (out.size() == 1) {
    next_->OnOpDone(out.front());
  } else if (!out.empty()) {
    next_->OnOpsDone(out);
  }
}

size_t OpDoneBatcher::pending() const {
  absl::MutexLock lock(&mu_);
  return launches_.size();
}

}  // namespace causeway::worker
