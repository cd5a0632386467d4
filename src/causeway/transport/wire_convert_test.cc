#include "causeway/transport/wire_convert.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "causeway/hlo/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace wire_convert_test {

using ::testing::HasSubstr;

const WireLimits kLimits;

MATCHER_P(IsInvalid, substring, "") {
  return arg.code() == absl::StatusCode::kInvalidArgument &&
         std::string(arg.message()).find(substring) != std::string::npos;
}

hlo::Sharding Sharding(std::string_view text) {
  return *hlo::ParseSharding(text);
}

ArraySpec Spec(uint64_t handle) {
  return {ArrayHandle(handle), hlo::Shape(hlo::PrimitiveType::kF32, {4, 2}),
          Sharding("{devices=[2,1]<=[2]}"), SliceHandle(7)};
}

TEST(WireConvertTest, ShapesRoundTripWithLayoutsAndTuples) {
  hlo::Shape array(hlo::PrimitiveType::kBF16, {3, 0, 5});
  array.set_minor_to_major({0, 2, 1});
  hlo::Shape shape = hlo::Shape::Tuple(
      {array, hlo::Shape::Scalar(hlo::PrimitiveType::kPred),
       hlo::Shape::Tuple({hlo::Shape::Token()})});
  wire::Shape message;
  ToWire(shape, &message);
  absl::StatusOr<hlo::Shape> back = FromWire(message, kLimits, FieldPath("s"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, shape);
}

TEST(WireConvertTest, MalformedShapesNameTheField) {
  wire::Shape negative;
  negative.set_type(wire::F32);
  negative.add_dims(2);
  negative.add_dims(-5);
  EXPECT_THAT(FromWire(negative, kLimits, FieldPath("Shape")).status(),
              IsInvalid("Shape.dims[1]: -5 is negative"));

  wire::Shape bad_type;
  bad_type.set_type(static_cast<wire::ElementType>(99));
  EXPECT_THAT(FromWire(bad_type, kLimits, FieldPath("Shape")).status(),
              IsInvalid("Shape.type: element type 99 is not valid"));

  wire::Shape layout;
  layout.set_type(wire::F32);
  layout.add_dims(2);
  layout.add_dims(3);
  layout.add_minor_to_major(0);
  layout.add_minor_to_major(0);
  EXPECT_THAT(FromWire(layout, kLimits, FieldPath("Shape")).status(),
              IsInvalid("Shape.minor_to_major: is not a permutation"));
}

TEST(WireConvertTest, EveryArrayElementTypeRoundTrips) {
  for (int t = static_cast<int>(hlo::PrimitiveType::kPred);
       t < static_cast<int>(hlo::PrimitiveType::kTuple); ++t) {
    const hlo::Shape shape(static_cast<hlo::PrimitiveType>(t), {2, 3});
    wire::Shape message;
    ToWire(shape, &message);
    absl::StatusOr<hlo::Shape> back =
        FromWire(message, kLimits, FieldPath("Shape"));
    ASSERT_TRUE(back.ok()) << shape.ToString() << ": " << back.status();
    EXPECT_EQ(*back, shape);
  }
}

TEST(WireConvertTest, ShapesBeyondTheLimitsAreRefusedWithoutOverflow) {
  wire::Shape huge;
  huge.set_type(wire::F64);
  for (int i = 0; i < 8; ++i) huge.add_dims(int64_t{1} << 20);
  EXPECT_THAT(FromWire(huge, kLimits, FieldPath("Shape")).status(),
              IsInvalid("more than"));

  wire::Shape deep;
  wire::Shape* inner = &deep;
  for (int i = 0; i < 40; ++i) {
    inner->set_type(wire::TUPLE);
    inner = inner->add_tuple_shapes();
  }
  inner->set_type(wire::F32);
  EXPECT_THAT(FromWire(deep, kLimits, FieldPath("Shape")).status(),
              IsInvalid("nest deeper than"));

  wire::Shape tuple;
  tuple.set_type(wire::TUPLE);
  EXPECT_THAT(ArrayShapeFromWire(tuple, kLimits, FieldPath("Shape")).status(),
              IsInvalid("must be an array shape"));
}

TEST(WireConvertTest, StatusesRoundTripAndUnknownCodesBecomeUnknown) {
  wire::Status message;
  ToWire(absl::DataLossError("host 3 died"), &message);
  absl::Status status;
  ASSERT_TRUE(StatusFromWire(message, kLimits, FieldPath("s"), &status).ok());
  EXPECT_EQ(status, absl::DataLossError("host 3 died"));

  message.set_code(1234);
  ASSERT_TRUE(StatusFromWire(message, kLimits, FieldPath("s"), &status).ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnknown);

  message.set_code(0);
  EXPECT_THAT(StatusFromWire(message, kLimits, FieldPath("s"), &status),
              IsInvalid("an OK status carries no message"));
}

TEST(WireConvertTest, ExecuteRoundTripsAndABadShardingIsNamed) {
  ExecuteOp op{ExecutableHandle(3), {ArrayHandle(1), ArrayHandle(2)},
               {Spec(10), Spec(11)}};
  wire::ExecuteOp message;
  ToWire(op, &message);
  absl::StatusOr<ExecuteOp> back = FromWire(message, kLimits, FieldPath("e"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->executable, op.executable);
  EXPECT_EQ(back->arguments, op.arguments);
  ASSERT_EQ(back->outputs.size(), 2u);
  EXPECT_EQ(back->outputs[1].handle, ArrayHandle(11));
  EXPECT_EQ(back->outputs[1].global_shape, op.outputs[1].global_shape);
  EXPECT_EQ(back->outputs[1].sharding, op.outputs[1].sharding);

  message.mutable_outputs(1)->set_sharding("{devices=[2,");
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("SessionRequest.execute"))
                  .status(),
              IsInvalid("SessionRequest.execute.outputs[1].sharding: not a "
                        "sharding"));
}

