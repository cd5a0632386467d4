"""Unmodified JAX on Causeway through `causeway proxy`: jaxlib's own IFRT
proxy client (JAX_PLATFORMS=proxy) against a `causeway cluster` the test
starts with --proxy-listen. Each JAX program runs in its own process (the
proxy backend must be chosen before JAX starts) and prints one JSON line;
the assertions compare it with numpy or with JAX's CPU backend in this
process."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import ProcessCluster

# Every JAX process of these tests: jaxlib's PyPI client only speaks plain
# gRPC, and only with IFRT_PROXY_USE_INSECURE_GRPC_CREDENTIALS=true.
JAX_TIMEOUT = 240


def jax_env(proxy_address: str) -> dict:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env.update(JAX_PLATFORMS="proxy",
               JAX_BACKEND_TARGET=f"grpc://{proxy_address}",
               IFRT_PROXY_USE_INSECURE_GRPC_CREDENTIALS="true")
    return env


def run_jax(proxy_address: str, body: str) -> dict:
    """Runs `body` (Python, with jax/jnp/np imported) in a JAX process on the
    proxy; `emit(**values)` in it reports results. Returns them."""
    return run_jax_with(jax_env(proxy_address), body)


def run_jax_on_cpu(body: str, devices: int) -> dict:
    """Runs `body` as run_jax does, on JAX's own CPU backend with `devices`
    host devices: the reference."""
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    return run_jax_with(env, body)


# How a JAX process reaches the proxy without pathwaysutils (docs/jax.md,
# "Point JAX at it"): jaxlib's client registered for the `proxy` platform
# (unused where JAX_PLATFORMS=cpu). pathwaysutils would cost each JAX process
# here 0.6 s of CPU more (its import brings orbax and fastapi); the how-to,
# elastic, corpus and donation tests run through it.
REGISTER_PROXY = """
import os
from jax._src import xla_bridge
from jax.extend.backend import ifrt_proxy
xla_bridge.register_backend_factory("proxy", lambda: ifrt_proxy.get_client(
    os.environ["JAX_BACKEND_TARGET"], ifrt_proxy.ClientConnectionOptions()), priority=-1)
"""


def run_jax_with(env: dict, body: str) -> dict:
    script = ("import json\n" + REGISTER_PROXY +
              "import jax, jax.numpy as jnp, numpy as np\n"
              "def emit(**kw):\n"
              "    print('RESULT ' + json.dumps(kw), flush=True)\n"
              + textwrap.dedent(body))
    result = subprocess.run([sys.executable, "-c", script], env=env,
                            capture_output=True, text=True, timeout=JAX_TIMEOUT,
                            stdin=subprocess.DEVNULL)
    lines = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        raise AssertionError(f"the JAX process failed (exit {result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr[-6000:]}")
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def proxy_cluster():
    """Two islands of 2 hosts x 2 devices (8 devices), with a proxy."""
    cluster = ProcessCluster("--islands", 2, "--hosts-per-island", 2,
                             "--devices-per-host", 2, "--proxy-listen", "127.0.0.1:0",
                             "--proxy-python", sys.executable)
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_proxy_on_a_unix_socket_serves_its_user_and_refuses_other_users(tmp_path):
    """jaxlib's proxy client authenticates nothing, so a TCP port on loopback
    is open to every local user; on a Unix socket (made under umask 077) only
    the proxy's own user gets in. JAX connects with grpc://unix:PATH."""
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o755)  # Only the socket's own mode keeps others out.
    path = folder / "proxy.sock"
    with ProcessCluster("--islands", 1, "--hosts-per-island", 1, "--devices-per-host", 2,
                        "--proxy-listen", f"unix:{path}",
                        "--proxy-python", sys.executable) as cluster:
        assert cluster.proxy_address == f"unix:{path}"
        assert path.stat().st_mode & 0o077 == 0  # Nothing for group or others.
        out = run_jax(cluster.proxy_address, """
            x = jnp.arange(8.0)
            emit(devices=len(jax.devices()), total=float(jax.jit(lambda v: (v * 2).sum())(x)))
        """)
        assert out == {"devices": 2, "total": 56.0}
        if os.geteuid() == 0:
            # Another user (nobody) is refused by the kernel before the
            # proxy reads a byte.
            probe = subprocess.run(
                ["/usr/bin/python3", "-c",
                 "import socket, sys\n"
                 "s = socket.socket(socket.AF_UNIX)\n"
                 "try:\n"
                 f"    s.connect({str(path)!r})\n"
                 "except PermissionError:\n"
                 "    sys.exit(13)\n"],
                user=65534, group=65534, cwd="/", capture_output=True, text=True,
                timeout=60)
            assert probe.returncode == 13, probe.stderr
    assert not path.exists()  # The proxy removed its socket.


