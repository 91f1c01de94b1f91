"""Grain pipeline: documents -> process shard -> epoch shuffle -> instances -> masking -> batch.

Design (why the stream is a pure function of (seed, epoch, position)):

* The source is the tokenized corpus (``tfds`` ArrayRecord data source, random access).
  Process ``p`` of ``P`` owns the contiguous document range ``[N*p//P, N*(p+1)//P)``: disjoint
  shards whose union is the split.
* Element ``j`` of the (endless) index stream is block ``j % m`` of ``docs_per_element``
  consecutive documents of ``perm_e`` in epoch ``e = j // m`` (``m`` blocks per epoch), where
  ``perm_e`` is a permutation of the shard drawn from ``(seed, epoch, process_index)``. Blocks of
  a few documents amortise grain's per-element cost (worker state, queue, pickling).
* A document produces a variable number of instances (as the reference does). They are made by
  ``DocumentExamples`` from generators seeded with ``(seed, epoch, doc_id)`` (pair creation) and
  ``(seed, epoch, doc_id, k)`` (masking of instance ``k``), so every example depends only on the
  seed, the epoch and where it sits; a random-document ``B`` is drawn from the whole split.
* That per-document map runs in the grain workers (``mp_prefetch`` slices by element index and
  interleaves round-robin, so each worker gets whole blocks and the output order is the same
  for any worker count). The flattening into examples and the batching run after
  ``mp_prefetch`` in the main process, so a variable fan-out never changes the order.
* A window shuffle over ``shuffle_window`` examples (main process, seeded) breaks up runs of
  examples from one document, the streaming counterpart of the reference's final shuffle.
* Grain's flat-map and window-shuffle iterators checkpoint (parent state before the current
  document / window, plus the offset inside it), so ``get_state``/``set_state`` resume with
  exactly the next example.

No JAX ops anywhere: everything is NumPy, so workers never touch an accelerator.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import threading
import time

import grain
import numpy as np

from albert_jax.data.pretraining import corpus, masking, pairs
from albert_jax.data.pretraining.config import DataConfig
from albert_jax.data.pretraining.corpus import (  # re-exported
    DataConfigError,
    corpus_tokenizer,
    resolve_paths,
)
from albert_jax.text.tokenization import CLS_ID, MASK_ID, PAD_ID, SEP_ID, pretraining_ids

_PERM_STREAM, _PAIR_STREAM, _MASK_STREAM = 0, 1, 2

TRAIN_FIELDS = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "sentence_order_label",
)


def check_config(data_config, process_count: int = 1) -> int:
    """Validates the data config; returns the per-process batch size."""
    d = DataConfig.from_config(data_config)
    gb = int(d.global_batch_size)
    if process_count < 1:
        raise DataConfigError(f"process_count must be >= 1, got {process_count}")
    if gb < 1 or gb % process_count:
        raise DataConfigError(
            f"global_batch_size={gb} must be a positive multiple of process_count={process_count}"
        )
    if d.max_seq_length < 5:
        raise DataConfigError(f"max_seq_length must be >= 5, got {d.max_seq_length}")
    if d.max_predictions < 1:
        raise DataConfigError(f"max_predictions must be >= 1, got {d.max_predictions}")
    if not 0.0 < d.masked_lm_prob < 1.0:
        raise DataConfigError(f"masked_lm_prob must be in (0, 1), got {d.masked_lm_prob}")
    if not 0.0 <= d.short_seq_prob <= 1.0:
        raise DataConfigError(f"short_seq_prob must be in [0, 1], got {d.short_seq_prob}")
    if d.mode not in pairs.MODES:
        raise DataConfigError(f"mode must be one of {pairs.MODES}, got {d.mode!r}")
    if d.single_segment not in pairs.SINGLE_SEGMENT:
        raise DataConfigError(f"single_segment must be one of {pairs.SINGLE_SEGMENT}")
    return gb // process_count


def check_positions(data_config, model_config) -> None:
    """Sequences must fit the model's position table (else the first step fails, after the
    corpus build)."""
    length = DataConfig.from_config(data_config).max_seq_length
    positions = model_config.max_position_embeddings
    if length > positions:
        raise DataConfigError(
            f"data.max_seq_length ({length}) is longer than the model's position table "
            f"(model.max_position_embeddings {positions})"
        )


def small_split_error(data_config, split: str, batch_size: int) -> DataConfigError:
    """The error for an evaluation split that fills no batch of `batch_size`."""
    docs = len(corpus.open_source(data_config, split))
    return DataConfigError(
        f"eval_split {split!r} of the {corpus.corpus_name(data_config)!r} corpus "
        f"({data_config.data_dir}) holds {docs} documents, fewer examples than one batch of "
        f"{batch_size}: give it more documents (e.g. --config.eval_split='train[95%:]') or turn "
        "evaluation off (--config.eval_every=0)"
    )


def shard_bounds(num_docs: int, process_index: int, process_count: int) -> tuple[int, int]:
    if not 0 <= process_index < process_count:
        raise DataConfigError(f"process_index {process_index} not in [0, {process_count})")
    lo = num_docs * process_index // process_count
    hi = num_docs * (process_index + 1) // process_count
    if hi <= lo:
        raise DataConfigError(
            f"process {process_index}/{process_count} gets no documents ({num_docs} in the split)"
        )
    return lo, hi


@dataclasses.dataclass(frozen=True)
class ExampleSpec:
    max_seq_length: int
    max_predictions: int
    masked_lm_prob: float
    short_seq_prob: float
    ngram: int
    favor_shorter_ngram: bool
    mode: str
    single_segment: str
    vocab_size: int
    seed: int
    debug: bool = False
    # The tokenizer's [CLS], [SEP], [MASK] and padding ids (defaults: ALBERT's SentencePiece).
    cls_id: int = CLS_ID
    sep_id: int = SEP_ID
    mask_id: int = MASK_ID
    pad_id: int = PAD_ID

    @classmethod
    def from_config(cls, data_config, tokenizer=None) -> ExampleSpec:
        d = DataConfig.from_config(data_config)
        ids = pretraining_ids(tokenizer) if tokenizer is not None else {}
        return cls(
            **{f"{k}_id": v for k, v in ids.items()},
            max_seq_length=int(d.max_seq_length),
            max_predictions=int(d.max_predictions),
            masked_lm_prob=float(d.masked_lm_prob),
            short_seq_prob=float(d.short_seq_prob),
            ngram=int(d.ngram),
            favor_shorter_ngram=bool(d.favor_shorter_ngram),
            mode=str(d.mode),
            single_segment=str(d.single_segment),
            vocab_size=int(tokenizer.vocab_size if tokenizer is not None else d.vocab_size),
            seed=int(d.seed),
            debug=bool(d.debug),
        )


def _document(record) -> pairs.Document:
    ids = np.asarray(record["ids"], np.int32)
    starts = np.asarray(record["word_starts"], np.bool_)
    lengths = np.asarray(record["sentence_lengths"], np.int64)
    if (
        len(lengths) == 0
        or lengths.min() < 1
        or lengths.sum() != len(ids)
        or len(starts) != len(ids)
    ):
        raise corpus.CorpusError(f"malformed document record: sentence lengths {lengths}")
    ends = np.cumsum(lengths).tolist()
    begins = [0, *ends[:-1]]
    return (
        [ids[b:e] for b, e in zip(begins, ends, strict=True)],
        [starts[b:e] for b, e in zip(begins, ends, strict=True)],
    )


def finalize(
    inst: pairs.Instance, spec: ExampleSpec, rng: np.random.Generator, probs
) -> dict[str, np.ndarray]:
    """Masks an instance and pads it to the fixed output shapes."""
    S, P = spec.max_seq_length, spec.max_predictions
    n = len(inst.tokens)
    special = np.zeros(n, np.bool_)
    at = [0, inst.len_a + 1, n - 1]  # [CLS], middle [SEP], final [SEP]
    special[at] = True
    tokens = inst.tokens
    if (spec.cls_id, spec.sep_id) != (CLS_ID, SEP_ID):  # this tokenizer's ids, not ALBERT's
        tokens = tokens.copy()
        tokens[at] = (spec.cls_id, spec.sep_id, spec.sep_id)
    m = masking.mask_tokens(
        tokens,
        inst.token_boundary,
        special,
        rng,
        vocab_size=spec.vocab_size,
        max_predictions=P,
        masked_lm_prob=spec.masked_lm_prob,
        ngram=spec.ngram,
        favor_shorter_ngram=spec.favor_shorter_ngram,
        probs=probs,
        mask_id=spec.mask_id,
    )
    k = len(m.positions)
    ex = {
        "input_ids": np.full(S, spec.pad_id, np.int32),
        "input_mask": np.zeros(S, np.int32),
        "segment_ids": np.zeros(S, np.int32),
        "masked_lm_positions": np.zeros(P, np.int32),
        "masked_lm_ids": np.zeros(P, np.int32),
        "masked_lm_weights": np.zeros(P, np.float32),
        "sentence_order_label": np.int32(inst.label),
    }
    ex["input_ids"][:n] = m.input_ids
    ex["input_mask"][:n] = 1
    ex["segment_ids"][:n] = inst.segment_ids
    ex["masked_lm_positions"][:k] = m.positions
    ex["masked_lm_ids"][:k] = m.labels
    ex["masked_lm_weights"][:k] = 1.0
    if spec.debug:
        tb = np.zeros(S, np.bool_)
        tb[:n] = inst.token_boundary
        span_counts = np.bincount(m.span_words, minlength=spec.ngram + 1)[1:].astype(np.int32)
        ex.update(
            token_boundary=tb,
            original_ids=np.pad(tokens, (0, S - n), constant_values=spec.pad_id),
            length=np.int32(n),
            len_a=np.int32(inst.len_a),
            num_masked=np.int32(k),
            budget=np.int32(m.budget),
            span_counts=span_counts,
            short_target=np.bool_(inst.short_target),
            target_length=np.int32(inst.target_length),
            num_chunk_segments=np.int32(inst.num_chunk_segments),
            random_doc=np.bool_(inst.random_doc),
            swapped=np.bool_(inst.swapped),
        )
    return ex


class DocumentExamples(grain.experimental.MapWithIndexTransform):
    """Index of the endless document stream -> that document's examples, stacked per field."""

    def __init__(
        self,
        source,
        spec: ExampleSpec,
        lo: int,
        hi: int,
        process_index: int,
        docs_per_element: int = 1,
    ):
        if docs_per_element < 1:
            raise DataConfigError(f"docs_per_element must be >= 1, got {docs_per_element}")
        self.docs_per_element = int(docs_per_element)
        self.source = source
        self.spec = spec
        self.lo, self.hi = lo, hi
        self.num_docs = len(source)
        self.process_index = process_index
        self.probs = masking.ngram_probs(spec.ngram, spec.favor_shorter_ngram)

    @functools.lru_cache(maxsize=2)  # noqa: B019 - one instance per pipeline, tiny cache
    def _perm(self, epoch: int) -> np.ndarray:
        rng = np.random.default_rng([self.spec.seed, _PERM_STREAM, epoch, self.process_index])
        return self.lo + rng.permutation(self.hi - self.lo)

    def _get(self, doc_id: int) -> pairs.Document:
        return _document(self.source[int(doc_id)])

    @property
    def num_blocks(self) -> int:
        return -(-(self.hi - self.lo) // self.docs_per_element)

    def locate(self, index: int) -> tuple[int, list[int]]:
        """(epoch, document ids) of element ``index`` of the endless stream."""
        epoch, block = divmod(int(index), self.num_blocks)
        b = self.docs_per_element
        return epoch, self._perm(epoch)[block * b : (block + 1) * b].tolist()

    def document_examples(self, epoch: int, doc_id: int) -> list[dict[str, np.ndarray]]:
        spec = self.spec
        rng = np.random.default_rng([spec.seed, _PAIR_STREAM, epoch, doc_id])
        insts = pairs.create_instances(
            self._get(doc_id),
            doc_id,
            self.num_docs,
            self._get,
            rng,
            max_seq_length=spec.max_seq_length,
            short_seq_prob=spec.short_seq_prob,
            mode=spec.mode,
            single_segment=spec.single_segment,
        )
        out = []
        for k, inst in enumerate(insts):
            mrng = np.random.default_rng([spec.seed, _MASK_STREAM, epoch, doc_id, k])
            ex = finalize(inst, spec, mrng, self.probs)
            if spec.debug:
                ex.update(doc_id=np.int64(doc_id), instance_index=np.int32(k))
                ex["epoch"] = np.int32(epoch)
            out.append(ex)
        return out

    def map_with_index(self, index: int, element) -> dict[str, np.ndarray]:
        del element
        epoch, doc_ids = self.locate(index)
        out = [ex for doc_id in doc_ids for ex in self.document_examples(epoch, doc_id)]
        # One array per field (leading axis: examples) keeps the worker->main transfer cheap.
        return {key: np.stack([ex[key] for ex in out]) for key in out[0]}


class _Flatten(grain.experimental.FlatMapTransform):
    max_fan_out = 1 << 20

    def flat_map(self, element):
        n = len(element["input_ids"])
        return [{key: value[i] for key, value in element.items()} for i in range(n)]


class _WindowShuffleIterator(grain.DatasetIterator):
    """Shuffles consecutive windows of ``window`` elements with a permutation drawn from
    (seed, window index). State: parent state at the window start + position in the window."""

    def __init__(self, parent, window: int, seed: int):
        super().__init__(parent)
        self._window_size = window
        self._seed = seed
        self._index = 0
        self._pos = 0
        self._buf: list = []
        self._start_state = self._parent.get_state()

    def _fill(self):
        self._start_state = self._parent.get_state()
        items = []
        for _ in range(self._window_size):
            try:
                items.append(next(self._parent))
            except StopIteration:
                break
        perm = np.random.default_rng([self._seed, self._index]).permutation(len(items))
        self._buf = [items[i] for i in perm.tolist()]
        self._pos = 0

    def __next__(self):
        if self._pos >= len(self._buf):
            if self._buf:
                self._index += 1
            self._fill()
            if not self._buf:
                raise StopIteration
        item = self._buf[self._pos]
        self._buf[self._pos] = None
        self._pos += 1
        return item

    def get_state(self):
        return {"parent": self._start_state, "index": self._index, "pos": self._pos}

    def set_state(self, state):
        self._parent.set_state(state["parent"])
        self._index = int(state["index"])
        self._fill()
        self._pos = int(state["pos"])


class _WindowShuffle(grain.IterDataset):
    def __init__(self, parent, window: int, seed: int):
        super().__init__(parent)
        self._window_size = window
        self._seed = seed

    def __iter__(self):
        return _WindowShuffleIterator(self._parent.__iter__(), self._window_size, self._seed)


def make_dataset(
    data_config,
    split: str = "train",
    process_index: int = 0,
    process_count: int = 1,
    *,
    source=None,
    worker_count: int | None = None,
    num_epochs: int | None = None,
    model_vocab_size: int | None = None,
    check_tokenizer: bool = True,
) -> grain.IterDataset:
    """Batched per-process dataset: ``global_batch_size // process_count`` examples per step.

    ``data_config`` paths must be resolved (``resolve_paths``). ``source`` overrides the corpus
    (any random-access sequence of document records). ``num_epochs=None`` repeats forever.
    """
    d = DataConfig.from_config(data_config)
    per_process = check_config(data_config, process_count)
    tok = corpus_tokenizer(data_config, model_vocab_size) if check_tokenizer else None
    if source is None:
        source = corpus.open_source(data_config, split)
    num_docs = len(source)
    if num_docs == 0:
        name = corpus.corpus_name(data_config)
        raise DataConfigError(f"split {split!r} of the {name!r} corpus ({d.data_dir}) is empty")
    lo, hi = shard_bounds(num_docs, process_index, process_count)
    spec = ExampleSpec.from_config(data_config, tok)
    docs = DocumentExamples(source, spec, lo, hi, process_index, int(d.docs_per_element))
    ds = grain.MapDataset.range(docs.num_blocks).repeat(num_epochs)
    ds = ds.map_with_index(docs)
    # The per-document work is GIL-bound NumPy: it is parallelized by worker processes
    # (`worker_count`, each with its own buffer), not by grain threads, and the trainer puts the
    # next batch on device while the step before runs (`albert_jax.train.prefetch`).
    ds = ds.to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=0))
    workers = int(d.worker_count if worker_count is None else worker_count)
    if workers > 0:
        ds = ds.mp_prefetch(
            grain.MultiprocessingOptions(
                num_workers=workers, per_worker_buffer_size=int(d.worker_buffer_size)
            ),
            worker_init_fn=_exit_with_parent,
        )
        # Per-element arrays (a few documents of examples) are small: pickling beats one
        # shared-memory block per array.
        ds = grain.experimental.WithOptionsIterDataset(
            ds, grain.experimental.DatasetOptions(min_shm_size=1 << 22)
        )
    ds = grain.experimental.FlatMapIterDataset(ds, _Flatten())
    window = int(d.shuffle_window)
    if window > 1:
        # Own window shuffle: grain's draws one index_shuffle call per element (~0.1 ms).
        ds = _WindowShuffle(ds, window, int(d.seed) * 1009 + process_index)
    return ds.batch(per_process, drop_remainder=True)


