"""Sweeps as the sweep and study tests run them: `python -m pretrain.sweep`, a sweep's smallest
inputs (a 2-step synthetic pretraining config, a made-up classification task), results written
by hand, and the rows of a report's tables."""

import json
import os
import subprocess
import sys

from support import ROOT
from support.pretraining import CONFIG, MODEL, write_corpus

STUDY = os.path.join(ROOT, "configs", "sweeps", "unshare_study.py")
# A model config.json of the planted results (the reports count its parameters).
MODEL_CONFIG = dict(
    vocab_size=100, embedding_size=16, hidden_size=32, num_layers=4, num_heads=2,
    intermediate_size=64, max_position_embeddings=32,
)  # fmt: skip
# The synthetic pretraining config (support/pretraining.py), with evaluation on half the corpus
PRETRAIN = (
    CONFIG
    + """

_base = get_config


def get_config(arg=None):
    c = _base(arg)
    c.eval_every, c.eval_batches = 2, 1
    c.train_split, c.eval_split = "train[:50%]", "train[50%:]"  # enough for one eval batch
    return c
"""
)


def sweep_cli(*args, check_rc=True):
    done = subprocess.run(
        [sys.executable, "-m", "pretrain.sweep", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if check_rc:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def write_json(path, obj, lines=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        if lines:
            f.write("".join(json.dumps(r) + "\n" for r in obj))
        else:
            json.dump(obj, f)


def write_task(d, n):
    """A classification TSV of made-up words (label: whether 'ka' occurs)."""
    rows = ["text\tlabel"]
    for i in range(n):
        words = ["ka" if i % 2 else "lo", "mi", "ne", "su"][: 2 + i % 3]
        rows.append(f"{' '.join(words)} ta\t{'yes' if i % 2 else 'no'}")
    d.write_text("\n".join(rows) + "\n")


def write_tiny_inputs(tmp_path) -> None:
    """pre.py (a 2-step pretraining of MODEL, shared, on a synthetic corpus), train.tsv (24
    examples) and dev.tsv (11) in tmp_path: a sweep's smallest inputs."""
    write_corpus(tmp_path / "corpus.txt")
    model = dict(MODEL, layout="all")
    model.pop("vocab_size")
    (tmp_path / "pre.py").write_text(
        PRETRAIN.format(corpus=str(tmp_path / "corpus.txt"), model=model, steps=2)
    )
    write_task(tmp_path / "train.tsv", 24)
    write_task(tmp_path / "dev.tsv", 11)


def table(text: str, starts: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(starts)]
