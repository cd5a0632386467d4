# Generates the JAX-compiled HLO modules in this folder (JAX 0.10.2, CPU):
#   XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \
#     .venv/bin/python src/causeway/hlo/testdata/generate.py /tmp/out
# Modules are printed with print_large_constants (compile().as_text() elides
# constants of more than 10 elements even with --xla_dump_large_constants).
import os, sys
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import numpy as np
from functools import partial
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
import jaxlib._hlo as _hlo
def save(name, f, *args):
    c = jax.jit(f).lower(*args).compile()
    o = _hlo.HloPrintOptions()
    o.print_large_constants = True
    mods = c.runtime_executable().hlo_modules()
    assert len(mods) == 1
    t = mods[0].to_string(o)
    if name == "matmul_tanh":
        assert t.strip() == c.as_text().strip(), (t, c.as_text())
    open(f"{out}/{name}.hlo", "w").write(t)
    print(name, len(t))
x = jnp.ones((4,4), jnp.float32)
save("matmul_tanh", lambda x: jnp.tanh(x)@x.T, x)
save("big_const", lambda x: x + jnp.arange(16.0).reshape(4,4), x)
def wl(x):
    return jax.lax.fori_loop(0, 5, lambda i, c: c * 2.0 + i, x)
save("while_loop", wl, jnp.ones((3,)))
def cond(p, x):
    return jax.lax.cond(p > 0, lambda x: jnp.sin(x), lambda x: jnp.cos(x) * 3, x)
save("cond", cond, jnp.float32(1), jnp.ones((3,)))
def conv(x, w):
    return jax.lax.conv_general_dilated(x, w, (1,1), "SAME", dimension_numbers=("NHWC","HWIO","NHWC"))
save("conv", conv, jnp.ones((1,8,8,3)), jnp.ones((3,3,3,4)))
def gs(x, idx, u):
    return x[idx].sum() + x.at[idx].add(u).sum()
save("gather_scatter", gs, jnp.ones((10,3)), jnp.array([1,3,5]), jnp.ones((3,3)))
save("sort", lambda x: jnp.sort(x), jnp.array([3.,1.,2.,5.]))
save("argsort", lambda x: jnp.argsort(x), jnp.array([3.,1.,2.,5.]))
save("dtypes", lambda a, b, c: (a.astype(jnp.bfloat16) * 2, b.astype(jnp.float16)+1, c.astype(jnp.int8), c.astype(jnp.uint64)), jnp.ones((3,)), jnp.ones((3,)), jnp.arange(3))
save("consts", lambda x: x * jnp.array([np.inf, -np.inf, np.nan, 1e-30, 3.14159, -0.0, 1e38, 2**-149]), jnp.ones((8,)))
save("rng", lambda k: jax.random.normal(k, (4,)), jax.random.key(0))
save("reduce_window", lambda x: jax.lax.reduce_window(x, 0., jax.lax.add, (2,2), (1,1), "SAME"), jnp.ones((4,4)))
save("cumsum", lambda x: jnp.cumsum(x), jnp.ones((16,)))
mesh = Mesh(np.array(jax.devices()[:8]), ("i",))
from jax import shard_map
def sm(x):
    def body(x):
        y = jax.lax.ppermute(x, "i", [(j, (j+1)%8) for j in range(8)])
        z = jax.lax.all_to_all(y, "i", 0, 0, tiled=True)
        s = jax.lax.psum(z, "i")
        g = jax.lax.all_gather(x, "i", tiled=True)
        r = jax.lax.psum_scatter(g, "i", tiled=True)
        return s + r + jax.lax.axis_index("i")
    return shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i"))(x)
save("shard_map_collectives", sm, jnp.ones((64,)))
mesh2 = Mesh(np.array(jax.devices()[:8]).reshape(2,4), ("a","b"))
xs = jax.device_put(jnp.ones((8,16)), NamedSharding(mesh2, P("a","b")))
ws = jax.device_put(jnp.ones((16,8)), NamedSharding(mesh2, P("b",None)))
save("sharded_mlp", lambda x, w: jax.nn.relu(x @ w).sum(), xs, ws)

