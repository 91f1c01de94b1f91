"""A pretraining workdir is a conversion source. Fast tests on a workdir laid out as the trainer
writes it (orbax CheckpointManager, `checkpoints/<step>/state` holding step/params/opt_state/rng,
the run's config.json, the corpus tokenizer under data/): newest and explicit steps read the saved
parameters bit for bit, a damaged newest step falls back to the previous one, bad workdirs fail
clearly, and `albert_jax.tasks.pretraining.write_model` writes WORKDIR/model.
tests/integration/test_pretrain_cli.py runs the real `python -m pretrain` on a tiny synthetic
corpus and checks the same against its checkpoints."""

from __future__ import annotations

import json
import os
import shutil
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from support.pretraining import MODEL, assert_bitwise_equal

from albert_jax.checkpoints import checkpoint
from albert_jax.convert import main as cli
from albert_jax.model import presets, sharing
from albert_jax.model.heads import param_shapes
from albert_jax.text.tokenization import load_tokenizer
from albert_jax.train.workdir import ConversionError, load_source

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
# A failed read of a damaged step leaves tensorstore callbacks aimed at an asyncio loop that orbax
# has closed; Python reports them (as unraisable) whenever they fire, often in a later test.
# Harmless, and the trainer's own fallback does the same.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def model_config():
    m = dict(MODEL)
    return presets.get(m.pop("preset"), layout=m.pop("layout"), **m)


def random_state(step: int) -> dict:
    """A train state as the trainer saves it (params plus optimizer moments of the same tree)."""
    rng = np.random.default_rng(step)
    shapes = param_shapes(model_config())
    params = jax.tree_util.tree_map(lambda s: rng.standard_normal(s.shape, np.float32), shapes)
    moments = jax.tree_util.tree_map(lambda x: np.full_like(x, 0.5), params)
    return {
        "step": np.int32(step),
        "params": params,
        "opt_state": {"mu": moments, "nu": moments},
        "rng": np.zeros(2, np.uint32),
    }


def make_workdir(path, steps=(2, 4), tokenizer=True) -> dict[int, dict]:
    os.makedirs(path)
    if REPO not in sys.path:  # configs/ is not a package of the install
        sys.path.insert(0, REPO)
    from albert_jax.configs.pretrain.common import get_data_config

    data = {**get_data_config().to_dict(), "tokenizer_dir": "tok", "vocab_size": 120}
    run = {"model": MODEL, "data": data}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({**run, "total_steps": max(steps, default=0), "seed": 0}, f)
    if tokenizer:
        shutil.copytree(os.path.join(FIXTURES, "tokenizer_sp"), os.path.join(path, "data", "tok"))
    states = {s: random_state(s) for s in steps}
    options = ocp.CheckpointManagerOptions(max_to_keep=10, create=True)
    with ocp.CheckpointManager(
        os.path.join(path, "checkpoints"),
        options=options,
        item_handlers={"state": ocp.StandardCheckpointHandler()},
    ) as manager:
        for s, state in states.items():
            manager.save(s, args=ocp.args.Composite(state=ocp.args.StandardSave(state)))
        manager.wait_until_finished()
    return states


def damage(workdir, step):
    """Delete the tensor data of a step; its metadata stays readable."""
    for root, _, files in os.walk(os.path.join(workdir, "checkpoints", str(step), "state")):
        if "ocdbt.process_" in root:
            for name in files:
                os.remove(os.path.join(root, name))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    path = tmp_path_factory.mktemp("workdir") / "run"
    return path, make_workdir(str(path))


# --- fast: a workdir as the trainer lays it out ---------------------------------------------------
def test_newest_step_explicit_step_unshare_and_hf(workdir, tmp_path, capsys):
    path, states = workdir
    assert cli([str(path), str(tmp_path / "newest")]) == 0
    out = capsys.readouterr().out
    assert f"read workdir checkpoint {path}/checkpoints/4" in out and "layout=groups:2" in out
    config, params = checkpoint.load(tmp_path / "newest")
    assert config == model_config()
    assert_bitwise_equal(params, states[4]["params"])
    with open(tmp_path / "newest" / "checkpoint.json") as f:
        meta = json.load(f)
    assert meta["info"]["step"] == 4 and meta["info"]["source_format"] == "workdir"
    assert meta["tokenizer"] == "sentencepiece" and meta["head"] is None

    step2 = str(path / "checkpoints" / "2")
    assert cli([step2, str(tmp_path / "step2"), "--unshare"]) == 0
    config2, params2 = checkpoint.load(tmp_path / "step2")
    assert config2.layout == "none"
    assert_bitwise_equal(params2, sharing.unshare(states[2]["params"], config)[0])
    assert checkpoint.model_tokenizer(tmp_path / "step2").vocab_size == 120

    assert cli([str(path), str(tmp_path / "hf"), "--to", "hf"]) == 0
    assert {"config.json", "model.safetensors", "spiece.model"} <= set(os.listdir(tmp_path / "hf"))


