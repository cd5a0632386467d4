"""Bit for bit against the installed JAX: every f16 and bf16 value through
each unary op, random f32 values through the math functions, f64 rsqrt, and
random f16 fusions whose multiplies XLA may contract into fused
multiply-adds (docs/hlo.md, "Rounding").

XLA's results depend on the processor (src/causeway/exec/xla_cpu_target.h),
so each test runs on variants: as detected on this processor, and forced the
same way in both, in JAX by XLA's own flags (XLA_FLAGS, read once per
process: JAX runs in a fresh process per variant) and in Causeway by
CAUSEWAY_XLA_CPU. So the paths of processors without AVX-512 (FP16 or F) are
checked on those with them. XLA has no flag for the vendor: the AMD rsqrt
matches JAX where the detected variant runs on an AMD processor, and
elsewhere is checked against its error bound. Tests that force Causeway's
wrong variant show that the detection is what makes the results match."""
import os
import subprocess
import sys

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax
import ml_dtypes
import pytest

from conftest import load, module_text, run_causeway, save

TESTS = os.path.dirname(os.path.abspath(__file__))

UNARY = {
    "exp": jnp.exp, "log": jnp.log, "tanh": jnp.tanh, "logistic": jax.nn.sigmoid,
    "rsqrt": lax.rsqrt, "sqrt": jnp.sqrt, "expm1": jnp.expm1, "log1p": jnp.log1p,
    "erf": lax.erf, "sin": jnp.sin, "cos": jnp.cos, "sign": jnp.sign,
}

# (XLA_FLAGS for JAX, CAUSEWAY_XLA_CPU for Causeway): the same choice.
DETECTED = ("", "")
MAX_ISA_AVX2 = ("--xla_cpu_max_isa=AVX2", "max_isa=AVX2")
NO_PLATFORM_MATH = ("--xla_backend_extra_options=xla_cpu_disable_platform_dependent_math",
                    "disable_platform_dependent_math")
VARIANTS = {"detected": DETECTED, "max_isa_avx2": MAX_ISA_AVX2,
            "no_platform_math": NO_PLATFORM_MATH}


def cpuinfo(key):
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].split() for line in f if line.startswith(key)), [])


IS_AMD = "AuthenticAMD" in cpuinfo("vendor_id")
HAS_AVX512_FP16 = "avx512_fp16" in cpuinfo("flags")
HAS_AVX512F = "avx512f" in cpuinfo("flags")


# The programs, by name: each returns (function, arguments). The JAX side
# runs in a subprocess, which finds them here.
def half_unary(dtype_name):
    dtype = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype_name]
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(dtype)
    ops = list(UNARY.values())
    return (lambda x: tuple(op(x) for op in ops)), [every]


def f32_values():
    r = np.random.default_rng(7)
    n = 1 << 16
    return np.concatenate([(r.standard_normal(n) * 30).astype(np.float32),
                           r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
                           .view(np.float32)])


def f32_math(_):
    ops = list(UNARY.values())
    return (lambda x: tuple(op(x) for op in ops)), [f32_values()]


def f32_rsqrt(_):
    return lax.rsqrt, [f32_values()]


def f64_rsqrt(_):
    jax.config.update("jax_enable_x64", True)
    r = np.random.default_rng(11)
    n = 1 << 15
    x = np.concatenate([np.abs(r.standard_normal(n) * 30),
                        r.integers(0, 2**63, n, dtype=np.uint64).view(np.float64),
                        [0.0, -0.0, np.inf, -1.0, 5e-324, 2.2250738585072014e-308]])
    return lax.rsqrt, [x]


def f16_fusion(seed):
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
    return f, [a, b, c]


def f16_multiply_add(_):
    """One fusion that contracts wherever XLA computes f16 natively."""
    r = np.random.default_rng(5)
    a, b, c = [(r.standard_normal(4096) * 1.5).astype(np.float16) for _ in range(3)]
    return (lambda a, b, c: (a * b + c) * a - b), [a, b, c]


PROGRAMS = {f.__name__: f for f in (half_unary, f32_math, f32_rsqrt, f64_rsqrt, f16_fusion,
                                    f16_multiply_add)}


