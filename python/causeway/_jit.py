"""Programs from JAX functions: `jit`, `pmap` and `@program`.

`jit(fn, devices=SLICE, in_shardings=..., out_shardings=...)` compiles `fn`
once per input signature (the arguments' tree, shapes, dtypes and
placements, as jax.jit does) for the slice: JAX lowers it with the shardings
given as PartitionSpecs over the slice's mesh, XLA's SPMD partitioner
partitions it for the slice's devices (see _compile.py), and the head loads
the partitioned module. A call returns its output Arrays at once.

Shardings left unspecified: an argument already on the slice keeps its
sharding, any other (a host value, an array on another slice) is replicated;
outputs get the sharding XLA chooses, as with jax.jit.

64-bit values: arguments keep their dtypes. When one of them is 64-bit (a
numpy float64, int64, uint64 or complex128 array) the function is traced with JAX's x64 mode on, so
it computes in the types it was given, as numpy would; otherwise JAX's
defaults apply (Python floats are float32 inside the function).

`@program` records every call made inside the decorated function (and the
moves between slices they need) and submits them as one graph when it
returns: the runtime dispatches all of them at once.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Optional

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from . import _causeway
from ._array import Array, ArrayMeta, Sharding, dtype_name, numpy_dtype, put_host_value
from ._compile import check_spec, compile_mesh, partition
from ._devices import Slice, slice_of
from .errors import InternalError, InvalidArgumentError, UnimplementedError

# The dtypes JAX narrows unless x64 is on (complex64 is not one of them,
# though its items are 8 bytes).
_X64_DTYPES = frozenset(np.dtype(t) for t in (np.float64, np.int64, np.uint64, np.complex128))

_local = threading.local()


class _Recording:
    """The graph a @program call is recording: one ProgramTrace, made for
    the session of its first op."""

    def __init__(self):
        self._session = None
        self._trace: Optional[_causeway.ProgramTrace] = None

    def trace(self, session) -> _causeway.ProgramTrace:
        if self._trace is None:
            self._session = session
            self._trace = _causeway.ProgramTrace(session._impl)
        elif session is not self._session:
            raise InvalidArgumentError(
                "a @causeway.program records the work of one session; this call "
                f"runs in {session!r}, the program's earlier calls in {self._session!r}")
        return self._trace

    def submit(self) -> None:
        if self._trace is not None:
            self._trace.submit()


def current_recording() -> Optional[_Recording]:
    return getattr(_local, "recording", None)


def program(fn: Callable) -> Callable:
    """Decorator: the causeway calls made inside `fn` (jit, pmap, reshard)
    are traced and submitted as one program graph when `fn` returns. Arrays
    made inside may be used by later calls inside at once; outside, they are
    ordinary arrays. Calls nested in another @program join the outer one. If
    `fn` raises, nothing it recorded is sent and its arrays fail."""

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        if current_recording() is not None:
            return fn(*args, **kwargs)
        recording = _Recording()
        _local.recording = recording
        try:
            result = fn(*args, **kwargs)
        finally:
            _local.recording = None
        recording.submit()
        return result

    return traced


def _host_leaf(x) -> np.ndarray:
    """A non-Array argument as the numpy array it stands for. Python scalars
    take JAX's default types (bool, int32, float32)."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, bool):
        return np.asarray(x, np.bool_)
    if isinstance(x, int):
        return np.asarray(x, np.int32)
    if isinstance(x, float):
        return np.asarray(x, np.float32)
    value = np.asarray(x)
    if value.dtype == np.dtype(object):
        raise InvalidArgumentError(f"cannot pass a {type(x).__name__} to a causeway program")
    return value


def _leaf_key(x) -> tuple:
    if type(x) is Array:
        return x._meta.key
    if isinstance(x, np.ndarray):
        return ("host", x.shape, x.dtype)
    value = _host_leaf(x)
    return ("host", value.shape, value.dtype)


def _leaf_specs(in_shardings, args: tuple, num_arg_leaves: int) -> list:
    """The user's PartitionSpec (or None) for each leaf of `args`:
    `in_shardings` is one spec for everything, or a prefix of the args
    tuple, as for jax.jit."""
    if in_shardings is None:
        return [None] * num_arg_leaves
    if isinstance(in_shardings, PartitionSpec):
        return [in_shardings] * num_arg_leaves
    if isinstance(in_shardings, list):
        in_shardings = tuple(in_shardings)
    specs: list = []

    def expand(spec, subtree):
        specs.extend([spec] * len(jax.tree_util.tree_leaves(subtree)))

    try:
        jax.tree_util.tree_map(expand, in_shardings, args,
                               is_leaf=lambda x: x is None or isinstance(x, PartitionSpec))
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError(
            f"in_shardings {in_shardings} do not match the arguments' structure: {e}") from None
    return specs


