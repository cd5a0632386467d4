"""The JAX functions of the conformance corpus (tools/gen_corpus.py), run
unmodified with jax.jit through `causeway proxy` (jaxlib's own IFRT proxy
client), against the same functions on JAX's CPU backend, each output within
the corpus's tolerance for its dtype (docs/corpus.md). One test per program;
the run through the proxy (one JAX process, all programs) happens once for
the module, and the reference is the session's one run of the corpus on
JAX's CPU backend (conftest.corpus_on_jax)."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from conftest import ProcessCluster
from test_proxy import jax_env

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "tests", "corpus")
RUNNER = os.path.join(HERE, "proxy_corpus_runner.py")
NAMES = sorted(n for n in os.listdir(CORPUS)
               if os.path.isfile(os.path.join(CORPUS, n, "manifest.txt")))


def run_on_proxy(env: dict, path: str) -> dict:
    result = subprocess.run([sys.executable, RUNNER, path], env=env, capture_output=True,
                            text=True, timeout=1200, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-6000:]
    with open(path, "rb") as f:
        return pickle.load(f)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, corpus_on_jax):
    folder = tmp_path_factory.mktemp("proxy_corpus")
    # One island of 8 devices over two worker processes: the corpus's
    # programs use up to 8 partitions.
    with ProcessCluster("--islands", 1, "--hosts-per-island", 2, "--devices-per-host", 4,
                        "--proxy-listen", "127.0.0.1:0",
                        "--proxy-python", sys.executable) as cluster:
        proxied = run_on_proxy(jax_env(cluster.proxy_address), str(folder / "proxy.pkl"))
    # The reference: the same functions on JAX's CPU backend, from the run
    # of tools/gen_corpus.py --verify that test_gen_corpus.py checks.
    verify, reference_path = corpus_on_jax
    assert reference_path.exists(), (
        "tools/gen_corpus.py --verify wrote no outputs: " + verify.stderr[-3000:])
    with open(reference_path, "rb") as f:
        return proxied, pickle.load(f)


def test_every_corpus_program_is_run():
    assert len(NAMES) == 64


@pytest.mark.parametrize("name", NAMES)
def test_corpus_function_through_the_proxy_matches_jax(outputs, name):
    proxied, reference = outputs
    want = reference[name]
    assert "error" not in want, want.get("error")
    got = proxied[name]
    assert "error" not in got, got["error"]
    assert len(got["leaves"]) == len(want["leaves"])
    for i, (g, w, (rtol, atol)) in enumerate(zip(got["leaves"], want["leaves"],
                                                 want["tolerances"])):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, g.dtype, w.shape, w.dtype)
        if g.dtype.kind in "biuV" or (rtol, atol) == (0.0, 0.0):
            if g.dtype.type.__module__ == "ml_dtypes":
                # bf16, the minifloats, int2/int4: exact in f64, where NaN
                # matches NaN whatever ml_dtypes' version (numpy's testing
                # finds no isnan for them in 0.6).
                g, w = g.astype(np.float64), w.astype(np.float64)
            np.testing.assert_array_equal(g, w, err_msg=f"{name} output {i} ({g.dtype})")
            continue
        wide = np.complex128 if np.iscomplexobj(w) else np.float64
        gw, ww = g.astype(wide), w.astype(wide)
        # Elements that are not finite (inf, nan; for complex, either part)
        # must be the same, part by part; the rest within the tolerance (for
        # complex, of the modulus of the difference).
        finite = np.isfinite(ww)
        for part in ((np.real, np.imag) if np.iscomplexobj(w) else (np.real,)):
            np.testing.assert_array_equal(part(gw[~finite]), part(ww[~finite]),
                                          err_msg=f"{name} output {i}: non-finite values")
        excess = np.abs(gw[finite] - ww[finite]) - (atol + rtol * np.abs(ww[finite]))
        assert not (excess > 0).any(), (
            f"{name} output {i}: {int((excess > 0).sum())} elements off by more than "
            f"atol {atol} + rtol {rtol}; worst excess {excess.max()}")
