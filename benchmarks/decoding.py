"""Seq2seq decoding speed, generated tokens/s: greedy on device (`Decoder.greedy`, one jitted
while_loop, with the key/value cache), the host-side search with the cache (`beam_search`), and
the host-side search recomputing the whole sequence at every step (`Decoder(use_cache=False)`).

    python benchmarks/decoding.py                               # albert-base shape, random weights
    python benchmarks/decoding.py --preset albert-tiny --batch 32 --source 96 --new 32 --rounds 3
    python benchmarks/decoding.py --hidden 256 --heads 4 --ffn 1024 --layers 4 --embedding 128 \
        --vocab 6000 --batch 64 --source 96 --new 33 --searches device,cached --unroll  # CPU

Prints one JSON document. Every search runs for exactly `--new` tokens (no end token, so all do
the same number of steps) on the same random sources, after a warm-up call that compiles it;
rounds alternate between them (these machines are shared and noisy) and the median of each is
reported, with the ratios device / cached and cached / uncached (those measured). The generated
tokens are also compared: they must be identical. `device` runs only with --beam 1.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import jax
import numpy as np
from report import emit  # benchmarks/ on sys.path

from albert_jax import cli
from albert_jax.model import presets
from albert_jax.model.albert import init_params
from albert_jax.model.config import Execution
from albert_jax.model.decoding import Decoder, beam_search
from albert_jax.model.heads import AlbertForSeq2Seq

_SHAPE = {  # command-line flag: AlbertConfig field, to set a shape no preset has
    "hidden": "hidden_size", "heads": "num_heads", "ffn": "intermediate_size",
    "layers": "num_layers", "embedding": "embedding_size", "vocab": "vocab_size",
}  # fmt: skip


def main(argv=None):
    kept = cli.keep_freed_memory()  # host memory as the entry points have it
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="albert-base")
    p.add_argument("--layout", default="all", help="all | none | groups:G ...")
    for flag, key in _SHAPE.items():
        p.add_argument(f"--{flag}", type=int, default=None, help=f"{key} (default: the preset's)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--source", type=int, default=96, help="source length in pieces")
    p.add_argument("--new", type=int, default=32, help="tokens generated per example")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--unroll", action="store_true", help="layers unrolled (fine-tuning's CPU way)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--searches", default="device,cached,uncached", help="which to time")
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args(argv)

    shape = {key: getattr(args, flag) for flag, key in _SHAPE.items() if getattr(args, flag)}
    config = presets.get(args.preset, **shape).with_layout(args.layout)
    config = config.replace(max_position_embeddings=max(512, args.source + args.new))
    model = AlbertForSeq2Seq(config, Execution(scan_layers=not args.unroll))
    params = init_params(model, jax.random.key(0))
    rng = np.random.default_rng(0)
    ids = rng.integers(5, config.vocab_size, (args.batch, args.source)).astype(np.int32)
    mask = np.ones_like(ids)
    # end_id -1: never generated, so every search runs all `new` steps.
    kw = dict(beam_size=args.beam, max_new_tokens=args.new, end_id=-1)
    cached, uncached = Decoder(model, args.new), Decoder(model, args.new, False)

    def host(dec):  # the host-side search, even for beam 1 (generate would go to the device)
        return lambda: [h[0].tokens for h in beam_search(dec, params, ids, mask, **kw)]

    def device():
        out, n, _ = cached.greedy(params, ids, mask, -1, args.new)  # NumPy: waits for the result
        return [row[:k].tolist() for row, k in zip(out, n, strict=True)]

    searches = {"device": device, "cached": host(cached), "uncached": host(uncached)}
    searches = {k: searches[k] for k in args.searches.split(",")}
    if args.beam != 1:
        searches.pop("device", None)
    outputs = {name: run() for name, run in searches.items()}  # compile
    times = {k: [] for k in searches}
    for _ in range(args.rounds):
        for name, run in searches.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    tokens = args.batch * args.new
    result = {
        "benchmark": "decoding",
        "preset": args.preset,
        "shape": {k: getattr(config, k) for k in _SHAPE.values()},
        "layout": config.layout,
        "scan_layers": not args.unroll,
        "batch": args.batch,
        "source_length": args.source,
        "new_tokens": args.new,
        "beam_size": args.beam,
        "backend": jax.default_backend(),
        "machine": platform.machine(),
        "host_memory_kept": kept,
        "seconds": {k: statistics.median(v) for k, v in times.items()},
        "tokens_per_s": {k: tokens / statistics.median(v) for k, v in times.items()},
        "same_output": all(o == next(iter(outputs.values())) for o in outputs.values()),
    }
    speed = result["tokens_per_s"]
    for a, b in (("device", "cached"), ("cached", "uncached")):
        if a in speed and b in speed:
            result[f"speedup_{a}_over_{b}"] = speed[a] / speed[b]
    emit(result, args.out)
    return result


if __name__ == "__main__":
    main()
