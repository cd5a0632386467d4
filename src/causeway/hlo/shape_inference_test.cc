#include "causeway/hlo/shape_inference.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::hlo {
namespace shape_inference_test {

using ::testing::HasSubstr;

constexpr PrimitiveType F32 = PrimitiveType::kF32;
constexpr PrimitiveType F16 = PrimitiveType::kF16;
constexpr PrimitiveType S32 = PrimitiveType::kS32;
constexpr PrimitiveType U32 = PrimitiveType::kU32;
constexpr PrimitiveType U64 = PrimitiveType::kU64;
constexpr PrimitiveType U8 = PrimitiveType::kU8;
constexpr PrimitiveType PRED = PrimitiveType::kPred;

// Builds instructions by hand (no parser, no builder) so that each test
// exercises InferShape alone.
class ShapeInferenceTest : public ::testing::Test {
 protected:
  ShapeInferenceTest() : module_("m") {
    comp_ = module_.AddComputation(std::make_unique<Computation>("main"));
  }

  // A parameter of `shape` in the main computation.
  Instruction* P(Shape shape) { return AddParam(comp_, std::move(shape)); }

  Instruction* AddParam(Computation* comp, Shape shape) {
    auto instr = std::make_unique<Instruction>();
    instr->opcode = Opcode::kParameter;
    instr->parameter_number = comp->parameter_count();
    instr->name = absl::StrCat("p", instr->parameter_number);
    instr->shape = std::move(shape);
    return comp->AddInstruction(std::move(instr));
  }

  // An instruction (not added anywhere) with a declared shape that only
  // matters for ops whose result is not derivable.
  std::unique_ptr<Instruction> Make(Opcode opcode,
                                    std::vector<Instruction*> operands,
                                    Shape declared = Shape()) {
    auto instr = std::make_unique<Instruction>();
    instr->name = absl::StrCat(std::string(OpcodeName(opcode)), ".1");
    instr->opcode = opcode;
    instr->operands = std::move(operands);
    instr->shape = std::move(declared);
    instr->line = 7;
    return instr;
  }

  Instruction* AddOp(Computation* comp, Opcode opcode,
                     std::vector<Instruction*> operands, Shape shape) {
    auto instr = Make(opcode, std::move(operands), std::move(shape));
    return comp->AddInstruction(std::move(instr));
  }

  // A computation of `n` pairs (acc_i, x_i) of scalars of `types` that
  // returns the elementwise `op` of them (a tuple when n > 1).
  Computation* Reducer(std::vector<PrimitiveType> types,
                       Opcode op = Opcode::kAdd) {
    auto comp = std::make_unique<Computation>(
        absl::StrCat("reducer", module_.computations().size()));
    std::vector<Instruction*> params;
    for (int k = 0; k < 2; ++k) {
      for (PrimitiveType t : types) {
        params.push_back(AddParam(comp.get(), Shape::Scalar(t)));
      }
    }
    std::vector<Instruction*> results;
    size_t n = types.size();
    for (size_t i = 0; i < n; ++i) {
      results.push_back(AddOp(comp.get(), op, {params[i], params[n + i]},
                              Shape::Scalar(types[i])));
    }
    Instruction* root = results[0];
    if (n > 1) {
      std::vector<Shape> shapes;
      for (PrimitiveType t : types) shapes.push_back(Shape::Scalar(t));
      root = AddOp(comp.get(), Opcode::kTuple, results,
                   Shape::Tuple(std::move(shapes)));
    }
    comp->set_root(root);
    return module_.AddComputation(std::move(comp));
  }

  // A computation with parameters `params` whose root is `root_shape`,
  // produced by a constant (its value is irrelevant to inference).
  Computation* Comp(std::vector<Shape> params, Shape root_shape) {
    auto comp = std::make_unique<Computation>(
        absl::StrCat("comp", module_.computations().size()));
    for (Shape& p : params) AddParam(comp.get(), std::move(p));
    auto root = Make(Opcode::kConstant, {}, root_shape);
    root->literal = Literal(root_shape);
    comp->set_root(comp->AddInstruction(std::move(root)));
    return module_.AddComputation(std::move(comp));
  }

  static std::string Str(const absl::StatusOr<Shape>& s) {
    return s.ok() ? s->ToString(false) : s.status().ToString();
  }

  Module module_;
  Computation* comp_;
};

Shape A(PrimitiveType t, std::vector<int64_t> dims) {
  return Shape(t, std::move(dims));
}

// ---- Elementwise -------------------------------------------------------

TEST_F(ShapeInferenceTest, BinaryOpKeepsOperandShape) {
  auto add = Make(Opcode::kAdd, {P(A(F32, {2, 3})), P(A(F32, {2, 3}))});
  EXPECT_EQ(Str(InferShape(*add)), "f32[2,3]");
}

TEST_F(ShapeInferenceTest, BinaryOpRejectsDifferentDimsNamingLine) {
  auto add = Make(Opcode::kAdd, {P(A(F32, {2, 3})), P(A(F32, {3, 2}))});
  absl::StatusOr<Shape> s = InferShape(*add);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("instruction 'add.1' (line 7): add operands 0 and 1 "
                        "must have the same shape but are f32[2,3] and "
                        "f32[3,2]"));
}

TEST_F(ShapeInferenceTest, BinaryOpRejectsMixedElementTypes) {
  auto mul = Make(Opcode::kMultiply, {P(A(F32, {2})), P(A(S32, {2}))});
  EXPECT_FALSE(InferShape(*mul).ok());
}

TEST_F(ShapeInferenceTest, LogicalOpsAcceptPredAndIntegersOnly) {
  EXPECT_EQ(
      Str(InferShape(*Make(Opcode::kAnd, {P(A(PRED, {4})), P(A(PRED, {4}))}))),
      "pred[4]");
  EXPECT_EQ(
      Str(InferShape(*Make(Opcode::kXor, {P(A(U32, {4})), P(A(U32, {4}))}))),
      "u32[4]");
  EXPECT_FALSE(
      InferShape(*Make(Opcode::kOr, {P(A(F32, {4})), P(A(F32, {4}))})).ok());
  EXPECT_FALSE(
      InferShape(*Make(Opcode::kShiftLeft, {P(A(PRED, {4})), P(A(PRED, {4}))}))
          .ok());
}