def test_unreadable_newest_step_falls_back(workdir, tmp_path, caplog):
    path, states = workdir
    copy = tmp_path / "run"
    shutil.copytree(path, copy)
    damage(copy, 4)
    source = load_source(str(copy))
    assert source.step == 2 and source.notes[0].startswith("skipped unreadable step 4")
    assert "checkpoint step 4 is unreadable" in caplog.text
    assert_bitwise_equal(source.params, states[2]["params"])
    with pytest.raises(ConversionError, match="checkpoints/4/state: cannot read the parameters"):
        load_source(str(copy / "checkpoints" / "4"))
    damage(copy, 2)
    with pytest.raises(ConversionError, match="no readable checkpoint:\n  step 4: .*\n  step 2"):
        load_source(str(copy))


def test_bad_workdirs_fail_clearly(tmp_path):
    make_workdir(str(tmp_path / "empty"), steps=())
    with pytest.raises(ConversionError, match="without checkpoints .*nothing to convert yet"):
        load_source(str(tmp_path / "empty"))
    os.rmdir(tmp_path / "empty" / "checkpoints")
    with pytest.raises(ConversionError, match="without checkpoints"):
        load_source(str(tmp_path / "empty"))
    # config.json that no longer describes the saved model: named, not skipped as unreadable.
    make_workdir(str(tmp_path / "edited"), steps=(2,), tokenizer=False)
    with open(tmp_path / "edited" / "config.json") as f:
        run = json.load(f)
    run["model"]["intermediate_size"] = 48
    with open(tmp_path / "edited" / "config.json", "w") as f:
        json.dump(run, f)
    with pytest.raises(ConversionError, match="against the run's config.json.*ffn/intermediate"):
        load_source(str(tmp_path / "edited"))
    with pytest.raises(ConversionError, match="no such file"):
        load_source(str(tmp_path / "edited" / "checkpoints" / "7"))
    # A config.json without a model section is not a workdir.
    os.makedirs(tmp_path / "other")
    (tmp_path / "other" / "config.json").write_text('{"total_steps": 3}')
    with pytest.raises(ConversionError, match="unknown format"):
        load_source(str(tmp_path / "other"))


def test_missing_tokenizer_is_a_note(tmp_path):
    states = make_workdir(str(tmp_path / "run"), steps=(3,), tokenizer=False)
    source = load_source(str(tmp_path / "run"))
    assert source.tokenizer is None and "corpus tokenizer" in source.notes[0]
    assert_bitwise_equal(source.params, states[3]["params"])


def test_write_model_at_the_end_of_a_run(workdir, tmp_path, capsys):
    from albert_jax.tasks.pretraining import write_model

    path, states = workdir
    copy = tmp_path / "run"
    shutil.copytree(path, copy)
    assert write_model(str(copy), total_steps=6) is None  # preempted before the end
    assert not (copy / "model").exists()
    assert write_model(str(copy), total_steps=4) == str(copy / "model")
    config, params = checkpoint.load(copy / "model")
    assert config == model_config()
    assert_bitwise_equal(params, states[4]["params"])
    with open(copy / "model" / "checkpoint.json") as f:
        assert json.load(f)["info"] == {"source": str(copy), "step": 4}
    tok = checkpoint.model_tokenizer(copy / "model")
    corpus_tok = load_tokenizer(os.path.join(FIXTURES, "tokenizer_sp"))
    text = "The quick brown fox, 1,000 cafés."
    assert tok.encode(text) == corpus_tok.encode(text)
    # `model/` inside the workdir is a checkpoint of ours, the workdir stays a workdir.
    assert load_source(str(copy)).format == "workdir"
    assert load_source(str(copy / "model")).format == "albert_jax"
