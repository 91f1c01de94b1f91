"""Compile time of the pretraining train step vs depth: nn.scan vs unrolled layers.

    python benchmarks/compile_depth.py                      # L = 12, 24, 48, all-shared, base size
    python benchmarks/compile_depth.py --layers 12 24 --preset albert-tiny

Prints one JSON document. Shapes are abstract (`jax.eval_shape`), so only tracing, lowering and XLA
compilation are timed; nothing runs. With scan the step's program is one loop body whatever L is,
so its compile time should stay roughly flat with depth; unrolled grows linearly.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import jax
import jax.numpy as jnp
import optax
from report import emit  # benchmarks/ on sys.path

from albert_jax import AlbertForPreTraining, cli
from albert_jax.model import presets
from albert_jax.model.config import Execution
from albert_jax.model.losses import pretraining_loss


def train_step_fn(config, execution, optimizer):
    model = AlbertForPreTraining(config, execution)

    def step(params, opt_state, batch, rng):
        def loss_fn(p):
            out = model.apply(
                {"params": p},
                batch["input_ids"],
                batch["token_type_ids"],
                batch["attention_mask"],
                masked_positions=batch["masked_lm_positions"],
                deterministic=False,
                rngs={"dropout": rng},
            )
            return pretraining_loss(out, batch)

        (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def abstract_inputs(config, execution, batch_size, seq_len, max_predictions):
    model = AlbertForPreTraining(config, execution)
    ids = jnp.zeros((1, 8), jnp.int32)
    params = jax.eval_shape(lambda: model.init(jax.random.key(0), ids)["params"])
    params = jax.tree_util.tree_map(
        lambda x: getattr(x, "value", x), params, is_leaf=lambda x: hasattr(x, "names")
    )
    optimizer = optax.adamw(1e-4)
    opt_state = jax.eval_shape(optimizer.init, params)
    i32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.int32)
    batch = {
        "input_ids": i32(batch_size, seq_len),
        "token_type_ids": i32(batch_size, seq_len),
        "attention_mask": i32(batch_size, seq_len),
        "masked_lm_positions": i32(batch_size, max_predictions),
        "masked_lm_ids": i32(batch_size, max_predictions),
        "masked_lm_weights": jax.ShapeDtypeStruct((batch_size, max_predictions), jnp.float32),
        "sentence_order_label": i32(batch_size),
    }
    rng = jax.eval_shape(lambda: jax.random.key(0))
    return optimizer, (params, opt_state, batch, rng)


def measure(config, execution, args):
    optimizer, inputs = abstract_inputs(
        config, execution, args.batch, args.seq, args.max_predictions
    )
    step = jax.jit(train_step_fn(config, execution, optimizer), donate_argnums=(0, 1))
    t0 = time.perf_counter()
    lowered = step.lower(*inputs)
    t1 = time.perf_counter()
    lowered.compile()
    t2 = time.perf_counter()
    return {"trace_lower_s": round(t1 - t0, 2), "compile_s": round(t2 - t1, 2)}


def main():
    kept = cli.keep_freed_memory()  # host memory as the entry points have it
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="albert-base")
    parser.add_argument("--layout", default="all")
    parser.add_argument("--layers", type=int, nargs="+", default=[12, 24, 48])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--max_predictions", type=int, default=20)
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args()

    results = []
    for scan in (True, False):
        for layers in args.layers:
            config = presets.get(args.preset, num_layers=layers, layout=args.layout)
            execution = Execution(scan_layers=scan)
            row = {"layers": layers, "scan_layers": scan, **measure(config, execution, args)}
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    by = {(r["scan_layers"], r["layers"]): r["compile_s"] for r in results}
    lo, hi = min(args.layers), max(args.layers)
    summary = {
        "benchmark": "compile_depth",
        "preset": args.preset,
        "layout": args.layout,
        "batch": args.batch,
        "seq": args.seq,
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "machine": platform.machine(),
        "host_memory_kept": kept,
        "results": results,
        # compile(L=max) / compile(L=min): ~1 means flat with depth
        "scan_growth": round(by[(True, hi)] / by[(True, lo)], 2),
        "unrolled_growth": round(by[(False, hi)] / by[(False, lo)], 2),
        f"unrolled_over_scan_at_L{hi}": round(by[(False, hi)] / by[(True, hi)], 2),
    }
    emit(summary, args.out)


if __name__ == "__main__":
    main()