TEST_F(ShapeInferenceTest, TranscendentalUnaryNeedsFloatingPoint) {
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kTanh, {P(A(F16, {3}))}))), "f16[3]");
  absl::StatusOr<Shape> s = InferShape(*Make(Opcode::kExp, {P(A(S32, {3}))}));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("exponential needs a floating-point or complex "
                        "operand"));
}

TEST_F(ShapeInferenceTest, IsFiniteGivesPred) {
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kIsFinite, {P(A(F32, {2, 2}))}))),
            "pred[2,2]");
}

TEST_F(ShapeInferenceTest, NotAndPopcntNeedIntegerOrPred) {
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kNot, {P(A(PRED, {2}))}))), "pred[2]");
  EXPECT_FALSE(InferShape(*Make(Opcode::kNot, {P(A(F32, {2}))})).ok());
  EXPECT_FALSE(InferShape(*Make(Opcode::kPopcnt, {P(A(PRED, {2}))})).ok());
}

TEST_F(ShapeInferenceTest, CompareGivesPredAndChecksComparisonType) {
  auto cmp = Make(Opcode::kCompare, {P(A(S32, {5})), P(A(S32, {5}))});
  EXPECT_EQ(Str(InferShape(*cmp)), "pred[5]");
  cmp->comparison_type = ComparisonType::kTotalOrder;
  EXPECT_FALSE(InferShape(*cmp).ok());
  cmp->comparison_type = ComparisonType::kSigned;
  EXPECT_TRUE(InferShape(*cmp).ok());
}

TEST_F(ShapeInferenceTest, SelectAcceptsScalarOrMatchingPredicate) {
  Instruction* t = P(A(F32, {2, 3}));
  Instruction* f = P(A(F32, {2, 3}));
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kSelect, {P(A(PRED, {})), t, f}))),
            "f32[2,3]");
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kSelect, {P(A(PRED, {2, 3})), t, f}))),
            "f32[2,3]");
  EXPECT_FALSE(
      InferShape(*Make(Opcode::kSelect, {P(A(PRED, {3})), t, f})).ok());
  EXPECT_FALSE(
      InferShape(*Make(Opcode::kSelect, {P(A(S32, {2, 3})), t, f})).ok());
}

TEST_F(ShapeInferenceTest, ClampAcceptsScalarBounds) {
  Instruction* x = P(A(F32, {4}));
  EXPECT_EQ(Str(InferShape(
                *Make(Opcode::kClamp, {P(A(F32, {})), x, P(A(F32, {4}))}))),
            "f32[4]");
  EXPECT_FALSE(
      InferShape(*Make(Opcode::kClamp, {P(A(F32, {2})), x, P(A(F32, {}))}))
          .ok());
}

TEST_F(ShapeInferenceTest, ConvertTakesTypeFromDeclaredShape) {
  Instruction* x = P(A(F32, {2, 3}));
  EXPECT_EQ(Str(InferShape(
                *Make(Opcode::kConvert, {x}, A(PrimitiveType::kBF16, {2, 3})))),
            "bf16[2,3]");
  EXPECT_FALSE(InferShape(*Make(Opcode::kConvert, {x}, A(S32, {3, 2}))).ok());
  EXPECT_FALSE(InferShape(*Make(Opcode::kConvert, {x})).ok());
}

TEST_F(ShapeInferenceTest, BitcastConvertAddsOrDropsMinorDimForWidthChange) {
  Instruction* x = P(A(F32, {2, 3}));
  EXPECT_TRUE(
      InferShape(*Make(Opcode::kBitcastConvert, {x}, A(S32, {2, 3}))).ok());
  EXPECT_TRUE(
      InferShape(*Make(Opcode::kBitcastConvert, {x}, A(U8, {2, 3, 4}))).ok());
  EXPECT_TRUE(InferShape(*Make(Opcode::kBitcastConvert, {P(A(U8, {5, 4}))},
                               A(F32, {5})))
                  .ok());
  EXPECT_FALSE(
      InferShape(*Make(Opcode::kBitcastConvert, {x}, A(U8, {2, 3}))).ok());
  EXPECT_THAT(InferShape(*Make(Opcode::kBitcastConvert, {P(A(U8, {3}))},
                               A(PrimitiveType::kS4, {3, 2})))
                  .status()
                  .message(),
              HasSubstr("is not supported (sub-byte element types)"));
}

TEST_F(ShapeInferenceTest, ReducePrecisionNeedsFloatAndValidBits) {
  auto rp = Make(Opcode::kReducePrecision, {P(A(F32, {3}))});
  rp->exponent_bits = 5;
  rp->mantissa_bits = 10;
  EXPECT_EQ(Str(InferShape(*rp)), "f32[3]");
  rp->exponent_bits = 0;
  EXPECT_FALSE(InferShape(*rp).ok());
}

// ---- Structure ---------------------------------------------------------

// ---- Complex and fft -----------------------------------------------------

constexpr PrimitiveType C64 = PrimitiveType::kC64;
constexpr PrimitiveType C128 = PrimitiveType::kC128;
constexpr PrimitiveType F64 = PrimitiveType::kF64;

TEST_F(ShapeInferenceTest, ComplexArithmeticKeepsTheTypeAndAbsGivesItsPart) {
  Instruction* z = P(A(C64, {3}));
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kDivide, {z, z}))), "c64[3]");
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kExp, {z}))), "c64[3]");
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kAbs, {z}))), "f32[3]");
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kAbs, {P(A(C128, {2}))}))), "f64[2]");
  EXPECT_THAT(InferShape(*Make(Opcode::kMaximum, {z, z})).status().message(),
              HasSubstr("maximum needs"));
  EXPECT_FALSE(InferShape(*Make(Opcode::kFloor, {z})).ok());
  EXPECT_FALSE(InferShape(*Make(Opcode::kAtan2, {z, z})).ok());
}

