#include "causeway/exec/multiply_add.h"

#include <memory>
#include <string_view>

#include "causeway/hlo/parser.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace multiply_add_test {

// A processor on which XLA computes f16 natively, and one on which it
// does not (exec/xla_cpu_target.h).
constexpr XlaCpuTarget kNativeF16{.avx512f = true, .avx512fp16 = true};
constexpr XlaCpuTarget kPromotedF16{.avx512f = true, .avx512fp16 = false};

class MultiplyAddTest : public ::testing::Test {
 protected:
  // Parses `text` and finds the contractions of its entry computation.
  void Find(std::string_view text, const XlaCpuTarget& target = kNativeF16) {
    auto module = hlo::ParseModule(text);
    ASSERT_TRUE(module.ok()) << module.status();
    module_ = *std::move(module);
    found_ = FindMultiplyAdds(*module_->entry(), target);
  }
  const MultiplyAdd* Of(std::string_view add) const {
    auto it = found_.find(module_->entry()->FindInstruction(add));
    return it == found_.end() ? nullptr : &it->second;
  }
  std::string_view MultiplyOf(std::string_view add) const {
    return Of(add)->multiply->name;
  }

  std::unique_ptr<hlo::Module> module_;
  std::unordered_map<const hlo::Instruction*, MultiplyAdd> found_;
};

TEST_F(MultiplyAddTest, AddsAndSubtractsOfASingleUseProductContract) {
  Find(R"(
HloModule m
ENTRY body {
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  c = f32[8] parameter(2)
  m1 = f32[8] multiply(a, b)
  s1 = f32[8] add(c, m1)
  m2 = f32[8] multiply(a, c)
  s2 = f32[8] subtract(m2, s1)
  m3 = f32[8] multiply(b, c)
  s3 = f32[8] subtract(s2, m3)
  m4 = f32[8] multiply(a, a)
  n4 = f32[8] negate(m4)
  ROOT s4 = f32[8] add(n4, s3)
})");
  ASSERT_EQ(found_.size(), 4u);
  EXPECT_EQ(MultiplyOf("s1"), "m1");
  EXPECT_EQ(Of("s1")->addend->name, "c");
  EXPECT_FALSE(Of("s1")->negate_product || Of("s1")->negate_addend);
  EXPECT_FALSE(Of("s2")->negate_product);
  EXPECT_TRUE(Of("s2")->negate_addend);
  EXPECT_TRUE(Of("s3")->negate_product);
  EXPECT_FALSE(Of("s3")->negate_addend);
  EXPECT_EQ(Of("s4")->negate->name, "n4");
  EXPECT_TRUE(Of("s4")->negate_product);
}

TEST_F(MultiplyAddTest, TheFirstOfTwoProductsContracts) {
  Find(R"(
HloModule m
ENTRY body {
  a = f16[8] parameter(0)
  b = f16[8] parameter(1)
  m1 = f16[8] multiply(a, b)
  m2 = f16[8] multiply(b, b)
  ROOT s = f16[8] add(m1, m2)
})");
  ASSERT_EQ(found_.size(), 1u);
  EXPECT_EQ(MultiplyOf("s"), "m1");
  EXPECT_EQ(Of("s")->addend->name, "m2");
}

TEST_F(MultiplyAddTest, TheShallowerOfTwoProductsContracts) {
  Find(R"(
HloModule m
ENTRY body {
  a = f16[8] parameter(0)
  b = f16[8] parameter(1)
  t = f16[8] tanh(a)
  deep = f16[8] multiply(t, a)
  shallow = f16[8] multiply(b, b)
  s = f16[8] add(deep, shallow)
  deep2 = f16[8] multiply(t, s)
  shallow2 = f16[8] multiply(a, b)
  ROOT d = f16[8] subtract(deep2, shallow2)
})");
  ASSERT_EQ(found_.size(), 2u);
  EXPECT_EQ(MultiplyOf("s"), "shallow");
  EXPECT_EQ(MultiplyOf("d"), "deep2");  // A subtract keeps its order.
}

TEST_F(MultiplyAddTest, SharedRootBroadcastAndBf16ProductsDoNotContract) {
  // `twin` is -(a * s1), the same product as `shared2` to LLVM.
  Find(R"(
HloModule m
ENTRY body {
  a = f32[8] parameter(0)
  h = bf16[8] parameter(1)
  v = f32[] parameter(2)
  shared = f32[8] multiply(a, a)
  s1 = f32[8] add(shared, a)
  s2 = f32[8] add(shared, s1)
  na = f32[8] negate(a)
  twin = f32[8] multiply(s1, na)
  st = f32[8] add(twin, s2)
  shared2 = f32[8] multiply(a, s1)
  s4 = f32[8] add(shared2, st)
  p = f32[] multiply(v, v)
  pb = f32[8] broadcast(p), dimensions={}
  s3 = f32[8] add(pb, s4)
  hm = bf16[8] multiply(h, h)
  hs = bf16[8] add(hm, h)
  hw = f32[8] convert(hs)
  ROOT r = f32[8] add(s3, hw)
})");
  EXPECT_TRUE(found_.empty());
}

TEST_F(MultiplyAddTest, F16ContractsOnlyWhereXlaComputesHalfPrecisionNatively) {
  constexpr std::string_view kBody = R"(
HloModule m
ENTRY body {
  a = f16[8] parameter(0)
  b = f16[8] parameter(1)
  x = f32[8] parameter(2)
  m = f16[8] multiply(a, b)
  s = f16[8] add(m, b)
  mx = f32[8] multiply(x, x)
  sx = f32[8] add(mx, x)
  w = f32[8] convert(s)
  ROOT r = f32[8] add(sx, w)
})";
  Find(kBody, kNativeF16);
  EXPECT_EQ(found_.size(), 2u);
  ASSERT_NE(Of("s"), nullptr);
  Find(kBody, kPromotedF16);
  ASSERT_EQ(found_.size(), 1u);
  EXPECT_EQ(Of("s"), nullptr);
  EXPECT_EQ(MultiplyOf("sx"), "mx");
}

}  // namespace multiply_add_test
}  // namespace causeway::exec
