"""What storing unshared layers stacked costs a train step, against one array per layer.

    python benchmarks/stacked_layers.py
    python benchmarks/stacked_layers.py --layers 12 --hidden 768 --intermediate 3072 --out s.json

Our parameter tree keeps a per-layer weight as one array with a leading `layers` axis (so that
unsharing is tiling and scanning is free). A step of L unshared layers then reads layer i as a
slice of that array. This times forward + backward + an SGD update of a stack of L simplified
transformer layers (two H x H and two H x I matmuls each, batch x seq rows) with the weights held
five ways: `separate` (one array per layer, transformers' layout: the lower bound), `slice`
(stacked, a static slice per layer: our unrolled encoder), `unstack` (stacked, split once by a
`custom_vjp` whose backward is one concatenation), `scan` (stacked, `lax.scan` over the
layer axis as `xs`) and `scan_unrolled` (the same, fully unrolled). Reports the median and minimum
step time of each and its ratio to `separate`, alternating the variants over `--rounds` rounds.
On CPU each slice of a stacked weight is copied before its matmul and the per-layer gradients are
assembled into the stacked gradient, which `separate` does not pay; `gradient_assembly` times that
assembly alone (as XLA computes it, padded slices added, and as one concatenation).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp
from report import emit, xla_cost  # benchmarks/report.py


def layer(h, p):
    a = h + jnp.tanh(h @ p["wq"]) @ p["wo"]
    return a + jax.nn.gelu(a @ p["w1"]) @ p["w2"]


@jax.custom_vjp
def unstack(stacked):
    return tuple(stacked[i] for i in range(stacked.shape[0]))


# The backward is one concatenation of the per-layer cotangents, not L padded slices summed.
unstack.defvjp(lambda s: (unstack(s), None), lambda _, cts: (jnp.stack(cts),))


def make_variants(L):
    def unstacked(params, x):
        parts = {n: unstack(v) for n, v in params.items()}
        for i in range(L):
            x = layer(x, {n: p[i] for n, p in parts.items()})
        return jnp.sum(x * x)

    def sliced(params, x):
        for i in range(L):
            x = layer(x, {n: v[i] for n, v in params.items()})
        return jnp.sum(x * x)

    def scan(unroll):
        def f(params, x):
            y, _ = jax.lax.scan(lambda h, p: (layer(h, p), None), x, params, unroll=unroll)
            return jnp.sum(y * y)

        return f

    def separate(params, x):
        for p in params:
            x = layer(x, p)
        return jnp.sum(x * x)

    return {
        "separate": separate,
        "slice": sliced,
        "unstack": unstacked,
        "scan": scan(1),
        "scan_unrolled": scan(True),
    }


def assembly_seconds(L: int, shapes: dict, rounds: int) -> dict:
    """The gradient assembly alone: L per-layer gradients of every weight into the stacked
    gradient, as the transpose of `stacked[i]` gives it (each padded to full size and added:
    what XLA fuses) and as one concatenation; median and minimum seconds over `rounds`."""

    def pad_add(parts):
        out = {}
        for n, ps in parts.items():
            padded = [
                jax.lax.pad(p[None], 0.0, [(i, L - 1 - i, 0)] + [(0, 0, 0)] * p.ndim)
                for i, p in enumerate(ps)
            ]
            out[n] = sum(padded[1:], padded[0])
        return out

    def concat(parts):
        return {n: jnp.stack(ps) for n, ps in parts.items()}

    parts = {n: [jnp.full(s, float(i)) for i in range(L)] for n, s in shapes.items()}
    times: dict[str, list[float]] = {"pad_add": [], "concat": []}
    fns = {"pad_add": jax.jit(pad_add), "concat": jax.jit(concat)}
    for _ in range(rounds):
        for name, f in fns.items():
            jax.block_until_ready(f(parts))
            t = time.perf_counter()
            jax.block_until_ready(f(parts))
            times[name].append(time.perf_counter() - t)
    return {
        k: {"s": round(statistics.median(v), 4), "s_min": round(min(v), 4)}
        for k, v in times.items()
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--intermediate", type=int, default=3072)
    parser.add_argument("--rows", type=int, default=1024, help="batch x sequence length")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    L, H, inter = args.layers, args.hidden, args.intermediate
    key = jax.random.key(0)
    shapes = {"wq": (H, H), "wo": (H, H), "w1": (H, inter), "w2": (inter, H)}
    stacked = {n: jax.random.normal(key, (L, *s)) * 0.02 for n, s in shapes.items()}
    x = jax.random.normal(key, (args.rows, H))
    variants = make_variants(L)
    times: dict[str, list[float]] = {k: [] for k in variants}
    costs: dict[str, dict] = {}
    for _ in range(args.rounds):
        for name, f in variants.items():
            params = stacked if name != "separate" else [
                {n: v[i] for n, v in stacked.items()} for i in range(L)
            ]  # fmt: skip
            params = jax.tree.map(jnp.copy, params)

            def step(p, x, f=f):
                g = jax.grad(f)(p, x)
                return jax.tree.map(lambda a, b: a - 1e-3 * b, p, g)

            step = jax.jit(step, donate_argnums=0)
            costs[name] = xla_cost(step.lower(params, x).compile())
            params = jax.block_until_ready(step(params, x))
            for _ in range(args.steps):
                t = time.perf_counter()
                params = jax.block_until_ready(step(params, x))
                times[name].append(time.perf_counter() - t)
    base = statistics.median(times["separate"])
    rows = {
        k: {
            "step_s": round(statistics.median(v), 4),
            "step_s_min": round(min(v), 4),
            "over_separate": round(statistics.median(v) / base, 3),
            **costs[k],
        }
        for k, v in times.items()
    }
    result = {
        "benchmark": "stacked_layers",
        "layers": L,
        "hidden": H,
        "intermediate": inter,
        "rows": args.rows,
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "variants": rows,
        "gradient_assembly": assembly_seconds(L, shapes, max(3, args.rounds)),
    }
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
