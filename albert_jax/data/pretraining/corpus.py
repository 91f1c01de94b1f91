"""The tokenized corpus: a TFDS builder that tokenizes the documents once (``documents`` reads
them; tokenizing runs in worker processes and resumes after an interruption, ``parallel``), the
corpus tokenizer (trained on the input, or copied from ``tokenizer_model`` or the checkpoint
continued pretraining starts from: ``ensure_tokenizer``), and the data config's paths
(``resolve_paths``) and tokenizer (``corpus_tokenizer``).

On disk each document is ``ids`` (int32, all sentences concatenated), ``sentence_lengths``
(int32) and ``word_starts`` (bool, whole-word start flag per token), so it round-trips exactly,
plus ``doc_index`` (its position in the input). TFDS stores records in a key-hashed shuffled
order; we keep that, so the contiguous per-process shards mix all input files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os

import numpy as np
from etils import epath

from albert_jax import paths
from albert_jax.data import tables
from albert_jax.data.pretraining import parallel
from albert_jax.data.pretraining.config import DataConfig
from albert_jax.data.pretraining.documents import (
    CorpusError,
    CorpusStats,
    auto_corpus_name,
    input_patterns,
    read_documents,
    split_format,
)
from albert_jax.errors import InputError
from albert_jax.text.tokenization import (
    META_FILE,
    MODEL_FILE,
    load_tokenizer,
    pretraining_ids,
    read_tokenizer,
    save_tokenizer,
    train_sentencepiece,
)
from albert_jax.text.wordpiece import VOCAB_FILE

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# The data config: paths and tokenizer
# --------------------------------------------------------------------------------------------
class DataConfigError(InputError):
    """A data configuration that cannot work."""


def resolve_paths(data_config, workdir: str | None = None):
    """Copy of ``data_config`` with ``data_dir`` made absolute (relative to ``workdir`` or the
    current directory), ``tokenizer_dir`` / ``tfds_data_dir`` relative to ``data_dir``, the input
    files a list of absolute patterns (relative to the current directory, as a shell would take
    them) and an empty ``corpus_name`` named from them (``corpus.auto_corpus_name``)."""
    cfg = data_config.copy_and_resolve_references()
    given = DataConfig.from_config(cfg)
    with cfg.unlocked():
        cfg.data_dir = paths.resolve(given.data_dir, workdir)
        cfg.tokenizer_dir = paths.resolve(given.tokenizer_dir, cfg.data_dir)
        files = []
        for p in input_patterns(given.input_files):
            fmt, path = split_format(p)
            if tables.is_reference(path):  # a dataset (hf:..., tfds:...): as given
                files.append(path)
                continue
            files.append(f"{fmt}:{paths.resolve(path)}" if fmt else paths.resolve(path))
        if "input_files" in cfg:
            del cfg["input_files"]  # the field may hold a string (a command-line value)
        cfg.input_files = files
        if not given.corpus_name:
            cfg.corpus_name = auto_corpus_name(cfg)
        if given.tfds_data_dir:
            cfg.tfds_data_dir = paths.resolve(given.tfds_data_dir, cfg.data_dir)
    return cfg


def corpus_tokenizer(data_config, model_vocab_size: int | None = None):
    """The corpus tokenizer (SentencePiece or WordPiece) in ``data.tokenizer_dir``, checked for
    the symbols pretraining needs and against the configured vocab sizes. With
    ``data.hard_vocab_limit=False`` SentencePiece may have stopped below ``data.vocab_size``; the
    model then keeps ``vocab_size`` rows, the ones past the tokenizer's never used."""
    d = DataConfig.from_config(data_config)
    where = d.tokenizer_dir
    tok = load_tokenizer(where, strict=False)
    pretraining_ids(tok)
    want = int(d.vocab_size)
    soft = not d.hard_vocab_limit
    if tok.vocab_size != want and not (soft and tok.vocab_size < want):
        raise DataConfigError(
            f"tokenizer at {where} has {tok.vocab_size} pieces but data.vocab_size={want}: "
            f"set --config.data.vocab_size={tok.vocab_size}"
        )
    if model_vocab_size is not None and not soft:
        tok.check_vocab_size(model_vocab_size)
    return tok


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
    return str(DataConfig.from_config(data_config).corpus_name or auto_corpus_name(data_config))