TEST_F(ShapeInferenceTest, RealImagAndComplexConvertBetweenPartsAndWholes) {
  Instruction* z = P(A(C128, {2, 2}));
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kReal, {z}))), "f64[2,2]");
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kImag, {z}))), "f64[2,2]");
  Instruction* re = P(A(F32, {4}));
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kComplex, {re, re}))), "c64[4]");
  Instruction* re64 = P(A(F64, {4}));
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kComplex, {re64, re64}))), "c128[4]");
  EXPECT_FALSE(InferShape(*Make(Opcode::kComplex, {re, re64})).ok());
  EXPECT_FALSE(InferShape(*Make(Opcode::kReal, {P(A(S32, {4}))})).ok());
}

TEST_F(ShapeInferenceTest, ComplexComparesOnlyForEquality) {
  Instruction* z = P(A(C64, {3}));
  auto eq = Make(Opcode::kCompare, {z, z});
  eq->comparison_direction = ComparisonDirection::kEq;
  EXPECT_EQ(Str(InferShape(*eq)), "pred[3]");
  auto lt = Make(Opcode::kCompare, {z, z});
  lt->comparison_direction = ComparisonDirection::kLt;
  EXPECT_THAT(InferShape(*lt).status().message(),
              HasSubstr("complex values compare only for EQ and NE"));
}

TEST_F(ShapeInferenceTest, ConvertFromComplexToRealIsRefusedNamingRealAndImag) {
  Instruction* z = P(A(C64, {2}));
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kConvert, {z}, A(C128, {2})))),
            "c128[2]");
  EXPECT_EQ(
      Str(InferShape(*Make(Opcode::kConvert, {P(A(F32, {2}))}, A(C64, {2})))),
      "c64[2]");
  absl::StatusOr<Shape> s =
      InferShape(*Make(Opcode::kConvert, {z}, A(F32, {2})));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("use real or imag"));
}

std::unique_ptr<Instruction> FftOf(std::unique_ptr<Instruction> fft,
                                   FftType type, std::vector<int64_t> length) {
  fft->fft_type = type;
  fft->fft_length = std::move(length);
  return fft;
}

TEST_F(ShapeInferenceTest, FftKeepsComplexShapesOverTrailingDims) {
  Instruction* z = P(A(C64, {5, 4, 8}));
  EXPECT_EQ(Str(InferShape(
                *FftOf(Make(Opcode::kFft, {z}), FftType::kFft, {4, 8}))),
            "c64[5,4,8]");
  EXPECT_EQ(Str(InferShape(
                *FftOf(Make(Opcode::kFft, {z}), FftType::kIfft, {5, 4, 8}))),
            "c64[5,4,8]");
  absl::StatusOr<Shape> wrong =
      InferShape(*FftOf(Make(Opcode::kFft, {z}), FftType::kFft, {8, 4}));
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(),
              HasSubstr("instruction 'fft.1' (line 7): fft FFT with "
                        "fft_length {8,4} needs trailing dims {8,4}"));
  EXPECT_FALSE(InferShape(*FftOf(Make(Opcode::kFft, {P(A(F32, {8}))}),
                                 FftType::kFft, {8}))
                   .ok());
  EXPECT_FALSE(InferShape(*FftOf(Make(Opcode::kFft, {z}), FftType::kFft,
                                 {1, 5, 4, 8}))
                   .ok());
}

TEST_F(ShapeInferenceTest, RfftHalvesTheLastDimAndIrfftRestoresIt) {
  EXPECT_EQ(Str(InferShape(*FftOf(Make(Opcode::kFft, {P(A(F32, {3, 6, 9}))}),
                                  FftType::kRfft, {6, 9}))),
            "c64[3,6,5]");
  EXPECT_EQ(Str(InferShape(*FftOf(Make(Opcode::kFft, {P(A(F64, {8}))}),
                                  FftType::kRfft, {8}))),
            "c128[5]");
  EXPECT_EQ(Str(InferShape(*FftOf(Make(Opcode::kFft, {P(A(C64, {3, 6, 5}))}),
                                  FftType::kIrfft, {6, 9}))),
            "f32[3,6,9]");
  EXPECT_EQ(Str(InferShape(*FftOf(Make(Opcode::kFft, {P(A(C64, {3, 6, 5}))}),
                                  FftType::kIrfft, {6, 8}))),
            "f32[3,6,8]");
  EXPECT_FALSE(InferShape(*FftOf(Make(Opcode::kFft, {P(A(C64, {3, 6, 5}))}),
                                 FftType::kIrfft, {6, 12}))
                   .ok());
  EXPECT_FALSE(InferShape(*FftOf(Make(Opcode::kFft, {P(A(C64, {8}))}),
                                 FftType::kRfft, {8}))
                   .ok());
}

TEST_F(ShapeInferenceTest, ParameterAndConstantUseTheirOwnShapes) {
  EXPECT_EQ(Str(InferShape(*P(A(F32, {2})))), "f32[2]");
  auto c = Make(Opcode::kConstant, {}, A(S32, {3}));
  c->literal = Literal(A(S32, {3}));
  EXPECT_EQ(Str(InferShape(*c)), "s32[3]");
  c->literal.reset();
  EXPECT_THAT(InferShape(*c).status().message(), HasSubstr("has no value"));
}

TEST_F(ShapeInferenceTest, TupleAndGetTupleElement) {
  Instruction* a = P(A(F32, {2}));
  Instruction* b = P(A(S32, {}));
  Instruction* t = AddOp(comp_, Opcode::kTuple, {a, b},
                         Shape::Tuple({A(F32, {2}), A(S32, {})}));
  EXPECT_EQ(Str(InferShape(*t)), "(f32[2], s32[])");
  auto gte = Make(Opcode::kGetTupleElement, {t});
  gte->tuple_index = 1;
  EXPECT_EQ(Str(InferShape(*gte)), "s32[]");
  gte->tuple_index = 2;
  EXPECT_THAT(InferShape(*gte).status().message(),
              HasSubstr("tuple index 2 is out of range"));
}

TEST_F(ShapeInferenceTest, CallReturnsCalleeRootAndChecksArguments) {
  Computation* callee = Comp({A(F32, {2}), A(S32, {})}, A(F16, {7}));
  auto call = Make(Opcode::kCall, {P(A(F32, {2})), P(A(S32, {}))});
  call->called_computations = {callee};
  EXPECT_EQ(Str(InferShape(*call)), "f16[7]");
  call->operands.pop_back();
  EXPECT_THAT(InferShape(*call).status().message(),
              HasSubstr("takes 2 parameters but is given 1"));
}

