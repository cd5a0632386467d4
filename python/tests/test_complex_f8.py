"""Complex (complex64, complex128), f8 (ml_dtypes.float8_e4m3fn, float8_e5m2)
and int4 arrays through the Python client on an embedded cluster: device_put
and numpy.asarray give back the same bits, and causeway.jit gives JAX's
answer."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import causeway

F8 = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


def complex_values(dtype, seed):
    r = np.random.default_rng(seed)
    return (r.standard_normal((8, 6)) + 1j * r.standard_normal((8, 6))).astype(dtype)


def f8_values(dtype, seed):
    return (np.random.default_rng(seed).standard_normal((8, 16)) * 4).astype(dtype)


def assert_same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128] + F8 + [ml_dtypes.int4],
                         ids=["c64", "c128", "f8e4m3fn", "f8e5m2", "s4"])
def test_device_put_and_asarray_give_back_the_same_bits_sharded(cluster, dtype):
    cluster(devices_per_host=2)
    s = causeway.make_virtual_device_set().add_slice(devices=2)
    if np.dtype(dtype).kind == "c":
        value = complex_values(dtype, 1)
    elif dtype is ml_dtypes.int4:
        value = np.arange(-8, 8, dtype=np.int8).reshape(8, 2).astype(dtype)
    else:
        value = np.arange(256, dtype=np.uint8)[:128].reshape(8, 16).view(dtype)  # Every positive pattern.
    x = causeway.device_put(value, s, P("x"))
    assert x.dtype == np.dtype(dtype)
    assert_same_bits(np.asarray(x), value)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["c64", "c128"])
def test_jit_of_complex_arithmetic_matches_jax(cluster, dtype):
    cluster(devices_per_host=2)
    s = causeway.make_virtual_device_set().add_slice(devices=2)
    a, b = complex_values(dtype, 2), complex_values(dtype, 3)

    def fn(a, b):
        return a * b + jnp.exp(a), jnp.abs(b), jnp.conj(a) @ b.T, jnp.sum(a * b, axis=1)

    got = causeway.jit(fn, devices=s, in_shardings=(P("x"), P()))(a, b)
    # complex128 arguments keep their type (x64 on), as with float64.
    with jax.enable_x64(dtype == np.complex128):
        want = jax.jit(fn)(a, b)
    tol = 1e-5 if dtype == np.complex64 else 1e-12
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


def test_jit_of_an_fft_matches_jax(cluster):
    cluster(devices_per_host=2)
    s = causeway.make_virtual_device_set().add_slice(devices=2)
    x = np.random.default_rng(4).standard_normal((4, 16)).astype(np.float32)

    def fn(x):
        return jnp.fft.rfft(x), jnp.fft.ifft(jnp.fft.fft(x.astype(jnp.complex64)))

    got = causeway.jit(fn, devices=s, in_shardings=P("x"))(x)
    want = jax.jit(fn)(x)
    for g, w in zip(got, want):
        assert g.dtype == np.complex64
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("dtype", F8, ids=["f8e4m3fn", "f8e5m2"])
def test_jit_of_f8_arithmetic_and_a_dot_gives_jaxs_bits(cluster, dtype):
    cluster(devices_per_host=2)
    s = causeway.make_virtual_device_set().add_slice(devices=2)
    a, b = f8_values(dtype, 5), f8_values(dtype, 6)

    def fn(a, b):
        return (a * b + a, jnp.max(a, axis=1), a @ b.T,
                jnp.dot(a, b.T, preferred_element_type=jnp.float32))

    got = causeway.jit(fn, devices=s, in_shardings=(P("x"), P()))(a, b)
    want = jax.jit(fn)(a, b)
    for g, w in zip(got, want):
        assert_same_bits(np.asarray(g), np.asarray(w))


def test_an_f8_result_stays_on_the_slice_for_the_next_jit(cluster):
    cluster(devices_per_host=2)
    s = causeway.make_virtual_device_set().add_slice(devices=2)
    a = f8_values(ml_dtypes.float8_e4m3fn, 7)
    double = causeway.jit(lambda x: x + x, devices=s, in_shardings=P("x"), out_shardings=P("x"))
    y = double(double(a))
    assert y.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    want = jax.jit(lambda x: (x + x) + (x + x))(a)
    assert_same_bits(np.asarray(y), np.asarray(want))


def test_a_complex64_argument_keeps_jaxs_32_bit_defaults(cluster):
    # complex64's items are 8 bytes, but it is no 64-bit type: the function
    # is traced with x64 off, as jax.jit traces it (an int32 sum stays int32).
    cluster(devices_per_host=1)
    s = causeway.make_virtual_device_set().add_slice(devices=1)
    a = complex_values(np.complex64, 8)
    n = np.arange(6, dtype=np.int32)

    def fn(a, n):
        return a * 2.5, jnp.sum(n), jnp.arange(3)

    got = causeway.jit(fn, devices=s)(a, n)
    want = jax.jit(fn)(a, n)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
