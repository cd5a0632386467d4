#include "causeway/base/status.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace causeway {
namespace status_test {

absl::Status Fail(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status RunSteps(bool fail_first, int* steps) {
  CW_RETURN_IF_ERROR(fail_first ? Fail("first") : absl::OkStatus());
  ++*steps;
  CW_RETURN_IF_ERROR(absl::OkStatus());
  ++*steps;
  return absl::OkStatus();
}

absl::StatusOr<int> Quarter(int x) {
  CW_ASSIGN_OR_RETURN(int half, Half(x));
  CW_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::StatusOr<std::unique_ptr<int>> MakeBox(int x) {
  return std::make_unique<int>(x);
}

absl::StatusOr<int> Unbox(int x) {
  std::unique_ptr<int> box;
  CW_ASSIGN_OR_RETURN(box, MakeBox(x));  // Assigns to an existing variable.
  return *box;
}

TEST(StatusMacrosTest, ReturnIfErrorReturnsTheError) {
  int steps = 0;
  absl::Status status = RunSteps(/*fail_first=*/true, &steps);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "first");
  EXPECT_EQ(steps, 0);
}

TEST(StatusMacrosTest, ReturnIfErrorContinuesOnOk) {
  int steps = 0;
  EXPECT_TRUE(RunSteps(/*fail_first=*/false, &steps).ok());
  EXPECT_EQ(steps, 2);
}

TEST(StatusMacrosTest, AssignOrReturnUnwrapsValues) {
  absl::StatusOr<int> result = Quarter(12);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 3);
}

TEST(StatusMacrosTest, AssignOrReturnReturnsTheErrorOfAnyStep) {
  EXPECT_EQ(Quarter(3).status().message(), "odd");  // First step fails.
  EXPECT_EQ(Quarter(6).status().message(), "odd");  // Second step fails.
}

TEST(StatusMacrosTest, AssignOrReturnMovesMoveOnlyValues) {
  absl::StatusOr<int> result = Unbox(5);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 5);
}

}  // namespace status_test
}  // namespace causeway
