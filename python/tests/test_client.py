"""The Python client on an embedded cluster, against numpy's and JAX's own
results: connecting, slices, jit/pmap/program, arrays, moves, dtypes."""
import importlib.metadata
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
from conftest import WhenThisThreadLetsGo, waiting_for_memory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_package_states_its_installed_version():
    assert causeway.__version__ == importlib.metadata.version("causeway")


def test_connect_starts_an_embedded_cluster_of_the_sizes_asked(cluster):
    client = cluster(islands=2, hosts_per_island=2, devices_per_host=3)
    devices = client.devices()
    assert len(devices) == 12
    assert client.num_islands == 2
    assert {d.island for d in devices} == {0, 1}
    assert {d.host for d in devices} == {0, 1, 2, 3}
    assert causeway.current_client() is client


def test_a_slice_has_virtual_devices_a_mesh_and_a_mapping(cluster):
    cluster(islands=1, devices_per_host=4)
    s = causeway.make_virtual_device_set().add_slice(devices=4, mesh={"data": 2, "model": 2})
    assert len(s.devices) == 4 and s.devices[2].index == 2
    assert s.mesh.shape == {"data": 2, "model": 2}
    assert s.axis_names == ("data", "model")
    info = s.info(timeout=10)
    assert sorted(d.id for d in info.devices) == [0, 1, 2, 3]
    assert s.devices[0].physical() == info.devices[0]


def test_a_queued_slice_is_usable_before_it_is_granted(cluster):
    cluster(devices_per_host=2)
    first = causeway.session("first")
    held = first.make_virtual_device_set().add_slice(devices=2)
    held.info(timeout=10)
    queued = causeway.make_virtual_device_set().add_slice(devices=2)
    double = causeway.jit(lambda x: x * 2, devices=queued)
    y = double(np.arange(4, dtype=np.float32))
    assert not queued.granted and not y.is_ready()
    first.close()  # Its devices go to the queued slice, which then runs.
    np.testing.assert_array_equal(np.asarray(y), [0, 2, 4, 6])


def test_figure2_prints_what_the_paper_prints():
    result = subprocess.run([sys.executable, os.path.join(ROOT, "examples/python/figure2.py")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "(array([3., 5.]), array([2., 4.]))\n"


def test_a_program_submits_its_calls_as_one_graph_over_three_slices(cluster):
    cluster(islands=3, devices_per_host=2)
    a = causeway.pmap(lambda x: x * 2., devices=causeway.make_virtual_device_set().add_slice(devices=2))
    b = causeway.pmap(lambda x: x + 1., devices=causeway.make_virtual_device_set().add_slice(devices=2))

    @causeway.program
    def f(v):
        x = a(v)
        return b(x), a(a(x))

    y, z = f(np.array([1., 2.], np.float32))
    assert y.slice is b.slice and z.slice is a.slice
    np.testing.assert_array_equal(np.asarray(y), [3, 5])
    np.testing.assert_array_equal(np.asarray(z), [8, 16])
    trace = json.loads(causeway.current_session()._impl.trace(10))
    names = [e.get("name", "") for e in trace["traceEvents"]]
    assert sum("transfer" in e.get("cat", "") for e in trace["traceEvents"]) > 0
    assert any("lambda" in n for n in names)


def test_tensor_parallel_matmul_on_a_2x2_mesh_matches_numpy(cluster):
    cluster(devices_per_host=4)
    s = causeway.make_virtual_device_set().add_slice(devices=4, mesh={"data": 2, "model": 2})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6), np.float32)
    w = rng.standard_normal((6, 10), np.float32)
    matmul = causeway.jit(lambda x, w: jnp.tanh(x @ w), devices=s,
                          in_shardings=(P("data", None), P(None, "model")),
                          out_shardings=P("data", "model"))
    y = matmul(causeway.device_put(x, s, P("data", None)), w)
    assert y.shape == (8, 10) and y.dtype == np.float32
    assert y.sharding.spec == P("data", "model")
    assert y.sharding.hlo == "{devices=[2,2]<=[4]}"
    np.testing.assert_allclose(np.asarray(y), np.tanh(x @ w), rtol=1e-5, atol=1e-6)


