"""Runtime errors as Python exceptions, and sessions that end mid-work: the
error is raised where it is used, and everything else goes on."""
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import causeway
from conftest import WhenThisThreadLetsGo, close_a_session_mid_work, waiting_for_memory


def test_error_classes_follow_the_status_codes():
    assert issubclass(causeway.InvalidArgumentError, causeway.Error)
    assert issubclass(causeway.InvalidArgumentError, ValueError)
    assert issubclass(causeway.DeadlineExceededError, TimeoutError)
    assert issubclass(causeway.UnimplementedError, NotImplementedError)
    assert causeway.DataLossError.code == 15
    error = causeway.errors._from_status(9, "session closed")
    assert isinstance(error, causeway.FailedPreconditionError)
    assert str(error) == "FAILED_PRECONDITION: session closed"


def test_a_sharding_naming_an_unknown_axis_is_a_value_error(cluster):
    cluster(devices_per_host=2)
    s = causeway.make_virtual_device_set().add_slice(devices=2, mesh={"data": 2})
    with pytest.raises(ValueError, match="names mesh axis 'model'"):
        causeway.device_put(np.zeros(4, np.float32), s, P("model"))
    with pytest.raises(causeway.InvalidArgumentError, match="rank 1"):
        causeway.jit(lambda x: x, devices=s, in_shardings=P("data", None))(np.zeros(4))
    with pytest.raises(causeway.InvalidArgumentError, match="float128 is not supported"):
        causeway.device_put(np.zeros(2, np.longdouble), s)
    # The session goes on.
    np.testing.assert_array_equal(np.asarray(causeway.device_put(np.ones(4), s, P("data"))), 1)


def test_a_failed_program_raises_where_its_result_is_used_and_the_session_goes_on(cluster):
    cluster(devices_per_host=2, memory_per_device=1 << 14)  # 16 KiB per device.
    s = causeway.make_virtual_device_set().add_slice(devices=2)

    def widen(x):
        return jnp.broadcast_to(x[:, None], (x.shape[0], 8192))  # 256 KiB per device

    wide = causeway.jit(widen, devices=s)(np.ones(8, np.float32))  # No error yet.
    summed = causeway.jit(jnp.sum, devices=s)(wide)
    with pytest.raises(causeway.ResourceExhaustedError, match="program 'jit_widen'"):
        wide.block_until_ready()
    # The error flows into what is computed from the failed array ...
    with pytest.raises(causeway.ResourceExhaustedError, match="jit_widen"):
        np.asarray(summed)
    # ... and nowhere else.
    double = causeway.jit(lambda x: x * 2, devices=s)
    np.testing.assert_array_equal(np.asarray(double(np.arange(4.0, dtype=np.float32))), [0, 2, 4, 6])


def test_a_wait_with_a_timeout_raises_deadline_exceeded(cluster):
    y, blocker = waiting_for_memory(cluster)  # Unfinished until blocker goes.
    with pytest.raises(causeway.DeadlineExceededError, match="not ready within"):
        y.block_until_ready(timeout=0.001)
    blocker.delete()
    y.block_until_ready(timeout=60)
    assert float(np.asarray(y)) == 3.0


def test_ctrl_c_interrupts_a_wait(cluster):
    import os
    import signal
    y, blocker = waiting_for_memory(cluster)  # Unfinished until blocker goes.
    # Python raises KeyboardInterrupt only where SIGINT was not ignored when
    # it started, and a process started in the background of a shell
    # without job control inherits it ignored: the test sets Python's
    # handler itself, as an interactive Python has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # The SIGINT comes once this thread waits (and lets go of the GIL).
        with WhenThisThreadLetsGo(lambda: os.kill(os.getpid(), signal.SIGINT)) as ctrl_c:
            with pytest.raises(KeyboardInterrupt):
                ctrl_c.go()
                y.block_until_ready(timeout=60)
        assert not y.is_ready()  # The wait ended, not the work.
    finally:
        signal.signal(signal.SIGINT, previous)
        # Lets y finish whatever happened above: a failure's report shows
        # y's value, which waits for it.
        blocker.delete()
    y.block_until_ready(timeout=60)


def test_a_session_closed_mid_work_fails_its_work_and_others_go_on(cluster):
    cluster(devices_per_host=2, memory_per_device=8)
    close_a_session_mid_work()


def test_a_with_block_closes_its_session(cluster):
    cluster(devices_per_host=2)
    with causeway.session("scoped") as scoped:
        assert causeway.current_session() is scoped
        s = causeway.make_virtual_device_set().add_slice(devices=2)
        a = causeway.device_put(np.arange(4), s)
        np.testing.assert_array_equal(np.asarray(a), np.arange(4))
    assert scoped.closed and causeway.current_session() is not scoped
    with pytest.raises(causeway.FailedPreconditionError):
        causeway.reshard(a, s)


def test_connecting_to_an_address_where_no_head_answers_is_unavailable_and_frees_the_gil():
    # The other thread runs only once this one lets go of the GIL: while
    # connect dials if connect lets go, after it returns if not.
    dialling = [False]
    seen = []
    with WhenThisThreadLetsGo(lambda: seen.append(dialling[0])) as other:
        with pytest.raises(causeway.UnavailableError, match="127.0.0.1:1"):
            dialling[0] = True
            other.go()
            causeway.connect("127.0.0.1:1", connect_timeout=1)
        dialling[0] = False
    assert seen == [True]


def test_connect_refuses_options_of_the_other_kind_of_cluster():
    with pytest.raises(causeway.InvalidArgumentError, match="devices_per_host"):
        causeway.connect("127.0.0.1:1", devices_per_host=4)
    with pytest.raises(causeway.InvalidArgumentError, match="token"):
        causeway.connect(token="secret")
    with pytest.raises(causeway.InvalidArgumentError, match="HOST:PORT"):
        causeway.connect("localhost")
    with pytest.raises(causeway.InvalidArgumentError, match="not both"):
        causeway.connect("127.0.0.1:1", token="a", token_file="b")
