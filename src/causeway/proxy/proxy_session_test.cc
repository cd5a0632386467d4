// ProxySession on an embedded cluster: malformed or hostile requests fail
// alone, and the session goes on serving. (The whole path with jaxlib's own
// client is python/tests/test_proxy.py.)
#include "causeway/proxy/proxy_session.h"

#include <memory>

#include "causeway/base/executor.h"
#include "causeway/client/local_client.h"
#include "causeway/client/test_programs.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/proxy/testing/requests.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::proxy {
namespace proxy_session_test {

using ::testing::HasSubstr;
namespace pb = xla::ifrt::proxy;

// Compiles every program to one: y = x + 1 on f32[4], on one device.
class AddOneCompiler final : public CompileService {
 public:
  Future<std::shared_ptr<const CompiledProgram>> Compile(CompileJob) override {
    auto program = std::make_shared<CompiledProgram>();
    program->hlo_text =
        client::testing::ElementwiseProgram("add_one", "add", 1, 1, 4);
    program->name = "add_one";
    program->fingerprint = "add_one";
    program->cost_analysis = {{"flops", 4}, {"bytes accessed", 32}};
    return MakeReadyFuture<std::shared_ptr<const CompiledProgram>>(
        std::shared_ptr<const CompiledProgram>(std::move(program)));
  }
};

class ProxySessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster::LocalClusterOptions options;
    options.islands = 2;
    options.hosts_per_island = 1;
    options.devices_per_host = 2;
    absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
        cluster::LocalCluster::Create(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    client_ = client::ConnectLocal(*cluster_);
    ProxySession::Options session_options;
    session_options.session_id = 7;
    absl::StatusOr<std::shared_ptr<ProxySession>> session =
        ProxySession::Create(client_.get(), &compiler_, &executor_, session_options);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
  }
  void TearDown() override {
    session_.reset();
    client_.reset();
    cluster_.reset();
  }

  pb::IfrtResponse Call(pb::IfrtRequest request, uint64_t op_id) {
    request.mutable_request_metadata()->set_op_id(op_id);
    auto [promise, future] = MakePromise<pb::IfrtResponse>();
    auto shared = std::make_shared<Promise<pb::IfrtResponse>>(std::move(promise));
    session_->Process(request, [shared](pb::IfrtResponse r) { shared->Set(std::move(r)); });
    absl::StatusOr<pb::IfrtResponse> response = future.AwaitFor(absl::Seconds(30));
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : pb::IfrtResponse();
  }

  // CopyToHostBuffer of array `array` into host buffer `buffer` (request
  // `op_id`): the buffer's bytes, or why there are none.
  absl::StatusOr<std::string> FetchBytes(uint64_t array, uint64_t buffer,
                                         uint64_t op_id) {
    const pb::IfrtResponse copied =
        Call(testing::CopyToHostBufferRequest(array, buffer), op_id);
    if (copied.response_metadata().status().code() != 0) {
      return absl::InternalError(copied.response_metadata().status().message());
    }
    absl::StatusOr<HostBuffer> stored =
        session_->host_buffers().Lookup(buffer).AwaitFor(absl::Seconds(10));
    if (!stored.ok()) return stored.status();
    return std::string(stored->bytes());
  }

  // A MakeArrayFromHostBuffer of f32[elements] on `device` with the given
  // bytes.
  pb::IfrtResponse MakeArray(uint64_t handle, int32_t device, std::string bytes,
                             int64_t elements = 4) {
    EXPECT_TRUE(session_->host_buffers()
                    .Store(handle, HostBuffer::Copy(bytes))
                    .ok());
    return Call(testing::MakeArrayRequest(handle, device, handle, elements), handle);
  }

  // A CompileRequest of AddOneCompiler's program on device 0.
  pb::IfrtResponse CompileOnDevice0(uint64_t op_id) {
    pb::IfrtRequest compile;
    auto* c = compile.mutable_compile_request();
    c->mutable_program()->set_type_name("test program");
    xla::ifrt::XlaCompileOptionsProto options;
    auto* assignment = options.mutable_compile_options()
                           ->mutable_executable_build_options()
                           ->mutable_device_assignment();
    assignment->set_replica_count(1);
    assignment->set_computation_count(1);
    assignment->add_computation_devices()->add_replica_device_ids(0);
    c->mutable_compile_options()->set_data(options.SerializeAsString());
    return Call(compile, op_id);
  }

