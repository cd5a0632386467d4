#include "causeway/hlo/builder.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "causeway/hlo/parser.h"
#include "causeway/hlo/printer.h"
#include "causeway/hlo/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::hlo {
namespace builder_test {

using ::testing::HasSubstr;

constexpr PrimitiveType F32 = PrimitiveType::kF32;
constexpr PrimitiveType S32 = PrimitiveType::kS32;
constexpr PrimitiveType PRED = PrimitiveType::kPred;

DotDimensionNumbers MatMul() {
  DotDimensionNumbers dims;
  dims.lhs_contracting_dims = {1};
  dims.rhs_contracting_dims = {0};
  return dims;
}

// A scalar `op` reducer: (a, b) -> op(a, b).
ComputationBuilder ScalarReducer(ModuleBuilder& m, const std::string& name,
                                 PrimitiveType type = F32,
                                 Opcode op = Opcode::kAdd) {
  ComputationBuilder c = m.NewComputation(name);
  XlaOp a = c.Parameter(Shape::Scalar(type), "a");
  XlaOp b = c.Parameter(Shape::Scalar(type), "b");
  c.Binary(op, a, b);
  return c;
}

std::string ShapeOf(const ComputationBuilder& c, XlaOp op) {
  absl::StatusOr<Shape> shape = c.GetShape(op);
  return shape.ok() ? shape->ToString(false) : shape.status().ToString();
}

TEST(BuilderTest, AxpyWithDotAndAllReduceBuildsAndVerifies) {
  ModuleBuilder m("axpy");
  m.set_num_partitions(2);
  ComputationBuilder add = ScalarReducer(m, "add");
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(0, Shape(F32, {4, 8}), "x");
  XlaOp w = b.Parameter(1, Shape(F32, {8, 3}), "w");
  XlaOp alpha = b.ConstantScalar(F32, 2.0f);
  XlaOp y = b.Dot(x, w, MatMul());
  XlaOp scaled = b.Mul(b.Broadcast(alpha, {4, 3}, {}), y);
  XlaOp sum = b.AllReduce(scaled, add, CollectiveOptions::Spmd({{0, 1}}));
  EXPECT_EQ(ShapeOf(b, y), "f32[4,3]");
  EXPECT_EQ(ShapeOf(b, sum), "f32[4,3]");

  absl::StatusOr<std::unique_ptr<Module>> module = std::move(m).Build();
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->entry()->name(), "main");
  EXPECT_EQ((*module)->computations().front()->name(), "add");
  EXPECT_EQ((*module)->entry()->root()->opcode, Opcode::kAllReduce);
  EXPECT_TRUE((*module)->entry()->root()->is_root);
  EXPECT_EQ((*module)->num_partitions(), 2);
}

TEST(BuilderTest, BuiltModuleRoundTripsThroughHloText) {
  ModuleBuilder m("roundtrip");
  ComputationBuilder add = ScalarReducer(m, "add");
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(F32, {2, 3}), "x");
  XlaOp t = b.Transpose(b.Tanh(x), {1, 0});
  b.Reduce(t, b.ConstantScalar(F32, 0), add, {1});
  absl::StatusOr<std::unique_ptr<Module>> built = std::move(m).Build();
  ASSERT_TRUE(built.ok()) << built.status();

  std::string text = PrintModule(**built);
  absl::StatusOr<std::unique_ptr<Module>> parsed = ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_TRUE(VerifyModule(**parsed).ok());
  std::string diff;
  EXPECT_TRUE(ModulesEqual(**built, **parsed, &diff)) << diff;
}

