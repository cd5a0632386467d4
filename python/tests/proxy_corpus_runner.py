"""Runs every JAX function of the conformance corpus (tools/gen_corpus.py) with
jax.jit through `causeway proxy` (JAX_BACKEND_TARGET names it) and pickles
each program's outputs, {name: {"leaves": [...]}} (or {"error": ...}):
`python proxy_corpus_runner.py OUT.pkl [NAME ...]`.

test_proxy_corpus.py compares them with the same functions' outputs on JAX's
CPU backend, within the tolerances that come with those
(tools/gen_corpus.py --outputs). gen_corpus chooses JAX's CPU
backend when imported, so the proxy is chosen after it."""
import os
import pickle
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tools"))
import gen_corpus  # noqa: E402  (sets XLA_FLAGS and JAX_PLATFORMS=cpu)
import jax  # noqa: E402
import numpy as np  # noqa: E402

os.environ["JAX_PLATFORMS"] = "proxy"
jax.config.update("jax_platforms", "proxy")
import pathwaysutils  # noqa: E402

pathwaysutils.initialize()

results = {}
for name in sys.argv[2:] or sorted(gen_corpus.PROGRAMS):
    try:
        program = gen_corpus.PROGRAMS[name]()
        _, compiled, args = gen_corpus.compile_program(program)
        with jax.enable_x64(program.x64):
            results[name] = {"leaves": [np.asarray(leaf)
                                    for leaf in jax.tree.leaves(compiled(*args))]}
    except Exception as error:  # Reported per program by the test.
        results[name] = {"error": f"{type(error).__name__}: {error}"}
with open(sys.argv[1], "wb") as f:
    pickle.dump(results, f)