  AddOneCompiler compiler_;
  ThreadPool executor_{"proxy-test", 2};
  std::unique_ptr<cluster::LocalCluster> cluster_;
  std::unique_ptr<client::Client> client_;
  std::shared_ptr<ProxySession> session_;
};

TEST_F(ProxySessionTest, InitListsEveryDeviceWithItsIslandAsSliceIndex) {
  pb::IfrtRequest request;
  request.mutable_init_request();
  pb::IfrtResponse response = Call(request, 1);
  EXPECT_EQ(response.response_metadata().op_id(), 1u);
  ASSERT_EQ(response.init_response().all_devices_size(), 4);
  EXPECT_EQ(response.init_response().session_id(), 7u);
  const auto& last = response.init_response().all_devices(3);
  EXPECT_EQ(last.id(), 3);
  EXPECT_EQ(last.attributes().attributes(0).key(), "slice_index");
  EXPECT_EQ(last.attributes().attributes(0).value().int64_value(), 1);
}

TEST_F(ProxySessionTest, ArrayOnAnUnknownDeviceFailsAloneAndTheSessionGoesOn) {
  pb::IfrtResponse bad = MakeArray(1, 99, std::string(16, '\0'));
  EXPECT_EQ(bad.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.response_metadata().status().message(), HasSubstr("device 99"));
  pb::IfrtResponse good = MakeArray(2, 1, std::string(16, '\0'));
  EXPECT_EQ(good.response_metadata().status().code(), 0);
  EXPECT_EQ(good.make_array_from_host_buffer_response().array_handle(), 2u);
}