TEST(BuilderTest, CollectivesAndLoopsRoundTripThroughHloText) {
  ModuleBuilder m("spmd");
  m.set_num_partitions(4);
  ComputationBuilder add = ScalarReducer(m, "add");
  Shape state = Shape::Tuple({Shape::Scalar(S32), Shape(F32, {8, 4})});
  ComputationBuilder cond = m.NewComputation("cond");
  cond.Compare(cond.GetTupleElement(cond.Parameter(state), 0),
               cond.ConstantScalar(S32, 3), ComparisonDirection::kLt);
  ComputationBuilder body = m.NewComputation("body");
  {
    XlaOp s = body.Parameter(state);
    XlaOp v = body.GetTupleElement(s, 1);
    XlaOp shifted =
        body.CollectivePermute(v, {{0, 1}, {1, 2}, {2, 3}, {3, 0}}, 1);
    body.Tuple(
        {body.Add(body.GetTupleElement(s, 0), body.ConstantScalar(S32, 1)),
         body.AllReduce(shifted, add,
                        CollectiveOptions::Spmd({{0, 1, 2, 3}}, 2))});
  }
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(F32, {8, 4}), "x");
  XlaOp loop = b.While(cond, body, b.Tuple({b.ConstantScalar(S32, 0), x}));
  XlaOp v = b.GetTupleElement(loop, 1);
  CollectiveOptions pairs = CollectiveOptions::Spmd({{0, 1}, {2, 3}}, 3);
  b.Tuple({b.AllGather(v, 1, pairs), b.AllToAll(v, 0, pairs),
           b.AllToAll(std::vector<XlaOp>{v, v}, pairs),
           b.ReduceScatter(v, add, 0, pairs), b.PartitionId()});
  absl::StatusOr<std::unique_ptr<Module>> built = std::move(m).Build();
  ASSERT_TRUE(built.ok()) << built.status();

  std::string text = PrintModule(**built);
  absl::StatusOr<std::unique_ptr<Module>> parsed = ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_TRUE(VerifyModule(**parsed).ok());
  std::string diff;
  EXPECT_TRUE(ModulesEqual(**built, **parsed, &diff)) << diff << "\n" << text;
}

TEST(BuilderTest, ShapeOpsInferTheirResults) {
  ModuleBuilder m("shapes");
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(F32, {6, 4}));
  XlaOp i = b.Parameter(Shape::Scalar(S32));
  EXPECT_EQ(ShapeOf(b, b.Reshape(x, {3, 8})), "f32[3,8]");
  EXPECT_EQ(ShapeOf(b, b.Slice(x, {1, 0}, {5, 4}, {2, 3})), "f32[2,2]");
  EXPECT_EQ(ShapeOf(b, b.Concatenate({x, x}, 0)), "f32[12,4]");
  EXPECT_EQ(
      ShapeOf(b, b.Pad(x, b.ConstantScalar(F32, 0), {{1, 2, 1}, {0, -1, 0}})),
      "f32[14,3]");
  EXPECT_EQ(ShapeOf(b, b.Iota(Shape(S32, {5}), 0)), "s32[5]");
  EXPECT_EQ(ShapeOf(b, b.Reverse(x, {0})), "f32[6,4]");
  EXPECT_EQ(ShapeOf(b, b.DynamicSlice(x, {i, i}, {2, 3})), "f32[2,3]");
  XlaOp patch = b.Broadcast(b.ConstantScalar(F32, 1), {2, 2}, {});
  EXPECT_EQ(ShapeOf(b, b.DynamicUpdateSlice(x, patch, {i, i})), "f32[6,4]");
  EXPECT_EQ(ShapeOf(b, b.Convert(x, S32)), "s32[6,4]");
  XlaOp positive =
      b.Compare(x, b.Broadcast(b.ConstantScalar(F32, 0), {6, 4}, {}),
                ComparisonDirection::kGt);
  EXPECT_EQ(ShapeOf(b, positive), "pred[6,4]");
  EXPECT_EQ(ShapeOf(b, b.Select(positive, x, b.Neg(x))), "f32[6,4]");
  EXPECT_EQ(ShapeOf(b, b.Clamp(b.ConstantScalar(F32, 0), x,
                               b.ConstantScalar(F32, 1))),
            "f32[6,4]");
  EXPECT_TRUE(std::move(m).Build().ok());
}

