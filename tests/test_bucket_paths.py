"""Runs and corpora in a bucket (issue 13): `--workdir gs://...`, input files and the tokenizer in
the bucket, as on a TPU pod. `tests/fake_bucket.py` stores gs:// paths in a local directory
(offline); anything that turned the URI into a local path would write under the current
directory's `gs:` folder instead, so each test also checks that none appeared."""

from __future__ import annotations

import json
import os
import shutil

import jax
import numpy as np
import pytest
from etils import epath
from fake_bucket import fake_gcs
from helpers import random_params, tiny_config
from test_finetune import files, pretrained  # noqa: F401 (fixtures)
from test_own_corpus import CPU_SMALL, ROOT, SHORT, SP_FIXTURE, documents, run, texts  # noqa: F401

from albert_jax import paths
from albert_jax.checkpoints import checkpoint
from albert_jax.data import corpus, pipeline
from albert_jax.data.documents import expand_inputs
from albert_jax.model.albert import AlbertForPreTraining
from configs.pretrain import common

FAKE = os.path.join(ROOT, "tests", "fake_bucket.py")


@pytest.fixture
def bucket(tmp_path, monkeypatch):
    """(store, cwd): the bucket's local store and an empty current directory."""
    store, cwd = tmp_path / "store", tmp_path / "cwd"
    store.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the local side of train.log and TensorBoard
    yield store, cwd
    assert not (cwd / "gs:").exists(), "a gs:// path was used as a local path"


def test_paths_keep_uris_and_resolve_local_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert paths.resolve("gs://b/run/") == "gs://b/run"
    assert paths.resolve("data", "gs://b/run") == "gs://b/run/data"
    assert paths.resolve("/abs", "gs://b/run") == "/abs"
    assert paths.resolve("data", "run") == str(tmp_path / "run" / "data")
    assert paths.join("gs://b/run", "checkpoints", "3") == "gs://b/run/checkpoints/3"
    d = common.get_data_config()
    d.input_files = "gs://b/texts/*.txt,local.txt"
    r = pipeline.resolve_paths(d, workdir="gs://b/run")
    assert (r.data_dir, r.tokenizer_dir) == ("gs://b/run/data", "gs://b/run/data/tokenizer")
    assert r.input_files == ["gs://b/texts/*.txt", str(tmp_path / "local.txt")]


def test_inputs_tokenizer_and_checkpoint_in_a_bucket(bucket, texts):  # noqa: F811
    store, cwd = bucket
    shutil.copytree(texts / "texts", store / "b" / "texts")
    shutil.copytree(os.path.dirname(SP_FIXTURE), store / "b" / "tok")
    with fake_gcs(store):
        found = expand_inputs(["gs://b/texts/*.txt", "gs://b/texts/sub"])
        assert found == ["gs://b/texts/a.txt", "gs://b/texts/b.txt", "gs://b/texts/sub/c.txt"]
        assert expand_inputs(["gs://b/texts"])[-1] == "gs://b/texts/sub/c.txt"  # no hidden
        with pytest.raises(corpus.CorpusError, match="gs://b/none.*no such file"):
            expand_inputs(["gs://b/none"])
        docs = list(corpus.read_documents(found, "text"))
        assert len(docs) == 120
        from albert_jax.text.tokenization import read_tokenizer, save_tokenizer

        tok = read_tokenizer("gs://b/tok")
        save_tokenizer(tok, "gs://b/copy")
        assert read_tokenizer("gs://b/copy").encode("人民日报") == tok.encode("人民日报")
        config = tiny_config("none", vocab_size=97)
        params = random_params(AlbertForPreTraining(config))
        for seed in (1, 2):  # the second save replaces the first
            checkpoint.save("gs://b/ckpt", config, params, info={"seed": seed})
        loaded_config, loaded = checkpoint.load("gs://b/ckpt")
        assert loaded_config == config
        assert checkpoint.read_meta("gs://b/ckpt")["info"] == {"seed": 2}
        pairs = zip(jax.tree.leaves(params), jax.tree.leaves(loaded), strict=True)
        assert all(np.array_equal(a, b) for a, b in pairs)
    assert sorted(os.listdir(store / "b")) == ["ckpt", "copy", "texts", "tok"]  # no temporaries


@pytest.mark.slow
def test_pretraining_with_workdir_and_corpus_in_a_bucket(bucket, texts):  # noqa: F811
    """`python -m pretrain --workdir gs://...` with the input files in the bucket: the corpus,
    tokenizer, checkpoints, metrics and the final model land in the bucket; a rerun resumes;
    the Python API reads the model back from the bucket."""
    store, cwd = bucket
    shutil.copytree(texts / "texts", store / "b" / "texts")
    args = [FAKE, str(store), "-m", "pretrain", "--config", CPU_SMALL, "--workdir", "gs://b/run"]
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
def test_finetuning_from_and_into_a_bucket(bucket, pretrained, files):  # noqa: F811
    """`python -m finetune` with the checkpoint, the task files and the workdir in a bucket,
    then `finetune.predict` from the bucket's best checkpoint into the bucket."""
    store, cwd = bucket
    shutil.copytree(pretrained, store / "b" / "model")
    shutil.copytree(files, store / "b" / "data")
    cmd = [FAKE, str(store), "-m", "finetune", "--config", f"{ROOT}/configs/finetune/tsv.py",
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
        "finetune.predict",
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
