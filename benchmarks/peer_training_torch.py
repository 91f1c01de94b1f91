"""Peer side of peer_training.py: transformers 5 PyTorch AlbertForSequenceClassification training.

    /tmp/peer5/bin/python benchmarks/peer_training_torch.py --model runs/peer_training/init_hf \
        --inputs runs/peer_training/inputs.npz --lr 1e-4 --eval-every 10 --out peer.json

Runs in its own environment (transformers 5 + torch CPU + numpy, no albert_jax, no jax):

    python3 -m venv /tmp/peer5 && /tmp/peer5/bin/pip install 'transformers==5.25.0' \
        'torch==2.13.0' sentencepiece safetensors numpy

`AlbertForSequenceClassification.from_pretrained(--model)` (our export: weights, head and
dropout from its config.json), first checked against our model's logits on 8 dev examples
(`check_logits` in the .npz). Then a plain training loop over the .npz's batches, in their order
(our run's, featurized by peer_training.py): torch.optim.AdamW (b1 0.9, b2 0.999, eps 1e-6,
weight decay 0.01 except LayerNorm and biases, bias correction as torch has it), clip global
norm 1.0, the reference schedule (lr * t / warmup during the 10% warmup, then lr * (1 - t / T);
t counts updates from 0, so the first update has lr 0, as ours), mean cross-entropy (the
model's own loss), `model.train()` (its dropout: classifier 0.1, encoder per the config). The
dev sample is scored in eval mode every `--eval-every` steps and at the last. Times: each step
(wall, `perf_counter`), the first step apart; `--launched`: the driver's `time.time()` at
launch, so that wall times count from there. Writes one JSON document (`--out`).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import time

NO_DECAY = re.compile(r"LayerNorm|layer_norm|bias")  # ours: albert_jax.train.optim


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="transformers directory (our export)")
    parser.add_argument("--inputs", required=True, help=".npz of peer_training.py")
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--eval-every", type=int, required=True)
    parser.add_argument("--eval-batch", type=int, default=64)
    parser.add_argument("--warmup-fraction", type=float, default=0.1)
    parser.add_argument("--head-lr-multiplier", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--launched", type=float, default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    launched = args.launched if args.launched is not None else time.time()

    import numpy as np
    import torch
    import transformers
    from transformers import AlbertForSequenceClassification

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data = np.load(args.inputs)
    keys = ("input_ids", "token_type_ids", "attention_mask")
    train = {k: torch.from_numpy(data[f"train_{k}"].astype(np.int64)) for k in keys}
    train_labels = torch.from_numpy(data["train_label"].astype(np.int64))
    dev = {k: torch.from_numpy(data[f"dev_{k}"].astype(np.int64)) for k in keys}
    dev_labels = data["dev_label"].astype(np.int64)
    total = train_labels.shape[0]
    warmup = round(args.warmup_fraction * total)

    model = AlbertForSequenceClassification.from_pretrained(args.model)
    cfg = model.config
    model.eval()
    with torch.no_grad():
        check = model(**{k: v[:8] for k, v in dev.items()}).logits.numpy()
    parity = float(np.max(np.abs(check - data["check_logits"])))

    # four groups: weight decay or not (LayerNorm, biases) x the fresh head or the encoder (its
    # rate x --head-lr-multiplier, as ours `optim.lr_multipliers='^classifier/=M'`)
    groups = {}
    for n, p in model.named_parameters():
        head = n.startswith("classifier.")
        key = (head, not NO_DECAY.search(n))
        groups.setdefault(key, []).append(p)
    optimizer = torch.optim.AdamW(
        [
            {
                "params": params,
                "weight_decay": 0.01 if decay else 0.0,
                "lr": args.lr * (args.head_lr_multiplier if head else 1.0),
            }
            for (head, decay), params in groups.items()
        ],
        lr=args.lr,
        betas=(0.9, 0.999),
        eps=1e-6,
    )

    def factor(t):
        return t / warmup if t < warmup else max(0.0, 1.0 - t / total)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    def evaluate():
        model.eval()
        preds = []
        with torch.no_grad():
            for i in range(0, len(dev_labels), args.eval_batch):
                batch = {k: v[i : i + args.eval_batch] for k, v in dev.items()}
                preds.append(model(**batch).logits.argmax(-1).numpy())
        model.train()
        return float(np.mean(np.concatenate(preds) == dev_labels))

    model.train()
    start = time.perf_counter()
    startup_s = time.time() - launched
    step_times, evals, losses, eval_s = [], [], [], 0.0
    for step in range(1, total + 1):
        t = time.perf_counter()
        batch = {k: v[step - 1] for k, v in train.items()}
        out = model(**batch, labels=train_labels[step - 1])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(out.loss.detach()))
        step_times.append(time.perf_counter() - t)
        if step % args.eval_every == 0 or step == total:
            wall = time.time() - launched  # before this evaluation, as ours
            e = time.perf_counter()
            accuracy = evaluate()
            eval_s += time.perf_counter() - e
            evals.append(
                {
                    "step": step,
                    "accuracy": round(accuracy, 4),
                    "train_s": round(sum(step_times[1:]), 2),
                    "wall_s": round(wall, 2),
                    "loss": round(losses[-1], 4),
                }
            )
            print(json.dumps(evals[-1]), flush=True)
    train_s = sum(step_times[1:])
    result = {
        "impl": "transformers AlbertForSequenceClassification (PyTorch), torch.optim.AdamW loop",
        "evals": evals,
        "startup_s": round(startup_s, 2),
        "first_step_s": round(step_times[0], 2),
        "train_s": round(train_s, 2),
        "eval_s": round(eval_s, 2),
        "examples_per_s": round((total - 1) * train_labels.shape[1] / train_s, 3),
        "step_s_median": round(float(np.median(step_times[1:])), 3),
        "loop_s": round(time.perf_counter() - start, 2),
        "parity_max_abs_logit_diff": parity,
        "dropout": {
            "hidden": cfg.hidden_dropout_prob,
            "attention": cfg.attention_probs_dropout_prob,
            "classifier": cfg.classifier_dropout_prob,
        },
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