TEST_F(ProxySessionTest, HostBufferOfTheWrongSizeFailsThatArrayAndLaterUsesOfIt) {
  pb::IfrtResponse bad = MakeArray(3, 0, std::string(15, '\0'));
  EXPECT_EQ(bad.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  pb::IfrtRequest copy = testing::CopyToHostBufferRequest(3, 30);
  pb::IfrtResponse fetched = Call(copy, 4);
  EXPECT_EQ(fetched.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
}

TEST_F(ProxySessionTest, ArrayRoundTripsThroughTheHostBufferStore) {
  const float values[4] = {1, 2, 3, 4};
  ASSERT_EQ(MakeArray(5, 2, std::string(reinterpret_cast<const char*>(values), 16))
                .response_metadata()
                .status()
                .code(),
            0);
  absl::StatusOr<std::string> bytes = FetchBytes(5, 50, 6);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, std::string(reinterpret_cast<const char*>(values), 16));
}

TEST_F(ProxySessionTest, ClientHandleInTheServersRangeIsRefused) {
  pb::IfrtResponse response = MakeArray(kServerHandlesStart + 1, 0, std::string(16, '\0'));
  EXPECT_EQ(response.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
}

TEST_F(ProxySessionTest, UnservedRequestIsUnimplementedAndNamed) {
  pb::IfrtRequest request;
  request.mutable_bitcast_arrays_request();
  pb::IfrtResponse response = Call(request, 9);
  EXPECT_EQ(response.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(response.response_metadata().status().message(),
              HasSubstr("bitcast_arrays_request"));
}

// The texts are what XLA's CPU client writes (PjRtLayout::Serialize) for the
// same arrays in JAX 0.10.2: f32[2,3,4] {2,1,0}, f32[] {}, s4[2,3,4]
// {2,1,0:E(4)}.
TEST_F(ProxySessionTest, DefaultLayoutIsDenseRowMajorAsXlasCpuClientWritesIt) {
  auto layout = [&](xla::ifrt::DTypeProto::Kind kind, std::vector<int64_t> dims,
                    int32_t device) {
    pb::IfrtRequest request;
    auto* get = request.mutable_get_default_layout_request();
    get->mutable_dtype()->set_kind(kind);
    for (int64_t d : dims) get->add_dims(d);
    get->set_device_id(device);
    return Call(request, 11);
  };
  pb::IfrtResponse f32 = layout(xla::ifrt::DTypeProto::KIND_F32, {2, 3, 4}, 0);
  EXPECT_EQ(f32.response_metadata().status().code(), 0);
  EXPECT_EQ(f32.get_default_layout_response().serialized_pjrt_layout(), "{2,1,0}");
  EXPECT_EQ(layout(xla::ifrt::DTypeProto::KIND_F32, {}, 3)
                .get_default_layout_response()
                .serialized_pjrt_layout(),
            "{}");
  EXPECT_EQ(layout(xla::ifrt::DTypeProto::KIND_S4, {2, 3, 4}, 1)
                .get_default_layout_response()
                .serialized_pjrt_layout(),
            "{2,1,0:E(4)}");
  pb::IfrtResponse unknown = layout(xla::ifrt::DTypeProto::KIND_F32, {2}, 4);
  EXPECT_EQ(unknown.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_THAT(unknown.response_metadata().status().message(), HasSubstr("no device 4"));
}

TEST_F(ProxySessionTest, AssemblingReplicasGivesEachDeviceItsOwnAndAWrongCountFailsAlone) {
  const float values[4] = {5, 6, 7, 8};
  const std::string bytes(reinterpret_cast<const char*>(values), 16);
  ASSERT_EQ(MakeArray(20, 0, bytes).response_metadata().status().code(), 0);
  ASSERT_EQ(MakeArray(21, 1, bytes).response_metadata().status().code(), 0);
  pb::IfrtRequest request;
  auto* assemble = request.mutable_assemble_array_from_single_device_arrays_request();
  assemble->mutable_shape()->add_dims(4);
  xla::ifrt::HloShardingProto hlo;
  hlo.mutable_devices()->add_device_ids(0);
  hlo.mutable_devices()->add_device_ids(1);
  hlo.mutable_xla_op_sharding()->set_type(xla::OpSharding::REPLICATED);
  assemble->mutable_sharding()->mutable_serialized_sharding()->set_type_name(
      kHloShardingTypeName);
  assemble->mutable_sharding()->mutable_serialized_sharding()->set_data(
      hlo.SerializeAsString());
  assemble->add_single_device_array_handles(20);
  assemble->add_single_device_array_handles(21);
  assemble->set_result_handle(22);
  pb::IfrtResponse made = Call(request, 12);
  ASSERT_EQ(made.response_metadata().status().code(), 0)
      << made.response_metadata().status().message();
  absl::StatusOr<std::string> back = FetchBytes(22, 220, 13);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, bytes);

  assemble->clear_single_device_array_handles();
  assemble->add_single_device_array_handles(20);
  assemble->set_result_handle(23);
  pb::IfrtResponse wrong = Call(request, 14);
  EXPECT_EQ(wrong.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(wrong.response_metadata().status().message(),
              HasSubstr("names 1 arrays for a sharding over 2 devices"));
}

// Tiles on devices in the other order than the sharding's: each moves to
// its shard worker to worker, and the global value is their concatenation.
TEST_F(ProxySessionTest, AssemblingTilesPutsEachPieceAtItsShard) {
  const float first[2] = {1, 2};
  const float second[2] = {3, 4};
  ASSERT_EQ(MakeArray(30, 1, std::string(reinterpret_cast<const char*>(first), 8), 2)
                .response_metadata().status().code(), 0);
  ASSERT_EQ(MakeArray(31, 0, std::string(reinterpret_cast<const char*>(second), 8), 2)
                .response_metadata().status().code(), 0);
  pb::IfrtRequest request;
  auto* assemble = request.mutable_assemble_array_from_single_device_arrays_request();
  assemble->mutable_shape()->add_dims(4);
  xla::ifrt::HloShardingProto hlo;
  hlo.mutable_devices()->add_device_ids(1);
  hlo.mutable_devices()->add_device_ids(0);
  hlo.mutable_xla_op_sharding()->set_type(xla::OpSharding::OTHER);
  hlo.mutable_xla_op_sharding()->add_tile_assignment_dimensions(2);
  hlo.mutable_xla_op_sharding()->add_tile_assignment_devices(0);
  hlo.mutable_xla_op_sharding()->add_tile_assignment_devices(1);
  assemble->mutable_sharding()->mutable_serialized_sharding()->set_type_name(
      kHloShardingTypeName);
  assemble->mutable_sharding()->mutable_serialized_sharding()->set_data(
      hlo.SerializeAsString());
  assemble->add_single_device_array_handles(30);
  assemble->add_single_device_array_handles(31);
  assemble->set_result_handle(32);
  pb::IfrtResponse made = Call(request, 15);
  ASSERT_EQ(made.response_metadata().status().code(), 0)
      << made.response_metadata().status().message();
  pb::IfrtRequest copy = testing::CopyToHostBufferRequest(32, 320);
  ASSERT_EQ(Call(copy, 16).response_metadata().status().code(), 0);
  absl::StatusOr<HostBuffer> back =
      session_->host_buffers().Lookup(320).AwaitFor(absl::Seconds(10));
  ASSERT_TRUE(back.ok()) << back.status();
  const float want[4] = {1, 2, 3, 4};
  EXPECT_EQ(back->bytes(), std::string(reinterpret_cast<const char*>(want), 16));

  // A piece on another device than its shard's fails that array alone (the
  // answer comes at once; the array carries the error).
  assemble->set_result_handle(33);
  assemble->set_single_device_array_handles(1, 30);
  ASSERT_EQ(Call(request, 17).response_metadata().status().code(), 0);
  copy = testing::CopyToHostBufferRequest(33, 330);
  pb::IfrtResponse wrong = Call(copy, 18);
  EXPECT_EQ(wrong.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(wrong.response_metadata().status().message(),
              HasSubstr("single-device array 1 is f32[2] on 1 device(s); the "
                        "sharding wants f32[2] on device 0"));
}

// Two single-device arrays become the shards of one array on their devices
// in the other order (what xc.reorder_shards sends); a malformed plan fails
// alone.
TEST_F(ProxySessionTest, RemapArraysTakesEachOutputShardFromItsInputShard) {
  const float first[2] = {1, 2};
  const float second[2] = {3, 4};
  ASSERT_EQ(MakeArray(40, 0, std::string(reinterpret_cast<const char*>(first), 8), 2)
                .response_metadata().status().code(), 0);
  ASSERT_EQ(MakeArray(41, 1, std::string(reinterpret_cast<const char*>(second), 8), 2)
                .response_metadata().status().code(), 0);
  pb::IfrtRequest request;
  auto* remap = request.mutable_remap_arrays_request();
  auto* plan = remap->mutable_plan();
  for (int32_t device : {0, 1}) {
    auto* in = plan->add_input_specs();
    in->mutable_dtype()->set_kind(xla::ifrt::DTypeProto::KIND_F32);
    in->mutable_shape()->add_dims(2);
    *in->mutable_sharding() = testing::SingleDeviceSharding(device);
  }
  auto* out = plan->add_output_specs();
  out->mutable_dtype()->set_kind(xla::ifrt::DTypeProto::KIND_F32);
  out->mutable_shape()->add_dims(4);
  xla::ifrt::HloShardingProto hlo;
  hlo.mutable_devices()->add_device_ids(1);
  hlo.mutable_devices()->add_device_ids(0);
  hlo.mutable_xla_op_sharding()->set_type(xla::OpSharding::OTHER);
  hlo.mutable_xla_op_sharding()->add_tile_assignment_dimensions(2);
  hlo.mutable_xla_op_sharding()->add_tile_assignment_devices(0);
  hlo.mutable_xla_op_sharding()->add_tile_assignment_devices(1);
  out->mutable_sharding()->mutable_serialized_sharding()->set_type_name(
      kHloShardingTypeName);
  out->mutable_sharding()->mutable_serialized_sharding()->set_data(hlo.SerializeAsString());
  // Output shard 0 (on device 1) is array 41; shard 1 (on device 0) is 40.
  for (auto [in, to] : {std::pair{1, 0}, std::pair{0, 1}}) {
    auto* mapping = plan->add_mappings();
    mapping->set_in_array(in);
    mapping->set_out_array(0);
    mapping->add_from_start(0);
    mapping->add_from_end(1);
    mapping->add_from_step(1);
    mapping->add_to_start(to);
    mapping->add_to_end(to + 1);
    mapping->add_to_step(1);
  }
  remap->add_array_handles(40);
  remap->add_array_handles(41);
  remap->add_result_handles(42);
  pb::IfrtResponse made = Call(request, 19);
  ASSERT_EQ(made.response_metadata().status().code(), 0)
      << made.response_metadata().status().message();
  EXPECT_EQ(made.remap_arrays_response().array_handles(0), 42u);
  absl::StatusOr<std::string> back = FetchBytes(42, 420, 20);
  ASSERT_TRUE(back.ok()) << back.status();
  const float want[4] = {3, 4, 1, 2};
  EXPECT_EQ(*back, std::string(reinterpret_cast<const char*>(want), 16));

  plan->mutable_mappings(1)->set_to_start(0, 0);  // Shard 0 twice, 1 never.
  plan->mutable_mappings(1)->set_to_end(0, 1);
  remap->set_result_handles(0, 43);
  pb::IfrtResponse bad = Call(request, 21);
  EXPECT_EQ(bad.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.response_metadata().status().message(),
              HasSubstr("output 0 shard 0 is out of range or given twice"));
}

TEST_F(ProxySessionTest, ErrorArraysFailEveryUseWithTheirError) {
  pb::IfrtRequest request;
  auto* make = request.mutable_make_error_arrays_request();
  make->mutable_error()->set_code(static_cast<int>(absl::StatusCode::kDataLoss));
  make->mutable_error()->set_message("the batch was lost");
  make->add_array_handles(50);
  make->add_array_specs();
  ASSERT_EQ(Call(request, 22).response_metadata().status().code(), 0);
  pb::IfrtRequest copy = testing::CopyToHostBufferRequest(50, 500);
  pb::IfrtResponse fetched = Call(copy, 23);
  EXPECT_EQ(fetched.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kDataLoss));
  EXPECT_EQ(fetched.response_metadata().status().message(), "the batch was lost");
}

TEST(ProxyDevicesTest, SpareHostsStayOutOfJaxDevices) {
  cluster::LocalClusterOptions options;
  options.islands = 2;
  options.hosts_per_island = 3;
  options.devices_per_host = 2;
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<client::Client> client = client::ConnectLocal(**cluster);
  absl::StatusOr<std::vector<ProxyDevice>> all = ProxyDevices(*client, 0);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 12u);
  absl::StatusOr<std::vector<ProxyDevice>> devices = ProxyDevices(*client, 1);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ((*devices)[i].id, i);
    EXPECT_EQ((*devices)[i].island, IslandId(i / 4));
  }
  absl::StatusOr<std::vector<ProxyDevice>> none = ProxyDevices(*client, 3);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(),
              HasSubstr("island 0 has 3 host(s): 3 spare host(s) per island leave "
                        "it no device"));
}

TEST_F(ProxySessionTest, AnExecutionKeepsAStatusFutureOnlyWhenTheClientAsksForIt) {
  const float values[4] = {1, 2, 3, 4};
  ASSERT_EQ(MakeArray(1, 0, std::string(reinterpret_cast<const char*>(values), 16))
                .response_metadata()
                .status()
                .code(),
            0);
  pb::IfrtResponse compiled = CompileOnDevice0(2);
  ASSERT_EQ(compiled.response_metadata().status().code(), 0)
      << compiled.response_metadata().status().message();
  pb::IfrtRequest ready;
  ready.mutable_check_future_request()->set_future_handle(
      compiled.compile_response().ready_future_handle());
  ASSERT_EQ(Call(ready, 3).response_metadata().status().code(), 0);
  EXPECT_EQ(session_->held_futures(), 0);

  // As jaxlib's client executes without fill_status: its own output handle,
  // no status handle, and it never reads a status.
  pb::IfrtRequest execute;
  auto* e = execute.mutable_loaded_executable_execute_request();
  e->set_loaded_executable_handle(compiled.compile_response().loaded_executable_handle());
  e->add_args_handles(1);
  e->add_result_array_handle(2);
  pb::IfrtResponse plain = Call(execute, 4);
  ASSERT_EQ(plain.response_metadata().status().code(), 0)
      << plain.response_metadata().status().message();
  EXPECT_EQ(plain.loaded_executable_execute_response().status_handle(), 0u);
  EXPECT_EQ(session_->held_futures(), 0);
  absl::StatusOr<std::string> out = FetchBytes(2, 20, 5);
  ASSERT_TRUE(out.ok()) << out.status();
  const float want[4] = {2, 3, 4, 5};
  EXPECT_EQ(*out, std::string(reinterpret_cast<const char*>(want), 16));

  // With fill_status the status is kept until the client reads it.
  e->set_result_array_handle(0, 3);
  e->mutable_execute_options()->set_fill_status(true);
  pb::IfrtResponse with_status = Call(execute, 6);
  ASSERT_EQ(with_status.response_metadata().status().code(), 0);
  const uint64_t status = with_status.loaded_executable_execute_response().status_handle();
  ASSERT_NE(status, 0u);
  EXPECT_EQ(session_->held_futures(), 1);
  pb::IfrtRequest check;
  check.mutable_check_future_request()->set_future_handle(status);
  EXPECT_EQ(Call(check, 7).response_metadata().status().code(), 0);
  EXPECT_EQ(session_->held_futures(), 0);
}

TEST_F(ProxySessionTest, CheckingAnUnknownFutureIsNotFound) {
  pb::IfrtRequest request;
  request.mutable_check_future_request()->set_future_handle(12345);
  EXPECT_EQ(Call(request, 10).response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kNotFound));
}

