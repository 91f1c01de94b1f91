"""Pretraining train-step throughput, model FLOP/s and MFU against a matmul peak measured in the
same run; optionally a peer (transformers) in the same invocation.

    python benchmarks/train_step.py --size base --layouts all,none --dtypes float32,bfloat16
    python benchmarks/train_step.py --size tiny --objectives mlm+sop,electra --steps 3
    python benchmarks/train_step.py --size base --peer hf_flax --peer-python /tmp/peer/bin/python
    python benchmarks/train_step.py --size base --inference      # encoder forward only

One step is the trainer's own (`albert_jax.train.trainer.compile_task`, as every entry point
builds it: the state donated, on a 1-device mesh) of the real pretraining task
(`albert_jax.tasks.pretraining.make_task`: MLM at `--preds` masked positions + SOP, or ELECTRA's
generator + discriminator) with ALBERT's LAMB, on a fixed random batch. Per configuration (size x
objective x layout x dtype x scan/unrolled x remat; `--attention-impl` and `--matmul-grad` set for
all of them) it reports the compile time, the first and the
median step, tokens/s, model TFLOP/s (`task.flops_per_example`, matmuls only, every layer
application counted), MFU = model FLOP/s over the matmul peak of that dtype, XLA's FLOPs, bytes
accessed and temporary memory of the compiled step, and the loss. The peak is a plain `jnp.dot` of
the FFN's shape ([batch*seq, H] x [H, I], bf16 inputs accumulating in f32 for bfloat16), timed
in the same process. `--peer hf_flax|hf_torch` runs `../shared/peer/peer_bench.py`
(pretraining step of transformers' Flax ALBERT + optax LAMB, or PyTorch + AdamW, f32) with
`--peer-python` after each round of ours, alternating for `--rounds`, and reports the peer's
step over each of our configurations per round (`peer_step_over_ours`: > 1 means ours is
faster) and over the time the model FLOPs take at the matmul peak (`step_at_peak_s`;
`peer_step_over_step_at_peak`: the most any implementation could be faster than the peer here).
`none_over_all`: the not-shared step over the all-shared one at the same settings, per round (the
sharing ablation's cost at equal FLOPs). Within a round every configuration is compiled
first and then timed one step of each in turn, so that load from elsewhere on a shared machine
hits all of them alike; MFU is against the best matmul rate of the invocation (measured before
each round). `--inference`: the encoder's forward pass (AlbertModel) instead, shared against not
shared at equal size (sharing saves parameters, not compute). One JSON document.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from finetune_step import compile_step, time_interleaved  # benchmarks/ on sys.path
from report import emit, pair_ids, xla_cost

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # configs/

from albert_jax import cli, presets  # noqa: E402
from albert_jax.model.albert import AlbertModel  # noqa: E402
from albert_jax.model.config import Execution  # noqa: E402

SIZES = ("tiny", "small", "base", "large", "xlarge", "xxlarge")
PEER_SCRIPT = os.path.join(REPO, "..", "shared", "peer", "peer_bench.py")


def matmul_peak(rows: int, hidden: int, inner: int, dtype: str, reps: int = 10) -> float:
    """FLOP/s of x [rows, H] @ w [H, I] in `dtype` (f32 accumulation), best of `reps`."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((rows, hidden)), dtype)
    w = jnp.asarray(rng.standard_normal((hidden, inner)), dtype)
    dot = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))
    dot(x, w).block_until_ready()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        dot(x, w).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return 2.0 * rows * hidden * inner / best


def run_config(args, objective: str) -> ml_collections.ConfigDict:
    from albert_jax.configs.pretrain.common import pretrain_defaults

    c = pretrain_defaults()
    c.objective = objective
    c.data = ml_collections.ConfigDict(
        dict(global_batch_size=args.batch, max_seq_length=args.seq, max_predictions=args.preds)
    )
    c.optim.total_steps = 1000
    c.optim.warmup_steps = 0
    return c


