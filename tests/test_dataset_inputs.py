"""Dataset-library inputs (`albert_jax.data.tables`) on data built here, offline: parquet, feather
and arrow files, `datasets` directories (`save_to_disk`, and a folder of data files through
`load_dataset`), a TFDS dataset prepared as ArrayRecord by a builder defined below; each read as
a fine-tuning split (classification, tagging, QA, seq2seq) and as pretraining input, a tiny
fine-tune and a tiny pretraining on them, and the errors: a missing mapped column, a missing
saved directory, a TFRecord dataset without TensorFlow, the `datasets` extra not installed."""

from __future__ import annotations

import json
import os
import sys
import types

import numpy as np
import pytest
from support.corpus import CPU_SMALL, SHORT, SP_FIXTURE, run
from support.finetune import make_config, read_jsonl, sentences, write_jsonl

from albert_jax.data import tables
from albert_jax.data.finetuning import records, textgen
from albert_jax.data.pretraining import corpus, pipeline
from albert_jax.jobs import run as runs
from albert_jax.jobs import start
from albert_jax.tasks import finetuning as F
from albert_jax.tasks import qa, tagging

# No hub here: `datasets` reads these when it is first imported (in the fixtures, and in the
# subprocesses the runs start).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
from albert_jax.configs.pretrain import common
from albert_jax.tasks.finetune_config import FinetuneError

datasets = pytest.importorskip("datasets")
tfds = pytest.importorskip("tensorflow_datasets")

SPLITS = {"train": 24, "dev": 13, "test": 11}
NAMES = ["neg", "pos"]
TAGS = ["O", "B-X", "I-X"]


def _rows(n: int, seed: int) -> dict:
    texts = sentences(np.random.default_rng(seed), n)
    return {
        "sentence": texts,
        "label": [int("good" in t) for t in texts],
        "idx": list(range(n)),
        "tokens": [t.split() for t in texts],
        "ner_tags": [[1 if w == "good" else 0 for w in t.split()] for t in texts],
    }


FEATURES = {
    "sentence": datasets.Value("string"),
    "label": datasets.ClassLabel(names=NAMES),
    "idx": datasets.Value("int32"),
    "tokens": datasets.Sequence(datasets.Value("string")),
    "ner_tags": datasets.Sequence(datasets.ClassLabel(names=TAGS)),
}


class TinyReviews(tfds.core.GeneratorBasedBuilder):
    """The same rows as a TFDS dataset (sentence, label as a ClassLabel, idx)."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict(
                {
                    "sentence": tfds.features.Text(),
                    "label": tfds.features.ClassLabel(names=NAMES),
                    "idx": np.int32,
                }
            ),
        )

    def _split_generators(self, dl_manager):
        return {split: self._generate_examples(split) for split in SPLITS}

    def _generate_examples(self, split):
        rows = _rows(SPLITS[split], seed=list(SPLITS).index(split))
        for i in range(SPLITS[split]):
            yield i, {k: rows[k][i] for k in ("sentence", "label", "idx")}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every form of the same three splits: {form: {split: reference}}, the TFDS data_dir under
    'tfds_dir', and the rows as JSONL (the text files the forms are compared with)."""
    d = tmp_path_factory.mktemp("tables")
    splits = {}
    for i, (split, n) in enumerate(SPLITS.items()):
        rows = _rows(n, seed=i)
        if split == "test":  # GLUE's way: a test split's labels are -1 (none)
            rows["label"] = [-1] * n
        splits[split] = datasets.Dataset.from_dict(rows, features=datasets.Features(FEATURES))
    dd = datasets.DatasetDict(splits)
    dd.save_to_disk(str(d / "saved"))
    forms = {"hf_dict": {s: f"hf:{d / 'saved'}:{s}" for s in SPLITS}}
    forms["hf_one"], forms["parquet"], forms["arrow"], forms["feather"] = {}, {}, {}, {}
    forms["hf_files"], forms["jsonl"] = {}, {}
    for split, ds in splits.items():
        ds.save_to_disk(str(d / split))
        forms["hf_one"][split] = f"hf:{d / split}"
        ds.to_parquet(str(d / f"{split}.parquet"))
        forms["parquet"][split] = str(d / f"{split}.parquet")
        (arrow,) = (d / split).glob("*.arrow")  # the IPC stream `datasets` keeps its data in
        forms["arrow"][split] = str(arrow)
        import pyarrow.feather

        pyarrow.feather.write_feather(ds.data.table, str(d / f"{split}.feather"))
        forms["feather"][split] = str(d / f"{split}.feather")
        names = ds.features["label"].int2str
        records = [
            {"sentence": r["sentence"], "idx": r["idx"], "tokens": r["tokens"]}
            | ({"label": names(r["label"])} if r["label"] >= 0 else {})
            for r in ds
        ]
        # a folder of data files, loaded by `load_dataset` (its one file: split 'train')
        (d / f"files_{split}").mkdir()
        write_jsonl(d / f"files_{split}" / "data.jsonl", records)  # labels as strings
        forms["hf_files"][split] = f"hf:{d / f'files_{split}'}:train"
        forms["jsonl"][split] = str(d / f"files_{split}" / "data.jsonl")
    TinyReviews(data_dir=str(d / "tfds"), file_format="array_record").download_and_prepare()
    forms["tfds"] = {s: f"tfds:tiny_reviews:{s}" for s in SPLITS}
    return {"forms": forms, "tfds_dir": str(d / "tfds"), "dir": d}