class _Compiled:
    """One compiled signature of a jit: the executable, how to place host
    arguments, and what its outputs are."""

    __slots__ = ("executable", "param_shardings", "takes_host_values", "out_tree",
                 "out_meta", "text")

    def __init__(self, executable, param_shardings, takes_host_values, out_tree, out_meta,
                 text):
        self.executable = executable
        self.param_shardings = param_shardings
        # Whether some argument leaf of this signature is a host value (to
        # upload on every call) rather than an Array.
        self.takes_host_values = takes_host_values
        self.out_tree = out_tree
        self.out_meta = out_meta
        self.text = text


class Jitted:
    """A JAX function compiled for a slice; call it like the function."""

    def __init__(self, fn: Callable, slice: Slice, in_shardings=None, out_shardings=None,
                 mesh: Optional[tuple] = None):
        self._fn = fn
        self._slice = slice
        self._mesh_shape, self._axis_names = (
            mesh if mesh is not None else (slice.mesh.axis_sizes, slice.mesh.axis_names))
        self._mesh = compile_mesh(tuple(self._mesh_shape), tuple(self._axis_names))
        self._in_shardings = in_shardings
        self._jax_fn = jax.jit(fn, out_shardings=self._jax_out_shardings(out_shardings),
                               keep_unused=True)
        self._cache: dict = {}
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn)

    @property
    def slice(self) -> Slice:
        return self._slice

    def _jax_out_shardings(self, out_shardings):
        if out_shardings is None:
            return None

        def to_jax(spec):
            check_spec(spec, self._axis_names, len(spec), "out_shardings")
            return NamedSharding(self._mesh, spec)

        return jax.tree_util.tree_map(to_jax, out_shardings,
                                      is_leaf=lambda x: isinstance(x, PartitionSpec))

    def _lookup(self, args: tuple, kwargs: dict) -> tuple:
        """The argument leaves and the program compiled for their signature
        (compiling it on first sight)."""
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        key = (treedef, tuple([_leaf_key(x) for x in leaves]))
        compiled = self._cache.get(key)
        if compiled is None:
            with self._lock:
                compiled = self._cache.get(key)
                if compiled is None:
                    compiled = self._cache[key] = self._compile(args, kwargs, leaves)
        return leaves, compiled

    def __call__(self, *args, **kwargs):
        leaves, compiled = self._lookup(args, kwargs)
        if compiled.takes_host_values:
            inputs = [x._impl if type(x) is Array else
                      put_host_value(_host_leaf(x), sharding)._impl
                      for x, sharding in zip(leaves, compiled.param_shardings)]
        else:
            inputs = [x._impl for x in leaves]
        recording = getattr(_local, "recording", None)
        if recording is None:
            outputs = compiled.executable.execute(inputs)
        else:
            outputs = recording.trace(self._slice.session).execute(compiled.executable, inputs)
        wrap = Array._wrap
        return compiled.out_tree.unflatten(
            [wrap(o, m) for o, m in zip(outputs, compiled.out_meta)])

    def as_text(self, *args, **kwargs) -> str:
        """The partitioned HLO module this call runs (compiling it if need be)."""
        return self._lookup(args, kwargs)[1].text

    def _compile(self, args: tuple, kwargs: dict, leaves: list) -> _Compiled:
        num_arg_leaves = len(jax.tree_util.tree_leaves(args))
        specs = _leaf_specs(self._in_shardings, args, num_arg_leaves)
        specs += [None] * (len(leaves) - num_arg_leaves)
        replicated = NamedSharding(self._mesh, PartitionSpec())
        structs, chosen = [], []
        for i, (x, spec) in enumerate(zip(leaves, specs)):
            if type(x) is Array:
                shape, dtype = x.shape, x.dtype
            else:
                value = _host_leaf(x)
                shape, dtype = value.shape, value.dtype
            dtype_name(dtype)  # Refuses unsupported dtypes by name.
            if spec is not None:
                check_spec(spec, self._axis_names, len(shape), f"in_shardings of argument leaf {i}")
                sharding = NamedSharding(self._mesh, spec)
            elif type(x) is Array and x.slice is self._slice:
                sharding = x.sharding.jax_sharding(self._mesh_shape, self._axis_names)
            else:
                sharding = replicated
            chosen.append(sharding)
            structs.append(jax.ShapeDtypeStruct(shape, dtype, sharding=sharding))
        x64 = any(s.dtype in _X64_DTYPES for s in structs)
        struct_args, struct_kwargs = jax.tree_util.tree_unflatten(
            jax.tree_util.tree_structure((args, kwargs)), structs)
        with jax.enable_x64(x64):
            partitioned = partition(self._jax_fn.trace(*struct_args, **struct_kwargs).lower())
        text = partitioned.text
        session = self._slice.session
        executable = session._impl.compile(text, self._slice._impl)

        param_shapes = executable.parameter_shapes
        if len(param_shapes) != len(structs):
            raise InternalError(
                f"program '{executable.name}' has {len(param_shapes)} parameters for "
                f"{len(structs)} argument leaves")
        param_shardings = []
        for i, ((name, dims), impl, struct, js) in enumerate(
                zip(param_shapes, executable.parameter_shardings, structs, chosen)):
            if name != dtype_name(struct.dtype):
                raise InternalError(
                    f"program '{executable.name}' takes parameter {i} as {name}, but argument "
                    f"leaf {i} is {struct.dtype}")
            if tuple(dims) != tuple(struct.shape):
                raise UnimplementedError(
                    f"argument leaf {i} ({struct.dtype}{list(struct.shape)}) is split unevenly "
                    f"by its sharding {impl}; only shardings that divide every dimension "
                    "evenly are supported")
            param_shardings.append(Sharding(self._slice, _spec_of(js, self._slice), str(impl), impl))

        out_info, out_jax = partitioned.out_info, partitioned.out_shardings
        out_shapes = executable.output_shapes
        if len(out_shapes) != len(out_info):
            raise InternalError(
                f"program '{executable.name}' has {len(out_shapes)} outputs, JAX expects "
                f"{len(out_info)}")
        out_meta = []
        for i, ((name, dims), impl, info, js) in enumerate(
                zip(out_shapes, executable.output_shardings, out_info, out_jax)):
            if tuple(dims) != tuple(info.shape):
                raise UnimplementedError(
                    f"output {i} ({info.dtype}{list(info.shape)}) is split unevenly by its "
                    f"sharding {impl}; only shardings that divide every dimension evenly "
                    "are supported")
            sharding = Sharding(self._slice, _spec_of(js, self._slice), str(impl), impl, js)
            out_meta.append(ArrayMeta(tuple(info.shape), numpy_dtype(name), sharding))
        takes_host_values = any(type(x) is not Array for x in leaves)
        return _Compiled(executable, param_shardings, takes_host_values, partitioned.out_tree,
                         out_meta, text)


