"""Shared helpers: JAX on 8 fake CPU devices, the built `causeway` tool, an
embedded Causeway cluster per test (`cluster`) and `causeway cluster` run as
a child process (`ProcessCluster`)."""
import os
import queue
import re
import signal
import subprocess
import threading
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jaxlib._hlo as hlo_lib  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("CAUSEWAY_BUILD", os.path.join(ROOT, "build"))
CAUSEWAY = os.path.join(BUILD, "bin", "causeway")

_PRINT = hlo_lib.HloPrintOptions()
_PRINT.print_large_constants = True


def module_text(compiled):
    """The optimized, partitioned module XLA compiled, constants in full."""
    (module,) = compiled.runtime_executable().hlo_modules()
    return module.to_string(_PRINT)


def save(path, array):
    np.save(path, np.asarray(array))
    return str(path)


def load(path):
    a = np.load(path)
    return a.view(ml_dtypes.bfloat16) if a.dtype == np.dtype("V2") else a


def run_causeway(*args, check=True, env=None):
    """Runs `causeway ARGS` (with `env` added to the environment); returns
    the CompletedProcess."""
    result = subprocess.run([CAUSEWAY, *map(str, args)], capture_output=True,
                            text=True, timeout=120,
                            env=None if env is None else {**os.environ, **env})
    if check and result.returncode != 0:
        raise AssertionError(f"causeway {' '.join(map(str, args))} failed:\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="session", autouse=True)
def built_tool():
    if not os.path.exists(CAUSEWAY):
        pytest.fail(f"{CAUSEWAY} is missing: run `make` first")


@pytest.fixture(scope="session")
def corpus_on_jax(tmp_path_factory):
    """`tools/gen_corpus.py --verify tests/corpus --outputs FILE`, run once:
    (the finished process, FILE). FILE holds every corpus program's outputs
    on JAX's CPU backend (test_gen_corpus.py checks the process,
    test_proxy_corpus.py compares the proxy's outputs with FILE)."""
    import sys

    outputs = tmp_path_factory.mktemp("corpus_on_jax") / "outputs.pkl"
    # The script sets XLA_FLAGS and JAX_PLATFORMS itself, before importing JAX.
    verify = subprocess.run(
        [sys.executable, "tools/gen_corpus.py", "--verify", "tests/corpus",
         "--outputs", str(outputs)],
        cwd=ROOT, capture_output=True, text=True, timeout=3600, stdin=subprocess.DEVNULL)
    return verify, outputs


@pytest.fixture
def cluster(request):
    """`cluster(**sizes)` connects an embedded cluster (the current client)
    for this test; it is disconnected when the test ends, pass or fail."""
    import causeway

    yield causeway.connect
    causeway.disconnect()


class ProcessCluster:
    """`causeway cluster ARGS` as a child process: a head and its workers on
    loopback, the head on a free port (`command="head"`: a head alone).

    Ready once it prints `head listening on HOST:PORT` (waited for with a
    deadline). `address` is that HOST:PORT, `worker_pids` maps each worker's
    host id to its pid (from the lines `causeway cluster` prints as each
    worker registers). A thread keeps reading its output (into `lines`), so
    that it never blocks on a full pipe. `stop()` sends SIGTERM to it alone
    (it stops its members) and kills it by its pid if it has not exited in
    time; its members die with it (PR_SET_PDEATHSIG). Use it in a `with`
    block, or from a fixture whose finalizer calls `stop()`.
    """

    _WORKER = re.compile(r"causeway cluster: worker \d+ \(island \d+\), pid (\d+): "
                         r"worker host (\d+) ready")
    _LISTENING = "head listening on "
    _PROXY_LISTENING = "proxy listening on "

    def __init__(self, *args, command: str = "cluster", start_timeout: float = 90.0):
        self.args = [command, *map(str, args)]
        self.lines: list[str] = []
        self.worker_pids: dict[int, int] = {}
        self.address = None
        # With --proxy-listen: the proxy's HOST:PORT (printed after the head's).
        self.proxy_address = None
        self._want_proxy = "--proxy-listen" in self.args
        self._lines = queue.Queue()
        self.process = subprocess.Popen([CAUSEWAY, *self.args],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            self._wait_until_listening(time.monotonic() + start_timeout)
        except BaseException:
            self.stop()
            raise

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)  # The end of its output: it exited.

    def _wait_until_listening(self, deadline: float):
        while self.address is None or (self._want_proxy and self.proxy_address is None):
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"causeway {' '.join(self.args)} did not say "
                                     f"'{self._LISTENING}...' in time:\n{self.output()}")
            if line is None:
                raise AssertionError(f"causeway {' '.join(self.args)} exited before "
                                     f"it was ready:\n{self.output()}")
            if m := self._WORKER.match(line):
                self.worker_pids[int(m[2])] = int(m[1])
            elif line.startswith(self._LISTENING):
                self.address = line[len(self._LISTENING):].strip()
            elif line.startswith(self._PROXY_LISTENING):
                self.proxy_address = line[len(self._PROXY_LISTENING):].strip()

    def output(self) -> str:
        return "\n".join(self.lines)

    def line_starting_with(self, prefix: str) -> str:
        """The first line read so far that starts with `prefix`."""
        for line in self.lines:
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starts with {prefix!r}:\n{self.output()}")

    def wait_for_line(self, text: str, timeout: float = 60.0) -> str:
        """Reads its output until a line that contains `text` (members' lines
        come prefixed with `[pid P] `; lines read meanwhile stay in `lines`);
        AssertionError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} in time:\n{self.output()}")
            if line is None:
                raise AssertionError(f"it exited before {text!r}:\n{self.output()}")
            if text in line:
                return line

    def kill_worker(self, host: int) -> int:
        """SIGKILLs the worker process of host `host`; returns its pid."""
        pid = self.worker_pids[host]
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop(self, timeout: float = 30.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        self._reader.join(timeout)

    def __enter__(self) -> "ProcessCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def waiting_for_memory(cluster):
    """An embedded cluster of one device with room for two f32 scalars, and
    on it `(y, blocker)`: `y`, x * 2 of an x on the device, waits for its
    output's memory until `blocker.delete()` frees it (the head queues an
    output that does not fit yet: docs/distributed.md), so that a test can
    hold work unfinished for as long as it needs, then finish it."""
    import causeway

    cluster(devices_per_host=1, memory_per_device=8)
    s = causeway.make_virtual_device_set().add_slice(devices=1)
    x = causeway.device_put(np.float32(1.5), s)
    blocker = causeway.device_put(np.float32(0), s)
    blocker.block_until_ready(timeout=60)
    return causeway.jit(lambda x: x * 2, devices=s)(x), blocker


def close_a_session_mid_work(doomed_island=None, other_island=None):
    """On the connected cluster, whose devices each have room for two f32
    scalars: a doomed session's work waits for its outputs' memory
    (docs/distributed.md) until the session is closed, however fast the
    machine; closing it fails that work and later calls, and another
    session (on `other_island`) goes on."""
    import causeway

    def one_device(session, island):
        where = {} if island is None else {"island": island}
        return session.make_virtual_device_set().add_slice(devices=1, **where)

    other = causeway.session("other")
    other_slice = one_device(other, other_island)
    doomed = causeway.session("doomed")
    s = one_device(doomed, doomed_island)
    x = causeway.device_put(np.float32(1.5), s)
    full = causeway.device_put(np.float32(0), s)  # The device is full now.
    full.block_until_ready(timeout=60)
    double = causeway.jit(lambda v: v * 2, devices=s)
    running = double(x)
    queued = double(running)
    assert not running.is_ready() and not queued.is_ready()
    doomed.close()
    for array in (running, queued):
        with pytest.raises((causeway.CancelledError, causeway.FailedPreconditionError)):
            array.block_until_ready(timeout=30)
    with pytest.raises(causeway.FailedPreconditionError, match="closed"):
        double(np.float32(1))
    with pytest.raises(causeway.FailedPreconditionError):
        one_device(doomed, doomed_island)
    # The other session is untouched.
    triple = causeway.jit(lambda v: v * 3, devices=other_slice)
    assert float(np.asarray(triple(np.float32(2)))) == 6.0
    other.close()


class WhenThisThreadLetsGo:
    """Runs `action` on a thread of its own as soon as the calling thread
    lets go of the GIL, and not before: within `with`, the interpreter
    switches threads only when a thread blocks (setswitchinterval, restored
    on exit), and `go()`, called just before the blocking call under test,
    is the last step before it. If that call does not release the GIL,
    `action` does not run until it returns. `with` joins the thread."""

    def __init__(self, action):
        self._action = action
        self._gate = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self):
        self._gate.wait()
        self._action()

    def __enter__(self):
        import sys
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(1000)
        self._thread.start()
        return self

    def go(self):
        self._gate.set()

    def __exit__(self, *exc):
        import sys
        self._gate.set()
        self._thread.join()
        sys.setswitchinterval(self._interval)
        return False
