"""The random-init control (`--config.init=none`) as a user types it: refused in one line
without a tokenizer, and trained from fresh weights of the checkpoint's shape with the learning
rate chosen by model size (tests/test_finetune_init.py checks the rest in process)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from support import ROOT
from support.finetune import flat, make_config, shape

from albert_jax.checkpoints import checkpoint
from albert_jax.tasks import finetuning as F

# The checkpoint's weights from another seed than fine-tuning's (0): flax derives each leaf's key
# from its path, so seed-0 weights would equal a seed-0 random init leaf for leaf, as no trained
# checkpoint does (the `pretrained` fixture, tests/conftest.py).
PRETRAINED_SEED = 7


def test_random_init_needs_a_tokenizer_and_a_shape(pretrained, files, tmp_path):
    config = make_config("none", "classification", files, model_from=pretrained)
    with pytest.raises(F.FinetuneError, match=r"init=none needs --config.tokenizer=DIR"):
        F.FinetuneData(config)
    config = make_config("none", "classification", files, tokenizer=pretrained)
    with pytest.raises(F.FinetuneError, match=r"needs --config.model_from=SRC .*albert-base"):
        F.FinetuneData(config)
    config.model_from = "albert-bsae"
    with pytest.raises(F.FinetuneError, match=r"model_from: albert-bsae: no such file"):
        F.FinetuneData(config)
    # As a user types it: one `error:` line, exit status 2, nothing written.
    cmd = [
        sys.executable, "-m", "finetune", "--config", "configs/finetune/tsv.py",
        "--workdir", str(tmp_path / "run"), "--config.init=none",
        f"--config.model_from={pretrained}", f"--config.task.train={files}/cls_train.jsonl",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --config.init=none needs --config.tok")
    assert not os.path.exists(tmp_path / "run" / "checkpoints")


@pytest.mark.slow  # the default suite's time; CI runs it
def test_cli_random_init_trains_from_fresh_weights_of_the_checkpoints_shape(
    pretrained, files, tmp_path
):
    """tsv.py with init=none: the auto learning rate is printed, the results say init none, the
    model has the checkpoint's shape but none of its weights."""
    cmd = [
        sys.executable, "-m", "finetune", "--config", "configs/finetune/tsv.py",
        "--workdir", str(tmp_path), "--config.init=none", f"--config.tokenizer={pretrained}",
        f"--config.model_from={pretrained}", f"--config.task.train={files}/cls_train.jsonl",
        f"--config.task.dev={files}/cls_dev.jsonl", "--config.task.max_seq_length=16",
        "--config.batch_size=8", "--config.eval_batch_size=8", "--config.total_steps=2",
        "--config.progress_bar=False", "--config.lr_search.enabled=False",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "learning rate 0.0003, head lr x10 (auto: hidden 32 <= 256; pass" in out
    assert "note: random init (init=none)" in out and "loaded 0 (none)" in out
    assert "(all layout, random init)" in out
    results = json.load(open(tmp_path / "results.json"))
    assert results["init"] == "none" and results["random_init"] is True
    summary = json.load(open(tmp_path / "summary.json"))
    assert summary["init"] == "none" and summary["random_init"] is True
    run_config = json.load(open(tmp_path / "config.json"))
    assert run_config["optim"]["learning_rate"] == 3e-4
    assert run_config["optim"]["lr_multipliers"] == "^classifier/=10"
    config, params = checkpoint.load(tmp_path / "best")
    assert shape(config) == shape(checkpoint.load_config(pretrained))
    _, start = checkpoint.load(pretrained)
    got, ckpt = flat(params), flat(start)
    backbone = [p for p in ckpt if p.split("/")[0] in ("embeddings", "encoder")]
    assert backbone and all(got[p].shape == ckpt[p].shape for p in backbone)
    assert not any(np.allclose(got[p], ckpt[p]) for p in backbone)