def test_cluster_prints_the_proxy_line(proxy_cluster):
    assert proxy_cluster.proxy_address.startswith("127.0.0.1:")
    assert any(l.startswith("proxy listening on 127.0.0.1:") for l in proxy_cluster.lines)


def test_jax_devices_lists_the_cluster_devices(proxy_cluster):
    out = run_jax(proxy_cluster.proxy_address, """
        ds = jax.devices()
        emit(n=len(ds), ids=[d.id for d in ds], slices=[d.slice_index for d in ds],
             procs=[d.process_index for d in ds], kinds=[d.device_kind for d in ds],
             count=jax.device_count())
    """)
    assert out["n"] == 8 and out["count"] == 8
    assert out["ids"] == list(range(8))
    assert out["slices"] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert out["procs"] == [0] * 8
    assert set(out["kinds"]) == {"cpu"}


def test_idle_connections_and_garbage_do_not_stall_the_proxy(proxy_cluster):
    """A flood at the proxy's port (connections that send nothing, bytes
    that are not HTTP/2) does not keep a JAX process from being served."""
    import socket
    host, port = proxy_cluster.proxy_address.rsplit(":", 1)
    flood = [socket.create_connection((host, int(port)), timeout=30) for _ in range(300)]
    try:
        for s in flood[:50]:
            s.sendall(bytes(range(256)) * 4)
        out = run_jax(proxy_cluster.proxy_address, """
            emit(total=float(jax.jit(lambda v: (v * 2).sum())(jnp.arange(8.0))))
        """)
        assert out == {"total": 56.0}
    finally:
        for s in flood:
            s.close()


def test_device_put_and_back_on_one_device(proxy_cluster):
    out = run_jax(proxy_cluster.proxy_address, """
        x = np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5
        y = jax.device_put(x, jax.devices()[5])
        back = np.asarray(y)
        i = jax.device_put(np.array([1, -2, 3], np.int64 if jax.config.x64_enabled else np.int32),
                           jax.devices()[1])
        emit(back=back.tolist(), dtype=str(back.dtype), dev=[d.id for d in y.devices()],
             ints=np.asarray(i).tolist())
    """)
    assert out["back"] == (np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5).tolist()
    assert out["dtype"] == "float32"
    assert out["dev"] == [5]
    assert out["ints"] == [1, -2, 3]


def test_sharded_device_put_and_back_over_four_devices(proxy_cluster):
    out = run_jax(proxy_cluster.proxy_address, """
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
        x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
        y = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
        r = jax.device_put(x, NamedSharding(mesh, P()))
        rows = jax.device_put(x, NamedSharding(mesh, P("y")))
        shards = sorted((s.device.id, np.asarray(s.data).tolist()) for s in y.addressable_shards)
        emit(back=np.asarray(y).tolist(), replicated=np.asarray(r).tolist(),
             rows=np.asarray(rows).tolist(), shard0=shards[0],
             nshards=len(shards))
    """)
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    assert out["back"] == x.tolist()
    assert out["replicated"] == x.tolist()
    assert out["rows"] == x.tolist()
    assert out["nshards"] == 4
    assert out["shard0"] == [0, x[:4, :3].tolist()]


def test_deleted_array_is_deleted_and_refuses_reads(proxy_cluster):
    out = run_jax(proxy_cluster.proxy_address, """
        y = jax.device_put(np.ones(4, np.float32), jax.devices()[0])
        y.block_until_ready()
        y.delete()
        try:
            np.asarray(y)
            err = None
        except Exception as e:
            err = str(e)
        emit(deleted=y.is_deleted(), err=err)
    """)
    assert out["deleted"] is True
    assert out["err"] and "deleted" in out["err"].lower()


