// A call's proof of the token (grpc_common.h): accepted once, within the
// window of the head's clock, for the right token only; the proof never
// holds the token; the memory of proofs is bounded.
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "causeway/transport/grpc_common.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "the cluster's token";

TEST(CallProofTest, AProofOfTheTokenIsAcceptedOnceAndNeverHoldsTheToken) {
  const TokenCheck check(kToken);
  const absl::Time now = absl::Now();
  const std::string proof = MakeCallProof(kToken, now);
  EXPECT_THAT(proof, ::testing::Not(HasSubstr(kToken)));
  EXPECT_TRUE(check.CheckProof(proof, now).ok());
  const grpc::Status again = check.CheckProof(proof, now + absl::Seconds(1));
  EXPECT_EQ(again.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(again.error_message(), HasSubstr("used before"));
  // Each proof is fresh.
  EXPECT_NE(MakeCallProof(kToken, now), MakeCallProof(kToken, now));
  EXPECT_TRUE(check.CheckProof(MakeCallProof(kToken, now), now).ok());
}

TEST(CallProofTest, AnotherTokensProofIsRefused) {
  const TokenCheck check(kToken);
  const grpc::Status wrong =
      check.CheckProof(MakeCallProof("another token", absl::Now()), absl::Now());
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.error_message(), HasSubstr("does not match"));
}

TEST(CallProofTest, AProofFromAClockTooFarOffIsRefusedNamingIt) {
  const TokenCheck check(kToken);
  const absl::Time now = absl::Now();
  for (absl::Duration off : {-kProofWindow - absl::Seconds(1),
                             kProofWindow + absl::Seconds(1)}) {
    const grpc::Status refused =
        check.CheckProof(MakeCallProof(kToken, now + off), now);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(refused.error_message(), HasSubstr("check the clocks"));
  }
  for (absl::Duration off : {-kProofWindow + absl::Seconds(1),
                             kProofWindow - absl::Seconds(1)}) {
    EXPECT_TRUE(check.CheckProof(MakeCallProof(kToken, now + off), now).ok());
  }
}

TEST(CallProofTest, MalformedProofsAreRefused) {
  const TokenCheck check(kToken);
  const std::string good = MakeCallProof(kToken, absl::Now());
  for (const std::string& bad : std::vector<std::string>{
           "", kToken, "v1:1:2:3", "v2" + good.substr(2),
        good.substr(0, good.size() - 1), good + ":x",
        "v1:x" + good.substr(good.find(':', 3))}) {
    const grpc::Status refused = check.CheckProof(bad, absl::Now());
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << bad;
    EXPECT_THAT(refused.error_message(), HasSubstr("malformed")) << bad;
  }
}

// Past its bound the check refuses rather than forget a proof that could
// be replayed; proofs are forgotten once too old to be accepted anyway.
TEST(CallProofTest, TheMemoryOfProofsIsBoundedAndForgetsExpiredOnes) {
  const TokenCheck check(kToken, /*max_remembered=*/2);
  const absl::Time now = absl::Now();
  EXPECT_TRUE(check.CheckProof(MakeCallProof(kToken, now), now).ok());
  EXPECT_TRUE(check.CheckProof(MakeCallProof(kToken, now), now).ok());
  const grpc::Status full = check.CheckProof(MakeCallProof(kToken, now), now);
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(full.error_message(), HasSubstr("replay"));
  const absl::Time later = now + kProofWindow + absl::Seconds(1);
  EXPECT_TRUE(check.CheckProof(MakeCallProof(kToken, later), later).ok());
}

TEST(CallProofTest, WithoutATokenEveryCallIsAccepted) {
  const TokenCheck check("");
  EXPECT_TRUE(check.CheckProof("", absl::Now()).ok());
}

}  // namespace
}  // namespace causeway::transport
