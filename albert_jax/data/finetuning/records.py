"""Fine-tuning data: readers for TSV / CSV / JSONL / CoNLL files and NumPy featurizers.

Readers fail early with a ``DataError`` that names the file and the 1-based line at fault, so
a bad row in a 100k-line file is found without a debugger. Featurizers return fixed-length
int32 arrays (length ``max_seq_length``) plus statistics about what was cut. No JAX here.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
from etils import epath

from albert_jax import paths
from albert_jax.data import tables
from albert_jax.errors import InputError
from albert_jax.text.tokenization import SPIECE_UNDERLINE, SentencePieceTokenizer

IGNORE = -1  # label / word id of positions that carry no word label (loss and metrics skip them)
# The largest regression label: the loss sums squared errors over the batch in float32, which
# stays finite for batches up to 2**20 examples of labels this size (1.8e16).
MAX_REGRESSION_LABEL = math.sqrt(np.finfo(np.float32).max / 2**20)
_FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}


class DataError(InputError):
    """Malformed fine-tuning input; the message names the file and line (or record)."""


@dataclasses.dataclass(frozen=True)
class Example:
    where: str  # "file:line", for error messages and prediction output
    text_a: str
    text_b: str | None = None
    label: str | float | None = None  # None: the file has no label column (inputs to predict)
    id: str | int | None = None  # the `id` column's value (a benchmark submission's key)


@dataclasses.dataclass(frozen=True)
class TaggedExample:
    where: str
    words: list[str]
    tags: list[str] | None = None  # None: the file has no tag column


# ---- sentence / pair readers ------------------------------------------------------------------
def read_examples(
    path: str | os.PathLike,
    *,
    text_a: str = "text",
    text_b: str | None = None,
    label: str = "label",
    task_type: str = "classification",
    fmt: str | None = None,
    id: str | None = None,
    columns: Sequence[str] = (),
    skip_labels: Sequence[str] = (),
    bad_rows: str = "error",
    counts: dict | None = None,
    data_dir: str = "",
) -> list[Example]:
    """Reads a TSV / CSV (header row, or ``columns``) or JSONL file into ``Example`` objects.

    ``fmt`` ('tsv', 'csv', 'jsonl') overrides the guess from the extension. A file without the
    ``label`` column yields examples with ``label=None``; a row with an empty label in a file
    that has the column is an error. Regression labels must be finite numbers. ``id``: the
    column whose value becomes ``Example.id`` (where a file has it). ``columns``: the names of
    a table's columns when its first row is not a header (one that does not name ``text_a``:
    GLUE's CoLA train and dev files). Rows labelled one of ``skip_labels`` are left out (CLUE's
    '-': annotators did not agree). ``bad_rows='skip'``: a table row with another number of
    fields than the header is left out instead of an error (GLUE's QQP train file has some);
    ``counts`` (a dict) then gets ``bad_rows_skipped``, and ``skipped_labels`` for the former.
    A parquet / arrow file or an ``hf:`` / ``tfds:`` reference (`albert_jax.data.tables`,
    TFDS datasets in ``data_dir``) is read as rows under the same column names; a text column it
    lacks is a `tables.ColumnError` naming its columns, and a label column whose values are all
    missing (None) reads as no label column.
    """
    if bad_rows not in ("error", "skip"):
        raise DataError(f"{os.fspath(path)}: bad_rows must be 'error' or 'skip', got {bad_rows!r}")
    counts = {} if counts is None else counts
    if task_type not in ("classification", "regression"):
        raise ValueError(f"task_type must be 'classification' or 'regression', got {task_type!r}")
    path = os.fspath(path)
    if tables.is_table(path):
        table = tables.open_table(path, data_dir)
        table.require({"text_a": text_a, "text_b": text_b or ""})
        records = [(where.rsplit(":", 1)[1], rec) for where, rec in table.rows()]
        has_label = any(rec.get(label) is not None for _, rec in records)
        return _examples(records, path, text_a, text_b, label, has_label, task_type, id,
                         skip_labels, counts)  # fmt: skip
    fmt = fmt or _FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt not in ("tsv", "csv", "jsonl"):
        raise DataError(f"{path}: unknown format (extension); pass fmt=tsv, csv or jsonl")
    name = os.path.basename(path)
    if fmt == "jsonl":
        records = _json_records(path, name)
    else:
        records = _table_records(
            path, name, fmt, columns=columns, header_names=text_a, counts=counts,
            skip_bad=bad_rows == "skip",
        )  # fmt: skip
    records = list(records)
    has_label = any(label in rec for _, rec in records)
    return _examples(
        records, name, text_a, text_b, label, has_label, task_type, id, skip_labels, counts
    )


def _examples(
    records, name, text_a, text_b, label, has_label, task_type, id, skip_labels, counts
) -> list[Example]:
    columns = [text_a] + ([text_b] if text_b else [])
    examples = []
    for line, rec in records:
        where = f"{name}:{line}"
        missing = [c for c in columns + ([label] if has_label else []) if c not in rec]
        if missing:
            raise DataError(f"{where}: missing column(s) {missing}; the row has {sorted(rec)}")
        texts = [_text(rec[c], c, where) for c in columns]
        if has_label and rec[label] in skip_labels:
            counts["skipped_labels"] = counts.get("skipped_labels", 0) + 1
            continue
        value = _label(rec[label], label, task_type, where) if has_label else None
        key = rec.get(id) if id else None
        examples.append(Example(where, texts[0], texts[1] if text_b else None, value, key))
    return examples


def not_utf8(path: str | os.PathLike) -> DataError:
    """The DataError for a file that is not UTF-8, naming its first undecodable line: found
    again in binary, since text mode decodes ahead in chunks (the line being read when the
    error comes is not the one at fault)."""
    with epath.Path(path).open("rb") as f:
        for line, raw in enumerate(f, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                return DataError(
                    f"{os.fspath(path)}:{line}: not UTF-8 text (byte {raw[e.start : e.end]!r} at "
                    f"column {e.start + 1}); convert the file to UTF-8"
                )
    return DataError(f"{os.fspath(path)}: not UTF-8 text; convert the file to UTF-8")


def text_lines(path: str | os.PathLike, newline: str | None = None) -> Iterator[str]:
    """The lines of a UTF-8 text file; bytes that are not UTF-8 raise `not_utf8`'s DataError."""
    with paths.open_text(path, newline=newline) as f:
        try:
            yield from f
        except UnicodeDecodeError:
            raise not_utf8(path) from None


def _table_records(
    path: str,
    name: str,
    fmt: str,
    columns: Sequence[str] = (),
    header_names: str = "",
    skip_bad: bool = False,
    counts: dict | None = None,
) -> Iterator[tuple[int, dict]]:
    """(line, {column: value}) per data row. TSV is split on tabs without quoting (GLUE files
    contain unbalanced quotes); CSV goes through the csv module (quoted fields may span lines,
    so the line reported is where the record starts). With ``columns``, a first row that does
    not contain ``header_names`` is data, read under those names."""
    f = text_lines(path, newline="")
    if fmt == "tsv":
        rows = ((i, line.rstrip("\r\n").split("\t")) for i, line in enumerate(f, 1))
    else:
        rows = _csv_rows(f, name)
    header = None
    for line, row in rows:
        if len(row) <= 1 and not "".join(row).strip():
            continue  # blank lines (e.g. a trailing newline) carry nothing
        if header is None and columns and header_names not in [c.strip() for c in row]:
            header = list(columns)
        if header is None:
            header = [c.strip() for c in row]
            dupes = sorted({c for c in header if header.count(c) > 1})
            if dupes:
                raise DataError(f"{name}:{line}: duplicate column name(s) {dupes}")
            continue
        if len(row) != len(header) and skip_bad and counts is not None:
            counts["bad_rows_skipped"] = counts.get("bad_rows_skipped", 0) + 1
            continue
        if len(row) != len(header):
            raise DataError(
                f"{name}:{line}: {len(row)} fields but the header has {len(header)} ({header})"
            )
        yield line, dict(zip(header, row, strict=True))
    if header is None:
        raise DataError(f"{name}:1: empty file (a header row is required)")


def _csv_rows(f, name: str) -> Iterator[tuple[int, list[str]]]:
    reader = csv.reader(f)
    start = 1
    try:
        for row in reader:
            yield start, row
            start = reader.line_num + 1
    except csv.Error as e:
        raise DataError(f"{name}:{start}: malformed CSV ({e})") from None


def _json_records(path: str, name: str) -> Iterator[tuple[int, dict]]:
    for line, raw in enumerate(text_lines(path), 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as e:
            raise DataError(f"{name}:{line}: malformed JSON ({e.msg})") from None
        if not isinstance(rec, dict):
            raise DataError(f"{name}:{line}: expected a JSON object, got {type(rec).__name__}")
        yield line, rec


def _text(value, column: str, where: str) -> str:
    if not isinstance(value, str):
        raise DataError(f"{where}: column {column!r} must be a string, got {value!r}")
    value = value.strip()
    if not value:
        raise DataError(f"{where}: column {column!r} is empty")
    return value


def _label(value, column: str, task_type: str, where: str) -> str | float:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise DataError(f"{where}: label column {column!r} is empty")
    if task_type == "classification":
        # JSON may hold 0/1 or true/false; labels are compared as strings everywhere.
        return value.strip() if isinstance(value, str) else json.dumps(value)
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise DataError(f"{where}: regression label {value!r} is not a finite number")
    if abs(number) > MAX_REGRESSION_LABEL:
        raise DataError(
            f"{where}: regression label {value!r} is too large: the loss (squared errors in "
            f"float32) would overflow; labels must be at most {MAX_REGRESSION_LABEL:.2g} in "
            "magnitude (rescale them)"
        )
    return number


# ---- tagged (token classification) readers ----------------------------------------------------
def read_conll(path: str | os.PathLike) -> list[TaggedExample]:
    """Reads CoNLL-style ``word ... tag`` lines (blank line between sentences, ``-DOCSTART-``
    skipped; word = first column, tag = last) or, for ``.jsonl``/``.json``, one
    ``{"words": [...], "tags": [...]}`` object per line. A file whose lines have one column
    (or whose objects have no ``tags``) gives ``tags=None``; mixing the two is an error."""
    path = os.fspath(path)
    name = os.path.basename(path)
    if os.path.splitext(path)[1].lower() in (".jsonl", ".json"):
        return _read_tagged_jsonl(path, name)
    examples: list[TaggedExample] = []
    width = None  # the column count of the first token line; every line must match it
    words: list[str] = []
    tags: list[str] = []
    start = 0

    def flush():
        if words:
            examples.append(
                TaggedExample(f"{name}:{start}", list(words), list(tags) if width > 1 else None)
            )
        words.clear()
        tags.clear()

    for line, raw in enumerate(text_lines(path), 1):
        cols = raw.split()
        if not cols:
            flush()
            continue
        if cols[0] == "-DOCSTART-":
            flush()
            continue
        if width is None:
            width = len(cols)
        elif len(cols) != width:
            raise DataError(f"{name}:{line}: {len(cols)} column(s) but earlier lines have {width}")
        if not words:
            start = line
        words.append(cols[0])
        if width > 1:
            tags.append(cols[-1])
    flush()
    return examples


def _read_tagged_jsonl(path: str, name: str) -> list[TaggedExample]:
    return _tagged(((f"{name}:{line}", rec) for line, rec in _json_records(path, name)))


def read_tagged_table(
    ref: str, words: str = "words", tags: str = "tags", data_dir: str = ""
) -> list[TaggedExample]:
    """The rows of a parquet / arrow file or an ``hf:`` / ``tfds:`` reference
    (`albert_jax.data.tables`) as tagged sentences: a list of words in column ``words`` and,
    where the table has column ``tags``, a tag per word (class ids read as their names)."""
    table = tables.open_table(ref, data_dir)
    table.require({"words": words})
    with_tags = tags in table.columns
    return _tagged(table.rows(), words, tags if with_tags else "")


def _tagged(records, words_key: str = "words", tags_key: str = "tags") -> list[TaggedExample]:
    examples = []
    with_tags = None
    for where, rec in records:
        words, tags = rec.get(words_key), rec.get(tags_key) if tags_key else None
        if not _str_list(words) or not words:
            raise DataError(f"{where}: {words_key!r} must be a non-empty list of strings")
        if with_tags is None:
            with_tags = tags is not None
        elif with_tags != (tags is not None):
            raise DataError(f"{where}: some records have {tags_key!r} and some do not")
        if tags is not None:
            if not _str_list(tags):
                raise DataError(f"{where}: {tags_key!r} must be a list of strings")
            if len(tags) != len(words):
                raise DataError(f"{where}: {len(words)} words but {len(tags)} tags")
        bad = [w for w in words if not w.strip()]
        if bad:
            raise DataError(f"{where}: empty or whitespace-only word(s)")
        examples.append(TaggedExample(where, list(words), list(tags) if tags is not None else None))
    return examples


def _str_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# ---- label sets -------------------------------------------------------------------------------
def _labels_of(example) -> Iterable:
    if isinstance(example, TaggedExample):
        return example.tags or ()
    return () if example.label is None else (example.label,)


def label_list(examples: Iterable[Example | TaggedExample]) -> list[str]:
    """Sorted unique labels (classification) or tags (tagging); unlabelled examples add none."""
    return sorted({str(lab) for ex in examples for lab in _labels_of(ex)})


def check_labels(examples: Iterable[Example | TaggedExample], labels: Sequence[str]) -> None:
    """Raises a DataError at the first example whose label / tag is not in ``labels``."""
    known = set(labels)
    for ex in examples:
        for lab in _labels_of(ex):
            if lab not in known:
                raise DataError(f"{ex.where}: unknown label {lab!r}; known labels: {list(labels)}")


# ---- featurizers ------------------------------------------------------------------------------
def _special_ids(tokenizer) -> tuple[int, int, int, int]:
    """[CLS], [SEP], pad and unk ids, for both SentencePiece and WordPiece tokenizers."""
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    special = tokenizer.special_ids()
    # SentencePiece names them <pad>/<unk> (pad_id()/unk_id()); WordPiece [PAD]/[UNK].
    pad_id = special.get("<pad>", special.get("[PAD]", -1))
    unk_id = special.get("<unk>", special.get("[UNK]", -1))
    if unk_id < 0:
        raise ValueError("the tokenizer has no unknown-token id")
    if unk_id in (cls_id, sep_id):
        raise ValueError("the tokenizer has no [CLS] / [SEP] symbols (they map to unk)")
    if pad_id < 0:
        pad_id = 0  # a vocab without a pad symbol: any id works, padding is masked out
    return cls_id, sep_id, pad_id, unk_id


def _truncate_pair(a: list[int], b: list[int], max_len: int) -> bool:
    """Cuts the longer sequence one token at a time (the reference ``_truncate_seq_pair``:
    on a tie the second one loses a token). Returns whether anything was cut."""
    cut = False
    while len(a) + len(b) > max_len:
        (a if len(a) > len(b) else b).pop()
        cut = True
    return cut


def featurize_classification(
    examples: Sequence[Example],
    tokenizer,
    max_seq_length: int,
    labels: Sequence[str] | None,
) -> tuple[dict[str, np.ndarray], dict]:
    """``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` arrays of length ``max_seq_length``.

    ``labels`` is the class list (``label`` = index into it, int32) or None for regression
    (``label`` float32). ``label`` is left out when no example has one; mixing labelled and
    unlabelled examples is an error.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    cls_id, sep_id, pad_id, _ = _special_ids(tokenizer)
    n, T = len(examples), max_seq_length
    input_ids = np.full((n, T), pad_id, np.int32)
    token_type_ids = np.zeros((n, T), np.int32)
    attention_mask = np.zeros((n, T), np.int32)
    labelled = [ex.label is not None for ex in examples]
    if any(labelled) and not all(labelled):
        ex = examples[labelled.index(False)]
        raise DataError(f"{ex.where}: no label, but other examples have one")
    if labels is not None and any(labelled):
        check_labels(examples, labels)
    index = {lab: i for i, lab in enumerate(labels or ())}
    label_out = []
    truncated = longest = 0
    for row, ex in enumerate(examples):
        a = tokenizer.encode(ex.text_a)
        b = tokenizer.encode(ex.text_b) if ex.text_b is not None else None
        longest = max(longest, len(a) + (len(b) if b is not None else 0))
        if b is None:
            cut = len(a) > T - 2
            a = a[: T - 2]
            ids = [cls_id, *a, sep_id]
            types = [0] * len(ids)
        else:
            cut = _truncate_pair(a, b, T - 3)
            ids = [cls_id, *a, sep_id, *b, sep_id]
            types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        truncated += cut
        input_ids[row, : len(ids)] = ids
        token_type_ids[row, : len(ids)] = types
        attention_mask[row, : len(ids)] = 1
        if ex.label is not None:
            label_out.append(index[ex.label] if labels is not None else float(ex.label))
    features = {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
    }
    if label_out:
        features["label"] = np.asarray(label_out, np.int32 if labels is not None else np.float32)
    stats = {"examples": n, "truncated": truncated, "longest_pieces": longest}
    return features, stats


def word_pieces(tokenizer, word: str, space_between_words: bool) -> list[int]:
    """Ids of one word tokenized on its own; never empty (unk for a word with no pieces).

    SentencePiece prepends the word-start marker to any text it encodes. For languages written
    without spaces (Chinese) the model saw whole sentences, so inside a sentence a word is
    normally *not* preceded by the marker: drop a lone leading marker and, when ``▁xyz`` starts
    the word and ``xyz`` is a vocabulary piece, use ``xyz``.
    """
    pieces = tokenizer.tokenize(word)
    if not space_between_words and isinstance(tokenizer, SentencePieceTokenizer) and pieces:
        if pieces[0] == SPIECE_UNDERLINE:
            pieces = pieces[1:]
        elif pieces[0].startswith(SPIECE_UNDERLINE):
            bare = pieces[0][len(SPIECE_UNDERLINE) :]
            if tokenizer.sp.piece_to_id(bare) != tokenizer.sp.unk_id():
                pieces = [bare, *pieces[1:]]
    ids = tokenizer.convert_tokens_to_ids(pieces)
    return ids or [_special_ids(tokenizer)[3]]


def featurize_tagging(
    examples: Sequence[TaggedExample],
    tokenizer,
    max_seq_length: int,
    labels: Sequence[str],
    space_between_words: bool,
) -> tuple[dict[str, np.ndarray], dict]:
    """``[CLS] pieces... [SEP]`` arrays where only the first piece of each word is labelled.

    ``labels`` [N, T]: the tag index at each word's first piece, -1 elsewhere (other pieces,
    [CLS]/[SEP], padding); left out when the examples have no tags. ``word_ids`` [N, T]: the
    index of the word whose first piece sits there, -1 elsewhere, so predictions map back to
    words. Words that do not fit whole are dropped (counted in ``words_dropped``); the caller
    predicts its default tag for them.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    cls_id, sep_id, pad_id, _ = _special_ids(tokenizer)
    tagged = [ex.tags is not None for ex in examples]
    if any(tagged) and not all(tagged):
        ex = examples[tagged.index(False)]
        raise DataError(f"{ex.where}: no tags, but other examples have them")
    if any(tagged):
        check_labels(examples, labels)
    index = {lab: i for i, lab in enumerate(labels)}
    n, T = len(examples), max_seq_length
    input_ids = np.full((n, T), pad_id, np.int32)
    attention_mask = np.zeros((n, T), np.int32)
    label_ids = np.full((n, T), IGNORE, np.int32)
    word_ids = np.full((n, T), IGNORE, np.int32)
    cache: dict[str, list[int]] = {}  # corpora repeat words a lot; tokenizing is the slow part
    truncated = dropped = 0
    for row, ex in enumerate(examples):
        ids = [cls_id]
        for w, word in enumerate(ex.words):
            pieces = cache.get(word)
            if pieces is None:
                pieces = cache[word] = word_pieces(tokenizer, word, space_between_words)
            if len(ids) + len(pieces) > T - 1:
                truncated += 1
                dropped += len(ex.words) - w
                break
            word_ids[row, len(ids)] = w
            if ex.tags is not None:
                label_ids[row, len(ids)] = index[ex.tags[w]]
            ids.extend(pieces)
        ids.append(sep_id)
        input_ids[row, : len(ids)] = ids
        attention_mask[row, : len(ids)] = 1
    features = {
        "input_ids": input_ids,
        "token_type_ids": np.zeros((n, T), np.int32),
        "attention_mask": attention_mask,
        "word_ids": word_ids,
    }
    if any(tagged):
        features["labels"] = label_ids
    stats = {"examples": n, "truncated": truncated, "words_dropped": dropped}
    return features, stats