def test_jit_matches_jax_cpu_backend(proxy_cluster):
    import jax
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    out = run_jax(proxy_cluster.proxy_address, """
        x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
        f = jax.jit(lambda x: x * 2 + 1)
        y = f(x)
        z = f(y)  # a second call: the client's fire-and-forget path
        emit(y=np.asarray(y).tolist(), z=np.asarray(z).tolist(),
             t=np.asarray(jax.jit(lambda a: jnp.tanh(a).sum(axis=0))(x)).tolist())
    """)
    f = jax.jit(lambda x: x * 2 + 1)
    np.testing.assert_array_equal(np.asarray(out["y"], np.float32), np.asarray(f(x)))
    np.testing.assert_array_equal(np.asarray(out["z"], np.float32), np.asarray(f(f(x))))
    np.testing.assert_allclose(np.asarray(out["t"], np.float32),
                               np.asarray(jax.jit(lambda a: jax.numpy.tanh(a).sum(axis=0))(x)),
                               rtol=1e-6)


def test_sharded_jit_with_named_shardings_matches_jax_cpu_backend(proxy_cluster):
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4) / 7.0
    out = run_jax(proxy_cluster.proxy_address, """
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()[:4]), ("d",))
        x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4) / 7.0
        xs = jax.device_put(x, NamedSharding(mesh, P("d")))
        f = jax.jit(lambda a: (a * a).sum(axis=1),
                    in_shardings=NamedSharding(mesh, P("d")),
                    out_shardings=NamedSharding(mesh, P()))
        y = f(xs)
        emit(y=np.asarray(y).tolist(), devices=sorted(d.id for d in y.devices()))
    """)
    mesh = Mesh(np.array(jax.devices()[:4]), ("d",))
    f = jax.jit(lambda a: (a * a).sum(axis=1), in_shardings=NamedSharding(mesh, P("d")),
                out_shardings=NamedSharding(mesh, P()))
    np.testing.assert_allclose(np.asarray(out["y"], np.float32), np.asarray(f(x)), rtol=1e-6)
    assert out["devices"] == [0, 1, 2, 3]


# A flax (nnx) MLP trained with optax, data- and tensor-parallel on a 2 x 2
# mesh ("data" over the batch, "model" over the hidden layer), written the
# usual way: jax.jit of a value_and_grad step, float(loss) each step.
FLAX_TRAINING = """
    import optax
    from flax import nnx
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(16, 32, rngs=rngs)
            self.l2 = nnx.Linear(32, 4, rngs=rngs)

        def __call__(self, x):
            return self.l2(jax.nn.relu(self.l1(x)))

    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))
    graphdef, params = nnx.split(MLP(nnx.Rngs(0)), nnx.Param)
    specs = {"l1/kernel": P(None, "model"), "l1/bias": P("model"),
             "l2/kernel": P("model", None), "l2/bias": P()}

    def place(path, v):
        name = "/".join(str(k.key) for k in path if hasattr(k, "key"))
        return jax.device_put(v, NamedSharding(mesh, specs[name]))

    params = jax.tree_util.tree_map_with_path(place, params)
    optimizer = optax.adam(1e-2)
    opt_state = optimizer.init(params)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((8, 32, 16)).astype(np.float32)
    ys = rng.standard_normal((8, 32, 4)).astype(np.float32)
    data = NamedSharding(mesh, P("data", None))

    @jax.jit
    def step(params, opt_state, x, y):
        def loss_fn(p):
            return jnp.mean((nnx.merge(graphdef, p)(x) - y) ** 2)
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    losses = []
    for i in range(12):
        x = jax.device_put(xs[i % 8], data)
        y = jax.device_put(ys[i % 8], data)
        params, opt_state, loss = step(params, opt_state, x, y)
        losses.append(float(loss))
    kernel = params["l1"]["kernel"][...]
    emit(losses=losses, spec=str(kernel.sharding.spec),
         devices=sorted(d.id for d in kernel.devices()))
"""