TEST(WireConvertTest, GraphsKeepTheirOrderAndRefuseEmptyOps) {
  ExecuteOp execute;
  execute.executable = ExecutableHandle(1);
  execute.outputs = {Spec(5)};
  CopyOp copy;
  copy.source = ArrayHandle(5);
  copy.destination = Spec(6);
  copy.pieces = {{ArrayHandle(3), 1}, {ArrayHandle(4), 0}};
  ProgramGraph graph;
  graph.ops.emplace_back(std::move(execute));
  graph.ops.emplace_back(std::move(copy));
  wire::ProgramGraph message;
  ToWire(graph, &message);
  absl::StatusOr<ProgramGraph> back = FromWire(message, kLimits, FieldPath("g"));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->ops.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<ExecuteOp>(back->ops[0]));
  EXPECT_EQ(std::get<CopyOp>(back->ops[1]).destination.handle, ArrayHandle(6));
  const std::vector<CopyOp::Piece>& pieces = std::get<CopyOp>(back->ops[1]).pieces;
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].array, ArrayHandle(3));
  EXPECT_EQ(pieces[0].shard, 1);
  EXPECT_EQ(pieces[1].array, ArrayHandle(4));

  message.add_ops();
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("g")).status(),
              IsInvalid("g.ops[2]: neither an execute nor a copy"));
}

TEST(WireConvertTest, CountsBeyondTheLimitAreRefused) {
  WireLimits limits;
  limits.max_entries = 3;
  wire::ExecuteOp op;
  for (int i = 0; i < 4; ++i) op.add_arguments(i);
  EXPECT_THAT(FromWire(op, limits, FieldPath("e")).status(),
              IsInvalid("e.arguments: 4 entries (at most 3)"));
}

TEST(WireConvertTest, SliceRequestsAreBounded) {
  SliceRequest request{SliceHandle(4), 4, {2, 2}, IslandId(1), 3, true, true};
  wire::SliceRequest message;
  ToWire(request, &message);
  absl::StatusOr<SliceRequest> back = FromWire(message, kLimits, FieldPath("r"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->island, IslandId(1));
  EXPECT_EQ(back->priority, 3);
  EXPECT_EQ(back->mesh_shape, (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(back->allow_smaller && back->shared);

  message.set_num_devices(0);
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("r")).status(),
              IsInvalid("r.num_devices: 0 is not in [1, "));
  message.set_num_devices(4);
  message.set_mesh_shape(1, -2);
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("r")).status(),
              IsInvalid("r.mesh_shape[1]: -2 is not positive"));
}

TEST(WireConvertTest, OpenSessionRefusesANonPositiveWeight) {
  wire::OpenSession message;
  ToWire(OpenSessionRequest{"trainer", 2.5, 1}, &message);
  absl::StatusOr<OpenSessionRequest> back =
      FromWire(message, kLimits, FieldPath("o"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, "trainer");
  EXPECT_EQ(back->weight, 2.5);
  message.set_weight(std::nan(""));
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("o")).status(),
              IsInvalid("o.weight"));
}

TEST(WireConvertTest, CompileInfoRoundTripsAndNeedsAShardingPerShape) {
  CompileInfo info;
  info.handle = ExecutableHandle(9);
  info.num_partitions = 2;
  info.parameter_shapes = {hlo::Shape(hlo::PrimitiveType::kF32, {2})};
  info.parameter_shardings = {Sharding("{devices=[2]<=[2]}")};
  info.output_shapes = {hlo::Shape(hlo::PrimitiveType::kS32, {})};
  info.output_shardings = {Sharding("{replicated}")};
  wire::CompileInfo message;
  ToWire(info, &message);
  absl::StatusOr<CompileInfo> back = FromWire(message, kLimits, FieldPath("c"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->parameter_shardings, info.parameter_shardings);
  EXPECT_EQ(back->output_shapes, info.output_shapes);

  message.add_output_shapes()->set_type(wire::F32);
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("c")).status(),
              IsInvalid("c.output_shardings: 1 for 2 outputs"));
}

