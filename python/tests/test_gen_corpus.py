"""tools/gen_corpus.py --verify in `make test`: the committed corpus
(tests/corpus) is what the pinned JAX writes today, on whatever processor
this runs (docs/corpus.md). The script runs in a process of its own
(conftest.corpus_on_jax, shared with test_proxy_corpus.py): it configures
JAX before importing it."""
import subprocess
import sys

from conftest import ROOT


def run_python(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=3600)


def test_the_committed_corpus_is_what_jax_writes_today(corpus_on_jax):
    verify, outputs = corpus_on_jax
    assert verify.returncode == 0, verify.stdout[-6000:] + verify.stderr[-3000:]
    assert "MISMATCH" not in verify.stdout
    assert outputs.stat().st_size > 0


# verify_program on a committed program against copies changed in one way
# each: what must pass and what must not.
_CHECKS = r"""
import os, sys
sys.argv = ["gen_corpus"]
sys.path.insert(0, "tools")
import numpy as np
import gen_corpus as g

d = os.path.join("tests", "corpus", "softmax_layernorm")
disk = {f: open(os.path.join(d, f), "rb").read() for f in os.listdir(d)}
text = disk["program.hlo"].decode()
assert "StackFrames" in text and "stack_frame_id=" in text
assert g.verify_program(disk, dict(disk)) == []

# Where the script ran from is not part of the program.
moved = dict(disk, **{"program.hlo": text.replace("gen_corpus.py", "elsewhere.py").encode()})
assert moved["program.hlo"] != disk["program.hlo"]
assert g.verify_program(disk, moved) == []

# An instruction that differs is a mismatch.
changed = dict(disk, **{"program.hlo": text.replace("exponential(", "log(", 1).encode()})
assert changed["program.hlo"] != disk["program.hlo"]
assert [p for p in g.verify_program(disk, changed) if p.startswith("program.hlo")], "changed program"

# An output within the manifest's tolerance passes; one beyond it does not.
out = g._load_npy(disk["out0.npy"], np.float32)
assert g.verify_program(disk, dict(disk, **{"out0.npy": g._npy_bytes(out * (1 + 1e-6))})) == []
far = g.verify_program(disk, dict(disk, **{"out0.npy": g._npy_bytes(out + 1)}))
assert far and far[0].startswith("out0.npy"), far

# An output the manifest compares exactly: bit for bit on the writer's kind
# of processor, not at all on another (XLA's f16 fusions and rsqrt round
# differently without AVX512-FP16 or on AMD), saying so.
d = os.path.join("tests", "corpus", "f16_bf16_rounding")
exact = {f: open(os.path.join(d, f), "rb").read() for f in os.listdir(d)}
assert "out0.npy f16 [64] 0 0" in exact["manifest.txt"].decode()
out = g._load_npy(exact["out0.npy"], np.float16)
ulp = dict(exact, **{"out0.npy": g._npy_bytes(np.nextafter(out, np.float16(np.inf)))})
assert g.verify_program(exact, ulp), "one ulp off on the writer's processor"
skipped = []
assert g.verify_program(exact, ulp, ("AuthenticAMD", False, True), skipped) == []
assert "out0.npy: exact bits of the writer's kind of processor" in skipped, skipped

# An input is compared bit for bit.
assert g.verify_program(disk, dict(disk, **{"in0.npy": disk["in0.npy"][:-1] + b"x"}))
print("checked")
"""


def test_verify_ignores_source_locations_and_catches_real_changes():
    checks = run_python("-c", _CHECKS)
    assert checks.returncode == 0, checks.stdout + checks.stderr
    assert checks.stdout.strip().endswith("checked")
