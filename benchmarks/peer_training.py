"""Fine-tuning end to end against transformers 5 PyTorch: examples/s, wall time to a dev accuracy.

    python benchmarks/peer_training.py --size tiny --steps 4 --eval-every 2 --dev-sample 64 \
        --peer-python /tmp/peer5/bin/python                       # smoke run, a minute or two
    # the recorded runs (docs/performance.md): time to accuracy at base width with 4 layers,
    # then throughput at base size (12 layers: from random weights it learns nothing in 300 steps)
    python benchmarks/peer_training.py --size base --layers 4 --steps 300 --eval-every 25 \
        --dev-sample 256 --batch 16 --seq 32 --lr 2e-4 --head-lr 10 \
        --peer-python /tmp/peer5/bin/python --out results/benchmarks/peer_training.json
    python benchmarks/peer_training.py --size base --steps 30 --eval-every 15 --dev-sample 64 \
        --batch 16 --seq 32 --lr 2e-4 --head-lr 10 --peer-python /tmp/peer5/bin/python \
        --out results/benchmarks/peer_training_base.json

The peer's environment (transformers 5 + torch CPU, no albert_jax), kept apart from ours:
`python3 -m venv /tmp/peer5 && /tmp/peer5/bin/pip install 'transformers==5.25.0'
'torch==2.13.0' sentencepiece safetensors numpy`.

One process (ours) drives both sides on one classification task: `--task` (default `headlines`,
10 news topics, `configs/finetune/suite.py:headlines`; `python -m finetune.prepare TASK`, built
here when missing), or `--config` and `--data` (a directory of {train,dev,test}.jsonl):

1. A character SentencePiece vocabulary trained on the training texts
   (`albert_jax.text.tokenization.train_sentencepiece`, as `configs/pretrain/cpu_base.py` builds
   its own), and a randomly initialized model of the preset `albert-SIZE` shape (no pretrained
   weights exist offline; seeded) with encoder and attention dropout 0 and the task's
   classification head (classifier dropout 0.1), saved as our checkpoint and exported to
   transformers with `python -m albert_jax.convert CKPT HF --to hf`: both sides start from the
   same weights, head included.
2. Ours: the real `python -m finetune --config CONFIG` from that checkpoint, as a subprocess:
   fixed learning rate (no search), the classifier's `--head-lr` times it
   (`optim.lr_multipliers`; from random weights the head needs it), `--steps` steps of batch
   `--batch`,
   sequences of `--seq`, AdamW with bias correction (`optim.bias_correction=True`, as
   torch.optim.AdamW has it; otherwise the reference's: eps 1e-6, weight decay 0.01 except
   LayerNorm and biases, clip 1.0, linear warmup over 10% then linear decay to 0), the dev sample
   (`evals.dev.sample`) scored every `--eval-every` steps, no final evaluation. Its
   metrics.jsonl gives dev accuracy per evaluation and the goodput rows (logged at the same
   steps) the time spent stepping and the process's wall time.
3. The peer: `benchmarks/peer_training_torch.py` under `--peer-python`:
   `AlbertForSequenceClassification.from_pretrained` of the export, a plain loop with the same
   optimizer (the head's rate as ours), schedule, clipping and dropout, fed the exact token ids,
   batches and batch order
   our run trains on (featurized once here by the same code `python -m finetune` uses, into an
   .npz), and the same dev sample at the same steps. torch threads: `--threads`.

Figures per side: examples/s of training (steps after the first / time spent in them: the
first step, our compile, is left out on both sides; evaluation and checkpoints excluded), the
dev accuracy curve, and the time to the target accuracy, the lower of the two sides' best dev
accuracies (so both reach it): training time from the end of the first step to the end of the
first evaluated step at or above it, and the wall time from launching the process to that step
(start-up, compile, earlier evaluations and checkpoints included); the same training time to
each tenth of accuracy on the way (`milestones`: one seed's peak is noisy). The machine is
shared: pause other work for the measured run (docs/performance.md shows how). Prints one
JSON document; `--out FILE` also writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time

import flax.linen as nn
import jax
import numpy as np
from report import emit  # benchmarks/ on sys.path

from albert_jax import cli
from albert_jax.checkpoints import checkpoint
from albert_jax.model import presets
from albert_jax.tasks.finetuning import INPUTS, FinetuneData, make_task
from albert_jax.text.tokenization import read_tokenizer, train_sentencepiece

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = ("tiny", "small", "base", "large")


def time_to_target(rows: list[dict], target: float) -> dict | None:
    """The first evaluation row (in step order) whose `accuracy` reaches `target` (None when
    none does)."""
    for row in sorted(rows, key=lambda r: r["step"]):
        if row["accuracy"] >= target - 1e-9:
            return row
    return None


def finetune_overrides(args, ckpt: str, data_dir: str) -> dict:
    """The `--config.KEY=VALUE` settings of our run (also applied to the config featurized
    here, so that both sides see the same examples)."""
    d = os.path.abspath(data_dir)
    return {
        "init": ckpt,
        "task.train": f"{d}/train.jsonl",
        "task.dev": f"{d}/dev.jsonl",
        "task.test": f"{d}/test.jsonl",
        "task.prepare": "",
        "task.max_seq_length": args.seq,
        "batch_size": args.batch,
        "eval_batch_size": args.eval_batch,
        "total_steps": args.steps,
        "log_every": args.eval_every,  # goodput rows at the evaluated steps
        "checkpoint_every": args.steps,
        "keep_checkpoints": 1,
        "seed": args.seed,
        "optim.learning_rate": args.lr,
        "optim.bias_correction": True,
        "optim.lr_multipliers": f"^classifier/={args.head_lr}" if args.head_lr != 1 else "",
        "model.classifier_dropout": 0.1,
        "evals.dev.every": args.eval_every,
        "evals.dev.sample": args.dev_sample,
        "evals.dev.final": False,
        "evals.test.final": False,
        "progress_bar": False,
        "lr_search.enabled": False,  # the suite's default: a fixed rate here, the same both sides
        "min_steps": 0,
        "max_train_examples": 0,
    }


def load_config(spec: str, overrides: dict):
    """`spec` as `--config` takes it (FILE or FILE:ARG), with `overrides` applied."""
    import importlib.util

    path, _, arg = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location("peer_config", os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    config = module.get_config(arg) if arg else module.get_config()
    with config.unlocked():
        for key, value in overrides.items():
            node = config
            *parents, leaf = key.split(".")
            for p in parents:
                node = node[p]
            node[leaf] = value
    return config


def flag(key: str, value) -> str:
    return f"--config.{key}={value}"


def build_model(args, work: str) -> tuple[str, str, dict]:
    """Tokenizer, random-init model with the task's head: (our checkpoint, HF export, notes)."""
    from albert_jax.experiments import datasets

    if not os.path.exists(os.path.join(args.data, "train.jsonl")):  # a dataset of one's own
        datasets.prepare(args.task, args.data)  # has {train,dev,test}.jsonl
    tok_dir = os.path.join(work, "tokenizer")
    if not os.path.exists(os.path.join(tok_dir, "spiece.model")):
        with open(os.path.join(args.data, "train.jsonl"), encoding="utf-8") as f:
            texts = [json.loads(line)["text"] for line in f if line.strip()]
        train_sentencepiece(
            texts,
            tok_dir,
            vocab_size=args.vocab_size,
            model_type="char",
            hard_vocab_limit=False,
            character_coverage=0.9995,
        )
    tok = read_tokenizer(tok_dir)
    overrides = {"num_layers": args.layers} if args.layers else {}
    model_config = presets.get(
        f"albert-{args.size}",
        vocab_size=tok.vocab_size,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        **overrides,
    )
    shape = os.path.join(work, "model_config.json")
    with open(shape, "w") as f:
        f.write(model_config.to_json() + "\n")
    # The head (labels, dropout, max_seq_length) as `python -m finetune` makes it.
    init = finetune_overrides(args, "none", args.data)
    init.update({"tokenizer": tok_dir, "model_from": shape})
    data = FinetuneData(load_config(args.config, init), splits=("train",))
    task = make_task(load_config(args.config, init), data)
    dummy = [np.zeros((1, 8), np.int32) for _ in INPUTS]
    params = task.model.init(jax.random.key(args.seed), *dummy, deterministic=True)["params"]
    params = jax.tree_util.tree_map(np.asarray, nn.unbox(params))
    ckpt, hf = os.path.join(work, "init_ckpt"), os.path.join(work, "init_hf")
    checkpoint.save(ckpt, data.model_config, params, tokenizer=tok, head=task.head)
    cmd = [sys.executable, "-m", "albert_jax.convert", ckpt, hf, "--to", "hf", "--overwrite"]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, text=True)
    n = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(params))
    return ckpt, hf, {"params": n, "vocab_size": tok.vocab_size, "labels": data.labels}