WorkerBatch SampleBatch() {
  WorkerBatch batch;
  ReceiveSpec receive{DeviceId(3), BufferId{ArrayHandle(8), 1},
                      hlo::Shape(hlo::PrimitiveType::kF32, {4}),
                      {PieceOrigin{41, DeviceId(0), HostId(0), "array 2 shard 0"}},
                      {Box{{2}, {2}}},
                      false};
  batch.receives.push_back(receive);
  LaunchOp launch;
  launch.device = DeviceId(3);
  launch.island = IslandId(0);
  launch.seq = 12;
  launch.program = ProgramId(0xfeed);
  launch.program_name = "add";
  launch.session = SessionId(2);
  launch.session_name = "bench";
  launch.partition = 1;
  launch.num_partitions = 2;
  launch.participant_hosts = {HostId(0), HostId(1)};
  launch.staging = {receive};
  launch.inputs = {LaunchInput{BufferId{ArrayHandle(8), 1}, true,
                               ArrayHandle(5),
                               std::make_shared<const std::string>(
                                   "output 0 of 'mul'")}};
  launch.outputs = {
      LaunchOutput{BufferId{ArrayHandle(9), 1},
                   hlo::Shape(hlo::PrimitiveType::kF32, {4})}};
  launch.abandoned = absl::DataLossError("host 1 is gone");
  batch.launches.push_back(launch);
  batch.sends.push_back(SendSpec{77, DeviceId(3), BufferId{ArrayHandle(9), 1},
                                 Box{{0}, {2}}, false, HostId(0), DeviceId(0),
                                 BufferId{ArrayHandle(10), 0}, {2}});
  batch.releases.push_back(DeviceBuffer{DeviceId(3), BufferId{ArrayHandle(1), 0}});
  return batch;
}

// A dispatch written and read through its own stream's name tables.
absl::StatusOr<WorkerBatch> RoundTrip(const WorkerBatch& batch) {
  NameEncoder encoder;
  NameDecoder decoder;
  wire::WorkerBatch message;
  ToWire(batch, encoder, &message);
  return FromWire(message, decoder, kLimits, FieldPath("b"));
}

TEST(WireConvertTest, WorkerBatchesRoundTripEveryField) {
  WorkerBatch batch = SampleBatch();
  absl::StatusOr<WorkerBatch> back = RoundTrip(batch);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->receives.size(), 1u);
  EXPECT_EQ(back->receives[0].pieces[0].description, "array 2 shard 0");
  EXPECT_EQ(back->receives[0].pieces[0].transfer_id, 41u);
  EXPECT_EQ(back->receives[0].zero_fill[0].offsets, std::vector<int64_t>{2});
  const LaunchOp& launch = back->launches.at(0);
  EXPECT_EQ(launch.seq, 12u);
  EXPECT_EQ(launch.program, ProgramId(0xfeed));
  EXPECT_EQ(launch.program_name, "add");
  EXPECT_EQ(launch.session_name, "bench");
  EXPECT_EQ(launch.participant_hosts, batch.launches[0].participant_hosts);
  EXPECT_EQ(launch.staging.size(), 1u);
  EXPECT_TRUE(launch.inputs.at(0).release_after_use);
  EXPECT_EQ(launch.inputs.at(0).array, ArrayHandle(5));
  ASSERT_NE(launch.inputs.at(0).producer, nullptr);
  EXPECT_EQ(*launch.inputs.at(0).producer, "output 0 of 'mul'");
  // What the status view shows is built from those, on arrival's side.
  EXPECT_EQ(DescribeInputSource(launch, 0),
            "transfer of array 5 (output 0 of 'mul') from device 0 (host 0)");
  EXPECT_EQ(launch.outputs.at(0).buffer, (BufferId{ArrayHandle(9), 1}));
  EXPECT_EQ(launch.abandoned, absl::DataLossError("host 1 is gone"));
  EXPECT_EQ(back->sends.at(0).transfer_id, 77u);
  EXPECT_EQ(back->sends.at(0).destination_offsets, std::vector<int64_t>{2});
  EXPECT_EQ(back->releases.at(0).buffer, (BufferId{ArrayHandle(1), 0}));
}

TEST(WireConvertTest, UndeliveredPiecesRoundTripAndMustSayWhy) {
  UndeliveredPiece piece{7, HostId(1), DeviceId(2), HostId(3),
                         DeviceBuffer{DeviceId(5), BufferId{ArrayHandle(4), 1}},
                         absl::DataLossError("transfer 7 was not delivered")};
  wire::UndeliveredPiece message;
  ToWire(piece, &message);
  absl::StatusOr<UndeliveredPiece> back =
      FromWire(message, kLimits, FieldPath("p"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->transfer_id, 7u);
  EXPECT_EQ(back->source_host, HostId(1));
  EXPECT_EQ(back->source_device, DeviceId(2));
  EXPECT_EQ(back->destination_host, HostId(3));
  EXPECT_EQ(back->destination.buffer, (BufferId{ArrayHandle(4), 1}));
  EXPECT_EQ(back->status, piece.status);

  message.clear_status();
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("p")).status(),
              IsInvalid("p.status: is OK"));
  message.set_destination_host(-2);
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("p")).status(),
              IsInvalid("p.destination_host: -2 is negative"));
}