def _spec_of(sharding, slice: Slice) -> Optional[PartitionSpec]:
    """The PartitionSpec of a jax sharding when it is one over the slice's
    own mesh axes."""
    if isinstance(sharding, NamedSharding) and tuple(sharding.mesh.axis_names) == slice.axis_names:
        return sharding.spec
    return None


def jit(fn: Optional[Callable] = None, *, devices, in_shardings=None,
        out_shardings=None) -> Any:
    """Compiles `fn` (a JAX function) for the slice `devices` (a Slice, or all
    of its virtual devices). `in_shardings`/`out_shardings`: PartitionSpecs
    over the slice's mesh axes, one for all or a pytree prefix of the
    arguments / outputs, as for jax.jit. Usable as a decorator:
    `@causeway.jit(devices=s)`."""
    def make(f: Callable) -> Jitted:
        slice, listed = slice_of(devices, "jit")
        if listed is not None and list(listed) != list(slice.devices):
            raise InvalidArgumentError(
                "jit runs on a whole slice: pass the Slice or all of its devices in order")
        return Jitted(f, slice, in_shardings, out_shardings)

    return make if fn is None else make(fn)


_PMAP_AXIS = "pmap"


class Pmapped:
    """`fn` mapped over the leading axis of its arguments, one slot per
    virtual device of a slice."""

    def __init__(self, fn: Callable, slice: Slice, axis_name):
        self._n = slice.num_devices
        mapped = jax.vmap(fn, in_axes=0, out_axes=0, axis_name=axis_name)
        spec = PartitionSpec(_PMAP_AXIS)
        self._jitted = Jitted(mapped, slice, in_shardings=spec, out_shardings=spec,
                              mesh=((self._n,), (_PMAP_AXIS,)))
        functools.update_wrapper(self, fn)

    @property
    def slice(self) -> Slice:
        return self._jitted.slice

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise InvalidArgumentError("causeway.pmap takes positional arguments only")
        for i, x in enumerate(jax.tree_util.tree_leaves(args)):
            shape = x.shape if type(x) is Array else _host_leaf(x).shape
            if not shape or shape[0] != self._n:
                raise InvalidArgumentError(
                    f"pmap over {self._n} devices: argument leaf {i} has shape {tuple(shape)}, "
                    f"whose leading axis must be {self._n}")
        return self._jitted(*args)

    def as_text(self, *args) -> str:
        return self._jitted.as_text(*args)


def pmap(fn: Callable, *, devices, axis_name=None) -> Pmapped:
    """Maps `fn` over the leading axis of its arguments, one slot per device
    of `devices` (a Slice, or all of its virtual devices in order), as
    jax.pmap does; collectives over `axis_name` (psum, ...) span the
    devices."""
    slice, listed = slice_of(devices, "pmap")
    if listed is not None and list(listed) != list(slice.devices):
        raise InvalidArgumentError(
            "pmap runs on a whole slice: pass the Slice or all of its devices in order")
    return Pmapped(fn, slice, axis_name)