def make_builder(data_config):
    """The TFDS builder for a ``data`` ConfigDict (see ``configs/pretrain/cpu_small.py``)."""
    config_cls, builder_cls = builder_classes()
    d = DataConfig.from_config(data_config)
    cfg = config_cls(
        name=corpus_name(data_config),
        input_files=tuple(input_patterns(d.input_files)),
        input_format=d.input_format,
        text_field=d.text_field,
        tokenizer_dir=str(d.tokenizer_dir),
        max_sentence_tokens=int(d.max_sentence_tokens),
        on_invalid_utf8=d.on_invalid_utf8,
        tfds_name=d.tfds_name,
        tfds_split=d.tfds_split,
        tfds_data_dir=d.tfds_data_dir or None,
        processes=int(d.prepare_processes),
        parts_dir=paths.join(d.data_dir, "parts", corpus_name(data_config)),
    )
    return builder_cls(config=cfg, data_dir=str(d.data_dir), file_format="array_record")


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


def _provenance(d: DataConfig) -> dict:
    """What an automatically trained tokenizer was trained on and with (kept in its
    tokenizer.json so that a workdir reused with other inputs cannot silently keep it)."""
    return {
        "input_files": input_patterns(d.input_files),
        "input_format": d.input_format,
        "vocab_size": int(d.vocab_size),
        "lower_case": bool(d.lower_case),
        "mode": d.tokenizer_mode,
        **({"type": d.tokenizer_type} if d.tokenizer_type != "unigram" else {}),
    }


def ensure_tokenizer(data_config, tokenizer=None, source: str = "") -> bool:
    """Puts the corpus tokenizer in ``data.tokenizer_dir`` if it is not there: a copy of
    ``data.tokenizer_model`` when that is set, else ``tokenizer`` (the one of the checkpoint at
    ``source`` that continued pretraining starts from), else one trained on the configured input.
    Returns True if it trained one. A tokenizer already there must be the one asked for."""
    d = DataConfig.from_config(data_config)
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
    if d.tokenizer_model or tokenizer is not None:
        given = d.tokenizer_model
        src = paths.resolve(given) if given else source
        if present:
            if meta.get("source") != src:
                raise CorpusError(
                    f"{where} holds a tokenizer from {meta.get('source') or 'training'}, not "
                    f"data.tokenizer_model={src}: {fix}"
                )
            return False
        mode = d.tokenizer_mode
        tok = read_tokenizer(src, lower_case=bool(d.lower_case), mode=mode) if given else tokenizer
        save_tokenizer(tok, where, extra_meta={"source": src})
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
        text_field=d.text_field,
        on_invalid_utf8=d.on_invalid_utf8,
        tfds_name=d.tfds_name,
        tfds_split=d.tfds_split,
        tfds_data_dir=d.tfds_data_dir or None,
    )
    train_sentencepiece(
        (s for doc in docs for s in doc),
        where,
        vocab_size=int(d.vocab_size),
        character_coverage=float(d.character_coverage),
        lower_case=bool(d.lower_case),
        mode=d.tokenizer_mode,
        model_type=d.tokenizer_type,
        hard_vocab_limit=bool(d.hard_vocab_limit),
        extra_meta={"trained_on": _provenance(d)},  # where it came from, checked on reuse
    )
    return True


def build(data_config, train_tokenizer: bool = True, tokenizer=None, source: str = "") -> dict:
    """Tokenizer (if missing and allowed; see ``ensure_tokenizer``) + checks + corpus; a summary
    dict. Paths resolved."""
    trained = ensure_tokenizer(data_config, tokenizer, source) if train_tokenizer else False
    corpus_tokenizer(data_config)  # conventions + vocab size, before spending time on the corpus
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
