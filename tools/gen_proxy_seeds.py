"""Writes the proxy_session fuzzer's seeds (fuzz/proxy_session_corpus): IFRT
proxy sessions as jaxlib's client drives them, one file each, in the
fuzzer's record format (src/causeway/proxy/proxy_session_fuzzer.cc: a tag
byte, a u16 length, the bytes; an even tag is an IfrtRequest, an odd one a
host buffer: its u64 handle, then its bytes). The messages are built from
Causeway's own .proto declarations (src/causeway/proxy/proto), compiled for
Python with protoc into a temporary folder.

    .venv/bin/python tools/gen_proxy_seeds.py [--out fuzz/proxy_session_corpus]
"""
import argparse
import importlib
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

F32_4 = struct.pack("<4f", 1, 2, 3, 4)


def load_protos(folder):
    protos = os.path.join(ROOT, "src", "causeway", "proxy", "proto")
    subprocess.run(["protoc", f"--proto_path={os.path.join(ROOT, 'src')}",
                    f"--python_out={folder}"]
                   + [os.path.join(protos, f) for f in sorted(os.listdir(protos))],
                   check=True)
    # The installed `causeway` package would shadow a namespace package.
    for sub in ("causeway", "causeway/proxy", "causeway/proxy/proto"):
        open(os.path.join(folder, sub, "__init__.py"), "w").close()
    sys.path.insert(0, folder)
    for name in list(sys.modules):
        if name == "causeway" or name.startswith("causeway."):
            del sys.modules[name]
    module = "causeway.proxy.proto."
    return (importlib.import_module(module + "ifrt_service_pb2"),
            importlib.import_module(module + "ifrt_types_pb2"),
            importlib.import_module(module + "xla_data_pb2"))


def program(partitions, n):
    """y = x + 1 on f32[n] shards tiled over `partitions` devices, as the
    compile worker gives it (HLO text)."""
    sharding = ("{replicated}" if partitions == 1
                else f"{{devices=[{partitions}]<=[{partitions}]}}")
    shape = f"f32[{n}]{{0}}"
    return (f"HloModule add_one, num_partitions={partitions}\n\n"
            f"ENTRY %main (x: {shape}) -> {shape} {{\n"
            f"  %x = {shape} parameter(0), sharding={sharding}\n"
            f"  %c = f32[] constant(1)\n"
            f"  %cb = {shape} broadcast(%c), dimensions={{}}\n"
            f"  ROOT %y = {shape} add(%x, %cb), sharding={sharding}\n"
            f"}}\n").encode()


class Session:
    """One seed: the records of a session."""

    def __init__(self, svc, types, xla):
        self.svc, self.types, self.xla = svc, types, xla
        self.records = []
        self.op_id = 0

    def request(self, **fields):
        r = self.svc.IfrtRequest()
        self.op_id += 1
        r.request_metadata.op_id = self.op_id
        for name, build in fields.items():
            build(getattr(r, name))
            getattr(r, name).SetInParent()
        self.add(0, r.SerializeToString())

    def host_buffer(self, handle, data):
        self.add(1, struct.pack("<Q", handle) + data)

    def add(self, tag, data):
        assert len(data) < 1 << 16
        self.records.append(struct.pack("<BH", tag, len(data)) + data)

    def bytes(self):
        return b"".join(self.records)

    # Shardings, as jaxlib's client serializes them.
    def single(self, sharding, device):
        s = self.types.SingleDeviceShardingProto(device_id=device)
        sharding.serialized_sharding.type_name = "xla::ifrt::SingleDeviceSharding"
        sharding.serialized_sharding.data = s.SerializeToString()

    def tiled(self, sharding, devices):
        h = self.types.HloShardingProto()
        h.devices.device_ids.extend(devices)
        h.xla_op_sharding.type = self.xla.OpSharding.OTHER
        h.xla_op_sharding.tile_assignment_dimensions.append(len(devices))
        h.xla_op_sharding.tile_assignment_devices.extend(range(len(devices)))
        sharding.serialized_sharding.type_name = "xla::ifrt::HloSharding"
        sharding.serialized_sharding.data = h.SerializeToString()

    def make_array(self, handle, device, n=4, buffer=None):
        buffer = buffer or handle + 1000
        self.host_buffer(buffer, struct.pack(f"<{n}f", *range(n)))

        def build(m):
            m.dtype.kind = self.types.DTypeProto.KIND_F32
            m.shape.dims.append(n)
            self.single(m.sharding, device)
            m.host_buffer_handle = buffer
            m.array_handle = handle
        self.request(make_array_from_host_buffer_request=build)

    def compile(self, devices, n):
        def build(c):
            c.program.type_name = "xla::ifrt::XlaProgram"
            c.program.data = program(len(devices), n)
            o = self.types.XlaCompileOptionsProto()
            b = o.compile_options.executable_build_options
            b.num_partitions = len(devices)
            b.num_replicas = 1
            b.use_spmd_partitioning = True
            a = b.device_assignment
            a.replica_count = 1
            a.computation_count = len(devices)
            for d in devices:
                a.computation_devices.add().replica_device_ids.append(d)
            c.compile_options.type_name = "xla::ifrt::XlaCompileOptions"
            c.compile_options.data = o.SerializeToString()
        self.request(compile_request=build)

    def fetch(self, array, buffer):
        def build(c):
            c.array_handle = array
            c.host_buffer_handle = buffer
        self.request(copy_to_host_buffer_request=build)


