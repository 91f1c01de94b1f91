"""Corpus preparation throughput: raw text -> tokenized ArrayRecord, with 1..N processes.

    python benchmarks/prepare_data.py --config configs/pretrain/cpu_small.py
    python benchmarks/prepare_data.py --config configs/pretrain/cpu_small.py --processes 1,2,4 \
        --repeat 8 --out prepare.json

Trains (or reuses) the config's tokenizer once in a scratch directory, then for each process count
times (a) tokenization alone (`albert_jax.data.pretraining.parallel.tokenize`, records discarded)
and (b) the whole build (`corpus.prepare`: tokenization + TFDS shuffling and ArrayRecord writing),
each into a fresh data directory. Reports MB/s and documents/s, per process, and the speed-up over
one process; checks that every process count writes the same documents. One JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ml_collections import config_flags  # noqa: E402
from report import emit  # noqa: E402 (benchmarks/report.py)

from albert_jax.data.pretraining import corpus, parallel  # noqa: E402
from albert_jax.data.pretraining.documents import formatted_files
from albert_jax.data.pretraining.pipeline import resolve_paths  # noqa: E402


def load_config(path: str):
    from absl import flags

    fv, argv = flags.FlagValues(), ["prog", f"--config={path}"]
    config_flags.DEFINE_config_file("config", None, "", flag_values=fv, sys_argv=argv)
    fv(argv)
    return fv.config


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/pretrain/cpu_small.py")
    parser.add_argument("--processes", default="1,2", help="comma-separated process counts")
    parser.add_argument(
        "--repeat", type=int, default=1, help="use the input files this many times over (size)"
    )
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args()
    counts = [int(x) for x in args.processes.split(",")]
    scratch = tempfile.mkdtemp(prefix="prepare_bench_")
    try:
        base = resolve_paths(load_config(args.config).data, scratch)
        corpus.ensure_tokenizer(base)
        inputs = base.input_files if base.input_format != "tfds" else []
        formatted = formatted_files(inputs, base.input_format)
        files = [f for _, f in formatted]
        if args.repeat > 1:  # a larger corpus: the same files (in their formats), copied
            copies, named = [], []
            for k in range(args.repeat):
                for i, (fmt, f) in enumerate(formatted):
                    copies.append(os.path.join(scratch, "input", f"{k}_{i}_{os.path.basename(f)}"))
                    os.makedirs(os.path.dirname(copies[-1]), exist_ok=True)
                    shutil.copyfile(f, copies[-1])
                    named.append(f"{fmt}:{copies[-1]}")
            files = copies
            with base.unlocked():
                base.input_files = named
        mb = sum(os.path.getsize(f) for f in files) / 2**20
        rows, sizes = [], set()
        for n in counts:
            d = base.copy_and_resolve_references()
            with d.unlocked():
                d.data_dir = os.path.join(scratch, f"data_{n}")
                d.prepare_processes = n
            cfg = corpus.make_builder(d).builder_config
            stats = corpus.CorpusStats()
            docs = corpus.read_documents(list(cfg.input_files), cfg.input_format, stats=stats)
            t = time.perf_counter()
            for _ in parallel.tokenize(docs, cfg, stats):
                pass
            tokenize_s = time.perf_counter() - t
            t = time.perf_counter()
            corpus.prepare(d)
            prepare_s = time.perf_counter() - t
            sizes.add(len(corpus.open_source(d)))
            rows.append(
                {
                    "processes": n,
                    "tokenize_s": round(tokenize_s, 2),
                    "prepare_s": round(prepare_s, 2),
                    "tokenize_mb_per_s": round(mb / tokenize_s, 3),
                    "prepare_mb_per_s": round(mb / prepare_s, 3),
                    "tokenize_docs_per_s": round(stats.documents / tokenize_s, 1),
                    "tokenize_mb_per_s_per_process": round(mb / tokenize_s / n, 3),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        one = next((r for r in rows if r["processes"] == 1), None)
        for r in rows:
            if one:
                r["tokenize_speedup"] = round(one["tokenize_s"] / r["tokenize_s"], 3)
                r["prepare_speedup"] = round(one["prepare_s"] / r["prepare_s"], 3)
        result = {
            "benchmark": "prepare_data",
            "config": args.config,
            "repeat": args.repeat,
            "input_mb": round(mb, 2),
            "documents": stats.documents,
            "same_documents_for_every_count": len(sizes) == 1,
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "rows": rows,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    emit(result, args.out)


if __name__ == "__main__":
    main()
