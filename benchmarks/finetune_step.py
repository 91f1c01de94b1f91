"""Fine-tuning train-step throughput: sequence classification, ours (shared and unshared) vs peer.

    python benchmarks/finetune_step.py --size base --batch 8 --seq 128 --steps 5
    python benchmarks/finetune_step.py --size base --peer-python /tmp/peer/bin/python

Times one full fine-tuning step (forward + backward + AdamW update, classifier dropout 0.1 on,
encoder and attention dropout 0 as in the reference fine-tuning setup) of the real
classification task (`FinetuneTask.from_config` on a fine-tuning config, a synthetic WordPiece
vocabulary of the preset's size and a small synthetic training file written to a temporary
directory: its loss, head and job as `python -m finetune` runs them), stepped exactly as the
trainer does (`albert_jax.train.trainer.compile_task`, the state donated, on a 1-device mesh) on
the synthetic batch the peer gets too, for each requested sharing layout. Per layout it reports
the compile time (trace + lower + XLA compile, ahead of time), the first step after compiling,
and the median step time (wall; `step_cpu_s`: the process's CPU time, less sensitive to other
load on a shared machine) and examples/s over `--steps` timed steps after `--warmup` untimed
ones.

With `--peer-python` each layout is also run by `benchmarks/peer_finetune.py` (transformers'
`FlaxAlbertForSequenceClassification` + optax AdamW, same sizes, batch and inputs; `none` as
transformers' `num_hidden_groups=L`) with that interpreter, alternating with ours for `--rounds`
rounds on the same machine, and the JSON gains the peer's rows and `ours_over_peer`: per layout,
the ratio of examples/s in each round and their median (alternating rounds, so that load from
elsewhere on a shared machine hits both sides alike), and `best`: the peer's fastest step over
all rounds divided by ours (load only ever slows a step down, so the minimum is the figure least
disturbed by it). Prints one JSON document; `--out FILE` also
writes it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import flax
import jax
import ml_collections
from report import NUM_LABELS, classification_batch, emit, xla_cost  # benchmarks/ on sys.path

from albert_jax import cli
from albert_jax.configs.finetune.common import get_common
from albert_jax.model import presets
from albert_jax.tasks.finetuning import FinetuneTask
from albert_jax.text.tokenization import load_tokenizer
from albert_jax.train import partitioning, trainer
from albert_jax.train.task import Job

SIZES = ("tiny", "small", "base", "large", "xlarge", "xxlarge")
CLASSIFIER_DROPOUT = 0.1
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def model_config_for(args, layout: str):
    return presets.get(
        f"albert-{args.size}",
        layout=layout,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )


def write_inputs(where: str, vocab_size: int, batch: int) -> None:
    """A WordPiece vocabulary of `vocab_size` entries (the preset's: the peer's model has the
    same embedding table) and a training file of `batch` two-label examples under `where`."""
    os.makedirs(os.path.join(where, "tokenizer"), exist_ok=True)
    words = [f"w{i}" for i in range(vocab_size - len(SPECIAL))]
    with open(os.path.join(where, "tokenizer", "vocab.txt"), "w") as f:
        f.write("\n".join((*SPECIAL, *words)) + "\n")
    with open(os.path.join(where, "train.jsonl"), "w") as f:
        for i in range(batch):
            text = " ".join(words[(i + j) % len(words)] for j in range(8))
            f.write(json.dumps({"text": text, "label": ("neg", "pos")[i % NUM_LABELS]}) + "\n")


def finetune_task(args, layout: str, where: str) -> FinetuneTask:
    """The real classification task of a fine-tuning config (`configs/finetune/common.py`) on
    the preset's shape with `layout`, as `python -m finetune` builds it (its loss, head and
    classifier dropout; encoder and attention dropout 0 as in the reference fine-tuning)."""
    c = get_common("classification")
    c.model_from = f"albert-{args.size}"
    c.batch_size = args.batch
    c.task.train = os.path.join(where, "train.jsonl")
    c.task.max_seq_length = args.seq
    c.model.update(hidden_dropout=0.0, attention_dropout=0.0, classifier_dropout=CLASSIFIER_DROPOUT)
    c.execution.update(scan_layers=args.scan, remat=args.remat)
    preset = model_config_for(args, layout)  # the layout as its two group counts (overrides)
    with c.model.unlocked():
        c.model.update(attention_groups=preset.attention_groups, ffn_groups=preset.ffn_groups)
    tokenizer = load_tokenizer(os.path.join(where, "tokenizer"))
    return FinetuneTask.from_config(c, tokenizer, splits=("train",))


def run_config():
    """The trainer's settings: AdamW, one device, no accumulation."""
    optim = dict(name="adamw", learning_rate=1e-5, warmup_steps=0, total_steps=1000)
    return ml_collections.ConfigDict(
        dict(optim=optim, mesh_shape=(1, 1, 1), grad_accum_steps=1, seed=0)
    )


