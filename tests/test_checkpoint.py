"""Our checkpoint format: round trip, tokenizer assets, atomic overwrite, validation on load."""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest
from helpers import tiny_config

from albert_jax import checkpoint
from albert_jax.convert.common import expected_shapes, unflatten
from albert_jax.tokenization import load_tokenizer

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@pytest.fixture(scope="module")
def model_and_params():
    config = tiny_config("groups:2", vocab_size=120)
    rng = np.random.default_rng(
        0
    )  # values only need to be distinct; the shapes come from the model
    shapes = expected_shapes(config)
    return config, unflatten(
        {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    )


def assert_same_tree(a, b):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    jax.tree_util.tree_map(np.testing.assert_array_equal, a, b)


def test_round_trip_with_sentencepiece(tmp_path, model_and_params):
    config, params = model_and_params
    tok = load_tokenizer(os.path.join(FIXTURES, "tokenizer_sp"))
    checkpoint.save(tmp_path / "ckpt", config, params, tokenizer=tok)
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no temporary directory left behind
    assert sorted(os.listdir(tmp_path / "ckpt")) == [
        "checkpoint.json", "config.json", "params", "tokenizer"
    ]  # fmt: skip
    loaded_config, loaded = checkpoint.load(tmp_path / "ckpt")
    assert loaded_config == config
    assert_same_tree(loaded, params)
    tok2 = checkpoint.load_tokenizer(tmp_path / "ckpt")
    text = "Héllo Wörld, 1,000 cafés"
    assert tok2.encode(text) == tok.encode(text) and tok2.lower_case == tok.lower_case


def test_round_trip_backbone_only_with_wordpiece(tmp_path, model_and_params):
    config, params = model_and_params
    backbone = {k: v for k, v in params.items() if k not in ("mlm", "sop")}
    tok = load_tokenizer(os.path.join(FIXTURES, "tokenizer_wp"), lower_case=False)
    config = config.replace(vocab_size=tok.vocab_size)
    backbone["embeddings"] = dict(backbone["embeddings"])
    backbone["embeddings"]["word_embeddings"] = np.ones((tok.vocab_size, 16), np.float32)
    checkpoint.save(tmp_path / "ckpt", config, backbone, tokenizer=tok)
    assert_same_tree(checkpoint.load(tmp_path / "ckpt")[1], backbone)
    tok2 = checkpoint.load_tokenizer(tmp_path / "ckpt")
    assert tok2.pieces == tok.pieces and tok2.lower_case is False


def test_overwrite_is_atomic_and_a_failed_save_keeps_the_old_one(tmp_path, model_and_params,
                                                                  monkeypatch):  # fmt: skip
    config, params = model_and_params
    path = tmp_path / "ckpt"
    checkpoint.save(path, config, params)
    doubled = jax.tree_util.tree_map(lambda x: x * 2, params)
    checkpoint.save(path, config, doubled)  # replaces the existing checkpoint
    assert_same_tree(checkpoint.load(path)[1], doubled)

    import albert_jax.tokenization as tokenization

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash mid-save")

    monkeypatch.setattr(tokenization, "save_tokenizer", crash)
    tok = load_tokenizer(os.path.join(FIXTURES, "tokenizer_sp"))
    with pytest.raises(RuntimeError, match="simulated crash"):
        checkpoint.save(path, config, params, tokenizer=tok)
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    assert_same_tree(checkpoint.load(path)[1], doubled)


def test_save_refuses_params_that_disagree_with_config(tmp_path, model_and_params):
    config, params = model_and_params
    with pytest.raises(checkpoint.CheckpointError, match="pooler/kernel: \\(32, 32\\), expected"):
        checkpoint.save(tmp_path / "ckpt", config.replace(hidden_size=64, num_heads=4), params)
    tok = load_tokenizer(os.path.join(FIXTURES, "tokenizer_wp"))
    with pytest.raises(checkpoint.CheckpointError, match="tokenizer has"):
        checkpoint.save(tmp_path / "ckpt", config, params, tokenizer=tok)
    assert not os.listdir(tmp_path)


def test_load_checks_config_against_stored_params(tmp_path, model_and_params):
    config, params = model_and_params
    path = tmp_path / "ckpt"
    checkpoint.save(path, config, params)
    with open(path / "config.json", "w") as f:
        f.write(config.replace(intermediate_size=40).to_json())
    with pytest.raises(checkpoint.CheckpointError, match="encoder/ffn/intermediate/kernel"):
        checkpoint.load(path)
    with open(path / "config.json", "w") as f:
        json.dump({"vocab_size": 120, "bogus": 1}, f)
    with pytest.raises(checkpoint.CheckpointError, match="bad config.json"):
        checkpoint.load(path)
    os.remove(path / "checkpoint.json")
    with pytest.raises(checkpoint.CheckpointError, match="not an albert_jax checkpoint"):
        checkpoint.load(path)


def test_damaged_params_fail_clearly(tmp_path, model_and_params):
    config, params = model_and_params
    path = tmp_path / "ckpt"
    checkpoint.save(path, config, params)
    for root, _, files in os.walk(path / "params"):
        for name in files:
            if name not in ("_CHECKPOINT_METADATA", "_METADATA"):
                os.remove(os.path.join(root, name))
    with pytest.raises(checkpoint.CheckpointError, match="cannot restore parameters"):
        checkpoint.load(path)