TEST(WireConvertTest, MalformedLaunchesAreNamed) {
  // Each case on fresh tables, as a first message on a stream.
  auto sample = [] {
    NameEncoder encoder;
    wire::WorkerBatch message;
    ToWire(SampleBatch(), encoder, &message);
    return message;
  };
  auto read = [](const wire::WorkerBatch& message, const char* root) {
    NameDecoder decoder;
    return FromWire(message, decoder, kLimits, FieldPath(root)).status();
  };
  wire::WorkerBatch message = sample();
  message.mutable_launches(0)->set_partition(2);
  EXPECT_THAT(read(message, "HeadToWorker.dispatch"),
              IsInvalid("HeadToWorker.dispatch.launches[0].partition: 2 is "
                        "not in [0, 2)"));

  message = sample();
  message.mutable_sends(0)->mutable_region()->add_dims(1);
  EXPECT_THAT(read(message, "d"),
              IsInvalid("d.sends[0].region: 1 offsets for 2 dims"));

  message = sample();
  message.mutable_receives(0)->set_whole(true);
  message.mutable_receives(0)->add_pieces();
  EXPECT_THAT(read(message, "d"),
              IsInvalid("d.receives[0].whole: a whole receive has one piece"));
}

TEST(WireConvertTest, ANameTravelsOnceAndAsANumberAfterThat) {
  NameEncoder encoder;
  NameDecoder decoder;
  wire::WorkerBatch first;
  ToWire(SampleBatch(), encoder, &first);
  // "add", "bench" and the producer, defined once each.
  EXPECT_EQ(first.names().define_size(), 3);
  EXPECT_FALSE(first.names().reset());
  ASSERT_TRUE(FromWire(first, decoder, kLimits, FieldPath("b")).ok());

  WorkerBatch again = SampleBatch();
  again.launches.push_back(again.launches[0]);
  again.launches[1].session_name = "other";
  wire::WorkerBatch second;
  ToWire(again, encoder, &second);
  ASSERT_EQ(second.names().define_size(), 1);
  EXPECT_EQ(second.names().define(0).text(), "other");
  EXPECT_EQ(second.launches(0).program_name(), first.launches(0).program_name());
  absl::StatusOr<WorkerBatch> back =
      FromWire(second, decoder, kLimits, FieldPath("b"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->launches[0].session_name, "bench");
  EXPECT_EQ(back->launches[1].session_name, "other");
  EXPECT_EQ(back->launches[1].program_name, "add");
  EXPECT_EQ(*back->launches[1].inputs[0].producer, "output 0 of 'mul'");
}

TEST(WireConvertTest, AnUndefinedNameFailsThatLaunchOnlyAndSaysSo) {
  WorkerBatch batch = SampleBatch();
  batch.launches[0].abandoned = absl::OkStatus();
  batch.launches.push_back(batch.launches[0]);
  batch.launches[1].seq = 13;
  NameEncoder encoder;
  wire::WorkerBatch message;
  ToWire(batch, encoder, &message);
  // The second launch names a session the head never defined here.
  message.mutable_launches(1)->set_session_name(99);
  NameDecoder decoder;
  absl::StatusOr<WorkerBatch> back =
      FromWire(message, decoder, kLimits, FieldPath("HeadToWorker.dispatch"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->launches[0].abandoned.ok());
  EXPECT_THAT(back->launches[1].abandoned,
              IsInvalid("program 'add' (seq 13) cannot run: "
                        "HeadToWorker.dispatch.launches[1].session_name: "
                        "name 99 is not defined on this stream (3 names "
                        "are)"));
  // A producer's name too.
  message.mutable_launches(1)->set_session_name(
      message.launches(0).session_name());
  message.mutable_launches(1)->mutable_inputs(0)->set_producer(7);
  NameDecoder fresh;
  back = FromWire(message, fresh, kLimits, FieldPath("d"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(back->launches[1].abandoned,
              IsInvalid("d.launches[1].inputs[0].producer: name 7"));
}

TEST(WireConvertTest, NameTablesStayBoundedByResets) {
  NameEncoder encoder;
  NameDecoder decoder;
  WorkerBatch batch;
  LaunchOp launch = SampleBatch().launches[0];
  launch.inputs.clear();
  launch.staging.clear();
  launch.abandoned = absl::OkStatus();
  // Enough new names in a few messages to pass half the bound.
  int64_t resets = 0;
  for (int64_t i = 0; i < kMaxNames; i += 1024) {
    WorkerBatch batch;
    for (int64_t k = 0; k < 1024; ++k) {
      launch.session_name = absl::StrCat("session ", i + k);
      batch.launches.push_back(launch);
    }
    wire::WorkerBatch message;
    ToWire(batch, encoder, &message);
    resets += message.names().reset() ? 1 : 0;
    absl::StatusOr<WorkerBatch> back =
        FromWire(message, decoder, kLimits, FieldPath("b"));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->launches.back().session_name,
              absl::StrCat("session ", i + 1023));
    EXPECT_TRUE(back->launches.back().abandoned.ok());
    EXPECT_LE(decoder.size(), kMaxNames / 2 + 1024 + 1);
  }
  EXPECT_GE(resets, 1);
  EXPECT_EQ(encoder.size(), decoder.size());

  // A name longer than the bound is cut (at a character boundary).
  launch.session_name = std::string(kMaxNameBytes - 1, 'x') + "\xc3\xa9";
  batch.launches = {launch};
  wire::WorkerBatch message;
  ToWire(batch, encoder, &message);
  absl::StatusOr<WorkerBatch> back =
      FromWire(message, decoder, kLimits, FieldPath("b"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->launches[0].session_name,
            std::string(kMaxNameBytes - 1, 'x'));
}

TEST(WireConvertTest, ADecoderKeepsNoDefinitionOutOfOrderOrTooLong) {
  NameDecoder decoder;
  wire::Names names;
  wire::Name* skipped = names.add_define();
  skipped->set_id(2);  // 1 was never defined.
  skipped->set_text("b");
  decoder.Define(names);
  EXPECT_EQ(decoder.size(), 0);
  names.Clear();
  wire::Name* huge = names.add_define();
  huge->set_id(1);
  huge->set_text(std::string(kMaxNameBytes + 1, 'x'));
  decoder.Define(names);
  EXPECT_EQ(decoder.size(), 0);
  std::string out;
  EXPECT_THAT(decoder.Find(1, FieldPath("f"), &out),
              IsInvalid("f: name 1 is not defined on this stream (0 names "
                        "are)"));
  EXPECT_TRUE(decoder.Find(0, FieldPath("f"), &out).ok());
  EXPECT_EQ(out, "");
}

TEST(WireConvertTest, ValuesTravelInBoundedChunksAndComeBackEqual) {
  hlo::Literal value(hlo::Shape(hlo::PrimitiveType::kF32, {3 * (1 << 18) + 5}));
  std::span<float> data = value.mutable_data<float>();
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  absl::StatusOr<ValueAssembler> assembler =
      ValueAssembler::Create(ValueHeaderOf(value), kLimits, FieldPath("v"));
  ASSERT_TRUE(assembler.ok()) << assembler.status();
  int chunks = 0;
  ASSERT_TRUE(ForEachValueChunk(value, [&](std::string_view bytes) {
                ++chunks;
                EXPECT_LE(static_cast<int64_t>(bytes.size()), kChunkBytes);
                return assembler->Append(bytes);
              }).ok());
  EXPECT_EQ(chunks, 4);
  absl::StatusOr<hlo::Literal> back = std::move(*assembler).Finish();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, value);
}

TEST(WireConvertTest, SmallValuesTravelWholeInsideAMessage) {
  hlo::Literal scalar(hlo::Shape(hlo::PrimitiveType::kF32, {}));
  scalar.mutable_data<float>()[0] = 2.5f;
  ASSERT_TRUE(TravelsInline(scalar));
  wire::InlineValue message;
  ToWire(scalar, &message);
  absl::StatusOr<hlo::Literal> back = FromWire(message, kLimits, FieldPath("v"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, scalar);

  EXPECT_TRUE(TravelsInline(
      hlo::Literal(hlo::Shape(hlo::PrimitiveType::kU8, {kInlineValueBytes}))));
  EXPECT_FALSE(TravelsInline(
      hlo::Literal(hlo::Shape(hlo::PrimitiveType::kU8, {kInlineValueBytes + 1}))));
}

TEST(WireConvertTest, InlineValuesWhoseDataDisagreesWithTheirHeaderAreRefused) {
  wire::InlineValue message;
  message.mutable_header()->mutable_shape()->set_type(wire::S32);
  message.mutable_header()->mutable_shape()->add_dims(4);
  message.mutable_header()->set_byte_size(16);
  message.set_data(std::string(12, 'x'));
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("v")).status(),
              IsInvalid("v.data: value data ended after 12 of 16 bytes"));
  message.set_data(std::string(20, 'x'));
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("v")).status(),
              IsInvalid("runs past its declared 16 bytes"));
  message.set_data(std::string(kInlineValueBytes + 1, 'x'));
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("v")).status(),
              IsInvalid("v.data: 65537 bytes (an inline value has at most 65536)"));
}

