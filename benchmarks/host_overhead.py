"""Host overhead per training step: the trainer's own loop (`trainer.train`) against the same
jitted step run back to back on batches already on device, on a model so small that a step's
device work takes a few milliseconds, so that what the loop adds per step shows.

    python benchmarks/host_overhead.py                                # 400 steps, 5 rounds
    python benchmarks/host_overhead.py --steps 40 --log-every 10 --rounds 1   # quick

`device`: the compiled step (`trainer.compile_task`'s, state donated) dispatched back to back on
device-resident batches: the step when nothing else runs. `every_step` / `log_steps`:
`trainer.train` on a synthetic pretraining task (MLM + SOP, LAMB, one device, batches from a
grain iterator over batches made in advance, a checkpoint only at the end, no progress bar),
logging every step (`log_every=1`: every step's metrics reach the host) or every `--log-every`
steps. Each is timed between the pulls of batches steps/5 and steps - 5 (the steady state: no
compilation, no final checkpoint), in wall time (`wall_s`), this process's CPU time (`cpu_s`,
all threads: on a CPU backend the device's work too) and the CPU time of the thread that runs
the loop (`thread_s`: the host's own work, dispatch included; XLA computes on threads of its
own, so this one is the least disturbed by other load). `host_wall_s` / `host_cpu_s` /
`host_thread_s` are the loop's per-step figures over the bare step's: what the loop costs.
Every round runs the three in turn, so that load from elsewhere hits them alike; `median` is
over rounds. The script uses only what the trainer has had since before device-side metrics, so
a copy in an older checkout's benchmarks/ measures that checkout (`code`: its commit). One JSON
document.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import grain
import jax
import ml_collections
import numpy as np
from report import emit  # benchmarks/ on sys.path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # configs/

from albert_jax import AlbertConfig, cli  # noqa: E402
from albert_jax.tasks.pretraining import PretrainingTask  # noqa: E402
from albert_jax.train import trainer  # noqa: E402

VOCAB, SEQ, PREDS = 512, 16, 4


def make_batches(n: int, batch: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        ids = rng.integers(5, VOCAB, (batch, SEQ)).astype(np.int32)
        pos = np.sort(rng.permuted(np.tile(np.arange(1, SEQ), (batch, 1)), axis=1)[:, :PREDS], 1)
        out.append(
            {
                "input_ids": ids,
                "segment_ids": (np.arange(SEQ) >= SEQ // 2).astype(np.int32)[None].repeat(batch, 0),
                "input_mask": np.ones((batch, SEQ), np.int32),
                "masked_lm_positions": pos.astype(np.int32),
                "masked_lm_ids": np.take_along_axis(ids, pos, 1),
                "masked_lm_weights": np.ones((batch, PREDS), np.float32),
                "sentence_order_label": rng.integers(0, 2, batch).astype(np.int32),
            }
        )
    return out


def make_task(config, batches, clock=None):
    """The synthetic pretraining task; `clock` (a list) gets (wall, cpu) times at each pull."""
    model = AlbertConfig(
        vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_layers=2, num_heads=2,
        intermediate_size=64, max_position_embeddings=SEQ,
    )  # fmt: skip

    def pull(i):
        if clock is not None:
            clock.append((time.perf_counter(), time.process_time(), time.thread_time()))
        return batches[int(i) % len(batches)]

    class Synthetic(PretrainingTask):
        def train_iterator(self, process_index, process_count):
            options = grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)
            return iter(grain.MapDataset.range(1 << 30).map(pull).to_iter_dataset(options))

    return Synthetic(config, config.data, model_config=model)


def make_config(steps: int, log_every: int, batch: int):
    from albert_jax.configs.pretrain.common import pretrain_defaults

    c = pretrain_defaults()
    c.data = ml_collections.ConfigDict(
        dict(global_batch_size=batch, max_seq_length=SEQ, max_predictions=PREDS)
    )
    c.total_steps = c.optim.total_steps = steps
    c.optim.warmup_steps = 0
    c.log_every, c.checkpoint_every, c.eval_every = log_every, steps, 0
    c.progress_bar = False
    c.mesh_shape = (-1, 1, 1)
    return c


def per_step(clock, steps: int) -> dict[str, float]:
    """Seconds per step between the pulls of batches steps/5 and steps - 5 (the steady state:
    no compilation, no first interval, no final checkpoint): wall, process CPU, and the CPU of
    the loop's own thread (the host's work: XLA computes on threads of its own)."""
    lo, hi = steps // 5, steps - 5
    (w0, c0, t0), (w1, c1, t1) = clock[lo], clock[hi]
    n = hi - lo
    return {"wall_s": (w1 - w0) / n, "cpu_s": (c1 - c0) / n, "thread_s": (t1 - t0) / n}


def device_step(config, batches, steps: int) -> dict[str, float]:
    """The compiled step alone, back to back on batches already on device."""
    run = trainer.compile_task(config, make_task(config, batches).job())
    with run.scope():
        state = run.initial_state(0)
        placed = [trainer.global_batch(b, run.mesh) for b in batches]
        state, m = run.step_fn(state, placed[0])  # compile
        jax.block_until_ready((state, m))
        clock = []
        for i in range(steps):
            clock.append((time.perf_counter(), time.process_time(), time.thread_time()))
            state, m = run.step_fn(state, placed[i % len(placed)])
        jax.block_until_ready((state, m))
    return per_step(clock, steps)


def loop_step(config, batches, steps: int) -> dict[str, float]:
    """`trainer.train` itself, timed at its batch pulls."""
    clock = []
    with tempfile.TemporaryDirectory() as workdir:
        with contextlib.redirect_stdout(sys.stderr):  # stdout: the JSON document alone
            trainer.train(config, workdir, make_task(config, batches, clock).job())
        root = logging.getLogger()
        for h in [h for h in root.handlers if getattr(h, "baseFilename", "").startswith(workdir)]:
            root.removeHandler(h)  # the run's train.log
            h.close()
    return per_step(clock, steps)


def code_version() -> str:
    """The checkout the trainer was imported from: its commit (and '+' if it has changes)."""
    where = os.path.dirname(os.path.abspath(trainer.__file__))
    try:
        git = lambda *a: subprocess.run(  # noqa: E731
            ["git", *a], cwd=where, capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = git("status", "--porcelain", "--untracked-files=no")
        return git("rev-parse", "--short", "HEAD") + ("+" if changed else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=400, help="steps per loop run")
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if args.steps < 20:
        p.error("--steps must be at least 20 (the first fifth and the last 5 are not timed)")
    kept = cli.keep_freed_memory()
    batches = make_batches(16, args.batch)
    rounds = []
    for r in range(args.rounds):
        dev = device_step(make_config(args.steps, 1, args.batch), batches, args.steps)
        row = {"round": r, "device": dev}
        for name, log_every in (("every_step", 1), ("log_steps", args.log_every)):
            loop = loop_step(make_config(args.steps, log_every, args.batch), batches, args.steps)
            row[name] = {
                **loop,
                "host_wall_s": loop["wall_s"] - dev["wall_s"],
                "host_cpu_s": loop["cpu_s"] - dev["cpu_s"],
                "host_thread_s": loop["thread_s"] - dev["thread_s"],
            }
        rounds.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    median = {
        part: {k: statistics.median(r[part][k] for r in rounds) for k in rounds[0][part]}
        for part in ("device", "every_step", "log_steps")
    }
    emit(
        {
            "code": code_version(),
            "host": platform.node(),
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "load_average": os.getloadavg(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
            "host_memory_kept": kept,
            "steps": args.steps,
            "log_every": args.log_every,
            "batch": args.batch,
            "seq": SEQ,
            "rounds": rounds,
            "median": median,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