def _config(pretrained, built, form, **kw):
    c = make_config(pretrained, "classification", built["dir"], **kw)
    c.task.update({**built["forms"][form], "text_a": "sentence"})
    if form == "tfds":
        c.task.data_dir = built["tfds_dir"]
    return c


def _read(pretrained, built, form):
    data = F.FinetuneData(_config(pretrained, built, form))
    return {s: [(ex.text_a, ex.label) for ex in data.examples[s]] for s in SPLITS}, data


FORMS = ["parquet", "arrow", "feather", "hf_dict", "hf_one", "hf_files", "tfds"]


def test_every_form_reads_the_examples_the_text_file_gives(pretrained, built):
    """Classification from each form: the same texts and label names (ClassLabel ids read as
    their names, -1 as no label) as the JSONL file of the same rows; `check_files` passes."""
    want, data = _read(pretrained, built, "jsonl")
    assert data.labels == NAMES and all(label is None for _, label in want["test"])
    for form in FORMS:
        start.check_files(_config(pretrained, built, form))
        got, data = _read(pretrained, built, form)
        if form == "tfds":  # TFDS stores its rows shuffled; its test labels are not -1
            got = {s: sorted(v) for s, v in got.items()}
            want_sorted = {s: sorted(v) for s, v in want.items() if s != "test"}
            assert {s: got[s] for s in ("train", "dev")} == want_sorted
            continue
        assert got == want, form
        assert data.labels == NAMES
        where = data.examples["dev"][3].where
        assert where == f"{built['forms'][form]['dev']}:row 3", form


def test_a_missing_column_or_directory_is_named(pretrained, built, tmp_path):
    """A mapped column the rows lack: one line naming the split, the reference, the columns the
    rows have and the setting to change; a saved directory that is not there: named before."""
    ref = built["forms"]["hf_dict"]["train"]
    c = _config(pretrained, built, "hf_dict")
    c.task.text_a = "text"
    with pytest.raises(tables.ColumnError) as e:
        F.FinetuneData(c)
    assert str(e.value) == (
        f"task.train {ref}: no column 'text' (the rows have: sentence, label, idx, tokens, "
        "ner_tags); name it with --config.task.text_a=COLUMN"
    )
    c = _config(pretrained, built, "parquet", **{"task.text_b": "second"})
    with pytest.raises(tables.ColumnError, match=r"no column 'second' .*task.text_b=COLUMN"):
        F.FinetuneData(c)
    c = _config(pretrained, built, "hf_dict")
    c.task.dev = f"hf:{tmp_path / 'nope'}:dev"
    with pytest.raises(FinetuneError, match=r"task.dev hf:.*nope:dev: .*nope does not exist"):
        start.check_files(c)
    c.task.dev = str(tmp_path / "nope.parquet")
    with pytest.raises(FinetuneError, match=r"task.dev .*nope.parquet does not exist"):
        start.check_files(c)
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(tables.TableError, match=r"bad.parquet: not a readable .parquet file"):
        tables.open_table(str(tmp_path / "bad.parquet"))
    with pytest.raises(tables.TableError, match=r"no split 'valid' \(the dataset has: train"):
        tables.open_table(f"hf:{built['dir'] / 'saved'}:valid")
    with pytest.raises(tables.TableError, match=r"offline: only the local datasets cache"):
        tables.open_table("hf:no_such_org/no_such_dataset:train")
    with pytest.raises(tables.TableError, match=r"no split 'valid' \(the dataset has: "):
        tables.open_table("tfds:tiny_reviews:valid", built["tfds_dir"])


