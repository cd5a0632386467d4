"""Elastic training with unmodified JAX through `causeway proxy`: a training
loop under pathwaysutils' elastic manager (`Manager.elastic_retry`) loses a
worker process (SIGKILL) part-way through. The loop sees a JaxRuntimeError
with DATA_LOSS (what pathwaysutils counts as a slice going down), the head
remaps the slice onto the spare host, and the retried loop continues on the
same jax.devices() from its last host snapshot, ending with the losses and
parameters of an uninterrupted run. jaxlib's own proxy client throughout."""
import json
import subprocess
import sys
import urllib.request

import numpy as np

from conftest import ProcessCluster
from test_proxy import jax_env

# The JAX process: an uninterrupted run first (the reference), then the same
# loop under elastic_retry, which stops after step KILL_AFTER of its first
# attempt ("PAUSED") until the test has killed a worker and says go.
ELASTIC_TRAINING = r"""
import json, sys
import pathwaysutils
pathwaysutils.initialize()
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from pathwaysutils.elastic import manager as elastic_manager

NUM_STEPS, SNAPSHOT_EVERY, KILL_AFTER = 8, 3, 4
devices = jax.devices()
mesh = Mesh(np.array(devices).reshape(2, 2), ("data", "model"))
true_w = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)

@jax.jit
def step(w, x, y):
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - 0.1 * grad, loss

def put(value, spec):
    return jax.device_put(value, NamedSharding(mesh, spec))

def run(losses, snapshot, after_step):
    # From the snapshot's step: step k's batch depends on k alone.
    w = put(snapshot["w"], P(None, "model"))
    for k in range(snapshot["step"], NUM_STEPS):
        x = np.random.default_rng(100 + k).standard_normal((16, 8)).astype(np.float32)
        w, loss = step(w, put(x, P("data", None)), put(x @ true_w, P("data", None)))
        losses[k] = float(loss)
        if (k + 1) % SNAPSHOT_EVERY == 0:
            snapshot.update(step=k + 1, w=np.asarray(w))
        after_step(k)
    return np.asarray(w)

def start():
    return {"step": 0, "w": np.zeros((8, 4), np.float32)}

reference_losses = {}
reference_w = run(reference_losses, start(), lambda k: None)

manager = elastic_manager.Manager()
losses, snapshot, attempts, errors = {}, start(), [], []

def retry_policy(attempt, error):
    errors.append([type(error).__name__, str(error)])
    return attempt < 3

def pause(k):
    if k == KILL_AFTER and len(attempts) == 1:
        print("PAUSED", flush=True)
        sys.stdin.readline()

@manager.elastic_retry(poll_interval=0.05, timeout=120, retry_policy=retry_policy)
def train():
    attempts.append({"from_step": snapshot["step"],
                     "devices": [[d.id, d.slice_index] for d in jax.devices()],
                     "mesh": [d.id for d in mesh.devices.flat]})
    return run(losses, snapshot, pause)

w = train()
print("RESULT " + json.dumps({
    "attempts": attempts, "errors": errors,
    "losses": [losses[k] for k in range(NUM_STEPS)],
    "reference_losses": [reference_losses[k] for k in range(NUM_STEPS)],
    "w_equal": bool(np.array_equal(w, reference_w)),
    "active": sorted(manager.active_slice_indices)}), flush=True)
sys.stdin.readline()  # The session (and its slices) stays until the test has looked.
"""


def status(http: str) -> dict:
    with urllib.request.urlopen(f"http://{http}/api/status", timeout=30) as response:
        return json.load(response)


def four_device_slice(state: dict) -> dict:
    """The JAX session's slice of the mesh's 4 devices."""
    slices = [s for session in state["sessions"] for s in session["slices"]
              if s["requested_devices"] == 4]
    assert len(slices) == 1, state["sessions"]
    return slices[0]


def test_a_killed_worker_under_elastic_retry_is_remapped_and_the_loop_goes_on(tmp_path):
    with ProcessCluster("--islands", 1, "--hosts-per-island", 2, "--devices-per-host", 2,
                        "--spare-hosts", 1, "--http-listen", "127.0.0.1:0",
                        "--proxy-listen", "127.0.0.1:0",
                        "--proxy-python", sys.executable) as cluster:
        http = cluster.line_starting_with("http listening on ")[len("http listening on "):]
        # Its log (pathwaysutils logs the elastic event) goes to a file, so
        # that a full pipe never blocks it.
        log = open(tmp_path / "jax.log", "w+")
        jax_process = subprocess.Popen([sys.executable, "-c", ELASTIC_TRAINING],
                                       env=jax_env(cluster.proxy_address), text=True,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=log)

        def jax_log() -> str:
            log.seek(0)
            return log.read()[-6000:]

        try:
            line = jax_process.stdout.readline().strip()
            assert line == "PAUSED", jax_log()
            before = status(http)
            host_of = {d["device"]: d["host"] for d in before["devices"]}
            mesh_slice = four_device_slice(before)
            used_hosts = sorted({host_of[d] for d in mesh_slice["devices"]})
            assert len(used_hosts) == 2  # Two of the island's three hosts.
            victim = used_hosts[0]
            cluster.kill_worker(victim)
            # Logged once the head has failed its arrays and remapped its slices.
            cluster.wait_for_line(f"host {victim} was lost (")
            jax_process.stdin.write("\n")
            jax_process.stdin.flush()
            line = jax_process.stdout.readline()
            if not line.startswith("RESULT "):
                jax_process.kill()
                jax_process.wait()
                raise AssertionError(line + jax_log())
            result = json.loads(line[len("RESULT "):])
            after = status(http)  # While the JAX session still holds its slices.
            jax_process.stdin.write("\n")
            jax_process.stdin.flush()
            assert jax_process.wait(timeout=60) == 0
        finally:
            if jax_process.poll() is None:
                jax_process.kill()
                jax_process.wait()
            log.close()

    # One elastic event, seen as a JaxRuntimeError with DATA_LOSS naming the
    # lost host; the retry went back to the snapshot of step 3.
    assert len(result["errors"]) == 1, result["errors"]
    kind, message = result["errors"][0]
    assert kind == "JaxRuntimeError"
    assert message.startswith("DATA_LOSS: ") and f"host {victim} was lost" in message
    assert [a["from_step"] for a in result["attempts"]] == [0, 3]
    # The same JAX devices (no spare among them) and mesh in both attempts.
    first, retried = result["attempts"]
    assert first["devices"] == retried["devices"] == [[i, 0] for i in range(4)]
    assert first["mesh"] == retried["mesh"] == [0, 1, 2, 3]
    assert result["active"] == [0]
    # The head moved the same slice off the killed host, onto the spare.
    remapped = four_device_slice(after)
    assert remapped["slice"] == mesh_slice["slice"]
    assert remapped["generation"] > mesh_slice["generation"]
    assert victim not in {host_of[d] for d in remapped["devices"]}
    # The interrupted run ends where the uninterrupted one does.
    assert result["losses"] == result["reference_losses"]
    assert result["losses"][-1] < result["losses"][0]
    assert result["w_equal"] is True
