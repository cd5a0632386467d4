// For the tests of the head's parts: hosts registered with a Membership and
// alive behind FakeControlChannels, and a Dispatcher (recording no events)
// over an Outbox that the test drains when it wants the messages sent.
#ifndef CAUSEWAY_HEAD_TESTING_FAKE_HOSTS_H_
#define CAUSEWAY_HEAD_TESTING_FAKE_HOSTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/head/dispatcher.h"
#include "causeway/head/membership.h"
#include "causeway/head/outbox.h"
#include "causeway/trace/events.h"
#include "causeway/transport/testing/fake_control_channel.h"
#include "gtest/gtest.h"

namespace causeway::head::testing {

class FakeHostsTest : public ::testing::Test {
 protected:
  // `hosts` more hosts on island 0 of `devices` devices each (ids in the
  // order the hosts join), each device with `memory` bytes.
  void AddHosts(int hosts, int64_t devices, int64_t memory = 1024) {
    for (int h = 0; h < hosts; ++h) {
      absl::StatusOr<HostAssignment> host = membership_.Register(
          {IslandId(0), transport::HostSpec{devices, "cpu", memory},
           absl::StrCat("w", hosts_.size()), ""});
      ASSERT_TRUE(host.ok()) << host.status();
      auto channel = std::make_shared<transport::FakeControlChannel>();
      ASSERT_TRUE(membership_.Activate(host->host, channel).ok());
      hosts_.push_back(std::move(channel));
    }
  }
  void TearDown() override { outbox_.Drain(); }

  static Dispatcher::Options QuietDispatcher() {
    Dispatcher::Options options;
    options.events = &trace::NullEventSink();
    return options;
  }

  Outbox outbox_;
  Membership membership_;
  Dispatcher dispatcher_{QuietDispatcher(), &membership_, &outbox_};
  std::vector<std::shared_ptr<transport::FakeControlChannel>> hosts_;
};

}  // namespace causeway::head::testing

#endif  // CAUSEWAY_HEAD_TESTING_FAKE_HOSTS_H_
