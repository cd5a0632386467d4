#!/usr/bin/env python3
"""Writes the JAX conformance corpus: programs, inputs and JAX's outputs.

Each program is a JAX function compiled by XLA's CPU backend for N partitions
(N fake host devices). For each one this script writes, into
`<out>/<name>/`:

  program.hlo   the optimized, partitioned module exactly as XLA prints it
                (`compiled.as_text()`), except that constants of any size are
                printed in full instead of `{...}`;
  manifest.txt  a line-based description (see docs/corpus.md);
  in<i>.npy     the inputs, one per entry parameter, in parameter order;
  out<i>.npy    JAX's outputs, one per element of the (flattened) root tuple.

Every array is "stacked": its leading axis is the partition, and slice p is
the buffer partition p receives (inputs) or produces (outputs). A replicated
array is therefore stored N times.

Usage:
  .venv/bin/python tools/gen_corpus.py --out tests/corpus [--only NAME ...]
  .venv/bin/python tools/gen_corpus.py --bench-only --out DIR
  .venv/bin/python tools/gen_corpus.py --verify tests/corpus [--outputs FILE]
  .venv/bin/python tools/gen_corpus.py --stats tests/corpus

--bench-only writes the benchmark programs (MLP and transformer train steps,
a 1024^3 f32 matmul), with random inputs, to DIR: beside program.hlo each also
gets program.mlir (the StableHLO JAX lowered, which bench/xla_baseline.py
compiles and times).

--verify re-generates every program in memory and checks the committed files
against it (verify_program): the manifest and the inputs byte for byte, the
program text without its source locations (which name this script's path and
line numbers, not anything XLA computes), and JAX's outputs within the
tolerances the manifest gives (what the conformance tests allow Causeway):
XLA's CPU code differs by processor (docs/hlo.md, "Rounding"), so the bits of
an f16 output on one processor are not the bits on another (on a processor
unlike the writer's, WRITER_VARIANT, the outputs the manifest compares
exactly are left out, and the script says which).

--outputs FILE also pickles each program's global outputs (what the jitted
function returns, flattened) and their tolerances, {name: {"leaves": [...],
"tolerances": [(rtol, atol), ...]}}: python/tests/test_proxy_corpus.py
compares the same functions run through `causeway proxy` with them, so that
`make test` runs the corpus on JAX's CPU backend once, not twice.

--stats parses every program.hlo with XLA's own parser and prints markdown
tables of the opcodes and collective forms (docs/corpus.md holds them).
"""

import os
import sys

# Must be set before jax is imported: 8 fake CPU devices, CPU only.
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ["JAX_PLATFORMS"] = "cpu"

import argparse  # noqa: E402
import ast  # noqa: E402
import collections  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import functools  # noqa: E402
import io  # noqa: E402
import pickle  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
from typing import Any, Callable, Optional, Sequence  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib._hlo as hlo_lib  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)

# ---------------------------------------------------------------------------
# dtypes and tolerances
# ---------------------------------------------------------------------------

_DTYPE_NAMES = {
    np.dtype(np.bool_): "pred",
    np.dtype(np.int8): "s8",
    np.dtype(np.int16): "s16",
    np.dtype(np.int32): "s32",
    np.dtype(np.int64): "s64",
    np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
    np.dtype(np.float16): "f16",
    BF16: "bf16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.complex64): "c64",
    np.dtype(np.complex128): "c128",
    np.dtype(ml_dtypes.float8_e4m3fn): "f8e4m3fn",
    np.dtype(ml_dtypes.float8_e5m2): "f8e5m2",
    np.dtype(ml_dtypes.int4): "s4",
    np.dtype(ml_dtypes.uint4): "u4",
}

# (rtol, atol) per dtype: |ours - jax| <= atol + rtol * |jax|. Integers and
# pred compare exactly. docs/corpus.md explains the choice; programs may
# loosen a dtype's entry (Program.tol) where they accumulate error.
DEFAULT_TOL = {
    "f64": (1e-12, 1e-12),
    "f32": (1e-5, 1e-6),
    # Complex outputs compare by modulus, |ours - jax| as a complex number.
    "c128": (1e-12, 1e-12),
    "c64": (1e-5, 1e-6),
    "f16": (4e-3, 2e-4),
    "bf16": (3.2e-2, 2e-3),
}


def dtype_name(dtype) -> str:
    return _DTYPE_NAMES[np.dtype(dtype)]


# ---------------------------------------------------------------------------
# Program description
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Program:
    name: str
    description: str
    fn: Callable
    args: Sequence[np.ndarray]
    # Mesh: axis names and sizes; the product is the number of partitions.
    mesh_axes: Sequence[tuple] = ()
    # Devices for the mesh, as indices into jax.devices() in mesh order
    # (default: 0..N-1). A permutation checks that arrays are stacked by
    # partition, not by device id.
    device_order: Optional[Sequence[int]] = None
    in_specs: Optional[Sequence[Any]] = None  # PartitionSpec per arg.
    out_specs: Any = None  # PartitionSpec pytree matching the outputs.
    tol: dict = dataclasses.field(default_factory=dict)  # dtype -> (rtol, atol)
    x64: bool = False  # Trace with jax_enable_x64 (f64 programs).
    compiler_options: dict = dataclasses.field(default_factory=dict)
    # Extra options for the compile whose module is written, when XLA:CPU
    # cannot run that module itself (array-form all-to-all): the outputs
    # come from the compile without them, which is the same function.
    text_only_options: dict = dataclasses.field(default_factory=dict)
    # Write the module before XLA's optimizations (one partition only): for
    # ops that the CPU pipeline expands away (rng-bit-generator,
    # select-and-scatter). The reference outputs still come from XLA.
    preoptimization: bool = False
    # Cross-check the f32 outputs against the same function run in f64.
    f64_check: bool = True
    # Cross-check f16/bf16 outputs against XLA with excess precision off
    # (off for programs whose tolerances are exact: any other evaluation
    # uses all of them).
    excess_precision_check: bool = True

    @property
    def num_partitions(self) -> int:
        return int(np.prod([s for _, s in self.mesh_axes])) if self.mesh_axes else 1


PROGRAMS: dict = {}
BENCH_PROGRAMS: dict = {}


def program(fn=None, *, bench=False, corpus=True):
    """Registers a function that returns a Program (built lazily)."""

    def wrap(builder):
        if corpus:
            PROGRAMS[builder.__name__] = builder
        if bench:
            BENCH_PROGRAMS[builder.__name__] = builder
        return builder

    return wrap(fn) if fn is not None else wrap


# ---------------------------------------------------------------------------
# Deterministic inputs
# ---------------------------------------------------------------------------


def randn(seed, *shape, dtype=np.float32, scale=1.0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(shape) * scale).astype(dtype)


def uniform(seed, *shape, low=0.0, high=1.0, dtype=np.float32):
    r = np.random.default_rng(seed)
    return r.uniform(low, high, shape).astype(dtype)


def randint(seed, *shape, low, high, dtype=np.int32):
    r = np.random.default_rng(seed)
    return r.integers(low, high, shape).astype(dtype)


# ---------------------------------------------------------------------------
# Models shared by several programs
# ---------------------------------------------------------------------------


def mlp_params(seed, sizes):
    params = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params.append(randn(seed + 2 * i, fan_in, fan_out, scale=1.0 / np.sqrt(fan_in)))
        params.append(randn(seed + 2 * i + 1, fan_out, scale=0.1))
    return params


def cross_entropy(logits, labels):
    num_classes = logits.shape[-1]
    one_hot = labels[..., None] == lax.broadcasted_iota(jnp.int32, (1,) * labels.ndim + (num_classes,), labels.ndim)
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.sum(jnp.where(one_hot, logp, 0.0), axis=-1))


def mlp_loss(params, x, y):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = jax.nn.relu(h @ params[i] + params[i + 1])
    logits = h @ params[-2] + params[-1]
    return cross_entropy(logits, y)


def make_mlp_sgd_step(num_params, lr):
    def step(*args):
        params, x, y = list(args[:num_params]), args[num_params], args[num_params + 1]
        loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
        new_params = [p - lr * g for p, g in zip(params, grads)]
        return (*new_params, loss)

    return step


# The demo and benchmark MLP: 64 -> 128 -> 128 -> 10, SGD.
MLP_SIZES = (64, 128, 128, 10)
MLP_LR = 0.1


def mlp_dataset(seed, num_batches, batch):
    """A synthetic 10-class task: labels from a fixed random linear teacher."""
    r = np.random.default_rng(seed)
    teacher = r.standard_normal((MLP_SIZES[0], MLP_SIZES[-1])).astype(np.float32)
    x = r.standard_normal((num_batches, batch, MLP_SIZES[0])).astype(np.float32)
    y = np.argmax(x @ teacher, axis=-1).astype(np.int32)
    return x, y


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    vocab: int = 32
    seq: int = 8
    d_model: int = 32
    heads: int = 4
    d_ff: int = 64
    batch: int = 2


def transformer_param_shapes(c: TransformerConfig):
    return [
        ("embed", (c.vocab, c.d_model)),
        ("pos", (c.seq, c.d_model)),
        ("ln1_scale", (c.d_model,)),
        ("ln1_bias", (c.d_model,)),
        ("wqkv", (c.d_model, 3 * c.d_model)),
        ("wo", (c.d_model, c.d_model)),
        ("ln2_scale", (c.d_model,)),
        ("ln2_bias", (c.d_model,)),
        ("w1", (c.d_model, c.d_ff)),
        ("b1", (c.d_ff,)),
        ("w2", (c.d_ff, c.d_model)),
        ("b2", (c.d_model,)),
        ("lnf_scale", (c.d_model,)),
        ("lnf_bias", (c.d_model,)),
        ("unembed", (c.d_model, c.vocab)),
    ]


def transformer_init(seed, c: TransformerConfig):
    params = []
    for i, (name, shape) in enumerate(transformer_param_shapes(c)):
        if name.endswith("_scale"):
            params.append((1.0 + randn(seed + i, *shape, scale=0.1)).astype(np.float32))
        elif len(shape) == 1:
            params.append(randn(seed + i, *shape, scale=0.05))
        else:
            params.append(randn(seed + i, *shape, scale=1.0 / np.sqrt(shape[0])))
    return params


def layer_norm(x, scale, bias, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * scale + bias


def transformer_loss(c: TransformerConfig, params, tokens, targets):
    (embed, pos, ln1_s, ln1_b, wqkv, wo, ln2_s, ln2_b, w1, b1, w2, b2, lnf_s, lnf_b,
     unembed) = params
    b, s = tokens.shape
    dh = c.d_model // c.heads
    x = embed[tokens] + pos[None, :s, :]  # gather
    h = layer_norm(x, ln1_s, ln1_b)
    qkv = h @ wqkv
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q = q.reshape(b, s, c.heads, dh)
    k = k.reshape(b, s, c.heads, dh)
    v = v.reshape(b, s, c.heads, dh)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dh).astype(np.float32)
    causal = lax.broadcasted_iota(jnp.int32, (s, s), 0) >= lax.broadcasted_iota(jnp.int32, (s, s), 1)
    scores = jnp.where(causal[None, None], scores, -1e9)
    attn = jax.nn.softmax(scores, axis=-1)
    o = jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, s, c.d_model)
    x = x + o @ wo
    h = layer_norm(x, ln2_s, ln2_b)
    x = x + jax.nn.gelu(h @ w1 + b1, approximate=False) @ w2 + b2
    logits = layer_norm(x, lnf_s, lnf_b) @ unembed
    return cross_entropy(logits, targets)


