"""Causeway from Python: JAX programs on Causeway's virtual devices.

    import causeway
    from jax.sharding import PartitionSpec as P

    causeway.connect()                                  # an embedded cluster
    s = causeway.make_virtual_device_set().add_slice(
        devices=4, mesh={"data": 2, "model": 2})
    matmul = causeway.jit(lambda x, w: x @ w, devices=s,
                          in_shardings=(P("data", None), P(None, "model")))
    y = matmul(x, w)                                    # returns at once
    numpy.asarray(y)                                    # waits and fetches

See docs/python.md for the tour.
"""

from . import _causeway
from ._array import Array, Sharding, device_put, reshard
from ._client import (Client, Device, Session, connect, current_client,
                      current_session, devices, disconnect, session, status, stop_host,
                      trace)
from ._devices import (Slice, SliceInfo, SliceMesh, VirtualDevice,
                       VirtualDeviceSet, make_virtual_device_set)
from ._jit import Jitted, Pmapped, jit, pmap, program
from . import elastic
from .errors import *  # noqa: F401,F403  (the Error classes)
from .errors import __all__ as _error_names

__version__: str = _causeway.__version__

__all__ = [
    "Array", "Client", "Device", "Jitted", "Pmapped", "Session", "Sharding",
    "Slice", "SliceInfo", "SliceMesh", "VirtualDevice", "VirtualDeviceSet",
    "connect", "current_client", "current_session", "device_put", "devices",
    "disconnect",
    "elastic", "jit", "make_virtual_device_set", "pmap", "program", "reshard",
    "session", "status", "stop_host", "trace", "__version__",
] + list(_error_names)
