# Writes what XLA:CPU (JAX 0.10.2) makes of converts to and from each
# minifloat type, for element_types_test.cc:
#   JAX_PLATFORMS=cpu .venv/bin/python \
#     src/causeway/hlo/testdata/generate_minifloats.py src/causeway/hlo/testdata/minifloats
# Inputs (the test builds the same list): every f16 bit pattern widened to
# f32, then 4096 f32 bit patterns from the LCG below. For each type T:
# T_encode.npy, the u8 bits of convert(f32 -> T) of every input; and
# T_decode.npy, f32 convert(T -> f32) of every valid bit pattern. Where
# XLA and ml_dtypes disagree the script says so (XLA is what we match).
import os
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

TYPES = {  # HLO name -> ml_dtypes name, bits per value
    "f8e5m2": ("float8_e5m2", 8),
    "f8e4m3": ("float8_e4m3", 8),
    "f8e4m3fn": ("float8_e4m3fn", 8),
    "f8e4m3b11fnuz": ("float8_e4m3b11fnuz", 8),
    "f8e5m2fnuz": ("float8_e5m2fnuz", 8),
    "f8e4m3fnuz": ("float8_e4m3fnuz", 8),
    "f8e3m4": ("float8_e3m4", 8),
    "f8e8m0fnu": ("float8_e8m0fnu", 8),
    "f4e2m1fn": ("float4_e2m1fn", 4),
}


def lcg_bits(n):
    """x <- x * 6364136223846793005 + 1442695040888963407 (mod 2^64), top 32 bits."""
    out = np.empty(n, np.uint32)
    x = 0x853C49E6748FEA9B
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
        out[i] = x >> 32
    return out


def inputs():
    f16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    return np.concatenate([f16, lcg_bits(4096).view(np.float32)])


def main(out):
    os.makedirs(out, exist_ok=True)
    x = inputs()
    for name, (ml_name, bits) in TYPES.items():
        t = getattr(ml_dtypes, ml_name)
        encode = np.asarray(jax.jit(lambda v: v.astype(t))(x)).view(np.uint8)
        valid = np.arange(1 << bits, dtype=np.uint8).view(t)
        decode = np.asarray(jax.jit(lambda v: v.astype(jnp.float32))(valid))
        differ = int(np.sum((encode != x.astype(t).view(np.uint8)) & ~np.isnan(x)))
        if differ:
            print(f"{name}: XLA and ml_dtypes encode {differ} inputs differently")
        np.save(f"{out}/{name}_encode.npy", encode)
        np.save(f"{out}/{name}_decode.npy", decode)
        print(name, encode.size, decode.size)


if __name__ == "__main__":
    main(sys.argv[1])