def featurize(args, ckpt: str, work: str) -> tuple[str, dict]:
    """Our run's exact training batches (in order) and dev sample, and our model's dev logits at
    the start (the peer checks its copy of the weights against them), into an .npz."""
    config = load_config(args.config, finetune_overrides(args, ckpt, args.data))
    data = FinetuneData(config, splits=("train", "dev"))
    task = make_task(config, data)  # config.seed: the run's (one seed)
    batches = task.train_iterator(0, 1)
    train = [next(batches) for _ in range(args.steps)]
    dev_name = data.sample("dev", args.dev_sample)
    dev = data.features[dev_name]
    arrays = {f"train_{k}": np.stack([b[k] for b in train]) for k in (*INPUTS, "label")}
    arrays.update({f"dev_{k}": np.asarray(dev[k]) for k in (*INPUTS, "label")})
    check = {k: np.asarray(dev[k][:8]) for k in INPUTS}
    params = data.source.params
    logits = task.model.apply({"params": params}, *(check[k] for k in INPUTS), deterministic=True)
    arrays["check_logits"] = np.asarray(logits.logits, np.float32)
    path = os.path.join(work, "inputs.npz")
    np.savez(path, **arrays)
    labels = np.asarray(dev["label"])
    majority = float(max(np.mean(labels == c) for c in np.unique(labels)))
    info = {
        "train_examples": len(data.features["train"]["input_ids"]),
        "dev_sample": int(len(labels)),
        "dev_majority_accuracy": round(majority, 4),
        "truncated_train": data.stats["train"].get("truncated"),
    }
    return path, info