// A stream writer that keeps what it is given and breaks after `capacity`
// messages, as a gRPC writer whose call has broken.
struct RecordingWriter {
  size_t capacity = SIZE_MAX;
  std::vector<wire::HostBufferData> written;
  bool Write(const wire::HostBufferData& message) {
    if (written.size() >= capacity) return false;
    written.push_back(message);
    return true;
  }
};

TEST(WireConvertTest, AValueStreamIsItsHeaderThenItsChunks) {
  hlo::Literal value(hlo::Shape(hlo::PrimitiveType::kS32, {(1 << 18) + 3}));
  std::span<int32_t> data = value.mutable_data<int32_t>();
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>(i);
  wire::HostBufferData message;
  *message.mutable_header() = ValueHeaderOf(value);
  RecordingWriter writer;
  ASSERT_TRUE(WriteValueStream(writer, message, value));
  ASSERT_EQ(writer.written.size(), 3u);
  ASSERT_TRUE(writer.written[0].has_header());
  absl::StatusOr<ValueAssembler> assembler = ValueAssembler::Create(
      writer.written[0].header(), kLimits, FieldPath("v"));
  ASSERT_TRUE(assembler.ok()) << assembler.status();
  for (size_t i = 1; i < writer.written.size(); ++i) {
    ASSERT_TRUE(writer.written[i].has_chunk());
    ASSERT_TRUE(assembler->Append(writer.written[i].chunk().data()).ok());
  }
  absl::StatusOr<hlo::Literal> back = std::move(*assembler).Finish();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, value);
}

