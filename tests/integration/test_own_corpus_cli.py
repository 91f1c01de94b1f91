"""Pretraining on your own corpus as a new user types it: `python -m pretrain` on files,
directories and `FORMAT:PATH` inputs, with a tokenizer brought along or trained
(`pretrain.tokenizer`, its vocabulary-size limit), `pretrain.prepare_data` and
`pretrain.inspect_data` streaming an epoch, continued pretraining from a checkpoint, and the
degenerate-pairs warning of each command (tests/test_own_corpus.py checks the rest in process)."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from support.corpus import CPU_SMALL, SHORT, SP_FIXTURE, one_sentence_corpus, run

from albert_jax.checkpoints import checkpoint
from albert_jax.configs.pretrain import common
from albert_jax.data.pretraining import corpus, pipeline


def test_one_corpus_from_several_formats_with_a_character_vocabulary(texts, tmp_path):
    """`FORMAT:PATH` inputs (cpu_base.py: People's Daily `tagged` + reviews `jsonl:`) and
    `data.tokenizer_type='char'`."""
    a = str(texts / "texts" / "a.txt")
    docs = list(corpus.read_documents([a, f"jsonl:{texts / 'docs.jsonl'}"], "text"))
    as_text = list(corpus.read_documents([a], "text"))
    as_jsonl = list(corpus.read_documents([str(texts / "docs.jsonl")], "jsonl"))
    assert docs == as_text + as_jsonl and len(docs) == 40 + 120
    assert corpus.split_format("gs://b/x.txt", "text") == ("text", "gs://b/x.txt")  # a URI
    with pytest.raises(corpus.CorpusError, match="'text:' names no path after text:"):
        corpus.split_format("text:")  # not the working directory
    with pytest.raises(corpus.CorpusError, match=f"{re.escape(a)} is named as text and as jsonl"):
        list(corpus.read_documents([a, f"jsonl:{a}"], "text"))
    d = common.get_data_config()
    d.input_files = "texts/a.txt,jsonl:docs.jsonl"
    r = pipeline.resolve_paths(d, workdir="/elsewhere")
    assert r.input_files[1] == f"jsonl:{os.path.abspath('docs.jsonl')}"
    unigram = r.corpus_name
    d.tokenizer_type = "char"
    assert pipeline.resolve_paths(d, workdir="/elsewhere").corpus_name != unigram
    work = tmp_path / "run"
    args = ["-m", "albert_jax.pretrain", "--config", CPU_SMALL, "--workdir", str(work), *SHORT]
    args += ["--config.data.input_files=texts/a.txt,jsonl:docs.jsonl"]
    args += ["--config.data.input_format=text", "--config.data.tokenizer_type=char"]
    run([*args, "--config.data.vocab_size=3000", "--config.data.hard_vocab_limit=False"], texts)
    from albert_jax.text.tokenization import load_tokenizer

    tok = load_tokenizer(str(work / "data" / "tokenizer"))
    meta = json.loads((work / "data" / "tokenizer" / "tokenizer.json").read_text())
    assert meta["model_type"] == "char" and tok.vocab_size < 3000
    assert len(tok.encode("人民日报社论")) == 1 + 6  # the word mark, then a piece a character
    # The run trained 3000 vocabulary rows; its model keeps the tokenizer's (the rest unused).
    config, params = checkpoint.load(str(work / "model"))
    assert (
        config.vocab_size
        == tok.vocab_size
        == checkpoint.model_tokenizer(str(work / "model")).vocab_size
    )
    assert params["embeddings"]["word_embeddings"].shape[0] == tok.vocab_size


@pytest.mark.slow  # 24-53 s: keeps the default suite under ~10 minutes
def test_text_directory_pretrains_from_the_command_line(texts, tmp_path):
    """README: pretraining on your own files in one command, then the Python API on the output."""
    work = tmp_path / "run"
    args = ["-m", "albert_jax.pretrain", "--config", CPU_SMALL, "--workdir", str(work)]
    args += ["--config.data.input_files=texts", "--config.data.input_format=text"]
    proc = run([*args, "--config.data.vocab_size=3000", *SHORT], cwd=texts)
    assert "WARNING" not in proc.stderr  # TFDS's notes (also from grain's workers): train.log
    out = proc.stdout
    data = json.loads(next(line for line in out.splitlines() if line.startswith('{"data"')))
    assert data["data"]["documents"] == 120 and data["data"]["tokenizer_trained"]
    meta = json.loads((work / "data" / "tokenizer" / "tokenizer.json").read_text())
    assert meta["trained_on"]["input_files"] == [str(texts / "texts")]
    config, params = checkpoint.load(str(work / "model"))
    tok = checkpoint.model_tokenizer(str(work / "model"))
    assert tok.vocab_size == config.vocab_size == 3000
    from albert_jax.model.albert import AlbertForPreTraining

    ids = np.asarray([tok.encode("人民日报社论")[:6]], np.int32)
    out = AlbertForPreTraining(config).apply({"params": params}, ids, deterministic=True)
    assert np.isfinite(np.asarray(out.mlm_logits)).all()
    # The same workdir with other input files keeps nothing stale: the tokenizer refuses.
    other = ["--config.data.input_files=docs.jsonl", "--config.data.input_format=jsonl"]
    proc = run([*args[:-2], *other, "--config.data.vocab_size=3000", *SHORT], texts, check=False)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the tokenizer in") and "docs.jsonl" in last


@pytest.mark.slow  # the default suite's time; CI runs it
def test_jsonl_with_a_tokenizer_model_one_epoch_streamed_and_pretrained(texts, tmp_path):
    tok_dir = tmp_path / "tok"
    out = run(["-m", "albert_jax.pretrain.tokenizer", "--input", "docs.jsonl", "--format", "jsonl",
               "--vocab_size", "3000", "--out", str(tok_dir)], cwd=texts).stdout  # fmt: skip
    assert json.loads(out.splitlines()[-1])["input"]["documents"] == 120
    flags = [
        "--config", CPU_SMALL, "--workdir", str(tmp_path / "w"),
        "--config.data.input_files=docs.jsonl", "--config.data.input_format=jsonl",
        f"--config.data.tokenizer_model={tok_dir / 'spiece.model'}",
        "--config.data.vocab_size=3000", "--config.data.lower_case=False",
    ]  # fmt: skip
    out = run(["-m", "albert_jax.pretrain.prepare_data", *flags], cwd=texts).stdout
    summary = json.loads(out.splitlines()[-1])
    assert summary["documents"] == 120 and not summary["tokenizer_trained"]
    copied = json.loads((tmp_path / "w" / "data" / "tokenizer" / "tokenizer.json").read_text())
    assert copied["source"] == str(tok_dir / "spiece.model") and copied["lower_case"] is False
    jsonl = tmp_path / "epoch.jsonl"
    out = run(["-m", "albert_jax.pretrain.inspect_data", *flags, "--config.train_split=train",
               "--jsonl", str(jsonl), "--epochs", "1"], cwd=texts).stdout  # fmt: skip
    wrote = json.loads(out.splitlines()[-1])["wrote"]
    lines = jsonl.read_text().splitlines()
    assert wrote == len(lines) > 120  # every example of one pass, more than one per document
    first = json.loads(lines[0])
    assert first["input_ids"][0] == 2 and first["input_ids"].count(3) >= 2  # [CLS], [SEP]s
    # ... and a short pretraining run on the corpus prepared above (not built again).
    out = run(["-m", "albert_jax.pretrain", *flags, *SHORT], cwd=texts).stdout
    data = json.loads(next(line for line in out.splitlines() if line.startswith('{"data"')))
    assert not data["data"]["built_now"] and (tmp_path / "w" / "model" / "config.json").exists()


def test_vocab_limit_is_one_line_with_the_largest_size(texts, tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("the cat sat on the mat.\nthe dog sat on the log.\n" * 20)
    args = ["-m", "albert_jax.pretrain.tokenizer", "--input", str(small), "--vocab_size", "8000"]
    proc = run([*args, "--out", str(tmp_path / "t1")], cwd=tmp_path, check=False)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    allowed = int(re.search(r"at most (\d+)", last).group(1))
    assert last.startswith("error: vocab_size=8000") and 0 < allowed < 8000
    assert "hard_vocab_limit" in last and "Traceback" not in proc.stderr
    out = run([*args, "--nohard_vocab_limit", "--out", str(tmp_path / "t2")], cwd=tmp_path)
    assert json.loads(out.stdout.splitlines()[-1])["vocab_size"] == allowed


def test_continued_pretraining_starts_from_the_checkpoint(texts, tmp_path):
    """--config.init: the model and tokenizer are the checkpoint's; with a zero learning rate the
    run's model equals its start exactly."""
    from helpers import random_params, tiny_config

    from albert_jax.model.albert import AlbertForPreTraining
    from albert_jax.text.tokenization import load_tokenizer

    config = tiny_config("none").replace(vocab_size=120, max_position_embeddings=64)
    params = random_params(AlbertForPreTraining(config))
    src = str(tmp_path / "start")
    checkpoint.save(src, config, params, tokenizer=load_tokenizer(os.path.dirname(SP_FIXTURE)))
    work = tmp_path / "run"
    out = run(["-m", "albert_jax.pretrain", "--config", CPU_SMALL, "--workdir", str(work),
               f"--config.init={src}", "--config.data.input_files=texts",
               "--config.data.input_format=text", "--config.optim.learning_rate=0.0",
               *SHORT], cwd=texts).stdout  # fmt: skip
    assert "continued pretraining from" in out and re.search(r"initialized from .*loaded \d+", out)
    got_config, got = checkpoint.load(str(work / "model"))
    tok = checkpoint.model_tokenizer(str(work / "model"))
    assert got_config == config and tok.vocab_size == 120
    from flax import traverse_util

    flat, want = (traverse_util.flatten_dict(p, sep="/") for p in (got, params))
    assert set(flat) == set(want)
    for path, value in want.items():
        np.testing.assert_array_equal(np.asarray(flat[path]), np.asarray(value), err_msg=path)


@pytest.mark.slow  # the default suite's time; CI runs it
def test_degenerate_pairs_warning_from_prepare_inspect_and_pretrain(documents, tmp_path):
    """The three commands a user runs on a one-sentence-per-document corpus each print the
    warning once (stderr); inspect_data with single_segment='split' does not."""
    one_sentence_corpus(documents, tmp_path / "one.txt")
    flags = [
        "--config", CPU_SMALL, "--workdir", str(tmp_path / "w"),
        "--config.data.input_files=one.txt", "--config.data.input_format=text",
        f"--config.data.tokenizer_model={SP_FIXTURE}", "--config.data.vocab_size=120",
    ]  # fmt: skip
    inspect = ["-m", "albert_jax.pretrain.inspect_data", *flags, "--n", "1", "--stats_n", "100"]

    def warnings(proc):
        return [x for x in proc.stderr.splitlines() if "degenerate sentence pairs" in x]

    prepared = run(["-m", "albert_jax.pretrain.prepare_data", *flags], cwd=tmp_path)
    assert json.loads(prepared.stdout.splitlines()[-1])["documents"] == 120  # stdout stays JSON
    (line,) = warnings(prepared)
    assert line.startswith("warning: ") and "120 of 120 sampled documents are one sentence" in line
    (line,) = warnings(run(inspect, cwd=tmp_path))
    assert "label-1 rate 1.00, random-document B in 100% of pairs, 120 of 120" in line
    assert line.endswith("use --config.data.single_segment=split")
    assert warnings(run([*inspect, "--config.data.single_segment=split"], cwd=tmp_path)) == []
    (line,) = warnings(run(["-m", "albert_jax.pretrain", *flags, *SHORT], cwd=tmp_path))
    assert "use --config.data.single_segment=split" in line