def test_without_the_extra_a_reference_names_it(built, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets: ImportError
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    extra = r"needs the \w+ package: pip install 'albert-jax\[datasets\]'"
    for ref in (built["forms"]["hf_dict"]["train"], built["forms"]["parquet"]["train"]):
        with pytest.raises(tables.TableError, match=extra):
            tables.open_table(ref)


def test_a_tfrecord_dataset_without_tensorflow_says_what_to_install(built, monkeypatch):
    """TFDS reads TFRecord datasets only through TensorFlow, which is not installed here (a
    builder cannot even write them without it): the error says so."""
    if _has_tensorflow():
        pytest.skip("TensorFlow is installed")
    real = tfds.builder("tiny_reviews", data_dir=built["tfds_dir"]).info
    info = types.SimpleNamespace(splits=real.splits, features=real.features, file_format="tfrecord")
    monkeypatch.setattr(tfds, "builder", lambda name, data_dir: types.SimpleNamespace(info=info))
    with pytest.raises(tables.TableError, match=r"tfrecord.*TensorFlow.*albert-jax\[tf\]"):
        tables.open_table("tfds:tiny_reviews:train", built["tfds_dir"])


def _has_tensorflow() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


def test_tagging_qa_and_seq2seq_read_tables(pretrained, built, tmp_path):
    """Tagging from `task.words` / `task.tags` columns (tag ids as names); SQuAD rows as
    `datasets`' squad has them; seq2seq from `source_key` / `target_key` columns."""
    c = make_config(pretrained, "tagging", built["dir"])
    c.task.update(built["forms"]["parquet"])
    c.task.update(words="tokens", tags="ner_tags", scheme="BIO")
    data = F.FinetuneData(c)
    ex = data.examples["train"][0]
    assert ex.words == _rows(24, 0)["tokens"][0] and set(ex.tags) <= {"O", "B-X"}
    assert data.labels == ["B-X", "O"] and ex.where.endswith(".parquet:row 0")

    tagged = datasets.Dataset.from_dict({"w": [["a", "b"]], "t": [["B-X", "I-X"]]})
    tagged.to_parquet(str(tmp_path / "tagged.parquet"))
    ref = str(tmp_path / "tagged.parquet")
    examples = records.read_tagged_table(ref, "w", "t")
    with pytest.raises(records.DataError, match=r"tagged.parquet:row 0, word 1: tag 'I-X' is not"):
        tagging.check_scheme(examples, ref, "BMES")

    contexts = ["the hotel is good", "the room is dirty", "staff nice"]
    squad = datasets.Dataset.from_dict(
        {
            "id": ["q0", "q1", "q2"],
            "title": ["t", "t", "t"],
            "context": contexts,
            "question": ["how is the hotel", "how is the room", "who is nice"],
            "answers": [
                {"text": ["good"], "answer_start": [13]},
                {"text": ["dirty"], "answer_start": [12]},
                {"text": [], "answer_start": []},  # SQuAD v2.0: unanswerable
            ],
        }
    )
    squad.save_to_disk(str(tmp_path / "squad"))
    examples, counts = qa.read_squad_table(f"hf:{tmp_path / 'squad'}")
    assert [(e.qid, e.answers, e.answer_start) for e in examples] == [
        ("q0", ("good",), 13),
        ("q1", ("dirty",), 12),
        ("q2", (), None),
    ]
    assert counts == {"answers_not_found": 0}
    squad.remove_columns("answers").to_parquet(str(tmp_path / "squad_test.parquet"))
    examples, _ = qa.read_squad_table(str(tmp_path / "squad_test.parquet"))
    assert all(e.answers is None for e in examples)  # no answers column: a split to predict
    with pytest.raises(tables.ColumnError, match="no column 'id'.*SQuAD's columns"):
        qa.read_squad_table(str(built["forms"]["parquet"]["train"]))

    pairs = datasets.Dataset.from_dict({"src": ["a b", "c d"], "tgt": ["b a", "d c"]})
    pairs.to_parquet(str(tmp_path / "pairs.parquet"))
    examples, counts = textgen.read_seq2seq(str(tmp_path / "pairs.parquet"), "src", "tgt")
    assert [(e.source, e.target) for e in examples] == [("a b", "b a"), ("c d", "d c")]
    with pytest.raises(tables.ColumnError, match=r"--config.task.source_key=COLUMN"):
        textgen.read_seq2seq(str(tmp_path / "pairs.parquet"))


def test_pretraining_documents_from_tables(built, tmp_path, monkeypatch):
    """`data.input_files` takes the same references (one document a row, `text_field`'s
    column); a corpus built from them holds the documents the JSONL file gives."""
    jsonl = built["forms"]["jsonl"]["train"]
    want = list(corpus.read_documents([jsonl], "jsonl", text_field="sentence"))
    for form in ("parquet", "arrow", "hf_dict", "hf_files"):
        ref = built["forms"][form]["train"]
        got = list(corpus.read_documents([ref], "text", text_field="sentence"))
        assert got == want, form
    ref = built["forms"]["tfds"]["train"]
    got = corpus.read_documents(
        [ref], "text", text_field="sentence", tfds_data_dir=built["tfds_dir"]
    )
    assert sorted(got) == sorted(want)
    with pytest.raises(corpus.CorpusError, match=r"no column 'text' .*data.text_field=COLUMN"):
        list(corpus.read_documents([built["forms"]["parquet"]["train"]], "text"))
    with pytest.raises(corpus.CorpusError, match=r"data.input_files: hf:.*nope.*does not exist"):
        list(corpus.read_documents([f"hf:{tmp_path / 'nope'}:train"], "text"))
    d = common.get_data_config()
    d.input_files = f"{built['forms']['hf_dict']['train']},{built['forms']['parquet']['train']}"
    d.input_format, d.text_field = "text", "sentence"
    d.tokenizer_model, d.vocab_size, d.data_dir = SP_FIXTURE, 120, str(tmp_path / "data")
    d.prepare_processes = 1
    r = pipeline.resolve_paths(d)
    assert r.input_files[0] == built["forms"]["hf_dict"]["train"]  # a reference: as given
    stats = corpus.build(r)["stats"]
    assert stats["documents"] == 2 * len(want) and stats["lines"] == 2 * len(want)


def test_a_tiny_fine_tune_on_a_saved_dataset(pretrained, built, tmp_path):
    """Trained and evaluated from `hf:DIR:SPLIT`: predictions name the classes."""
    config = _config(pretrained, built, "hf_dict")
    runs.run(config, str(tmp_path))
    results = json.load(open(tmp_path / "results.json"))
    assert results["metric"] == "accuracy" and "accuracy" in results["dev"]
    dev = read_jsonl(tmp_path / "predictions" / "dev.jsonl")
    assert len(dev) == SPLITS["dev"] and {r["prediction"] for r in dev} <= set(NAMES)
    assert dev[0]["where"] == f"{built['forms']['hf_dict']['dev']}:row 0"
    assert {r["label"] for r in dev} <= set(NAMES)
    assert all("label" not in r for r in read_jsonl(tmp_path / "predictions" / "test.jsonl"))


@pytest.mark.slow
@pytest.mark.parametrize("form", ["parquet", "tfds"])
def test_a_tiny_fine_tune_on_each_other_form(pretrained, built, tmp_path, form):
    runs.run(_config(pretrained, built, form), str(tmp_path))
    dev = read_jsonl(tmp_path / "predictions" / "dev.jsonl")
    assert len(dev) == SPLITS["dev"] and {r["prediction"] for r in dev} <= set(NAMES)


def test_a_tiny_pretraining_on_a_parquet_file(built, tmp_path):
    """`python -m pretrain` with `data.input_files` a parquet file and `data.text_field`."""
    work = tmp_path / "run"
    args = ["-m", "albert_jax.pretrain", "--config", CPU_SMALL, "--workdir", str(work), *SHORT]
    args += [f"--config.data.input_files={built['forms']['parquet']['train']}"]
    args += ["--config.data.text_field=sentence", f"--config.data.tokenizer_model={SP_FIXTURE}"]
    args += ["--config.data.vocab_size=120", "--config.data.input_format=text"]
    args += ["--config.data.prepare_processes=1"]
    run(args, tmp_path)
    assert (work / "model").exists()


@pytest.mark.slow
def test_a_tiny_tagging_fine_tune_on_parquet_predicts_its_columns_again(
    pretrained, built, tmp_path
):
    """Tagging from `tokens` / `ner_tags` columns; `finetune.predict` reads the same columns of a
    table (the head keeps their names)."""
    c = make_config(pretrained, "tagging", built["dir"])
    c.task.update(built["forms"]["parquet"])
    c.task.update(words="tokens", tags="ner_tags")
    runs.run(c, str(tmp_path))
    dev = read_jsonl(tmp_path / "predictions" / "dev.jsonl")
    assert len(dev) == SPLITS["dev"] and all(len(r["predicted"]) == len(r["words"]) for r in dev)
    out = tmp_path / "again.jsonl"
    runs.predict_file(str(tmp_path / "best"), c.task.dev, str(out))
    assert [r["predicted"] for r in read_jsonl(out)] == [r["predicted"] for r in dev]
