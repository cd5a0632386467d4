"""`causeway run` against JAX itself, on programs compiled fresh by this
JAX (nothing here comes from the committed corpus): JAX writes the
partitioned module and the inputs, Causeway runs them, JAX's own results
are the reference."""
import numpy as np
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax import lax
import pytest

from conftest import load, module_text, run_causeway, save


def mesh(n, axes=("x",), shape=None):
    return Mesh(np.array(jax.devices()[:n]).reshape(shape or (n,)), axes)


def compile_sharded(fn, args, in_specs, out_specs, m):
    in_sh = [NamedSharding(m, s) for s in in_specs]
    out_sh = jax.tree.map(lambda s: NamedSharding(m, s), out_specs,
                          is_leaf=lambda s: isinstance(s, P))
    jitted = jax.jit(fn, in_shardings=in_sh, out_shardings=out_sh)
    args = [jax.device_put(a, s) for a, s in zip(args, in_sh)]
    compiled = jitted.lower(*args).compile()
    return module_text(compiled), compiled(*args)


def sharding_text(spec_tiles):
    return spec_tiles


def test_global_mode_runs_a_data_parallel_layer_like_jax(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 16), np.float32)
    x = rng.standard_normal((32, 8), np.float32)
    m = mesh(4)

    def f(w, x):
        h = jnp.tanh(x @ w)
        return h, jnp.mean(h ** 2)

    text, (h, loss) = compile_sharded(f, [w, x], [P(), P("x")], (P("x"), P()), m)
    (tmp_path / "f.hlo").write_text(text)
    run_causeway("run", tmp_path / "f.hlo", "--partitions", 4, "--global",
                 "--input", save(tmp_path / "w.npy", w),
                 "--input", save(tmp_path / "x.npy", x),
                 "--output-sharding", "{devices=[4,1]<=[4]}",
                 "--output-sharding", "{replicated}",
                 "--output-dir", tmp_path / "out")
    np.testing.assert_allclose(load(tmp_path / "out/out0.npy"), h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(load(tmp_path / "out/out1.npy"), loss, rtol=1e-5)


def test_stacked_mode_runs_shard_map_collectives_like_jax(tmp_path):
    from jax import shard_map
    m = mesh(4)
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 6) / 7

    def body(b):
        total = lax.psum(b, "x")
        shifted = lax.ppermute(b, "x", [(i, (i + 1) % 4) for i in range(4)])
        return total * shifted

    fn = shard_map(body, mesh=m, in_specs=P("x"), out_specs=P("x"))
    text, out = compile_sharded(fn, [x], [P("x")], P("x"), m)
    (tmp_path / "f.hlo").write_text(text)
    # Stacked: row p is partition p's shard of x (one row each here).
    run_causeway("run", tmp_path / "f.hlo", "--partitions", 4,
                 "--input", save(tmp_path / "x.npy", x.reshape(4, 1, 6)),
                 "--output-dir", tmp_path / "out")
    got = load(tmp_path / "out/out0.npy")
    assert got.shape == (4, 1, 6)
    np.testing.assert_allclose(got.reshape(4, 6), out, rtol=1e-6)


RANDOM_UNARY = [jnp.tanh, jnp.exp, jnp.sin, jnp.abs, jax.nn.relu, jax.nn.sigmoid,
                lambda a: jnp.sqrt(jnp.abs(a) + 1), jnp.negative]
RANDOM_BINARY = [jnp.add, jnp.subtract, jnp.multiply, jnp.maximum, jnp.minimum,
                 lambda a, b: a / (jnp.abs(b) + 1)]


def random_program(seed):
    """A random composition of elementwise ops, reductions, transposes and
    matmuls over square [8, 8] arrays."""
    r = np.random.default_rng(seed)
    ops = [int(r.integers(0, 4)) for _ in range(12)]
    picks = [int(r.integers(0, 1000)) for _ in range(12)]

    def f(a, b):
        vals = [a, b]
        for op, pick in zip(ops, picks):
            u, v = vals[pick % len(vals)], vals[(pick // 7) % len(vals)]
            if op == 0:
                vals.append(RANDOM_UNARY[pick % len(RANDOM_UNARY)](u))
            elif op == 1:
                vals.append(RANDOM_BINARY[pick % len(RANDOM_BINARY)](u, v))
            elif op == 2:
                vals.append(jnp.tanh(u @ v.T) if pick % 2 else u.T)
            else:
                vals.append(u - jnp.max(u, axis=pick % 2, keepdims=True))
        return vals[-1], sum(jnp.sum(t) for t in vals[2:])

    return f


@pytest.mark.parametrize("seed", range(12))
def test_random_programs_match_jax(tmp_path, seed):
    r = np.random.default_rng(100 + seed)
    a = r.standard_normal((8, 8), np.float32)
    b = r.standard_normal((8, 8), np.float32)
    f = jax.jit(random_program(seed), keep_unused=True)
    compiled = f.lower(a, b).compile()
    want = compiled(a, b)
    (tmp_path / "f.hlo").write_text(module_text(compiled))
    run_causeway("run", tmp_path / "f.hlo", "--partitions", 1,
                 "--input", save(tmp_path / "a.npy", a[None]),
                 "--input", save(tmp_path / "b.npy", b[None]),
                 "--output-dir", tmp_path / "out")
    for i, w in enumerate(want):
        np.testing.assert_allclose(load(tmp_path / f"out/out{i}.npy")[0], w,
                                   rtol=2e-5, atol=2e-5)
