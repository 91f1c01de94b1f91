"""`python -m pretrain` as a user types it, on a tiny synthetic corpus (support/pretraining.py):
the workdir and its steps convert to the trainer's parameters bit for bit and WORKDIR/model is
the final state with its tokenizer; with `--config.objective=electra` the discriminator's
backbone is the model, converts to transformers and back, and `python -m finetune` fine-tunes
it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from support import ROOT
from support.pretraining import (
    CONFIG,
    MODEL,
    STEPS,
    assert_bitwise_equal,
    trainer_params,
    write_corpus,
)
from support.sweeps import write_task

from albert_jax.checkpoints import checkpoint
from albert_jax.convert import main as cli
from albert_jax.train.workdir import load_source


# As in tests/test_workdir_source.py: orbax's stray tensorstore callbacks, reported as unraisable.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.slow
def test_real_pretraining_run_converts_and_writes_its_model(tmp_path):
    """`python -m pretrain` (2 CPU devices, 4 steps), then the workdir and its steps convert to
    the trainer's parameters bit for bit, and WORKDIR/model is the final state + tokenizer."""
    write_corpus(tmp_path / "corpus.txt")
    model = {k: v for k, v in MODEL.items() if k != "vocab_size"}
    config_file = tmp_path / "tiny.py"
    config_file.write_text(CONFIG.format(corpus=str(tmp_path / "corpus.txt"), model=model,
                                         steps=STEPS))  # fmt: skip
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2 --xla_backend_optimization_level=0"
    work = tmp_path / "run"
    cmd = [sys.executable, "-m", "pretrain", f"--config={config_file}", f"--workdir={work}"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f'"step": {STEPS}' in done.stdout.splitlines()[-1]

    final, first = trainer_params(work, STEPS), trainer_params(work, 2)
    assert not np.array_equal(final["pooler"]["kernel"], first["pooler"]["kernel"])  # it trained
    assert cli([str(work), str(tmp_path / "newest")]) == 0
    config, params = checkpoint.load(tmp_path / "newest")
    assert config.layout == "groups:2" and config.vocab_size == 100
    assert_bitwise_equal(params, final)
    source = load_source(str(work / "checkpoints" / "2"))
    assert source.step == 2
    assert_bitwise_equal(source.params, first)

    config_m, params_m = checkpoint.load(work / "model")
    assert config_m == config and checkpoint.load_head(work / "model") is None
    assert_bitwise_equal(params_m, final)
    with open(work / "model" / "checkpoint.json") as f:
        assert json.load(f)["info"] == {"source": str(work), "step": STEPS}
    tok = checkpoint.model_tokenizer(work / "model")
    text = "Kalo mine supo, tari vezu."
    assert tok.vocab_size == 100 and tok.encode(text) == source.tokenizer.encode(text)


@pytest.mark.slow
def test_electra_command_to_model_finetuning_and_transformers(tmp_path):
    """As a user types it: `python -m pretrain --config.objective=electra` (a grouped
    discriminator, an unshared generator) writes WORKDIR/model, the discriminator backbone bit
    for bit; it converts to transformers' AlbertModel and back unchanged, and
    `python -m finetune --config.init=WORKDIR/model` fine-tunes it."""
    write_corpus(tmp_path / "corpus.txt")
    model = {k: v for k, v in MODEL.items() if k != "vocab_size"}
    config_file = tmp_path / "tiny.py"
    config_file.write_text(
        CONFIG.format(corpus=str(tmp_path / "corpus.txt"), model=model, steps=STEPS)
    )
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    work = tmp_path / "run"
    cmd = [sys.executable, "-m", "pretrain", f"--config={config_file}", f"--workdir={work}"]
    cmd += ["--config.objective=electra", "--config.electra.generator_layout=none"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(x) for x in (work / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in rows if r["split"] == "train"][-1]
    assert last["step"] == STEPS and last["train_flops"] > 0
    assert {"disc_accuracy", "disc_precision", "disc_recall", "sampled_original"} <= set(last)

    state = trainer_params(work, STEPS)
    assert {"generator", "discriminator"} <= set(state)
    config, params = checkpoint.load(work / "model")
    assert sorted(params) == ["embeddings", "encoder", "pooler"] and config.layout == "groups:2"
    assert_bitwise_equal(params, {k: state[k] for k in params})

    hf, back = tmp_path / "hf", tmp_path / "back"
    assert cli([str(work / "model"), str(hf), "--to", "hf"]) == 0
    assert json.loads((hf / "config.json").read_text())["architectures"] == ["AlbertModel"]
    assert cli([str(hf), str(back)]) == 0
    assert_bitwise_equal(checkpoint.load(back)[1], params)

    write_task(tmp_path / "train.tsv", 24)
    write_task(tmp_path / "dev.tsv", 11)
    fine = tmp_path / "fine"
    cmd = [sys.executable, "-m", "finetune", "--config", "configs/finetune/tsv.py"]
    cmd += [f"--workdir={fine}", f"--config.init={work / 'model'}"]
    cmd += [f"--config.task.{s}={tmp_path / 'train.tsv' if s == 'train' else tmp_path / 'dev.tsv'}"
            for s in ("train", "dev", "test")]  # fmt: skip
    cmd += ["--config.task.max_seq_length=32", "--config.total_steps=2", "--config.eval_every=2"]
    cmd += ["--config.batch_size=8", "--config.eval_batch_size=8", "--config.progress_bar=False"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tuned = checkpoint.load(fine / "best")[1]
    assert "classifier" in tuned and tuned["encoder"].keys() == params["encoder"].keys()
