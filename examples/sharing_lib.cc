#include "sharing_lib.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "causeway/base/status.h"
#include "figure2_lib.h"

namespace causeway::examples {
namespace {

using client::Array;
using client::Executable;
using client::Session;
using client::Slice;

std::string Devices(const transport::SliceInfo& info) {
  std::vector<int64_t> ids;
  for (DeviceId d : info.devices) ids.push_back(d.value());
  return absl::StrCat("[", absl::StrJoin(ids, ", "), "]");
}

class Timeline {
 public:
  void Add(const std::string& session, std::string what) {
    events_.push_back({absl::Now() - start_, session, std::move(what)});
  }
  std::vector<TimelineEvent> Take() { return std::move(events_); }

 private:
  const absl::Time start_ = absl::Now();
  std::vector<TimelineEvent> events_;
};

// One tenant: a session with a 2-device slice on island 0 and a program.
struct Tenant {
  std::string name;
  Session session;
  Slice slice;
  Executable program;
};

absl::StatusOr<Tenant> Arrive(client::Client& client, const std::string& name,
                              Timeline& timeline) {
  CW_ASSIGN_OR_RETURN(Session session, client.OpenSession({.name = name}));
  client::SliceOptions options;
  options.num_devices = 2;
  options.island = IslandId(0);
  CW_ASSIGN_OR_RETURN(Slice slice, session.CreateSlice(std::move(options)));
  timeline.Add(name, "asks for 2 devices of island 0");
  // Compiling does not wait for the devices.
  CW_ASSIGN_OR_RETURN(std::string text,
                      ElementwiseProgram("double_" + name, "multiply", 2));
  CW_ASSIGN_OR_RETURN(Executable program, session.Compile(text, slice));
  timeline.Add(name, "compiled its program");
  return Tenant{name, std::move(session), std::move(slice), std::move(program)};
}

// Submits `steps` chained executions of the tenant's program; returns the
// last output (not waited on).
absl::StatusOr<Array> Work(Tenant& tenant, float start, int steps) {
  hlo::Literal host(hlo::Shape(hlo::PrimitiveType::kF32, {2}));
  host.mutable_data<float>()[0] = start;
  host.mutable_data<float>()[1] = start + 1;
  CW_ASSIGN_OR_RETURN(Array x,
                      tenant.session.FromHost(
                          host, tenant.slice,
                          tenant.program.parameter_shardings()[0]));
  for (int i = 0; i < steps; ++i) {
    CW_ASSIGN_OR_RETURN(std::vector<Array> y, tenant.program.Execute({x}));
    x = y[0];
  }
  return x;
}

absl::StatusOr<float> Sum(const Array& array) {
  CW_ASSIGN_OR_RETURN(hlo::Literal value, array.ToHost().Await());
  float sum = 0;
  for (float v : value.data<float>()) sum += v;
  return sum;
}

}  // namespace

std::string SharingResult::ToString() const {
  std::string out;
  for (const TimelineEvent& event : timeline) {
    absl::StrAppend(&out, absl::StrFormat("%8.1f ms  %s  %s\n",
                                          absl::ToDoubleMilliseconds(event.at),
                                          event.session, event.what));
  }
  return out;
}

int SharingResult::Index(const std::string& session,
                         const std::string& what_prefix) const {
  for (size_t i = 0; i < timeline.size(); ++i) {
    if (timeline[i].session == session &&
        timeline[i].what.rfind(what_prefix, 0) == 0) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

absl::StatusOr<SharingResult> RunSharing(client::Client& client) {
  Timeline timeline;
  SharingResult result;

  CW_ASSIGN_OR_RETURN(Tenant a, Arrive(client, "A", timeline));
  CW_ASSIGN_OR_RETURN(transport::SliceInfo a_info, a.slice.Ready().Await());
  timeline.Add("A", absl::StrCat("granted devices ", Devices(a_info)));
  CW_ASSIGN_OR_RETURN(Tenant b, Arrive(client, "B", timeline));
  CW_ASSIGN_OR_RETURN(transport::SliceInfo b_info, b.slice.Ready().Await());
  timeline.Add("B", absl::StrCat("granted devices ", Devices(b_info)));

  // The island is full: C's request waits in the queue. Its work is
  // submitted anyway and starts when the devices come.
  CW_ASSIGN_OR_RETURN(Tenant c, Arrive(client, "C", timeline));
  Future<transport::SliceInfo> c_ready = c.slice.Ready();
  if (!c_ready.IsReady()) timeline.Add("C", "waits in the queue");
  CW_ASSIGN_OR_RETURN(Array c_out, Work(c, 100, 3));
  timeline.Add("C", "submitted 3 steps");

  CW_ASSIGN_OR_RETURN(Array a_out, Work(a, 1, 3));
  CW_ASSIGN_OR_RETURN(Array b_out, Work(b, 10, 3));
  CW_ASSIGN_OR_RETURN(float a_sum, Sum(a_out));
  timeline.Add("A", absl::StrCat("finished: sum ", a_sum));
  if (c_out.Ready().IsReady()) {
    return absl::InternalError("C ran before any devices were free");
  }
  CW_RETURN_IF_ERROR(a.session.Close());
  timeline.Add("A", "closed its session (devices back to the pool)");

  CW_ASSIGN_OR_RETURN(transport::SliceInfo c_info, c_ready.Await());
  timeline.Add("C", absl::StrCat("granted devices ", Devices(c_info)));
  CW_ASSIGN_OR_RETURN(float c_sum, Sum(c_out));
  timeline.Add("C", absl::StrCat("finished: sum ", c_sum));
  CW_ASSIGN_OR_RETURN(float b_sum, Sum(b_out));
  timeline.Add("B", absl::StrCat("finished: sum ", b_sum));
  CW_RETURN_IF_ERROR(b.session.Close());
  timeline.Add("B", "closed its session");
  CW_RETURN_IF_ERROR(c.session.Close());
  timeline.Add("C", "closed its session");

  result.results = {a_sum, b_sum, c_sum};
  result.timeline = timeline.Take();
  return result;
}

}  // namespace causeway::examples
