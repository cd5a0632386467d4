// causeway._causeway: the C++ client API (src/causeway/client/, docs/
// client.md) as Python types. The public Python API lives in
// python/causeway/*.py and is built on these; this layer stays thin and
// mirrors the C++ names.
//
// Lifetimes: every object holds the Backend it came from, so the embedded
// cluster (whose channels must not outlive it) lives until the last array,
// slice, executable and session that uses it is gone, whatever order Python
// drops them in.
//
// Threads: every call that waits (compiling, opening and closing sessions,
// array readiness and fetches, slice grants, status, traces, stopping a
// host) releases the GIL while it waits (convert.h Wait). Nothing else
// blocks. No runtime thread ever calls into Python.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "causeway/client/local_client.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/trace/trace_recorder.h"
#include "convert.h"

namespace causeway::python {
namespace {

using namespace nb::literals;

// What a client talks to: an embedded cluster (`cluster` set) or a head in
// another process (`cluster` null). Destroys the client before the cluster.
struct Backend {
  std::unique_ptr<cluster::LocalCluster> cluster;
  std::unique_ptr<client::Client> client;
  ~Backend() {
    client.reset();
    cluster.reset();
  }
};
using BackendRef = std::shared_ptr<Backend>;

struct PyClient {
  BackendRef backend;
};

struct PySession {
  BackendRef backend;
  client::Session session;
};

struct PySlice {
  BackendRef backend;
  client::Slice slice;
};

struct PyExecutable {
  BackendRef backend;
  client::Executable executable;
};

struct PyArray {
  PyArray(BackendRef backend, client::Array array)
      : backend(std::move(backend)), array(std::move(array)) {}

