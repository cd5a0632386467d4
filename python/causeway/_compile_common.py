"""What both compile paths share: `causeway.jit` (_compile.py) and the IFRT
proxy's compile worker (_proxy_compile.py, which runs as a script with only
jax installed, so this module imports nothing of causeway's)."""
from __future__ import annotations

import functools
from typing import Sequence


@functools.lru_cache(maxsize=None)
def compile_devices(num_devices: int) -> tuple:
    """N devices of a compile-only XLA CPU client, in partition order.

    Made with jaxlib's `make_cpu_client` (not public API; pyproject.toml
    pins the jaxlib it was written against), which also hands XLA the CPU
    custom calls JAX registered, LAPACK's among them (importing
    jax._src.lax.linalg queues those): without them a program that calls
    them (cholesky, eigh, ...) does not compile ("No FFI handler registered
    for lapack_spotrf_ffi")."""
    import jax._src.lax.linalg  # noqa: F401
    from jaxlib import xla_client
    client = xla_client.make_cpu_client(asynchronous=True, num_devices=num_devices)
    devices = tuple(client.devices())
    assert len(devices) == num_devices
    return devices


def with_output_shardings(text: str, shardings: Sequence[str]) -> str:
    """The module with its root annotated with the outputs' shardings.

    XLA prints the parameters' shardings in a partitioned module but not the
    root's; the runtime reads both from the text, so the shardings JAX
    reports for the compiled outputs are written onto the entry's root
    instruction (a tuple sharding for a tuple root). A root that declares
    one already is left as it is. ValueError when they do not fit.
    """
    lines = text.split("\n")
    in_entry = False
    for i, line in enumerate(lines):
        if line.startswith("ENTRY "):
            in_entry = True
        elif in_entry and line.lstrip().startswith("ROOT "):
            if " sharding={" in line:
                return text
            shape = line.split("=", 1)[1].lstrip()
            if shape.startswith("("):
                value = "{" + ", ".join(shardings) + "}"
            elif len(shardings) == 1:
                value = shardings[0]
            else:
                raise ValueError(
                    f"the module's root is one array but JAX reports {len(shardings)} outputs")
            lines[i] = f"{line}, sharding={value}"
            return "\n".join(lines)
    raise ValueError("the compiled module has no ENTRY computation with a ROOT")
