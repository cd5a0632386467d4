// A proof of the token (call_proof.h): accepted once, within the
// window of the head's clock, for the right token only; the proof never
// holds the token; the memory of proofs is bounded.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "causeway/transport/call_proof.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "the cluster's token";

TEST(CallProofTest, AProofOfTheTokenIsAcceptedOnceAndNeverHoldsTheToken) {
  const ProofCheck check(kToken);
  const absl::Time now = absl::Now();
  const std::string proof = MakeCallProof(kToken, now);
  EXPECT_THAT(proof, ::testing::Not(HasSubstr(kToken)));
  EXPECT_TRUE(check.Check(proof, now).ok());
  const absl::Status again = check.Check(proof, now + absl::Seconds(1));
  EXPECT_EQ(again.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(again.message(), HasSubstr("used before"));
  // Each proof is fresh.
  EXPECT_NE(MakeCallProof(kToken, now), MakeCallProof(kToken, now));
  EXPECT_TRUE(check.Check(MakeCallProof(kToken, now), now).ok());
}

TEST(CallProofTest, AnotherTokensProofIsRefused) {
  const ProofCheck check(kToken);
  const absl::Status wrong =
      check.Check(MakeCallProof("another token", absl::Now()), absl::Now());
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(wrong.message(), HasSubstr("does not match"));
}

TEST(CallProofTest, AProofFromAClockTooFarOffIsRefusedNamingIt) {
  const ProofCheck check(kToken);
  const absl::Time now = absl::Now();
  for (absl::Duration off : {-kProofWindow - absl::Seconds(1),
                             kProofWindow + absl::Seconds(1)}) {
    const absl::Status refused =
        check.Check(MakeCallProof(kToken, now + off), now);
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated);
    EXPECT_THAT(refused.message(), HasSubstr("check the clocks"));
  }
  for (absl::Duration off : {-kProofWindow + absl::Seconds(1),
                             kProofWindow - absl::Seconds(1)}) {
    EXPECT_TRUE(check.Check(MakeCallProof(kToken, now + off), now).ok());
  }
}

TEST(CallProofTest, MalformedProofsAreRefused) {
  const ProofCheck check(kToken);
  const std::string good = MakeCallProof(kToken, absl::Now());
  for (const std::string& bad : std::vector<std::string>{
           "", kToken, "v1:1:2:3", "v2" + good.substr(2),
        good.substr(0, good.size() - 1), good + ":x",
        "v1:x" + good.substr(good.find(':', 3))}) {
    const absl::Status refused = check.Check(bad, absl::Now());
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << bad;
    EXPECT_THAT(refused.message(), HasSubstr("malformed")) << bad;
  }
}

// Past its bound the check refuses rather than forget a proof that could
// be replayed; proofs are forgotten once too old to be accepted anyway.
TEST(CallProofTest, TheMemoryOfProofsIsBoundedAndForgetsExpiredOnes) {
  const ProofCheck check(kToken, /*max_remembered=*/2);
  const absl::Time now = absl::Now();
  EXPECT_TRUE(check.Check(MakeCallProof(kToken, now), now).ok());
  EXPECT_TRUE(check.Check(MakeCallProof(kToken, now), now).ok());
  const absl::Status full = check.Check(MakeCallProof(kToken, now), now);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("replay"));
  const absl::Time later = now + kProofWindow + absl::Seconds(1);
  EXPECT_TRUE(check.Check(MakeCallProof(kToken, later), later).ok());
}

TEST(CallProofTest, WithoutATokenEveryCallIsAccepted) {
  const ProofCheck check("");
  EXPECT_TRUE(check.Check("", absl::Now()).ok());
}

}  // namespace
}  // namespace causeway::transport
