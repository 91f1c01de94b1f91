"""Peer side of finetune_step.py: transformers' FlaxAlbertForSequenceClassification train step.

    /tmp/peer/bin/python benchmarks/peer_finetune.py --size base --batch 8 --seq 128 --steps 5

Runs in its own environment (transformers 4.57 + jax + flax + optax, no torch, no albert_jax):

    python3 -m venv /tmp/peer && /tmp/peer/bin/pip install 'transformers==4.57.6' jax flax optax

Same sizes as albert_jax's presets albert-SIZE, shared or, with `--groups L`, not shared
(transformers' `num_hidden_groups`: one weight group per layer), same random batch as
finetune_step.py, f32, and one jitted full train step: forward with `train=True` (encoder and
attention dropout 0, classifier dropout 0.1, a fresh dropout key per step), backward,
clip_by_global_norm(1.0) + optax.adamw(1e-5, eps=1e-6, weight_decay=0.01). Same timing protocol:
compile ahead of time, one first step, `--warmup` untimed steps, then the median of `--steps`
timed steps. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

from report import NUM_LABELS, classification_batch, xla_cost  # benchmarks/ on sys.path

# albert_jax.model.presets albert-SIZE: (vocab, embedding, hidden, layers, heads, intermediate)
SIZES = {
    "tiny": (21128, 128, 312, 4, 12, 1248),
    "small": (21128, 128, 384, 6, 12, 1536),
    "base": (30000, 128, 768, 12, 12, 3072),
    "large": (30000, 128, 1024, 24, 16, 4096),
    "xlarge": (30000, 128, 2048, 24, 16, 8192),
    "xxlarge": (30000, 128, 4096, 12, 64, 16384),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="base", choices=sorted(SIZES))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--groups", type=int, default=1, help="num_hidden_groups (L: not shared)")
    args = parser.parse_args()

    import flax
    import jax
    import jax.numpy as jnp
    import optax
    import transformers
    from transformers import AlbertConfig, FlaxAlbertForSequenceClassification

    vocab, emb, hidden, layers, heads, inter = SIZES[args.size]
    config = AlbertConfig(
        vocab_size=vocab,
        embedding_size=emb,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_hidden_groups=args.groups,
        num_attention_heads=heads,
        intermediate_size=inter,
        hidden_act="gelu_new",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.1,
        num_labels=NUM_LABELS,
    )
    model = FlaxAlbertForSequenceClassification(config, seed=0)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-5, eps=1e-6, weight_decay=0.01))
    params = model.params
    opt_state = tx.init(params)
    batch = {
        k: jnp.asarray(v) for k, v in classification_batch(vocab, args.batch, args.seq).items()
    }

    def loss_fn(p, batch, rng):
        logits = model(
            batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
            params=p,
            dropout_rng=rng,
            train=True,
        ).logits
        nll = optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"])
        return nll.sum() / batch["labels"].shape[0]

    def train_step(params, opt_state, batch, key, step):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch, jax.random.fold_in(key, step))
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step_fn = jax.jit(train_step, donate_argnums=(0, 1))
    key = jax.random.PRNGKey(0)
    t0 = time.perf_counter()
    compiled = step_fn.lower(params, opt_state, batch, key, jnp.int32(0)).compile()
    compile_s = time.perf_counter() - t0

    times, cpu, loss = [], [], None
    for i in range(1 + args.warmup + args.steps):
        t, c = time.perf_counter(), time.process_time()
        params, opt_state, loss = compiled(params, opt_state, batch, key, jnp.int32(i))
        jax.block_until_ready((params, opt_state, loss))
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    timed = times[1 + args.warmup :]
    step_s = statistics.median(timed)
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(params))
    print(
        json.dumps(
            {
                "impl": "transformers FlaxAlbertForSequenceClassification",
                "layout": {1: "all", layers: "none"}.get(args.groups, f"groups:{args.groups}"),
                "size": args.size,
                "batch": args.batch,
                "seq": args.seq,
                "steps": args.steps,
                "warmup": args.warmup,
                "model": {
                    "vocab_size": vocab,
                    "embedding_size": emb,
                    "hidden_size": hidden,
                    "num_layers": layers,
                    "num_heads": heads,
                    "intermediate_size": inter,
                },
                "params": int(n_params),
                "compile_s": round(compile_s, 2),
                **xla_cost(compiled),
                "first_step_s": round(times[0], 3),
                "step_s": round(step_s, 4),
                "step_s_min": round(min(timed), 4),
                "step_cpu_s": round(statistics.median(cpu[1 + args.warmup :]), 4),
                "examples_per_s": round(args.batch / step_s, 2),
                "loss": round(float(loss), 4),
                "transformers": transformers.__version__,
                "jax": jax.__version__,
                "flax": flax.__version__,
                "optax": optax.__version__,
                "machine": platform.machine(),
            }
        )
    )


if __name__ == "__main__":
    main()
