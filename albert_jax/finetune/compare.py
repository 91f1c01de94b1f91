r"""`python -m finetune.compare`: fine-tuning runs side by side, each against a control, with
Welch's t-test over seeds.

  python -m finetune.compare runs/sent_pretrained runs/sent_random --control runs/sent_random \
      --baseline runs/sentiment_baseline.json

Each RUN is a `python -m finetune --config.seeds=...` workdir (its `summary.json`); a row gives the
learning rate (searched on dev, or the fallback by model size, when `lr_search` chose it), the seeds
whose dev or test predictions collapsed to one class, the metric's mean ± sample std over seeds on
dev (best checkpoint) and test, the per-seed test values, and, against the control run (default: the
first random-init run given, else the first run), the difference of the test means with Welch's t
and two-sided p (scipy). `--baseline` adds the rows of a `python -m finetune.baseline` JSON line
(the non-neural baseline and, for classification, the majority class). Prints Markdown; `--json`
also writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from albert_jax.errors import InputError
from albert_jax.scoring.metrics import welch_t


class CompareError(InputError):
    """A run or baseline file that cannot be compared (reported as one line, exit 2)."""


def load_run(workdir: str) -> dict:
    path = os.path.join(workdir, "summary.json")
    try:
        with open(path) as f:
            summary = json.load(f)
    except FileNotFoundError:
        raise CompareError(
            f"{path}: no such file (is {workdir} a finished `python -m finetune` run?)"
        ) from None
    metric = summary["metric"]
    per_seed = summary["per_seed"]
    seeds = sorted(per_seed, key=int)
    for s in seeds:
        for split in ("dev", "test"):
            if metric not in per_seed[s].get(split, {}):
                raise CompareError(f"{path}: seed {s} has no {split} {metric!r}")
    collapsed = [
        int(s) for s in seeds if any(per_seed[s][x].get("collapsed") for x in ("dev", "test"))
    ]
    return {
        "run": os.path.normpath(workdir),
        "metric": metric,
        "learning_rate": _learning_rate(workdir, summary, seeds),
        "collapsed": collapsed,
        "random_init": bool(summary.get("random_init")),
        "layout": summary.get("layout", ""),
        "seeds": [int(s) for s in seeds],
        "dev": [per_seed[s]["dev"][metric] for s in seeds],
        "test": [per_seed[s]["test"][metric] for s in seeds],
    }


def _learning_rate(workdir: str, summary: dict, seeds: list[str]) -> str:
    """'1e-4 (searched)' / '3e-4 (fallback)' from the search's record, else the run's config."""
    search = summary.get("lr_search")
    if search:
        return f"{search['chosen']:g} ({'fallback' if search.get('fallback') else 'searched'})"
    for d in (workdir, *(os.path.join(workdir, f"seed_{s}") for s in seeds)):
        try:
            with open(os.path.join(d, "config.json")) as f:
                return f"{json.load(f)['optim']['learning_rate']:g}"
        except (OSError, KeyError, TypeError, ValueError):
            continue
    return ""


def compare(runs: list[dict], control: dict) -> list[dict]:
    rows = []
    for r in runs:
        row = dict(r)
        for split in ("dev", "test"):
            v = np.asarray(r[split], np.float64)
            row[f"{split}_mean"] = float(v.mean()) if v.size else float("nan")
            row[f"{split}_std"] = float(v.std(ddof=1)) if v.size > 1 else 0.0
        if r is not control:
            row["diff"] = float(np.mean(r["test"]) - np.mean(control["test"]))
            row["t"], row["p"] = welch_t(r["test"], control["test"])
        rows.append(row)
    return rows


def _pct(x: float) -> str:
    return f"{100 * x:.2f}"


def markdown(rows: list[dict], control: dict, baseline: dict | None) -> str:
    metric = control["metric"]
    out = [
        f"{metric} (%), mean ± sample std over seeds; Welch's t-test on test against "
        f"{control['run']}",
        "",
        "| run | init | lr | seeds | collapsed | dev | test | per-seed test | diff | t | p |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        init = "random" if r["random_init"] else f"pretrained ({r['layout']})"
        if "diff" in r:
            vs = f"{100 * r['diff']:+.2f} | {r['t']:.2f} | {r['p']:.3g}"
        else:
            vs = "(control) | | "
        out.append(
            f"| {r['run']} | {init} | {r['learning_rate']} | {len(r['seeds'])} | "
            f"{len(r['collapsed'])} | {_pct(r['dev_mean'])} ± "
            f"{_pct(r['dev_std'])} | {_pct(r['test_mean'])} ± {_pct(r['test_std'])} | "
            f"{', '.join(_pct(x) for x in r['test'])} | {vs} |"
        )
    for name, res in (baseline or {}).items():
        out.append(
            f"| {name} | | | | | {_pct(res['dev'][metric])} | {_pct(res['test'][metric])} | | | | |"
        )
    return "\n".join(out)


def baseline_rows(path: str, metric: str) -> dict:
    with open(path) as f:
        result = json.loads(f.read().strip().splitlines()[-1])
    rows = {"non-neural baseline": {s: result[s] for s in ("dev", "test")}}
    if "majority_class" in result:
        m = result["majority_class"]
        rows[f"majority class ({m['label']})"] = {s: m[s] for s in ("dev", "test")}
    for name, res in rows.items():
        for s in ("dev", "test"):
            if metric not in res[s]:
                raise CompareError(f"{path}: {name} has no {s} {metric!r}")
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m finetune.compare", description=__doc__)
    parser.add_argument("runs", nargs="+", help="finetune workdirs (each with summary.json)")
    parser.add_argument("--control", help="the run every other is tested against")
    parser.add_argument("--baseline", help="a file holding `python -m finetune.baseline` output")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    try:
        return _compare(args)
    except CompareError as e:
        parser.error(str(e))  # one line, exit status 2


def _compare(args) -> list[dict]:
    runs = [load_run(w) for w in args.runs]
    if args.control:
        wanted = os.path.normpath(args.control)
        control = next((r for r in runs if r["run"] == wanted), None)
        if control is None:
            control = load_run(args.control)
            runs.insert(0, control)
    else:
        control = next((r for r in runs if r["random_init"]), runs[0])
    metrics = {r["run"]: r["metric"] for r in runs}
    if len(set(metrics.values())) > 1:
        raise CompareError(f"the runs score different metrics: {metrics}")
    base = baseline_rows(args.baseline, control["metric"]) if args.baseline else None
    rows = compare(runs, control)
    print(markdown(rows, control, base), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "baseline": base}, f, indent=2)
    return rows


def entry():  # the console script (main returns its result, for tests)
    main()


if __name__ == "__main__":
    entry()
