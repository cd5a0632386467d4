"""The compile worker of `causeway proxy` (src/causeway/proxy/compile_worker.h).

`causeway proxy` receives programs from jaxlib's IFRT proxy client as IFRT
serializes them (an `xla::ifrt::XlaProgram`: the StableHLO module as MLIR
bytecode or a portable artifact; `xla::ifrt::XlaCompileOptions`: XLA's
CompileOptionsProto). It has no XLA to link, so it keeps this process
running and asks it, one program at a time, for what Causeway's head loads:
the module XLA's SPMD partitioner makes for the program's N devices, printed
with every constant in full and its root annotated with the output
shardings (as `causeway.jit` compiles, see _compile.py).

Protocol on stdin/stdout: frames of an 8-byte little-endian length and that
many bytes. A request is three frames: a JSON header
{"num_devices": N, "program_type": ..., "options_type": ...}, the program's
bytes, the options' bytes. The reply is one frame of JSON:
{"ok": true, "hlo_text", "name", "donated", "num_partitions",
"num_replicas"} or {"ok": false, "code", "message"} (XLA's message). The
process exits when stdin closes.

It runs as a script (`python _proxy_compile.py`), not as part of the
`causeway` package, so that the proxy needs only jax, not the package's
native extension; what it shares with _compile.py (the compile-only client,
the root's shardings) it imports from _compile_common.py beside it, which
imports nothing of the package's.
"""

from __future__ import annotations

import json
import os
import struct
import sys

from _compile_common import compile_devices, with_output_shardings


def _read_frame(stream) -> bytes | None:
    header = stream.read(8)
    if len(header) < 8:
        return None
    (n,) = struct.unpack("<Q", header)
    if n > (8 << 30):
        raise ValueError(f"a frame of {n} bytes")
    data = stream.read(n)
    if len(data) != n:
        return None
    return data


def _write_frame(stream, data: bytes) -> None:
    stream.write(struct.pack("<Q", len(data)))
    stream.write(data)
    stream.flush()


_HLO_PROGRAM = "xla::ifrt::XlaProgram"
_XLA_OPTIONS = "xla::ifrt::XlaCompileOptions"


def _options_proto_bytes(data: bytes) -> bytes:
    """CompileOptionsProto out of an XlaCompileOptionsProto (its field 1)."""
    i = 0
    out = None
    while i < len(data):
        tag, i = _varint(data, i)
        field, wire = tag >> 3, tag & 7
        if wire == 2:
            n, i = _varint(data, i)
            if field == 1:
                out = data[i:i + n]
            i += n
        elif wire == 0:
            _, i = _varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"XlaCompileOptions: wire type {wire}")
    if out is None:
        return b""
    return out


def _varint(data: bytes, i: int):
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


_CODES = {"CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
          "NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7,
          "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9, "ABORTED": 10,
          "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
          "DATA_LOSS": 15, "UNAUTHENTICATED": 16}

def _donated_parameters(text: str) -> list:
    """Parameter numbers the module aliases to outputs (JAX's donated
    arguments), from its header's `input_output_alias={ {0}: (1, {}, ...) }`."""
    import re
    header = text.split("\n", 1)[0]
    start = header.find("input_output_alias={")
    if start < 0:
        return []
    depth, i = 0, start + len("input_output_alias=")
    for j in range(i, len(header)):
        depth += {"{": 1, "}": -1}.get(header[j], 0)
        if depth == 0:
            body = header[i:j + 1]
            break
    else:
        return []
    return sorted({int(m) for m in re.findall(r":\s*\((\d+)\s*,", body)})


def compile_program(header: dict, program: bytes, options: bytes) -> dict:
    from jax._src.lib import _jax
    import jaxlib._hlo as _hlo
    import numpy as np

    if header.get("program_type") != _HLO_PROGRAM:
        return {"ok": False, "code": 12, "message":
                f"program type {header.get('program_type')!r} is not supported "
                f"(Causeway's proxy compiles {_HLO_PROGRAM})"}
    if header.get("options_type") != _XLA_OPTIONS:
        return {"ok": False, "code": 12, "message":
                f"compile options of type {header.get('options_type')!r} are not "
                f"supported (Causeway's proxy reads {_XLA_OPTIONS})"}
    compile_options = _jax.CompileOptions.ParseFromString(_options_proto_bytes(options))
    build = compile_options.executable_build_options
    replicas = max(1, build.num_replicas)
    partitions = max(1, build.num_partitions)
    n = int(header["num_devices"])
    if replicas * partitions != n:
        return {"ok": False, "code": 3, "message":
                f"the compile options ask for {replicas} replicas x {partitions} "
                f"partitions but name {n} devices"}
    devices = compile_devices(n)
    client = devices[0].client
    # The compile-only client's devices 0..n-1 stand for the program's
    # devices in assignment order (what Causeway's slice numbers).
    build.device_assignment = _jax.DeviceAssignment.create(
        np.arange(n).reshape(replicas, partitions))
    # The machine code is thrown away: only the partitioned HLO is kept
    # (the options _compile.py uses, for the same reason).
    compile_options.env_option_overrides = list(compile_options.env_option_overrides) + [
        ("xla_backend_optimization_level", 0),
        ("xla_llvm_disable_expensive_passes", True)]
    try:
        executable = client.compile_and_load(program, list(devices), compile_options)
    except Exception as e:  # XLA's errors reach JAX with XLA's message.
        message = str(e)
        # XLA's status text starts with its code's name: keep code and text.
        code = 3
        name, sep, rest = message.partition(": ")
        if sep and name in _CODES:
            code, message = _CODES[name], rest
        return {"ok": False, "code": code, "message": message}
    modules = executable.hlo_modules()
    if len(modules) != 1:
        return {"ok": False, "code": 12,
                "message": f"XLA compiled {len(modules)} modules; Causeway runs one"}
    print_options = _hlo.HloPrintOptions()
    print_options.print_large_constants = True
    text = modules[0].to_string(print_options)
    out_shardings = [str(_hlo.HloSharding.from_proto(s))
                     for s in executable.get_output_shardings() or []]
    if out_shardings:
        text = with_output_shardings(text, out_shardings)
    donated = _donated_parameters(text)
    # What `jax.stages.Compiled.cost_analysis()` reads (HLO-based, so the
    # LLVM options above change none of it).
    cost = {name: float(value) for name, value in (executable.cost_analysis() or {}).items()
            if isinstance(value, (int, float))}
    return {"ok": True, "hlo_text": text, "name": modules[0].name,
            "num_partitions": partitions, "num_replicas": replicas,
            "donated": donated, "cost_analysis": cost}


def main() -> int:
    stdin = sys.stdin.buffer
    stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    # Anything else printed (by XLA or JAX) goes to stderr, never into a frame.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    while True:
        header = _read_frame(stdin)
        if header is None:
            return 0
        program = _read_frame(stdin)
        options = _read_frame(stdin)
        if program is None or options is None:
            return 0
        try:
            reply = compile_program(json.loads(header), program, options)
        except Exception as e:
            reply = {"ok": False, "code": 13,
                     "message": f"the compile worker failed: {type(e).__name__}: {e}"}
        _write_frame(stdout, json.dumps(reply).encode())


if __name__ == "__main__":
    sys.exit(main())