def model_config(args, layout: str):
    return presets.get(
        f"albert-{args.size}",
        layout=layout,
        vocab_size=args.vocab,
        max_position_embeddings=max(512, args.seq),
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )


def execution_for(args, dtype: str, scan: bool) -> Execution:
    return Execution(
        dtype=dtype,
        scan_layers=scan,
        remat=args.remat,
        attention_impl=args.attention_impl,
        matmul_grad=args.matmul_grad,
    )


def make_batch(vocab: int, batch: int, seq: int, preds: int) -> dict[str, np.ndarray]:
    """Random ids, two segments, `preds` distinct masked positions per row (as peer_bench.py)."""
    rng = np.random.default_rng(0)
    pos = np.stack([np.sort(rng.choice(np.arange(1, seq - 1), preds, replace=False))
                    for _ in range(batch)]).astype(np.int32)  # fmt: skip
    ids, segs = pair_ids(rng, vocab, batch, seq)
    return {
        "input_ids": ids,
        "segment_ids": segs,
        "input_mask": np.ones((batch, seq), np.int32),
        "masked_lm_positions": pos,
        "masked_lm_ids": np.take_along_axis(ids, pos, axis=1),
        "masked_lm_weights": np.ones((batch, preds), np.float32),
        "sentence_order_label": rng.integers(0, 2, batch).astype(np.int32),
    }


def prepare_train(args, objective, layout, dtype, scan) -> dict:
    """One configuration's train step, compiled, with its state and batch (`time_interleaved`)."""
    config = run_config(args, objective)
    task = make_task_for(config, model_config(args, layout), execution_for(args, dtype, scan))
    batch = make_batch(args.vocab, args.batch, args.seq, args.preds)
    state, compiled, compile_s, batch = compile_step(config, task.job(), batch)
    flops = task.flops_per_example() * args.batch
    return dict(
        config=task.model_config,
        execution=task.execution,
        run=(compiled, state, batch),
        compiled=compiled,
        compile_s=compile_s,
        flops=flops,
        objective=objective,
    )


def make_task_for(config, model_config, execution: Execution):
    """The pretraining task of `config.objective` on `model_config`, run as `execution` says
    (written into `config.execution`, where the task reads it)."""
    from albert_jax.tasks.pretraining import ElectraTask, PretrainingTask

    config.execution.update(dataclasses.asdict(execution))
    cls = ElectraTask if config.objective == "electra" else PretrainingTask
    return cls(config, config.data, model_config=model_config)


def prepare_inference(args, layout, dtype, scan) -> dict:
    """`prepare_train` for the encoder's forward pass."""
    config, execution = model_config(args, layout), execution_for(args, dtype, scan)
    model = AlbertModel(config, execution)
    ids = jnp.asarray(make_batch(args.vocab, args.batch, args.seq, args.preds)["input_ids"])
    params = jax.jit(lambda k: nn.meta.unbox(model.init(k, ids[:1, :8])["params"]))(
        jax.random.key(0)
    )
    fwd = jax.jit(lambda p, x: model.apply({"params": p}, x).sequence_output)
    t0 = time.perf_counter()
    compiled = fwd.lower(params, ids).compile()
    compile_s = time.perf_counter() - t0

    def step(p, x):
        return p, compiled(p, x)

    from albert_jax.model.flops import encoder_flops_per_token

    flops = args.batch * args.seq * encoder_flops_per_token(config, args.seq)
    return dict(
        config=config,
        execution=execution,
        run=(step, params, ids),
        compiled=compiled,
        compile_s=compile_s,
        flops=flops,
        objective=None,
    )


