"""The random-init control (`--config.init=none`) and the learning rate chosen by model size:
the control starts every weight from the model's own initializer (the `fresh_params='.*'` path)
with the shape of `model_from` and the vocabulary of `tokenizer`, says so in its results, and
refuses to start without either; tsv.py / ner.py / cloze.py pick 3e-4 (head x10) for small
models and 2e-5 (x1) for base-sized ones, print the choice, and keep explicit values. As a user
types it: tests/integration/test_finetune_init_cli.py."""

import json
import os
import shutil

import numpy as np
import pytest
from support.finetune import TOKENIZER, flat, make_config, tiny_config

from albert_jax.checkpoints import checkpoint
from albert_jax.configs.finetune import cloze, ner, sentiment, tsv
from albert_jax.jobs import run as runs
from albert_jax.model import presets
from albert_jax.tasks import init_source
from albert_jax.train.optim import make_optimizer

# The `pretrained` checkpoint (tests/conftest.py) with weights from another seed than
# fine-tuning's (0): flax derives each leaf's key from its path, so seed-0 weights would equal a
# seed-0 random init leaf for leaf, as no trained checkpoint does.
PRETRAINED_SEED = 7


# ---------------------------------------------------------------- the learning-rate rule


def test_auto_learning_rate_by_hidden_size():
    for hidden in (32, 128, 256):  # the project's CPU checkpoints
        assert runs.auto_learning_rate(hidden)[:2] == (3e-4, 10.0)
    for hidden in (768, 1024, 4096):  # released base and larger
        assert runs.auto_learning_rate(hidden)[:2] == (2e-5, 1.0)
    lrs = [runs.auto_learning_rate(h) for h in (256, 312, 384, 512, 768)]
    assert all(a[0] > b[0] and a[1] > b[1] for a, b in zip(lrs, lrs[1:], strict=False))
    lr, mult, why = runs.auto_learning_rate(384)  # albert-small: geometric between the two
    assert (lr, mult) == (1.1e-4, 4.3) and "384" in why


@pytest.mark.parametrize("module", [tsv, ner, cloze])
def test_auto_rule_for_small_and_base_models_and_explicit_values_kept(module):
    c = module.get_config()
    small = tiny_config().replace(hidden_size=128)  # the README checkpoint's size
    got, line = runs.resolve_learning_rate(c, small)
    assert got == {"learning_rate": 3e-4, "lr_multipliers": "^classifier/=10"}
    assert line.startswith("learning rate 0.0003, head lr x10 (auto: hidden 128 <= 256;")
    got, line = runs.resolve_learning_rate(c, presets.get("albert-base"))
    assert got == {"learning_rate": 2e-5, "lr_multipliers": ""}
    assert "hidden 768 >= 768" in line
    assert c.optim.learning_rate is None  # the config itself is left as it was

    with c.unlocked():
        c.optim.learning_rate = 1e-3  # explicit: kept; the multiplier alone is chosen
    got, line = runs.resolve_learning_rate(c, small)
    assert got == {"lr_multipliers": "^classifier/=10"}  # the rate is the config's
    assert line.startswith("head lr x10 (auto") and "lr_multipliers to override" in line
    with c.unlocked():
        c.optim.lr_multipliers = ""  # explicitly none
    got, line = runs.resolve_learning_rate(c, small)
    assert line is None and got == {}


def test_hard_coded_configs_are_not_touched_and_unresolved_auto_is_refused():
    c = sentiment.get_config()  # 3e-4, no multiplier: explicit
    assert runs.resolve_learning_rate(c, presets.get("albert-base")) == ({}, None)
    with pytest.raises(ValueError, match="learning_rate is None"):
        make_optimizer(tsv.get_config().optim, presets.get("albert-base"))


# ---------------------------------------------------------------- init=none


def test_random_init_source_takes_the_shape_and_the_tokenizers_vocabulary(pretrained, tmp_path):
    want = checkpoint.load_config(pretrained)
    for model_from in (pretrained, os.path.join(pretrained, "config.json")):
        source, notes = init_source.load_init("none", tokenizer=pretrained, model_from=model_from)
        assert source.config == want and source.params == {}
        assert source.tokenizer.vocab_size == want.vocab_size and "random init" in notes[0]
    # unshare: the layout changes, there are no weights to copy
    source, notes = init_source.load_init("none", "all", tokenizer=TOKENIZER, model_from=pretrained)
    assert source.config.layout == "none" and notes[-1] == "layout all -> none"
    # a preset: its size, the tokenizer's vocabulary
    source, notes = init_source.load_init("none", tokenizer=TOKENIZER, model_from="albert-base")
    assert source.config.hidden_size == 768 and source.config.vocab_size == 120
    assert "vocab_size 30000 -> 120 (the tokenizer's)" in notes
    # a pretraining workdir, no checkpoint needed: the run config's model section and the corpus
    # tokenizer under its data_dir
    work = tmp_path / "work"
    shutil.copytree(TOKENIZER, work / "data" / "tokenizer")
    model = {"preset": "albert-tiny", "hidden_size": 48, "num_heads": 2, "layout": "none"}
    data = {"data_dir": "data", "tokenizer_dir": "tokenizer", "corpus_name": "c"}
    (work / "config.json").write_text(json.dumps({"model": model, "data": data}))
    source, _ = init_source.load_init("none", tokenizer=str(work), model_from=str(work))
    assert source.config.hidden_size == 48 and source.config.layout == "none"
    assert source.config.vocab_size == source.tokenizer.vocab_size == 120


def test_random_init_is_the_fresh_params_initialization(pretrained, files, tmp_path):
    """With a zero learning rate the best checkpoint holds the starting weights: init=none
    starts exactly where `fresh_params='.*'` from the checkpoint starts (the same initializer,
    same seed), and far from the checkpoint. The explicit rate (0) is kept, nothing printed."""
    kw = {"total_steps": 2, "eval_every": 2, "task.test": "", "optim.lr_multipliers": ""}
    kw["optim.learning_rate"] = 0.0
    random = make_config("none", "classification", files, **kw)
    random.update(tokenizer=pretrained, model_from=pretrained)
    fresh = make_config(pretrained, "classification", files, fresh_params=".*", **kw)
    starts = {}
    for name, config in (("random", random), ("fresh", fresh)):
        summary = runs.run(config, str(tmp_path / name))
        assert summary["random_init"] is (name == "random")
        assert json.load(open(tmp_path / name / "config.json"))["optim"]["learning_rate"] == 0.0
        starts[name] = flat(checkpoint.load(tmp_path / name / "best")[1])
    assert starts["random"].keys() == starts["fresh"].keys()
    for path, value in starts["random"].items():
        np.testing.assert_array_equal(value, starts["fresh"][path], err_msg=path)
    ckpt = flat(checkpoint.load(pretrained)[1])
    shared = [p for p in starts["random"] if p in ckpt]
    assert len(shared) > 10
    for p in shared:
        assert starts["random"][p].shape == ckpt[p].shape
        assert not np.allclose(starts["random"][p], ckpt[p]), p
