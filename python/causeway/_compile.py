"""JAX as Causeway's compiler: lowering and SPMD partitioning for a slice.

A slice of N devices needs a module partitioned by XLA for N partitions, but
this process has no N accelerators (JAX's CPU backend has one device unless
XLA flags said otherwise before JAX started). So each partition count gets
its own XLA CPU client of N devices, made here and used only to compile
(never to run): JAX lowers the function with shardings over a mesh of that
client's devices, XLA's SPMD partitioner partitions it for N partitions, and
the partitioned module's text, with every constant printed in full, is what
Causeway runs. The user sets no XLA flags and JAX's own backend is left as it
was.

The mesh's device i is the slice's virtual device i (row-major in the
slice's mesh shape), which is also XLA's partition i: the shardings written
in the module number devices exactly as the runtime does.

jaxlib's `get_tfrt_cpu_client` is not public API; pyproject.toml pins the
jax minor version this was written against.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import threading
from typing import Sequence

import jax
import jaxlib._hlo as _hlo
import numpy as np
from jax._src.lib import _jax
from jax._src.sharding_impls import GSPMDSharding
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import _compile_common
from ._compile_common import compile_devices
from .errors import InvalidArgumentError

_PRINT_OPTIONS = _hlo.HloPrintOptions()
# XLA prints constants of more than 10 elements as `{...}` by default; such
# text cannot be run (the head refuses it), so print them in full.
_PRINT_OPTIONS.print_large_constants = True


@functools.lru_cache(maxsize=None)
def compile_mesh(mesh_shape: tuple, axis_names: tuple) -> Mesh:
    """A jax Mesh of compile-only devices: device i at row-major position i."""
    n = int(np.prod(mesh_shape))
    devices = np.array(compile_devices(n), dtype=object).reshape(mesh_shape)
    return Mesh(devices, axis_names)


def check_spec(spec: PartitionSpec, axis_names: Sequence[str], ndim: int,
               what: str) -> None:
    """InvalidArgumentError unless `spec` fits an array of `ndim` dims on a
    mesh with `axis_names`."""
    if not isinstance(spec, PartitionSpec):
        raise InvalidArgumentError(
            f"{what}: expected a jax.sharding.PartitionSpec, got {spec!r}")
    if len(spec) > ndim:
        raise InvalidArgumentError(
            f"{what}: {spec} has {len(spec)} entries for an array of rank {ndim}")
    used = []
    for entry in spec:
        names = () if entry is None else (entry if isinstance(entry, tuple) else (entry,))
        for name in names:
            if name not in axis_names:
                raise InvalidArgumentError(
                    f"{what}: {spec} names mesh axis {name!r}; the slice's mesh "
                    f"has axes {tuple(axis_names)}")
            if name in used:
                raise InvalidArgumentError(
                    f"{what}: {spec} uses mesh axis {name!r} twice")
            used.append(name)


@functools.lru_cache(maxsize=4096)
def spec_to_hlo_text(mesh_shape: tuple, axis_names: tuple, spec: PartitionSpec,
                     ndim: int) -> str:
    """XLA's text of a PartitionSpec over the mesh, for an array of `ndim`
    dims: what the runtime's Sharding parses."""
    sharding = NamedSharding(compile_mesh(mesh_shape, axis_names), spec)
    return str(sharding._to_xla_hlo_sharding(ndim))


@functools.lru_cache(maxsize=4096)
def hlo_text_to_jax(num_devices: int, text: str) -> jax.sharding.Sharding:
    """The jax Sharding over compile-only devices that XLA's text describes."""
    return GSPMDSharding(compile_devices(num_devices),
                         _hlo.HloSharding.from_string(text))


# The machine code XLA generates is thrown away (only the partitioned HLO is
# kept), so LLVM is told not to spend time on it; the HLO passes, and so the
# module text, are the same with or without these (checked when they were
# chosen: identical text for the train_lm step, in half the time).
_COMPILE_OPTIONS = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
}


class Partitioned:
    """What compiling a lowered function gave: the partitioned module's text
    (constants in full, root annotated with the output shardings) and JAX's
    view of its outputs."""

    __slots__ = ("text", "out_tree", "out_info", "out_shardings")

    def __init__(self, text, out_tree, out_info, out_shardings):
        self.text = text
        self.out_tree = out_tree
        self.out_info = out_info            # Flat: ShapeDtypeStructs.
        self.out_shardings = out_shardings  # Flat: jax Shardings.


_partitioned: collections.OrderedDict = collections.OrderedDict()
_partitioned_lock = threading.Lock()
_PARTITIONED_CACHE_SIZE = 256


def partition(lowered) -> Partitioned:
    """Compiles a lowered function with XLA (SPMD partitioning for its
    mesh). Identical lowered modules (the same function traced again, by
    another jit object or for another slice of the same mesh) are compiled
    once per process."""
    key = hashlib.sha256(lowered.as_text().encode()).digest()
    with _partitioned_lock:
        hit = _partitioned.get(key)
        if hit is not None:
            _partitioned.move_to_end(key)
            return hit
    compiled = lowered.compile(_COMPILE_OPTIONS)
    out_info = jax.tree_util.tree_leaves(compiled.out_info)
    out_shardings = jax.tree_util.tree_leaves(compiled.output_shardings)
    text = with_output_shardings(module_text(compiled), [
        str(js._to_xla_hlo_sharding(len(info.shape)))
        for js, info in zip(out_shardings, out_info)])
    result = Partitioned(text, compiled.out_tree, out_info, out_shardings)
    with _partitioned_lock:
        _partitioned[key] = result
        while len(_partitioned) > _PARTITIONED_CACHE_SIZE:
            _partitioned.popitem(last=False)
    return result


def module_text(compiled) -> str:
    """The optimized, partitioned module XLA compiled, constants in full."""
    modules = compiled.runtime_executable().hlo_modules()
    if len(modules) != 1:
        raise InvalidArgumentError(
            f"XLA compiled {len(modules)} modules; Causeway runs one")
    return modules[0].to_string(_PRINT_OPTIONS)


def with_output_shardings(text: str, shardings: Sequence[str]) -> str:
    """_compile_common.with_output_shardings, its errors InvalidArgumentError."""
    try:
        return _compile_common.with_output_shardings(text, shardings)
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None
