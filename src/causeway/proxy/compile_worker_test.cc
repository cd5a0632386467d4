// The compile cache's key: one program's options from two JAX processes
// (their protobuf maps written in different orders) give the same key;
// options that differ in substance do not.
#include "causeway/proxy/compile_worker.h"

#include <string>

#include "causeway/proxy/proto/ifrt_types.pb.h"
#include "gtest/gtest.h"

namespace causeway::proxy {
namespace compile_worker_test {

// Options holding one debug-options map entry (and `device` as the one
// device of the assignment).
std::string OptionsWith(const std::string& key, const std::string& value,
                        int64_t device = 0) {
  xla::ifrt::XlaCompileOptionsProto options;
  auto* build = options.mutable_compile_options()->mutable_executable_build_options();
  (*build->mutable_debug_options()->mutable_xla_backend_extra_options())[key] = value;
  auto* assignment = build->mutable_device_assignment();
  assignment->set_replica_count(1);
  assignment->set_computation_count(1);
  assignment->add_computation_devices()->add_replica_device_ids(device);
  return options.SerializeAsString();
}

CompileJob Job(std::string options) {
  CompileJob job;
  job.options_type = kXlaCompileOptionsTypeName;
  job.options = std::move(options);
  return job;
}

TEST(CompileCacheKeyTest, MapsInAnotherOrderGiveTheSameKey) {
  // Concatenated messages merge: the same options, maps in either order.
  const std::string a = OptionsWith("a", "1");
  const std::string b = OptionsWith("b", "2");
  const CompileJob ab = Job(a + b);
  const CompileJob ba = Job(b + a);
  ASSERT_NE(ab.options, ba.options);
  EXPECT_EQ(CanonicalOptions(ab), CanonicalOptions(ba));
}

TEST(CompileCacheKeyTest, OptionsThatDifferGiveDifferentKeys) {
  EXPECT_NE(CanonicalOptions(Job(OptionsWith("a", "1"))),
            CanonicalOptions(Job(OptionsWith("a", "2"))));
  EXPECT_NE(CanonicalOptions(Job(OptionsWith("a", "1", 0))),
            CanonicalOptions(Job(OptionsWith("a", "1", 1))));
}

TEST(CompileCacheKeyTest, OptionsThatDoNotParseAreTheirOwnBytes) {
  CompileJob job = Job(std::string("\x0a\x05" "ab", 4));  // 5 bytes promised, 2 given.
  EXPECT_EQ(CanonicalOptions(job), job.options);
  job.options_type = "another::Type";
  job.options = OptionsWith("a", "1");
  EXPECT_EQ(CanonicalOptions(job), job.options);
}

}  // namespace compile_worker_test
}  // namespace causeway::proxy
