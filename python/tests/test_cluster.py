"""The Python client on a multi-process cluster (`causeway cluster` started
by the test: a head and worker processes on loopback): the same API as
embedded, against JAX's own results, over gRPC and the TCP data plane.

Slices here span worker processes: arrays move between them on the TCP
data plane, and a program's collectives run across them over Gloo.
"""
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import causeway
from causeway.elastic import Manager
from conftest import ProcessCluster, close_a_session_mid_work
from test_elastic import NUM_STEPS, initial_state, make_train_step

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKEN = "a-test-token-0123456789"


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cluster") / "token"
    path.write_text(TOKEN + "\n")
    return str(path)


@pytest.fixture(scope="module")
def one_device_workers(token_file):
    """Two islands of four worker processes with one device each, behind a
    token: every slice of n devices spans n processes."""
    cluster = ProcessCluster("--islands", 2, "--hosts-per-island", 4, "--devices-per-host", 1,
                             "--token-file", token_file)
    yield cluster
    cluster.stop()


@pytest.fixture
def connected(one_device_workers, token_file):
    """The current client is connected to `one_device_workers` for the test."""
    client = causeway.connect(one_device_workers.address, token_file=token_file)
    yield client
    causeway.disconnect()


def test_connect_lists_the_clusters_devices_and_hosts(connected, one_device_workers):
    devices = connected.devices()
    assert len(devices) == 8 and connected.num_islands == 2
    assert {d.host for d in devices} == set(one_device_workers.worker_pids)
    assert connected.address == one_device_workers.address and not connected.embedded
    assert causeway.current_client() is connected


def test_figure2_on_the_cluster_prints_what_the_paper_prints(one_device_workers, token_file):
    # Its slices span worker processes; the moves between them go worker to
    # worker.
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples/python/figure2.py"),
         "--cluster", one_device_workers.address, "--token-file", token_file],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "(array([3., 5.]), array([2., 4.]))\n"


def test_a_sharded_jit_on_a_2x2_mesh_over_four_worker_processes_matches_jax(connected):
    s = causeway.make_virtual_device_set().add_slice(devices=4, mesh={"data": 2, "model": 2},
                                                     island=0)
    assert len({d.host for d in s.info(timeout=30).devices}) == 4
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6), np.float32)
    w = rng.standard_normal((6, 10), np.float32)
    b = rng.standard_normal(10, np.float32)

    def layer(x, w, b):
        return jax.nn.gelu(x @ w + b)

    shardings = (P("data", None), P(None, "model"), P("model"))
    f = causeway.jit(layer, devices=s, in_shardings=shardings, out_shardings=P("data", "model"))
    y = f(causeway.device_put(x, s, P("data", None)), w, b)
    assert y.sharding.hlo == "{devices=[2,2]<=[4]}"
    expected = jax.jit(layer)(x, w, b)
    np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-5, atol=1e-6)


def test_a_contraction_sharded_over_four_worker_processes_all_reduces_across_them(connected):
    s = causeway.make_virtual_device_set().add_slice(devices=4, mesh={"model": 4}, island=0)
    assert len({d.host for d in s.info(timeout=30).devices}) == 4
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 16), np.float32)
    w = rng.standard_normal((16, 5), np.float32)

    def logits(x, w):
        return jax.nn.softmax(x @ w)

    f = causeway.jit(logits, devices=s, in_shardings=(P(None, "model"), P("model", None)),
                     out_shardings=P())
    y = f(x, w)
    np.testing.assert_allclose(np.asarray(y), jax.jit(logits)(x, w), rtol=1e-5, atol=1e-6)
    assert "all-reduce" in f.as_text(x, w)


def test_reshard_and_a_pipeline_move_arrays_between_worker_processes(connected):
    vds = causeway.make_virtual_device_set()
    four = vds.add_slice(devices=4, mesh={"x": 4}, island=0)
    two = vds.add_slice(devices=2, mesh={"x": 2}, island=1)
    value = np.arange(32, dtype=np.float32).reshape(8, 4)  # Every sharding divides it.
    a = causeway.device_put(value, four, P("x"))
    np.testing.assert_array_equal(np.asarray(causeway.reshard(a, two, P("x"))), value)
    np.testing.assert_array_equal(np.asarray(causeway.reshard(a, two, P(None, "x"))), value)

    first = causeway.jit(lambda x: jnp.tanh(x) * 2, devices=four, in_shardings=P("x"),
                         out_shardings=P("x"))
    second = causeway.jit(lambda x: jnp.cumsum(x, axis=0), devices=two, in_shardings=P(None, None))

    @causeway.program
    def pipeline(x):
        return second(first(x))  # first's output moves to `two` by itself.

    expected = jax.jit(lambda x: jnp.cumsum(jnp.tanh(x) * 2, axis=0))(value)
    np.testing.assert_allclose(np.asarray(pipeline(value)), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_half_precision_arrays_cross_the_wire_as_their_ml_dtypes(connected, dtype):
    s = causeway.make_virtual_device_set().add_slice(devices=2, island=1)
    value = (np.arange(8, dtype=np.float32) / 3).astype(dtype)
    fn = lambda x: x * x + 1
    y = causeway.jit(fn, devices=s, in_shardings=P("x"))(value)
    out = np.asarray(y)
    assert y.dtype == np.dtype(dtype) and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.asarray(jax.jit(fn)(value)))


def test_a_session_closed_mid_work_fails_its_work_and_others_go_on(token_file):
    # As test_errors.py's embedded test, over two worker processes: the
    # doomed session on one, the other session on the other.
    with ProcessCluster("--islands", 2, "--hosts-per-island", 1, "--devices-per-host", 1,
                        "--memory-per-device", 8, "--token-file", token_file) as cluster:
        causeway.connect(cluster.address, token_file=token_file)
        try:
            close_a_session_mid_work(doomed_island=0, other_island=1)
        finally:
            causeway.disconnect()


