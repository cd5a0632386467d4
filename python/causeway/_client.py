"""Clients and sessions: `connect`, the current client, `session`.

`connect()` makes the process's current client (as `pathwaysutils.
initialize()` does for JAX); the module-level functions of `causeway` use the
current session: the innermost `with causeway.session(...)` block of this
thread, or else the current client's default session. Using any of them
before `connect` connects an embedded cluster with the default sizes.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, NamedTuple, Optional

from . import _causeway
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    from ._array import Array, Sharding
    from ._devices import Slice, VirtualDeviceSet


class Device(NamedTuple):
    """A physical device of the cluster."""

    id: int
    host: int
    island: int
    index_on_host: int
    kind: str
    memory_bytes: int


class Client:
    """A connection to a cluster: a factory of sessions.

    Made by `causeway.connect`. Thread-safe.
    """

    def __init__(self, impl: _causeway.Client, address: Optional[str]):
        self._impl = impl
        self._address = address
        self._default: Optional[Session] = None
        self._lock = threading.Lock()

    @property
    def address(self) -> Optional[str]:
        """HOST:PORT of the head, or None for an embedded cluster."""
        return self._address

    @property
    def embedded(self) -> bool:
        return self._impl.embedded

    def devices(self) -> list[Device]:
        """Every device of the cluster."""
        return [Device(*d) for d in self._impl.devices()]

    @property
    def num_islands(self) -> int:
        return self._impl.num_islands

    def session(self, name: str = "session", *, weight: float = 1.0,
                priority: int = 0) -> "Session":
        """Opens a new session. Use it in a `with` block to make it current
        there and close it (releasing its slices and arrays) at the end."""
        if not name:
            raise InvalidArgumentError("a session needs a non-empty name")
        if weight <= 0:
            raise InvalidArgumentError(f"session weight must be positive, got {weight}")
        return Session(self, self._impl.open_session(name, weight, priority))

    @property
    def default_session(self) -> "Session":
        """The session the module-level functions use outside `with` blocks
        (opened on first use)."""
        with self._lock:
            if self._default is None or self._default.closed:
                self._default = self.session("default")
            return self._default

    def stop_host(self, host: int) -> None:
        """Stops host `host` of an embedded cluster as a crash would, and
        returns once the head has declared it dead: arrays with a shard there
        fail with DataLossError and their slices are remapped."""
        self._impl.stop_host(int(host))

    def close(self) -> None:
        """Closes the default session. Other sessions close on their own."""
        with self._lock:
            if self._default is not None:
                self._default.close()
                self._default = None

    def __repr__(self) -> str:
        where = self._address or "embedded"
        return f"causeway.Client({where}, {len(self._impl.devices())} devices)"


class Session:
    """One client's connection: it owns its slices, arrays and executables,
    and closing it releases them all (work still queued is cancelled).

    `with session:` makes it the current session of this thread inside the
    block and closes it at the end.
    """

    def __init__(self, client: Client, impl: _causeway.Session):
        self._client = client
        self._impl = impl

    @property
    def client(self) -> Client:
        return self._client

    @property
    def name(self) -> str:
        return self._impl.name

    @property
    def id(self) -> int:
        return self._impl.id

    @property
    def closed(self) -> bool:
        return self._impl.closed

    def make_virtual_device_set(self) -> "VirtualDeviceSet":
        from ._devices import VirtualDeviceSet
        return VirtualDeviceSet(self)

    def device_put(self, x, slice: "Slice", spec=None) -> "Array":
        from ._array import device_put
        if slice.session is not self:
            raise InvalidArgumentError(f"{slice!r} belongs to another session than {self!r}")
        return device_put(x, slice, spec)

    def reshard(self, array: "Array", slice: "Slice", spec=None) -> "Array":
        from ._array import reshard
        return reshard(array, slice, spec)

    def status(self, timeout: Optional[float] = None) -> str:
        """The head's text view: every device's running op, queue and the
        inputs its queued ops wait for."""
        return self._impl.status(timeout)

    def trace(self, path: str, timeout: Optional[float] = None) -> str:
        """Writes Chrome trace-event JSON of recent work to `path` (open it in
        ui.perfetto.dev); returns the path."""
        text = self._impl.trace(timeout)
        with open(path, "w") as f:
            f.write(text)
        return path

    def close(self) -> None:
        """Releases everything the session holds. Later calls on it, its
        slices and its arrays raise FailedPreconditionError. Idempotent."""
        self._impl.close()

    def __enter__(self) -> "Session":
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"causeway.Session({self.name!r}{state})"


_current: Optional[Client] = None
_current_lock = threading.Lock()
_local = threading.local()


def _stack() -> list:
    stack = getattr(_local, "sessions", None)
    if stack is None:
        stack = _local.sessions = []
    return stack


_EMBEDDED_DEFAULTS = {
    "islands": 1, "hosts_per_island": 1, "devices_per_host": 8,
    "memory_per_device": 1 << 30, "heartbeat_interval": 0.05,
    "heartbeat_timeout": 2.0, "collective_timeout": 60.0, "record_trace": True,
}


def connect(address: Optional[str] = None, *, token: Optional[str] = None,
            token_file: Optional[str] = None, tls_ca_file: Optional[str] = None,
            tls_cert_file: Optional[str] = None, tls_key_file: Optional[str] = None,
            connect_timeout: float = 10.0, insecure: bool = False,
            islands: Optional[int] = None, hosts_per_island: Optional[int] = None,
            devices_per_host: Optional[int] = None,
            memory_per_device: Optional[int] = None,
            heartbeat_interval: Optional[float] = None,
            heartbeat_timeout: Optional[float] = None,
            collective_timeout: Optional[float] = None,
            record_trace: Optional[bool] = None) -> Client:
    """Connects and makes the new client the process's current one.

    With `address` ("HOST:PORT"): connects to a running head (`causeway
    head`, `causeway cluster`) through the network client, waiting at most
    `connect_timeout` seconds for it to answer (UnavailableError naming the
    address when nothing answers). `token` or `token_file` (not both): the
    cluster's token (a wrong one raises UnauthenticatedError). TLS:
    `tls_ca_file` is the certificate (or CA) the head's is checked against;
    `tls_cert_file` and `tls_key_file` a client certificate for mutual TLS.
    A token is never sent in clear text to a head that is not on loopback:
    without TLS such a connect raises FailedPreconditionError saying why,
    unless `insecure=True`.

    Without `address`: starts an embedded cluster in this process, of
    `islands` x `hosts_per_island` x `devices_per_host` CPU devices (1 x 1 x
    8 by default) with `memory_per_device` bytes each (1 GiB); the head
    declares a host dead after `heartbeat_timeout` seconds (2) without an
    answer to its heartbeats (sent every `heartbeat_interval`, 0.05); a
    device waits `collective_timeout` seconds (60) for its peers;
    `record_trace` (True) keeps the most recent runtime events for
    `trace()`. These describe an embedded cluster only: given with an
    address they are refused (a head has its own flags).
    """
    global _current
    embedded = {"islands": islands, "hosts_per_island": hosts_per_island,
                "devices_per_host": devices_per_host,
                "memory_per_device": memory_per_device,
                "heartbeat_interval": heartbeat_interval,
                "heartbeat_timeout": heartbeat_timeout,
                "collective_timeout": collective_timeout, "record_trace": record_trace}
    if address is not None:
        given = sorted(name for name, value in embedded.items() if value is not None)
        if given:
            raise InvalidArgumentError(
                f"{', '.join(given)} describe an embedded cluster; a cluster at "
                f"{address!r} is sized by its own flags (causeway cluster --help)")
        client = _connect_remote(address, token, token_file, tls_ca_file, tls_cert_file,
                                 tls_key_file, connect_timeout, insecure)
    else:
        security = {"token": token, "token_file": token_file, "tls_ca_file": tls_ca_file,
                    "tls_cert_file": tls_cert_file, "tls_key_file": tls_key_file,
                    "insecure": insecure or None}
        given = sorted(name for name, value in security.items() if value is not None)
        if given:
            raise InvalidArgumentError(
                f"{', '.join(given)} are for connecting to a cluster address; "
                "causeway.connect() without one starts an embedded cluster")
        sizes = {name: _EMBEDDED_DEFAULTS[name] if value is None else value
                 for name, value in embedded.items()}
        client = _connect_embedded(**sizes)
    with _current_lock:
        _current = client
    return client


def _connect_remote(address, token, token_file, tls_ca_file, tls_cert_file, tls_key_file,
                    connect_timeout, insecure=False) -> Client:
    if not isinstance(address, str) or address.rpartition(":")[0] == "":
        raise InvalidArgumentError(f"a cluster address is HOST:PORT, got {address!r}")
    if token is not None and token_file is not None:
        raise InvalidArgumentError("give token or token_file, not both")
    if token is not None and not token:
        raise InvalidArgumentError("token is empty (leave it out for a head without one)")
    if not connect_timeout > 0:
        raise InvalidArgumentError(f"connect_timeout must be positive, got {connect_timeout}")
    impl = _causeway.connect_remote(
        address, token or "", token_file or "", tls_ca_file or "", tls_cert_file or "",
        tls_key_file or "", float(connect_timeout), bool(insecure))
    return Client(impl, address)


def _connect_embedded(*, islands, hosts_per_island, devices_per_host, memory_per_device,
                      heartbeat_interval, heartbeat_timeout, collective_timeout,
                      record_trace) -> Client:
    for name, value in (("islands", islands), ("hosts_per_island", hosts_per_island),
                        ("devices_per_host", devices_per_host)):
        if int(value) < 1:
            raise InvalidArgumentError(f"{name} must be at least 1, got {value}")
    if memory_per_device <= 0:
        raise InvalidArgumentError(f"memory_per_device must be positive, got {memory_per_device}")
    if not 0 < heartbeat_interval < heartbeat_timeout:
        raise InvalidArgumentError(
            "need 0 < heartbeat_interval < heartbeat_timeout, got "
            f"{heartbeat_interval} and {heartbeat_timeout}")
    impl = _causeway.connect_embedded(
        int(islands), int(hosts_per_island), int(devices_per_host),
        int(memory_per_device), float(heartbeat_interval),
        float(heartbeat_timeout), float(collective_timeout), bool(record_trace))
    return Client(impl, None)


def disconnect() -> None:
    """Forgets the current client, closing its default session. An embedded
    cluster stops once nothing that uses it (sessions, slices, arrays) is
    left."""
    global _current
    with _current_lock:
        client, _current = _current, None
    if client is not None:
        client.close()


def current_client() -> Client:
    """The process's current client (an embedded cluster with the default
    sizes is connected on first use)."""
    with _current_lock:
        client = _current
    return client if client is not None else connect()


def current_session() -> Session:
    """The innermost `with session` of this thread, else the current
    client's default session."""
    stack = _stack()
    if stack:
        return stack[-1]
    return current_client().default_session


def session(name: str = "session", *, weight: float = 1.0, priority: int = 0) -> Session:
    """Opens another session on the current client (see Client.session)."""
    return current_client().session(name, weight=weight, priority=priority)


def devices() -> list[Device]:
    """Every device of the current client's cluster."""
    return current_client().devices()


def stop_host(host: int) -> None:
    """Stops a host of the current (embedded) cluster; see Client.stop_host."""
    current_client().stop_host(host)


def status(timeout: Optional[float] = None) -> str:
    """The current session's status text (see Session.status)."""
    return current_session().status(timeout)


def trace(path: str, timeout: Optional[float] = None) -> str:
    """Writes the current session's trace to `path` (see Session.trace)."""
    return current_session().trace(path, timeout)