def run_ours(args, ckpt: str, work: str) -> dict:
    wd = os.path.join(work, "ours")
    shutil.rmtree(wd, ignore_errors=True)  # a fresh run: `python -m finetune` would resume one
    flags = [flag(k, v) for k, v in finetune_overrides(args, ckpt, args.data).items()]
    cmd = [sys.executable, "-m", "finetune", "--config", args.config, "--workdir", wd, *flags]
    launched = time.time()
    with open(os.path.join(work, "ours.log"), "w") as log:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    total = time.time() - launched
    if proc.returncode != 0:
        raise RuntimeError(f"our run failed ({proc.returncode}): see {work}/ours.log")
    rows = [json.loads(line) for line in open(os.path.join(wd, "metrics.jsonl"))]
    goodput = {r["step"]: r for r in rows if r.get("split") == "goodput"}
    evals = []
    for r in rows:
        if r.get("split") != "eval":
            continue
        g = goodput[r["step"]]
        evals.append(
            {
                "step": r["step"],
                "accuracy": round(r["accuracy"], 4),
                "train_s": round(g["productive_s"] + g["input_s"], 2),
                "wall_s": round(g["wall_s"], 2),
            }
        )
    last = goodput[max(goodput)]
    train_s = last["productive_s"] + last["input_s"]
    return {
        "impl": "albert_jax python -m finetune",
        "command": shlex.join(cmd),
        "evals": evals,
        "startup_s": round(last["startup_s"], 2),
        "first_step_s": round(last["compile_s"], 2),  # the first call: compile + step
        "train_s": round(train_s, 2),
        "eval_s": round(last["eval_s"], 2),
        "examples_per_s": round((args.steps - 1) * args.batch / train_s, 3),
        "process_wall_s": round(total, 2),
    }


def run_peer(args, hf: str, inputs: str, work: str) -> dict:
    script = os.path.join(ROOT, "benchmarks", "peer_training_torch.py")
    cmd = [args.peer_python, script, "--model", hf, "--inputs", inputs, "--lr", str(args.lr)]
    cmd += ["--head-lr-multiplier", str(args.head_lr)]
    cmd += ["--eval-every", str(args.eval_every), "--eval-batch", str(args.eval_batch)]
    cmd += ["--threads", str(args.threads), "--seed", str(args.seed)]
    cmd += ["--out", os.path.join(work, "peer.json"), "--launched"]
    launched = time.time()
    with open(os.path.join(work, "peer.log"), "w") as log:
        proc = subprocess.run([*cmd, repr(launched)], stdout=log, stderr=subprocess.STDOUT)
    total = time.time() - launched
    if proc.returncode != 0:
        raise RuntimeError(f"peer run failed ({proc.returncode}): see {work}/peer.log")
    with open(os.path.join(work, "peer.json")) as f:
        peer = json.load(f)
    peer["command"] = shlex.join([*cmd, "T0"])
    peer["process_wall_s"] = round(total, 2)
    return peer


class LoadSampler:
    """The 1-minute load average every `every` seconds while a side runs (in the background):
    how busy the machine was beside it."""

    def __init__(self, every: float = 15.0):
        import threading

        self.samples, self.every = [], every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        s = self.samples or [os.getloadavg()[0]]
        return {"mean": round(float(np.mean(s)), 2), "max": round(max(s), 2), "n": len(s)}