TEST(WireConvertTest, AValueStreamStopsAtTheFirstWriteThatFails) {
  hlo::Literal value(hlo::Shape(hlo::PrimitiveType::kU8, {3 << 20}));
  wire::HostBufferData message;
  *message.mutable_header() = ValueHeaderOf(value);
  RecordingWriter writer;
  writer.capacity = 2;
  EXPECT_FALSE(WriteValueStream(writer, message, value));
  EXPECT_EQ(writer.written.size(), 2u);
  writer = RecordingWriter();
  writer.capacity = 0;
  EXPECT_FALSE(WriteValueStream(writer, message, value));
  EXPECT_TRUE(writer.written.empty());
}

TEST(WireConvertTest, ValueHeadersAndDataThatDisagreeAreRefused) {
  wire::ValueHeader header;
  header.mutable_shape()->set_type(wire::S32);
  header.mutable_shape()->add_dims(4);
  header.set_byte_size(1 << 30);
  EXPECT_THAT(ValueAssembler::Create(header, kLimits, FieldPath("h")).status(),
              IsInvalid("h.byte_size: 1073741824 bytes for s32[4]"));

  header.set_byte_size(16);
  absl::StatusOr<ValueAssembler> assembler =
      ValueAssembler::Create(header, kLimits, FieldPath("h"));
  ASSERT_TRUE(assembler.ok());
  EXPECT_TRUE(assembler->Append(std::string(8, 'x')).ok());
  EXPECT_THAT(assembler->Append(std::string(9, 'x')),
              IsInvalid("runs past its declared 16 bytes"));
  EXPECT_EQ(std::move(*assembler).Finish().status().code(),
            absl::StatusCode::kDataLoss);

  WireLimits small;
  small.max_value_bytes = 1024;
  header.mutable_shape()->set_dims(0, 1 << 20);
  header.set_byte_size(4 << 20);
  EXPECT_THAT(ValueAssembler::Create(header, small, FieldPath("h")).status(),
              IsInvalid("more than 1024 bytes"));
}

TEST(WireConvertTest, WorkerStatusRoundTrips) {
  WorkerStatus status;
  status.host = HostId(2);
  DeviceStatus device;
  device.device = DeviceId(5);
  device.running = OpStatus{4, IslandId(0), "add", "s", 1, {"array 1"}, false};
  device.queued = {OpStatus{5, IslandId(0), "mul", "s", 1, {}, true}};
  device.memory.budget_bytes = 100;
  device.memory.num_ready = 3;
  device.ops_completed = 9;
  status.devices = {device};
  status.pending_receives = {"array 9 shard 0"};
  wire::WorkerStatus message;
  ToWire(status, &message);
  absl::StatusOr<WorkerStatus> back = FromWire(message, kLimits, FieldPath("w"));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->devices.size(), 1u);
  EXPECT_EQ(back->devices[0].running->waiting_for,
            std::vector<std::string>{"array 1"});
  EXPECT_TRUE(back->devices[0].queued.at(0).waiting_for_memory);
  EXPECT_EQ(back->devices[0].memory.budget_bytes, 100);
  EXPECT_EQ(back->devices[0].ops_completed, 9);
  EXPECT_EQ(back->pending_receives, status.pending_receives);
}

