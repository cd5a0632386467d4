"""Bad input to `causeway run`: each is refused with a message naming what
is wrong, and exit status 1 (never a crash, never a hang)."""
import numpy as np
import jax
import jax.numpy as jnp

from conftest import module_text, run_causeway, save

ADD = """HloModule add
ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  ROOT s = f32[4] add(a, b)
}
"""


def write(tmp_path, text):
    path = tmp_path / "p.hlo"
    path.write_text(text)
    return path


def test_input_of_wrong_shape_names_the_parameter(tmp_path):
    program = write(tmp_path, ADD)
    r = run_causeway("run", program, "--partitions", 1,
                     "--input", save(tmp_path / "a.npy", np.zeros((1, 4), np.float32)),
                     "--input", save(tmp_path / "b.npy", np.zeros((1, 5), np.float32)),
                     "--output-dir", tmp_path / "out", check=False)
    assert r.returncode == 1
    assert "parameter 1" in r.stderr and "f32[4]" in r.stderr


def test_input_of_wrong_dtype_names_the_parameter(tmp_path):
    program = write(tmp_path, ADD)
    r = run_causeway("run", program, "--partitions", 1,
                     "--input", save(tmp_path / "a.npy", np.zeros((1, 4), np.int32)),
                     "--input", save(tmp_path / "b.npy", np.zeros((1, 4), np.float32)),
                     "--output-dir", tmp_path / "out", check=False)
    assert r.returncode == 1
    assert "parameter 0" in r.stderr and "s32" in r.stderr


def test_malformed_program_reports_line_and_column(tmp_path):
    program = write(tmp_path, ADD.replace("add(a, b)", "add(a b)"))
    r = run_causeway("run", program, "--partitions", 1, "--input", "x.npy",
                     "--input", "y.npy", "--output-dir", tmp_path, check=False)
    assert r.returncode == 1
    assert "line 5:" in r.stderr


def test_unsupported_op_is_named_with_its_line(tmp_path):
    program = write(tmp_path, ADD.replace("add(a, b)", "cholesky(a, b)"))
    r = run_causeway("run", program, "--partitions", 1, "--input", "x.npy",
                     "--input", "y.npy", "--output-dir", tmp_path, check=False)
    assert r.returncode == 1
    assert "cholesky" in r.stderr and "line 5" in r.stderr


def test_elided_constants_from_jax_are_refused(tmp_path):
    table = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    f = jax.jit(lambda x: x * jnp.asarray(table))
    # compile().as_text() prints large constants as {...} by default.
    text = f.lower(np.ones(100, np.float32)).compile().as_text()
    assert "{...}" in text
    program = write(tmp_path, text)
    r = run_causeway("run", program, "--partitions", 1,
                     "--input", save(tmp_path / "x.npy", np.ones((1, 100), np.float32)),
                     "--output-dir", tmp_path / "out", check=False)
    assert r.returncode == 1
    assert "elided" in r.stderr


def test_global_mode_refuses_a_module_without_shardings(tmp_path):
    program = write(tmp_path, ADD)
    r = run_causeway("run", program, "--partitions", 1, "--global",
                     "--input", save(tmp_path / "a.npy", np.zeros(4, np.float32)),
                     "--input", save(tmp_path / "b.npy", np.zeros(4, np.float32)),
                     "--output-dir", tmp_path / "out", check=False)
    assert r.returncode == 1
    assert "sharding" in r.stderr


def test_a_refused_run_writes_nothing_and_the_program_then_runs(tmp_path):
    program = write(tmp_path, ADD)
    a = np.arange(4, dtype=np.float32)[None]
    out = tmp_path / "out"
    r = run_causeway("run", program, "--partitions", 1,
                     "--input", save(tmp_path / "a.npy", a),
                     "--input", save(tmp_path / "short.npy", a[:, :3]),
                     "--output-dir", out, check=False)
    assert r.returncode == 1 and "parameter 1" in r.stderr
    assert not (out / "out0.npy").exists()
    run_causeway("run", program, "--partitions", 1,
                 "--input", save(tmp_path / "a.npy", a),
                 "--input", save(tmp_path / "b.npy", a),
                 "--output-dir", out)
    np.testing.assert_array_equal(np.load(out / "out0.npy"), 2 * a)
