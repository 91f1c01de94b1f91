"""Seq2seq decoding speed: generated tokens/s with the key/value cache against recomputing the
whole sequence at every step (`albert_jax.model.decoding.Decoder(use_cache=False)`).

    python benchmarks/decoding.py                               # albert-base shape, random weights
    python benchmarks/decoding.py --preset albert-tiny --batch 32 --source 96 --new 32 --rounds 3

Prints one JSON document. Both decoders run the same greedy search for exactly `--new` tokens
(no end token, so both do the same number of steps) on the same random sources, after a warm-up
call that compiles them; rounds alternate between the two (these machines are shared and noisy)
and the median of each is reported, with the ratio cached / uncached. The generated tokens of
the two are also compared: they must be identical.
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
from albert_jax.model.decoding import Decoder, generate
from albert_jax.model.heads import AlbertForSeq2Seq


def main(argv=None):
    kept = cli.keep_freed_memory()  # host memory as the entry points have it
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="albert-base")
    p.add_argument("--layout", default="all", help="all | none | groups:G ...")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--source", type=int, default=96, help="source length in pieces")
    p.add_argument("--new", type=int, default=32, help="tokens generated per example")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args(argv)

    config = presets.get(args.preset).with_layout(args.layout)
    config = config.replace(max_position_embeddings=max(512, args.source + args.new))
    model = AlbertForSeq2Seq(config)
    params = init_params(model, jax.random.key(0))
    rng = np.random.default_rng(0)
    ids = rng.integers(5, config.vocab_size, (args.batch, args.source)).astype(np.int32)
    mask = np.ones_like(ids)
    # end_id -1: never generated, so every search runs all `new` steps.
    kw = dict(beam_size=args.beam, max_new_tokens=args.new, end_id=-1)
    decoders = {"cached": Decoder(model, args.new), "uncached": Decoder(model, args.new, False)}
    outputs, times = {}, {k: [] for k in decoders}
    for name, dec in decoders.items():  # compile
        outputs[name] = generate(dec, params, ids, mask, **kw)
    for _ in range(args.rounds):
        for name, dec in decoders.items():
            t0 = time.perf_counter()
            generate(dec, params, ids, mask, **kw)
            times[name].append(time.perf_counter() - t0)
    tokens = args.batch * args.new
    result = {
        "benchmark": "decoding",
        "preset": args.preset,
        "layout": config.layout,
        "batch": args.batch,
        "source_length": args.source,
        "new_tokens": args.new,
        "beam_size": args.beam,
        "backend": jax.default_backend(),
        "machine": platform.machine(),
        "host_memory_kept": kept,
        "seconds": {k: statistics.median(v) for k, v in times.items()},
        "tokens_per_s": {k: tokens / statistics.median(v) for k, v in times.items()},
        "same_output": outputs["cached"] == outputs["uncached"],
    }
    result["speedup_cached_over_uncached"] = (
        result["tokens_per_s"]["cached"] / result["tokens_per_s"]["uncached"]
    )
    emit(result, args.out)
    return result


if __name__ == "__main__":
    main()
