"""The unsharing study's cheap point against the full one, on one task and the same seeds: the
learning-rate search's trials and each epoch's dev pass scored on a fixed sample of dev
(`--config.evals.dev.sample`) instead of the whole dev set; the final dev and test score
everything either way.

    uv run python benchmarks/dev_sample.py --task ner --sample 1000 --seeds 0,1,2,3,4 \
        --init runs/sw_unshare_study/pretrain/base/model \
        --data runs/sw_unshare_study/data/finetune/ner --workdir runs/bench_dev_sample

The task is `configs/finetune/searched.py:TASK` as the study runs it (`--data` holds its
`finetune.prepare` files; `--set KEY=VALUE` adds config overrides, e.g. total_steps for a smoke
run). One set of trainings serves both sides, so their difference is the scoring alone:
- the search runs twice from the same seed, its trials scored on the sample (after) and on the
  whole dev set (before): the two chosen rates;
- each seed trains once at the rate the sample chose, with the sample (it picks the best epoch,
  as in the study), the whole dev set and test evaluated at every epoch: "before" reads test at
  the epoch the whole dev set picks, "after" at the epoch the sample picks (its results.json).

Prints one JSON document: both rates, test mean ± std of both sides and their difference against
the seeds' spread (`within_spread`: |difference| <= the larger std), the seconds of a dev pass
each way (medians over the run's evaluations) and of the whole benchmark.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

import jax
from report import emit  # benchmarks/ on sys.path

from albert_jax import cli
from albert_jax.configs.finetune import searched
from albert_jax.jobs import lr_search
from albert_jax.jobs import run as runs
from albert_jax.tasks.finetuning import FinetuneData, FinetuneTask
from albert_jax.train.config import EvalConfig


def task_config(args, seed: int, sample: int):
    c = searched.get_config(args.task)
    c.init, c.seed, c.seeds = args.init, seed, str(seed)
    for split in ("train", "dev", "test"):
        ext = os.path.splitext(c.task[split])[1]
        c.task[split] = os.path.join(args.data, f"{split}{ext}")
    c.progress_bar = False
    c.evals.dev.sample = sample
    for item in args.set:
        key, _, value = item.partition("=")
        c.update_from_flattened_dict({key: type(_leaf(c, key))(value)})
    return c


def _leaf(c, key):
    for part in key.split("."):
        c = c[part]
    return c


def search(args, sample: int, workdir: str) -> dict:
    config = task_config(args, args.seeds[0], sample)
    data = FinetuneData(config)
    optim, _ = runs.resolve_learning_rate(config, data.model_config, search=True)
    plan = runs.schedule(config, len(data.features["train"]["input_ids"])).with_optim(**optim)
    fallback = runs.auto_learning_rate(data.model_config.hidden_size)[0]
    return lr_search.search(config, plan, data, workdir, fallback)


def rows(workdir: str, split: str) -> dict[int, dict]:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return {r["step"]: r for r in map(json.loads, f) if r["split"] == split}


def best_step(evals: dict[int, dict], metric: str, mode: str) -> int:
    """The trainer's rule (`trainer._Best`): the first step with the best score."""
    sign = 1.0 if mode == "max" else -1.0
    return max(sorted(evals), key=lambda s: (sign * evals[s][metric], -s))


def seed_run(args, seed: int, rate: float, workdir: str) -> dict:
    config = task_config(args, seed, args.sample)
    config.optim.learning_rate = rate
    config.lr_search.enabled = False
    config.evals.dev_all = dataclasses.asdict(EvalConfig(split="dev"))  # the whole dev, each epoch
    config.evals.test.every = 0  # test at every epoch too (read at either side's best)
    summary = runs.run(config, workdir)
    if not summary:  # SIGTERM: its checkpoint is saved
        raise SystemExit(f"stopped in {workdir}: rerun the same command to resume")
    metric = summary["metric"]
    res = json.load(open(os.path.join(workdir, "results.json")))
    mode = "min" if "loss" in metric else "max"
    sampled, whole = rows(workdir, "eval"), rows(workdir, "eval_dev_all")
    test = rows(workdir, "eval_test")
    before, after = best_step(whole, metric, mode), best_step(sampled, metric, mode)
    assert after == res["best_step"], (after, res["best_step"])
    return {
        "seed": seed,
        "before": {"best_step": before, "test": test[before][metric]},
        "after": {"best_step": after, "test": res["test"][metric]},
    }


TIMES: dict[str, list[float]] = {}  # seconds of each evaluation pass, by split


def timed(evaluate):
    def wrapper(self, run, step, split=None, write=None):
        t0 = time.perf_counter()
        out = evaluate(self, run, step, split, write)
        TIMES.setdefault(split or "dev", []).append(time.perf_counter() - t0)
        return out

    return wrapper


def _mean_std(values):
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "std": std}


def main(argv=None):
    kept = cli.keep_freed_memory()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="ner")
    p.add_argument("--init", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--sample", type=int, default=1000)
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--workdir", default="runs/bench_dev_sample")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--out")
    args = p.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",")]
    FinetuneTask.evaluate = timed(FinetuneTask.evaluate)
    t0 = time.time()
    after = search(args, args.sample, os.path.join(args.workdir, "search_sample"))
    before = search(args, 0, os.path.join(args.workdir, "search_whole"))
    seeds = [seed_run(args, s, after["chosen"], os.path.join(args.workdir, f"seed_{s}"))
             for s in args.seeds]  # fmt: skip
    sides = {side: _mean_std([r[side]["test"] for r in seeds]) for side in ("before", "after")}
    diff = sides["after"]["mean"] - sides["before"]["mean"]
    emit(
        {
            "benchmark": "dev_sample",
            "task": args.task,
            "sample": args.sample,
            "seeds": args.seeds,
            "metric": after["metric"],
            "rate_after": after["chosen"],
            "rate_before": before["chosen"],
            "same_rate": after["chosen"] == before["chosen"],
            "search_seconds": {
                "after": sum(t["seconds"] for t in after["trials"]),
                "before": sum(t["seconds"] for t in before["trials"]),
            },
            "test_before": sides["before"],
            "test_after": sides["after"],
            "difference": diff,
            "within_spread": abs(diff) <= max(sides["before"]["std"], sides["after"]["std"]),
            "per_seed": seeds,
            "pass_seconds": {k: round(statistics.median(v), 2) for k, v in TIMES.items()},
            "wall_s": round(time.time() - t0, 1),
            "backend": jax.default_backend(),
            "cpus": os.cpu_count(),
        },
        args.out,
    )
    del kept


if __name__ == "__main__":
    sys.exit(main())
