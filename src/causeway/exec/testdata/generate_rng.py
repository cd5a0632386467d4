# Writes rng_bits.txt, the bits XLA's CPU backend draws for each case of
# rng_test.cc (JAX 0.10.2; each case runs as a one-op StableHLO module,
# since jax.lax.rng_bit_generator does not take a u64[3] Philox state):
#   .venv/bin/python src/causeway/exec/testdata/generate_rng.py \
#       src/causeway/exec/testdata/rng_bits.txt
#   .venv/bin/python src/causeway/exec/testdata/generate_rng.py --verify \
#       src/causeway/exec/testdata/rng_bits.txt
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

KEY = 0x0123456789ABCDEF
# name, algorithm (StableHLO spelling), state words, dtype, dims
CASES = [
    ("ThreeFryEvenShape", "THREE_FRY", [KEY, 0xFEDCBA9876543210], "u32", [2, 3]),
    ("ThreeFryOddShapeSplitsItsLargestDim", "THREE_FRY", [KEY, 0xFEDCBA9876543210], "u32", [3, 3]),
    ("ThreeFryScalar", "THREE_FRY", [KEY, 0xFEDCBA9876543210], "u32", []),
    ("ThreeFry64BitWords", "THREE_FRY", [KEY, 0xFEDCBA9876543210], "u64", [5]),
    ("ThreeFryNarrowType", "THREE_FRY", [KEY, 0xFEDCBA9876543210], "u8", [4]),
    ("PhiloxTwoWordState", "PHILOX", [KEY, 0xFEDCBA9876543210], "u32", [7]),
    ("Philox64BitWords", "PHILOX", [KEY, 0xFEDCBA9876543210], "u64", [3]),
    ("PhiloxCarriesIntoTheHighWord", "PHILOX", [KEY, 0xFFFFFFFFFFFFFFFE, 7], "u32", [2, 3]),
    ("PhiloxU16", "PHILOX", [KEY, 0xFFFFFFFFFFFFFFFE, 7], "u16", [5]),
    ("DefaultIsPhilox", "DEFAULT", [KEY, 0xFEDCBA9876543210], "u32", [5]),
]
MLIR_TYPE = {"u8": "ui8", "u16": "ui16", "u32": "ui32", "u64": "ui64"}
NUMPY_TYPE = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}


def draw(algorithm, state, dtype, dims):
    n = len(state)
    out = f"tensor<{'x'.join(map(str, dims)) + 'x' if dims else ''}{MLIR_TYPE[dtype]}>"
    text = f"""
module @rng {{
  func.func public @main(%state: tensor<{n}xui64>) -> (tensor<{n}xui64>, {out}) {{
    %s, %b = stablehlo.rng_bit_generator %state, algorithm = {algorithm} : (tensor<{n}xui64>) -> (tensor<{n}xui64>, {out})
    return %s, %b : tensor<{n}xui64>, {out}
  }}
}}
"""
    device = jax.devices()[0]
    executable = device.client.compile_and_load(text, [device])
    results = executable.execute_sharded([jax.device_put(np.array(state, np.uint64), device)])
    new_state, bits = (np.asarray(r[0]) for r in results.disassemble_into_single_device_arrays())
    assert bits.dtype == NUMPY_TYPE[dtype] and list(bits.shape) == dims
    return new_state, bits


def hexes(values):
    return ",".join(f"{int(v):x}" for v in np.ravel(values)) or "-"


def render():
    lines = ["# Written by generate_rng.py (JAX " + jax.__version__ + "); do not edit.",
             "# name algorithm state type dims bits new_state (hex, comma-separated; '-' is empty)"]
    for name, algorithm, state, dtype, dims in CASES:
        new_state, bits = draw(algorithm, state, dtype, dims)
        lines.append(" ".join([name, algorithm, hexes(np.array(state, np.uint64)), dtype,
                               ",".join(map(str, dims)) or "-", hexes(bits), hexes(new_state)]))
    return "\n".join(lines) + "\n"


def main(argv):
    verify = argv[1:2] == ["--verify"]
    path = argv[-1]
    text = render()
    if verify:
        with open(path) as f:
            if f.read() != text:
                sys.exit(f"{path} differs from what generate_rng.py writes now")
        print(f"{path}: up to date")
        return
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path} ({len(CASES)} cases)")


if __name__ == "__main__":
    main(sys.argv)