def seeds(svc, types, xla):
    def new():
        return Session(svc, types, xla)

    s = new()
    s.request(init_request=lambda r: None)
    s.request(get_default_device_assignment_request=lambda r: (
        setattr(r, "num_replicas", 1), setattr(r, "num_partitions", 4)))

    def layout(r):
        r.dtype.kind = types.DTypeProto.KIND_F32
        r.dims.extend([2, 3])
        r.device_id = 1
    s.request(get_default_layout_request=layout)
    yield "init_and_defaults", s

    s = new()
    s.make_array(1, 0)
    s.fetch(1, 11)
    s.request(check_value_ready_request=lambda r: r.value_handles.append(1))
    s.request(delete_array_request=lambda r: r.array_handle.append(1))
    s.request(is_array_deleted_request=lambda r: setattr(r, "array_handle", 1))
    s.request(destruct_array_request=lambda r: r.array_handle.append(1))
    yield "put_fetch_delete", s

    # Compile, wait for it, execute twice (the second with a status), fetch.
    s = new()
    s.make_array(1, 0)
    s.compile([0], 4)
    server = 1 << 48  # The first handle the proxy mints.
    s.request(check_future_request=lambda r: setattr(r, "future_handle", server + 1))

    def execute(result, fill_status):
        def build(e):
            e.loaded_executable_handle = server
            e.args_handles.append(1)
            e.result_array_handle.append(result)
            e.execute_options.fill_status = fill_status
        return build
    s.request(loaded_executable_execute_request=execute(2, False))
    s.request(loaded_executable_execute_request=execute(3, True))
    s.request(loaded_executable_metadata_request=lambda r: setattr(
        r, "loaded_executable_handle", server))
    s.request(loaded_executable_cost_analysis_request=lambda r: setattr(
        r, "loaded_executable_handle", server))
    s.request(loaded_executable_human_readable_program_text_request=lambda r: setattr(
        r, "loaded_executable_handle", server))
    s.fetch(3, 13)
    s.request(loaded_executable_destruct_request=lambda r: setattr(
        r, "loaded_executable_handle", server))
    yield "compile_execute_fetch", s

    # Two shards assembled into a tiled array, a 2-device program on it, its
    # result taken apart again and one shard copied to the other island.
    s = new()
    s.make_array(1, 0, n=2)
    s.make_array(2, 1, n=2)

    def assemble(a):
        a.shape.dims.append(4)
        s.tiled(a.sharding, [0, 1])
        a.single_device_array_handles.extend([1, 2])
        a.result_handle = 3
    s.request(assemble_array_from_single_device_arrays_request=assemble)
    s.compile([0, 1], 2)

    def run(e):
        e.loaded_executable_handle = server
        e.args_handles.append(3)
        e.result_array_handle.append(4)
    s.request(loaded_executable_execute_request=run)

    def disassemble(d):
        d.array_handle = 4
        d.result_handles.extend([5, 6])
    s.request(disassemble_into_single_device_arrays_request=disassemble)

    def copy(c):
        c.array_handles.append(6)
        c.device_ids.append(2)
        c.result_handles.append(7)
    s.request(copy_arrays_request=copy)
    s.fetch(7, 17)
    yield "assemble_execute_disassemble_copy", s

    # A remap (xc.reorder_shards) and a reshard.
    s = new()
    s.make_array(1, 0, n=2)
    s.make_array(2, 1, n=2)

    def remap(r):
        plan = r.plan
        for device in (0, 1):
            spec = plan.input_specs.add()
            spec.dtype.kind = types.DTypeProto.KIND_F32
            spec.shape.dims.append(2)
            s.single(spec.sharding, device)
        out = plan.output_specs.add()
        out.dtype.kind = types.DTypeProto.KIND_F32
        out.shape.dims.append(4)
        s.tiled(out.sharding, [1, 0])
        for source, to in ((1, 0), (0, 1)):
            m = plan.mappings.add()
            m.in_array, m.out_array = source, 0
            m.from_start.append(0), m.from_end.append(1), m.from_step.append(1)
            m.to_start.append(to), m.to_end.append(to + 1), m.to_step.append(1)
        r.array_handles.extend([1, 2])
        r.result_handles.append(3)
    s.request(remap_arrays_request=remap)

    def reshard(r):
        r.array_handles.append(3)
        spec = r.array_specs.add()
        spec.dtype.kind = types.DTypeProto.KIND_F32
        spec.shape.dims.append(4)
        s.tiled(spec.sharding, [2, 3])
        r.result_handles.append(4)
    s.request(reshard_arrays_request=reshard)
    s.fetch(4, 14)
    yield "remap_reshard", s

    # Arrays made from host buffer shards, a replicated shard, error arrays.
    s = new()
    s.host_buffer(100, F32_4[:8])
    s.host_buffer(101, F32_4[8:])

    def shards(r):
        spec = r.specs.add()
        for i, buffer in enumerate((100, 101)):
            spec.addressable_shard_indices.add().indices.append(i)
            hb = spec.host_buffers.add()
            hb.dtype.kind = types.DTypeProto.KIND_F32
            hb.shape.dims.append(2)
            hb.host_buffer_handle = buffer
        spec.array_spec.dtype.kind = types.DTypeProto.KIND_F32
        spec.array_spec.shape.dims.append(4)
        s.tiled(spec.array_spec.sharding, [0, 1])
        r.array_handles.append(1)
    s.request(make_arrays_from_host_buffer_shards_request=shards)
    s.fetch(1, 11)
    s.make_array(2, 3)
    s.request(fully_replicated_shard_request=lambda r: (
        setattr(r, "array_handle", 2), setattr(r, "result_handle", 3)))

    def errors(r):
        r.error.code = 15
        r.error.message = "the batch was lost"
        spec = r.array_specs.add()
        spec.dtype.kind = types.DTypeProto.KIND_F32
        spec.shape.dims.append(4)
        s.single(spec.sharding, 0)
        r.array_handles.append(4)
    s.request(make_error_arrays_request=errors)
    s.fetch(4, 14)
    yield "shards_replicated_errors", s

    # A JAX process that goes away while its fetch is in flight: the
    # session ends before the value arrives (the fetch must not store into
    # a session that is gone).
    s = new()
    s.make_array(1, 0, n=16000)
    s.compile([0], 16000)
    s.request(check_future_request=lambda r: setattr(r, "future_handle", server + 1))
    for i in range(8):
        def step(e, i=i):
            e.loaded_executable_handle = server
            e.args_handles.append(1 if i == 0 else 100 + i - 1)
            e.result_array_handle.append(100 + i)
        s.request(loaded_executable_execute_request=step)
    s.fetch(107, 1107)
    yield "fetch_as_the_session_ends", s

    # What a hostile or broken client sends: unknown handles, a handle in
    # the server's range, a device that does not exist, a buffer of the
    # wrong size, an array waiting for a buffer that never comes, requests
    # Causeway does not serve.
    s = new()
    s.fetch(77, 78)
    s.make_array(server + 5, 0)
    s.make_array(2, 99)
    s.host_buffer(300, b"\0" * 3)

    def wrong_size(m):
        m.dtype.kind = types.DTypeProto.KIND_F32
        m.shape.dims.append(4)
        s.single(m.sharding, 0)
        m.host_buffer_handle = 300
        m.array_handle = 3
    s.request(make_array_from_host_buffer_request=wrong_size)

    def never(m):
        wrong_size(m)
        m.host_buffer_handle = 301
        m.array_handle = 4
    s.request(make_array_from_host_buffer_request=never)
    s.fetch(4, 44)
    s.request(loaded_host_callback_poll_request=lambda r: None)
    s.request(bitcast_arrays_request=lambda r: None)
    s.compile([0, 2], 2)  # Across islands.
    yield "hostile", s


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(ROOT, "fuzz", "proxy_session_corpus"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        svc, types, xla = load_protos(folder)
        os.makedirs(args.out, exist_ok=True)
        for name, session in seeds(svc, types, xla):
            with open(os.path.join(args.out, name), "wb") as f:
                f.write(session.bytes())
            print(name, len(session.records), "records")


if __name__ == "__main__":
    main()