TEST(BuilderTest, DotCanWidenItsResultType) {
  ModuleBuilder m("dot");
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(PrimitiveType::kBF16, {2, 8}));
  XlaOp y = b.Parameter(Shape(PrimitiveType::kBF16, {8, 5}));
  EXPECT_EQ(ShapeOf(b, b.Dot(x, y, MatMul(), F32)), "f32[2,5]");
  EXPECT_EQ(ShapeOf(b, b.Dot(x, y, MatMul())), "bf16[2,5]");
}

TEST(BuilderTest, VariadicReduceComputesArgmax) {
  ModuleBuilder m("argmax");
  ComputationBuilder r = m.NewComputation("argmax_reducer");
  XlaOp av = r.Parameter(Shape::Scalar(F32));
  XlaOp ai = r.Parameter(Shape::Scalar(S32));
  XlaOp bv = r.Parameter(Shape::Scalar(F32));
  XlaOp bi = r.Parameter(Shape::Scalar(S32));
  XlaOp take_a = r.Compare(av, bv, ComparisonDirection::kGe);
  r.Tuple({r.Select(take_a, av, bv), r.Select(take_a, ai, bi)});
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(F32, {5, 4}));
  XlaOp idx = b.Iota(Shape(S32, {5, 4}), 1);
  XlaOp result = b.Reduce(
      {x, idx}, {b.ConstantScalar(F32, -1e30f), b.ConstantScalar(S32, 0)}, r,
      {1});
  EXPECT_EQ(ShapeOf(b, result), "(f32[5], s32[5])");
  EXPECT_EQ(ShapeOf(b, b.GetTupleElement(result, 1)), "s32[5]");
  EXPECT_TRUE(std::move(m).Build().ok());
}

TEST(BuilderTest, WhileLoopCountsToTen) {
  ModuleBuilder m("loop");
  Shape state = Shape::Tuple({Shape::Scalar(S32), Shape(F32, {3})});
  ComputationBuilder cond = m.NewComputation("cond");
  {
    XlaOp s = cond.Parameter(state);
    cond.Compare(cond.GetTupleElement(s, 0), cond.ConstantScalar(S32, 10),
                 ComparisonDirection::kLt);
  }
  ComputationBuilder body = m.NewComputation("body");
  {
    XlaOp s = body.Parameter(state);
    XlaOp i = body.Add(body.GetTupleElement(s, 0), body.ConstantScalar(S32, 1));
    XlaOp v = body.Tanh(body.GetTupleElement(s, 1));
    body.Tuple({i, v});
  }
  ComputationBuilder b = m.NewEntry("main");
  XlaOp init =
      b.Tuple({b.ConstantScalar(S32, 0), b.Parameter(Shape(F32, {3}))});
  XlaOp loop = b.While(cond, body, init);
  EXPECT_EQ(ShapeOf(b, loop), "(s32[], f32[3])");
  b.GetTupleElement(loop, 1);
  absl::StatusOr<std::unique_ptr<Module>> module = std::move(m).Build();
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->computations().size(), 3u);
  EXPECT_EQ((*module)->entry()->root()->opcode, Opcode::kGetTupleElement);
}

TEST(BuilderTest, ConditionalAndCallUseTheirComputations) {
  ModuleBuilder m("branches");
  ComputationBuilder double_it = m.NewComputation("double");
  {
    XlaOp v = double_it.Parameter(Shape(F32, {3}));
    double_it.Add(v, v);
  }
  ComputationBuilder negate = m.NewComputation("negate");
  negate.Neg(negate.Parameter(Shape(F32, {3})));
  ComputationBuilder b = m.NewEntry("main");
  XlaOp p = b.Parameter(Shape::Scalar(PRED));
  XlaOp x = b.Parameter(Shape(F32, {3}));
  XlaOp chosen = b.Conditional(p, {double_it, negate}, {x, x});
  EXPECT_EQ(ShapeOf(b, chosen), "f32[3]");
  XlaOp called = b.Call(negate, {chosen});
  EXPECT_EQ(ShapeOf(b, called), "f32[3]");
  EXPECT_TRUE(std::move(m).Build().ok());
}

