#include "figure2_lib.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"
#include "causeway/hlo/builder.h"
#include "causeway/hlo/printer.h"

namespace causeway::examples {
namespace {

using client::Array;
using client::Executable;
using client::ProgramTrace;
using client::Session;
using client::Sharding;
using client::Slice;
using hlo::PrimitiveType;
using hlo::Shape;

std::string Join(const std::vector<float>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

absl::StatusOr<std::vector<float>> ToVector(const Array& array) {
  CW_ASSIGN_OR_RETURN(hlo::Literal value, array.ToHost().Await());
  std::span<const float> data = value.data<float>();
  return std::vector<float>(data.begin(), data.end());
}

}  // namespace

std::string Figure2Result::ToString() const {
  return absl::StrCat("(", Join(first), ", ", Join(second), ")");
}

absl::StatusOr<std::string> ElementwiseProgram(const std::string& name,
                                               const std::string& op,
                                               float constant) {
  constexpr int64_t kDevices = 2;
  hlo::ModuleBuilder module(name);
  module.set_num_partitions(kDevices);
  hlo::ComputationBuilder main = module.NewEntry("main");
  // Each device holds one element of the f32[2] array.
  const Shape shard(PrimitiveType::kF32, {1});
  hlo::XlaOp x = main.Parameter(shard, "x");
  hlo::XlaOp c = main.Broadcast(
      main.ConstantScalar(PrimitiveType::kF32, constant), {1}, {});
  hlo::Opcode opcode = op == "multiply" ? hlo::Opcode::kMultiply
                       : op == "add"    ? hlo::Opcode::kAdd
                                        : hlo::Opcode::kDivide;
  main.SetRoot(main.Binary(opcode, x, c));
  CW_ASSIGN_OR_RETURN(std::unique_ptr<hlo::Module> built,
                      std::move(module).Build());
  // The array is split over the two devices, in and out.
  CW_ASSIGN_OR_RETURN(Sharding split, Sharding::TiledByDims({kDevices}));
  hlo::Computation* entry = built->mutable_entry();
  for (hlo::Instruction* parameter : entry->parameters()) {
    parameter->sharding = split.hlo();
  }
  entry->mutable_root()->sharding = split.hlo();
  return hlo::PrintModule(*built);
}

absl::StatusOr<Figure2Result> RunFigure2(client::Client& client,
                                         std::vector<float> v) {
  CW_ASSIGN_OR_RETURN(Session session,
                      client.OpenSession({.name = "figure2"}));
  // Three virtual slices of two devices; the runtime picks the devices.
  CW_ASSIGN_OR_RETURN(Slice slice_a, session.CreateSlice(2));
  CW_ASSIGN_OR_RETURN(Slice slice_b, session.CreateSlice(2));
  CW_ASSIGN_OR_RETURN(Slice slice_c, session.CreateSlice(2));

  CW_ASSIGN_OR_RETURN(std::string a_text, ElementwiseProgram("a", "multiply", 2));
  CW_ASSIGN_OR_RETURN(std::string b_text, ElementwiseProgram("b", "add", 1));
  CW_ASSIGN_OR_RETURN(std::string c_text, ElementwiseProgram("c", "divide", 2));
  CW_ASSIGN_OR_RETURN(Executable a, session.Compile(a_text, slice_a));
  CW_ASSIGN_OR_RETURN(Executable b, session.Compile(b_text, slice_b));
  CW_ASSIGN_OR_RETURN(Executable c, session.Compile(c_text, slice_c));

  hlo::Literal host(Shape(PrimitiveType::kF32, {2}));
  if (v.size() != 2) {
    return absl::InvalidArgumentError("figure 2 takes a vector of 2 floats");
  }
  host.mutable_data<float>()[0] = v[0];
  host.mutable_data<float>()[1] = v[1];
  CW_ASSIGN_OR_RETURN(Array input,
                      session.FromHost(host, slice_a, a.parameter_shardings()[0]));

  // f(v) = (b(a(v)), a(c(a(v)))), as one graph. Arrays cross slices where
  // a program on another slice consumes them: the trace inserts the copies.
  ProgramTrace trace(session);
  CW_ASSIGN_OR_RETURN(std::vector<Array> av, trace.Execute(a, {input}));
  CW_ASSIGN_OR_RETURN(std::vector<Array> bav, trace.Execute(b, {av[0]}));
  CW_ASSIGN_OR_RETURN(std::vector<Array> cav, trace.Execute(c, {av[0]}));
  CW_ASSIGN_OR_RETURN(std::vector<Array> acav, trace.Execute(a, {cav[0]}));
  CW_RETURN_IF_ERROR(trace.Submit());

  Figure2Result result;
  CW_ASSIGN_OR_RETURN(result.first, ToVector(bav[0]));
  CW_ASSIGN_OR_RETURN(result.second, ToVector(acav[0]));
  return result;
}

}  // namespace causeway::examples
