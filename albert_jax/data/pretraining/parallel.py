"""Tokenizing a corpus in worker processes, resumably (the TFDS builder in `corpus` calls it).

Documents are read in the main process and sent out in chunks of `CHUNK_DOCS`; worker processes
(spawned: the parent may hold JAX's threads) each keep a copy of the tokenizer, and the chunks
come back in input order, so the corpus is the same for any number of processes. Every
`PART_CHUNKS` chunks are saved as one part under the builder config's `parts_dir` (written
atomically, with a fingerprint of the inputs, settings and tokenizer); a build that was
interrupted reads its finished parts back instead of tokenizing them again.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import os

import numpy as np
from etils import epath

from albert_jax.data import tables
from albert_jax.data.pretraining.documents import (
    CorpusStats,
    expand_inputs,
    log,
    tokenize_documents,
)
from albert_jax.text.tokenization import META_FILE, load_tokenizer


def input_bytes(cfg) -> int | None:
    """Size of the raw input files (None for a TFDS input, or where a table is among them: its
    stored size is not the text's, which progress counts)."""
    if cfg.input_format == "tfds":
        return None
    files = expand_inputs(list(cfg.input_files))
    if any(tables.is_table(p) for p in files):
        return None
    return sum(epath.Path(p).stat().length for p in files)


CHUNK_DOCS = 256
_WORKER_TOKENIZER = None


def _worker_init(tokenizer_dir: str) -> None:
    global _WORKER_TOKENIZER
    _WORKER_TOKENIZER = load_tokenizer(tokenizer_dir, strict=False)


def _tokenize_chunk(args):
    docs, max_sentence_tokens = args
    stats = CorpusStats()
    records = list(
        tokenize_documents(
            iter(docs), _WORKER_TOKENIZER, max_sentence_tokens=max_sentence_tokens, stats=stats
        )
    )
    return records, stats


def _chunks(docs, stats: CorpusStats, size: int):
    """(chunk, raw bytes read up to its end) for each `size` documents."""
    chunk = []
    for doc in docs:
        chunk.append(doc)
        if len(chunk) == size:
            yield chunk, stats.bytes
            chunk = []
    if chunk:
        yield chunk, stats.bytes


def tokenize(docs, cfg, stats: CorpusStats, total_bytes: int | None = None):
    """Tokenized records of `docs` in input order, using `cfg.processes` worker processes (1: this
    process; 0: one per core, but at most one per 16 MB of input, as starting a worker costs about
    a second), with a progress bar over the raw input (MB, ETA).

    With `cfg.parts_dir`, every `PART_CHUNKS` chunks are also saved there as one part (written
    atomically); a build that was interrupted and is run again reads its finished parts back
    instead of tokenizing them (the input is still read, which is the cheap half)."""
    from tqdm import tqdm

    processes = int(cfg.processes)
    if processes == 0:
        by_size = -(-total_bytes // (16 * 2**20)) if total_bytes else os.cpu_count()
        processes = max(1, min(os.cpu_count() or 1, by_size))
    scale = 1 / 2**20
    bar = tqdm(
        total=None if total_bytes is None else round(total_bytes * scale, 1),
        unit="MB",
        desc=f"tokenizing ({processes} process{'es' if processes > 1 else ''})",
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} MB "
        "[{elapsed}<{remaining}, {rate_fmt}]"
        if total_bytes
        else None,
        mininterval=1.0,
    )
    pool = ctx = None
    if processes > 1:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        pool = ctx.Pool(processes, _worker_init, (cfg.tokenizer_dir,))
    else:
        _worker_init(cfg.tokenizer_dir)
    mst = int(cfg.max_sentence_tokens)
    done = 0.0

    def finish(job):
        nonlocal done
        result, mark = job
        records, chunk_stats = result.get() if pool is not None else result
        for f in dataclasses.fields(CorpusStats):
            if f.name not in ("lines", "invalid_utf8_lines", "bytes"):  # counted by the reader
                setattr(stats, f.name, getattr(stats, f.name) + getattr(chunk_stats, f.name))
        now = round(mark * scale, 1)
        bar.update(now - done)
        done = now
        return records

    def run(chunks):
        pending = collections.deque()  # at most 2 chunks per process in flight: bounded memory
        for chunk, mark in chunks:
            if pool is None:
                yield from finish((_tokenize_chunk((chunk, mst)), mark))
                continue
            pending.append((pool.apply_async(_tokenize_chunk, ((chunk, mst),)), mark))
            if len(pending) >= 2 * processes:
                yield from finish(pending.popleft())
        while pending:
            yield from finish(pending.popleft())

    parts = _Parts(cfg) if cfg.parts_dir else None
    try:
        chunks = _chunks(docs, stats, CHUNK_DOCS)
        if parts is None:
            yield from run(chunks)
            return
        for k in itertools.count():
            part = list(itertools.islice(chunks, PART_CHUNKS))
            if not part:
                break
            saved = parts.load(k)
            if saved is None:
                before = _token_stats(stats)
                records = list(run(part))
                after = _token_stats(stats)
                parts.save(k, records, {n: after[n] - before[n] for n in _TOKEN_STATS})
            else:
                records, part_stats = saved
                for name, value in part_stats.items():
                    setattr(stats, name, getattr(stats, name) + value)
                bar.update(round(part[-1][1] * scale, 1) - done)
                done = round(part[-1][1] * scale, 1)
            yield from records
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()


_TOKEN_STATS = ("documents", "empty_documents", "one_sentence_documents", "sentences",
                "empty_sentences", "long_sentences_split", "tokens")  # fmt: skip
PART_CHUNKS = 16  # chunks of CHUNK_DOCS documents per saved part


def _token_stats(stats: CorpusStats) -> dict[str, int]:
    return {k: getattr(stats, k) for k in _TOKEN_STATS}


class _Parts:
    """The finished parts of a corpus build: part-K.npz, the records of chunks 16K..16K+15 in
    order, and their share of the statistics. `fingerprint.json` names the inputs, settings and
    tokenizer they were made with; parts made with others are discarded, never reused."""

    def __init__(self, cfg):
        self.dir = cfg.parts_dir
        fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
        fields = {k: v for k, v in fields.items() if k in _FINGERPRINT_FIELDS}
        meta = epath.Path(cfg.tokenizer_dir, META_FILE)
        fields["tokenizer"] = meta.read_text() if meta.exists() else ""
        fingerprint = json.dumps(fields, sort_keys=True, default=str)
        path = epath.Path(self.dir, "fingerprint.json")
        if path.exists() and path.read_text() != fingerprint:
            log.warning("%s: parts of a build with other settings; discarded", self.dir)
            epath.Path(self.dir).rmtree()
        epath.Path(self.dir).mkdir(parents=True, exist_ok=True)
        path.write_text(fingerprint)

    def _path(self, k: int) -> epath.Path:
        return epath.Path(self.dir, f"part-{k:06d}.npz")

    def load(self, k: int):
        if not self._path(k).exists():
            return None
        with self._path(k).open("rb") as f, np.load(f) as z:
            part_stats = json.loads(str(z["stats"]))
            if not len(z["ids_len"]):
                return [], part_stats
            split = {n: np.split(z[n], np.cumsum(z[f"{n}_len"])[:-1]) for n in _RECORD_FIELDS}
        rows = zip(*split.values(), strict=True)
        return [dict(zip(_RECORD_FIELDS, r, strict=True)) for r in rows], part_stats

    def save(self, k: int, records: list[dict], part_stats: dict[str, int]) -> None:
        arrays = {"stats": np.asarray(json.dumps(part_stats))}
        for n, dtype in _RECORD_FIELDS.items():
            arrays[n] = np.concatenate([r[n] for r in records] or [np.zeros(0, dtype)])
            arrays[f"{n}_len"] = np.asarray([len(r[n]) for r in records], np.int64)
        tmp = self._path(k).with_suffix(".tmp")
        with tmp.open("wb") as f:
            np.savez(f, **arrays)
        tmp.replace(self._path(k))


_RECORD_FIELDS = {"ids": np.int32, "sentence_lengths": np.int32, "word_starts": np.bool_}
_FINGERPRINT_FIELDS = ("name", "input_files", "input_format", "text_field", "max_sentence_tokens",
                       "tfds_name", "tfds_split", "tfds_data_dir")  # fmt: skip