def test_flax_optax_training_data_and_tensor_parallel_matches_plain_jax(proxy_cluster):
    out = run_jax(proxy_cluster.proxy_address, FLAX_TRAINING)
    reference = run_jax_on_cpu(FLAX_TRAINING, devices=4)
    # The mesh's 4 devices are island 0's two worker processes.
    assert out["devices"] == [0, 1, 2, 3]
    assert out["spec"] == reference["spec"] == "P(None, 'model')"
    assert len(out["losses"]) == 12
    assert out["losses"][-1] < out["losses"][0]  # It trains.
    np.testing.assert_allclose(out["losses"], reference["losses"], rtol=1e-5)


# An orbax checkpoint as users write and read one (orbax comes with flax):
# a pytree of sharded arrays saved by StandardCheckpointer and restored
# onto the shardings of `target`, which may differ from the saved ones.
# CHECKPOINT_STEP runs with SAVE, LOAD (folders or None) and SPECS (the
# restore's PartitionSpecs) defined before it.
CHECKPOINT_STEP = """
    import orbax.checkpoint as ocp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))
    shape = {"w": ((64, 32), jnp.float32), "b": ((32,), jnp.bfloat16), "step": ((), jnp.int32)}
    sharding = {k: NamedSharding(mesh, P(*SPECS[k])) for k in shape}
    checkpointer = ocp.StandardCheckpointer()
    if LOAD is None:
        state = {"w": np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 7,
                 "b": np.linspace(-2, 2, 32, dtype=np.float32).astype(jnp.bfloat16),
                 "step": np.array(0, np.int32)}
        state = {k: jax.device_put(v, sharding[k]) for k, v in state.items()}
    else:
        target = {k: jax.ShapeDtypeStruct(s, d, sharding=sharding[k])
                  for k, (s, d) in shape.items()}
        state = checkpointer.restore(LOAD, target)
    loaded = {k: np.asarray(v).astype(np.float32).tolist() for k, v in state.items()}
    specs = {k: str(v.sharding.spec) for k, v in state.items()}
    state = jax.jit(lambda s: {"w": s["w"] * 2 + s["b"].astype(jnp.float32),
                               "b": s["b"] * 3, "step": s["step"] + 1})(state)
    checkpointer.save(SAVE, state)
    checkpointer.wait_until_finished()
    emit(loaded=loaded, specs=specs, devices=sorted(d.id for d in state["w"].devices()))
"""


def checkpoint_step(save, load, specs):
    return (f"SAVE, LOAD, SPECS = {str(save)!r}, {None if load is None else str(load)!r}, "
            f"{specs!r}\n" + textwrap.dedent(CHECKPOINT_STEP))


def test_an_orbax_checkpoint_moves_between_plain_jax_and_the_cluster(proxy_cluster, tmp_path):
    """A user trains on their machine, resumes on the cluster and takes the
    checkpoint back: plain JAX saves, the proxy restores it onto other
    shardings, steps and saves, and plain JAX restores that. Every value is
    checked against numpy's own step."""
    saved_specs = {"w": ("data", "model"), "b": ("model",), "step": ()}
    other_specs = {"w": ("model", None), "b": (None,), "step": ()}
    run_jax_on_cpu(checkpoint_step(tmp_path / "local", None, saved_specs), devices=4)
    on_cluster = run_jax(proxy_cluster.proxy_address,
                         checkpoint_step(tmp_path / "cluster", tmp_path / "local", other_specs))
    back = run_jax_on_cpu(checkpoint_step(tmp_path / "back", tmp_path / "cluster", saved_specs),
                          devices=4)
    import ml_dtypes

    def step(w, b, n):  # The program's step, in numpy.
        return w * 2 + b.astype(np.float32), b * ml_dtypes.bfloat16(3), n + 1

    w0 = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 7
    b0 = np.linspace(-2, 2, 32, dtype=np.float32).astype(ml_dtypes.bfloat16)
    for loaded, expected in ((on_cluster["loaded"], step(w0, b0, 0)),
                             (back["loaded"], step(*step(w0, b0, 0)))):
        np.testing.assert_array_equal(loaded["w"], expected[0])
        np.testing.assert_array_equal(loaded["b"], expected[1].astype(np.float32))
        assert loaded["step"] == expected[2]
    assert on_cluster["devices"] == [0, 1, 2, 3]  # Island 0's 2x2.
    assert on_cluster["specs"] == {"w": "P('model', None)", "b": "P(None,)", "step": "P()"}
    assert back["specs"]["w"] == "P('data', 'model')"