def time_steps(step, state, batch, warmup: int, steps: int):
    """(state, first step seconds, timed wall seconds, timed process CPU seconds, last metrics)."""
    return time_interleaved([(step, state, batch)], warmup, steps)[0]


def time_interleaved(runs, warmup: int, steps: int) -> list[tuple]:
    """`time_steps` for several (step, state, batch) at once, one step of each in turn, so that
    load from elsewhere on a shared machine hits them alike and their ratios stay meaningful."""
    states = [state for _, state, _ in runs]
    metrics = [None] * len(runs)
    times, cpu = [[] for _ in runs], [[] for _ in runs]
    for _ in range(1 + warmup + steps):
        for i, (step, _, batch) in enumerate(runs):
            t, c = time.perf_counter(), time.process_time()
            states[i], metrics[i] = step(states[i], batch)
            jax.block_until_ready((states[i], metrics[i]))
            times[i].append(time.perf_counter() - t)
            cpu[i].append(time.process_time() - c)
    return [
        (states[i], times[i][0], times[i][1 + warmup :], cpu[i][1 + warmup :], metrics[i])
        for i in range(len(runs))
    ]


def compiled_task(config, job: Job, mesh_shape=(1, 1, 1)):
    """The trainer's `compile_task` for `job` (the function `python -m pretrain`, fine-tuning and
    `pretrain.compile` build their step with: donated state, shardings, accumulation) on a
    ('data', 'fsdp', 'tensor') mesh of the first devices (one by default)."""
    with config.unlocked():
        config.mesh_shape = tuple(mesh_shape)
    devices = jax.devices()[: math.prod(mesh_shape)]
    return trainer.compile_task(config, job, devices=devices)


def compile_step(config, job: Job, batch: dict):
    """The step compiled ahead of time: (state, compiled, compile seconds, batch on device)."""
    run = compiled_task(config, job)
    with run.scope():
        state = run.init_fn(jax.random.key(0))
        sharding = partitioning.batch_sharding(run.mesh)
        batch = {k: jax.device_put(v, sharding) for k, v in batch.items()}
        t0 = time.perf_counter()
        compiled = run.step_fn.lower(state, batch).compile()
        return state, compiled, time.perf_counter() - t0, batch


def compile_and_time(config, job: Job, batch: dict, warmup: int, steps: int):
    """`compile_step`, then timed (`time_steps`). Returns (state, compiled, compile seconds,
    first, times, cpu times, metrics)."""
    state, compiled, compile_s, batch = compile_step(config, job, batch)
    state, first, times, cpu, metrics = time_steps(compiled, state, batch, warmup, steps)
    return state, compiled, compile_s, first, times, cpu, metrics


