"""The README's JAX export recipe, run as written: its Python block exports
a sharded function with a large constant, its shell block runs the module on
four devices, and the outputs must be JAX's."""
import os
import re
import shlex
import subprocess
import sys

import numpy as np

from conftest import CAUSEWAY, ROOT

SECTION = "### Running a JAX program from the command line"


def readme_blocks():
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index(SECTION):]
    python = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shell = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return python, shell


def test_the_readme_recipe_exports_and_runs_a_module_with_large_constants(tmp_path):
    python, shell = readme_blocks()
    # The recipe, then JAX's own outputs for the test to compare with.
    script = python + (
        "\nwant = f(w, x)\n"
        "np.save('want0.npy', np.asarray(want[0]))\n"
        "np.save('want1.npy', np.asarray(want[1]))\n")
    (tmp_path / "export.py").write_text(script)
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)  # The recipe sets its own.
    exported = subprocess.run([sys.executable, "export.py"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
    assert exported.returncode == 0, exported.stderr
    module = (tmp_path / "f.hlo").read_text()
    assert "{...}" not in module
    assert "f32[8,8]{1,0} constant({" in module  # The table, printed in full.

    lines = shell.replace("\\\n", " ").splitlines()
    command = next(shlex.split(line, comments=True) for line in lines
                   if "causeway run" in line)
    assert command[0] == "./build/bin/causeway"
    # The flags the recipe printed are the ones the command passes.
    printed = [shlex.split(line) for line in exported.stdout.splitlines()]
    passed = [command[i:i + 2] for i, arg in enumerate(command)
              if arg == "--output-sharding"]
    assert printed == passed
    ran = subprocess.run([CAUSEWAY, *command[1:]], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    for i in range(2):
        np.testing.assert_allclose(np.load(tmp_path / f"out/out{i}.npy"),
                                   np.load(tmp_path / f"want{i}.npy"),
                                   rtol=1e-5, atol=1e-6)
