"""Our checkpoint format: round trip, tokenizer assets, atomic overwrite, validation on load."""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest
from helpers import tiny_config

from albert_jax.checkpoints import checkpoint
from albert_jax.checkpoints.common import expected_shapes, unflatten
from albert_jax.text.tokenization import load_tokenizer

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
        "checkpoint.json", "config.json", "params", "provenance.json", "tokenizer"
    ]  # fmt: skip
    loaded_config, loaded = checkpoint.load(tmp_path / "ckpt")
    assert loaded_config == config
    assert_same_tree(loaded, params)
    tok2 = checkpoint.model_tokenizer(tmp_path / "ckpt")
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
    tok2 = checkpoint.model_tokenizer(tmp_path / "ckpt")
    assert tok2.pieces == tok.pieces and tok2.lower_case is False


def test_overwrite_is_atomic_and_a_failed_save_keeps_the_old_one(tmp_path, model_and_params,
                                                                  monkeypatch):  # fmt: skip
    config, params = model_and_params
    path = tmp_path / "ckpt"
    checkpoint.save(path, config, params)
    doubled = jax.tree_util.tree_map(lambda x: x * 2, params)
    checkpoint.save(path, config, doubled)  # replaces the existing checkpoint
    assert_same_tree(checkpoint.load(path)[1], doubled)

    import albert_jax.text.tokenization as tokenization

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
    with pytest.raises(checkpoint.CheckpointError, match="cannot restore parameters") as e:
        checkpoint.load(path)
    # A truncated data file: one line, not TensorStore's error with its ~60-line JSON spec.
    checkpoint.save(path, config, params)
    data = [os.path.join(r, f) for r, _, fs in os.walk(path / "params") for f in fs]
    biggest = max(data, key=os.path.getsize)
    os.truncate(biggest, os.path.getsize(biggest) // 2)
    with pytest.raises(checkpoint.CheckpointError, match="cannot restore parameters") as e:
        checkpoint.load(path)
    assert "\n" not in str(e.value) and len(str(e.value)) < 500, str(e.value)
    # Without its metadata: one line naming the directory and the file (not orbax's None).
    os.remove(path / "params" / "_METADATA")
    with pytest.raises(checkpoint.CheckpointError) as e:
        checkpoint.load(path)
    assert (
        str(e.value)
        == f"{path}: cannot restore parameters (params/_METADATA is missing or unreadable)"
    )


# --- heads ----------------------------------------------------------------------------------------
SEQ_HEAD = {
    "type": "sequence_classification",
    "num_labels": 3,
    "classifier_dropout": 0.2,
    "labels": ["neg", "neu", "pos"],
    "task": {"name": "sentiment", "max_seq_length": 64},  # extra keys ride along
}


def head_params(config, head, seed=1):
    from albert_jax.model.heads import param_shapes

    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(
        lambda s: rng.standard_normal(s.shape).astype(np.float32), param_shapes(config, head)
    )


@pytest.mark.parametrize(
    "head",
    [SEQ_HEAD, {"type": "token_classification", "num_labels": 5},
     {"type": "sequence_classification", "num_labels": 1, "task_type": "regression"}],
)  # fmt: skip
def test_round_trip_with_a_head(tmp_path, model_and_params, head):
    config, _ = model_and_params
    params = head_params(config, head)
    assert "classifier" in params and "mlm" not in params
    checkpoint.save(tmp_path / "ckpt", config, params, head=head)
    assert checkpoint.load_head(tmp_path / "ckpt") == head
    with open(tmp_path / "ckpt" / "checkpoint.json") as f:
        assert json.load(f)["head"] == head
    loaded_config, loaded = checkpoint.load(tmp_path / "ckpt")
    assert loaded_config == config
    assert_same_tree(loaded, params)


def test_pretraining_checkpoints_have_no_head(tmp_path, model_and_params):
    config, params = model_and_params
    checkpoint.save(tmp_path / "a", config, params, head={"type": "pretraining"})
    assert checkpoint.load_head(tmp_path / "a") is None
    # Written before heads existed: no "head" key at all.
    with open(tmp_path / "a" / "checkpoint.json") as f:
        meta = json.load(f)
    del meta["head"]
    with open(tmp_path / "a" / "checkpoint.json", "w") as f:
        json.dump(meta, f)
    assert checkpoint.load_head(tmp_path / "a") is None
    assert_same_tree(checkpoint.load(tmp_path / "a")[1], params)


def test_head_and_params_must_agree(tmp_path, model_and_params):
    config, params = model_and_params
    clf = head_params(config, SEQ_HEAD)
    # A fine-tuned model is backbone + classifier: the pretraining heads are refused, not kept.
    with pytest.raises(checkpoint.CheckpointError, match="the sequence_classification head; "
                       "unexpected: \\['mlm/"):  # fmt: skip
        checkpoint.save(tmp_path / "x", config, {**params, "classifier": clf["classifier"]},
                        head=SEQ_HEAD)  # fmt: skip
    backbone = {k: v for k, v in clf.items() if k != "classifier"}
    with pytest.raises(checkpoint.CheckpointError, match="missing: \\['classifier/bias'"):
        checkpoint.save(tmp_path / "x", config, backbone, head=SEQ_HEAD)
    with pytest.raises(checkpoint.CheckpointError, match="classifier/kernel: \\(32, 3\\), exp"):
        checkpoint.save(tmp_path / "x", config, clf, head={**SEQ_HEAD, "num_labels": 4,
                                                           "labels": None})  # fmt: skip
    with pytest.raises(checkpoint.CheckpointError, match="unexpected: \\['classifier/bias'"):
        checkpoint.save(tmp_path / "x", config, {**params, "classifier": clf["classifier"]})
    bad_heads = [
        ({"type": "qa", "num_labels": 2}, "unknown head type 'qa'"),
        ({"type": "token_classification", "num_labels": 0}, "num_labels >= 1"),
        ({**SEQ_HEAD, "labels": ["a", "b"]}, "not a list of 3 names"),
        ({**SEQ_HEAD, "task": {1, 2}}, "not JSON-serializable"),
        (["sequence_classification"], "a head is a dict"),
    ]
    for head, match in bad_heads:
        with pytest.raises(checkpoint.CheckpointError, match=match):
            checkpoint.save(tmp_path / "x", config, clf, head=head)
    assert not os.listdir(tmp_path)
    # On load, the stored head decides what the parameters must be.
    checkpoint.save(tmp_path / "ckpt", config, clf, head=SEQ_HEAD)
    with open(tmp_path / "ckpt" / "checkpoint.json") as f:
        meta = json.load(f)
    meta["head"] = {**SEQ_HEAD, "num_labels": 2, "labels": ["a", "b"]}
    with open(tmp_path / "ckpt" / "checkpoint.json", "w") as f:
        json.dump(meta, f)
    with pytest.raises(checkpoint.CheckpointError, match="classifier/bias: \\(3,\\), expected"):
        checkpoint.load(tmp_path / "ckpt")
