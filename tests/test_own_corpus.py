"""Pretraining on your own corpus: files, directories and globs as the command line gives them,
a tokenizer brought along (SentencePiece or WordPiece, with its own special ids), resumable and
parallel preparation, evaluation splits, degenerate sentence pairs, and every config docstring's
documented override. The commands themselves, as a new user types them:
tests/integration/test_own_corpus_cli.py."""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
import shlex

import numpy as np
import pytest
from support.corpus import CPU_SMALL, SP_FIXTURE, check_overrides, one_sentence_corpus, placeholder

from albert_jax.configs.pretrain import common
from albert_jax.data.pretraining import corpus, parallel, pipeline
from albert_jax.data.pretraining.documents import expand_inputs
from albert_jax.model import presets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


DOCUMENTED = [
    *glob.glob(os.path.join(ROOT, "configs", "pretrain", "*.py")),
    *glob.glob(os.path.join(ROOT, "configs", "finetune", "*.py")),
    *glob.glob(os.path.join(ROOT, "pretrain", "*.py")),
    os.path.join(ROOT, "finetune", "__main__.py"),
]


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


def test_parallel_preparation_writes_the_same_corpus(texts, tmp_path, monkeypatch):
    """Tokenizing in 2 worker processes gives the documents 1 process gives, in the same order
    (15 chunks of 8 documents, several in flight at once)."""
    from albert_jax.data.pretraining.pipeline import resolve_paths

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
    from albert_jax.configs.pretrain import cpu_small
    from albert_jax.data.pretraining.pipeline import DataConfigError, resolve_paths
    from albert_jax.tasks.pretraining import PretrainingTask

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
        task = PretrainingTask(config, data, presets.from_run_config(config))
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
    from albert_jax.configs.pretrain import cpu_small
    from albert_jax.data.pretraining.pipeline import resolve_paths
    from albert_jax.tasks.pretraining import PretrainingTask

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

    m = PretrainingTask(config, data, presets.from_run_config(config)).evaluate(run, 0)
    assert m["nsp_task_accuracy"] == m["sop_accuracy"] == 0.0  # own task: the usual metric
    assert 0.3 < m["sop_task_accuracy"] < 0.7 and m["loss"] == 1.0
    # The majority label's accuracy: from the labels of the same held-out pairs.
    labels = {}
    for mode in ("sop", "nsp"):
        it = PretrainingTask(config, data, presets.from_run_config(config)).eval_iterator(
            0, 1, mode
        )
        share = np.mean([b["sentence_order_label"].mean() for b in itertools.islice(it, 6)])
        labels[mode] = max(share, 1 - share)
        assert m[f"{mode}_task_majority"] == pytest.approx(labels[mode])
    config.cross_eval = False
    plain = PretrainingTask(config, data, presets.from_run_config(config)).evaluate(run, 0)
    assert set(plain) == {"sop_accuracy", "sop_majority_share", "sop_learned_nothing", "loss"}
    assert plain["sop_majority_share"] == pytest.approx(labels["nsp"])


def test_an_interrupted_preparation_resumes_from_its_finished_parts(texts, tmp_path, monkeypatch):
    """Parts of 16 documents here: a build killed in its 4th part keeps parts 0-2; run again it
    tokenizes only the rest, and the corpus equals one built in one go."""
    from albert_jax.data.pretraining.pipeline import resolve_paths

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

    from albert_jax.configs.pretrain import cpu_small
    from albert_jax.data.pretraining.pipeline import resolve_paths
    from albert_jax.tasks.pretraining import PretrainingTask
    from albert_jax.train.trainer import TrainConfigError, train

    assert jax.device_count() == 8
    config = cpu_small.get_config()
    d = config.data
    d.input_files, d.input_format = str(texts / "texts"), "text"
    d.tokenizer_model, d.vocab_size = SP_FIXTURE, 120
    d.data_dir, d.global_batch_size = str(tmp_path / "data"), 4
    with pytest.raises(TrainConfigError, match="batch of 4 .* 8 devices .* multiple of 8"):
        train(
            config,
            str(tmp_path / "w"),
            PretrainingTask(config, resolve_paths(d), presets.from_run_config(config)).job(),
        )


def test_a_warmup_longer_than_the_run_is_named(texts, tmp_path):
    """--config.total_steps=20 under the default 100 warmup steps: the optim keys named, as an
    input error (the CLI's one line and exit status 2), before anything is written."""
    from albert_jax.configs.pretrain import cpu_small
    from albert_jax.data.pretraining.pipeline import resolve_paths
    from albert_jax.tasks.pretraining import PretrainingTask
    from albert_jax.train.trainer import TrainConfigError, train

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
        train(
            config,
            str(workdir),
            PretrainingTask(config, resolve_paths(d), presets.from_run_config(config)).job(),
        )
    assert not os.path.exists(workdir / "checkpoints")


def _sp_data_config(files, data_dir, **kw):
    from albert_jax.data.pretraining.pipeline import resolve_paths

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
    from albert_jax.configs.pretrain import cpu_small
    from albert_jax.data.pretraining.pair_check import FIX
    from albert_jax.data.pretraining.pair_check import pair_warning as warning
    from albert_jax.tasks.pretrain_config import PretrainConfig

    def pair_warning(config, *args, **kw):  # as the entry points call it: the run's sentence head
        return warning(PretrainConfig.from_config(config).sentence_head, *args, **kw)

    one = _sp_data_config(one_sentence_corpus(documents, tmp_path / "one.txt"), tmp_path / "a")
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
