"""examples/python/train_lm.py: the character-level transformer on a 2x2
slice trains like the same model in plain JAX, learns the text, and
resumes from its checkpoints."""
import os
import sys

import jax
import numpy as np
import pytest

import causeway

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "python", "train_lm.py")
sys.path.insert(0, os.path.dirname(EXAMPLE))
import train_lm as lm  # noqa: E402

TINY = lm.Config(seq_len=32, batch=16, d_model=32, heads=2, layers=1, mlp=64, lr=1e-2)


@pytest.fixture(scope="module")
def corpus():
    return lm.Corpus(lm.stdlib_text(1 << 20))


@pytest.fixture
def mesh_slice(cluster):
    cluster(devices_per_host=4)
    return causeway.make_virtual_device_set().add_slice(devices=4, mesh={"data": 2, "model": 2})


def test_the_text_is_the_standard_librarys_source(corpus):
    assert len(corpus.tokens) == 1 << 20
    assert 80 < corpus.vocab_size <= 256
    assert 2.5 < corpus.unigram_entropy < 4.0


def test_losses_match_plain_jax_on_cpu(corpus, mesh_slice):
    trainer = lm.Trainer(TINY, corpus, mesh_slice)
    ours = [float(np.asarray(trainer.train_step())) for _ in range(12)]
    reference, params, _ = lm.train_plain_jax(TINY, corpus, 12)
    np.testing.assert_allclose(ours, reference, rtol=2e-4)
    np.testing.assert_allclose(np.asarray(trainer.params["unembed"]), params["unembed"],
                               rtol=2e-3, atol=2e-5)


def test_the_loss_falls_well_below_the_unigram_entropy(corpus, mesh_slice):
    trainer = lm.Trainer(TINY, corpus, mesh_slice)
    losses = [trainer.train_step() for _ in range(200)]
    final = np.mean([float(np.asarray(l)) for l in losses[-20:]])
    assert final < corpus.unigram_entropy - 0.5, (final, corpus.unigram_entropy)


def test_training_resumes_from_a_checkpoint_where_it_left_off(corpus, mesh_slice, tmp_path):
    trainer = lm.Trainer(TINY, corpus, mesh_slice)
    for _ in range(3):
        trainer.train_step()
    path = str(tmp_path / "step_3.npz")
    lm.save_checkpoint(path, trainer.step, trainer.params, trainer.opt, TINY)
    for _ in range(3):
        trainer.train_step()

    resumed = lm.Trainer(TINY, corpus, mesh_slice)
    params = lm.init_params(TINY, corpus.vocab_size)
    step, params, opt = lm.load_checkpoint(path, params, lm.init_opt(params), TINY)
    assert step == 3
    resumed.set_state(step, params, opt)
    for _ in range(3):
        resumed.train_step()
    for a, b in zip(jax.tree_util.tree_leaves(resumed.params),
                    jax.tree_util.tree_leaves(trainer.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_checkpoint_of_another_config_is_refused(corpus, tmp_path):
    params = lm.init_params(TINY, corpus.vocab_size)
    path = str(tmp_path / "c.npz")
    lm.save_checkpoint(path, 0, params, lm.init_opt(params), TINY)
    other = lm.Config(seq_len=16)
    with pytest.raises(ValueError, match="was written with config"):
        lm.load_checkpoint(path, params, lm.init_opt(params), other)


def test_the_example_runs_with_a_progress_bar_and_writes_checkpoints(tmp_path, capsys, cluster):
    flags = ["--seq-len", 32, "--batch", 16, "--d-model", 32, "--heads", 2, "--layers", 1,
             "--mlp", 64, "--lr", 1e-2, "--text-bytes", 1 << 20, "--checkpoint-dir", tmp_path,
             "--checkpoint-every", 3]
    assert lm.main([str(f) for f in flags + ["--steps", 6]]) == 0
    out = capsys.readouterr().out
    assert "step=5" in out and "loss=" in out and "tok_s=" in out
    assert sorted(os.listdir(tmp_path)) == ["step_000003.npz", "step_000006.npz"]
    causeway.disconnect()
    assert lm.main([str(f) for f in flags + [
        "--steps", 8, "--restore", tmp_path / "step_000006.npz", "--check-jax"]]) == 0
    out = capsys.readouterr().out
    assert "restored step 6" in out
    difference = float(out.split("largest loss difference ")[1].split()[0])
    assert difference < 1e-4, out