// What `jax.stages.Compiled.cost_analysis()` and `.as_text()` ask: XLA's
// cost analysis as the compile service gave it, and the module Causeway
// runs; an unknown executable is NotFound.
TEST_F(ProxySessionTest, AnExecutableTellsItsCostAnalysisAndItsProgramText) {
  pb::IfrtResponse compiled = CompileOnDevice0(1);
  ASSERT_EQ(compiled.response_metadata().status().code(), 0)
      << compiled.response_metadata().status().message();
  const uint64_t handle = compiled.compile_response().loaded_executable_handle();
  pb::IfrtRequest cost;
  cost.mutable_loaded_executable_cost_analysis_request()->set_loaded_executable_handle(handle);
  pb::IfrtResponse analysed = Call(cost, 2);
  ASSERT_EQ(analysed.response_metadata().status().code(), 0);
  const auto& attributes =
      analysed.loaded_executable_cost_analysis_response().attributes().attributes();
  ASSERT_EQ(attributes.size(), 2);
  EXPECT_EQ(attributes[0].key(), "flops");
  EXPECT_EQ(attributes[0].value().float_value(), 4.0f);
  EXPECT_EQ(attributes[1].key(), "bytes accessed");
  EXPECT_EQ(attributes[1].value().float_value(), 32.0f);

  pb::IfrtRequest text;
  text.mutable_loaded_executable_human_readable_program_text_request()
      ->set_loaded_executable_handle(handle);
  pb::IfrtResponse printed = Call(text, 3);
  ASSERT_EQ(printed.response_metadata().status().code(), 0);
  EXPECT_EQ(printed.loaded_executable_human_readable_program_text_response()
                .human_readable_program_text(),
            client::testing::ElementwiseProgram("add_one", "add", 1, 1, 4));

  cost.mutable_loaded_executable_cost_analysis_request()->set_loaded_executable_handle(
      handle + 100);
  pb::IfrtResponse unknown = Call(cost, 4);
  EXPECT_EQ(unknown.response_metadata().status().code(),
            static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_THAT(unknown.response_metadata().status().message(),
              HasSubstr("unknown executable handle"));
}

// A JAX process that goes away mid-fetch: the session is closed and its
// last owner lets it go while the fetch may still be in flight. The fetch's
// work holds the session until it has run (no use after free, which ASan
// builds check), and then nothing holds it: it is freed, not kept alive by
// a cycle through its own futures.
TEST_F(ProxySessionTest, AClosedSessionIsFreedOnceItsWorkInFlightHasRun) {
  const std::string bytes(4 << 10, '\x7f');
  ASSERT_EQ(MakeArray(1, 0, bytes, 1 << 10).response_metadata().status().code(), 0);
  pb::IfrtRequest copy = testing::CopyToHostBufferRequest(1, 10);
  ASSERT_EQ(Call(copy, 2).response_metadata().status().code(), 0);
  // An array waiting for a host buffer that never comes (its answer waits
  // too, until Close fails the wait).
  session_->Process(testing::MakeArrayRequest(3, 0, 30, 4), [](pb::IfrtResponse) {});
  std::weak_ptr<ProxySession> weak = session_;
  session_->Close();
  session_.reset();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!weak.expired() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(weak.expired()) << "the closed session is still held";
}

}  // namespace proxy_session_test
}  // namespace causeway::proxy
