"""The elastic helper: a training loop that loses a host part-way through
recovers from its last snapshot and ends where an uninterrupted run ends."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import causeway
from causeway.elastic import Manager

NUM_STEPS = 10


def make_train_step(s):
    """Linear regression by SGD on the slice, data-parallel over its axis;
    step k's batch depends on k alone."""
    rng = np.random.default_rng(0)
    true_w = rng.standard_normal(4).astype(np.float32)

    def loss(w, x, y):
        return jnp.mean((x @ w - y) ** 2)

    update = causeway.jit(lambda w, x, y: w - 0.1 * jax.grad(loss)(w, x, y), devices=s,
                          in_shardings=(P(), P("x"), P("x")), out_shardings=P())

    def step(state, k):
        x = np.random.default_rng(100 + k).standard_normal((8, 4)).astype(np.float32)
        return {"w": update(state["w"], x, x @ true_w)}

    return step


def initial_state(s):
    return {"w": causeway.device_put(np.zeros(4, np.float32), s)}


def test_the_elastic_loop_recovers_from_a_stopped_host_with_the_same_parameters(cluster):
    cluster(islands=1, hosts_per_island=2, devices_per_host=2,
            heartbeat_interval=0.02, heartbeat_timeout=0.3)
    with causeway.session("reference") as reference:
        s = reference.make_virtual_device_set().add_slice(devices=2)
        expected = np.asarray(Manager(snapshot_every=3).run(
            make_train_step(s), initial_state(s), NUM_STEPS)["w"])

    s = causeway.make_virtual_device_set().add_slice(devices=2)
    host = s.info(timeout=10).devices[0].host
    step = make_train_step(s)
    stopped = []

    def step_losing_a_host(state, k):
        if k == 5 and not stopped:
            causeway.stop_host(host)  # Returns once the head declared it dead.
            stopped.append(k)
        return step(state, k)

    generation = s.info().generation
    manager = Manager(snapshot_every=3)
    final = manager.run(step_losing_a_host, initial_state(s), NUM_STEPS)
    assert stopped == [5]
    assert [(e.failed_step, e.restored_step) for e in manager.events] == [(6, 3)]
    assert isinstance(manager.events[0].error, causeway.DataLossError)
    info = s.info()
    assert info.generation > generation and host not in {d.host for d in info.devices}
    np.testing.assert_array_equal(np.asarray(final["w"]), expected)


def test_the_elastic_loop_gives_up_after_max_retries(cluster):
    cluster(islands=1, hosts_per_island=2, devices_per_host=2,
            heartbeat_interval=0.02, heartbeat_timeout=0.3)
    s = causeway.make_virtual_device_set().add_slice(devices=2)
    step = make_train_step(s)

    def step_losing_its_host(state, k):
        if k == 1:
            causeway.stop_host(s.info().devices[0].host)
        return step(state, k)

    with pytest.raises(causeway.DataLossError):
        Manager(snapshot_every=2, max_retries=0).run(step_losing_its_host, initial_state(s), 4)