TEST(WireConvertTest, ATopologyComesBackWithTheSameIdsAndStates) {
  Topology topology = Topology::Empty();
  topology = *topology.WithHost(IslandId(1), {2, "cpu", 1 << 20}, "a", "h:1");
  topology = topology.WithHostAlive(HostId(0));
  topology = *topology.WithHost(IslandId(0), {3, "cpu", 2 << 20}, "b", "h:2");
  topology = topology.WithHostAlive(HostId(1));
  topology = topology.WithHostDead(HostId(0));
  wire::ClusterTopology message;
  ToWire(topology, &message);
  absl::StatusOr<Topology> back = FromWire(message, kLimits, FieldPath("t"));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->num_devices(), 5);
  EXPECT_EQ(back->device(DeviceId(4)).host, HostId(1));
  EXPECT_EQ(back->device(DeviceId(4)).memory_bytes, 2 << 20);
  EXPECT_EQ(back->IslandOfHost(HostId(0)), IslandId(1));
  EXPECT_EQ(back->host(HostId(0)).state, HostState::kDead);
  EXPECT_TRUE(back->IsAlive(HostId(1)));
  EXPECT_EQ(back->host(HostId(1)).address, "h:2");

  message.mutable_hosts(1)->set_id(5);
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("t")).status(),
              IsInvalid("t.hosts[1].id: 5 is out of order"));
  message.mutable_hosts(1)->set_id(1);
  message.mutable_hosts(1)->set_num_devices(0);
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("t")).status(),
              IsInvalid("t.hosts[1]"));
}