def write_reference(program, param, out):
    """In the JAX subprocess: compiles `program`, writes its module, its
    inputs (one partition) and JAX's outputs under `out`."""
    f, args = PROGRAMS[program](param)
    compiled = jax.jit(f, keep_unused=True).lower(*args).compile()
    want = compiled(*args)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    with open(os.path.join(out, "f.hlo"), "w") as hlo:
        hlo.write(module_text(compiled))
    for i, a in enumerate(args):
        save(os.path.join(out, f"in{i}.npy"), np.asarray(a)[None])
    for i, w in enumerate(want):
        save(os.path.join(out, f"want{i}.npy"), np.asarray(w))


# What each JAX variant is asked for: one JAX process per variant writes
# them all (a process reads XLA_FLAGS once; starting JAX once per program
# cost more than the programs). f64_rsqrt turns on x64 for the rest of its
# process, so it comes last.
_WANTED = {
    DETECTED[0]: [("half_unary", "f16"), ("half_unary", "bf16"), ("f32_math", None),
                  ("f16_multiply_add", None), ("f32_rsqrt", None),
                  *[("f16_fusion", seed) for seed in range(6)], ("f64_rsqrt", None)],
    MAX_ISA_AVX2[0]: [("half_unary", "f16"), ("half_unary", "bf16"), ("f32_math", None),
                      ("f16_multiply_add", None),
                      *[("f16_fusion", seed) for seed in range(6)], ("f64_rsqrt", None)],
    NO_PLATFORM_MATH[0]: [("f32_math", None), ("f64_rsqrt", None)],
}


def write_references(xla_flags, out):
    """In the JAX subprocess: every reference `xla_flags` is asked for."""
    for program, param in _WANTED[xla_flags]:
        folder = os.path.join(out, f"{program}-{param}")
        os.makedirs(folder)
        write_reference(program, param, folder)


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """The folder of JAX's reference for (program, param) under
    `xla_flags`, written on first use by one JAX process per variant."""
    written = {}

    def folder(program, param, xla_flags):
        if xla_flags not in written:
            out = tmp_path_factory.mktemp("jax")
            script = (f"import sys; sys.path.insert(0, {TESTS!r}); "
                      f"import test_rounding_vs_jax as t; "
                      f"t.write_references({xla_flags!r}, {str(out)!r})")
            env = {**os.environ, "XLA_FLAGS": xla_flags, "JAX_PLATFORMS": "cpu"}
            jax_run = subprocess.run([sys.executable, "-c", script], env=env,
                                     capture_output=True, text=True, timeout=600)
            assert jax_run.returncode == 0, \
                f"JAX with XLA_FLAGS={xla_flags!r} failed:\n{jax_run.stderr}"
            written[xla_flags] = out
        return written[xla_flags] / f"{program}-{param}"
    return folder


def run_both(references, tmp_path, program, param, xla_flags, causeway_xla_cpu):
    """Causeway's outputs and JAX's for `program`, JAX run with `xla_flags`,
    Causeway with CAUSEWAY_XLA_CPU=`causeway_xla_cpu`."""
    jax_dir = references(program, param, xla_flags)
    inputs = sorted(jax_dir.glob("in*.npy"))
    run_causeway("run", jax_dir / "f.hlo", "--partitions", 1,
                 *[arg for path in inputs for arg in ("--input", path)],
                 "--output-dir", tmp_path / "out", env={"CAUSEWAY_XLA_CPU": causeway_xla_cpu})
    want = [load(path) for path in sorted(jax_dir.glob("want*.npy"),
                                          key=lambda p: int(p.stem[4:]))]
    got = [load(tmp_path / f"out/out{i}.npy")[0].view(w.dtype) for i, w in enumerate(want)]
    return got, want


def bits(a):
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def isnan(a):
    return np.isnan(a.astype(np.float32) if a.dtype.itemsize == 2 else a)


def differing(got, want):
    nan = isnan(got) & isnan(want)
    return np.flatnonzero((bits(got) != bits(want)) & ~nan)


def assert_same_bits(got, want, what=""):
    differ = differing(got, want)
    assert differ.size == 0, (f"{what}: {differ.size} of {want.size} elements differ; first at "
                              f"{differ[:3]}: got {got.reshape(-1)[differ[:3]]}, "
                              f"want {want.reshape(-1)[differ[:3]]}")