TEST(BuilderTest, EveryCollectiveBuildsOnFourPartitions) {
  ModuleBuilder m("collectives");
  m.set_num_partitions(4);
  ComputationBuilder add = ScalarReducer(m, "add");
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(F32, {8, 4}));
  CollectiveOptions all = CollectiveOptions::Spmd({{0, 1, 2, 3}});
  CollectiveOptions pairs = CollectiveOptions::Spmd({{0, 1}, {2, 3}}, 2);
  EXPECT_EQ(ShapeOf(b, b.AllGather(x, 0, all)), "f32[32,4]");
  EXPECT_EQ(ShapeOf(b, b.ReduceScatter(x, add, 1, all)), "f32[8,1]");
  EXPECT_EQ(ShapeOf(b, b.AllToAll(x, 0, pairs)), "f32[8,4]");
  EXPECT_EQ(ShapeOf(b, b.AllToAll(std::vector<XlaOp>{x, x}, pairs)),
            "(f32[8,4], f32[8,4])");
  EXPECT_EQ(ShapeOf(b, b.AllReduce(std::vector<XlaOp>{x, x}, add, pairs)),
            "(f32[8,4], f32[8,4])");
  EXPECT_EQ(
      ShapeOf(b, b.CollectivePermute(x, {{0, 1}, {1, 2}, {2, 3}, {3, 0}}, 3)),
      "f32[8,4]");
  EXPECT_EQ(ShapeOf(b, b.PartitionId()), "u32[]");
  EXPECT_EQ(ShapeOf(b, b.ReplicaId()), "u32[]");
  absl::StatusOr<std::unique_ptr<Module>> module = std::move(m).Build();
  EXPECT_TRUE(module.ok()) << module.status();
}

TEST(BuilderTest, AllGatherWithoutGroupsUsesThePartitionCount) {
  ModuleBuilder m("gather");
  m.set_num_partitions(8);
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(F32, {2, 3}));
  CollectiveOptions options;
  options.channel_id = 1;
  EXPECT_EQ(ShapeOf(b, b.AllGather(x, 0, options)), "f32[16,3]");
}

TEST(BuilderTest, GenericBuildsAGather) {
  ModuleBuilder m("gather");
  ComputationBuilder b = m.NewEntry("main");
  XlaOp table = b.Parameter(Shape(F32, {10, 3}));
  XlaOp ids = b.Parameter(Shape(S32, {4, 1}));
  XlaOp rows = b.Generic(Opcode::kGather, {table, ids}, [](Instruction& i) {
    i.gather_dimension_numbers.offset_dims = {1};
    i.gather_dimension_numbers.collapsed_slice_dims = {0};
    i.gather_dimension_numbers.start_index_map = {0};
    i.gather_dimension_numbers.index_vector_dim = 1;
    i.gather_slice_sizes = {1, 3};
  });
  EXPECT_EQ(ShapeOf(b, rows), "f32[4,3]");
  EXPECT_TRUE(std::move(m).Build().ok());
}

// ---- Errors ----------------------------------------------------------------

TEST(BuilderErrorTest, FirstBadCallIsReturnedByBuild) {
  ModuleBuilder m("bad");
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(F32, {2}));
  XlaOp y = b.Parameter(Shape(F32, {3}));
  XlaOp sum = b.Add(x, y);
  EXPECT_FALSE(sum.valid());
  // Later calls, good or bad, neither succeed nor replace the first error.
  EXPECT_FALSE(b.Neg(x).valid());
  b.Dot(x, x, MatMul());
  absl::Status status = std::move(m).Build().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("computation 'main': instruction 'add.2': add "
                        "operands 0 and 1 must have the same shape but are "
                        "f32[2] and f32[3]"));
}

TEST(BuilderErrorTest, HandleFromAnotherModuleBuilderIsRefused) {
  ModuleBuilder other("other");
  ComputationBuilder o = other.NewEntry("main");
  XlaOp foreign = o.Parameter(Shape(F32, {2}));
  ModuleBuilder m("m");
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(F32, {2}));
  EXPECT_FALSE(b.Add(x, foreign).valid());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("operand 1 of add in computation 'main' comes from "
                        "another ModuleBuilder"));
}