def summarize(sides: dict, majority: float) -> dict:
    """The target (the lower of the sides' best dev accuracies), each side's first evaluation at
    or above it, and the ratios. `target_above_majority` False: neither side beat predicting the
    dev sample's majority class, and the times to the target mean nothing."""
    best = {name: max(e["accuracy"] for e in side["evals"]) for name, side in sides.items()}
    target = min(best.values())
    out = {"target_accuracy": target, "best_accuracy": best}
    out["target_above_majority"] = bool(target > majority + 1e-9)
    for name, side in sides.items():
        row = time_to_target(side["evals"], target)
        out[name] = {k: row[k] for k in ("step", "accuracy", "train_s", "wall_s")}
    out["ours_examples_per_s_over_peer"] = round(
        sides["ours"]["examples_per_s"] / sides["peer"]["examples_per_s"], 3
    )
    out["peer_train_s_to_target_over_ours"] = round(
        out["peer"]["train_s"] / max(out["ours"]["train_s"], 1e-9), 3
    )
    # The whole curve, not its noisy peak alone: the first evaluation at or above each tenth of
    # accuracy between the majority class and the target, per side.
    out["milestones"] = []
    for level in np.arange(np.ceil(majority * 10 + 1e-9) / 10, target, 0.1):
        rows = {name: time_to_target(side["evals"], level) for name, side in sides.items()}
        out["milestones"].append(
            {
                "accuracy": round(float(level), 2),
                **{f"{name}_step": r["step"] for name, r in rows.items()},
                **{f"{name}_train_s": r["train_s"] for name, r in rows.items()},
                "peer_train_s_over_ours": round(
                    rows["peer"]["train_s"] / rows["ours"]["train_s"], 3
                ),
            }
        )
    return out


def main():
    kept = cli.keep_freed_memory()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="base", choices=SIZES, help="preset albert-SIZE")
    parser.add_argument("--layers", type=int, default=0, help="num_layers (0: the preset's)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--eval-batch", type=int, default=64)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--head-lr", type=float, default=1.0, help="the classifier's rate x")
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--dev-sample", type=int, default=256)
    parser.add_argument("--vocab-size", type=int, default=6000, help="at most (char pieces)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--task", default="headlines", help="a `finetune.prepare` dataset")
    parser.add_argument("--config", default=None, help="default: configs/finetune/suite.py:TASK")
    parser.add_argument("--data", default=None, help="default: data/finetune/TASK (prepared)")
    parser.add_argument("--workdir", default="runs/peer_training")
    parser.add_argument("--peer-python", default="python3", help="transformers 5 + torch python")
    parser.add_argument("--order", default="ours,peer", help="which side runs first")
    parser.add_argument("--note", default="", help="machine / load note for the record")
    parser.add_argument("--prepare-only", action="store_true", help="model and inputs only")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    args.config = args.config or f"configs/finetune/suite.py:{args.task}"
    args.data = args.data or f"data/finetune/{args.task}"
    os.makedirs(args.workdir, exist_ok=True)
    work = os.path.abspath(args.workdir)
    args.data = os.path.abspath(args.data)
    t0 = time.perf_counter()
    ckpt, hf, model = build_model(args, work)
    inputs, data_info = featurize(args, ckpt, work)
    setup_s = time.perf_counter() - t0
    print(f"setup {setup_s:.1f}s: {model} {data_info}", file=sys.stderr, flush=True)
    if args.prepare_only:
        return
    sides = {}
    for side in args.order.split(","):
        with LoadSampler() as load:
            if side == "ours":
                sides["ours"] = run_ours(args, ckpt, work)
            else:
                sides["peer"] = run_peer(args, hf, inputs, work)
        sides[side]["load_average_1min"] = load.summary()
        print(json.dumps({side: sides[side]}), file=sys.stderr, flush=True)
    result = {
        "benchmark": "peer_training",
        "task": os.path.basename(args.data),  # the dataset's directory (data/finetune/TASK)
        "config": args.config,
        "model": {
            "shape": f"albert-{args.size}" + (f", {args.layers} layers" if args.layers else ""),
            "init": f"random (seed {args.seed}), encoder dropout 0, classifier dropout 0.1",
            "tokenizer": "SentencePiece char, trained on the training texts",
            **model,
        },
        "data": data_info,
        "steps": args.steps,
        "batch": args.batch,
        "seq": args.seq,
        "learning_rate": args.lr,
        "head_learning_rate_multiplier": args.head_lr,
        "warmup_steps": round(0.1 * args.steps),
        "eval_every": args.eval_every,
        "optimizer": "AdamW with bias correction, b1 0.9, b2 0.999, eps 1e-6, weight decay 0.01 "
        "(not LayerNorm / bias), clip global norm 1.0, linear warmup 10% then linear decay to 0",
        "order": args.order,
        **sides,
        "comparison": summarize(sides, data_info["dev_majority_accuracy"]),
        "setup_s": round(setup_s, 1),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "host_memory_kept": kept,
        "note": args.note,
        "command": shlex.join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]),
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
