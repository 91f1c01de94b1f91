"""Pretraining on your own corpus as a new user types it: files, directories and globs from the
command line, a tokenizer brought along (SentencePiece or WordPiece, with its own special ids),
the vocabulary-size limit, streaming inspection, continued pretraining, and every config
docstring's documented override."""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest

from albert_jax.checkpoints import checkpoint
from albert_jax.data import corpus, parallel, pipeline
from albert_jax.data.documents import expand_inputs
from configs.pretrain import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPU_SMALL = os.path.join(ROOT, "configs", "pretrain", "cpu_small.py")
SP_FIXTURE = os.path.join(ROOT, "tests", "fixtures", "tokenizer_sp", "spiece.model")
# Small runs: a few steps of a tiny batch, no evaluation, no progress bar.
SHORT = [
    "--config.total_steps=2",
    "--config.optim.warmup_steps=1",
    "--config.checkpoint_every=2",
    "--config.eval_every=0",
    "--config.log_every=1",
    "--config.progress_bar=False",
    "--config.data.global_batch_size=4",
]


def run(args, cwd, check=True):
    # One device, as on a laptop; LLVM at -O0 as in the rest of the suite (compile time).
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_backend_optimization_level=0"}
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="module")
def documents():
    """120 People's Daily articles (lists of sentences), as a user's own text."""
    docs = corpus.read_documents([common.peoples_daily_path()], "tagged")
    return list(itertools.islice(docs, 120))


@pytest.fixture(scope="module")
def texts(tmp_path_factory, documents):
    """A directory of UTF-8 text files (one sentence a line, blank line between documents) in
    a subdirectory too, with a hidden file that must be skipped."""
    root = tmp_path_factory.mktemp("user")
    for i, name in enumerate(["texts/a.txt", "texts/b.txt", "texts/sub/c.txt"]):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join("\n".join(d) + "\n\n" for d in documents[i * 40 : (i + 1) * 40]))
    (root / "texts" / ".hidden.txt").write_text("not part of the corpus\n")
    with open(root / "docs.jsonl", "w", encoding="utf-8") as f:
        for d in documents:
            f.write(json.dumps({"text": "".join(d)}, ensure_ascii=False) + "\n")
    return root


def test_input_files_are_files_directories_and_globs(texts, monkeypatch):
    monkeypatch.chdir(texts)
    a, b, c = (str(texts / "texts" / n) for n in ("a.txt", "b.txt", "sub/c.txt"))
    assert corpus.input_patterns("texts/a.txt, texts/sub ,") == ["texts/a.txt", "texts/sub"]
    assert corpus.input_patterns(["x", "y"]) == ["x", "y"]
    assert expand_inputs([str(texts / "texts")]) == [a, b, c]  # hidden file skipped
    assert expand_inputs([str(texts / "texts" / "**" / "*.txt")]) == [a, b, c]
    assert expand_inputs([b, str(texts / "texts" / "*.txt")]) == [b, a]  # no repeats
    for bad, why in [("nope/*.txt", "matches no file"), ("missing.txt", "no such file")]:
        with pytest.raises(corpus.CorpusError, match=re.escape(bad) + ".*" + why):
            expand_inputs([bad])
    d = common.get_data_config()
    d.input_files = "texts/a.txt,texts/sub"  # a command-line value: a string
    r = pipeline.resolve_paths(d, workdir="/elsewhere")
    assert r.input_files == [a, str(texts / "texts" / "sub")]  # relative to the cwd, not workdir
    assert r.data_dir == "/elsewhere/data"