# Moves between shardings and devices as user code makes them, one JAX
# process for all (each case's value and the devices of its result): the
# requests they send (AssembleArrayFromSingleDeviceArrays, RemapArrays,
# CopyArrays and programs fed shard views) move data worker to worker.
ARRAY_MOVES = """
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from jax.experimental import multihost_utils
    ds = jax.devices()
    mesh = Mesh(np.array(ds[:4]), ("x",))
    mesh22 = Mesh(np.array(ds[:4]).reshape(2, 2), ("x", "y"))
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    out = {}

    def record(name, array):
        out[name] = {"value": np.asarray(array).tolist()}
        if isinstance(array, jax.Array):
            out[name].update(devices=sorted(d.id for d in array.devices()),
                             shards=sorted([s.device.id, np.asarray(s.data).tolist()]
                                           for s in array.addressable_shards))

    on_one = jax.jit(lambda v: v * 1)(x)  # On the default device.
    record("one_to_tiled", jax.device_put(on_one, NamedSharding(mesh, P("x"))))
    record("one_to_2x2", jax.device_put(on_one, NamedSharding(mesh22, P("x", "y"))))
    tiled = jax.device_put(x, NamedSharding(mesh, P("x")))
    reordered = Mesh(np.array([ds[1], ds[0], ds[3], ds[2]]), ("x",))
    record("reordered", jax.device_put(tiled, NamedSharding(reordered, P("x"))))
    record("other_island", jax.device_put(tiled, NamedSharding(Mesh(np.array(ds[4:8]), ("x",)), P("x"))))
    r = jax.pmap(lambda v: v * 2, devices=ds[:4])(x[:4])
    record("pmap_row", r[1])
    record("pmap_row_plus_one", r[1] + 1)
    shard = tiled.addressable_shards[2].data
    record("shard_plus_one", shard + 1)
    record("shard_moved", jax.device_put(shard, ds[5]))
    parts = [jax.device_put(x[2 * i:2 * i + 2], d) for i, d in enumerate(ds[:4])]
    record("from_single_device_arrays", jax.make_array_from_single_device_arrays(
        x.shape, NamedSharding(mesh, P("x")), parts))
    record("from_callback", jax.make_array_from_callback(
        x.shape, NamedSharding(mesh22, P("x", "y")), lambda index: x[index]))
    record("broadcast_one_to_all", multihost_utils.broadcast_one_to_all(x))
    record("host_local_to_global", multihost_utils.host_local_array_to_global_array(x, mesh, P("x")))
    out["allgather"] = np.asarray(multihost_utils.process_allgather(tiled)).tolist()
    emit(**out)
"""


@pytest.fixture(scope="module")
def array_moves(proxy_cluster):
    return run_jax(proxy_cluster.proxy_address, ARRAY_MOVES)


X = np.arange(32, dtype=np.float32).reshape(8, 4)


def test_device_put_of_an_array_on_one_device_to_a_tiled_sharding(array_moves):
    """Sliced on its device, the slices copied to their devices and
    assembled there (AssembleArrayFromSingleDeviceArrays, worker to
    worker)."""
    tiled = array_moves["one_to_tiled"]
    assert tiled["value"] == X.tolist() and tiled["devices"] == [0, 1, 2, 3]
    assert tiled["shards"][1] == [1, X[2:4].tolist()]
    grid = array_moves["one_to_2x2"]
    assert grid["value"] == X.tolist()
    assert grid["shards"][3] == [3, X[4:, 2:].tolist()]


def test_device_put_to_the_same_devices_in_another_order(array_moves):
    # xc.reorder_shards: RemapArrays, then a program on the new order.
    moved = array_moves["reordered"]
    assert moved["value"] == X.tolist() and moved["devices"] == [0, 1, 2, 3]
    assert moved["shards"][0] == [0, X[2:4].tolist()]  # Device 0 is second now.