c = np.arange(24, dtype=np.float32).reshape(2,3,4) * 1.5
save("large_constant", lambda x: x * c, jnp.ones((2,3,4)))
save("rbg", lambda k: jax.random.bits(k, (8,)), jax.random.key(0, impl="rbg"))
def misc(x, i):
    y = jax.lax.dynamic_slice(x, (i, 0), (2, 4))
    z = jax.lax.dynamic_update_slice(x, y * 2, (0, i))
    p = jnp.pad(x, ((1, 2), (0, 1)))
    r = jax.lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10)
    return z, p, jnp.concatenate([x, x[::-1]], 0), r, jax.lax.rev(x, (1,))
save("misc_ops", misc, jnp.ones((6,4)), 1)
def maxpool_grad(x):
    return jax.grad(lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1,2,2,1), (1,2,2,1), "VALID").sum())(x)
save("select_and_scatter", maxpool_grad, jnp.arange(32.).reshape(1,4,4,2))
def switch(i, x):
    return jax.lax.switch(i, [lambda x: x + 1, lambda x: x * 2, lambda x: -x], x)
save("switch", switch, 1, jnp.ones((3,)))
def scan_fn(xs):
    return jax.lax.scan(lambda c, x: (c + x, c * x), 0., xs)
save("scan", scan_fn, jnp.arange(5.))
def attn(q, k):
    s = jnp.einsum("bqd,bkd->bqk", q, k)
    return jax.nn.softmax(s, axis=-1)
save("batched_dot_softmax", attn, jnp.ones((2,3,4)), jnp.ones((2,5,4)))
save("int_types", lambda a: (a.astype(jnp.int8) << 2, a.astype(jnp.uint8) + 250, jnp.int32(-2147483648) + a, a.astype(jnp.int16) // 3), jnp.arange(4))
save("bf16_consts", lambda x: x * jnp.array([1.5, -2.25, 3e38, 1e-40, np.inf, np.nan, 0.1, -0.0, 65504, 7], jnp.bfloat16) + jnp.array([0.1]*10 , jnp.float16).astype(jnp.bfloat16), jnp.ones((10,), jnp.bfloat16))
save("f16_consts", lambda x: x * jnp.array([1.5, -2.25, 65504, 6e-8, np.inf, np.nan, 0.1, -0.0, 1e-4, 7, 3, 4], jnp.float16), jnp.ones((12,), jnp.float16))
mesh4 = Mesh(np.array(jax.devices()[:8]).reshape(4,2), ("x","y"))
def sm2(x):
    def body(x):
        a = jax.lax.all_to_all(x, "x", 1, 1, tiled=True)
        b = jax.lax.psum(a, ("x", "y"))
        c = jax.lax.pmax(x, "y")
        d = jax.lax.ppermute(x, "x", [(0,1),(1,2),(2,3)])
        return b + c + d
    return shard_map(body, mesh=mesh4, in_specs=P("x","y"), out_specs=P("x","y"))(x)
save("shard_map_2d", sm2, jnp.ones((16,16)))
xs2 = jax.device_put(jnp.ones((8,16)), NamedSharding(mesh4, P("x",None)))
save("reshard_transpose", lambda x: jax.lax.with_sharding_constraint(x.T @ x, NamedSharding(mesh4, P(None, "y"))), xs2)
# Mesh-axes replica groups with a device order (`device_ids=([2,4]T(1,0))`).
mesh24 = Mesh(np.array(jax.devices()[:8]).reshape(2,4), ("a","b"))
def mesh_order(x):
    y = jax.lax.with_sharding_constraint(x * 2, NamedSharding(mesh24, P("b", None)))
    z = shard_map(lambda t: jax.lax.psum(t, "a"), mesh=mesh24, in_specs=P("a","b"), out_specs=P(None,"b"))(x)
    return y.sum() + z.sum()
save("mesh_device_ids", mesh_order, jax.device_put(jnp.ones((8,16)), NamedSharding(mesh24, P("a","b"))))
