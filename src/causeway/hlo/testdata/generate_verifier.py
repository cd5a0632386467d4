# Generates the verifier_*.hlo modules in this folder: JAX-compiled programs
# (JAX 0.10.2, CPU, 8 fake devices) whose op and attribute combinations the
# verifier must accept: MLP train step, convolutions, gather/scatter, sort
# and argmax (variadic reduce), while/scan/cond/switch, rng-bit-generator,
# pooling (variadic reduce-window), and SPMD programs with every collective
# (tuple all-reduce, tuple all-to-all, mesh and iota replica groups).
#   XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \
#     .venv/bin/python src/causeway/hlo/testdata/generate_verifier.py DIR
import os
import sys

import jax
import jax.numpy as jnp
import jaxlib._hlo as _hlo
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, f, *args):
    compiled = jax.jit(f).lower(*args).compile()
    options = _hlo.HloPrintOptions()
    options.print_large_constants = True
    (module,) = compiled.runtime_executable().hlo_modules()
    text = module.to_string(options)
    with open(f"{out}/verifier_{name}.hlo", "w") as file:
        file.write(text)
    print(name, len(text))


def mlp_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.gelu(h @ w + b)
    w, b = params[-1]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ w + b) * y, axis=-1))


def train_step(params, x, y):
    loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
    return loss, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


params = [(jnp.ones((16, 32)), jnp.zeros(32)), (jnp.ones((32, 8)), jnp.zeros(8))]
save("mlp_train", train_step, params, jnp.ones((4, 16)),
     jax.nn.one_hot(jnp.arange(4) % 8, 8))


def conv(x, w):
    nhwc = ("NHWC", "HWIO", "NHWC")
    y = jax.lax.conv_general_dilated(x, w, (2, 1), "SAME", rhs_dilation=(1, 2),
                                     dimension_numbers=nhwc)
    z = jax.lax.conv_general_dilated(y, jnp.ones((3, 3, 2, 4)), (1, 1), "VALID",
                                     feature_group_count=2,
                                     dimension_numbers=nhwc)
    return jnp.sum(z ** 2)


save("conv", jax.value_and_grad(conv, argnums=(0, 1)), jnp.ones((2, 9, 9, 4)),
     jnp.ones((3, 3, 4, 4)))


def pools(x):
    mx = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1),
                               (1, 2, 2, 1), "VALID")
    av = jax.lax.reduce_window(x, 0., jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1),
                               "SAME")
    return mx.sum() + av.sum()


save("pools", jax.grad(pools), jnp.ones((2, 8, 8, 3)))


def embed(table, ids, upd):
    return (table[ids].sum(), table.at[ids].add(upd),
            table.at[ids[:, None], jnp.arange(3)[None, :]].set(1.0))


save("gather_scatter", embed, jnp.ones((10, 3)), jnp.array([1, 2, 5, 7]),
     jnp.ones((4, 3)))


def sorts(x, k):
    return (jnp.sort(x, axis=0), jnp.argsort(x[:, 0]), jnp.argmax(x, axis=1),
            jax.lax.sort((x, k), num_keys=1))


save("sort", sorts, jnp.ones((5, 4)), jnp.ones((5, 4), jnp.int32))


def control(x, n):
    r = jax.lax.while_loop(lambda c: c[0] < n,
                           lambda c: (c[0] + 1, jnp.tanh(c[1]) * 2), (0, x))
    s = jax.lax.scan(lambda c, a: (c + a, c * a), jnp.zeros(3), jnp.ones((5, 3)))
    c = jax.lax.cond(n > 2, lambda v: v * 2, lambda v: v - 1, x)
    sw = jax.lax.switch(n, [lambda v: v, lambda v: v + 1, jnp.sin], x)
    return r, s, c, sw


save("control", control, jnp.ones(3), 5)
save("rng", lambda: jax.random.bits(jax.random.key(0, impl="rbg"), (4, 3)))

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("d", "m"))


def sharded(spec):
    return NamedSharding(mesh, spec)


def mlp_sharded(w1, w2, x):
    return jax.grad(lambda w1, w2: jnp.sum(jnp.tanh(x @ w1) @ w2))(w1, w2)


save("sharded_mlp", mlp_sharded,
     jax.device_put(jnp.ones((16, 32)), sharded(P(None, "m"))),
     jax.device_put(jnp.ones((32, 8)), sharded(P("m", None))),
     jax.device_put(jnp.ones((8, 16)), sharded(P("d", None))))
save("reshard",
     lambda x: jax.lax.with_sharding_constraint(
         x * 2, sharded(P(None, ("d", "m")))) + 1,
     jax.device_put(jnp.ones((16, 16)), sharded(P(("d", "m"), None))))


def fsdp(w1, w2, x):
    def loss(w1, w2):
        return jnp.mean(jax.nn.relu(x @ w1) @ w2)
    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


fsdp_spec = sharded(P(("d", "m"), None))
save("fsdp", fsdp, jax.device_put(jnp.ones((16, 32)), fsdp_spec),
     jax.device_put(jnp.ones((32, 16)), fsdp_spec),
     jax.device_put(jnp.ones((8, 16)), fsdp_spec))


def collectives(x):
    def body(b):
        s = jax.lax.psum(b, "m")
        g = jax.lax.all_gather(b, "m", axis=0, tiled=True)
        rs = jax.lax.psum_scatter(b, "m", scatter_dimension=1, tiled=True)
        a2a = jax.lax.all_to_all(b, "m", 0, 1, tiled=True)
        pp = jax.lax.ppermute(b, "m", [(i, (i + 1) % 4) for i in range(4)])
        mx = jax.lax.pmax(b, ("d", "m"))
        idx = jax.lax.axis_index("m")
        t = jax.lax.psum((b, b * 2), "d")
        return s + mx + pp + idx + t[0] + t[1], g, rs, a2a
    spec = P("d", "m")
    return jax.shard_map(body, mesh=mesh, in_specs=spec,
                         out_specs=(spec, spec, spec, spec),
                         check_vma=False)(x)


save("shard_map", collectives, jnp.ones((16, 32)))
