// The session service, with every worker a fake control channel.
#include "causeway/head/head.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "causeway/transport/testing/fake_control_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace head_test {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using transport::ArraySpec;
using transport::FakeControlChannel;
using transport::SessionLease;

constexpr char kDouble[] = R"(
HloModule double
ENTRY main {
  x = f32[2] parameter(0)
  ROOT y = f32[2] add(x, x)
}
)";

hlo::Shape F32x2() { return hlo::Shape(hlo::PrimitiveType::kF32, {2}); }

class HeadTest : public ::testing::Test {
 protected:
  void Start(HeadOptions options = {}, int hosts = 2) {
    options.heartbeat_interval = absl::ZeroDuration();  // Tests say when.
    head_ = *Head::Create(options);
    for (int h = 0; h < hosts; ++h) AddHost(1);
  }
  void TearDown() override {
    head_.reset();
    for (std::thread& probe : probes_) probe.join();
  }

  HostId AddHost(int64_t devices) {
    absl::StatusOr<HostAssignment> host = head_->RegisterHost(
        {IslandId(0), transport::HostSpec{devices, "cpu", 1024},
         absl::StrCat("w", hosts_.size()), ""});
    EXPECT_TRUE(host.ok()) << host.status();
    auto channel = std::make_shared<FakeControlChannel>();
    hosts_.push_back(channel);
    EXPECT_TRUE(head_->ActivateHost(host->host, channel).ok());
    return host->host;
  }