@pytest.mark.parametrize("variant", ["detected", "max_isa_avx2"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_every_half_value_through_every_unary_op_matches_jax(references, tmp_path, dtype,
                                                           variant):
    got, want = run_both(references, tmp_path, "half_unary", dtype, *VARIANTS[variant])
    for name, g, w in zip(UNARY, got, want):
        assert_same_bits(g, w, name)


@pytest.mark.parametrize("variant", ["detected", "max_isa_avx2", "no_platform_math"])
def test_random_f32_values_through_the_math_functions_match_jax(references, tmp_path,
                                                               variant):
    got, want = run_both(references, tmp_path, "f32_math", None, *VARIANTS[variant])
    for name, g, w in zip(UNARY, got, want):
        assert_same_bits(g, w, name)


@pytest.mark.parametrize("variant", ["detected", "max_isa_avx2", "no_platform_math"])
def test_f64_rsqrt_matches_jax(references, tmp_path, variant):
    (got,), (want,) = run_both(references, tmp_path, "f64_rsqrt", None, *VARIANTS[variant])
    assert_same_bits(got, want, "rsqrt")


@pytest.mark.parametrize("variant", ["detected", "max_isa_avx2"])
@pytest.mark.parametrize("seed", range(6))
def test_random_f16_fusions_with_multiply_adds_match_jax(references, tmp_path, seed,
                                                         variant):
    (got,), (want,) = run_both(references, tmp_path, "f16_fusion", seed, *VARIANTS[variant])
    assert_same_bits(got, want)


# Causeway forced to the wrong variant: the results must differ, so the
# tests above pass because Causeway follows XLA's choice, not by accident.
def test_f16_fusions_differ_where_causeway_gets_native_half_precision_wrong(references,
                                                                           tmp_path):
    flipped = "no_avx512fp16" if HAS_AVX512_FP16 else "avx512fp16"
    (got,), (want,) = run_both(references, tmp_path, "f16_multiply_add", None, "", flipped)
    assert differing(got, want).size > 0
    # And where XLA is forced to half precision in f32, as without FP16.
    (tmp_path / "avx2").mkdir()
    (got,), (want,) = run_both(references, tmp_path / "avx2", "f16_multiply_add", None,
                               MAX_ISA_AVX2[0], "avx512fp16")
    assert differing(got, want).size > 0


def test_f32_rsqrt_differs_where_causeway_gets_the_vendor_wrong(references, tmp_path):
    (got,), (want,) = run_both(references, tmp_path, "f32_rsqrt", None, "",
                               "intel" if IS_AMD else "amd")
    assert differing(got, want).size > 0


def test_f64_rsqrt_differs_where_causeway_gets_avx512_wrong(references, tmp_path):
    if not HAS_AVX512F:
        pytest.skip("without AVX-512 F there is one f64 rsqrt (1/sqrt(x)) to choose")
    (got,), (want,) = run_both(references, tmp_path, "f64_rsqrt", None, "", "no_avx512f")
    assert differing(got, want).size > 0


def test_the_other_vendors_f32_rsqrt_stays_within_its_error_bound(references, tmp_path):
    """The refinement of the other vendor, which XLA cannot be told to use
    here: one Newton step (AMD) or two (Intel) from this processor's
    estimate, within 4 ulp of the correctly rounded 1/sqrt(x) for positive
    normal x (docs/hlo.md, "Rounding")."""
    other = "intel" if IS_AMD else "amd"
    (got,), (want,) = run_both(references, tmp_path, "f32_rsqrt", None, "", other)
    x = f32_values()
    normal = (x >= np.finfo(np.float32).tiny) & np.isfinite(x)
    exact = (1 / np.sqrt(x[normal].astype(np.float64))).astype(np.float32)
    ulps = np.abs(bits(got[normal]).astype(np.int64) - bits(exact).astype(np.int64))
    assert ulps.max() <= 4, f"{ulps.max()} ulp"
    assert differing(got, want).size > 0
    # Everything else is the estimate itself, as in the detected variant.
    assert_same_bits(got[~normal], want[~normal], "rsqrt outside the positive normals")
