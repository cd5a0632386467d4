"""Arrays: logical tensors sharded over a slice, returned at once (futures).

    x = causeway.device_put(numpy_array, slice, P("data", None))
    y = step(x)               # returns before the program has run
    numpy.asarray(y)          # waits, fetches, raises the array's error

An array passed to a program on another slice (or with another sharding)
is moved there first, worker to worker, in the same submission.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Optional

import ml_dtypes
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from . import _causeway
from ._compile import check_spec, compile_mesh, hlo_text_to_jax, spec_to_hlo_text
from ._devices import Slice
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    import jax

_TO_NAME = {
    np.dtype(np.bool_): "pred",
    np.dtype(np.int8): "s8",
    np.dtype(np.int16): "s16",
    np.dtype(np.int32): "s32",
    np.dtype(np.int64): "s64",
    np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
    np.dtype(np.float16): "f16",
    np.dtype(ml_dtypes.bfloat16): "bf16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.complex64): "c64",
    np.dtype(np.complex128): "c128",
    np.dtype(ml_dtypes.float8_e4m3fn): "f8e4m3fn",
    np.dtype(ml_dtypes.float8_e5m2): "f8e5m2",
    np.dtype(ml_dtypes.int4): "s4",
    np.dtype(ml_dtypes.uint4): "u4",
}
_FROM_NAME = {name: dtype for dtype, name in _TO_NAME.items()}


def dtype_name(dtype) -> str:
    """The runtime's name of a numpy dtype ("f32", "bf16", ...)."""
    try:
        return _TO_NAME[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise InvalidArgumentError(
            f"dtype {dtype} is not supported (supported: "
            f"{', '.join(str(d) for d in _TO_NAME)})") from None


def numpy_dtype(name: str) -> np.dtype:
    return _FROM_NAME[name]


class Sharding:
    """How an array's global shape maps onto the devices of its slice.

    `spec` is the jax.sharding.PartitionSpec over the slice's mesh when the
    sharding was given (or inferred) as one, else None; `hlo` is always XLA's
    text of it (`{devices=[2,1]<=[2]}`), logical devices 0..n-1 being the
    slice's virtual devices.
    """

    __slots__ = ("slice", "spec", "hlo", "_impl", "_jax")

    def __init__(self, slice: Slice, spec: Optional[PartitionSpec], hlo: str,
                 impl: Optional[_causeway.Sharding] = None,
                 jax_sharding: Optional["jax.sharding.Sharding"] = None):
        self.slice = slice
        self.spec = spec
        self.hlo = hlo
        self._impl = impl if impl is not None else _causeway.Sharding.parse(hlo)
        self._jax = jax_sharding

    @classmethod
    def from_spec(cls, slice: Slice, spec: PartitionSpec, ndim: int,
                  what: str = "sharding") -> "Sharding":
        check_spec(spec, slice.axis_names, ndim, what)
        mesh = slice.mesh
        return cls(slice, spec, spec_to_hlo_text(mesh.axis_sizes, mesh.axis_names, spec, ndim))

    def jax_sharding(self, mesh_shape: tuple, axis_names: tuple) -> "jax.sharding.Sharding":
        """The same sharding over the compile-only devices (for lowering)."""
        if self.spec is not None and tuple(axis_names) == self.slice.axis_names:
            return NamedSharding(compile_mesh(tuple(mesh_shape), tuple(axis_names)), self.spec)
        if self._jax is None:
            self._jax = hlo_text_to_jax(self.slice.num_devices, self.hlo)
        return self._jax

    @property
    def is_replicated(self) -> bool:
        return self._impl.is_replicated

    def __eq__(self, other) -> bool:
        return (isinstance(other, Sharding) and other.slice is self.slice
                and other.hlo == self.hlo)

    def __hash__(self) -> int:
        return hash((self.slice.handle, self.hlo))

    def __repr__(self) -> str:
        what = self.spec if self.spec is not None else self.hlo
        return f"Sharding({what} on {self.slice!r})"


def as_sharding(spec, slice: Slice, ndim: int, what: str) -> Sharding:
    """A Sharding on `slice` from a PartitionSpec, a Sharding on that slice,
    or None (replicated)."""
    if spec is None:
        spec = PartitionSpec()
    if isinstance(spec, Sharding):
        if spec.slice is not slice:
            if spec.spec is None:
                raise InvalidArgumentError(
                    f"{what}: {spec!r} is on another slice; give a PartitionSpec")
            spec = spec.spec
        else:
            return spec
    return Sharding.from_spec(slice, spec, ndim, what)


_placement_keys: dict = {}
_placement_keys_lock = threading.Lock()


def placement_key(shape: tuple, dtype: np.dtype, slice_handle: int, hlo: str) -> int:
    """A small int standing for (shape, dtype, slice, sharding): jit's cache
    keys hash these instead of the tuples, on every call."""
    full = (shape, dtype, slice_handle, hlo)
    key = _placement_keys.get(full)
    if key is None:
        with _placement_keys_lock:
            key = _placement_keys.setdefault(full, len(_placement_keys))
    return key


class ArrayMeta:
    """What every array of one kind shares: shape, dtype, sharding, and the
    key jit looks compiled programs up by."""

    __slots__ = ("shape", "dtype", "sharding", "key")

    def __init__(self, shape: tuple, dtype: np.dtype, sharding: Sharding):
        self.shape = shape
        self.dtype = dtype
        self.sharding = sharding
        self.key = placement_key(shape, dtype, sharding.slice.handle, sharding.hlo)


class Array:
    """A logical array on a slice; a future of its value.

    Returned at once by programs, device_put and reshard. Waiting and
    fetching happen in block_until_ready() and numpy.asarray(a); an error of
    the work that computes it (a failed program, a lost host) is raised
    there, as a causeway.Error naming the program and op.
    """

    __slots__ = ("_impl", "_meta", "__weakref__")

    def __init__(self):
        raise TypeError("Arrays come from device_put, reshard and programs")

    @classmethod
    def _wrap(cls, impl: _causeway.Array, meta: ArrayMeta) -> "Array":
        a = object.__new__(cls)
        a._impl = impl
        a._meta = meta
        return a

    @property
    def shape(self) -> tuple:
        return self._meta.shape

    @property
    def dtype(self) -> np.dtype:
        return self._meta.dtype

    @property
    def ndim(self) -> int:
        return len(self._meta.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._meta.shape, dtype=np.int64))

    @property
    def sharding(self) -> Sharding:
        return self._meta.sharding

    @property
    def slice(self) -> Slice:
        return self._meta.sharding.slice

    def is_ready(self) -> bool:
        """True once every shard holds its data (or the array failed)."""
        return self._impl.is_ready

    def block_until_ready(self, timeout: Optional[float] = None) -> "Array":
        """Waits until the array exists; raises its error. Returns self."""
        self._impl.wait(timeout)
        return self

    def to_numpy(self, timeout: Optional[float] = None) -> np.ndarray:
        """Waits and fetches the global value (a read-only numpy array)."""
        raw = self._impl.to_host(timeout)
        return raw.view(self._meta.dtype).reshape(self._meta.shape)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        value = self.to_numpy()
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        if copy:
            return value.copy()
        return value

    def delete(self) -> None:
        """Frees the array's buffers once queued work reading it is done.
        Later uses raise FailedPreconditionError. Idempotent."""
        self._impl.delete()

    def is_deleted(self) -> bool:
        return self._impl.is_deleted

    def __len__(self) -> int:
        if not self._meta.shape:
            raise TypeError("len() of a 0-d array")
        return self._meta.shape[0]

    def __repr__(self) -> str:
        return repr(self.to_numpy())

    def __str__(self) -> str:
        return str(self.to_numpy())