TEST_F(ShapeInferenceTest, FusionChecksParameterShapes) {
  Computation* fused = Comp({A(F32, {2})}, A(F32, {2}));
  auto fusion = Make(Opcode::kFusion, {P(A(F32, {3}))});
  fusion->called_computations = {fused};
  EXPECT_THAT(InferShape(*fusion).status().message(),
              HasSubstr("parameter 0 is f32[2] but is given f32[3]"));
}

TEST_F(ShapeInferenceTest, WhileChecksConditionAndBody) {
  Shape state = Shape::Tuple({A(S32, {}), A(F32, {3})});
  Computation* cond = Comp({state}, A(PRED, {}));
  Computation* body = Comp({state}, state);
  auto loop = Make(Opcode::kWhile, {P(state)});
  loop->called_computations = {cond, body};
  EXPECT_EQ(Str(InferShape(*loop)), "(s32[], f32[3])");

  Computation* bad_cond = Comp({state}, A(S32, {}));
  loop->called_computations = {bad_cond, body};
  EXPECT_THAT(InferShape(*loop).status().message(),
              HasSubstr("must return pred[] but returns s32[]"));
  Computation* bad_body = Comp({state}, A(F32, {3}));
  loop->called_computations = {cond, bad_body};
  EXPECT_THAT(InferShape(*loop).status().message(),
              HasSubstr("returns f32[3] but the loop state is"));
}

TEST_F(ShapeInferenceTest, ConditionalAcceptsPredOrIndexBranches) {
  Computation* b0 = Comp({A(F32, {2})}, A(F32, {4}));
  Computation* b1 = Comp({A(S32, {})}, A(F32, {4}));
  Computation* b2 = Comp({A(S32, {})}, A(F32, {5}));
  Instruction* x = P(A(F32, {2}));
  Instruction* i = P(A(S32, {}));
  auto cond = Make(Opcode::kConditional, {P(A(PRED, {})), x, i});
  cond->called_computations = {b0, b1};
  EXPECT_EQ(Str(InferShape(*cond)), "f32[4]");
  cond->operands[0] = P(A(S32, {}));
  EXPECT_EQ(Str(InferShape(*cond)), "f32[4]");
  cond->called_computations = {b0, b2};
  EXPECT_THAT(InferShape(*cond).status().message(),
              HasSubstr("branch 1 'comp3' returns f32[5] but branch 0"));
  cond->operands[0] = P(A(F32, {}));
  EXPECT_FALSE(InferShape(*cond).ok());
}

TEST_F(ShapeInferenceTest, BitcastKeepsByteSize) {
  Instruction* x = P(A(F32, {2, 3}));
  EXPECT_TRUE(InferShape(*Make(Opcode::kBitcast, {x}, A(F32, {6}))).ok());
  EXPECT_THAT(
      InferShape(*Make(Opcode::kBitcast, {x}, A(F32, {7}))).status().message(),
      HasSubstr("changes the size"));
}

TEST_F(ShapeInferenceTest, AfterAllNeedsTokens) {
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kAfterAll, {}))), "token[]");
  EXPECT_FALSE(InferShape(*Make(Opcode::kAfterAll, {P(A(F32, {}))})).ok());
}

TEST_F(ShapeInferenceTest, PartitionIdIsU32Scalar) {
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kPartitionId, {}))), "u32[]");
  EXPECT_EQ(Str(InferShape(*Make(Opcode::kReplicaId, {}))), "u32[]");
}