  BackendRef backend;
  client::Array array;
  // The last readiness answer asked for (Array::Ready() asks the head
  // again on every call): is_ready polls it, so that polling costs one
  // request, and wait() replaces it with the answer it waited for.
  // Touched with the GIL held only.
  mutable std::optional<Future<>> ready;
};

struct PySharding {
  client::Sharding sharding;
};

struct PyTrace {
  BackendRef backend;
  std::unique_ptr<client::ProgramTrace> trace;
};

nb::tuple SliceInfoTuple(const transport::SliceInfo& info) {
  std::vector<int64_t> devices;
  for (DeviceId d : info.devices) devices.push_back(d.value());
  return nb::make_tuple(info.island.value(), devices, info.mesh_shape,
                        info.generation);
}

std::vector<client::Array> ArraysOf(const nb::sequence& args) {
  std::vector<client::Array> arrays;
  arrays.reserve(nb::len(args));
  for (nb::handle h : args) arrays.push_back(nb::cast<PyArray&>(h).array);
  return arrays;
}

nb::list WrapArrays(const BackendRef& backend,
                    std::vector<client::Array> arrays) {
  nb::list result;
  for (client::Array& a : arrays) {
    result.append(nb::cast(PyArray{backend, std::move(a)}));
  }
  return result;
}

std::vector<nb::tuple> ShapeTuples(const std::vector<hlo::Shape>& shapes) {
  std::vector<nb::tuple> result;
  for (const hlo::Shape& s : shapes) {
    result.push_back(nb::make_tuple(
        std::string(hlo::PrimitiveTypeName(s.type())), DimsTuple(s)));
  }
  return result;
}

std::vector<PySharding> WrapShardings(
    const std::vector<client::Sharding>& shardings) {
  std::vector<PySharding> result;
  for (const client::Sharding& s : shardings) result.push_back({s});
  return result;
}

PyClient ConnectEmbedded(int64_t islands, int64_t hosts_per_island,
                         int64_t devices_per_host, int64_t memory_per_device,
                         double heartbeat_interval_s,
                         double heartbeat_timeout_s,
                         double collective_timeout_s, bool record_trace) {
  cluster::LocalClusterOptions options{
      .islands = islands,
      .hosts_per_island = hosts_per_island,
      .devices_per_host = devices_per_host,
      .memory_per_device = memory_per_device,
      .heartbeat_interval = absl::Seconds(heartbeat_interval_s),
      .heartbeat_timeout = absl::Seconds(heartbeat_timeout_s),
      .collective_timeout = absl::Seconds(collective_timeout_s),
  };
  if (record_trace) {
    options.event_sink = std::make_shared<trace::TraceRecorder>();
  }
  auto backend = std::make_shared<Backend>();
  {
    nb::gil_scoped_release release;
    backend->cluster = Unwrap(cluster::LocalCluster::Create(options));
  }
  backend->client = client::ConnectLocal(*backend->cluster);
  return PyClient{std::move(backend)};
}

PyClient ConnectRemote(const std::string& address, const std::string& token,
                       const std::string& token_file,
                       const std::string& tls_ca_file,
                       const std::string& tls_cert_file,
                       const std::string& tls_key_file,
                       double connect_timeout_s, bool insecure) {
  client::ConnectOptions options{
      .token = token,
      .token_file = token_file,
      .tls_ca_file = tls_ca_file,
      .tls_cert_file = tls_cert_file,
      .tls_key_file = tls_key_file,
      .connect_timeout = absl::Seconds(connect_timeout_s),
      .insecure = insecure,
  };
  auto backend = std::make_shared<Backend>();
  absl::StatusOr<std::unique_ptr<client::Client>> connected;
  {
    // Dialling and the head's first answer take a round trip or up to the
    // timeout; other Python threads run meanwhile.
    nb::gil_scoped_release release;
    connected = client::Connect(address, std::move(options));
  }
  backend->client = Unwrap(std::move(connected));
  return PyClient{std::move(backend)};
}

cluster::LocalCluster& EmbeddedCluster(const PyClient& c) {
  if (c.backend->cluster == nullptr) {
    throw StatusError(absl::FailedPreconditionError(
        "only an embedded cluster (causeway.connect() without an address) "
        "can do this"));
  }
  return *c.backend->cluster;
}

void BindClient(nb::module_& m) {
  m.def("connect_embedded", &ConnectEmbedded, "islands"_a,
        "hosts_per_island"_a, "devices_per_host"_a, "memory_per_device"_a,
        "heartbeat_interval_s"_a, "heartbeat_timeout_s"_a,
        "collective_timeout_s"_a, "record_trace"_a,
        "Starts a LocalCluster in this process and returns a client of it.");
  m.def("connect_remote", &ConnectRemote, "address"_a, "token"_a,
        "token_file"_a, "tls_ca_file"_a, "tls_cert_file"_a, "tls_key_file"_a,
        "connect_timeout_s"_a, "insecure"_a,
        "Dials the head at HOST:PORT (client::Connect) and returns a client "
        "of it; empty strings mean not given.");

  nb::class_<PyClient>(m, "Client")
      .def(
          "open_session",
          [](PyClient& c, const std::string& name, double weight,
             int priority) {
            client::SessionOptions options{
                .name = name, .weight = weight, .priority = priority};
            absl::StatusOr<client::Session> session = [&] {
              nb::gil_scoped_release release;
              return c.backend->client->OpenSession(options);
            }();
            return PySession{c.backend, Unwrap(std::move(session))};
          },
          "name"_a, "weight"_a = 1.0, "priority"_a = 0)
      .def(
          "devices",
          [](const PyClient& c) {
            // (id, host, island, index_on_host, kind, memory_bytes)
            std::vector<nb::tuple> devices;
            for (const transport::DeviceInfo& d : c.backend->client->devices()) {
              devices.push_back(nb::make_tuple(
                  d.id.value(), d.host.value(), d.island.value(),
                  d.index_on_host, d.kind, d.memory_bytes));
            }
            return devices;
          },
          "The cluster's devices: (id, host, island, index_on_host, kind, "
          "memory_bytes).")
      .def_prop_ro("num_islands",
                   [](const PyClient& c) {
                     return c.backend->client->num_islands();
                   })
      .def_prop_ro("embedded",
                   [](const PyClient& c) {
                     return c.backend->cluster != nullptr;
                   })
      .def(
          "stop_host",
          [](const PyClient& c, int64_t host) {
            cluster::LocalCluster& cluster = EmbeddedCluster(c);
            if (!cluster.topology()->HasHost(HostId(host))) {
              throw StatusError(absl::InvalidArgumentError(
                  absl::StrCat("no host ", host, " in the cluster (",
                               cluster.topology()->num_hosts(), " hosts)")));
            }
            absl::Status status;
            {
              nb::gil_scoped_release release;
              status = cluster.StopHost(HostId(host));
            }
            ThrowIfError(status);
          },
          "host"_a,
          "Stops a host of the embedded cluster as a crash would; returns "
          "once the head has declared it dead.");
}

void BindSession(nb::module_& m) {
  nb::class_<PySession>(m, "Session")
      .def_prop_ro("id",
                   [](const PySession& s) { return s.session.id().value(); })
      .def_prop_ro("name",
                   [](const PySession& s) { return s.session.name(); })
      .def_prop_ro("closed",
                   [](const PySession& s) { return s.session.closed(); })
      .def(
          "create_slice",
          [](PySession& s, int64_t num_devices, std::vector<int64_t> mesh_shape,
             std::vector<std::string> axis_names, std::optional<int64_t> island,
             std::optional<int> priority, bool allow_smaller, bool shared) {
            client::SliceOptions options{
                .num_devices = num_devices,
                .mesh_shape = std::move(mesh_shape),
                .axis_names = std::move(axis_names),
                .island = std::nullopt,
                .priority = priority,
                .allow_smaller = allow_smaller,
                .shared = shared,
            };
            if (island.has_value()) options.island = IslandId(*island);
            return PySlice{s.backend,
                           Unwrap(s.session.CreateSlice(std::move(options)))};
          },
          "num_devices"_a, "mesh_shape"_a, "axis_names"_a,
          "island"_a = nb::none(), "priority"_a = nb::none(),
          "allow_smaller"_a = false, "shared"_a = false)
      .def(
          "compile",
          [](PySession& s, const std::string& hlo_text, const PySlice& slice) {
            absl::StatusOr<client::Executable> executable = [&] {
              nb::gil_scoped_release release;
              return s.session.Compile(hlo_text, slice.slice);
            }();
            return PyExecutable{s.backend, Unwrap(std::move(executable))};
          },
          "hlo_text"_a, "slice"_a,
          "Compiles HLO text for the slice (waits for the head to parse and "
          "verify it).")
      .def(
          "from_host",
          [](PySession& s, const HostBytes& bytes, const std::string& dtype,
             const std::vector<int64_t>& dims, const PySlice& slice,
             const PySharding& sharding) {
            hlo::Literal value = LiteralFromBytes(MakeShape(dtype, dims), bytes);
            return PyArray{s.backend, Unwrap(s.session.FromHost(
                                          value, slice.slice, sharding.sharding))};
          },
          "data"_a, "dtype"_a, "dims"_a, "slice"_a, "sharding"_a,
          "An array on the slice holding the host bytes (uploaded in the "
          "background).")
      .def(
          "copy",
          [](PySession& s, const PyArray& array, const PySlice& slice,
             const PySharding& sharding) {
            return PyArray{s.backend, Unwrap(s.session.Copy(
                                          array.array, slice.slice,
                                          sharding.sharding))};
          },
          "array"_a, "slice"_a, "sharding"_a)
      .def(
          "status",
          [](PySession& s, std::optional<double> timeout_s) {
            Future<transport::StatusReport> report = s.session.Status();
            return Unwrap(Wait(report, timeout_s, "status")).text;
          },
          "timeout_s"_a = nb::none())
      .def(
          "trace",
          [](PySession& s, std::optional<double> timeout_s) {
            Future<std::string> trace = s.session.Trace();
            return Unwrap(Wait(trace, timeout_s, "trace"));
          },
          "timeout_s"_a = nb::none(),
          "Chrome trace-event JSON of recent work (opens in Perfetto).")
      .def("close", [](PySession& s) {
        absl::Status status;
        {
          nb::gil_scoped_release release;
          status = s.session.Close();
        }
        ThrowIfError(status);
      });
}

void BindSlice(nb::module_& m) {
  nb::class_<PySlice>(m, "Slice")
      .def_prop_ro("handle",
                   [](const PySlice& s) { return s.slice.handle().value(); })
      .def_prop_ro("num_devices",
                   [](const PySlice& s) { return s.slice.num_devices(); })
      .def_prop_ro("mesh_shape",
                   [](const PySlice& s) { return s.slice.mesh().shape(); })
      .def_prop_ro("axis_names",
                   [](const PySlice& s) { return s.slice.mesh().axis_names(); })
      .def_prop_ro("requested_island",
                   [](const PySlice& s) -> std::optional<int64_t> {
                     std::optional<IslandId> island =
                         s.slice.requested_island();
                     if (!island.has_value()) return std::nullopt;
                     return island->value();
                   })
      .def_prop_ro("granted",
                   [](const PySlice& s) { return s.slice.Ready().IsReady(); })
      .def(
          "info",
          [](const PySlice& s, std::optional<double> timeout_s) {
            Future<transport::SliceInfo> info = s.slice.Info();
            return SliceInfoTuple(Unwrap(Wait(info, timeout_s, "slice")));
          },
          "timeout_s"_a = nb::none(),
          "Waits for the grant; (island, physical device ids, mesh shape, "
          "generation) of the current mapping.")
      .def(
          "release",
          [](const PySlice& s, std::optional<double> timeout_s) {
            Future<> released = s.slice.Release();
            ThrowIfError(Wait(released, timeout_s, "slice release"));
          },
          "timeout_s"_a = nb::none())
      .def("__repr__", [](const PySlice& s) { return s.slice.ToString(); });
}

void BindSharding(nb::module_& m) {
  nb::class_<PySharding>(m, "Sharding")
      .def_static(
          "parse",
          [](const std::string& text) {
            return PySharding{Unwrap(client::Sharding::Parse(text))};
          },
          "text"_a, "XLA's text: {replicated}, {devices=[2,1]<=[2]}, ...")
      .def_prop_ro("is_replicated",
                   [](const PySharding& s) { return s.sharding.IsReplicated(); })
      .def(
          "validate",
          [](const PySharding& s, const std::string& dtype,
             const std::vector<int64_t>& dims, int64_t num_devices) {
            ThrowIfError(
                s.sharding.Validate(MakeShape(dtype, dims), num_devices));
          },
          "dtype"_a, "dims"_a, "num_devices"_a)
      .def(
          "shard_dims",
          [](const PySharding& s, const std::string& dtype,
             const std::vector<int64_t>& dims, int64_t num_devices) {
            return DimsTuple(Unwrap(
                s.sharding.ShardShape(MakeShape(dtype, dims), num_devices)));
          },
          "dtype"_a, "dims"_a, "num_devices"_a)
      .def("__str__", [](const PySharding& s) { return s.sharding.ToString(); })
      .def("__repr__",
           [](const PySharding& s) { return s.sharding.ToString(); });
}

void BindExecutable(nb::module_& m) {
  nb::class_<PyExecutable>(m, "Executable")
      .def_prop_ro("name",
                   [](const PyExecutable& e) { return e.executable.name(); })
      .def_prop_ro("parameter_shapes",
                   [](const PyExecutable& e) {
                     return ShapeTuples(e.executable.parameter_shapes());
                   })
      .def_prop_ro("parameter_shardings",
                   [](const PyExecutable& e) {
                     return WrapShardings(e.executable.parameter_shardings());
                   })
      .def_prop_ro("output_shapes",
                   [](const PyExecutable& e) {
                     return ShapeTuples(e.executable.output_shapes());
                   })
      .def_prop_ro("output_shardings",
                   [](const PyExecutable& e) {
                     return WrapShardings(e.executable.output_shardings());
                   })
      .def(
          "execute",
          [](const PyExecutable& e, nb::sequence args) {
            std::vector<client::Array> arrays = ArraysOf(args);
            return WrapArrays(e.backend,
                              Unwrap(e.executable.Execute(arrays)));
          },
          "args"_a,
          "Runs the program; returns its outputs at once (futures). "
          "Arguments on another slice or sharding are moved first.");

  // The C++ baseline of the Python dispatch benchmark (bench/
  // python_dispatch_bench.py): `n` executions, each fed the previous one's
  // first output, from C++.
  m.def(
      "_execute_chain",
      [](const PyExecutable& e, const PyArray& first, int64_t n) {
        client::Array x = first.array;
        for (int64_t i = 0; i < n; ++i) {
          x = Unwrap(e.executable.Execute({&x, 1}))[0];
        }
        return PyArray{e.backend, std::move(x)};
      },
      "executable"_a, "first"_a, "n"_a);
}

void BindArray(nb::module_& m) {
  nb::class_<PyArray>(m, "Array")
      .def_prop_ro("handle",
                   [](const PyArray& a) { return a.array.handle().value(); })
      .def_prop_ro("dtype",
                   [](const PyArray& a) {
                     return std::string(hlo::PrimitiveTypeName(a.array.dtype()));
                   })
      .def_prop_ro("dims",
                   [](const PyArray& a) { return DimsTuple(a.array.shape()); })
      .def_prop_ro("sharding",
                   [](const PyArray& a) { return PySharding{a.array.sharding()}; })
      .def_prop_ro("slice",
                   [](const PyArray& a) {
                     return PySlice{a.backend, a.array.slice()};
                   })
      .def_prop_ro("is_ready",
                   [](const PyArray& a) {
                     if (!a.ready.has_value()) a.ready = a.array.Ready();
                     return a.ready->IsReady();
                   })
      .def_prop_ro("is_deleted",
                   [](const PyArray& a) { return a.array.IsDeleted(); })
      .def(
          "wait",
          [](const PyArray& a, std::optional<double> timeout_s) {
            Future<> ready = a.array.Ready();
            const absl::Status& status = Wait(ready, timeout_s, "array");
            a.ready = ready;
            ThrowIfError(status);
          },
          "timeout_s"_a = nb::none(),
          "Waits until every shard holds its data; raises the array's error.")
      .def(
          "to_host",
          [](const PyArray& a, std::optional<double> timeout_s) {
            Future<hlo::Literal> value = a.array.ToHost();
            return LiteralBytes(Unwrap(Wait(value, timeout_s, "array")));
          },
          "timeout_s"_a = nb::none(),
          "Waits and fetches the global value's bytes (a read-only uint8 "
          "numpy array).")
      .def("delete", [](const PyArray& a) { a.array.Delete(); })
      .def("__repr__", [](const PyArray& a) { return a.array.ToString(); });
}

void BindTrace(nb::module_& m) {
  nb::class_<PyTrace>(m, "ProgramTrace")
      .def(
          "__init__",
          [](PyTrace* t, PySession& s) {
            new (t) PyTrace{s.backend,
                            std::make_unique<client::ProgramTrace>(s.session)};
          },
          "session"_a)
      .def(
          "execute",
          [](PyTrace& t, const PyExecutable& e, nb::sequence args) {
            std::vector<client::Array> arrays = ArraysOf(args);
            return WrapArrays(t.backend,
                              Unwrap(t.trace->Execute(e.executable, arrays)));
          },
          "executable"_a, "args"_a)
      .def(
          "copy",
          [](PyTrace& t, const PyArray& array, const PySlice& slice,
             const PySharding& sharding) {
            return PyArray{t.backend,
                           Unwrap(t.trace->Copy(array.array, slice.slice,
                                                sharding.sharding))};
          },
          "array"_a, "slice"_a, "sharding"_a)
      .def("submit", [](PyTrace& t) { ThrowIfError(t.trace->Submit()); })
      .def_prop_ro("num_ops", [](const PyTrace& t) { return t.trace->num_ops(); })
      .def_prop_ro("submitted",
                   [](const PyTrace& t) { return t.trace->submitted(); });
}

}  // namespace
}  // namespace causeway::python

NB_MODULE(_causeway, m) {
  namespace py = causeway::python;
  m.doc() = "Causeway's C++ client API; use the `causeway` package instead.";
  m.attr("__version__") = CAUSEWAY_VERSION;
  py::RegisterStatusErrors(m);
  py::BindClient(m);
  py::BindSession(m);
  py::BindSlice(m);
  py::BindSharding(m);
  py::BindExecutable(m);
  py::BindArray(m);
  py::BindTrace(m);
}
