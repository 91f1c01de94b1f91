"""Runs and corpora in a bucket (issue 13): `--workdir gs://...`, input files and the tokenizer in
the bucket, as on a TPU pod. `tests/fake_bucket.py` stores gs:// paths in a local directory
(offline); anything that turned the URI into a local path would write under the current
directory's `gs:` folder instead, so the `bucket` fixture (tests/conftest.py) also checks that
none appeared. The commands run in a bucket: tests/integration/test_bucket_runs.py."""

from __future__ import annotations

import os
import shutil

import jax
import numpy as np
import pytest
from fake_bucket import fake_gcs
from helpers import random_params, tiny_config
from support.corpus import SP_FIXTURE

from albert_jax import paths
from albert_jax.checkpoints import checkpoint
from albert_jax.configs.pretrain import common
from albert_jax.data.pretraining import corpus, pipeline
from albert_jax.data.pretraining.documents import expand_inputs
from albert_jax.model.albert import AlbertForPreTraining


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


def test_inputs_tokenizer_and_checkpoint_in_a_bucket(bucket, texts):
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