def test_device_put_to_another_island(array_moves):
    moved = array_moves["other_island"]
    assert moved["value"] == X.tolist() and moved["devices"] == [4, 5, 6, 7]


def test_a_pmap_result_indexed_and_used_in_arithmetic(array_moves):
    assert array_moves["pmap_row"]["value"] == (X[1] * 2).tolist()
    assert array_moves["pmap_row_plus_one"]["value"] == (X[1] * 2 + 1).tolist()


def test_a_shard_of_a_sharded_array_feeds_a_program_and_moves(array_moves):
    assert array_moves["shard_plus_one"]["value"] == (X[4:6] + 1).tolist()
    assert array_moves["shard_plus_one"]["devices"] == [2]
    assert array_moves["shard_moved"]["value"] == X[4:6].tolist()
    assert array_moves["shard_moved"]["devices"] == [5]


def test_arrays_made_from_single_device_arrays_and_from_a_callback(array_moves):
    made = array_moves["from_single_device_arrays"]
    assert made["value"] == X.tolist() and made["shards"][3] == [3, X[6:].tolist()]
    assert array_moves["from_callback"]["value"] == X.tolist()


def test_multihost_utils_in_one_controller(array_moves):
    assert array_moves["broadcast_one_to_all"]["value"] == X.tolist()
    assert array_moves["host_local_to_global"]["value"] == X.tolist()
    assert array_moves["host_local_to_global"]["devices"] == [0, 1, 2, 3]
    assert array_moves["allgather"] == [X.tolist()]  # One process's share.


def test_program_error_reaches_jax_as_jax_runtime_error(proxy_cluster):
    out = run_jax(proxy_cluster.proxy_address, """
        y = jax.device_put(np.ones(4, np.float32), jax.devices()[0])
        y.delete()
        try:
            jax.jit(lambda a: a + 1)(y).block_until_ready()
            emit(kind=None, msg=None)
        except Exception as e:
            emit(kind=type(e).__name__, msg=str(e))
    """)
    assert out["kind"] in ("JaxRuntimeError", "RuntimeError", "ValueError"), out
    assert "delete" in out["msg"].lower()


# The Pathways how-to's program, verbatim (also run by `make demo`).
HOW_TO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples", "python", "pathways_howto.py")