def test_corpus_name_follows_inputs_and_settings():
    d = common.get_data_config()
    names = set()
    for files, vocab in [("x.txt", 8000), ("y.txt", 8000), ("x.txt", 4000)]:
        d.input_files, d.vocab_size = files, vocab
        names.add(pipeline.resolve_paths(d, "/w").corpus_name)
    assert len(names) == 3 and all(n.startswith(("x_", "y_")) for n in names)
    d.input_files, d.vocab_size = "x.txt", 8000
    assert pipeline.resolve_paths(d, "/w").corpus_name in names  # the same inputs: the same name
    d.corpus_name = "mine"
    assert pipeline.resolve_paths(d, "/w").corpus_name == "mine"


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
    args = ["-m", "pretrain", "--config", CPU_SMALL, "--workdir", str(work), *SHORT]
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
    args = ["-m", "pretrain", "--config", CPU_SMALL, "--workdir", str(work)]
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
    out = run(["-m", "pretrain.tokenizer", "--input", "docs.jsonl", "--format", "jsonl",
               "--vocab_size", "3000", "--out", str(tok_dir)], cwd=texts).stdout  # fmt: skip
    assert json.loads(out.splitlines()[-1])["input"]["documents"] == 120
    flags = [
        "--config", CPU_SMALL, "--workdir", str(tmp_path / "w"),
        "--config.data.input_files=docs.jsonl", "--config.data.input_format=jsonl",
        f"--config.data.tokenizer_model={tok_dir / 'spiece.model'}",
        "--config.data.vocab_size=3000", "--config.data.lower_case=False",
    ]  # fmt: skip
    out = run(["-m", "pretrain.prepare_data", *flags], cwd=texts).stdout
    summary = json.loads(out.splitlines()[-1])
    assert summary["documents"] == 120 and not summary["tokenizer_trained"]
    copied = json.loads((tmp_path / "w" / "data" / "tokenizer" / "tokenizer.json").read_text())
    assert copied["source"] == str(tok_dir / "spiece.model") and copied["lower_case"] is False
    jsonl = tmp_path / "epoch.jsonl"
    out = run(["-m", "pretrain.inspect_data", *flags, "--config.train_split=train",
               "--jsonl", str(jsonl), "--epochs", "1"], cwd=texts).stdout  # fmt: skip
    wrote = json.loads(out.splitlines()[-1])["wrote"]
    lines = jsonl.read_text().splitlines()
    assert wrote == len(lines) > 120  # every example of one pass, more than one per document
    first = json.loads(lines[0])
    assert first["input_ids"][0] == 2 and first["input_ids"].count(3) >= 2  # [CLS], [SEP]s
    # ... and a short pretraining run on the corpus prepared above (not built again).
    out = run(["-m", "pretrain", *flags, *SHORT], cwd=texts).stdout
    data = json.loads(next(line for line in out.splitlines() if line.startswith('{"data"')))
    assert not data["data"]["built_now"] and (tmp_path / "w" / "model" / "config.json").exists()