def measure(args, layout: str) -> dict:
    with tempfile.TemporaryDirectory() as where:
        write_inputs(where, model_config_for(args, layout).vocab_size, args.batch)
        task = finetune_task(args, layout, where)
    config, execution = task.model_config, task.execution
    if config != model_config_for(args, layout):  # the peer is built from the preset
        raise RuntimeError(f"the task's model {config} is not the preset's")
    batch = classification_batch(config.vocab_size, args.batch, args.seq)
    batch["label"] = batch.pop("labels")  # the task's target field (the peer's batch: labels)
    state, compiled, compile_s, first, times, cpu, metrics = compile_and_time(
        run_config(), task.job(), batch, args.warmup, args.steps
    )
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(state.params))
    step_s = statistics.median(times)
    return {
        "layout": layout,
        "scan_layers": execution.scan_layers,
        "remat": execution.remat,
        "params": int(n_params),
        "compile_s": round(compile_s, 2),
        **xla_cost(compiled),
        "first_step_s": round(first, 3),
        "step_s": round(step_s, 4),
        "step_s_min": round(min(times), 4),
        "step_cpu_s": round(statistics.median(cpu), 4),
        "examples_per_s": round(args.batch / step_s, 2),
        "loss": round(float(metrics["loss"]), 4),
    }


PEER_GROUPS = {"all": lambda L: 1, "none": lambda L: L}  # layouts transformers can express


def run_peer(args, config, layout: str) -> dict:
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer_finetune.py")
    cmd = [args.peer_python, script, "--size", args.size, "--batch", str(args.batch)]
    cmd += ["--groups", str(PEER_GROUPS[layout](config.num_layers))]
    cmd += ["--seq", str(args.seq), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"peer benchmark failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    peer = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = {k: getattr(config, k) for k in ("vocab_size", "embedding_size", "hidden_size")}
    ours.update(
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        intermediate_size=config.intermediate_size,
    )
    if peer.get("model") != ours or peer.get("layout") != layout:
        raise RuntimeError(f"peer model {peer.get('model')} differs from ours {ours}")
    return peer


def main():
    kept = cli.keep_freed_memory()  # host memory as the entry points have it
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="base", choices=SIZES, help="preset albert-SIZE")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5, help="timed steps (median reported)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps after the first")
    parser.add_argument("--layouts", default="all,none", help="comma-separated sharing layouts")
    parser.add_argument(
        "--scan",
        action="store_true",
        help="nn.scan over layers (default: unrolled, as in fine-tuning)",
    )
    parser.add_argument("--remat", default="none", help="none | full | save_dots")
    parser.add_argument("--peer-python", default=None, help="interpreter for peer_finetune.py")
    parser.add_argument("--rounds", type=int, default=1, help="alternating ours/peer rounds")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args()

    layouts = [x.strip() for x in args.layouts.split(",")]
    rows, peers, ratios = [], [], {}
    for r in range(args.rounds):
        for layout in layouts:
            rows.append(dict(measure(args, layout), round=r))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            if args.peer_python and layout in PEER_GROUPS:
                peers.append(dict(run_peer(args, model_config_for(args, layout), layout), round=r))
                print(json.dumps(peers[-1]), file=sys.stderr, flush=True)
                ratio = rows[-1]["examples_per_s"] / peers[-1]["examples_per_s"]
                ratios.setdefault(layout, []).append(round(ratio, 3))
    result = {
        "benchmark": "finetune_step",
        "task": "sequence_classification",
        "size": args.size,
        "batch": args.batch,
        "seq": args.seq,
        "steps": args.steps,
        "warmup": args.warmup,
        "optimizer": "adamw lr 1e-5, clip 1.0",
        "dropout": {"hidden": 0.0, "attention": 0.0, "classifier": CLASSIFIER_DROPOUT},
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "flax": flax.__version__,
        "machine": platform.machine(),
        "host_memory_kept": kept,
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "ours": rows,
    }
    if peers:
        result["peer"] = peers
        best = lambda rs, k: min(r["step_s_min"] for r in rs if r["layout"] == k)  # noqa: E731
        result["ours_over_peer"] = {
            k: {
                "rounds": v,
                "median": round(statistics.median(v), 3),
                "best": round(best(peers, k) / best(rows, k), 3),
            }
            for k, v in ratios.items()
        }
    emit(result, args.out)


if __name__ == "__main__":
    main()