  SessionId Open(SessionLease lease = SessionLease::kHeld) {
    absl::StatusOr<SessionId> session = head_->OpenSession({}, lease);
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  Future<transport::SliceInfo> Slice(SessionId session, uint64_t handle,
                                     int64_t devices = 1) {
    transport::SliceRequest request;
    request.handle = SliceHandle(handle);
    request.num_devices = devices;
    return head_->RequestSlice(session, request);
  }

  // A session with slice 1 (one device) and the doubler compiled on it as
  // executable 1.
  SessionId OpenWithDoubler() {
    SessionId session = Open();
    EXPECT_TRUE(Slice(session, 1).Await().ok());
    EXPECT_TRUE(
        head_->Compile(session, {ExecutableHandle(1), kDouble, SliceHandle(1)})
            .Await()
            .ok());
    return session;
  }

  ArraySpec Spec(uint64_t handle, uint64_t slice) {
    return ArraySpec{ArrayHandle(handle), F32x2(), hlo::Sharding(),
                     SliceHandle(slice)};
  }

  hlo::Literal Value() {
    hlo::Literal value(F32x2());
    return value;
  }

  // Makes every call on every fake check, from another thread, that the
  // head holds none of its locks: a call that needs them must get through.
  void ProbeLocksOnEveryCall(SessionId session) {
    for (const auto& host : hosts_) {
      host->set_on_call([this, session](const std::string& call) {
        absl::Notification done;
        probes_.emplace_back([this, session, &done] {
          head_->GetSlice(session, SliceHandle(1)).Await().IgnoreError();
          head_->OnOpDone({HostId(0), DeviceId(0), IslandId(0), 999, {}});
          done.Notify();
        });
        if (!done.WaitForNotificationWithTimeout(absl::Seconds(10))) {
          absl::MutexLock lock(&mu_);
          blocked_.push_back(call);
        }
      });
    }
  }

  std::unique_ptr<Head> head_;
  std::vector<std::shared_ptr<FakeControlChannel>> hosts_;
  std::vector<std::thread> probes_;
  absl::Mutex mu_;
  std::vector<std::string> blocked_ ABSL_GUARDED_BY(mu_);
};

TEST_F(HeadTest, NoChannelIsCalledWhileTheHeadHoldsALock) {
  Start();
  SessionId session = OpenWithDoubler();
  ProbeLocksOnEveryCall(session);
  ASSERT_TRUE(head_->PutArray(session, Spec(1, 1), Value()).Await().ok());
  head_->Execute(session,
                 {ExecutableHandle(1), {ArrayHandle(1)}, {Spec(2, 1)}});
  head_->Fetch(session, ArrayHandle(2)).Await().IgnoreError();
  head_->MarkHostDead(HostId(1), "test");
  ASSERT_TRUE(head_->CloseSession(session).Await().ok());
  std::vector<std::string> calls = hosts_[0]->calls();
  std::erase_if(calls, [](const std::string& call) {
    return call.starts_with("UpdateMembership");
  });
  EXPECT_THAT(calls, ElementsAre("LoadProgram 1", "PutBuffer array 1 shard 0",
                                 "Dispatch", "FetchBuffer array 2 shard 0",
                                 "PeerLost 1", "Dispatch", "CancelSession 1"));
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(blocked_.empty()) << blocked_[0] << " ran under a lock";
}

// Workers unload a program once no executable uses it and the compile
// cache keeps it no more: what they hold stays bounded.
TEST_F(HeadTest, AProgramNobodyUsesIsUnloadedFromTheWorkers) {
  HeadOptions options;
  options.program_cache_bytes = 0;
  Start(options);
  SessionId session = OpenWithDoubler();
  ASSERT_TRUE(head_->CloseSession(session).Await().ok());
  for (const auto& host : hosts_) {
    EXPECT_TRUE(host->AwaitCall("UnloadProgram 1", absl::Seconds(10)))
        << absl::StrJoin(host->calls(), ", ");
  }
}

// Kept by the compile cache, a program compiled again by a later session
// (a new JAX process, say) is the same program, still loaded.
TEST_F(HeadTest, AKeptProgramIsTheSameProgramForALaterSession) {
  Start({}, 1);
  for (int round = 0; round < 2; ++round) {
    SessionId session = OpenWithDoubler();
    ASSERT_TRUE(head_->CloseSession(session).Await().ok());
  }
  // The worker was told program 1 twice, never a new id; the outbox keeps
  // the order, so an unload at the first close would come before the
  // second load.
  ASSERT_TRUE(hosts_[0]->AwaitCall("LoadProgram 1", absl::Seconds(10), 2));
  std::vector<std::string> calls = hosts_[0]->calls();
  std::erase_if(calls, [](const std::string& call) {
    return call.find("Program") == std::string::npos;
  });
  EXPECT_THAT(calls, ElementsAre("LoadProgram 1", "LoadProgram 1"));
}

TEST_F(HeadTest, AQueuedSliceIsGrantedWhenAHostJoins) {
  Start({}, 1);
  SessionId alice = Open();
  SessionId bob = Open();
  ASSERT_TRUE(Slice(alice, 1).Await().ok());
  Future<transport::SliceInfo> waiting = Slice(bob, 1);
  EXPECT_FALSE(waiting.IsReady());
  const HostId joined = AddHost(1);
  absl::StatusOr<transport::SliceInfo> granted =
      waiting.AwaitFor(absl::Seconds(10));
  ASSERT_TRUE(granted.ok()) << granted.status();
  EXPECT_EQ(granted->devices, std::vector<DeviceId>{DeviceId(1)});
  EXPECT_EQ(head_->topology()->HostOf(DeviceId(1)), joined);
}

TEST_F(HeadTest, ALostHostsArraysAreDataLossAndSurvivorsAreTold) {
  Start();
  SessionId session = Open();
  ASSERT_TRUE(Slice(session, 1, 2).Await().ok());
  transport::ArraySpec spec = Spec(1, 1);
  ASSERT_TRUE(head_->PutArray(session, spec, Value()).Await().ok());
  head_->MarkHostDead(HostId(1), "pulled the plug");
  absl::Status ready = head_->ArrayReady(session, ArrayHandle(1)).Await();
  EXPECT_EQ(ready.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ready.message(),
              HasSubstr("lost shard 1 on device 1: host 1 was lost "
                        "(pulled the plug)"));
  EXPECT_THAT(hosts_[0]->calls(), Contains("PeerLost 1"));
  EXPECT_FALSE(head_->IsHostAlive(HostId(1)));
}

TEST_F(HeadTest, AFailedCallToAnAliveHostIsItsOwnErrorNotDataLoss) {
  Start();
  SessionId session = Open();
  ASSERT_TRUE(Slice(session, 1).Await().ok());
  ASSERT_TRUE(head_->PutArray(session, Spec(1, 1), Value()).Await().ok());
  hosts_[0]->set_fetch_result(absl::UnavailableError("a network blip"));
  absl::StatusOr<hlo::Literal> fetched =
      head_->Fetch(session, ArrayHandle(1)).Await();
  EXPECT_EQ(fetched.status(), absl::UnavailableError("a network blip"));
  EXPECT_TRUE(head_->IsHostAlive(HostId(0)));
}

TEST_F(HeadTest, ALeasedSessionThatGoesSilentEndsAndFreesItsDevices) {
  HeadOptions options;
  options.session_lease = absl::Milliseconds(200);
  Start(options, 1);
  SessionId silent = Open(SessionLease::kLeased);
  SessionId waiting = Open(SessionLease::kHeld);
  ASSERT_TRUE(Slice(silent, 1).Await().ok());
  Future<transport::SliceInfo> queued = Slice(waiting, 1);
  ASSERT_TRUE(
      head_->AwaitSessionEnded(silent, absl::Now() + absl::Seconds(10)).ok());
  EXPECT_TRUE(queued.AwaitFor(absl::Seconds(10)).ok());
  absl::StatusOr<transport::SliceInfo> after =
      head_->GetSlice(silent, SliceHandle(1)).Await();
  EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(after.status().message(), HasSubstr("lease of 200ms expired"));
}

TEST_F(HeadTest, AnOpDoneForADeviceOfAnotherHostIsIgnored) {
  HeadOptions options;
  options.max_inflight_launches_per_island = 1;
  Start(options);
  SessionId session = OpenWithDoubler();
  ASSERT_TRUE(head_->PutArray(session, Spec(1, 1), Value()).Await().ok());
  head_->Execute(session,
                 {ExecutableHandle(1), {ArrayHandle(1)}, {Spec(2, 1)}});
  head_->Execute(session,
                 {ExecutableHandle(1), {ArrayHandle(1)}, {Spec(3, 1)}});
  ASSERT_EQ(hosts_[0]->batches().size(), 1u);
  head_->OnOpDone({HostId(1), DeviceId(0), IslandId(0), 0, {}});  // A lie.
  EXPECT_EQ(hosts_[0]->batches().size(), 1u);
  head_->OnOpDone({HostId(0), DeviceId(0), IslandId(0), 0, {}});
  EXPECT_EQ(hosts_[0]->batches().size(), 2u);
}

TEST_F(HeadTest, WhatAClientSendsIsBoundedWithAClearError) {
  HeadOptions options;
  options.session_limits.max_sessions = 1;
  options.session_limits.max_program_bytes = 64;
  Start(options, 1);
  transport::OpenSessionRequest long_name;
  long_name.name = std::string(300, 'x');
  EXPECT_THAT(
      head_->OpenSession(long_name, SessionLease::kHeld).status().message(),
      HasSubstr("at most 256"));
  SessionId session = Open();
  EXPECT_EQ(head_->OpenSession({}, SessionLease::kHeld).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(Slice(session, 1).Await().ok());
  absl::StatusOr<transport::CompileInfo> big =
      head_->Compile(session, {ExecutableHandle(1), kDouble, SliceHandle(1)})
          .Await();
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("at most 64"));
  EXPECT_THAT(big.status().message(), HasSubstr("max_program_bytes"));
  ArraySpec deep = Spec(1, 1);
  deep.global_shape =
      hlo::Shape(hlo::PrimitiveType::kF32, std::vector<int64_t>(65, 1));
  absl::Status put = head_->PutArray(session, deep, Value()).Await();
  EXPECT_THAT(put.message(), HasSubstr("rank 65"));
}

TEST_F(HeadTest, EveryAliveWorkerLearnsOfAJoinAndADeath) {
  Start({}, 2);
  ASSERT_FALSE(hosts_[0]->memberships().empty());
  transport::MembershipUpdate joined = hosts_[0]->memberships().back();
  ASSERT_EQ(joined.hosts.size(), 2u);
  EXPECT_EQ(joined.hosts[1].state, transport::HostState::kAlive);
  EXPECT_EQ(hosts_[1]->memberships().back().version, joined.version);
  head_->MarkHostDead(HostId(1), "test");
  transport::MembershipUpdate died = hosts_[0]->memberships().back();
  EXPECT_GT(died.version, joined.version);
  EXPECT_EQ(died.hosts[1].state, transport::HostState::kDead);
  EXPECT_EQ(died.island_epochs[0], joined.island_epochs[0] + 1);
}

// Remembers the ops it was told of.
class OpSink : public trace::EventSink {
 public:
  void OpStarted(const trace::OpEvent& event) override {
    absl::MutexLock lock(&mu_);
    started_.push_back(event);
  }
  std::vector<trace::OpEvent> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }

 private:
  absl::Mutex mu_;
  std::vector<trace::OpEvent> started_;
};

TEST_F(HeadTest, AWorkersTraceEventsReachTheHeadsSinkOnItsClock) {
  OpSink sink;
  HeadOptions options;
  options.events = &sink;
  Start(options, 2);
  trace::OpEvent mine;
  mine.host = HostId(1);
  mine.time = absl::FromUnixSeconds(100);
  trace::OpEvent spoofed = mine;
  spoofed.host = HostId(0);
  head_->OnTraceEvents(
      HostId(1),
      {trace::EventRecord{trace::EventRecord::Kind::kOpStarted, mine, {}},
       trace::EventRecord{trace::EventRecord::Kind::kOpStarted, spoofed, {}}},
      absl::Seconds(5));
  ASSERT_EQ(sink.started().size(), 1u);
  EXPECT_EQ(sink.started()[0].time, absl::FromUnixSeconds(105));
  EXPECT_EQ(sink.started()[0].host, HostId(1));
}

TEST_F(HeadTest, CallsOnAClosedSessionSayWhyItEnded) {
  Start({}, 1);
  SessionId session = Open();
  ASSERT_TRUE(head_->CloseSession(session).Await().ok());
  absl::StatusOr<transport::SliceInfo> slice = Slice(session, 1).Await();
  EXPECT_EQ(slice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(slice.status().message(), HasSubstr("it was closed"));
}

}  // namespace head_test
}  // namespace causeway::head