def make_transformer_adam_step(c: TransformerConfig, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    n = len(transformer_param_shapes(c))

    def step(*args):
        params = list(args[:n])
        m = list(args[n:2 * n])
        v = list(args[2 * n:3 * n])
        count, tokens, targets = args[3 * n:]
        loss, grads = jax.value_and_grad(functools.partial(transformer_loss, c))(params, tokens, targets)
        count = count + 1
        t = count.astype(jnp.float32)
        new_p, new_m, new_v = [], [], []
        for p_, m_, v_, g in zip(params, m, v, grads):
            m_ = b1 * m_ + (1 - b1) * g
            v_ = b2 * v_ + (1 - b2) * g * g
            m_hat = m_ / (1 - b1 ** t)
            v_hat = v_ / (1 - b2 ** t)
            new_p.append(p_ - lr * m_hat / (jnp.sqrt(v_hat) + eps))
            new_m.append(m_)
            new_v.append(v_)
        return (*new_p, *new_m, *new_v, count, loss)

    return step


def transformer_inputs(seed, c: TransformerConfig):
    """Params, Adam state from a few steps in (so v is well away from 0 and
    the update is not a bare sign(g)), step count, tokens, targets."""
    params = transformer_init(seed, c)
    m = [randn(seed + 100 + i, *p.shape, scale=1e-3) for i, p in enumerate(params)]
    v = [np.square(randn(seed + 200 + i, *p.shape, scale=1e-2)) + 1e-4 for i, p in enumerate(params)]
    v = [x.astype(np.float32) for x in v]
    count = np.array(5, np.int32)
    tokens = randint(seed + 300, c.batch, c.seq, low=0, high=c.vocab)
    targets = randint(seed + 301, c.batch, c.seq, low=0, high=c.vocab)
    return [*params, *m, *v, count, tokens, targets]


# ---------------------------------------------------------------------------
# Single-partition programs
# ---------------------------------------------------------------------------


@program
def elementwise_f32():
    def f(x, y, pos):
        return (x + y, x - y, x * y, x / y, jnp.maximum(x, y), jnp.minimum(x, y),
                jnp.power(pos, y), jnp.exp(x), jnp.log(pos), jnp.log1p(pos), jnp.expm1(x),
                jnp.tanh(x), jax.nn.sigmoid(x), jnp.sqrt(pos), lax.rsqrt(pos), jnp.abs(x),
                jnp.sign(x), -x, jnp.floor(x), jnp.ceil(x), jnp.round(x), lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
                jnp.sin(x), jnp.cos(x), jnp.arctan2(x, y), jnp.isfinite(x / (x - x)), jnp.cbrt(x),
                jnp.remainder(x, y), jnp.fmod(x, y))

    x = randn(1, 4, 8, scale=2.0)
    x[0, 0] = 2.5  # round-half cases
    x[0, 1] = -0.5
    x[0, 2] = 0.0
    return Program("elementwise_f32",
                   "unary and binary f32 elementwise math: arithmetic, transcendental, rounding, remainder",
                   f, [x, randn(2, 4, 8) + 3.0, uniform(3, 4, 8, low=0.1, high=4.0)],
                   tol={"f32": (2e-5, 2e-6)})


@program
def broadcast_f32():
    def f(a, b, row, s):
        return (a + b, a * row, (a - s) * b, jnp.maximum(a, row[:, None, :]),
                jnp.broadcast_to(row, (2, 3, 5)) + s)

    return Program("broadcast_f32", "numpy broadcasting: (3,1,5)+(1,4,5), rank-expanding and scalar operands",
                   f, [randn(4, 3, 1, 5), randn(5, 1, 4, 5), randn(6, 3, 5), np.float32(0.5)])


@program
def reductions_f32():
    def f(x):
        return (jnp.sum(x), jnp.sum(x, axis=0), jnp.max(x, axis=1), jnp.min(x, axis=(0, 2)),
                jnp.prod(x[:, :2, :], axis=2), jnp.mean(x, axis=-1), jnp.argmax(x, axis=1),
                jnp.argmin(x, axis=2), jnp.logaddexp.reduce(x, axis=0), jnp.var(x, axis=1))

    x = randn(7, 3, 6, 5)
    x[1, 2, 3] = x[1, 4, 3]  # a tie for argmax/argmin over axis 1
    return Program("reductions_f32", "reduce (sum, max, min, prod, mean, variance, logsumexp) and argmax/argmin "
                   "(variadic reduce with ties)", f, [x], tol={"f32": (1e-5, 1e-5)})


@program
def dot_general_f32():
    def f(a, b, q, k, m, v):
        return (jnp.einsum("bij,bjk->bik", a, b), jnp.einsum("bqhd,bkhd->bhqk", q, k),
                m @ v, jnp.outer(v, v), jnp.einsum("ij,ij->", m, m), jnp.einsum("bij,bkj->bik", a, a),
                lax.dot_general(m, m, (((0,), (0,)), ((), ()))))

    return Program("dot_general_f32", "dot with batch and contracting dims (batched matmul, attention scores, "
                   "matrix-vector, outer, full contraction, transposed operands)",
                   f, [randn(8, 2, 3, 4), randn(9, 2, 4, 5), randn(10, 2, 3, 2, 4), randn(11, 2, 5, 2, 4),
                       randn(12, 6, 6), randn(13, 6)], tol={"f32": (1e-5, 1e-5)})


@program
def embedding_gather_scatter():
    def f(table, ids, w):
        def loss(t):
            e = t[ids]  # gather
            return jnp.sum(jnp.tanh(e) * w)

        val, grad = jax.value_and_grad(loss)(table)  # scatter-add (repeated ids)
        return val, grad, jnp.take_along_axis(table[:3], ids[:, :2] % 5, axis=1), lax.dynamic_slice_in_dim(table, ids[0, 0], 2)

    ids = randint(20, 3, 4, low=0, high=10)
    ids[0, 1] = ids[2, 3]  # a repeated id: its gradient rows add up
    return Program("embedding_gather_scatter", "embedding lookup (gather), its gradient (scatter-add with "
                   "repeated ids), take_along_axis, dynamic slice by a data-dependent offset",
                   f, [randn(21, 10, 5), ids, randn(22, 3, 4, 5)], tol={"f32": (1e-5, 1e-5)})


@program
def scatter_modes():
    def f(x, idx, upd):
        return (x.at[idx].set(upd), x.at[idx].add(upd), x.at[idx].max(upd), x.at[idx].min(upd),
                x.at[idx].multiply(upd), x.at[idx[::-1] % 3, 1].add(upd[:, 0]),
                x.at[jnp.array([0, 7])].add(1.0, mode="drop"))

    idx = np.array([4, 0, 2], np.int32)  # unique for set
    return Program("scatter_modes", "scatter with set/add/max/min/multiply combiners, 2-D index, out-of-bounds "
                   "updates dropped", f, [randn(23, 5, 3), idx, randn(24, 3, 3)])


@program
def sort_f32():
    def f(x, keys, vals):
        return (jnp.sort(x, axis=1), jnp.argsort(x, axis=1, stable=True), jnp.sort(x, axis=0, descending=True),
                *lax.sort((keys, vals), num_keys=1, is_stable=True))

    x = randn(25, 4, 6)
    x[0, 1] = np.nan
    x[1, 2] = -0.0
    x[1, 3] = 0.0
    x[2, 4] = x[2, 0]  # a tie
    keys = np.array([3, 1, 2, 1, 3, 0, 2, 1], np.int32)
    return Program("sort_f32", "sort (NaN and -0.0 ordering, ascending/descending), stable argsort "
                   "(two-operand sort), key/value sort with ties (lax.top_k is left out: XLA:CPU makes it a TopK "
                   "custom-call)", f,
                   [x, keys, randn(26, 8)], f64_check=False)


@program
def fori_loop():
    def f(x, n):
        def body(i, c):
            a, s = c
            a = jnp.tanh(a @ x) + i.astype(x.dtype) * 0.01
            return a, s + jnp.sum(a)

        return lax.fori_loop(0, 5, body, (x[0], jnp.zeros((), x.dtype))), lax.fori_loop(0, n, lambda i, c: c * 2 + i, 1)

    return Program("fori_loop", "lax.fori_loop with a static and a data-dependent trip count (while)",
                   f, [randn(27, 6, 6, scale=0.5), np.array(7, np.int32)], tol={"f32": (1e-5, 1e-5)})


@program
def scan_dus():
    def f(xs, h0, w):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h * 2.0

        h, ys = lax.scan(step, h0, xs)
        return h, ys, jnp.cumsum(xs, axis=0), lax.dynamic_update_slice(xs, h0[None] * 0 + 9.0, (2, 0))

    return Program("scan_dus", "lax.scan (while with dynamic-slice/dynamic-update-slice stacking), "
                   "explicit dynamic_update_slice", f, [randn(28, 6, 4), randn(29, 4), randn(30, 4, 4, scale=0.5)],
                   tol={"f32": (1e-5, 1e-5)})


@program
def cond_switch():
    def f(x, p, i):
        a = lax.cond(p, lambda v: jnp.sin(v) * 2, lambda v: jnp.cos(v) - 1, x)
        b = lax.cond(jnp.sum(x) > 100.0, lambda v: v + 1, lambda v: v * 3, x)
        c = lax.switch(i, [lambda v: v - 1, lambda v: v * v, lambda v: jnp.exp(v)], x)
        d = lax.switch(i + 5, [lambda v: v - 1, lambda v: v * v, lambda v: jnp.exp(v)], x)  # clamped index
        return a, b, c, d

    return Program("cond_switch", "lax.cond on a pred (both branches taken across outputs) and lax.switch "
                   "(index conditional, out-of-range index clamped)", f,
                   [randn(31, 3, 4), np.array(True), np.array(1, np.int32)])


@program
def conv2d():
    def f(x, k):
        return lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    return Program("conv2d", "2-D convolution, NHWC/HWIO, SAME padding", f,
                   [randn(32, 2, 6, 6, 3), randn(33, 3, 3, 3, 4)], tol={"f32": (1e-5, 1e-5)})


@program
def conv2d_strided_grad():
    dn = ("NCHW", "OIHW", "NCHW")

    def conv(x, k):
        return lax.conv_general_dilated(x, k, window_strides=(2, 1), padding=((1, 2), (0, 1)),
                                        lhs_dilation=(1, 1), rhs_dilation=(1, 2), dimension_numbers=dn)

    def f(x, k, g):
        y, vjp = jax.vjp(conv, x, k)
        dx, dk = vjp(g)
        grouped = lax.conv_general_dilated(x, k[:2, :1], (1, 1), "VALID", dimension_numbers=dn,
                                           feature_group_count=2)
        return y, dx, dk, grouped

    x = randn(34, 2, 2, 7, 6)
    k = randn(35, 4, 2, 3, 2)
    y_shape = jax.eval_shape(conv, x, k).shape
    return Program("conv2d_strided_grad", "convolution with stride, asymmetric padding and rhs dilation, its "
                   "input and kernel gradients (lhs-dilated and batch-grouped convolutions), grouped convolution",
                   f, [x, k, randn(36, *y_shape)], tol={"f32": (1e-5, 1e-5)})


def _maxpool_grad_program(name, preoptimization):
    def pool(a):
        return lax.reduce_window(a, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def f(x, g):
        y, vjp = jax.vjp(pool, x)
        avg = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0
        return y, vjp(g)[0], avg

    x = randn(37, 2, 6, 6, 2)
    x[0, 0, 1, 0] = x[0, 1, 0, 0]  # a tie inside one window
    how = "pre-optimization module (select-and-scatter)" if preoptimization else "optimized module"
    return Program(name, f"max-pool (reduce-window), its gradient, average pool with SAME padding; {how}",
                   f, [x, randn(38, 2, 3, 3, 2)], preoptimization=preoptimization)


@program
def maxpool_grad():
    return _maxpool_grad_program("maxpool_grad", False)


@program
def maxpool_grad_preopt():
    return _maxpool_grad_program("maxpool_grad_preopt", True)


@program
def softmax_layernorm():
    def f(x, scale, bias):
        return jax.nn.softmax(x, axis=-1), jax.nn.log_softmax(x, axis=0), layer_norm(x, scale, bias)

    x = randn(39, 4, 16, scale=3.0)
    return Program("softmax_layernorm", "softmax, log-softmax and layernorm", f,
                   [x, randn(40, 16) + 1.0, randn(41, 16)], tol={"f32": (1e-5, 1e-5)})


@program
def erf_gelu():
    def f(x):
        return lax.erf(x), jax.nn.gelu(x, approximate=False), jax.nn.gelu(x, approximate=True), lax.erf_inv(
            jnp.tanh(x) * 0.99), jax.nn.silu(x), jax.nn.softplus(x)

    x = np.linspace(-5, 5, 48, dtype=np.float32).reshape(6, 8)
    return Program("erf_gelu", "erf, exact and tanh GELU, erf_inv, silu, softplus", f, [x],
                   tol={"f32": (2e-5, 2e-6)})


@program
def cumsum_iota_onehot():
    def f(x, labels):
        return (jnp.cumsum(x, axis=1), jnp.cumprod(x, axis=0), lax.cummax(x, axis=1), jax.nn.one_hot(labels, 6),
                jnp.arange(12, dtype=jnp.int32).reshape(3, 4) * 3, lax.broadcasted_iota(jnp.float32, (2, 5), 1),
                jnp.tril(x[:, :4]), jnp.cumsum(labels))

    return Program("cumsum_iota_onehot", "cumulative sum/product/max (reduce-window), iota, one-hot, tril mask",
                   f, [randn(42, 4, 7), randint(43, 5, low=0, high=6)], tol={"f32": (1e-5, 1e-5)})


@program
def pad_reverse_concat_clamp():
    def f(x, y):
        return (lax.pad(x, 0.5, ((1, 2, 0), (0, 1, 1))), lax.pad(x, -1.0, ((-1, 1, 0), (2, -2, 1))), lax.rev(x, (0, 1)),
                jnp.concatenate([x, y, x], axis=1), jnp.clip(x, -0.5, 0.7), lax.clamp(jnp.asarray(-0.3, x.dtype), x, jnp.broadcast_to(y[:, 1:2] + 1, x.shape)),
                x[::2, 1::3], x.T.reshape(2, -1), jnp.roll(x, 2, axis=1), jnp.flip(y, 1))

    return Program("pad_reverse_concat_clamp", "pad (negative and interior padding), reverse, concatenate, clamp "
                   "(scalar and broadcast bounds), strided slice, transpose, reshape, roll",
                   f, [randn(44, 4, 6), randn(45, 4, 2)])


@program
def int_math():
    def f(a, b, c, d, bits, sf):
        return (a + b, a * b, lax.div(a, b), lax.rem(a, b), a // jnp.where(b == 0, 1, b), jnp.abs(a),
                jnp.maximum(a, b), lax.shift_left(a, 3), lax.shift_right_arithmetic(a, 2),
                lax.shift_right_logical(a, 2), a & b, a | b, a ^ b, ~a, lax.population_count(a),
                lax.clz(a), jnp.clip(a, -10, 10),
                c + d, c * d, lax.div(c, d), lax.rem(c, d), lax.shift_right_logical(bits, np.uint32(28)), bits * np.uint32(2654435761),
                bits >> 7, lax.div(bits, np.uint32(7)),
                (c.astype(jnp.int8) * np.int8(3)), lax.div(c.astype(jnp.int8), np.int8(-7)),
                sf.astype(jnp.int32), sf.astype(jnp.uint8), a.astype(jnp.float32) * 0.5, bits.astype(jnp.float32),
                a.astype(jnp.uint32), c.astype(jnp.int32) - 200, lax.shift_left(a, 35), lax.shift_right_arithmetic(a, 40))

    i32 = np.iinfo(np.int32)
    a = np.array([7, -7, 7, -7, 0, 5, i32.min, i32.min, i32.max, -1, 123456, -99], np.int32)
    b = np.array([2, 2, -2, -2, 3, 0, -1, 1, -1, 0, 1000, 7], np.int32)
    c = np.array([200, 100, 255, 0, 17, 3, 128, 129, 250, 9, 1, 77], np.uint8)
    d = np.array([100, 200, 2, 3, 0, 5, 128, 127, 7, 0, 255, 6], np.uint8)
    bits = randint(46, 12, low=0, high=2**32, dtype=np.int64).astype(np.uint32)
    sf = np.array([1.5, -1.5, 2.5, -2.7, 0.0, 300.0, -300.0, 3e9, -3e9, 255.9, 99.99, 1e-3], np.float32)
    return Program("int_math", "s32/u8/u32/s8 integer math: wrap-around, division and remainder by zero and "
                   "INT_MIN/-1, shifts (including >= bit width), bitwise ops, popcount, clz, float<->int converts "
                   "(truncation toward zero; out-of-range saturates)", f, [a, b, c, d, bits, sf], f64_check=False)


@program
def pred_logic():
    def f(p, q, x, y):
        return (p & q, p | q, p ^ q, ~p, x < y, x <= y, x == y, x != y, jnp.where(p, x, y),
                jnp.logical_and(x > 0, ~q), jnp.any(p), jnp.all(q | p), p.astype(jnp.int32) + q.astype(jnp.int32),
                jnp.isnan(x), x > jnp.nan, jnp.sum(p))

    r = np.random.default_rng(47)
    p = r.integers(0, 2, (3, 5)).astype(bool)
    q = r.integers(0, 2, (3, 5)).astype(bool)
    x = randn(48, 3, 5)
    y = x.copy()
    y[0] += 1.0
    y[1, 0] = np.nan
    return Program("pred_logic", "pred and/or/xor/not, comparisons (with NaN), select, any/all reductions",
                   f, [p, q, x, y], f64_check=False)


@program
def bf16_mlp():
    def f(x, w1, b1, w2):
        xb = x.astype(jnp.bfloat16)
        h = jnp.dot(xb, w1.astype(jnp.bfloat16), preferred_element_type=jnp.float32) + b1
        h = jax.nn.gelu(h).astype(jnp.bfloat16)
        out = jnp.dot(h, w2.astype(jnp.bfloat16))  # bf16 x bf16 -> bf16
        return out, jnp.sum(out.astype(jnp.float32) ** 2), h * h + h

    return Program("bf16_mlp", "bf16 mixed precision: bf16 matmuls with f32 and bf16 accumulation, converts, "
                   "bf16 elementwise", f, [randn(49, 8, 16), randn(50, 16, 32, scale=0.25), randn(51, 32, scale=0.1),
                                            randn(52, 32, 8, scale=0.2)],
                   tol={"f32": (2e-2, 1e-2)}, f64_check=False)


@program
def f16_math():
    def f(x, y, w):
        return x * y + x, jnp.exp(x), jnp.tanh(y), x @ w, jnp.sum(x, axis=1), jax.nn.softmax(x, axis=-1), x / y

    return Program("f16_math", "f16 elementwise, matmul, reduction, softmax", f,
                   [randn(53, 4, 8, dtype=np.float16), (randn(54, 4, 8) + 3.0).astype(np.float16),
                    randn(55, 8, 3, dtype=np.float16, scale=0.5)], f64_check=False)


@program
def f16_bf16_rounding():
    # Exact: XLA's CPU backend rounds these bit for bit as Causeway does
    # (docs/hlo.md, "Rounding"): one rounding per multiply-add inside a
    # fusion, per-op bf16 rounding, f16/bf16 math functions on every value.
    def f(every_f16, every_bf16, a, b, c, h, g):
        return (a * a + a,                      # the 64-value case
                a * b - c, c - a * b, -(a * b) + c, a * b + c * a,
                jnp.tanh(every_f16) * every_f16 + every_f16,
                jnp.exp(every_bf16) * every_bf16 - every_bf16,
                jnp.log(jnp.abs(every_f16)), lax.rsqrt(jnp.abs(every_bf16)),
                jax.nn.gelu(h) + h * g, jax.nn.softplus(g) * h - g)

    every_f16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    every_bf16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(BF16)
    return Program("f16_bf16_rounding", "f16 and bf16 rounding bit for bit with XLA:CPU: multiply-adds contracted "
                   "inside fusions (a*a+a over 64 f16 values, a*b-c, c-a*b, two products), bf16 rounded per op, "
                   "tanh/exp/log/rsqrt over every f16 and bf16 value; exact tolerances",
                   f, [every_f16, every_bf16, randn(100, 64, dtype=np.float16), randn(101, 64, dtype=np.float16),
                       randn(102, 64, dtype=np.float16), randn(103, 4096, dtype=np.float16),
                       randn(104, 4096, dtype=np.float16)],
                   tol={"f16": (0, 0), "bf16": (0, 0)}, f64_check=False, excess_precision_check=False)


@program
def top_k():
    def f(x, logits, scores):
        values, indices = lax.top_k(x, 3)
        probs = jax.nn.softmax(logits, axis=-1)
        gate, expert = lax.top_k(probs, 2)  # mixture-of-experts routing
        approx, approx_i = lax.approx_max_k(scores, 4)
        return values, indices, gate, expert, approx, approx_i

    x = randn(105, 5, 10)
    x[0, 3] = np.nan
    x[1, 2] = x[1, 7]  # a tie: the lower index first
    x[2, 0], x[2, 1] = -0.0, 0.0
    x[3, :] = np.inf
    return Program("top_k", "lax.top_k (TopK custom-call: NaN, ties, signed zeros, infinities), top-2 gating of "
                   "softmax probabilities (mixture-of-experts routing), lax.approx_max_k (also TopK on CPU)",
                   f, [x, randn(106, 8, 6), randn(107, 3, 33)], f64_check=False)


@program
def top_k_sharded_4():
    def f(logits):
        values, indices = lax.top_k(logits, 4)
        return values, indices

    spec = P("x")
    return Program("top_k_sharded_4", "lax.top_k of each row of a batch sharded over 4 partitions (TopK per shard)",
                   f, [randn(108, 16, 50)], mesh_axes=[("x", 4)], in_specs=[spec], out_specs=(spec, spec))


def _spd(seed, *batch_and_n, dtype=np.float32):
    """Symmetric positive definite matrices, well conditioned."""
    a = randn(seed, *batch_and_n, batch_and_n[-1], dtype=dtype)
    return (a @ np.swapaxes(a, -1, -2) + batch_and_n[-1] * np.eye(batch_and_n[-1], dtype=dtype)).astype(dtype)


@program
def linalg_f32():
    def f(spd, a, b, tall):
        chol = jnp.linalg.cholesky(spd)
        tri = jax.scipy.linalg.solve_triangular(chol, b, lower=True)
        tri_t = jax.scipy.linalg.solve_triangular(chol, b, lower=True, trans=1)
        lu, piv = jax.scipy.linalg.lu_factor(a)
        q, r = jnp.linalg.qr(tall)
        w, v = jnp.linalg.eigh(spd)
        u, sv, vt = jnp.linalg.svd(tall, full_matrices=False)
        return (chol, tri, tri_t, lu, piv, jnp.linalg.inv(a), jnp.linalg.det(a), jnp.linalg.solve(a, b[0]),
                q, r, w, v, u, sv, vt, jnp.linalg.svd(a, compute_uv=False))

    return Program("linalg_f32", "LAPACK custom-calls on CPU: batched cholesky (potrf), triangular solves (trsm, "
                   "plain and transposed), lu (getrf: pivots), inv, det, solve, qr (geqrf, orgqr), eigh (syevd), "
                   "svd (gesdd, thin and values only)",
                   f, [_spd(111, 3, 5), randn(112, 5, 5), randn(113, 3, 5, 2), randn(114, 6, 4)],
                   tol={"f32": (1e-4, 1e-5)})


@program
def linalg_f64():
    def f(spd, a):
        lu, piv = jax.scipy.linalg.lu_factor(a)
        w, v = jnp.linalg.eigh(spd)
        return jnp.linalg.cholesky(spd), lu, piv, w, v, jnp.linalg.svd(a, compute_uv=False), jnp.linalg.qr(a)[1]

    return Program("linalg_f64", "LAPACK custom-calls in f64 (dpotrf, dgetrf, dsyevd, dgesdd, dgeqrf)",
                   f, [_spd(115, 2, 4, dtype=np.float64), randn(116, 4, 4, dtype=np.float64)], x64=True,
                   tol={"f64": (1e-10, 1e-11)}, f64_check=False)


@program
def cholesky_dp4():
    def f(spd, b):
        chol = jnp.linalg.cholesky(spd)
        return chol, jax.scipy.linalg.cho_solve((chol, True), b)

    spec = P("x")
    return Program("cholesky_dp4", "a batch of cholesky factorizations and cho_solve, batch sharded over 4 "
                   "partitions (data parallel: each partition factors its own matrices)",
                   f, [_spd(117, 8, 6), randn(118, 8, 6, 3)], mesh_axes=[("x", 4)], in_specs=[spec, spec],
                   out_specs=(spec, spec), tol={"f32": (1e-4, 1e-5)})


@program
def cumsum_bf16_map():
    def f(x, y):
        return jnp.cumsum(x), jnp.cumprod(y, axis=1), lax.cummax(y, axis=0)

    return Program("cumsum_bf16_map", "cumsum/cumprod/cummax of bf16 arrays: XLA:CPU's associative scan writes map "
                   "instructions whose computation adds in f32 and rounds to bf16",
                   f, [randn(109, 1000, dtype=BF16), uniform(110, 8, 300, low=0.99, high=1.01, dtype=BF16)],
                   tol={"bf16": (3.2e-2, 2e-2)}, f64_check=False)


@program
def f64_math():
    def f(x, y, w):
        return jnp.exp(x) * y, jnp.log1p(jnp.abs(x)), jnp.tanh(x) @ w, jnp.sum(x * y), lax.erf(x), jnp.sqrt(
            jnp.abs(y)), jnp.cumsum(x, axis=1), x.astype(jnp.float32)

    return Program("f64_math", "f64 elementwise, transcendental, matmul, reduction, cumsum, f64->f32 convert",
                   f, [randn(56, 4, 6, dtype=np.float64), randn(57, 4, 6, dtype=np.float64),
                       randn(58, 6, 3, dtype=np.float64)], x64=True, tol={"f64": (1e-12, 1e-13)}, f64_check=False)


def _rng_program(name, impl):
    def f(seed_bits, x):
        key = jax.random.wrap_key_data(seed_bits, impl=impl)
        k1, k2 = jax.random.split(key)
        keep = jax.random.bernoulli(k2, 0.8, x.shape)
        return jax.random.bits(k1, (4, 8)), jnp.where(keep, x / 0.8, 0.0), jax.random.normal(key, (3, 5))

    key = jax.random.key(1234, impl=impl)
    return Program(name, f"jax.random with the {impl} PRNG: split, raw bits, dropout mask, normal",
                   f, [np.asarray(jax.random.key_data(key)), randn(59, 4, 8)], f64_check=False,
                   tol={"f32": (2e-6, 1e-6)})


@program
def rng_threefry():
    return _rng_program("rng_threefry", "threefry2x32")


@program
def rng_rbg():
    return _rng_program("rng_rbg", "rbg")


@program
def rng_bit_generator_preopt():
    def f(state):
        s1, b1 = lax.rng_bit_generator(state, (4, 4), dtype=jnp.uint32, algorithm=lax.RandomAlgorithm.RNG_PHILOX)
        s2, b2 = lax.rng_bit_generator(s1, (8,), dtype=jnp.uint32, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
        s3, b3 = lax.rng_bit_generator(s2, (3,), dtype=jnp.uint64, algorithm=lax.RandomAlgorithm.RNG_PHILOX)
        s4, b4 = lax.rng_bit_generator(s3, (2, 3), dtype=jnp.uint8, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
        return s4, b1, b2, b3, b4

    state = np.array([0x12345678, 0x9ABCDEF0, 42, 7], np.uint32)
    return Program("rng_bit_generator_preopt", "rng-bit-generator with the philox and threefry algorithms (u32, "
                   "u64 and u8 outputs); pre-optimization module, since XLA:CPU expands the op",
                   f, [state], preoptimization=True, x64=True, f64_check=False)


@program(bench=True)
def mlp_train_step_1():
    params = mlp_params(60, MLP_SIZES)
    x, y = mlp_dataset(61, 1, 64)
    return Program("mlp_train_step_1", f"MLP {MLP_SIZES} train step on one partition: forward, grad, SGD "
                   f"(lr {MLP_LR}); inputs w1,b1,w2,b2,w3,b3,x,y; outputs new params, loss",
                   make_mlp_sgd_step(len(params), MLP_LR), [*params, x[0], y[0]], tol={"f32": (1e-4, 1e-5)})


@program(bench=True)
def transformer_train_step_1():
    c = TransformerConfig()
    return Program("transformer_train_step_1", f"transformer block train step with Adam on one partition ({c}); "
                   "inputs params, m, v, step, tokens, targets; outputs new params, m, v, step, loss",
                   make_transformer_adam_step(c), transformer_inputs(62, c), tol={"f32": (1e-4, 1e-5)})


@program(bench=True, corpus=False)
def rnn_scan_train_step_1():
    # A tanh RNN over 64 time steps (lax.scan: a while loop that stacks the
    # hidden states with dynamic-update-slice), its gradient (a second scan,
    # backwards) and SGD: what a loop-carried buffer costs per iteration.
    t, b, h = 64, 16, 128

    def loss(w, u, xs, target):
        def step(hs, x):
            hs = jnp.tanh(hs @ w + x @ u)
            return hs, hs
        _, hs = lax.scan(step, jnp.zeros((b, h), jnp.float32), xs)
        return jnp.mean((hs - target) ** 2)

    def f(w, u, xs, target):
        l, (gw, gu) = jax.value_and_grad(loss, argnums=(0, 1))(w, u, xs, target)
        return w - 0.1 * gw, u - 0.1 * gu, l

    return Program("rnn_scan_train_step_1", f"tanh RNN over {t} steps (batch {b}, hidden {h}) with lax.scan, its "
                   "gradient and SGD on one partition; inputs w, u, xs, targets; outputs new w, u, loss", f,
                   [randn(65, h, h, scale=0.05), randn(66, h, h, scale=0.05), randn(67, t, b, h),
                    randn(68, t, b, h)], tol={"f32": (1e-4, 1e-5)})


@program(bench=True, corpus=False)
def matmul_1024():
    # Sums of 1024 products of unit normals: |terms| add up to ~800, so
    # another summation order moves a result by up to ~1e-4 absolute.
    return Program("matmul_1024", "f32 matmul 1024x1024x1024", lambda a, b: a @ b,
                   [randn(63, 1024, 1024), randn(64, 1024, 1024)], tol={"f32": (1e-4, 1e-3)})


# ---------------------------------------------------------------------------
# Sharded programs
# ---------------------------------------------------------------------------


@program
def partition_id_permuted_8():
    def body(x):
        i = lax.axis_index("x")
        return x * 10 + i.astype(jnp.float32), jnp.full((1,), i, jnp.int32)

    order = [3, 0, 6, 1, 7, 2, 5, 4]
    sm = jax.shard_map(body, mesh=None, in_specs=P("x"), out_specs=(P("x"), P("x")))
    return Program("partition_id_permuted_8", "shard_map axis_index (partition-id) on 8 partitions whose mesh "
                   f"uses devices {order}: stacks follow the partition, not the device id",
                   sm, [np.arange(16, dtype=np.float32)], mesh_axes=[("x", 8)], device_order=order,
                   in_specs=[P("x")], out_specs=(P("x"), P("x")))


@program
def mlp_train_step_dp4():
    params = mlp_params(60, MLP_SIZES)
    x, y = mlp_dataset(65, 1, 64)
    n = len(params)
    return Program("mlp_train_step_dp4", f"MLP {MLP_SIZES} train step, data-parallel on 4 partitions: params "
                   "replicated, batch sharded, gradients all-reduced; inputs w1,b1,w2,b2,w3,b3,x,y; outputs new "
                   "params, loss", make_mlp_sgd_step(n, MLP_LR), [*params, x[0], y[0]], mesh_axes=[("dp", 4)],
                   in_specs=[P()] * n + [P("dp"), P("dp")], out_specs=(P(),) * (n + 1), tol={"f32": (1e-4, 1e-5)})


SMALL_MLP = (16, 32, 8)


@program
def mlp_dp2():
    params = mlp_params(66, SMALL_MLP)
    x = randn(67, 8, 16)
    y = randint(68, 8, low=0, high=8)
    return Program("mlp_dp2", f"MLP {SMALL_MLP} SGD step, data-parallel on 2 partitions", make_mlp_sgd_step(4, 0.1),
                   [*params, x, y], mesh_axes=[("dp", 2)], in_specs=[P()] * 4 + [P("dp"), P("dp")],
                   out_specs=(P(),) * 5, tol={"f32": (1e-4, 1e-5)})


@program
def mlp_tp4():
    params = mlp_params(69, SMALL_MLP)
    x = randn(70, 8, 16)
    y = randint(71, 8, low=0, high=8)
    specs = [P(None, "tp"), P("tp"), P("tp", None), P()]
    return Program("mlp_tp4", f"MLP {SMALL_MLP} SGD step, Megatron tensor-parallel on 4 partitions: w1 "
                   "column-sharded, w2 row-sharded, partial sums all-reduced", make_mlp_sgd_step(4, 0.1),
                   [*params, x, y], mesh_axes=[("tp", 4)], in_specs=specs + [P(), P()],
                   out_specs=(*specs, P()), tol={"f32": (1e-4, 1e-5)})


@program
def mlp_fsdp8():
    params = mlp_params(72, SMALL_MLP)
    x = randn(73, 16, 16)
    y = randint(74, 16, low=0, high=8)
    specs = [P("fsdp", None), P("fsdp"), P("fsdp", None), P("fsdp")]
    return Program("mlp_fsdp8", f"MLP {SMALL_MLP} SGD step, fully sharded (FSDP) on 8 partitions: params and "
                   "batch sharded on the same axis, params all-gathered, grads reduced and re-sharded (XLA:CPU writes "
                   "that as all-reduce + dynamic-slice, not reduce-scatter)",
                   make_mlp_sgd_step(4, 0.1), [*params, x, y], mesh_axes=[("fsdp", 8)],
                   in_specs=specs + [P("fsdp"), P("fsdp")], out_specs=(*specs, P()), tol={"f32": (1e-4, 1e-5)})


@program
def mlp_dp2_tp4():
    params = mlp_params(75, SMALL_MLP)
    x = randn(76, 8, 16)
    y = randint(77, 8, low=0, high=8)
    specs = [P(None, "tp"), P("tp"), P("tp", None), P()]
    return Program("mlp_dp2_tp4", f"MLP {SMALL_MLP} SGD step on a 2x4 (dp, tp) mesh: collectives over subgroups "
                   "of 8 partitions", make_mlp_sgd_step(4, 0.1), [*params, x, y],
                   mesh_axes=[("dp", 2), ("tp", 4)], in_specs=specs + [P("dp"), P("dp")], out_specs=(*specs, P()),
                   tol={"f32": (1e-4, 1e-5)})


@program
def transformer_train_step_dp2():
    c = TransformerConfig(vocab=16, seq=8, d_model=16, heads=2, d_ff=32, batch=4)
    inputs = transformer_inputs(78, c)
    n = len(transformer_param_shapes(c))
    return Program("transformer_train_step_dp2", f"transformer block Adam step, data-parallel on 2 partitions "
                   f"({c})", make_transformer_adam_step(c), inputs, mesh_axes=[("dp", 2)],
                   in_specs=[P()] * (3 * n + 1) + [P("dp"), P("dp")], out_specs=(P(),) * (3 * n + 2),
                   tol={"f32": (1e-4, 1e-5)})


@program
def shard_map_collectives_4():
    def body(a):
        b = lax.ppermute(a, "x", [(i, (i + 1) % 4) for i in range(4)])
        c = lax.all_to_all(b, "x", 0, 0, tiled=True)
        d = lax.psum_scatter(c, "x", scatter_dimension=0, tiled=True)
        e = lax.all_gather(d, "x", axis=0, tiled=True)
        partial = lax.ppermute(a, "x", [(0, 2), (2, 0), (1, 3)])  # partition 3 receives zeros
        return lax.psum(e, "x"), lax.pmax(e, "x"), lax.pmin(a, "x"), partial, d

    spec = P("x")
    sm = jax.shard_map(body, mesh=None, in_specs=spec, out_specs=(spec,) * 5)
    return Program("shard_map_collectives_4", "shard_map on 4 partitions: collective-permute (ring and partial), "
                   "all-to-all (tuple form, as XLA:CPU decomposes it), reduce-scatter (psum_scatter), "
                   "all-gather, all-reduce sum/max/min", sm, [randn(79, 32, 3)], mesh_axes=[("x", 4)],
                   in_specs=[spec], out_specs=(spec,) * 5)


@program
def shard_map_all_to_all_array_8():
    def body(a, b):
        c = lax.all_to_all(a, "y", 0, 1, tiled=True)  # within groups of 4
        d = lax.all_to_all(b, ("x", "y"), 1, 0, tiled=True)  # all 8
        e = lax.ppermute(a, "x", [(0, 1), (1, 0)])
        return c, d, e, lax.psum(a, "x")

    sa, sb = P("x", "y"), P(None, ("x", "y"))
    outs = (P("x", "y"), P(("x", "y")), P("x", "y"), P(None, "y"))
    sm = jax.shard_map(body, mesh=None, in_specs=(sa, sb), out_specs=outs)
    return Program("shard_map_all_to_all_array_8", "shard_map on a 2x4 mesh, written with XLA's all-to-all decomposer off: "
                   "array-form all-to-all over subgroups and over all 8, collective-permute and all-reduce within "
                   "subgroups (outputs from the decomposed program, which XLA:CPU runs)", sm, [randn(80, 8, 16), randn(81, 2, 64)], mesh_axes=[("x", 2), ("y", 4)],
                   in_specs=[sa, sb], out_specs=outs,
                   text_only_options={"xla_disable_hlo_passes": "all_to_all_decomposer"})


@program
def reshard_all_to_all_4():
    def f(x, w):
        y = jax.lax.with_sharding_constraint(jnp.sin(x), P(None, "x"))
        return y * 2, (x @ w).T

    return Program("reshard_all_to_all_4", "jit resharding between dims (dim 0 -> dim 1) and a transposed "
                   "output: partitioner-made all-to-all", f, [randn(82, 8, 12), randn(83, 12, 8)],
                   mesh_axes=[("x", 4)], in_specs=[P("x", None), P()], out_specs=(P(None, "x"), P(None, "x")))


@program
def sharded_reductions_8():
    def f(x):
        return jnp.sum(x, axis=1), jnp.max(x), jnp.argmax(x, axis=0), jnp.sum(x * x, axis=0), jnp.cumsum(x, axis=0)

    return Program("sharded_reductions_8", "reductions over sharded dims on a 2x4 mesh: all-reduce over subgroups "
                   "and all partitions, argmax across shards, cumsum along a sharded dim",
                   f, [randn(84, 8, 12)], mesh_axes=[("a", 2), ("b", 4)], in_specs=[P("b", "a")],
                   out_specs=(P("b"), P(), P(), P(), P("b", "a")), tol={"f32": (1e-5, 1e-5)})


@program
def embedding_vocab_sharded_4():
    def f(table, ids):
        return jnp.take(table, ids, axis=0), jax.grad(lambda t: jnp.sum(jnp.take(t, ids, axis=0) ** 2))(table)

    ids = randint(85, 2, 6, low=0, high=16)
    ids[0, 0] = ids[1, 5]
    return Program("embedding_vocab_sharded_4", "embedding gather from a vocab-sharded table and its scatter-add "
                   "gradient on 4 partitions", f, [randn(86, 16, 6), ids], mesh_axes=[("v", 4)],
                   in_specs=[P("v", None), P()], out_specs=(P(), P("v", None)))


@program
def conv2d_spatial_sharded_4():
    def f(x, k):
        return jnp.tanh(lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))

    return Program("conv2d_spatial_sharded_4", "3x3 SAME convolution with the input sharded along height on 4 "
                   "partitions: halo exchange by collective-permute", f, [randn(87, 1, 8, 6, 2), randn(88, 3, 3, 2, 3)],
                   mesh_axes=[("h", 4)], in_specs=[P(None, "h"), P()], out_specs=P(None, "h"),
                   tol={"f32": (1e-5, 1e-5)})


@program
def scan_layers_dp2():
    def loss(ws, x):
        h, _ = lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)
        return jnp.mean(h ** 2)

    def f(ws, x):
        l, g = jax.value_and_grad(loss)(ws, x)
        return ws - 0.5 * g, l

    return Program("scan_layers_dp2", "scan over 3 stacked layers with its gradient, data-parallel on 2 partitions "
                   "(all-reduce of loop-carried gradients)", f, [randn(89, 3, 8, 8, scale=0.4), randn(90, 6, 8)],
                   mesh_axes=[("dp", 2)], in_specs=[P(), P("dp")], out_specs=(P(), P()), tol={"f32": (1e-4, 1e-5)})


# ---------------------------------------------------------------------------
# Complex numbers and fft
# ---------------------------------------------------------------------------


def crandn(seed, *shape, dtype=np.complex64, scale=1.0):
    r = np.random.default_rng(seed)
    return ((r.standard_normal(shape) + 1j * r.standard_normal(shape)) * scale).astype(dtype)


def _complex_elementwise(x, y, re, im):
    return (x + y, x - y, x * y, x / y, jnp.exp(x), jnp.log(x), jnp.sqrt(x), lax.rsqrt(x), jnp.tanh(x),
            jnp.power(x, y), jnp.abs(x), jnp.sign(x), jnp.conj(x), jnp.real(x), jnp.imag(y), lax.complex(re, im),
            x == y, x != jnp.conj(x), jnp.expm1(x), jnp.log1p(x), jnp.sin(x), jnp.cos(x), jnp.tan(x),
            re.astype(x.dtype) * x, -x)


@program
def complex_elementwise_c64():
    x = crandn(120, 4, 16)
    x[0, :4] = [0, 1, -1, 1j]  # Zeros and axis points: sign, sqrt and log's special cases.
    y = crandn(121, 4, 16)
    y[0, 0] = x[0, 1]
    return Program("complex_elementwise_c64", "c64 arithmetic, exp/log/sqrt/rsqrt/tanh/power/expm1/log1p/sin/cos/"
                   "tan, abs, sign, conj, real, imag, complex, EQ/NE, f32->c64 convert (JAX lowers most of them to real "
                   "arithmetic on the real and imaginary parts)",
                   _complex_elementwise, [x, y, randn(122, 4, 16), randn(123, 4, 16)],
                   tol={"c64": (2e-5, 2e-6), "f32": (1e-5, 1e-6)})


@program
def complex_elementwise_c128():
    return Program("complex_elementwise_c128", "the complex elementwise ops of complex_elementwise_c64 in c128",
                   _complex_elementwise, [crandn(124, 3, 8, dtype=np.complex128), crandn(125, 3, 8, dtype=np.complex128),
                                          randn(126, 3, 8, dtype=np.float64), randn(127, 3, 8, dtype=np.float64)],
                   x64=True, tol={"c128": (1e-12, 1e-13), "f64": (1e-12, 1e-13)}, f64_check=False)


@program
def complex_reduce_dot():
    def f(x, a, b, r):
        return (jnp.sum(x, axis=1), jnp.prod(x[:, :4], axis=0), jnp.mean(x), a @ b,
                jnp.einsum("bij,bjk->bik", a.reshape(2, 3, 5), b.reshape(2, 5, 2)), jnp.vdot(a[0], a[1]),
                jnp.cumsum(x, axis=0), jnp.sort(x[0]), jnp.transpose(x)[::-1], jnp.where(r > 0, x[:2, :6], 0),
                jnp.concatenate([x[:1], x[-1:]], axis=0), jnp.linalg.norm(a, axis=1))

    return Program("complex_reduce_dot", "c64 reductions (sum, prod, mean, cumsum), matmul and batched einsum "
                   "(Eigen's complex GEMM), vdot, sort (lexicographic comparator on real and imag), transpose, "
                   "reverse, select, concatenate, norm",
                   f, [crandn(128, 6, 8), crandn(129, 6, 5), crandn(130, 5, 4), randn(131, 2, 6)],
                   tol={"c64": (2e-5, 2e-5), "f32": (1e-5, 1e-5)})


def _fft_programs(x, xr, n_odd):
    return (jnp.fft.fft(x), jnp.fft.ifft(x), jnp.fft.rfft(xr), jnp.fft.irfft(jnp.fft.rfft(xr)),
            jnp.fft.irfft(x[..., :5], n=8), jnp.fft.rfft(xr[..., :n_odd]), jnp.fft.irfft(x[..., :4], n=n_odd),
            jnp.fft.fft(xr, n=12), jnp.fft.ifft(x, n=4))


@program
def fft_1d():
    return Program("fft_1d", "jnp.fft fft, ifft, rfft, irfft over the last dim (even and odd lengths, fft "
                   "lengths that pad or crop): XLA's fft op with fft_type FFT/IFFT/RFFT/IRFFT",
                   lambda x, xr: _fft_programs(x, xr, 7), [crandn(132, 3, 16), randn(133, 3, 16)],
                   tol={"c64": (1e-5, 1e-4), "f32": (1e-5, 1e-5)})


@program
def fft_1d_c128():
    return Program("fft_1d_c128", "the transforms of fft_1d in c128/f64",
                   lambda x, xr: _fft_programs(x, xr, 9),
                   [crandn(134, 2, 16, dtype=np.complex128), randn(135, 2, 16, dtype=np.float64)], x64=True,
                   tol={"c128": (1e-12, 1e-12), "f64": (1e-12, 1e-12)}, f64_check=False)


@program
def fft_2d_3d():
    def f(x, xr):
        return (jnp.fft.fft2(x), jnp.fft.ifft2(x), jnp.fft.rfft2(xr), jnp.fft.irfft2(jnp.fft.rfft2(xr)),
                jnp.fft.fftn(x), jnp.fft.ifftn(x, axes=(-3, -2, -1)), jnp.fft.rfftn(xr, axes=(-3, -2, -1)),
                jnp.fft.irfftn(x[..., :3], s=(2, 6, 5), axes=(-3, -2, -1)), jnp.fft.fftshift(jnp.fft.fft2(x)))

    return Program("fft_2d_3d", "fft2/ifft2/rfft2/irfft2 and fftn/ifftn/rfftn/irfftn over 3 dims, fftshift",
                   f, [crandn(136, 2, 2, 6, 8), randn(137, 2, 2, 6, 8)],
                   tol={"c64": (1e-5, 2e-4), "f32": (1e-5, 2e-5)})


@program
def fft_batch_sharded_4():
    def f(x, xr):
        return jnp.fft.fft(x), jnp.fft.irfft(jnp.fft.rfft(xr) * 2.0)

    spec = P("x")
    return Program("fft_batch_sharded_4", "fft and rfft/irfft of a batch of signals sharded over 4 partitions "
                   "(each partition transforms its own rows)",
                   f, [crandn(138, 8, 32), randn(139, 8, 32)], mesh_axes=[("x", 4)], in_specs=[spec, spec],
                   out_specs=(spec, spec), tol={"c64": (1e-5, 2e-4), "f32": (1e-5, 2e-5)})


@program
def complex_matmul_sharded_2():
    def f(a, b):
        return a @ b, jnp.sum(a * jnp.conj(a))

    return Program("complex_matmul_sharded_2", "c64 matmul with the contracting dim sharded over 2 partitions: "
                   "partial products summed by a complex all-reduce",
                   f, [crandn(140, 8, 16), crandn(141, 16, 6)], mesh_axes=[("k", 2)],
                   in_specs=[P(None, "k"), P("k", None)], out_specs=(P(), P()),
                   tol={"c64": (2e-5, 2e-5)})


# ---------------------------------------------------------------------------
# f8 and int4
# ---------------------------------------------------------------------------

F8E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)
F8E5M2 = np.dtype(ml_dtypes.float8_e5m2)


@program
def f8_int4_converts():
    def f(x, h, i, a8, b8):
        return (x.astype(F8E4M3FN), x.astype(F8E5M2), h.astype(F8E4M3FN), a8.astype(jnp.float32),
                b8.astype(jnp.float32), a8.astype(F8E5M2), i.astype(ml_dtypes.int4), i.astype(ml_dtypes.uint4),
                i.astype(ml_dtypes.int4).astype(jnp.int32), x.astype(ml_dtypes.int4), a8 * a8, b8 + b8)

    x = randn(150, 64, scale=100.0)
    x[:6] = [np.nan, np.inf, -np.inf, 500.0, -0.0, 1e-9]  # Saturation, NaN, overflow, tiny.
    all_e4m3 = np.arange(256, dtype=np.uint8).view(F8E4M3FN)
    all_e5m2 = np.arange(256, dtype=np.uint8).view(F8E5M2)
    return Program("f8_int4_converts", "converts between f32/f16 and f8e4m3fn/f8e5m2 (every f8 bit pattern, "
                   "NaN, infinities, overflow), f8 -> f8, s32/f32 -> s4/u4 (wrapping, truncation) and back, f8 "
                   "arithmetic (XLA computes it in f16 with converts around)",
                   f, [x, randn(151, 64, dtype=np.float16, scale=50.0), randint(152, 64, low=-40, high=40),
                       all_e4m3, all_e5m2], f64_check=False)


@program
def f8_matmul():
    def f(a, b):
        return jnp.dot(a, b, preferred_element_type=jnp.float32), (a @ b).astype(jnp.float32)

    a = randn(153, 8, 16).astype(F8E4M3FN)
    b = randn(154, 16, 4).astype(F8E4M3FN)
    return Program("f8_matmul", "a small f8e4m3fn matmul, accumulated in f32 and rounded back to f8",
                   f, [a, b], f64_check=False)


S4 = np.dtype(ml_dtypes.int4)
U4 = np.dtype(ml_dtypes.uint4)


def f8_inputs(seed):
    """f8e4m3fn a, b and f8e5m2 c, d [8, 16]; d away from zero (a divisor)."""
    return [randn(seed, 8, 16).astype(F8E4M3FN), randn(seed + 1, 8, 16).astype(F8E4M3FN),
            randn(seed + 2, 8, 16).astype(F8E5M2), (np.abs(randn(seed + 3, 8, 16)) + 0.5).astype(F8E5M2)]


def f8_specials(seed):
    """f8e4m3fn and f8e5m2 [4, 16] with NaN, infinities (e5m2), -0 and +0 among normal values."""
    e4 = randn(seed, 4, 16)
    e4[0, :4] = [np.nan, -0.0, 0.0, -1.0]
    e5 = randn(seed + 1, 4, 16)
    e5[0, :5] = [np.inf, -np.inf, np.nan, -0.0, 0.0]
    return [e4.astype(F8E4M3FN), e5.astype(F8E5M2)]


def f8_program_fn(a, b, c, d, s, q):
    return (a @ b.T, jnp.dot(c, d.T, preferred_element_type=jnp.float32),
            jnp.dot(a, c.T, preferred_element_type=jnp.float32),
            jnp.dot(a, b.T, preferred_element_type=jnp.bfloat16),
            a + b, a * b, jnp.maximum(c, d), jnp.exp(a), c / d, jnp.where(a < b, a, b),
            jnp.sum(a, axis=0), jnp.max(c, axis=1), jnp.cumsum(a, axis=1), jnp.argmax(c, axis=1),
            jnp.sort(s, axis=1), jnp.sort(q, axis=1), jnp.isnan(q), jnp.isfinite(q),
            a.T, jnp.concatenate([a, b], axis=1), a[::2, 3:9], jnp.pad(a, 1), a[jnp.array([3, 1, 1])])


@program
def f8_ops():
    return Program("f8_ops", "what a JAX program does with f8e4m3fn/f8e5m2 arrays, as XLA:CPU compiles it: dots "
                   "(f8, f32, bf16 results, e4m3fn x e5m2), elementwise, reductions, cumsum, argmax, sort with "
                   "NaN and -0, isnan/isfinite, data movement, gather", f8_program_fn,
                   f8_inputs(155) + f8_specials(159), f64_check=False, excess_precision_check=False)


@program
def f8_ops_unoptimized():
    return Program("f8_ops_unoptimized", "f8_ops written before XLA's optimizations, so the f8 ops reach Causeway "
                   "as JAX wrote them (dot, compare, sort, is-finite, reduce on f8 values): as a module exported "
                   "without XLA's float normalization", f8_program_fn,
                   f8_inputs(155) + f8_specials(159), preoptimization=True, f64_check=False,
                   excess_precision_check=False)


def int4_program_fn(i, j, u, v):
    i4, j4, u4, v4 = i.astype(S4), j.astype(S4), u.astype(U4), v.astype(U4)
    nonzero = jnp.where(j4 == 0, jnp.array(1, S4), j4)
    return (i4 + j4, i4 * j4, i4 - j4, jnp.maximum(i4, j4), i4 < j4, i4 >> 1, i4 << 1, i4 & j4, ~i4,
            lax.div(i4, nonzero), lax.rem(i4, nonzero), jnp.dot(i4, j4.T), jnp.sort(i4, axis=1),
            jnp.argmax(i4, axis=1), jnp.max(i4, axis=1), jnp.cumsum(i4, axis=1), u4 + v4, u4 * v4, u4 < v4,
            u4 >> 1, jnp.sort(u4, axis=1), i4.T, jnp.concatenate([i4, j4], 0), i4.astype(jnp.float32),
            i4.astype(F8E4M3FN))


def int4_inputs(seed):
    return [randint(seed, 8, 16, low=-8, high=8), randint(seed + 1, 8, 16, low=-8, high=8),
            randint(seed + 2, 8, 16, low=0, high=16), randint(seed + 3, 8, 16, low=0, high=16)]


@program
def int4_ops_unoptimized():
    # JAX cannot take int4 arguments on CPU here (their layout disagrees with
    # the compiled one), so the program converts s32 inputs itself.
    return Program("int4_ops_unoptimized", "s4/u4 arithmetic (wrapping), shifts, bitwise ops, div/rem, an s4 dot "
                   "giving s4, sort, argmax, max, cumsum, data movement and converts, written before XLA's "
                   "optimizations so the s4/u4 ops reach Causeway as JAX wrote them", int4_program_fn,
                   int4_inputs(161), preoptimization=True, f64_check=False, excess_precision_check=False)


@program
def f8_matmul_sharded_2():
    def f(a, b):
        return a @ b, jnp.dot(a, b, preferred_element_type=jnp.float32)

    return Program("f8_matmul_sharded_2", "f8e4m3fn matmul with the contracting dim sharded over 2 partitions: "
                   "partial products summed by an all-reduce (in f16 and f32, as XLA:CPU normalizes f8)",
                   f, [randn(165, 8, 16).astype(F8E4M3FN), randn(166, 16, 4).astype(F8E4M3FN)],
                   mesh_axes=[("k", 2)], in_specs=[P(None, "k"), P("k", None)], out_specs=(P(), P()),
                   f64_check=False, excess_precision_check=False)


@program
def f8_int4_collectives_4():
    def body(x, i):
        ring = [(k, (k + 1) % 4) for k in range(4)]
        i4 = i.astype(S4)
        return (lax.ppermute(x, "x", ring), lax.all_gather(x, "x", axis=0, tiled=True),
                lax.all_to_all(x, "x", 0, 0, tiled=True), lax.psum(x, "x"), lax.pmax(x, "x"),
                lax.psum_scatter(x, "x", scatter_dimension=0, tiled=True), lax.ppermute(i4, "x", ring),
                lax.all_gather(i4, "x", axis=0, tiled=True))

    spec = P("x")
    sm = jax.shard_map(body, mesh=None, in_specs=(spec, spec), out_specs=(spec,) * 8)
    return Program("f8_int4_collectives_4", "shard_map on 4 partitions over f8e4m3fn and s4 values: "
                   "collective-permute, all-gather, all-to-all, all-reduce sum/max, reduce-scatter",
                   sm, [randn(167, 32, 3).astype(F8E4M3FN), randint(168, 32, 3, low=-8, high=8)],
                   mesh_axes=[("x", 4)], in_specs=[spec, spec], out_specs=(spec,) * 8, f64_check=False,
                   excess_precision_check=False)


# ---------------------------------------------------------------------------
# Compile, run, extract
# ---------------------------------------------------------------------------

_PRINT_OPTIONS = hlo_lib.HloPrintOptions()
_PRINT_OPTIONS.print_large_constants = True


class CorpusError(Exception):
    pass


@dataclasses.dataclass
class Built:
    program: Program
    text: str
    inputs: list  # stacked numpy arrays
    outputs: list  # stacked numpy arrays
    global_outputs: list
    module: Any
    mlir: str


def _shape_matches(xla_shape, array: np.ndarray) -> bool:
    return (tuple(xla_shape.dimensions()) == tuple(array.shape)
            and np.dtype(xla_shape.numpy_dtype()) == array.dtype)


def _check_against_module(module, inputs, outputs, name):
    """Fails loudly unless the entry's parameters and root tuple line up with
    the per-partition slices of the stacked inputs and outputs."""
    shape = hlo_lib.XlaComputation(module.as_serialized_hlo_module_proto()).program_shape()
    params = shape.parameter_shapes()
    if len(params) != len(inputs):
        raise CorpusError(f"{name}: module has {len(params)} parameters but there are {len(inputs)} inputs "
                          "(pruned or donated arguments?)")
    for i, (s, a) in enumerate(zip(params, inputs)):
        if not _shape_matches(s, a[0]):
            raise CorpusError(f"{name}: parameter {i} is {s} but input {i} is {a.dtype}{list(a.shape[1:])}")
    result = shape.result_shape()
    results = result.tuple_shapes() if result.is_tuple() else [result]
    if len(results) != len(outputs):
        raise CorpusError(f"{name}: root has {len(results)} elements but there are {len(outputs)} outputs "
                          "(forwarded inputs?)")
    for i, (s, a) in enumerate(zip(results, outputs)):
        if s.is_tuple() or not _shape_matches(s, a[0]):
            raise CorpusError(f"{name}: root element {i} is {s} but output {i} is {a.dtype}{list(a.shape[1:])}")


def _stack(arr, order) -> np.ndarray:
    by_device = {s.device: np.asarray(s.data) for s in arr.addressable_shards}
    return np.stack([by_device[d] for d in order])


def _mesh_for(p: Program):
    if not p.mesh_axes:
        return None
    order = p.device_order if p.device_order is not None else range(p.num_partitions)
    devices = np.array([jax.devices()[i] for i in order]).reshape([s for _, s in p.mesh_axes])
    return Mesh(devices, tuple(a for a, _ in p.mesh_axes))


def compile_program(p: Program, compiler_options=None, x64=None):
    """Returns (compiled, device args) for p."""
    use_x64 = p.x64 if x64 is None else x64
    with jax.enable_x64(use_x64):
        return _compile_program(p, compiler_options)


def _compile_program(p: Program, compiler_options):
    mesh = _mesh_for(p)
    args = list(p.args)
    fn = p.fn
    if mesh is None:
        jitted = fn if isinstance(fn, jax.stages.Wrapped) else jax.jit(fn, keep_unused=True)
        dev_args = [jax.device_put(a, jax.devices()[0]) for a in args]
    else:
        in_sh = [NamedSharding(mesh, s) for s in p.in_specs]
        out_sh = jax.tree.map(lambda s: NamedSharding(mesh, s), p.out_specs,
                              is_leaf=lambda s: isinstance(s, P))
        jitted = jax.jit(fn, in_shardings=in_sh, out_shardings=out_sh, keep_unused=True)
        dev_args = [jax.device_put(a, s) for a, s in zip(args, in_sh)]
    with jax.set_mesh(mesh) if mesh is not None else contextlib.nullcontext():
        lowered = jitted.lower(*dev_args)
        compiled = lowered.compile(dict(p.compiler_options, **(compiler_options or {})))
    return lowered, compiled, dev_args


def build(p: Program) -> Built:
    lowered, compiled, dev_args = compile_program(p)
    runtime = compiled.runtime_executable()
    modules = runtime.hlo_modules()
    if len(modules) != 1:
        raise CorpusError(f"{p.name}: expected one module, got {len(modules)}")
    if p.preoptimization:
        if p.num_partitions != 1:
            raise CorpusError(f"{p.name}: pre-optimization modules are written for one partition only")
        module = hlo_lib.hlo_module_from_text(lowered.as_text(dialect="hlo"))
    elif p.text_only_options:
        _, text_compiled, _ = compile_program(p, p.text_only_options)
        module = text_compiled.runtime_executable().hlo_modules()[0]
    else:
        module = modules[0]
    text = module.to_string(_PRINT_OPTIONS)
    if "{...}" in text:
        raise CorpusError(f"{p.name}: elided constant in the module text")
    if p.num_partitions > 1 and f"num_partitions={p.num_partitions}" not in text.splitlines()[0]:
        raise CorpusError(f"{p.name}: header lacks num_partitions={p.num_partitions}")

    order = runtime.local_devices()  # partition p runs on order[p]
    if len(order) != p.num_partitions:
        raise CorpusError(f"{p.name}: executable has {len(order)} devices, want {p.num_partitions}")
    with jax.enable_x64(p.x64):
        results = compiled(*dev_args)
    flat_out = jax.tree.leaves(results)
    inputs = [_stack(a, order) for a in dev_args]
    outputs = [_stack(a, order) for a in flat_out]
    _check_against_module(module, inputs, outputs, p.name)

    # The same executable, fed the stacked slices device by device, must give
    # the stacked outputs back: the stacking is the executable's own view.
    with jax.enable_x64(p.x64):
        rerun = runtime.execute_sharded(
            [jax.make_array_from_single_device_arrays(
                a.shape, a.sharding, [jax.device_put(s, d) for s, d in zip(stacked, order)])
             for a, stacked in zip(dev_args, inputs)])
        rerun = rerun.disassemble_into_single_device_arrays()
    for i, (per_device, want) in enumerate(zip(rerun, outputs)):
        got = {x.devices().pop(): np.asarray(x) for x in per_device}
        got = np.stack([got[d] for d in order])
        if got.tobytes() != want.tobytes():
            raise CorpusError(f"{p.name}: re-running the executable on the stacked inputs changed output {i}")
    return Built(p, text, inputs, outputs, [np.asarray(r) for r in flat_out], module, lowered.as_text())


# ---------------------------------------------------------------------------
# Tolerance cross-checks
# ---------------------------------------------------------------------------


def tolerance(p: Program, dtype: str):
    if dtype in p.tol:
        return p.tol[dtype]
    return DEFAULT_TOL.get(dtype, (0.0, 0.0))


def _usage(got, want, rtol, atol) -> float:
    """max |got-want| / (atol + rtol |want|): <= 1 passes."""
    wide = np.complex128 if np.iscomplexobj(want) else np.float64
    got = got.astype(wide)
    want = want.astype(wide)
    both_nan = np.isnan(got) & np.isnan(want)
    same_inf = np.isinf(want) & (got == want)
    err = np.where(both_nan | same_inf, 0.0, np.abs(got - want))
    bound = atol + rtol * np.abs(np.where(np.isfinite(want), want, 0.0))
    ratio = np.where(err == 0, 0.0, err / np.maximum(bound, 1e-300))
    return float(np.max(ratio)) if ratio.size else 0.0


def cross_check(b: Built) -> dict:
    """Measures how much of each output's tolerance a second, equally valid
    evaluation uses: the function run in f64 (f32 programs), and XLA with
    excess precision off (f16/bf16 outputs). Fails above 1/2."""
    p = b.program
    report = {}
    dtypes = [dtype_name(o.dtype) for o in b.outputs]
    if p.f64_check and not p.x64:
        widen = {np.dtype(np.float32): np.float64, np.dtype(np.complex64): np.complex128}
        args64 = [a.astype(widen[a.dtype]) if a.dtype in widen else a for a in p.args]
        p64 = dataclasses.replace(p, args=args64, x64=True)
        # LLVM's optimizations are left out of the f64 evaluation: they
        # cannot move an f64 result by a fraction of an f32 tolerance worth
        # noticing, and skipping them halves these compiles (`make test`
        # runs --verify).
        _, compiled, dev_args = compile_program(p64, {"xla_backend_optimization_level": 0})
        with jax.enable_x64(True):
            outs64 = [np.asarray(o) for o in jax.tree.leaves(compiled(*dev_args))]
        worst = 0.0
        for o32, o64, dt in zip(b.global_outputs, outs64, dtypes):
            if dt in ("f32", "c64"):
                worst = max(worst, _usage(o32, o64, *tolerance(p, dt)))
        report["f64"] = worst
    if p.excess_precision_check and any(dt in ("f16", "bf16") for dt in dtypes):
        _, compiled, dev_args = compile_program(p, {"xla_allow_excess_precision": False})
        with jax.enable_x64(p.x64):
            outs = [np.asarray(o) for o in jax.tree.leaves(compiled(*dev_args))]
        worst = 0.0
        for got, want, dt in zip(outs, b.global_outputs, dtypes):
            if dt in ("f16", "bf16", "f32"):
                worst = max(worst, _usage(got, want, *tolerance(p, dt)))
        report["no_excess_precision"] = worst
    for k, v in report.items():
        if v > 0.5:
            raise CorpusError(f"{p.name}: the {k} cross-check uses {v:.2f} of the tolerance (limit 0.5); "
                              "loosen the program's tolerance or fix the program")
    return report


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def _shape_text(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def manifest_text(b: Built) -> str:
    p = b.program
    lines = [
        "# Causeway conformance program; format in docs/corpus.md.",
        f"name {p.name}",
        f"description {p.description}",
        f"partitions {p.num_partitions}",
    ]
    for i, a in enumerate(b.inputs):
        lines.append(f"input in{i}.npy {dtype_name(a.dtype)} {_shape_text(a.shape[1:])}")
    for i, a in enumerate(b.outputs):
        dt = dtype_name(a.dtype)
        rtol, atol = tolerance(p, dt)
        lines.append(f"output out{i}.npy {dt} {_shape_text(a.shape[1:])} {rtol:g} {atol:g}")
    return "\n".join(lines) + "\n"


def files_for(b: Built, with_mlir=False) -> dict:
    files = {"program.hlo": b.text.encode(), "manifest.txt": manifest_text(b).encode()}
    for i, a in enumerate(b.inputs):
        files[f"in{i}.npy"] = _npy_bytes(a)
    for i, a in enumerate(b.outputs):
        files[f"out{i}.npy"] = _npy_bytes(a)
    if with_mlir:
        files["program.mlir"] = b.mlir.encode()
    return files


INDEX_FILE = "programs.txt"

# Where each op came from in the Python that traced it: the FileNames,
# FunctionNames, FileLocations and StackFrames tables of the module and each
# instruction's `stack_frame_id=N` (or, with older JAX, `source_file=...
# source_line=N`) in its metadata.
_LOCATION_TABLES_RE = re.compile(
    r"^(FileNames|FunctionNames|FileLocations|StackFrames)\n(?:[^\n]+\n)*\n*", re.M)
_LOCATION_ATTRS_RE = re.compile(
    r' (?:stack_frame_id=\d+|source_file="[^"]*"|source_line=\d+|source_end_line=\d+'
    r'|source_column=\d+|source_end_column=\d+)')


def without_locations(text: str) -> str:
    """The program text without its source locations."""
    return _LOCATION_ATTRS_RE.sub("", _LOCATION_TABLES_RE.sub("", text))


def _output_tolerances(manifest: str) -> dict:
    """out<i>.npy -> (dtype, rtol, atol), from a manifest's output lines."""
    dtypes = {name: dtype for dtype, name in _DTYPE_NAMES.items()}
    tolerances = {}
    for line in manifest.splitlines():
        fields = line.split()
        if len(fields) == 6 and fields[0] == "output":
            tolerances[fields[1]] = (dtypes[fields[2]], float(fields[4]), float(fields[5]))
    return tolerances


def _load_npy(data: bytes, dtype) -> np.ndarray:
    """An array _npy_bytes wrote, as `dtype` (the manifest's): ml_dtypes'
    types are written with descriptors np.load does not take back."""
    f = io.BytesIO(data)
    version = np.lib.format.read_magic(f)
    length = int.from_bytes(f.read(2 if version == (1, 0) else 4), "little")
    header = ast.literal_eval(f.read(length).decode("latin1"))
    a = np.frombuffer(f.read(), dtype=dtype)
    return a.reshape(header["shape"], order="F" if header["fortran_order"] else "C")


# What XLA:CPU's generated code follows on a processor (docs/hlo.md,
# "Rounding"): the vendor (rsqrt's Newton steps), AVX512-FP16 (f16 inside
# fusions) and AVX-512 F (f64 rsqrt). WRITER_VARIANT is that of the
# processor whose JAX wrote the committed outputs; tests/corpus_runner.cc
# runs Causeway as that variant (avx512fp16,intel) to compare with them.
WRITER_VARIANT = ("GenuineIntel", True, True)


def processor_variant() -> tuple:
    """This processor's (vendor, avx512fp16, avx512f), as XLA:CPU sees it:
    an --xla_cpu_max_isa below AVX-512 in XLA_FLAGS turns both off."""
    vendor, flags = "", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "vendor_id" and not vendor:
                vendor = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    isa = re.search(r"--xla_cpu_max_isa=(\S+)", os.environ.get("XLA_FLAGS", ""))
    avx512 = isa is None or isa.group(1).upper().startswith("AVX512")
    fp16 = "avx512_fp16" in flags or "avx512fp16" in flags  # Linux spells it so.
    return (vendor, avx512 and fp16, avx512 and "avx512f" in flags)


def verify_program(on_disk: dict, files: dict, variant: tuple = WRITER_VARIANT,
                   skipped: Optional[list] = None) -> list:
    """What differs between a program's committed files and the ones just
    built, as messages; empty if none (see --verify in the module doc).
    `variant` is the processor's that built `files` (processor_variant()):
    on another than WRITER_VARIANT's, an output the manifest compares
    exactly holds bits only that kind of processor computes (f16_bf16_rounding:
    XLA rounds f16 fusions and rsqrt by processor, by more than a tolerance),
    so it is left out, and said so in `skipped` if given."""
    problems = []
    for f in sorted(set(on_disk) ^ set(files)):
        problems.append(f"{f}: {'not written by the script' if f in on_disk else 'missing'}")
    tolerances = _output_tolerances(files.get("manifest.txt", b"").decode())
    for f in sorted(set(on_disk) & set(files)):
        disk, built = on_disk[f], files[f]
        if f == "program.hlo":
            if without_locations(disk.decode()) != without_locations(built.decode()):
                problems.append(f"{f}: the program differs (source locations aside)")
        elif disk == built:
            continue
        elif f in tolerances:
            dtype, rtol, atol = tolerances[f]
            if rtol == atol == 0 and variant != WRITER_VARIANT and dtype_name(dtype) in DEFAULT_TOL:
                if skipped is not None:
                    skipped.append(f"{f}: exact bits of the writer's kind of processor")
                continue
            got, want = _load_npy(disk, dtype), _load_npy(built, dtype)
            if got.dtype != want.dtype or got.shape != want.shape:
                problems.append(f"{f}: {got.dtype}{list(got.shape)} on disk, "
                                f"{want.dtype}{list(want.shape)} now")
                continue
            usage = _usage(got, want, rtol, atol)
            if usage > 1:
                problems.append(f"{f}: differs from JAX's output now by {usage:.2f} "
                                "of the manifest's tolerance")
        elif disk != built:
            problems.append(f"{f}: differs")
    return problems


def index_text(registry) -> str:
    return ("# The programs tools/gen_corpus.py writes here, one per line; the conformance test\n"
            "# runs each and fails for a missing or an unlisted one.\n"
            + "".join(f"{name}\n" for name in sorted(registry)))


def write_dir(path, files):
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    for name, data in files.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)


def opcode_counts(module) -> collections.Counter:
    counts = collections.Counter()
    for comp in module.computations():
        for inst in comp.instructions():
            counts[str(inst.opcode).split(".")[-1]] += 1
    return counts


_COLLECTIVE_RE = re.compile(r" (all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)\(")


def corpus_stats(root) -> str:
    """Markdown tables of the opcodes and collective forms in a corpus, read
    back through XLA's own HLO parser."""
    opcodes = collections.Counter()
    programs = collections.defaultdict(set)
    forms = collections.defaultdict(set)
    total = 0
    total_bytes = 0
    rows = []
    names = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "program.hlo")))
    for name in names:
        directory = os.path.join(root, name)
        size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
        total_bytes += size
        with open(os.path.join(directory, "manifest.txt")) as f:
            fields = dict(line.rstrip("\n").split(" ", 1) for line in f if line.strip() and line[0] != "#"
                          and line.split(" ", 1)[0] in ("partitions", "description"))
        rows.append(f"| `{name}` | {fields['partitions']} | {(size + 1023) // 1024} | {fields['description']} |")
        with open(os.path.join(directory, "program.hlo")) as f:
            text = f.read()
        if "{...}" in text:
            raise CorpusError(f"{name}: elided constant in program.hlo")
        module = hlo_lib.hlo_module_from_text(text)
        counts = opcode_counts(module)
        total += sum(counts.values())
        for op, n in counts.items():
            opcodes[op] += n
            programs[op].add(name)
        for line in text.splitlines():
            m = _COLLECTIVE_RE.search(line)
            if not m:
                continue
            shape = line.split(" = ", 1)[1]
            kind = "tuple" if shape.startswith("(") else "array"
            if "replica_groups=mesh[" in line:
                groups = "mesh[...]" + (" device_ids=(...)" if "device_ids=(" in line else "")
            elif re.search(r"replica_groups=\[", line):
                groups = "iota [G,S]<=[...]"
            elif "replica_groups={" in line:
                groups = "explicit {{...}}"
            else:
                groups = "source_target_pairs"
            forms[(m.group(1), kind, groups)].add(name)
    out = [f"{len(names)} programs, {total} instructions, {total_bytes // 1024} KiB.", "",
           "| program | partitions | KiB | what it covers |", "|---|---:|---:|---|"]
    out += rows
    out += ["", "| opcode | instructions | programs |", "|---|---:|---:|"]
    for op, n in sorted(opcodes.items(), key=lambda kv: (-len(programs[kv[0]]), kv[0])):
        out.append(f"| {op.removeprefix('k')} | {n} | {len(programs[op])} |")
    out += ["", "| collective | form | groups written as | programs |", "|---|---|---|---|"]
    for (op, kind, groups), progs in sorted(forms.items()):
        out.append(f"| {op} | {kind} | {groups} | {', '.join(sorted(progs))} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="directory to write programs into")
    ap.add_argument("--only", nargs="*", help="build only these programs")
    ap.add_argument("--bench-only", action="store_true", help="write the benchmark programs instead")
    ap.add_argument("--verify", metavar="DIR", help="check that DIR holds exactly what this script writes")
    ap.add_argument("--no-cross-check", action="store_true", help="skip the tolerance cross-checks")
    ap.add_argument("--outputs", metavar="FILE", help="also pickle every program's global outputs")
    ap.add_argument("--stats", metavar="DIR", help="print opcode and collective tables for a written corpus")
    args = ap.parse_args(argv)
    if args.stats:
        print(corpus_stats(args.stats), end="")
        return 0
    if not (args.out or args.verify):
        ap.error("give --out DIR, --verify DIR or --stats DIR")
    registry = BENCH_PROGRAMS if args.bench_only else PROGRAMS
    names = args.only or list(registry)
    unknown = [n for n in names if n not in registry]
    if unknown:
        ap.error(f"unknown programs: {unknown}")

    total_bytes = 0
    failures = []
    global_outputs = {}
    variant = processor_variant()
    if args.verify and variant != WRITER_VARIANT:
        print(f"this processor is {variant}, the corpus's writer {WRITER_VARIANT}: "
              "outputs the manifest compares exactly are not compared")
    for name in names:
        p = registry[name]()
        b = build(p)
        files = files_for(b, with_mlir=args.bench_only)
        size = sum(len(v) for v in files.values())
        total_bytes += size
        checks = {} if (args.no_cross_check or args.bench_only) else cross_check(b)
        global_outputs[name] = {
            "leaves": b.global_outputs,
            "tolerances": [tolerance(p, dtype_name(o.dtype)) for o in b.global_outputs]}
        n_inst = sum(opcode_counts(b.module).values())
        print(f"{name:32s} partitions={p.num_partitions} instructions={n_inst:5d} bytes={size:8d} "
              + " ".join(f"{k}={v:.3f}" for k, v in checks.items()), flush=True)
        if args.verify:
            d = os.path.join(args.verify, name)
            on_disk = {f: open(os.path.join(d, f), "rb").read() for f in os.listdir(d)} if os.path.isdir(d) else {}
            skipped = []
            problems = verify_program(on_disk, files, variant, skipped)
            for skip in skipped:
                print(f"  not compared here: {skip}")
            if problems:
                failures.append(name)
                for problem in problems:
                    print(f"  MISMATCH: {problem}")
        else:
            write_dir(os.path.join(args.out, name), files)
    # The index: every program of the registry, one per line, so that the
    # conformance test can tell a lost program from one never written.
    index = index_text(registry)
    if args.verify:
        index_path = os.path.join(args.verify, INDEX_FILE)
        on_disk = open(index_path).read() if os.path.isfile(index_path) else None
        if on_disk != index:
            failures.append(f"{INDEX_FILE} does not list the registry's programs")
    else:
        with open(os.path.join(args.out, INDEX_FILE), "w") as f:
            f.write(index)
    if args.verify and not args.only:
        extra = sorted(set(os.listdir(args.verify)) - set(names) - {"README.md", INDEX_FILE})
        if extra:
            failures.append(f"unexpected directories {extra}")
    print(f"{len(names)} programs, {total_bytes} bytes")
    if args.outputs:
        with open(args.outputs, "wb") as f:
            pickle.dump(global_outputs, f)
    if failures:
        print(f"verify failed: {failures}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
