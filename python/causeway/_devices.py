"""Virtual devices, as in the Pathways paper: a session asks for slices of
n devices in one island with a logical mesh; the resource manager maps them
onto physical devices when it grants them, and may remap them after a
failure without the user's code changing.

    device_set = causeway.make_virtual_device_set()
    s = device_set.add_slice(devices=4, mesh={"data": 2, "model": 2})
    s.devices        # its 4 virtual devices
    s.mesh.shape     # {"data": 2, "model": 2}

A slice is usable at once: programs compile for it and arrays are placed on
it while the request still waits for devices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional, Sequence

from . import _causeway
from ._client import Device, current_session
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    from ._client import Session


class SliceMesh(NamedTuple):
    """A slice's logical mesh: virtual device i sits at row-major position i."""

    axis_names: tuple
    axis_sizes: tuple

    @property
    def shape(self) -> dict:
        """{axis name: size}, like jax.sharding.Mesh.shape."""
        return dict(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        n = 1
        for s in self.axis_sizes:
            n *= s
        return n


class SliceInfo(NamedTuple):
    """Where a granted slice lives now (changes after a remap)."""

    island: int
    devices: tuple  # Physical Device of each virtual device, in order.
    generation: int


class VirtualDevice(NamedTuple):
    """Virtual device `index` of a slice."""

    slice: "Slice"
    index: int

    def physical(self, timeout: Optional[float] = None) -> Device:
        """The physical device it maps to now (waits for the grant)."""
        return self.slice.info(timeout).devices[self.index]

    def __repr__(self) -> str:
        return f"VirtualDevice(slice={self.slice.handle}, index={self.index})"


class Slice:
    """A virtual slice of a session. Thread-safe."""

    def __init__(self, session: "Session", impl: _causeway.Slice):
        self._session = session
        self._impl = impl
        self._mesh = SliceMesh(tuple(impl.axis_names), tuple(impl.mesh_shape))
        self._devices = tuple(VirtualDevice(self, i) for i in range(impl.num_devices))

    @property
    def session(self) -> "Session":
        return self._session

    @property
    def handle(self) -> int:
        return self._impl.handle

    @property
    def num_devices(self) -> int:
        return len(self._devices)

    @property
    def devices(self) -> tuple:
        """Its virtual devices, in mesh (row-major) order."""
        return self._devices

    @property
    def tpus(self) -> tuple:
        """The paper's name for `devices` (Figure 2's `.tpus`)."""
        return self._devices

    @property
    def mesh(self) -> SliceMesh:
        return self._mesh

    @property
    def axis_names(self) -> tuple:
        return self._mesh.axis_names

    @property
    def island(self) -> Optional[int]:
        """The island asked for, or None (any)."""
        return self._impl.requested_island

    @property
    def granted(self) -> bool:
        return self._impl.granted

    def info(self, timeout: Optional[float] = None) -> SliceInfo:
        """The current mapping onto physical devices; waits for the grant
        (DeadlineExceededError after `timeout` seconds)."""
        island, device_ids, _, generation = self._impl.info(timeout)
        by_id = {d.id: d for d in self._session.client.devices()}
        return SliceInfo(island, tuple(by_id[d] for d in device_ids), generation)

    def ready(self, timeout: Optional[float] = None) -> SliceInfo:
        """Waits for the grant; same as info()."""
        return self.info(timeout)

    def release(self, timeout: Optional[float] = None) -> None:
        """Gives the devices back now; arrays on the slice become unusable."""
        self._impl.release(timeout)

    def __repr__(self) -> str:
        mesh = ",".join(f"{n}={s}" for n, s in zip(*self._mesh))
        return f"Slice({self.handle}, {self.num_devices} devices, mesh[{mesh}])"


class VirtualDeviceSet:
    """A set of slices asked for together (make_virtual_device_set())."""

    def __init__(self, session: "Session"):
        self._session = session
        self._slices: list[Slice] = []

    @property
    def slices(self) -> tuple:
        return tuple(self._slices)

    def add_slice(self, devices: Optional[int] = None, *, mesh: Optional[dict] = None,
                  island: Optional[int] = None, tpu_devices: Optional[int] = None,
                  priority: Optional[int] = None, allow_smaller: bool = False,
                  shared: bool = False) -> Slice:
        """Asks for a slice of `devices` devices in one island (`island`, or
        any) with logical mesh `mesh` ({axis name: size}, in order; default
        {"x": devices}). Returns at once; the slice is granted when devices
        are free. `tpu_devices` is the paper's spelling of `devices`.

        `shared`: time-share the devices with other shared slices instead of
        owning them. `allow_smaller`: the slice may shrink when a failure
        leaves too few spare devices.
        """
        if tpu_devices is not None:
            if devices is not None and devices != tpu_devices:
                raise InvalidArgumentError("give devices= or tpu_devices=, not both")
            devices = tpu_devices
        if mesh is None:
            if devices is None:
                raise InvalidArgumentError("add_slice needs devices= (or a mesh)")
            mesh = {"x": devices}
        if not isinstance(mesh, dict) or not mesh:
            raise InvalidArgumentError(f"mesh must be a non-empty dict of axis sizes, got {mesh!r}")
        names = [str(n) for n in mesh]
        sizes = [int(s) for s in mesh.values()]
        n = 1
        for s in sizes:
            n *= s
        if devices is None:
            devices = n
        if n != devices:
            raise InvalidArgumentError(
                f"mesh {mesh} has {n} devices, the slice asks for {devices}")
        impl = self._session._impl.create_slice(
            int(devices), sizes, names, island, priority, allow_smaller, shared)
        s = Slice(self._session, impl)
        self._slices.append(s)
        return s


def make_virtual_device_set() -> VirtualDeviceSet:
    """A new device set of the current session."""
    return current_session().make_virtual_device_set()


def slice_of(devices, what: str) -> tuple[Slice, Optional[Sequence]]:
    """The slice that `devices` (a Slice, or virtual devices of one slice)
    names, and the device list when one was given."""
    if isinstance(devices, Slice):
        return devices, None
    try:
        devices = list(devices)
    except TypeError:
        raise InvalidArgumentError(
            f"{what}: devices= must be a Slice or its virtual devices, got {devices!r}") from None
    if not devices or not all(isinstance(d, VirtualDevice) for d in devices):
        raise InvalidArgumentError(
            f"{what}: devices= must be a Slice or its virtual devices, got {devices!r}")
    s = devices[0].slice
    if any(d.slice is not s for d in devices):
        raise InvalidArgumentError(f"{what}: the devices belong to more than one slice")
    return s, devices
