"""Runs in a bucket as a user types them (issue 13): `python -m pretrain --workdir gs://...` with
its corpus in the bucket, and `python -m finetune` / `finetune.predict` from and into it, each
command run through `tests/fake_bucket.py` (gs:// paths kept in a local directory, offline). The
`bucket` fixture (tests/conftest.py) checks that no gs:// path was used as a local one."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from etils import epath
from fake_bucket import fake_gcs
from support import ROOT
from support.corpus import CPU_SMALL, SHORT, run

from albert_jax.checkpoints import checkpoint

FAKE = os.path.join(ROOT, "tests", "fake_bucket.py")


@pytest.mark.slow
def test_pretraining_with_workdir_and_corpus_in_a_bucket(bucket, texts):
    """`python -m pretrain --workdir gs://...` with the input files in the bucket: the corpus,
    tokenizer, checkpoints, metrics and the final model land in the bucket; a rerun resumes;
    the Python API reads the model back from the bucket."""
    store, cwd = bucket
    shutil.copytree(texts / "texts", store / "b" / "texts")
    args = [
        FAKE,
        str(store),
        "-m",
        "albert_jax.pretrain",
        "--config",
        CPU_SMALL,
        "--workdir",
        "gs://b/run",
    ]
    args += ["--config.data.input_files=gs://b/texts", "--config.data.vocab_size=3000", *SHORT]
    out = run(args, cwd=cwd).stdout
    assert json.loads(out.strip().splitlines()[-1])["model"] == "gs://b/run/model"
    work = store / "b" / "run"
    for name in ("config.json", "metrics.jsonl", "train.log", "checkpoints/2", "model/params",
                 "data/tokenizer/spiece.model", "tensorboard"):  # fmt: skip
        assert (work / name).exists(), name
    rows = [json.loads(x) for x in (work / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "train"] == [1, 2]
    assert not (work / "data" / "parts").exists() or not os.listdir(work / "data" / "parts")
    # Rerun with more steps: resumes from step 2 in the bucket, appends to the metrics.
    more = [a if a != "--config.total_steps=2" else "--config.total_steps=3" for a in args]
    run(more, cwd=cwd)
    rows = [json.loads(x) for x in (work / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "train"] == [1, 2, 3]
    with fake_gcs(store):
        config, params = checkpoint.load("gs://b/run/model")
        meta = checkpoint.read_meta("gs://b/run/model")
        assert meta["info"] == {"source": "gs://b/run", "step": 3}
        assert checkpoint.model_tokenizer("gs://b/run/model").vocab_size == config.vocab_size
        assert epath.Path("gs://b/run/checkpoints/3").exists()


@pytest.mark.slow
def test_finetuning_from_and_into_a_bucket(bucket, pretrained, files):
    """`python -m finetune` with the checkpoint, the task files and the workdir in a bucket,
    then `finetune.predict` from the bucket's best checkpoint into the bucket."""
    store, cwd = bucket
    shutil.copytree(pretrained, store / "b" / "model")
    shutil.copytree(files, store / "b" / "data")
    cmd = [FAKE, str(store), "-m", "albert_jax.finetune", "--config", "finetune/tsv.py",
           "--workdir", "gs://b/ft", "--config.init=gs://b/model", "--config.unshare=all",
           "--config.task.train=gs://b/data/cls_train.jsonl",
           "--config.task.dev=gs://b/data/cls_dev.jsonl", "--config.task.max_seq_length=16",
           "--config.batch_size=8", "--config.eval_batch_size=8", "--config.total_steps=4",
           "--config.eval_every=2", "--config.progress_bar=False",
           "--config.lr_search.enabled=False"]  # fmt: skip
    out = run(cmd, cwd=cwd).stdout
    assert "layout all -> none" in out
    ft = store / "b" / "ft"
    assert json.loads((ft / "best.json").read_text())["step"] in (2, 4)
    assert (ft / "predictions" / "dev.jsonl").exists() and (ft / "summary.json").exists()
    predict = [
        "-m",
        "albert_jax.finetune.predict",
        "--checkpoint",
        "gs://b/ft/best",
        "--output",
        "gs://b/p.jsonl",
    ]
    run([FAKE, str(store), *predict, "--input", "gs://b/data/cls_test.jsonl"], cwd=cwd)
    rows = [json.loads(x) for x in (store / "b" / "p.jsonl").read_text().splitlines()]
    assert len(rows) == 11 and {r["prediction"] for r in rows} <= {"neg", "pos"}
    with fake_gcs(store):
        config, _ = checkpoint.load("gs://b/ft/best")
        assert config.layout == "none"