def _exit_with_parent(worker_index: int, worker_count: int) -> None:
    """In each grain worker: exit when the trainer that started it is gone. A trainer killed
    with SIGKILL cannot stop its workers, and orphans would keep the corpus files open, their
    memory and (for a caller reading the trainer's output) its pipes, for good."""
    del worker_index, worker_count
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def make_iterator(data_config, split="train", process_index=0, process_count=1, **kwargs):
    """``iter(make_dataset(...))``: a grain ``DatasetIterator`` with ``get_state``/``set_state``."""
    return iter(make_dataset(data_config, split, process_index, process_count, **kwargs))


def state_to_json(state) -> str:
    """Iterator state as JSON text (grain states are plain dicts of ints/strings/bytes)."""

    def enc(x):
        if isinstance(x, bytes):
            return {"__bytes__": x.hex()}
        if isinstance(x, dict):
            return {k: enc(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [enc(v) for v in x]
        if isinstance(x, np.integer):
            return int(x)
        return x

    return json.dumps(enc(state))


def state_from_json(text: str):
    def dec(x):
        if isinstance(x, dict):
            if set(x) == {"__bytes__"}:
                return bytes.fromhex(x["__bytes__"])
            return {k: dec(v) for k, v in x.items()}
        if isinstance(x, list):
            return [dec(v) for v in x]
        return x

    return dec(json.loads(text))


__all__ = [
    "DataConfigError",
    "DocumentExamples",
    "ExampleSpec",
    "TRAIN_FIELDS",
    "check_config",
    "corpus_tokenizer",
    "make_dataset",
    "make_iterator",
    "resolve_paths",
    "shard_bounds",
    "state_from_json",
    "state_to_json",
]