def test_a_contracting_dimension_split_over_the_model_axis_all_reduces(cluster):
    cluster(devices_per_host=4)
    s = causeway.make_virtual_device_set().add_slice(devices=4, mesh={"data": 2, "model": 2})
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8), np.float32)
    w = rng.standard_normal((8, 3), np.float32)
    matmul = causeway.jit(lambda x, w: x @ w, devices=s,
                          in_shardings=(P("data", "model"), P("model", None)),
                          out_shardings=P("data", None))
    assert "all-reduce" in matmul.as_text(x, w)
    np.testing.assert_allclose(np.asarray(matmul(x, w)), x @ w, rtol=1e-5, atol=1e-5)


def test_reshard_moves_arrays_between_slices_of_different_sizes(cluster):
    cluster(islands=2, devices_per_host=4)
    vds = causeway.make_virtual_device_set()
    four = vds.add_slice(devices=4, mesh={"x": 4}, island=0)
    two = vds.add_slice(devices=2, mesh={"x": 2}, island=1)
    one = vds.add_slice(devices=1, island=1)
    value = np.arange(24, dtype=np.float32).reshape(8, 3)
    a = causeway.device_put(value, four, P("x"))
    b = causeway.reshard(a, two, P(None, None))
    c = causeway.reshard(a, two, P("x"))
    d = causeway.reshard(c, one)
    assert b.slice is two and b.sharding.is_replicated
    assert c.sharding.hlo == "{devices=[2,1]<=[2]}"
    for moved in (b, c, d):
        np.testing.assert_array_equal(np.asarray(moved), value)


def test_a_pipeline_across_two_slices_matches_jax(cluster):
    cluster(islands=2, devices_per_host=2)
    vds = causeway.make_virtual_device_set()
    first, second = vds.add_slice(devices=2, island=0), vds.add_slice(devices=2, island=1)
    rng = np.random.default_rng(2)
    w1 = rng.standard_normal((5, 7), np.float32)
    w2 = rng.standard_normal((7, 3), np.float32)
    x = rng.standard_normal((8, 5), np.float32)

    def stage1(w, x):
        return jax.nn.relu(x @ w)

    def stage2(w, h):
        return jax.nn.log_softmax(h @ w)

    s1 = causeway.jit(stage1, devices=first, in_shardings=(P(), P("x")), out_shardings=P("x"))
    s2 = causeway.jit(stage2, devices=second, in_shardings=(P(), P("x")), out_shardings=P("x"))
    p1 = causeway.device_put(w1, first)
    p2 = causeway.device_put(w2, second)

    @causeway.program
    def pipeline(micro_batches):
        return [s2(p2, s1(p1, m)) for m in micro_batches]

    outs = pipeline([x[:4], x[4:]])  # The stage-1 output moves to `second` by itself.
    expected = jax.jit(lambda x: stage2(w2, stage1(w1, x)))(x)
    np.testing.assert_allclose(np.concatenate([np.asarray(o) for o in outs]), expected,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_half_precision_arrays_arrive_as_their_ml_dtypes(cluster, dtype):
    cluster(devices_per_host=2)
    s = causeway.make_virtual_device_set().add_slice(devices=2)
    value = (np.arange(8, dtype=np.float32) / 3).astype(dtype)
    fn = lambda x: x * x + 1
    y = causeway.jit(fn, devices=s, in_shardings=P("x"))(value)
    assert y.dtype == np.dtype(dtype)
    out = np.asarray(y)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.asarray(jax.jit(fn)(value)))


def test_pmap_maps_over_devices_and_its_collectives_span_them(cluster):
    cluster(devices_per_host=4)
    s = causeway.make_virtual_device_set().add_slice(devices=4)
    centred = causeway.pmap(lambda x: x - jax.lax.pmean(x, "i"), devices=s.devices, axis_name="i")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(np.asarray(centred(x)), x - x.mean(0), atol=1e-6)
    with pytest.raises(causeway.InvalidArgumentError, match="leading axis must be 4"):
        centred(x[:3])