TEST(BuilderErrorTest, HandleFromAnotherComputationIsRefused) {
  ModuleBuilder m("m");
  ComputationBuilder helper = m.NewComputation("helper");
  XlaOp h = helper.Parameter(Shape(F32, {2}));
  ComputationBuilder b = m.NewEntry("main");
  EXPECT_FALSE(b.Neg(h).valid());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("belongs to computation 'helper'"));
}

TEST(BuilderErrorTest, DefaultConstructedHandleIsRefused) {
  ModuleBuilder m("m");
  ComputationBuilder b = m.NewEntry("main");
  EXPECT_FALSE(b.Neg(XlaOp()).valid());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("is not a valid op"));
}

TEST(BuilderErrorTest, CallingAnEmptyComputationIsRefused) {
  ModuleBuilder m("m");
  ComputationBuilder empty = m.NewComputation("empty");
  ComputationBuilder b = m.NewEntry("main");
  b.Call(empty, {});
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("computation 'empty' called by call in computation "
                        "'main' has no ops yet"));
}

TEST(BuilderErrorTest, ReducerWithWrongSignatureIsRefused) {
  ModuleBuilder m("m");
  ComputationBuilder add = ScalarReducer(m, "add", S32);
  ComputationBuilder b = m.NewEntry("main");
  b.Reduce(b.Parameter(Shape(F32, {4})), b.ConstantScalar(F32, 0), add, {0});
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("to_apply 'add' parameter 0 must be f32[] but is "
                        "s32[]"));
}

TEST(BuilderErrorTest, ModuleWithoutEntryFailsToBuild) {
  ModuleBuilder m("m");
  ScalarReducer(m, "add");
  EXPECT_THAT(std::string(std::move(m).Build().status().message()),
              HasSubstr("has no entry computation"));
}

TEST(BuilderErrorTest, SecondEntryIsRefused) {
  ModuleBuilder m("m");
  m.NewEntry("a");
  m.NewEntry("b");
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("already has entry 'a'"));
}

TEST(BuilderErrorTest, BadReplicaGroupsFailAtBuild) {
  ModuleBuilder m("m");
  m.set_num_partitions(2);
  ComputationBuilder add = ScalarReducer(m, "add");
  ComputationBuilder b = m.NewEntry("main");
  b.AllReduce(b.Parameter(Shape(F32, {4})), add,
              CollectiveOptions::Spmd({{0, 5}}));
  EXPECT_TRUE(m.status().ok());
  EXPECT_THAT(std::string(std::move(m).Build().status().message()),
              HasSubstr("replica group id 5 is outside [0, 2)"));
}

TEST(BuilderErrorTest, ReusedParameterNumberIsRefused) {
  ModuleBuilder m("m");
  ComputationBuilder b = m.NewEntry("main");
  b.Parameter(0, Shape(F32, {2}));
  EXPECT_FALSE(b.Parameter(0, Shape(F32, {2})).valid());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("parameter number 0 of computation 'main'"));
}

TEST(BuilderErrorTest, BuildersRefuseWorkAfterBuild) {
  ModuleBuilder m("m");
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(F32, {2}));
  ASSERT_TRUE(std::move(m).Build().ok());
  EXPECT_FALSE(b.Neg(x).valid());
  EXPECT_EQ(b.GetShape(x).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::move(m).Build().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(BuilderErrorTest, GenericConfigureMayNotRewireOperands) {
  ModuleBuilder m("m");
  ComputationBuilder b = m.NewEntry("main");
  XlaOp x = b.Parameter(Shape(F32, {2}));
  b.Generic(Opcode::kNegate, {x}, [](Instruction& i) { i.operands.clear(); });
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("configure must not change"));
}

TEST(BuilderErrorTest, DefaultConstructedBuilderReturnsInvalidOps) {
  ComputationBuilder b;
  EXPECT_FALSE(b.Parameter(Shape(F32, {2})).valid());
  EXPECT_EQ(b.name(), "");
}

}  // namespace builder_test
}  // namespace causeway::hlo