def measure_round(args, configurations) -> list[dict]:
    """Every configuration compiled, then timed one step of each in turn (`time_interleaved`)."""
    prepared = [
        prepare_inference(args, *c[1:]) if args.inference else prepare_train(args, *c)
        for c in configurations
    ]
    timed = time_interleaved([p["run"] for p in prepared], args.warmup, args.steps)
    rows = []
    for p, (_, first, times, cpu, metrics) in zip(prepared, timed, strict=True):
        timing = (p["compile_s"], first, times, cpu)
        row = _row(p["config"], p["execution"], p["compiled"], *timing, p["flops"], args)
        if p["objective"]:
            row |= {"objective": p["objective"], "loss": round(float(metrics["loss"]), 4)}
        rows.append(row)
    return rows


def _row(config, execution, compiled, compile_s, first, times, cpu, flops, args) -> dict:
    step_s = statistics.median(times)
    memory = compiled.memory_analysis()
    row = {
        "layout": config.layout,
        "dtype": execution.dtype,
        "scan_layers": execution.scan_layers,
        "remat": execution.remat,
        "attention_impl": execution.attention_impl,
        "matmul_grad": execution.matmul_grad,
        "compile_s": round(compile_s, 2),
        **xla_cost(compiled),
        "xla_temp_gb": round(memory.temp_size_in_bytes / 1e9, 3) if memory else None,
        "first_step_s": round(first, 3),
        "step_s": round(step_s, 4),
        "step_s_min": round(min(times), 4),
        "step_cpu_s": round(statistics.median(cpu), 4),
        "tokens_per_s": round(args.batch * args.seq / step_s, 1),
        "model_tflop": flops / 1e12,  # a step's
        "model_tflops_per_s": round(flops / step_s / 1e12, 4),
    }
    if jax.default_backend() != "cpu":
        row["peak_memory_gb"] = peak_memory_gb()
    return row


def peak_memory_gb() -> float | None:
    """The first device's peak bytes in use so far, in GB; None where it reports none (CPU)."""
    stats = jax.devices()[0].memory_stats() if jax.default_backend() != "cpu" else None
    peak = (stats or {}).get("peak_bytes_in_use")
    return None if peak is None else round(peak / 1e9, 3)


def run_peer(args) -> dict:
    cmd = [args.peer_python, args.peer_script, "--impl", args.peer, "--size", args.size]
    cmd += ["--batch", str(args.batch), "--seq", str(args.seq), "--steps", str(args.steps)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"peer benchmark failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def key(row: dict, without: str = "") -> str:
    """One configuration's name: objective, layout, dtype, scan or unrolled, remat."""
    parts = [
        row.get("objective", "forward"),
        "*" if without == "layout" else row["layout"],
        row["dtype"],
        "scan" if row["scan_layers"] else "unrolled",
        f"remat={row['remat']}",
    ]
    return " ".join(parts)


def ratios(rows: list[dict], ratio) -> dict[str, dict]:
    """{configuration: {"rounds": [its ratio in each round], "median": ...}}."""
    by: dict[str, list[float]] = {}
    for row in rows:
        by.setdefault(key(row), []).append(round(ratio(row), 3))
    return {k: {"rounds": v, "median": round(statistics.median(v), 3)} for k, v in by.items()}


def step_parser(doc: str, batch: int, steps: int, warmup: int) -> argparse.ArgumentParser:
    """The flags of a timed train step (shared with accelerator_step.py): its size and shape, the
    timing, remat and the accelerator switches."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--size", default="base", choices=SIZES, help="preset albert-SIZE")
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--preds", type=int, default=20, help="masked positions per sequence")
    p.add_argument("--vocab", type=int, default=30000, help="as peer_bench.py's models")
    p.add_argument("--steps", type=int, default=steps, help="timed steps (median reported)")
    p.add_argument("--warmup", type=int, default=warmup, help="untimed steps after the first")
    p.add_argument("--remat", default="none", help="none | full | save_dots")
    add_accelerator_args(p)
    return p


def step_shape(args) -> dict:
    """`step_parser`'s size, shape and step count as set, for the JSON."""
    return {k: getattr(args, k) for k in ("size", "batch", "seq", "preds", "vocab", "steps")}


def add_accelerator_args(p: argparse.ArgumentParser) -> None:
    """Execution's attention_impl and matmul_grad (auto: the backend's choice), as flags."""
    p.add_argument("--attention-impl", default="auto", help="auto | fused | explicit")
    p.add_argument("--matmul-grad", default="auto", help="auto | custom | autodiff")


def _list(value: str) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()]