def test_vocab_limit_is_one_line_with_the_largest_size(texts, tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("the cat sat on the mat.\nthe dog sat on the log.\n" * 20)
    args = ["-m", "pretrain.tokenizer", "--input", str(small), "--vocab_size", "8000"]
    proc = run([*args, "--out", str(tmp_path / "t1")], cwd=tmp_path, check=False)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    allowed = int(re.search(r"at most (\d+)", last).group(1))
    assert last.startswith("error: vocab_size=8000") and 0 < allowed < 8000
    assert "hard_vocab_limit" in last and "Traceback" not in proc.stderr
    out = run([*args, "--nohard_vocab_limit", "--out", str(tmp_path / "t2")], cwd=tmp_path)
    assert json.loads(out.stdout.splitlines()[-1])["vocab_size"] == allowed


def test_a_model_file_as_tokenizer_dir_says_to_use_tokenizer_model(texts, tmp_path):
    d = common.get_data_config()
    d.input_files, d.input_format, d.data_dir = str(texts / "texts"), "text", str(tmp_path)
    d.tokenizer_dir = SP_FIXTURE  # absolute: not joined to data_dir
    with pytest.raises(corpus.CorpusError, match="is a file.*--config.data.tokenizer_model=PATH"):
        corpus.build(pipeline.resolve_paths(d))


def bert_style_vocab(path, documents) -> list[str]:
    """A WordPiece vocab.txt laid out as BERT's / albert_zh's: [PAD] 0, [unused*], [UNK] 100,
    [CLS] 101, [SEP] 102, [MASK] 103, then the corpus's characters."""
    chars = sorted({ch for d in documents for s in d for ch in s if not ch.isspace()})
    vocab = ["[PAD]", *[f"[unused{i}]" for i in range(1, 100)], "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += chars
    path.write_text("".join(v + "\n" for v in vocab), encoding="utf-8")
    return vocab


def test_wordpiece_vocab_examples_use_its_special_ids(texts, tmp_path, documents):
    vocab = bert_style_vocab(tmp_path / "vocab.txt", documents)
    d = common.get_data_config()
    d.input_files, d.input_format = str(texts / "texts"), "text"
    d.tokenizer_model, d.vocab_size = str(tmp_path / "vocab.txt"), len(vocab)
    d.data_dir, d.worker_count, d.global_batch_size = str(tmp_path / "data"), 0, 16
    d = pipeline.resolve_paths(d)
    assert corpus.build(d)["documents"] == 120
    batch = next(pipeline.make_iterator(d))
    ids, mask = batch["input_ids"], batch["input_mask"]
    n = mask.sum(1)
    assert (ids[:, 0] == 101).all() and (ids[np.arange(len(n)), n - 1] == 102).all()
    assert (ids[mask == 0] == 0).all()  # [PAD]
    shown = np.take_along_axis(ids, batch["masked_lm_positions"], 1)[batch["masked_lm_weights"] > 0]
    assert (shown == 103).mean() > 0.6  # about 80 % [MASK], by the tokenizer's id
    unmasked = mask.astype(bool)
    np.put_along_axis(unmasked, batch["masked_lm_positions"], False, 1)  # random ids may be any
    assert not np.isin(ids[unmasked], [2, 3, 4]).any()  # never ALBERT's SentencePiece ids
    # Another tokenizer for the same data directory is refused, naming both.
    with d.unlocked():
        d.tokenizer_model = SP_FIXTURE
    with pytest.raises(corpus.CorpusError, match="vocab.txt, not data.tokenizer_model=.*spiece"):
        corpus.build(d)


def test_continued_pretraining_starts_from_the_checkpoint(texts, tmp_path):
    """--config.init: the model and tokenizer are the checkpoint's; with a zero learning rate the
    run's model equals its start exactly."""
    from albert_jax.model.albert import AlbertForPreTraining
    from albert_jax.text.tokenization import load_tokenizer
    from tests.helpers import random_params, tiny_config

    config = tiny_config("none").replace(vocab_size=120, max_position_embeddings=64)
    params = random_params(AlbertForPreTraining(config))
    src = str(tmp_path / "start")
    checkpoint.save(src, config, params, tokenizer=load_tokenizer(os.path.dirname(SP_FIXTURE)))
    work = tmp_path / "run"
    out = run(["-m", "pretrain", "--config", CPU_SMALL, "--workdir", str(work),
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


DOCUMENTED = [
    *glob.glob(os.path.join(ROOT, "configs", "pretrain", "*.py")),
    *glob.glob(os.path.join(ROOT, "configs", "finetune", "*.py")),
    *glob.glob(os.path.join(ROOT, "pretrain", "*.py")),
    os.path.join(ROOT, "finetune", "__main__.py"),
]


def placeholder(raw):
    """A documented value that stands for the reader's own: choices (`a|b`), elisions (`...`)
    and names such as MAX or PATH."""
    return "|" in raw or "..." in raw or re.fullmatch(r"[A-Z_]+", raw.rstrip("`.]:")) is not None


def documented_overrides(path):
    """Every `--config.KEY=VALUE` a file's docstring shows (placeholders and choices skipped)."""
    text = open(path, encoding="utf-8").read()
    doc = re.match(r'\s*r?"""(.*?)"""', text, re.S)
    found = []
    for m in re.finditer(r"--config\.([\w.]+)=(\S+)", doc.group(1) if doc else ""):
        value = m.group(2).rstrip("`.]:")
        if placeholder(m.group(2)):
            continue  # choices, elisions and placeholders such as MAX
        value = "" if value == "''" else shlex.split(value)[0]  # the shell's view of it
        found.append(f"--config.{m.group(1)}={value}")
    return found


def config_for(path):
    if "/configs/" in path:
        if path.endswith(("__init__.py", "common.py")):
            return None
        # a config taking an argument (suite.py:NAME): as its docstring's first command names it
        rel = re.escape(os.path.relpath(path, ROOT))
        with_arg = re.search(rf"--config {rel}:([\w-]+)", open(path, encoding="utf-8").read())
        return f"{path}:{with_arg.group(1)}" if with_arg else path
    if "/finetune/" in path:
        return os.path.join(ROOT, "configs", "finetune", "sentiment.py")
    return CPU_SMALL


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(DOCUMENTED) if documented_overrides(p) and config_for(p)],
    ids=lambda p: os.path.relpath(p, ROOT),
)
def test_documented_overrides_parse(path):
    check_overrides(config_for(path), documented_overrides(path))


def check_overrides(config, overrides):
    """`--config=CONFIG` with these `--config.KEY=VALUE` overrides parses with ml_collections'
    config flags, and each key ends up holding its value (also used by tests/test_docs.py)."""
    from absl import flags
    from ml_collections import config_flags

    fv, argv = flags.FlagValues(), ["prog", f"--config={config}", *overrides]
    config_flags.DEFINE_config_file("config", None, "", flag_values=fv, sys_argv=argv)
    fv(argv)
    last = {o.split("=", 1)[0]: o for o in overrides}  # a key given twice: the later one wins
    for o in last.values():
        key, value = o[len("--config.") :].split("=", 1)
        got = fv.config
        for part in key.split("."):
            got = got[part]
        if isinstance(got, tuple):
            got = ",".join(map(str, got))
        if isinstance(got, bool):
            want = value.lower() in ("true", "1")
        else:
            want = type(got)(value) if isinstance(got, int | float) else value
        assert got == want, o


def test_parallel_preparation_writes_the_same_corpus(texts, tmp_path, monkeypatch):
    """Tokenizing in 2 worker processes gives the documents 1 process gives, in the same order
    (15 chunks of 8 documents, several in flight at once)."""
    from albert_jax.data.pipeline import resolve_paths

    monkeypatch.setattr(parallel, "CHUNK_DOCS", 8)

    d = common.get_data_config()
    d.input_files, d.input_format = str(texts / "texts"), "text"
    d.tokenizer_model, d.vocab_size = SP_FIXTURE, 120
    corpora = []
    for n in (1, 2):
        d.data_dir, d.prepare_processes = str(tmp_path / f"data{n}"), n
        r = resolve_paths(d)
        stats = corpus.build(r)["stats"]
        source = corpus.open_source(r)
        docs = sorted((int(x["doc_index"]), x["ids"].tolist()) for x in source)
        corpora.append((stats, docs))
    assert corpora[0] == corpora[1] and len(corpora[0][1]) == 120


def test_a_too_small_eval_split_is_named(texts, tmp_path):
    """An evaluation split with fewer examples than one batch: a clear error, not StopIteration;
    one with fewer than eval_batches full batches: the mean over those it has."""
    from albert_jax.data.pipeline import DataConfigError, resolve_paths
    from albert_jax.tasks.pretraining import PretrainingTask
    from configs.pretrain import cpu_small

    config = cpu_small.get_config()
    d = config.data
    d.input_files, d.input_format = str(texts / "texts"), "text"
    d.tokenizer_model, d.vocab_size = SP_FIXTURE, 120
    d.data_dir, d.worker_count, d.global_batch_size = str(tmp_path / "data"), 0, 8
    data = resolve_paths(d)
    corpus.build(data)
    config.eval_batches = 1000
    seen = []
    for split, batches in [("train[:1]", 0), ("train[:20]", None)]:
        config.eval_split = split
        task = PretrainingTask(config, data)
        run = lambda batch: seen.append(len(batch["input_ids"])) or {"loss": float(len(seen))}  # noqa: E731
        if batches == 0:
            small = r"eval_split 'train\[:1\]' of the .* corpus \(.*\) holds 1 documents, .* of 8"
            with pytest.raises(DataConfigError, match=small):
                task.evaluate(run, 0)
            with pytest.raises(DataConfigError, match=small):  # before training, too
                task.check_eval_split()
            continue
        metrics = task.evaluate(run, 0)
        assert 0 < len(seen) < 1000 and set(seen) == {8}
        assert metrics["loss"] == pytest.approx(np.mean(range(1, len(seen) + 1)))


def reference_cases(kind, lower, mode):
    """(text, ids) pairs: transformers' ids (tokens.json), or per mode (tokens_modes.json)."""
    ref = os.path.join(ROOT, "tests", "fixtures", "reference")
    if mode is None:
        with open(os.path.join(ref, "tokens.json"), encoding="utf-8") as f:
            return [(c["text"], c["ids"]) for c in json.load(f)[kind]]
    with open(os.path.join(ref, "tokens_modes.json"), encoding="utf-8") as f:
        cases = json.load(f)[kind]
    return [(c["text"], c[mode]) for c in cases if c["lower_case"] == lower]


@pytest.mark.parametrize(
    "kind,model,lower,mode",
    [
        ("sentencepiece", "tokenizer_sp/spiece.model", True, None),
        ("wordpiece_uncased", "tokenizer_wp/vocab.txt", True, None),
        ("wordpiece_cased", "tokenizer_wp/vocab.txt", False, None),
        ("sentencepiece", "tokenizer_sp_numbers/spiece.model", True, "reference"),
        ("sentencepiece", "tokenizer_sp_numbers/spiece.model", False, "reference"),
        ("sentencepiece", "tokenizer_sp_numbers/spiece.model", True, "transformers"),
        ("wordpiece", "tokenizer_wp/vocab.txt", True, "reference"),
    ],
)
def test_tokenizer_model_gives_the_reference_ids(kind, model, lower, mode, tmp_path):
    """A corpus prepared with data.tokenizer_model (and data.tokenizer_mode) stores the ids
    transformers' AlbertTokenizer / BertTokenizer give the same model, or with mode='reference'
    those of google-research/albert's tokenization.py, English and Chinese text."""
    texts = [(t, ids) for t, ids in reference_cases(kind, lower, mode) if t.strip()]
    texts = [(t, ids) for t, ids in texts if "\n" not in t]
    raw = tmp_path / "texts.txt"  # one document per reference text, whitespace kept inside
    raw.write_text("".join(t.strip() + "\n\n" for t, _ in texts), encoding="utf-8")
    d = common.get_data_config()
    d.input_files, d.input_format, d.lower_case = str(raw), "text", lower
    d.tokenizer_model = os.path.join(ROOT, "tests", "fixtures", model)
    d.tokenizer_mode = mode or "transformers"
    d.data_dir, d.max_sentence_tokens = str(tmp_path / "data"), 10_000
    from albert_jax.text.tokenization import read_tokenizer

    d.vocab_size = read_tokenizer(d.tokenizer_model).vocab_size
    r = pipeline.resolve_paths(d)
    corpus.build(r)
    stored = {int(x["doc_index"]): x["ids"].tolist() for x in corpus.open_source(r)}
    assert [stored[i] for i in range(len(texts))] == [ids for _, ids in texts]


def test_cross_eval_scores_the_sentence_head_on_both_tasks(texts, tmp_path):
    """cross_eval: `sop_task_accuracy` comes from SOP pairs, `nsp_task_accuracy` from NSP pairs
    (told apart here by the debug fields: NSP never swaps, SOP never takes a random B)."""
    from albert_jax.data.pipeline import resolve_paths
    from albert_jax.tasks.pretraining import PretrainingTask
    from configs.pretrain import cpu_small

    config = cpu_small.get_config()
    d = config.data
    d.input_files, d.input_format = str(texts / "texts"), "text"
    d.tokenizer_model, d.vocab_size = SP_FIXTURE, 120
    d.data_dir, d.worker_count, d.global_batch_size = str(tmp_path / "data"), 0, 8
    d.debug, d.mode, config.objective = True, "nsp", "mlm+nsp"
    config.eval_batches, config.eval_split, config.cross_eval = 6, "train[:30]", True
    data = resolve_paths(d)
    corpus.build(data)

    def run(batch):  # "accuracy" = the share of swapped pairs; a loss to check the rest stays
        return {"sop_accuracy": float(np.mean(batch["swapped"])), "loss": 1.0}

    m = PretrainingTask(config, data).evaluate(run, 0)
    assert m["nsp_task_accuracy"] == m["sop_accuracy"] == 0.0  # own task: the usual metric
    assert 0.3 < m["sop_task_accuracy"] < 0.7 and m["loss"] == 1.0
    # The majority label's accuracy: from the labels of the same held-out pairs.
    labels = {}
    for mode in ("sop", "nsp"):
        it = PretrainingTask(config, data).eval_iterator(0, 1, mode)
        share = np.mean([b["sentence_order_label"].mean() for b in itertools.islice(it, 6)])
        labels[mode] = max(share, 1 - share)
        assert m[f"{mode}_task_majority"] == pytest.approx(labels[mode])
    config.cross_eval = False
    plain = PretrainingTask(config, data).evaluate(run, 0)
    assert set(plain) == {"sop_accuracy", "sop_majority_share", "loss"}
    assert plain["sop_majority_share"] == pytest.approx(labels["nsp"])


def test_an_interrupted_preparation_resumes_from_its_finished_parts(texts, tmp_path, monkeypatch):
    """Parts of 16 documents here: a build killed in its 4th part keeps parts 0-2; run again it
    tokenizes only the rest, and the corpus equals one built in one go."""
    from albert_jax.data.pipeline import resolve_paths

    monkeypatch.setattr(parallel, "CHUNK_DOCS", 8)
    monkeypatch.setattr(parallel, "PART_CHUNKS", 2)
    real, calls = parallel._tokenize_chunk, []

    def counting(args):
        calls.append(1)
        if fail_at and len(calls) == fail_at:
            raise KeyboardInterrupt("killed")
        return real(args)

    monkeypatch.setattr(parallel, "_tokenize_chunk", counting)
    d = common.get_data_config()
    d.input_files, d.input_format = str(texts / "texts"), "text"
    d.tokenizer_model, d.vocab_size, d.prepare_processes = SP_FIXTURE, 120, 1
    built = []
    for name, fail_at in [("once", None), ("resumed", 7), ("resumed", None)]:
        d.data_dir = str(tmp_path / name)
        r = resolve_paths(d)
        calls.clear()
        if fail_at:
            with pytest.raises(KeyboardInterrupt):
                corpus.build(r)
            parts = sorted(os.listdir(os.path.join(r.data_dir, "parts", r.corpus_name)))
            assert parts == ["fingerprint.json", *[f"part-{k:06d}.npz" for k in range(3)]]
            continue
        stats = corpus.build(r)["stats"]
        built.append((stats, sorted((int(x["doc_index"]), x["ids"].tolist())
                                    for x in corpus.open_source(r))))  # fmt: skip
        assert len(calls) == (15 if name == "once" else 15 - 6)  # 120 documents, 8 a chunk
        assert not os.path.exists(os.path.join(r.data_dir, "parts", r.corpus_name))
    assert built[0] == built[1]


def test_a_batch_that_does_not_split_over_the_devices_is_named(texts, tmp_path):
    """8 devices (the suite's fake ones) and a batch of 4: one clear error before any compile."""
    import jax

    from albert_jax.data.pipeline import resolve_paths
    from albert_jax.tasks.pretraining import PretrainingTask
    from albert_jax.train.trainer import TrainConfigError, train
    from configs.pretrain import cpu_small

    assert jax.device_count() == 8
    config = cpu_small.get_config()
    d = config.data
    d.input_files, d.input_format = str(texts / "texts"), "text"
    d.tokenizer_model, d.vocab_size = SP_FIXTURE, 120
    d.data_dir, d.global_batch_size = str(tmp_path / "data"), 4
    with pytest.raises(TrainConfigError, match="batch of 4 .* 8 devices .* multiple of 8"):
        train(config, str(tmp_path / "w"), PretrainingTask(config, resolve_paths(d)))


def test_a_warmup_longer_than_the_run_is_named(texts, tmp_path):
    """--config.total_steps=20 under the default 100 warmup steps: the optim keys named, as an
    input error (the CLI's one line and exit status 2), before anything is written."""
    from albert_jax.data.pipeline import resolve_paths
    from albert_jax.tasks.pretraining import PretrainingTask
    from albert_jax.train.trainer import TrainConfigError, train
    from configs.pretrain import cpu_small

    config = cpu_small.get_config()
    d = config.data
    d.input_files, d.input_format = str(texts / "texts"), "text"
    d.tokenizer_model, d.vocab_size = SP_FIXTURE, 120
    d.data_dir, config.total_steps = str(tmp_path / "data"), 20
    assert config.optim.warmup_steps == 100 and config.optim.total_steps == 20
    workdir = tmp_path / "w"
    with pytest.raises(
        TrainConfigError, match=r"optim: .*warmup_steps \(100\) <= total_steps \(20\)"
    ):
        train(config, str(workdir), PretrainingTask(config, resolve_paths(d)))
    assert not os.path.exists(workdir / "checkpoints")


def _one_sentence_corpus(documents, path):
    """Each document's first sentence alone: text without sentence ends reads this way."""
    path.write_text("".join(d[0] + "\n\n" for d in documents), encoding="utf-8")
    return path


def _sp_data_config(files, data_dir, **kw):
    from albert_jax.data.pipeline import resolve_paths

    d = common.get_data_config()
    d.input_files, d.input_format, d.tokenizer_model = str(files), "text", SP_FIXTURE
    d.vocab_size, d.data_dir, d.worker_count = 120, str(data_dir), 0
    d.update(kw)
    data = resolve_paths(d)
    corpus.build(data)
    return data


def test_degenerate_sentence_pairs_are_detected(documents, texts, tmp_path):
    """pair_warning: fires on one-sentence documents or on pair rates above 0.9 and names the fix;
    silent on many-sentence documents, with single_segment='split', and without a sentence head."""
    from albert_jax.data.pair_check import FIX, pair_warning
    from configs.pretrain import cpu_small

    one = _sp_data_config(_one_sentence_corpus(documents, tmp_path / "one.txt"), tmp_path / "a")
    normal = _sp_data_config(texts / "texts", tmp_path / "b")
    sop = cpu_small.get_config()
    line = pair_warning(sop, one)
    assert line.startswith("warning: degenerate sentence pairs (120 of 120 sampled documents")
    assert line.endswith(f"use {FIX}") and "\n" not in line
    assert pair_warning(sop, normal) is None
    assert pair_warning(sop, normal, label_rate=0.5, random_doc_rate=0.2) is None
    assert "label-1 rate 0.95" in pair_warning(sop, normal, label_rate=0.95)
    assert "random-document B in 92% of pairs" in pair_warning(sop, normal, random_doc_rate=0.92)
    with one.unlocked():
        one.single_segment = "split"
    assert pair_warning(sop, one, label_rate=1.0) is None
    with one.unlocked():
        one.single_segment = "random_doc"
    sop.objective = "mlm"  # no sentence head: the pairs do not matter
    assert pair_warning(sop, one) is None
    sop.objective = "electra"
    assert pair_warning(sop, one) is None
    sop.electra.sentence_head = True
    assert pair_warning(sop, one) is not None


@pytest.mark.slow  # the default suite's time; CI runs it
def test_degenerate_pairs_warning_from_prepare_inspect_and_pretrain(documents, tmp_path):
    """The three commands a user runs on a one-sentence-per-document corpus each print the
    warning once (stderr); inspect_data with single_segment='split' does not."""
    _one_sentence_corpus(documents, tmp_path / "one.txt")
    flags = [
        "--config", CPU_SMALL, "--workdir", str(tmp_path / "w"),
        "--config.data.input_files=one.txt", "--config.data.input_format=text",
        f"--config.data.tokenizer_model={SP_FIXTURE}", "--config.data.vocab_size=120",
    ]  # fmt: skip
    inspect = ["-m", "pretrain.inspect_data", *flags, "--n", "1", "--stats_n", "100"]

    def warnings(proc):
        return [x for x in proc.stderr.splitlines() if "degenerate sentence pairs" in x]

    prepared = run(["-m", "pretrain.prepare_data", *flags], cwd=tmp_path)
    assert json.loads(prepared.stdout.splitlines()[-1])["documents"] == 120  # stdout stays JSON
    (line,) = warnings(prepared)
    assert line.startswith("warning: ") and "120 of 120 sampled documents are one sentence" in line
    (line,) = warnings(run(inspect, cwd=tmp_path))
    assert "label-1 rate 1.00, random-document B in 100% of pairs, 120 of 120" in line
    assert line.endswith("use --config.data.single_segment=split")
    assert warnings(run([*inspect, "--config.data.single_segment=split"], cwd=tmp_path)) == []
    (line,) = warnings(run(["-m", "pretrain", *flags, *SHORT], cwd=tmp_path))
    assert "use --config.data.single_segment=split" in line


class Killed(BaseException):
    """The process dying mid-write (not an Exception: nothing may catch it)."""


@pytest.mark.parametrize("given", [True, False], ids=["tokenizer_model", "trained"])
def test_a_crash_while_the_tokenizer_is_written_leaves_none(texts, tmp_path, monkeypatch, given):
    """Killed while data/tokenizer/spiece.model is being written: no partial spiece.model at that
    path (it would pass for the tokenizer and never be rebuilt); the next run writes it whole."""
    from etils import epath

    from albert_jax.text.tokenization import load_tokenizer

    d = common.get_data_config()
    d.input_files, d.input_format, d.data_dir = str(texts / "texts"), "text", str(tmp_path)
    d.vocab_size, d.tokenizer_type, d.hard_vocab_limit = 120, "char", False
    if given:
        d.tokenizer_model = SP_FIXTURE
    d = pipeline.resolve_paths(d)
    gpath = type(epath.Path(tmp_path))
    write_bytes = gpath.write_bytes

    def dies_halfway(self, data):
        if "spiece.model" in self.name:
            write_bytes(self, data[: len(data) // 2])
            raise Killed
        return write_bytes(self, data)

    monkeypatch.setattr(gpath, "write_bytes", dies_halfway)
    with pytest.raises(Killed):
        corpus.ensure_tokenizer(d)
    model = tmp_path / "tokenizer" / "spiece.model"
    assert d.tokenizer_dir == str(model.parent) and not model.exists()
    monkeypatch.undo()
    assert corpus.ensure_tokenizer(d) is not given  # trained again, or copied again
    assert load_tokenizer(d.tokenizer_dir).vocab_size == 120
    meta = json.loads((model.parent / "tokenizer.json").read_text())
    assert meta["source" if given else "trained_on"]  # the provenance, written before the model
    if given:
        with open(SP_FIXTURE, "rb") as f:
            assert model.read_bytes() == f.read()
