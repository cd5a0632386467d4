"""Bit for bit against the installed JAX: every f16 and bf16 value through
each unary op, random f32 values through the math functions, and random
f16 fusions whose multiplies XLA contracts into fused multiply-adds
(docs/hlo.md, "Rounding"). Programs are compiled fresh here and run with
`causeway run`; JAX's outputs are the reference and must match exactly."""
import numpy as np
import jax
import jax.numpy as jnp
from jax import lax
import ml_dtypes
import pytest

from conftest import load, module_text, run_causeway, save

UNARY = {
    "exp": jnp.exp, "log": jnp.log, "tanh": jnp.tanh, "logistic": jax.nn.sigmoid,
    "rsqrt": lax.rsqrt, "sqrt": jnp.sqrt, "expm1": jnp.expm1, "log1p": jnp.log1p,
    "erf": lax.erf, "sin": jnp.sin, "cos": jnp.cos, "sign": jnp.sign,
}


def bits(a):
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def run_both(tmp_path, f, *args):
    """JAX's outputs and Causeway's for `f` on `args` (one partition)."""
    compiled = jax.jit(f, keep_unused=True).lower(*args).compile()
    want = compiled(*args)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    (tmp_path / "f.hlo").write_text(module_text(compiled))
    inputs = []
    for i, a in enumerate(args):
        inputs += ["--input", save(tmp_path / f"in{i}.npy", np.asarray(a)[None])]
    run_causeway("run", tmp_path / "f.hlo", "--partitions", 1, *inputs,
                 "--output-dir", tmp_path / "out")
    got = []
    for i, w in enumerate(want):
        g = load(tmp_path / f"out/out{i}.npy")[0]
        got.append(g.view(np.asarray(w).dtype))
    return got, [np.asarray(w) for w in want]


def assert_same_bits(got, want, what=""):
    nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    differ = np.flatnonzero((bits(got) != bits(want)) & ~nan)
    assert differ.size == 0, (f"{what}: {differ.size} of {want.size} elements differ; first at "
                              f"{differ[:3]}: got {got.reshape(-1)[differ[:3]]}, "
                              f"want {want.reshape(-1)[differ[:3]]}")


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_every_half_value_through_every_unary_op_matches_jax(tmp_path, dtype):
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(dtype)
    ops = list(UNARY.values())
    got, want = run_both(tmp_path, lambda x: tuple(op(x) for op in ops), every)
    for name, g, w in zip(UNARY, got, want):
        assert_same_bits(g, w, name)


def test_random_f32_values_through_the_math_functions_match_jax(tmp_path):
    r = np.random.default_rng(7)
    n = 1 << 16
    x = np.concatenate([(r.standard_normal(n) * 30).astype(np.float32),
                        r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    ops = list(UNARY.values())
    got, want = run_both(tmp_path, lambda x: tuple(op(x) for op in ops), x)
    for name, g, w in zip(UNARY, got, want):
        assert_same_bits(g, w, name)


@pytest.mark.parametrize("seed", range(6))
def test_random_f16_fusions_with_multiply_adds_match_jax(tmp_path, seed):
    r = np.random.default_rng(200 + seed)
    a, b, c = [(r.standard_normal(4096) * 1.5).astype(np.float16) for _ in range(3)]
    steps = [int(r.integers(0, 6)) for _ in range(10)]

    def f(a, b, c):
        vals = [a, b, c]
        for k, step in enumerate(steps):
            u, v, w = vals[-1], vals[k % len(vals)], vals[(k * 5 + 1) % len(vals)]
            vals.append([u * v + w, w - u * v, -(u * v) + w, u * v + w * u,
                         jnp.exp(jnp.minimum(u, 3)) * v - w, jnp.maximum(u * v, w)][step])
        return vals[-1]

    (got,), (want,) = run_both(tmp_path, f, a, b, c)
    assert_same_bits(got, want)