def main():
    kept = cli.keep_freed_memory()  # host memory as the entry points have it
    p = step_parser(__doc__, batch=8, steps=5, warmup=1)
    p.add_argument("--objectives", default="mlm+sop", help="mlm+sop, mlm, electra (comma list)")
    p.add_argument("--layouts", default="all,none", help="all, attention, ffn, none, groups:G")
    p.add_argument("--dtypes", default="float32", help="float32, bfloat16 (compute dtype)")
    p.add_argument("--scan", default="true", help="true, false or both")
    p.add_argument("--inference", action="store_true", help="encoder forward pass only")
    p.add_argument("--peer", default=None, choices=("hf_flax", "hf_torch"))
    p.add_argument("--peer-python", default=sys.executable, help="interpreter with the peer")
    p.add_argument("--peer-script", default=PEER_SCRIPT)
    p.add_argument("--rounds", type=int, default=1, help="alternating ours/peer rounds")
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args()

    scans = {"true": [True], "false": [False], "both": [True, False]}[args.scan]
    size = presets.get(f"albert-{args.size}")
    tokens = args.batch * args.seq
    peaks = {d: 0.0 for d in _list(args.dtypes)}  # the best seen: measured before every round
    configurations = [
        (objective, layout, dtype, scan)
        for objective in ([None] if args.inference else _list(args.objectives))
        for layout in _list(args.layouts)
        for dtype in _list(args.dtypes)
        for scan in scans
    ]
    rows, peers = [], []
    for r in range(args.rounds):
        for d, best in peaks.items():
            peak = matmul_peak(tokens, size.hidden_size, size.intermediate_size, d)
            peaks[d] = max(best, peak)
        for row in measure_round(args, configurations):
            rows.append(dict(row, round=r))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        if args.peer:
            peers.append(dict(run_peer(args), round=r))
            print(json.dumps(peers[-1]), file=sys.stderr, flush=True)
    for row in rows:  # MFU against the best matmul rate seen in the invocation
        row["mfu"] = round(row["model_tflops_per_s"] * 1e12 / peaks[row["dtype"]], 3)
        # the model FLOPs at that rate: no implementation of this step runs much faster here
        row["step_at_peak_s"] = round(row["model_tflop"] * 1e12 / peaks[row["dtype"]], 6)
    result = {
        "benchmark": "inference" if args.inference else "train_step",
        **step_shape(args),
        "optimizer": "lamb (ALBERT's), clip 1.0",
        "matmul_peak_tflops": {d: round(v / 1e12, 4) for d, v in peaks.items()},
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0].device_kind),
        "jax": jax.__version__,
        "flax": flax.__version__,
        "machine": platform.machine(),
        "host_memory_kept": kept,
        "cpus": os.cpu_count(),
        "ours": rows,
    }
    if peers:
        result["peer"] = peers
        result["peer_step_over_ours"] = ratios(
            rows, lambda row: peers[row["round"]]["step_s"] / row["step_s"]
        )
        # the most any implementation could gain over the peer at the matmul peak
        result["peer_step_over_step_at_peak"] = ratios(
            rows, lambda row: peers[row["round"]]["step_s"] / row["step_at_peak_s"]
        )
    # The sharing ablation's cost: the not-shared step over the all-shared one, same settings.
    step = {
        (key(row, "layout"), row["round"]): row["step_s"] for row in rows if row["layout"] == "all"
    }
    if not args.inference:
        result["none_over_all"] = ratios(
            [r for r in rows if r["layout"] == "none" and (key(r, "layout"), r["round"]) in step],
            lambda row: row["step_s"] / step[(key(row, "layout"), row["round"])],
        )
    emit(result, args.out)


if __name__ == "__main__":
    main()
