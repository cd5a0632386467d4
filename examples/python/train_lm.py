"""A character-level transformer language model trained on Causeway.

The text is Python's own standard library source (the .py files beside
`os.py`), read as bytes. The model is a small decoder-only transformer,
data- and model-parallel on a 2x2 mesh slice {"data": 2, "model": 2}: the
batch is split over "data"; attention heads and the MLP's hidden units are
split over "model" (Megatron-style), so XLA's SPMD partitioner inserts the
all-reduces. Adam, checkpoints every --checkpoint-every steps (restorable
with --restore), and a progress bar with step, loss and tokens/s.

    .venv/bin/python examples/python/train_lm.py --steps 300
    .venv/bin/python examples/python/train_lm.py --check-jax --steps 50
    .venv/bin/python examples/python/train_lm.py --restore ckpt/step_000200.npz --steps 300
    .venv/bin/python examples/python/train_lm.py --cluster HOST:PORT [--token-file F]

--check-jax trains the same model with plain JAX on this process's CPU
device, from the same initial parameters and batches, and reports how far
the two loss curves are apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import glob
import math
import os
import sys
import sysconfig
import time
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

# The model, data and plain-JAX training below use JAX alone (so that they
# also run as unmodified JAX through `causeway proxy`:
# bench/proxy_train_bench.py); Causeway's own API is imported where the
# Causeway side uses it.


@dataclasses.dataclass(frozen=True)
class Config:
    seq_len: int = 64
    batch: int = 16
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    mlp: int = 256
    lr: float = 3e-3
    seed: int = 0


# ---------------------------------------------------------------------------
# Data: the standard library's own source text, as bytes.
# ---------------------------------------------------------------------------


def stdlib_text(max_bytes: int = 4 << 20) -> bytes:
    """The .py files of the standard library's top directory, in name order,
    up to `max_bytes`."""
    directory = sysconfig.get_paths()["stdlib"]
    parts, total = [], 0
    for path in sorted(glob.glob(os.path.join(directory, "*.py"))):
        with open(path, "rb") as f:
            data = f.read()
        parts.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    return b"".join(parts)[:max_bytes]


class Corpus:
    """Byte-level tokens of a text, a vocabulary of the bytes it uses, and
    deterministic batches by step number."""

    def __init__(self, text: bytes):
        data = np.frombuffer(text, dtype=np.uint8)
        self.vocab = np.unique(data)
        lookup = np.zeros(256, np.int32)
        lookup[self.vocab] = np.arange(len(self.vocab), dtype=np.int32)
        self.tokens = lookup[data]
        counts = np.bincount(self.tokens, minlength=len(self.vocab)).astype(np.float64)
        p = counts / counts.sum()
        p = p[p > 0]
        self.unigram_entropy = float(-(p * np.log(p)).sum())  # nats per token

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def batch(self, config: Config, step: int) -> np.ndarray:
        """(batch, seq_len + 1) int32 windows at offsets drawn from the step."""
        rng = np.random.default_rng((config.seed, step))
        starts = rng.integers(0, len(self.tokens) - config.seq_len - 1, config.batch)
        return np.stack([self.tokens[s:s + config.seq_len + 1] for s in starts])


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------


def init_params(config: Config, vocab: int) -> dict:
    rng = np.random.default_rng(config.seed)
    d, h, f = config.d_model, config.heads, config.mlp
    k = d // h

    def normal(*shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    layers = []
    for _ in range(config.layers):
        layers.append({
            "ln1": np.ones(d, np.float32),
            "wq": normal(d, h, k, scale=d ** -0.5),
            "wk": normal(d, h, k, scale=d ** -0.5),
            "wv": normal(d, h, k, scale=d ** -0.5),
            "wo": normal(h, k, d, scale=(2 * config.layers * d) ** -0.5),
            "ln2": np.ones(d, np.float32),
            "w1": normal(d, f, scale=d ** -0.5),
            "w2": normal(f, d, scale=(2 * config.layers * f) ** -0.5),
        })
    return {
        "embed": normal(vocab, d, scale=0.02),
        "pos": normal(config.seq_len, d, scale=0.02),
        "layers": layers,
        "ln_f": np.ones(d, np.float32),
        "unembed": normal(d, vocab, scale=d ** -0.5),
    }


def param_specs(params: dict) -> dict:
    """Heads and MLP hidden units over "model"; everything else replicated."""
    layer = {"ln1": P(), "wq": P(None, "model", None), "wk": P(None, "model", None),
             "wv": P(None, "model", None), "wo": P("model", None, None), "ln2": P(),
             "w1": P(None, "model"), "w2": P("model", None)}
    return {"embed": P(), "pos": P(), "layers": [layer] * len(params["layers"]),
            "ln_f": P(), "unembed": P()}


def layer_norm(x, scale):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * scale


def forward(params: dict, tokens):
    """Logits (batch, seq, vocab) for `tokens` (batch, seq)."""
    t = tokens.shape[1]
    x = params["embed"][tokens] + params["pos"][:t]
    causal = jnp.tril(jnp.ones((t, t), bool))
    for layer in params["layers"]:
        h = layer_norm(x, layer["ln1"])
        q = jnp.einsum("btd,dhk->bhtk", h, layer["wq"])
        k = jnp.einsum("btd,dhk->bhtk", h, layer["wk"])
        v = jnp.einsum("btd,dhk->bhtk", h, layer["wv"])
        scores = jnp.einsum("bhtk,bhsk->bhts", q, k) / math.sqrt(q.shape[-1])
        scores = jnp.where(causal, scores, -1e9)
        attended = jnp.einsum("bhts,bhsk->bhtk", jax.nn.softmax(scores, axis=-1), v)
        x = x + jnp.einsum("bhtk,hkd->btd", attended, layer["wo"])
        h = layer_norm(x, layer["ln2"])
        x = x + jax.nn.gelu(h @ layer["w1"]) @ layer["w2"]
    return layer_norm(x, params["ln_f"]) @ params["unembed"]


def loss_fn(params: dict, batch):
    logits = forward(params, batch[:, :-1])
    targets = batch[:, 1:]
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(log_probs, targets[..., None], axis=-1)
    return -jnp.mean(picked)


@functools.lru_cache(maxsize=None)
def make_step(config: Config):
    """One Adam step: (params, opt, batch) -> (params, opt, loss). One
    function per config, so that JAX traces and compiles it once."""
    b1, b2, eps = 0.9, 0.99, 1e-8

    def step(params, opt, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        count = opt["count"] + 1
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
        scale = config.lr * jnp.sqrt(1 - b2 ** count) / (1 - b1 ** count)
        params = jax.tree.map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + eps),
                              params, m, v)
        return params, {"m": m, "v": v, "count": count}, loss

    return step


def init_opt(params: dict) -> dict:
    zeros = jax.tree.map(np.zeros_like, params)
    return {"m": zeros, "v": jax.tree.map(np.zeros_like, params),
            "count": np.zeros((), np.float32)}


def opt_specs(specs: dict) -> dict:
    return {"m": specs, "v": specs, "count": P()}


# ---------------------------------------------------------------------------
# Checkpoints: one .npz per checkpoint, written atomically.
# ---------------------------------------------------------------------------


def save_checkpoint(path: str, step: int, params, opt, config: Config) -> None:
    leaves = jax.tree_util.tree_leaves((params, opt))
    arrays = {f"leaf_{i:04d}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    tmp = path + ".tmp.npz"
    np.savez(tmp, step=np.int64(step), config=np.array(repr(dataclasses.astuple(config))),
             **arrays)
    os.replace(tmp, path)


def load_checkpoint(path: str, like_params, like_opt, config: Config):
    """(step, params, opt) as numpy, shaped like `like_params`/`like_opt`."""
    with np.load(path) as data:
        saved = str(data["config"])
        if saved != repr(dataclasses.astuple(config)):
            raise ValueError(f"{path} was written with config {saved}, not "
                             f"{dataclasses.astuple(config)}")
        treedef = jax.tree_util.tree_structure((like_params, like_opt))
        leaves = [data[f"leaf_{i:04d}"] for i in range(treedef.num_leaves)]
        params, opt = jax.tree_util.tree_unflatten(treedef, leaves)
        return int(data["step"]), params, opt


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------


class Trainer:
    """The model on a Causeway slice: parameters and optimizer state live on
    the slice with their shardings; each step is one program."""

    def __init__(self, config: Config, corpus: Corpus, slice: "causeway.Slice"):
        import causeway
        self.config, self.corpus, self.slice = config, corpus, slice
        params = init_params(config, corpus.vocab_size)
        self.specs = param_specs(params)
        self.opt_specs = opt_specs(self.specs)
        self._step = causeway.jit(make_step(config), devices=slice,
                                  in_shardings=(self.specs, self.opt_specs, P("data", None)),
                                  out_shardings=(self.specs, self.opt_specs, P()))
        self.set_state(0, params, init_opt(params))

    def set_state(self, step: int, params, opt) -> None:
        import causeway
        put = lambda tree, specs: jax.tree.map(
            lambda x, spec: causeway.device_put(x, self.slice, spec), tree, specs)
        self.step = step
        self.params = put(params, self.specs)
        self.opt = put(opt, self.opt_specs)

    def train_step(self):
        """Dispatches one step; returns its loss (an Array, not waited for)."""
        batch = self.corpus.batch(self.config, self.step)
        self.params, self.opt, loss = self._step(self.params, self.opt, batch)
        self.step += 1
        return loss


def train_plain_jax(config: Config, corpus: Corpus, steps: int, start_step: int = 0,
                    params=None, opt=None, devices=None):
    """The same training with plain jax.jit: on the default CPU device, or
    data x model parallel over `devices` (4 CPU devices) with the same
    shardings. Returns (losses, params, opt)."""
    from jax.sharding import Mesh, NamedSharding
    if params is None:
        params = init_params(config, corpus.vocab_size)
        opt = init_opt(params)
    step = make_step(config)
    if devices is None:
        jitted = jax.jit(step)
    else:
        mesh = Mesh(np.array(devices).reshape(2, 2), ("data", "model"))
        named = lambda specs: jax.tree.map(lambda s: NamedSharding(mesh, s), specs,
                                           is_leaf=lambda s: isinstance(s, P))
        specs = param_specs(params)
        shardings = (named(specs), named(opt_specs(specs)), NamedSharding(mesh, P("data", None)))
        jitted = jax.jit(step, in_shardings=shardings,
                         out_shardings=(shardings[0], shardings[1], NamedSharding(mesh, P())))
        params = jax.device_put(params, shardings[0])
        opt = jax.device_put(opt, shardings[1])
    losses = []
    for k in range(start_step, start_step + steps):
        params, opt, loss = jitted(params, opt, corpus.batch(config, k))
        losses.append(loss)
    return [float(l) for l in losses], params, opt


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="train until this step")
    parser.add_argument("--cluster", metavar="HOST:PORT", help="a running head (default: embedded)")
    parser.add_argument("--token-file", help="the file holding the cluster's token")
    parser.add_argument("--checkpoint-dir", default="lm_checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--restore", metavar="NPZ", help="resume from this checkpoint")
    parser.add_argument("--check-jax", action="store_true",
                        help="also train with plain JAX on CPU and compare the losses")
    parser.add_argument("--text-bytes", type=int, default=4 << 20)
    parser.add_argument("--no-progress", action="store_true")
    for field in dataclasses.fields(Config):
        parser.add_argument("--" + field.name.replace("_", "-"),
                            type={"int": int, "float": float}[field.type], default=field.default)
    args = parser.parse_args(argv)
    config = Config(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Config)})

    import causeway
    from tqdm import tqdm

    corpus = Corpus(stdlib_text(args.text_bytes))
    print(f"text: {len(corpus.tokens):,} bytes of the standard library, vocabulary "
          f"{corpus.vocab_size}, unigram entropy {corpus.unigram_entropy:.3f} nats/char")
    if args.cluster:
        causeway.connect(args.cluster, token_file=args.token_file)
    else:
        causeway.connect(devices_per_host=4)
    s = causeway.make_virtual_device_set().add_slice(devices=4, mesh={"data": 2, "model": 2})
    trainer = Trainer(config, corpus, s)
    if args.restore:
        step, params, opt = load_checkpoint(args.restore, init_params(config, corpus.vocab_size),
                                            init_opt(init_params(config, corpus.vocab_size)), config)
        trainer.set_state(step, params, opt)
        print(f"restored step {step} from {args.restore}")
    os.makedirs(args.checkpoint_dir, exist_ok=True)

    start = trainer.step
    losses = {}
    pending = None  # The previous step's loss: fetched one step late, so
    # that fetching never leaves the devices idle.
    tokens_per_step = config.batch * config.seq_len
    timed = None  # (step, time) once the first step (which compiles) is done.
    bar = tqdm(range(start, args.steps), initial=start, total=args.steps,
               disable=args.no_progress, unit="step", file=sys.stdout)
    for k in bar:
        loss = trainer.train_step()
        if pending is not None:
            losses[k - 1] = float(np.asarray(pending))
            if timed is None:
                timed = (k, time.perf_counter())
            elif k > timed[0]:
                rate = (k - timed[0]) * tokens_per_step / (time.perf_counter() - timed[1])
                bar.set_postfix(step=k, loss=f"{losses[k - 1]:.3f}", tok_s=f"{rate:,.0f}")
        pending = loss
        if (k + 1) % args.checkpoint_every == 0:
            path = os.path.join(args.checkpoint_dir, f"step_{k + 1:06d}.npz")
            save_checkpoint(path, k + 1, trainer.params, trainer.opt, config)
    if pending is not None:
        losses[args.steps - 1] = float(np.asarray(pending))
    bar.close()
    if losses:
        last = np.mean([losses[k] for k in sorted(losses)[-10:]])
        rate = ""
        if timed is not None and args.steps - 1 > timed[0]:
            rate = (f"{(args.steps - 1 - timed[0]) * tokens_per_step / (time.perf_counter() - timed[1]):,.0f}"
                    " tokens/s after the first step; ")
        print(f"steps {start}..{args.steps}: {rate}final loss {last:.3f} nats/char "
              f"(unigram entropy {corpus.unigram_entropy:.3f})")
    if args.check_jax and losses:
        params, opt = init_params(config, corpus.vocab_size), None
        if args.restore:
            _, params, opt = load_checkpoint(args.restore, params, init_opt(params), config)
        reference, _, _ = train_plain_jax(config, corpus, args.steps - start, start, params,
                                          opt if opt is not None else init_opt(params))
        ours = np.array([losses[k] for k in range(start, args.steps)])
        diff = np.abs(ours - np.array(reference))
        print(f"plain JAX on CPU: final loss {np.mean(reference[-10:]):.3f}; "
              f"largest loss difference {diff.max():.2e} (step {start + int(diff.argmax())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