def test_jit_compiles_once_per_input_signature(cluster):
    cluster(devices_per_host=2)
    s = causeway.make_virtual_device_set().add_slice(devices=2)
    traced = []

    def f(x):
        traced.append(x.shape)
        return x + 1

    g = causeway.jit(f, devices=s)
    g(np.zeros(4, np.float32))
    g(np.ones(4, np.float32))
    y = g(np.zeros(6, np.float32))
    g(y)  # On the slice now, replicated: the same placement as before.
    assert traced == [(4,), (6,)]
    np.testing.assert_array_equal(np.asarray(g(g(y))), np.full(6, 3))


def test_a_64_device_slice_compiles_and_runs(cluster):
    cluster(hosts_per_island=8, devices_per_host=8)
    s = causeway.make_virtual_device_set().add_slice(devices=64, mesh={"data": 8, "model": 8})
    x = np.arange(64 * 4, dtype=np.float32).reshape(64, 4)
    f = causeway.jit(lambda x: jnp.sum(x * 2, axis=1), devices=s,
                     in_shardings=P(("data", "model")), out_shardings=P())
    assert "num_partitions=64" in f.as_text(x)
    np.testing.assert_allclose(np.asarray(f(x)), (x * 2).sum(1))


def test_an_array_is_a_future_with_shape_dtype_and_sharding(cluster):
    cluster(devices_per_host=2)
    s = causeway.make_virtual_device_set().add_slice(devices=2)
    a = causeway.device_put(np.arange(6, dtype=np.int32).reshape(2, 3), s, P("x"))
    assert a.shape == (2, 3) and a.dtype == np.int32 and a.ndim == 2
    assert a.sharding.spec == P("x") and a.sharding.slice is s
    assert a.block_until_ready() is a and a.is_ready()
    assert repr(a) == repr(np.arange(6, dtype=np.int32).reshape(2, 3))
    from_jax = causeway.device_put(jnp.arange(4.0), s, P("x"))
    assert from_jax.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(from_jax), [0, 1, 2, 3])
    a.delete()
    assert a.is_deleted()
    with pytest.raises(causeway.FailedPreconditionError, match="deleted"):
        causeway.jit(lambda x: x, devices=s)(a)


def test_scalars_keep_their_rank(cluster):
    cluster(devices_per_host=1)
    s = causeway.make_virtual_device_set().add_slice(devices=1)
    x = causeway.device_put(np.float32(2.5), s)
    y = causeway.jit(lambda x: x * 2, devices=s)(x)
    assert x.shape == () and y.shape == ()
    assert float(np.asarray(y)) == 5.0


def test_waiting_releases_the_gil(cluster):
    # y waits until blocker is deleted, and only the other thread deletes
    # it, once this one lets go of the GIL: a wait that held the GIL would
    # end with DeadlineExceededError.
    y, blocker = waiting_for_memory(cluster)
    freed = []

    def free():
        freed.append(y.is_ready())  # Not yet: its memory is still taken.
        blocker.delete()

    with WhenThisThreadLetsGo(free) as helper:
        helper.go()
        y.block_until_ready(timeout=60)
    assert freed == [False]
    assert float(np.asarray(y)) == 3.0


def test_status_and_trace_show_the_sessions_work(cluster, tmp_path):
    cluster(devices_per_host=2)
    with causeway.session("tracer") as session:
        s = session.make_virtual_device_set().add_slice(devices=2)

        def scaled_sum(x):
            return jnp.sum(x) * 3

        np.asarray(causeway.jit(scaled_sum, devices=s)(np.ones(4, np.float32)))
        assert "'tracer'" in causeway.status()
        path = causeway.trace(str(tmp_path / "trace.json"))
        events = json.load(open(path))["traceEvents"]
        assert any("scaled_sum" in e.get("name", "") for e in events)
    assert session.closed