def test_how_to_program_runs_verbatim_on_one_island():
    """The Pathways how-to's program, unchanged (pmap spans every device, so
    the cluster is one island: Causeway runs a program on one island)."""
    with ProcessCluster("--islands", 1, "--hosts-per-island", 2, "--devices-per-host", 2,
                        "--proxy-listen", "127.0.0.1:0",
                        "--proxy-python", sys.executable) as cluster:
        result = subprocess.run([sys.executable, HOW_TO],
                                env=jax_env(cluster.proxy_address), capture_output=True,
                                text=True, timeout=JAX_TIMEOUT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Available devices: 4" in result.stdout
    assert "Distributed result: [4 4 4 4]" in result.stdout


def test_pmap_across_islands_is_refused_with_a_clear_error(proxy_cluster):
    out = run_jax(proxy_cluster.proxy_address, """
        from jax import lax
        try:
            jax.pmap(lambda v: lax.psum(v, "d"), axis_name="d")(jnp.arange(8))
            emit(msg=None)
        except Exception as e:
            emit(kind=type(e).__name__, msg=str(e))
    """)
    assert out["kind"] == "JaxRuntimeError"
    assert "several islands" in out["msg"]


def test_host_callback_is_refused_as_unimplemented(proxy_cluster):
    # jaxlib's proxy client itself refuses jax.debug.print's callback before
    # the program reaches the proxy (the proxy refuses any that arrive).
    out = run_jax(proxy_cluster.proxy_address, """
        def f(x):
            jax.debug.print("x = {}", x)
            return x + 1
        try:
            jax.jit(f)(jnp.ones(3))
            emit(msg=None)
        except Exception as e:
            emit(kind=type(e).__name__, msg=str(e))
    """)
    assert out["kind"] == "JaxRuntimeError"
    assert "UNIMPLEMENTED" in out["msg"] and "host callback" in out["msg"]


# What tools read off a compiled function (MaxText's TFLOP count, a
# user's look at the partitioned module): Compiled.cost_analysis() and
# .as_text(), on one device and tiled over four.
COMPILED_FACTS = """
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    one = jax.jit(lambda v: jnp.tanh(v @ v) + 1).lower(jnp.ones((16, 16))).compile()
    s = NamedSharding(Mesh(np.array(jax.devices()[:4]), ("x",)), P("x"))
    four = jax.jit(lambda v: jnp.exp(v @ v.T).sum(axis=1), in_shardings=s).lower(
        jax.ShapeDtypeStruct((16, 16), jnp.float32, sharding=s)).compile()
    emit(one=one.cost_analysis(), four=four.cost_analysis(),
         text=one.as_text(), four_text=four.as_text())
"""


def test_a_compiled_functions_cost_analysis_and_text_are_xlas(proxy_cluster):
    out = run_jax(proxy_cluster.proxy_address, COMPILED_FACTS)
    reference = run_jax_on_cpu(COMPILED_FACTS, devices=4)
    # XLA's own analysis of the module the compile worker compiled: the
    # same numbers as JAX's CPU backend gives for the same program.
    assert out["one"] == reference["one"]
    assert out["four"] == reference["four"]
    assert out["one"]["flops"] == 8448.0  # 2 x 16^3 for the product, 16^2 for the add.
    for text in (out["text"], out["four_text"]):
        assert text.startswith("HloModule jit__lambda")
        assert "ENTRY" in text
    assert "num_partitions=4" in out["four_text"]


def test_compile_error_reaches_jax_with_xlas_code_and_message(proxy_cluster):
    out = run_jax(proxy_cluster.proxy_address, """
        def f(x):
            return jax.ffi.ffi_call("causeway_no_such_target",
                                    jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
        try:
            jax.jit(f)(jnp.ones(3)).block_until_ready()
            emit(kind=None, msg=None)
        except Exception as e:
            emit(kind=type(e).__name__, msg=str(e))
    """)
    assert out["kind"] == "JaxRuntimeError"
    assert out["msg"].startswith("NOT_FOUND: ")
    assert "No FFI handler registered for causeway_no_such_target" in out["msg"]


def test_donated_argument_is_deleted_and_the_result_is_right(proxy_cluster):
    out = run_jax(proxy_cluster.proxy_address, """
        g = jax.jit(lambda a: a * 3, donate_argnums=0)
        a = jax.device_put(np.arange(4, dtype=np.float32), jax.devices()[1])
        b = g(a)
        c = g(b)
        emit(b_deleted=b.is_deleted(), a_deleted=a.is_deleted(), c=np.asarray(c).tolist())
    """)
    assert out["a_deleted"] is True and out["b_deleted"] is True
    assert out["c"] == [0.0, 9.0, 18.0, 27.0]


def test_proxy_with_a_wrong_cluster_token_is_refused(tmp_path):
    from conftest import run_causeway
    good, bad = tmp_path / "token", tmp_path / "wrong"
    good.write_text("the-right-token\n")
    bad.write_text("not-the-token\n")
    with ProcessCluster("--islands", 1, "--hosts-per-island", 1, "--devices-per-host", 2,
                        "--token-file", good, "--proxy-listen", "127.0.0.1:0",
                        "--proxy-python", sys.executable) as cluster:
        # The cluster's own proxy (given the token) serves.
        assert cluster.proxy_address
        refused = run_causeway("proxy", "--head", cluster.address, "--token-file", bad,
                               check=False)
    assert refused.returncode == 1
    assert "the token does not match the head's" in refused.stderr


def test_figure2_with_jax_jit_on_three_islands():
    """The Pathways paper's Figure 2 written with jax.jit: a, b and c on three
    device sets of three islands, the arrays moved island to island with
    jax.device_put (CopyArrays: worker to worker)."""
    with ProcessCluster("--islands", 3, "--hosts-per-island", 1, "--devices-per-host", 2,
                        "--proxy-listen", "127.0.0.1:0",
                        "--proxy-python", sys.executable) as cluster:
        out = run_jax(cluster.proxy_address, """
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            by_island = {}
            for d in jax.devices():
                by_island.setdefault(d.slice_index, []).append(d)
            A, B, C = (NamedSharding(Mesh(np.array(by_island[i]), ("x",)), P("x"))
                       for i in (0, 1, 2))
            a = jax.jit(lambda v: v * 2.0 + 1.0)
            b = jax.jit(lambda v: jnp.sin(v))
            c = jax.jit(lambda v: v - 3.0)
            v = jax.device_put(np.arange(8, dtype=np.float32), A)
            av = a(v)
            bav = b(jax.device_put(av, B))
            cav = c(jax.device_put(av, C))
            acav = a(jax.device_put(cav, A))
            emit(bav=np.asarray(bav).tolist(), acav=np.asarray(acav).tolist(),
                 islands=[sorted({d.slice_index for d in r.devices()})
                          for r in (av, bav, cav, acav)])
        """)
    x = np.arange(8, dtype=np.float32)
    av = x * np.float32(2) + np.float32(1)
    np.testing.assert_allclose(out["bav"], np.sin(av), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out["acav"], np.float32),
                                  (av - np.float32(3)) * np.float32(2) + np.float32(1))
    assert out["islands"] == [[0], [1], [2], [0]]