TEST(WireConvertTest, MembershipUpdatesRoundTrip) {
  MembershipUpdate update;
  update.version = 9;
  update.hosts = {PeerInfo{HostId(0), IslandId(1), "10.0.0.1:7", HostState::kDead, ""},
                  PeerInfo{HostId(1), IslandId(0), "10.0.0.2:7", HostState::kAlive,
                           "00000000deadbeef"}};
  update.island_epochs = {3, 5};
  wire::MembershipUpdate message;
  ToWire(update, &message);
  absl::StatusOr<MembershipUpdate> back = FromWire(message, kLimits, FieldPath("m"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->version, 9u);
  ASSERT_EQ(back->hosts.size(), 2u);
  EXPECT_EQ(back->hosts[0].state, HostState::kDead);
  EXPECT_EQ(back->hosts[1].address, "10.0.0.2:7");
  EXPECT_EQ(back->hosts[1].incarnation, "00000000deadbeef");
  EXPECT_EQ(back->island_epochs, (std::vector<uint64_t>{3, 5}));
  message.mutable_hosts(1)->set_state(static_cast<wire::HostState>(7));
  EXPECT_THAT(FromWire(message, kLimits, FieldPath("m")).status(),
              IsInvalid("m.hosts[1].state: unknown host state 7"));
}

TEST(WireConvertTest, TraceEventsRoundTripWithTheirTimes) {
  trace::EventRecord finished;
  finished.kind = trace::EventRecord::Kind::kOpFinished;
  trace::OpEvent op;
  op.time = absl::FromUnixMicros(1234567);
  op.device = DeviceId(3);
  op.host = HostId(1);
  op.island = IslandId(0);
  op.seq = 8;
  op.session = SessionId(2);
  op.session_name = "s";
  op.program = "p";
  op.collective_time = absl::Nanoseconds(1500);
  op.collectives = 3;
  finished.event = op;
  finished.status = absl::DataLossError("lost");
  trace::EventRecord transfer;
  transfer.kind = trace::EventRecord::Kind::kTransferStarted;
  trace::TransferEvent t;
  t.time = absl::FromUnixMicros(99);
  t.transfer_id = 4;
  t.source_device = DeviceId(1);
  t.source_host = HostId(0);
  t.destination_device = DeviceId(3);
  t.destination_host = HostId(1);
  t.bytes = 64;
  transfer.event = t;
  NameEncoder encoder;
  NameDecoder decoder;
  int64_t unnamed = 0;
  const std::vector<trace::EventRecord> records = {finished, transfer};
  wire::TraceEvents message;
  ToWire(records, encoder, &message);
  EXPECT_EQ(message.names().define_size(), 2);  // "s" and "p".
  absl::StatusOr<std::vector<trace::EventRecord>> back =
      FromWire(message, decoder, kLimits, FieldPath("e"), &unnamed);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ((*back)[i].kind, records[i].kind);
    EXPECT_EQ((*back)[i].status, records[i].status);
    EXPECT_EQ((*back)[i].event.index(), records[i].event.index());
  }
  const auto& op_back = std::get<trace::OpEvent>((*back)[0].event);
  EXPECT_EQ(op_back.time, op.time);
  EXPECT_EQ(op_back.seq, 8u);
  EXPECT_EQ(op_back.session_name, "s");
  EXPECT_EQ(op_back.program, "p");
  EXPECT_EQ(op_back.collective_time, absl::Nanoseconds(1500));
  EXPECT_EQ(op_back.collectives, 3);

  // The next message names them by number only.
  wire::TraceEvents next;
  ToWire(records, encoder, &next);
  EXPECT_EQ(next.names().define_size(), 0);
  back = FromWire(next, decoder, kLimits, FieldPath("e"), &unnamed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(std::get<trace::OpEvent>((*back)[0].event).program, "p");
  EXPECT_EQ(unnamed, 0);

  // An event with a name never defined is left out, and counted.
  next.mutable_events(0)->set_program(42);
  back = FromWire(next, decoder, kLimits, FieldPath("e"), &unnamed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->size(), 1u);
  EXPECT_EQ(unnamed, 1);
  // A malformed one is an error.
  next.mutable_events(0)->set_program(0);
  next.mutable_events(0)->set_device(-1);
  EXPECT_THAT(FromWire(next, decoder, kLimits, FieldPath("e"), &unnamed)
                  .status(),
              IsInvalid("e.events[0].device: -1 is negative"));
  next.mutable_events(0)->set_device(3);
  next.mutable_events(0)->set_collective_ns(-5);
  EXPECT_THAT(FromWire(next, decoder, kLimits, FieldPath("e"), &unnamed)
                  .status(),
              IsInvalid("e.events[0].collective_ns: -5 is negative"));
}

TEST(WireConvertTest, ALaunchsDevicesMustMatchItsPartitions) {
  WorkerBatch batch = SampleBatch();
  batch.launches[0].devices = {DeviceId(2), DeviceId(3)};
  batch.launches[0].epoch = 4;
  NameEncoder encoder;
  wire::WorkerBatch message;
  ToWire(batch, encoder, &message);
  NameDecoder decoder;
  absl::StatusOr<WorkerBatch> back =
      FromWire(message, decoder, kLimits, FieldPath("b"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->launches[0].epoch, 4u);
  EXPECT_EQ(back->launches[0].devices, batch.launches[0].devices);
  message.mutable_launches(0)->set_devices(1, 9);
  NameDecoder fresh;
  EXPECT_THAT(FromWire(message, fresh, kLimits, FieldPath("b")).status(),
              IsInvalid("b.launches[0].devices"));
}

// Two launches over the same two devices: their peers travel in the first
// message only, as a number after that.
TEST(WireConvertTest, ALaunchsPeersTravelOnceAndAsANumberAfterThat) {
  WorkerBatch batch = SampleBatch();
  batch.launches[0].devices = {DeviceId(2), DeviceId(3)};
  batch.launches[0].peers_key = PeersKey(batch.launches[0].devices,
                                         batch.launches[0].participant_hosts);
  NameEncoder encoder;
  NameDecoder decoder;
  wire::WorkerBatch first;
  ToWire(batch, encoder, &first);
  ASSERT_EQ(first.names().define_peers_size(), 1);
  EXPECT_EQ(first.launches(0).devices_size(), 0);
  ASSERT_TRUE(FromWire(first, decoder, kLimits, FieldPath("b")).ok());

  batch.launches[0].seq = 13;
  wire::WorkerBatch second;
  ToWire(batch, encoder, &second);
  EXPECT_EQ(second.names().define_peers_size(), 0);
  EXPECT_EQ(second.launches(0).peers(), first.launches(0).peers());
  absl::StatusOr<WorkerBatch> back =
      FromWire(second, decoder, kLimits, FieldPath("b"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->launches[0].devices, batch.launches[0].devices);
  EXPECT_EQ(back->launches[0].participant_hosts,
            batch.launches[0].participant_hosts);
}

TEST(WireConvertTest, UndefinedPeersFailThatLaunchOnlyAndSaySo) {
  WorkerBatch batch = SampleBatch();
  batch.launches[0].abandoned = absl::OkStatus();
  batch.launches[0].devices = {DeviceId(2), DeviceId(3)};
  batch.launches[0].peers_key = 42;
  NameEncoder encoder;
  wire::WorkerBatch message;
  ToWire(batch, encoder, &message);
  // A decoder that never saw the definition (another stream's).
  message.mutable_names()->clear_define_peers();
  NameDecoder decoder;
  absl::StatusOr<WorkerBatch> back =
      FromWire(message, decoder, kLimits, FieldPath("d"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(back->launches[0].abandoned,
              IsInvalid("d.launches[0].peers: peer list 1 is not defined on "
                        "this stream (0 are)"));
}

TEST(WireConvertTest, PeerTablesStayBoundedByResets) {
  NameEncoder encoder;
  NameDecoder decoder;
  WorkerBatch batch = SampleBatch();
  batch.launches[0].devices = {DeviceId(2), DeviceId(3)};
  bool reset = false;
  for (int64_t i = 0; i < kMaxPeerLists; ++i) {
    batch.launches[0].peers_key = static_cast<uint64_t>(i + 1);
    wire::WorkerBatch message;
    ToWire(batch, encoder, &message);
    reset = reset || message.names().reset();
    absl::StatusOr<WorkerBatch> back =
        FromWire(message, decoder, kLimits, FieldPath("b"));
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(back->launches[0].devices, batch.launches[0].devices);
  }
  EXPECT_TRUE(reset);
}

}  // namespace wire_convert_test
}  // namespace causeway::transport