def test_a_wrong_token_is_unauthenticated(one_device_workers, token_file):
    with pytest.raises(causeway.UnauthenticatedError):
        causeway.connect(one_device_workers.address, token="not-the-token")
    with pytest.raises(causeway.UnauthenticatedError):
        causeway.connect(one_device_workers.address)
    with open(token_file) as f:  # The token itself, not the file, works too.
        client = causeway.connect(one_device_workers.address, token=f.read().strip())
    assert len(client.devices()) == 8
    causeway.disconnect()


def test_tls_connects_a_client_that_trusts_the_heads_certificate_only(tmp_path):
    def make_certificate(name):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", f"/CN={name}",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", str(tmp_path / f"{name}.key"),
                        "-out", str(tmp_path / f"{name}.pem")],
                       check=True, capture_output=True, timeout=60)
        return str(tmp_path / f"{name}.pem"), str(tmp_path / f"{name}.key")

    cert, key = make_certificate("head")
    stranger, _ = make_certificate("stranger")
    with ProcessCluster("--tls-cert", cert, "--tls-key", key, command="head") as head:
        client = causeway.connect(head.address, tls_ca_file=cert)
        try:
            assert client.devices() == []  # A head that no worker joined yet.
            with causeway.session("over-tls"):
                assert "'over-tls'" in causeway.status()
        finally:
            causeway.disconnect()
        # Refused at once, saying why (waiting out the long timeout would
        # end in UnavailableError, "no head answered").
        for refused, why in (({"tls_ca_file": stranger}, "certificate is not trusted"),
                             ({}, "speaks TLS and this side does not")):
            with pytest.raises(causeway.UnauthenticatedError, match=why):
                causeway.connect(head.address, connect_timeout=60, **refused)


def test_a_failed_program_raises_where_used_and_the_session_goes_on(connected):
    s = causeway.make_virtual_device_set().add_slice(devices=2, island=1)

    def widen(x):
        return jnp.broadcast_to(x[:, None], (x.shape[0], 1 << 27))  # 4 GiB > 1 GiB per device.

    wide = causeway.jit(widen, devices=s)(np.ones(8, np.float32))  # No error yet.
    summed = causeway.jit(jnp.sum, devices=s)(wide)
    with pytest.raises(causeway.ResourceExhaustedError, match="program 'jit_widen'"):
        wide.block_until_ready(timeout=60)
    with pytest.raises(causeway.ResourceExhaustedError, match="jit_widen"):
        np.asarray(summed)
    double = causeway.jit(lambda x: x * 2, devices=s, in_shardings=P("x"))
    np.testing.assert_array_equal(np.asarray(double(np.arange(4, dtype=np.int32))),
                                  [0, 2, 4, 6])


def test_status_and_trace_show_the_sessions_work(connected, tmp_path):
    with causeway.session("cluster-tracer") as session:
        s = session.make_virtual_device_set().add_slice(devices=2, island=0)

        def scaled_sum(x):
            return jnp.sum(x) * 3

        assert float(np.asarray(causeway.jit(scaled_sum, devices=s)(np.ones(4, np.float32)))) == 12
        assert "'cluster-tracer'" in causeway.status()
        events = json.load(open(causeway.trace(str(tmp_path / "trace.json"))))["traceEvents"]
        assert any("scaled_sum" in e.get("name", "") for e in events)
    assert session.closed


def test_train_lm_runs_on_four_worker_processes(one_device_workers, token_file, tmp_path):
    # Its 2x2 slice spans four processes: the gradients' all-reduces cross them.
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples/python/train_lm.py"),
         "--cluster", one_device_workers.address, "--token-file", token_file,
         "--steps", "4", "--checkpoint-every", "2",
         "--checkpoint-dir", str(tmp_path), "--no-progress", "--text-bytes", "200000",
         "--check-jax"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "steps 0..4" in result.stdout
    assert sorted(os.listdir(tmp_path)) == ["step_000002.npz", "step_000004.npz"]
    difference = float(result.stdout.split("largest loss difference ")[1].split()[0])
    assert difference < 1e-4


def test_the_elastic_loop_recovers_from_a_killed_worker_with_the_same_parameters():
    with ProcessCluster("--islands", 1, "--hosts-per-island", 1, "--devices-per-host", 2,
                        "--spare-hosts", 1) as cluster:
        causeway.connect(cluster.address)
        try:
            with causeway.session("reference") as reference:
                s = reference.make_virtual_device_set().add_slice(devices=2)
                expected = np.asarray(Manager(snapshot_every=3).run(
                    make_train_step(s), initial_state(s), NUM_STEPS)["w"])

            s = causeway.make_virtual_device_set().add_slice(devices=2)
            before = s.info(timeout=30)
            (host,) = {d.host for d in before.devices}
            step = make_train_step(s)
            killed = []

            def step_losing_its_worker(state, k):
                if k == 5 and not killed:
                    killed.append(cluster.kill_worker(host))
                return step(state, k)

            manager = Manager(snapshot_every=3)
            final = manager.run(step_losing_its_worker, initial_state(s), NUM_STEPS)
            assert len(killed) == 1
            assert len(manager.events) == 1 and manager.events[0].restored_step == 3
            assert isinstance(manager.events[0].error, causeway.DataLossError)
            after = s.info(timeout=30)
            assert after.generation > before.generation
            assert host not in {d.host for d in after.devices}
            np.testing.assert_array_equal(np.asarray(final["w"]), expected)
        finally:
            causeway.disconnect()