def test_donation_frees_the_donated_buffer_in_the_workers_accounting():
    """A donated argument's buffer is given back on its worker: the device's
    memory in the head's /api/status falls back to one array's worth, where
    an argument kept alive (no donation) holds two. Then the JAX process is
    killed (SIGKILL): its session ends and the last array is freed."""
    import json as json_module
    import time
    import urllib.request
    size = 16 << 20  # bytes of one f32 array
    with ProcessCluster("--islands", 1, "--hosts-per-island", 1, "--devices-per-host", 1,
                        "--http-listen", "127.0.0.1:0", "--proxy-listen", "127.0.0.1:0",
                        "--proxy-python", sys.executable) as cluster:
        http = cluster.line_starting_with("http listening on ")[len("http listening on "):]

        def used() -> int:
            with urllib.request.urlopen(f"http://{http}/api/status", timeout=30) as r:
                status = json_module.load(r)
            return status["devices"][0]["memory"]["used_bytes"]

        def settles_at(predicate, what: str) -> int:
            # The status is refreshed about once a second: read it until it
            # shows the state (the event), for at most a minute.
            deadline = time.monotonic() + 60
            while True:
                value = used()
                if predicate(value):
                    return value
                if time.monotonic() > deadline:
                    raise AssertionError(f"device 0's memory never {what}: {value} bytes")
                time.sleep(0.2)

        script = ("import sys, pathwaysutils\n"
                  "pathwaysutils.initialize()\n"
                  "import jax, numpy as np\n"
                  f"n = {size // 4}\n"
                  "keep = jax.jit(lambda a: a + 1)\n"
                  "give = jax.jit(lambda a: a + 1, donate_argnums=0)\n"
                  "a = jax.device_put(np.zeros(n, np.float32), jax.devices()[0])\n"
                  "b = keep(a); b.block_until_ready()\n"
                  "print('KEPT', flush=True); sys.stdin.readline()\n"
                  "c = give(b); c.block_until_ready(); del a\n"
                  "print('DONATED', b.is_deleted(), float(c[0]), flush=True)\n"
                  "sys.stdin.readline()\n")
        jax_process = subprocess.Popen([sys.executable, "-c", script],
                                       env=jax_env(cluster.proxy_address), text=True,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
        try:
            assert jax_process.stdout.readline().strip() == "KEPT", jax_process.stderr.read()
            # a and b: two arrays' worth.
            settles_at(lambda v: v >= 2 * size, "held both arrays")
            jax_process.stdin.write("\n")
            jax_process.stdin.flush()
            assert jax_process.stdout.readline().split() == ["DONATED", "True", "2.0"]
            # b was donated to c, a deleted: one array's worth left.
            settles_at(lambda v: v < 2 * size, "fell back to one array")
            assert used() >= size  # c itself is still there.
            # A JAX process killed outright: its stream to the proxy breaks,
            # the proxy ends its Causeway session, and c is freed too.
            jax_process.kill()
            jax_process.wait()
            settles_at(lambda v: v == 0, "was freed after the JAX process was killed")
        finally:
            jax_process.kill()
            jax_process.wait()
