"""Shared helpers: JAX on 8 fake CPU devices, the built `causeway` tool, and
an embedded Causeway cluster per test (`cluster`)."""
import os
import subprocess

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jaxlib._hlo as hlo_lib  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("CAUSEWAY_BUILD", os.path.join(ROOT, "build"))
CAUSEWAY = os.path.join(BUILD, "bin", "causeway")

_PRINT = hlo_lib.HloPrintOptions()
_PRINT.print_large_constants = True


def module_text(compiled):
    """The optimized, partitioned module XLA compiled, constants in full."""
    (module,) = compiled.runtime_executable().hlo_modules()
    return module.to_string(_PRINT)


def save(path, array):
    np.save(path, np.asarray(array))
    return str(path)


def load(path):
    a = np.load(path)
    return a.view(ml_dtypes.bfloat16) if a.dtype == np.dtype("V2") else a


def run_causeway(*args, check=True):
    """Runs `causeway ARGS`; returns the CompletedProcess."""
    result = subprocess.run([CAUSEWAY, *map(str, args)], capture_output=True,
                            text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"causeway {' '.join(map(str, args))} failed:\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="session", autouse=True)
def built_tool():
    if not os.path.exists(CAUSEWAY):
        pytest.fail(f"{CAUSEWAY} is missing: run `make` first")


@pytest.fixture
def cluster(request):
    """`cluster(**sizes)` connects an embedded cluster (the current client)
    for this test; it is disconnected when the test ends, pass or fail."""
    import causeway

    yield causeway.connect
    causeway.disconnect()