TEST_F(ShapeInferenceTest, UnknownAndCustomCallAreUnimplemented) {
  auto unknown = Make(Opcode::kUnknown, {});
  unknown->opcode_name = "fft";
  EXPECT_EQ(InferShape(*unknown).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_THAT(InferShape(*unknown).status().message(), HasSubstr("'fft'"));
  auto cc = Make(Opcode::kCustomCall, {}, A(F32, {}));
  cc->custom_call_target = "MyKernel";
  EXPECT_THAT(InferShape(*cc).status().message(),
              HasSubstr("unsupported custom-call target 'MyKernel'"));
}

TEST_F(ShapeInferenceTest, MissingOperandIsAnErrorNotACrash) {
  auto add = Make(Opcode::kAdd, {P(A(F32, {2})), nullptr});
  EXPECT_THAT(InferShape(*add).status().message(),
              HasSubstr("operand 1 is missing"));
}

// ---- Shape manipulation ------------------------------------------------

TEST_F(ShapeInferenceTest, BroadcastMapsOperandDimsToOutputDims) {
  auto b = Make(Opcode::kBroadcast, {P(A(F32, {3}))}, A(F32, {2, 3}));
  b->dimensions = {1};
  EXPECT_EQ(Str(InferShape(*b)), "f32[2,3]");
  b->dimensions = {0};
  EXPECT_THAT(InferShape(*b).status().message(),
              HasSubstr("broadcast maps operand dim 0 (size 3) to output dim "
                        "0 of size 2"));
  b->dimensions = {};
  EXPECT_FALSE(InferShape(*b).ok());
}

TEST_F(ShapeInferenceTest, ReshapeKeepsElementCount) {
  Instruction* x = P(A(F32, {2, 6}));
  EXPECT_TRUE(InferShape(*Make(Opcode::kReshape, {x}, A(F32, {3, 4}))).ok());
  EXPECT_FALSE(InferShape(*Make(Opcode::kReshape, {x}, A(F32, {5}))).ok());
  EXPECT_FALSE(InferShape(*Make(Opcode::kReshape, {x}, A(S32, {12}))).ok());
}

TEST_F(ShapeInferenceTest, TransposePermutesDims) {
  auto t = Make(Opcode::kTranspose, {P(A(F32, {2, 3, 4}))});
  t->dimensions = {2, 0, 1};
  EXPECT_EQ(Str(InferShape(*t)), "f32[4,2,3]");
  t->dimensions = {0, 0, 1};
  EXPECT_THAT(InferShape(*t).status().message(), HasSubstr("repeats 0"));
}

TEST_F(ShapeInferenceTest, SliceWithStrides) {
  auto s = Make(Opcode::kSlice, {P(A(F32, {6, 4}))});
  s->slice = {{1, 5, 2}, {0, 4, 3}};
  EXPECT_EQ(Str(InferShape(*s)), "f32[2,2]");
  s->slice = {{1, 7, 1}, {0, 4, 1}};
  EXPECT_THAT(InferShape(*s).status().message(),
              HasSubstr("[1:7:1] does not fit operand dim of size 6"));
}

TEST_F(ShapeInferenceTest, ConcatenateSumsAlongDimension) {
  auto c = Make(Opcode::kConcatenate,
                {P(A(F32, {2, 3})), P(A(F32, {2, 5})), P(A(F32, {2, 1}))});
  c->dimensions = {1};
  EXPECT_EQ(Str(InferShape(*c)), "f32[2,9]");
  c->dimensions = {0};
  EXPECT_FALSE(InferShape(*c).ok());
}

TEST_F(ShapeInferenceTest, PadWithNegativeAndInteriorPadding) {
  auto p = Make(Opcode::kPad, {P(A(F32, {6, 4})), P(A(F32, {}))});
  p->padding = {{1, 2, 1}, {0, -1, 0}};
  EXPECT_EQ(Str(InferShape(*p)), "f32[14,3]");
  p->padding = {{0, -7, 0}, {0, 0, 0}};
  EXPECT_FALSE(InferShape(*p).ok());
}

TEST_F(ShapeInferenceTest, IotaChecksDimension) {
  auto iota = Make(Opcode::kIota, {}, A(S32, {3, 4}));
  iota->iota_dimension = 1;
  EXPECT_EQ(Str(InferShape(*iota)), "s32[3,4]");
  iota->iota_dimension = 2;
  EXPECT_FALSE(InferShape(*iota).ok());
}

TEST_F(ShapeInferenceTest, ReverseChecksDimensions) {
  auto r = Make(Opcode::kReverse, {P(A(F32, {3, 4}))});
  r->dimensions = {0, 1};
  EXPECT_EQ(Str(InferShape(*r)), "f32[3,4]");
  r->dimensions = {2};
  EXPECT_FALSE(InferShape(*r).ok());
}

// ---- Indexing ----------------------------------------------------------

TEST_F(ShapeInferenceTest, DynamicSliceTakesSizes) {
  Instruction* i = P(A(S32, {}));
  auto ds = Make(Opcode::kDynamicSlice, {P(A(F32, {6, 4})), i, i});
  ds->dynamic_slice_sizes = {2, 3};
  EXPECT_EQ(Str(InferShape(*ds)), "f32[2,3]");
  ds->dynamic_slice_sizes = {2, 5};
  EXPECT_THAT(InferShape(*ds).status().message(),
              HasSubstr("dynamic slice size 5 of dim 1 exceeds"));
}

TEST_F(ShapeInferenceTest, DynamicSliceIndicesMustBeIntegerScalars) {
  auto ds = Make(Opcode::kDynamicSlice,
                 {P(A(F32, {6, 4})), P(A(S32, {})), P(A(F32, {}))});
  ds->dynamic_slice_sizes = {1, 1};
  EXPECT_THAT(InferShape(*ds).status().message(),
              HasSubstr("must be an integer scalar"));
}

TEST_F(ShapeInferenceTest, DynamicUpdateSliceKeepsOperandShape) {
  Instruction* i = P(A(U32, {}));
  EXPECT_EQ(
      Str(InferShape(*Make(Opcode::kDynamicUpdateSlice,
                           {P(A(F32, {6, 4})), P(A(F32, {2, 3})), i, i}))),
      "f32[6,4]");
  EXPECT_FALSE(InferShape(*Make(Opcode::kDynamicUpdateSlice,
                                {P(A(F32, {6, 4})), P(A(F32, {7, 3})), i, i}))
                   .ok());
}

TEST_F(ShapeInferenceTest, GatherEmbeddingLookup) {
  // table[ids]: f32[10,3] gathered with s32[4,1] -> f32[4,3].
  auto g = Make(Opcode::kGather, {P(A(F32, {10, 3})), P(A(S32, {4, 1}))});
  g->gather_dimension_numbers.offset_dims = {1};
  g->gather_dimension_numbers.collapsed_slice_dims = {0};
  g->gather_dimension_numbers.start_index_map = {0};
  g->gather_dimension_numbers.index_vector_dim = 1;
  g->gather_slice_sizes = {1, 3};
  EXPECT_EQ(Str(InferShape(*g)), "f32[4,3]");
}

TEST_F(ShapeInferenceTest, GatherAsJaxEmitsItWithoutCollapsedDims) {
  // From a real JAX module: offset_dims={1,2}, collapsed_slice_dims={},
  // start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}.
  auto g = Make(Opcode::kGather, {P(A(F32, {10, 3})), P(A(S32, {4, 1}))});
  g->gather_dimension_numbers.offset_dims = {1, 2};
  g->gather_dimension_numbers.start_index_map = {0};
  g->gather_dimension_numbers.index_vector_dim = 1;
  g->gather_slice_sizes = {1, 3};
  EXPECT_EQ(Str(InferShape(*g)), "f32[4,1,3]");
}

TEST_F(ShapeInferenceTest, GatherWithBatchingDims) {
  // operand f32[5,10,3], indices s32[5,7] (implicit index vector dim 2),
  // batching operand dim 0 with indices dim 0.
  auto g = Make(Opcode::kGather, {P(A(F32, {5, 10, 3})), P(A(S32, {5, 7}))});
  auto& d = g->gather_dimension_numbers;
  d.offset_dims = {2};
  d.collapsed_slice_dims = {1};
  d.start_index_map = {1};
  d.index_vector_dim = 2;
  d.operand_batching_dims = {0};
  d.start_indices_batching_dims = {0};
  g->gather_slice_sizes = {1, 1, 3};
  EXPECT_EQ(Str(InferShape(*g)), "f32[5,7,3]");
  d.start_indices_batching_dims = {1};
  EXPECT_FALSE(InferShape(*g).ok());
}

TEST_F(ShapeInferenceTest, GatherRejectsCollapsingWideSlices) {
  auto g = Make(Opcode::kGather, {P(A(F32, {10, 3})), P(A(S32, {4, 1}))});
  g->gather_dimension_numbers.offset_dims = {1};
  g->gather_dimension_numbers.collapsed_slice_dims = {0};
  g->gather_dimension_numbers.start_index_map = {0};
  g->gather_dimension_numbers.index_vector_dim = 1;
  g->gather_slice_sizes = {2, 3};
  EXPECT_THAT(InferShape(*g).status().message(),
              HasSubstr("must have slice size 0 or 1"));
}

TEST_F(ShapeInferenceTest, ScatterAddKeepsOperandShape) {
  auto s = Make(Opcode::kScatter,
                {P(A(F32, {10, 3})), P(A(S32, {4, 1})), P(A(F32, {4, 1, 3}))});
  auto& d = s->scatter_dimension_numbers;
  d.update_window_dims = {1, 2};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  s->called_computations = {Reducer({F32})};
  EXPECT_EQ(Str(InferShape(*s)), "f32[10,3]");
  s->called_computations = {Reducer({S32})};
  EXPECT_THAT(InferShape(*s).status().message(),
              HasSubstr("parameter 0 must be f32[] but is s32[]"));
}

TEST_F(ShapeInferenceTest, VariadicScatterGivesTuple) {
  Instruction* idx = P(A(S32, {4, 1}));
  auto s = Make(Opcode::kScatter, {P(A(F32, {10, 3})), P(A(S32, {10, 3})), idx,
                                   P(A(F32, {4, 3})), P(A(S32, {4, 3}))});
  auto& d = s->scatter_dimension_numbers;
  d.update_window_dims = {1};
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  s->called_computations = {Reducer({F32, S32})};
  EXPECT_EQ(Str(InferShape(*s)), "(f32[10,3], s32[10,3])");
}

TEST_F(ShapeInferenceTest, ScatterRejectsWindowLargerThanOperand) {
  auto s = Make(Opcode::kScatter,
                {P(A(F32, {10, 3})), P(A(S32, {4, 1})), P(A(F32, {4, 4}))});
  auto& d = s->scatter_dimension_numbers;
  d.update_window_dims = {1};
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  s->called_computations = {Reducer({F32})};
  EXPECT_THAT(InferShape(*s).status().message(),
              HasSubstr("updates window dim 1 has size 4 but input dim 1"));
}

// ---- Reductions --------------------------------------------------------

TEST_F(ShapeInferenceTest, ReduceRemovesDimensions) {
  auto r = Make(Opcode::kReduce, {P(A(F32, {2, 3, 4})), P(A(F32, {}))});
  r->dimensions = {0, 2};
  r->called_computations = {Reducer({F32})};
  EXPECT_EQ(Str(InferShape(*r)), "f32[3]");
}

TEST_F(ShapeInferenceTest, VariadicReduceForArgmaxGivesTuple) {
  auto r = Make(Opcode::kReduce, {P(A(F32, {5, 4})), P(A(S32, {5, 4})),
                                  P(A(F32, {})), P(A(S32, {}))});
  r->dimensions = {1};
  r->called_computations = {Reducer({F32, S32}, Opcode::kMaximum)};
  EXPECT_EQ(Str(InferShape(*r)), "(f32[5], s32[5])");
}

TEST_F(ShapeInferenceTest, ReduceRejectsReducerWithWrongArity) {
  auto r = Make(Opcode::kReduce, {P(A(F32, {5, 4})), P(A(F32, {}))});
  r->dimensions = {1};
  r->called_computations = {Comp({A(F32, {})}, A(F32, {}))};
  EXPECT_THAT(InferShape(*r).status().message(),
              HasSubstr("must take 2 scalar parameters but takes 1"));
}

TEST_F(ShapeInferenceTest, ReduceRejectsNonScalarInit) {
  auto r = Make(Opcode::kReduce, {P(A(F32, {5, 4})), P(A(F32, {4}))});
  r->dimensions = {0};
  r->called_computations = {Reducer({F32})};
  EXPECT_THAT(InferShape(*r).status().message(),
              HasSubstr("init value 0 must be a scalar"));
}

TEST_F(ShapeInferenceTest, ReduceWindowWithPaddingStrideAndBaseDilation) {
  auto r = Make(Opcode::kReduceWindow, {P(A(F32, {2, 8})), P(A(F32, {}))});
  WindowDimension batch;
  WindowDimension w;
  w.size = 3;
  w.stride = 2;
  w.padding_low = 1;
  w.padding_high = 1;
  r->window = {batch, w};
  r->called_computations = {Reducer({F32}, Opcode::kMaximum)};
  // (8 + 2 - 3) / 2 + 1 = 4.
  EXPECT_EQ(Str(InferShape(*r)), "f32[2,4]");
  r->window[1].base_dilation = 2;
  // Dilated base 15, padded 17: (17 - 3) / 2 + 1 = 8.
  EXPECT_EQ(Str(InferShape(*r)), "f32[2,8]");
  r->window.pop_back();
  EXPECT_THAT(InferShape(*r).status().message(),
              HasSubstr("window has 1 dimensions but the operand has rank 2"));
}

TEST_F(ShapeInferenceTest, SelectAndScatterChecksSourceAgainstWindow) {
  auto s = Make(Opcode::kSelectAndScatter,
                {P(A(F32, {4, 4})), P(A(F32, {2, 2})), P(A(F32, {}))});
  WindowDimension w;
  w.size = 2;
  w.stride = 2;
  s->window = {w, w};
  s->called_computations = {Comp({A(F32, {}), A(F32, {})}, A(PRED, {})),
                            Reducer({F32})};
  EXPECT_EQ(Str(InferShape(*s)), "f32[4,4]");
  s->operands[1] = P(A(F32, {3, 2}));
  EXPECT_THAT(InferShape(*s).status().message(),
              HasSubstr("must have the window output shape f32[2,2]"));
}

// ---- Contractions ------------------------------------------------------

TEST_F(ShapeInferenceTest, DotPutsBatchThenLhsThenRhsFreeDims) {
  auto dot = Make(Opcode::kDot, {P(A(F32, {8, 2, 64})), P(A(F32, {8, 64, 5}))});
  auto& d = dot->dot_dimension_numbers;
  d.lhs_batch_dims = {0};
  d.rhs_batch_dims = {0};
  d.lhs_contracting_dims = {2};
  d.rhs_contracting_dims = {1};
  EXPECT_EQ(Str(InferShape(*dot)), "f32[8,2,5]");
}

TEST_F(ShapeInferenceTest, DotReportsContractingSizeMismatch) {
  auto dot = Make(Opcode::kDot, {P(A(F32, {4, 64})), P(A(F32, {32, 5}))});
  dot->name = "dot.3";
  dot->line = 12;
  dot->dot_dimension_numbers.lhs_contracting_dims = {1};
  dot->dot_dimension_numbers.rhs_contracting_dims = {0};
  EXPECT_EQ(InferShape(*dot).status().message(),
            "instruction 'dot.3' (line 12): lhs contracting dim 1 has size 64 "
            "but rhs contracting dim 0 has size 32");
}

TEST_F(ShapeInferenceTest, DotKeepsDeclaredWiderResultType) {
  auto dot = Make(
      Opcode::kDot,
      {P(A(PrimitiveType::kBF16, {4, 8})), P(A(PrimitiveType::kBF16, {8, 2}))},
      A(F32, {4, 2}));
  dot->dot_dimension_numbers.lhs_contracting_dims = {1};
  dot->dot_dimension_numbers.rhs_contracting_dims = {0};
  EXPECT_EQ(Str(InferShape(*dot)), "f32[4,2]");
}

TEST_F(ShapeInferenceTest, DotRejectsRepeatedDims) {
  auto dot = Make(Opcode::kDot, {P(A(F32, {4, 4})), P(A(F32, {4, 4}))});
  dot->dot_dimension_numbers.lhs_batch_dims = {0};
  dot->dot_dimension_numbers.rhs_batch_dims = {0};
  dot->dot_dimension_numbers.lhs_contracting_dims = {0};
  dot->dot_dimension_numbers.rhs_contracting_dims = {1};
  EXPECT_THAT(InferShape(*dot).status().message(), HasSubstr("repeats 0"));
}

// b01f_01io->b01f, as JAX writes NHWC/HWIO convolutions.
ConvolutionDimensionNumbers Nhwc() {
  ConvolutionDimensionNumbers c;
  c.input_batch_dimension = 0;
  c.input_feature_dimension = 3;
  c.input_spatial_dimensions = {1, 2};
  c.kernel_input_feature_dimension = 2;
  c.kernel_output_feature_dimension = 3;
  c.kernel_spatial_dimensions = {0, 1};
  c.output_batch_dimension = 0;
  c.output_feature_dimension = 3;
  c.output_spatial_dimensions = {1, 2};
  return c;
}

TEST_F(ShapeInferenceTest, ConvolutionWithStrideDilationAndPadding) {
  // From JAX: f32[2,9,9,4] * f32[3,3,4,4], window={size=3x3 stride=2x1
  // pad=1_1x2_2 rhs_dilate=1x2} -> f32[2,5,9,4].
  auto conv = Make(Opcode::kConvolution,
                   {P(A(F32, {2, 9, 9, 4})), P(A(F32, {3, 3, 4, 4}))});
  conv->convolution_dimension_numbers = Nhwc();
  WindowDimension h, w;
  h.size = 3;
  h.stride = 2;
  h.padding_low = h.padding_high = 1;
  w.size = 3;
  w.padding_low = w.padding_high = 2;
  w.window_dilation = 2;
  conv->window = {h, w};
  EXPECT_EQ(Str(InferShape(*conv)), "f32[2,5,9,4]");
}

TEST_F(ShapeInferenceTest, ConvolutionWithFeatureGroups) {
  auto conv = Make(Opcode::kConvolution,
                   {P(A(F32, {2, 5, 9, 4})), P(A(F32, {3, 3, 2, 4}))});
  conv->convolution_dimension_numbers = Nhwc();
  WindowDimension w;
  w.size = 3;
  conv->window = {w, w};
  conv->feature_group_count = 2;
  EXPECT_EQ(Str(InferShape(*conv)), "f32[2,3,7,4]");
  conv->feature_group_count = 1;
  EXPECT_THAT(InferShape(*conv).status().message(),
              HasSubstr("input feature dim has size 4 but kernel input "
                        "feature dim has size 2"));
}

TEST_F(ShapeInferenceTest, ConvolutionWithBatchGroupsDividesBatch) {
  // A weight-gradient convolution: batch_group_count splits the batch.
  auto conv = Make(Opcode::kConvolution,
                   {P(A(F32, {4, 6, 6, 1})), P(A(F32, {3, 3, 1, 4}))});
  conv->convolution_dimension_numbers = Nhwc();
  WindowDimension w;
  w.size = 3;
  conv->window = {w, w};
  conv->batch_group_count = 4;
  EXPECT_EQ(Str(InferShape(*conv)), "f32[1,4,4,4]");
}

TEST_F(ShapeInferenceTest, ConvolutionRejectsWindowKernelMismatch) {
  auto conv = Make(Opcode::kConvolution,
                   {P(A(F32, {2, 9, 9, 4})), P(A(F32, {3, 3, 4, 4}))});
  conv->convolution_dimension_numbers = Nhwc();
  WindowDimension w;
  w.size = 2;
  conv->window = {w, w};
  EXPECT_THAT(InferShape(*conv).status().message(),
              HasSubstr("window size 2 of spatial dim 0 differs from the "
                        "kernel's size 3"));
}

// ---- Sort and random ---------------------------------------------------

TEST_F(ShapeInferenceTest, SortOfTwoOperandsGivesTuple) {
  auto sort = Make(Opcode::kSort, {P(A(F32, {5, 4})), P(A(S32, {5, 4}))});
  sort->dimensions = {1};
  sort->called_computations = {
      Comp({A(F32, {}), A(F32, {}), A(S32, {}), A(S32, {})}, A(PRED, {}))};
  EXPECT_EQ(Str(InferShape(*sort)), "(f32[5,4], s32[5,4])");
  sort->dimensions = {2};
  EXPECT_FALSE(InferShape(*sort).ok());
}

TEST_F(ShapeInferenceTest, SortComparatorMustTakePairsOfScalars) {
  auto sort = Make(Opcode::kSort, {P(A(F32, {5}))});
  sort->dimensions = {0};
  sort->called_computations = {Comp({A(F32, {}), A(S32, {})}, A(PRED, {}))};
  EXPECT_THAT(InferShape(*sort).status().message(),
              HasSubstr("parameter 1 is s32[] but is given f32[]"));
}

TEST_F(ShapeInferenceTest, RngBitGeneratorChecksDeclaredStateAndBits) {
  Shape state = A(U64, {2});
  auto rng = Make(Opcode::kRngBitGenerator, {P(state)},
                  Shape::Tuple({state, A(U32, {3, 4})}));
  EXPECT_EQ(Str(InferShape(*rng)), "(u64[2], u32[3,4])");
  rng->shape = Shape::Tuple({A(U64, {3}), A(U32, {3, 4})});
  EXPECT_FALSE(InferShape(*rng).ok());
  rng->shape = Shape::Tuple({state, A(F32, {3, 4})});
  EXPECT_FALSE(InferShape(*rng).ok());
}

// ---- Collectives -------------------------------------------------------

TEST_F(ShapeInferenceTest, AllReduceKeepsShapeAndTupleFormGivesTuple) {
  auto ar = Make(Opcode::kAllReduce, {P(A(F32, {8, 8}))});
  ar->called_computations = {Reducer({F32})};
  EXPECT_EQ(Str(InferShape(*ar)), "f32[8,8]");
  ar->operands.push_back(P(A(S32, {3})));
  EXPECT_EQ(Str(InferShape(*ar)), "(f32[8,8], s32[3])");
  ar->called_computations = {Comp({A(F32, {})}, A(F32, {}))};
  EXPECT_FALSE(InferShape(*ar).ok());
}

TEST_F(ShapeInferenceTest, AllGatherMultipliesByGroupSize) {
  auto ag = Make(Opcode::kAllGather, {P(A(F32, {8, 8}))});
  ag->dimensions = {0};
  ag->channel_id = 1;
  ag->use_global_device_ids = true;
  ag->replica_groups.groups = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  EXPECT_EQ(Str(InferShape(*ag)), "f32[32,8]");
}

TEST_F(ShapeInferenceTest, AllGatherWithEmptyGroupsUsesDeviceCounts) {
  auto ag = Make(Opcode::kAllGather, {P(A(F32, {2, 8}))}, A(F32, {2, 24}));
  ag->dimensions = {1};
  ag->channel_id = 1;
  DeviceCounts counts{/*num_partitions=*/4, /*replica_count=*/1};
  // kCrossReplicaAndPartition: the group is every partition.
  EXPECT_EQ(Str(InferShape(*ag, counts)), "f32[2,32]");
  // Unknown counts: the declared multiple is accepted.
  EXPECT_EQ(Str(InferShape(*ag)), "f32[2,24]");
  ag->shape = A(F32, {2, 20});
  EXPECT_FALSE(InferShape(*ag).ok());
}

TEST_F(ShapeInferenceTest, ReduceScatterDividesByGroupSize) {
  auto rs = Make(Opcode::kReduceScatter, {P(A(F32, {8, 8}))});
  rs->dimensions = {1};
  rs->channel_id = 1;
  rs->use_global_device_ids = true;
  rs->replica_groups.groups = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  rs->called_computations = {Reducer({F32})};
  EXPECT_EQ(Str(InferShape(*rs)), "f32[8,2]");
  rs->operands[0] = P(A(F32, {8, 6}));
  EXPECT_THAT(InferShape(*rs).status().message(),
              HasSubstr("not divisible by the group size 4"));
}

TEST_F(ShapeInferenceTest, AllToAllArrayAndTupleForms) {
  auto a2a = Make(Opcode::kAllToAll, {P(A(F32, {8, 4}))});
  a2a->channel_id = 1;
  a2a->replica_groups.groups = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  a2a->dimensions = {0};
  EXPECT_EQ(Str(InferShape(*a2a)), "f32[8,4]");
  a2a->dimensions = {1};
  EXPECT_EQ(Str(InferShape(*a2a)), "f32[8,4]");
  a2a->operands[0] = P(A(F32, {8, 6}));
  EXPECT_FALSE(InferShape(*a2a).ok());

  Instruction* part = P(A(F32, {2, 8}));
  auto tuple = Make(Opcode::kAllToAll, {part, part, part, part});
  tuple->channel_id = 1;
  tuple->replica_groups.groups = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  EXPECT_EQ(Str(InferShape(*tuple)),
            "(f32[2,8], f32[2,8], f32[2,8], f32[2,8])");
  tuple->operands.pop_back();
  EXPECT_THAT(InferShape(*tuple).status().message(),
              HasSubstr("one operand per member"));
}

TEST_F(ShapeInferenceTest, CollectivePermuteKeepsShape) {
  auto cp = Make(Opcode::kCollectivePermute, {P(A(F32, {8, 8}))});
  cp->source_target_pairs = {{0, 1}, {1, 0}};
  EXPECT_EQ(Str(InferShape(*cp)), "f32[8,8]");
}

TEST_F(ShapeInferenceTest, GroupSizeFromIotaGroups) {
  auto ag = Make(Opcode::kAllGather, {});
  ag->channel_id = 1;
  ag->use_global_device_ids = true;
  ag->replica_groups.iota = ReplicaGroups::Iota{2, 4, {8}, {}};
  EXPECT_EQ(CollectiveGroupSize(*ag, nullptr), 4);
}

TEST_F(ShapeInferenceTest, WindowOutputSizeMatchesXlaFormula) {
  WindowDimension w;
  w.size = 3;
  w.stride = 2;
  EXPECT_EQ(WindowOutputSize(7, w), 3);
  EXPECT_EQ(WindowOutputSize(2, w), 0);
  w.stride = 0;
  EXPECT_EQ(WindowOutputSize(7, w), -1);
}

TEST_F(ShapeInferenceTest, NegativeDeclaredDimsAreRejected) {
  EXPECT_THAT(InferShape(*P(A(F32, {-1}))).status().message(),
              HasSubstr("negative dimension"));
}

}  // namespace shape_inference_test
}  // namespace causeway::hlo
