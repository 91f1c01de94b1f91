r"""Pretraining input pipeline throughput (examples/s per process), printed as JSON.

  python benchmarks/data_pipeline.py --config configs/pretrain/cpu_small.py
  python benchmarks/data_pipeline.py --config configs/pretrain/cpu_small.py --workers 0,1,2 \
      --seq_lengths 512 --max_predictions 77 --batches 40

Builds the tokenizer and corpus under ``data.data_dir`` first if they are missing. For each
(seq length, max_predictions, worker count) it starts a fresh iterator, discards ``--warmup``
batches (worker start-up), then times ``--batches`` batches. ``per_core`` divides by the number
of cores doing the example work: the worker count, or 1 for in-process (0 workers); the main
process only unpickles, flattens and batches.
"""

from __future__ import annotations

import json
import os
import sys
import time

from absl import app, flags
from ml_collections import config_flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from albert_jax.data.pretraining import corpus  # noqa: E402
from albert_jax.data.pretraining.pipeline import make_iterator, resolve_paths  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file (uses config.data).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Base for relative paths (default: cwd).")
_SEQ = flags.DEFINE_list("seq_lengths", ["128", "512"], "Sequence lengths.")
_MAXP = flags.DEFINE_list("max_predictions", ["20", "77"], "max_predictions values.")
_WORKERS = flags.DEFINE_list("workers", ["1", "2"], "Grain worker counts.")
_BATCHES = flags.DEFINE_integer("batches", 100, "Timed batches per setting.")
_WARMUP = flags.DEFINE_integer("warmup", 3, "Untimed batches per setting.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Per-process batch size.")


def measure(d, batches: int, warmup: int) -> dict:
    it = make_iterator(d)
    try:
        for _ in range(warmup):
            next(it)
        t0 = time.perf_counter()
        for _ in range(batches):
            next(it)
        dt = time.perf_counter() - t0
    finally:
        if hasattr(it, "close"):
            it.close()
    return {"examples_per_s": batches * int(d.global_batch_size) / dt, "seconds": dt}


def main(argv):
    del argv
    if _CONFIG.value is None:
        raise app.UsageError("--config is required")
    base = resolve_paths(_CONFIG.value.data, _WORKDIR.value)
    corpus.build(base)
    results = []
    for seq in map(int, _SEQ.value):
        for maxp in map(int, _MAXP.value):
            for workers in map(int, _WORKERS.value):
                d = base.copy_and_resolve_references()
                with d.unlocked():
                    d.max_seq_length = seq
                    d.max_predictions = maxp
                    d.worker_count = workers
                    d.global_batch_size = _BATCH.value
                    d.debug = False
                r = measure(d, _BATCHES.value, _WARMUP.value)
                r.update(
                    seq_length=seq,
                    max_predictions=maxp,
                    workers=workers,
                    per_core=r["examples_per_s"] / max(workers, 1),
                )
                r = {k: round(v, 1) if isinstance(v, float) else v for k, v in r.items()}
                results.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)
    print(
        json.dumps(
            {
                "benchmark": "data_pipeline",
                "cpu_count": os.cpu_count(),
                "batch_size": _BATCH.value,
                "batches": _BATCHES.value,
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    app.run(main)