def _host_value(x) -> np.ndarray:
    if isinstance(x, Array):
        raise InvalidArgumentError("expected a host value, got a causeway.Array")
    value = np.asarray(x)
    if value.dtype == np.dtype(object):
        raise InvalidArgumentError(f"cannot put a value of type {type(x).__name__} on devices")
    return value


def put_host_value(value: np.ndarray, sharding: Sharding) -> Array:
    """Uploads a numpy array with `sharding` (on its slice)."""
    if not value.flags.c_contiguous:  # (np.ascontiguousarray makes 0-d arrays 1-d.)
        value = value.copy(order="C")
    name = dtype_name(value.dtype)
    s = sharding.slice
    impl = s.session._impl.from_host(
        value.reshape(-1).view(np.uint8), name, list(value.shape), s._impl, sharding._impl)
    return Array._wrap(impl, ArrayMeta(tuple(value.shape), value.dtype, sharding))


def device_put(x: Any, slice: Slice, spec=None) -> Array:
    """Puts a host value (numpy or jax array, or anything numpy.asarray
    takes) on `slice` with sharding `spec` (a PartitionSpec over the slice's
    mesh; default replicated). An Array is moved (see reshard) instead."""
    if not isinstance(slice, Slice):
        raise InvalidArgumentError(f"device_put: expected a causeway Slice, got {slice!r}")
    if isinstance(x, Array):
        return reshard(x, slice, spec)
    value = _host_value(x)
    return put_host_value(value, as_sharding(spec, slice, value.ndim, "device_put"))


def reshard(array: Array, slice: Slice, spec=None) -> Array:
    """A copy of `array` on `slice` (any slice of the same session) with
    sharding `spec` (default replicated). Data moves worker to worker."""
    from ._jit import current_recording
    if not isinstance(array, Array):
        raise InvalidArgumentError(f"reshard: expected a causeway.Array, got {type(array).__name__}")
    if not isinstance(slice, Slice):
        raise InvalidArgumentError(f"reshard: expected a causeway Slice, got {slice!r}")
    sharding = as_sharding(spec, slice, array.ndim, "reshard")
    recording = current_recording()
    if recording is not None:
        impl = recording.trace(slice.session).copy(array._impl, slice._impl, sharding._impl)
    else:
        impl = slice.session._impl.copy(array._impl, slice._impl, sharding._impl)
    return Array._wrap(impl, ArrayMeta(array.shape, array.dtype, sharding))
