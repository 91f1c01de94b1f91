r"""A sweep's results: `results.csv`, `results.md` and `plots/` in the sweep directory.

    python -m pretrain.sweep --config configs/sweeps/NAME.py --workdir DIR --report_only

(also at the end of every local sweep). One CSV row per point, task and seed: the point's values,
the parameter counts (pretrained and fine-tuned backbone), the pretraining run's last held-out
metrics, median step time and wall time, and the seed's dev / test metrics, dev metric after the
first epoch, the learning rate its own search chose (`albert_jax.jobs.lr_search`, blank without
one), step time and its run's wall time (step times: the median without each invocation's first,
compiling interval; wall times: summed over the invocations of an interrupted and resumed step, a
fine-tuning run's shared by its seeds). The Markdown has one table per task (mean ± sample std over
seeds), laid out as the paper's; the plots (matplotlib) are the pretraining curves per run, each
task's score per point with error bars, parameters against score, and the dev metric per epoch (the
early-convergence claim). With `Sweep.random_init` each table has a "random init" row (the same
task from random weights of the pretrained shape; its CSV rows have `finetune.init` = none), whose
pretraining columns are blank: it used none.

Comparing layouts (`finetune.unshare` on the grid): each row's Welch p of test against the shared
layout's row and the minimum detectable difference (two-sided, α 0.05, power 0.8, from the two
rows' pooled std and seed counts: `scoring.metrics.min_detectable_difference`), the number of
seeds whose dev or test predictions collapsed (a test cell whose spread they dominate is marked
†), and the learning rate the point's search chose. A `finetune.optim.learning_rate` axis
(`DEV_SELECTED`) is tuned, not compared: per layout the rate with the best mean dev score gives
the row, test read there (`dev_selected`), and every rate tried is listed below. Unshared runs'
`drift.jsonl` (each layer's distance from the shared start and the layers' similarity per
evaluation, `model.sharing.layer_drift`) gives a table at the last evaluation, `drift_*` CSV
columns and a plot per task.

Length (~730 lines): the CSV, the tables and the plots are three views of one `collect()` pass
over the sweep directory and share its row helpers (random-init, collapse, dev-selected rate);
split by view, each module would import the others' private rules.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
from typing import Any

from albert_jax.experiments.sweep import CELL, Sweep, control_points, groups, read_record
from albert_jax.model.albert import count_params
from albert_jax.model.config import AlbertConfig
from albert_jax.scoring.metrics import higher_is_better, min_detectable_difference, welch_t
from albert_jax.tasks.finetuning import DRIFT_FILE

PRETRAIN_KEYS = (
    "mlm_accuracy",
    "mlm_majority_accuracy",  # what always predicting the most frequent piece scores
    "sop_accuracy",
    "sop_majority_share",
    "nsp_accuracy",
    "mlm_loss",
    "sop_task_accuracy",
    "nsp_task_accuracy",
    "sop_task_majority",
    "nsp_task_majority",
    "disc_accuracy",
    "disc_auc",
    "disc_precision",
    "disc_recall",
    "sampled_original",
)
# With cross_eval (paper Table 5): the sentence head on each task's pairs, and the majority label.
CROSS = ("sop_task_accuracy", "sop_task_majority", "nsp_task_accuracy", "nsp_task_majority")


def _jsonl(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _json(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def _params(model_dir: str) -> int | None:
    """Backbone parameters of a checkpoint, from its config."""
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return count_params(AlbertConfig.from_dict(json.load(f)))


def steady_step_time(step_dir: str, rel: str = "metrics.jsonl") -> float | None:
    """Median step time of the run whose metrics are STEP_DIR/REL, without the first interval
    logged by each invocation (`sweep.run_step` records the rows there were before it): that one
    includes compilation (and a resume's restore). None when no other interval was logged."""
    rows = _jsonl(os.path.join(step_dir, rel))
    logged = [(r["step"], r["step_time_s"]) for r in rows if r.get("split") == "train"
              and "step_time_s" in r]  # fmt: skip
    runs = read_record(step_dir).get("runs") or [{}]  # none recorded: one run, from scratch
    first = set()
    for run in runs:
        before = {tuple(r) for r in run.get("rows", {}).get(rel, [])}
        # the first row it did not find is its first (or, had a later one cut it off, that one's)
        first.add(next((r for r in logged if r not in before), None))
    times = [t for step, t in logged if (step, t) not in first]
    return round(statistics.median(times), 4) if times else None


def wall_time(step_dir: str) -> float | None:
    """Wall time of a step over all its invocations (a resumed run's included)."""
    runs = read_record(step_dir).get("runs")
    return round(sum(r.get("wall_s") or 0.0 for r in runs), 1) if runs else None


def pretrain_info(pdir: str) -> dict[str, Any]:
    rows = _jsonl(os.path.join(pdir, "metrics.jsonl"))
    evals = [r for r in rows if r.get("split") == "eval"]
    info = {f"pretrain_{k}": evals[-1][k] for k in PRETRAIN_KEYS if evals and k in evals[-1]}
    train = [r for r in rows if r.get("split") == "train"]
    if train and "train_flops" in train[-1]:  # compute spent: equal-FLOPs comparisons
        info["pretrain_steps"] = train[-1]["step"]
        info["pretrain_train_flops"] = train[-1]["train_flops"]
    info["pretrain_step_s"] = steady_step_time(pdir)
    info["pretrain_wall_s"] = wall_time(pdir)
    info["params_pretrained"] = _params(os.path.join(pdir, "model"))
    return info


def _seed_dir(fdir: str, seed: int, n_seeds: int) -> str:
    """A seed's run: its own DIR/seed_S (a sweep runs each seed apart; `finetune` with several
    seeds writes them there too), or the point's directory (one seed, run as one)."""
    sdir = os.path.join(fdir, f"seed_{seed}")
    return sdir if n_seeds > 1 or os.path.isdir(sdir) else fdir


def dev_curve(seed_dir: str, metric: str, steps_per_epoch: int | None) -> list[tuple[float, float]]:
    """(epoch, dev metric) of every evaluation of one seed's run."""
    rows = [r for r in _jsonl(os.path.join(seed_dir, "metrics.jsonl")) if r["split"] == "eval"]
    scale = steps_per_epoch or 1
    return [(r["step"] / scale, r[metric]) for r in rows if metric in r]


def drift_curve(seed_dir: str) -> list[dict]:
    """The rows of one seed's `drift.jsonl` (an unshared run's layer drift per evaluation,
    `FinetuneTask.on_evaluation`), one per step (a repeated step: its last row)."""
    rows = {r["step"]: r for r in _jsonl(os.path.join(seed_dir, DRIFT_FILE))}
    return [rows[k] for k in sorted(rows)]


def last_drift(seed_dir: str) -> dict[str, Any]:
    """The CSV's drift fields at the last evaluation: per sub-block the distance of each layer
    from its start (`drift_attention_layers`), their mean and the layers' mean pairwise
    cosine similarity; {} for a run that wrote none (not unshared)."""
    curve = drift_curve(seed_dir)
    if not curve:
        return {}
    out = {}
    for block in ("attention", "ffn"):
        distance = curve[-1].get(f"{block}_distance")
        if distance:
            out[f"drift_{block}"] = statistics.fmean(distance)
            out[f"drift_{block}_layers"] = list(distance)
            out[f"similarity_{block}"] = curve[-1].get(f"{block}_similarity")
    return out


def collect(sweep: Sweep, workdir: str) -> list[dict[str, Any]]:
    rows = []
    for group in groups(sweep):
        pdir = os.path.join(workdir, "pretrain", group[0].name("pretrain"))
        pinfo = pretrain_info(pdir)
        for point in group + control_points(sweep, group):
            # a random-init point used no pretraining: its group's figures are not its own
            own = {} if dict(point.values).get("finetune.init") == "none" else pinfo
            base = {"point": point.name(), **dict(point.values), **own}
            if not sweep.tasks:
                rows.append(base)
            for task in sweep.tasks:
                fdir = os.path.join(workdir, "finetune", task, point.name())
                summary = _json(os.path.join(fdir, "summary.json"))
                wall = wall_time(fdir)
                for seed in sweep.seeds:
                    res = summary.get("per_seed", {}).get(str(seed))
                    if res is None:
                        continue
                    sdir = _seed_dir(fdir, seed, len(sweep.seeds))
                    row = dict(base, task=task, seed=seed, metric=res["metric"])
                    row["params_finetuned"] = _params(os.path.join(sdir, "best"))
                    for split in ("dev", "test"):
                        for k, v in res.get(split, {}).items():
                            row[f"{split}_{k}"] = v
                    row["dev_first_epoch"] = res.get("dev_first_epoch")
                    # the rate the point's own learning-rate search chose (per layout), if any
                    search = summary.get("lr_search", {})
                    row["learning_rate"] = search.get("chosen")
                    if search.get("fallback"):  # every trial collapsed: the rate by model size
                        row["learning_rate_fallback"] = True
                    row.update(last_drift(sdir))
                    cell = _json(os.path.join(sdir, CELL))  # a kept cell's machine
                    if cell.get("device"):
                        row["device"] = cell["device"]
                    if read_record(sdir):  # the seed ran as its own step
                        row["finetune_step_s"] = steady_step_time(sdir)
                        row["finetune_wall_s"] = wall_time(sdir)
                    else:  # the point's seeds ran as one step: its time shared by them
                        rel = os.path.relpath(os.path.join(sdir, "metrics.jsonl"), fdir)
                        row["finetune_step_s"] = steady_step_time(fdir, rel)
                        row["finetune_wall_s"] = (
                            round(wall / len(sweep.seeds), 1) if wall is not None else None
                        )
                    rows.append(row)
    return rows


def write_csv(rows: list[dict], path: str) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        for r in rows:  # a list (per-layer drift): its values, space-separated
            writer.writerow(
                {
                    k: " ".join(f"{x:.6g}" for x in v) if isinstance(v, list) else v
                    for k, v in r.items()
                }
            )


def _ms(values: list) -> str:
    v = [float(x) for x in values if x is not None]
    if not v:
        return "-"
    scale = 100.0 if all(0.0 <= x <= 1.0 for x in v) else 1.0  # accuracies / F1 in percent
    mean = statistics.fmean(v) * scale
    if len(v) == 1:  # one seed: no spread to show (not "± 0.00")
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {statistics.stdev(v) * scale:.2f}"


def _seconds(v: Any) -> str:
    return "-" if v is None else f"{float(v):.3g}"  # never a percentage, however small


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{100 * v:.2f}" if 0 <= v <= 1 else f"{v:.3g}"
    if isinstance(v, int) and v > 10_000:
        return f"{v / 1e6:.2f}M"
    return str(v) if v != "" else "default"


RANDOM_LABEL = "random init"


def _is_random(row: dict) -> bool:
    return row.get("finetune.init") == "none"


def _axis_cells(row: dict, axes: list[str], label_axis: str | None) -> list[str]:
    """The row's grid values; a random-init row says so in `label_axis` (it has no unshare)."""
    cells = []
    for a in axes:
        if a == label_axis and _is_random(row):
            cells.append(RANDOM_LABEL)
        elif a == "finetune.init":  # the column added for the label: the other rows' init
            cells.append("pretrained")
        elif a.endswith("learning_rate") and isinstance(row.get(a), float):
            cells.append(f"{row[a]:g}")  # a rate, not a fraction shown in percent
        else:
            cells.append(_fmt(row.get(a)))
    return cells


def markdown(sweep: Sweep, rows: list[dict]) -> str:
    axes = list(sweep.grid)
    # The random-init rows are labelled in the unshare column, or in an `init` column of their own.
    label_axis = "finetune.unshare" if "finetune.unshare" in axes else None
    if label_axis is None and any(_is_random(r) for r in rows):
        label_axis = "finetune.init"
        axes.append(label_axis)
    head = [a.split(".", 1)[1] for a in axes]
    cross = [k for k in CROSS if any(f"pretrain_{k}" in r for r in rows)]
    cross_cols = [
        f"{k.split('_')[0].upper()} task {'acc' if k.endswith('accuracy') else 'majority'}"
        for k in cross
    ]
    extra = [k for k in ("train_flops", "disc_accuracy") if any(f"pretrain_{k}" in r for r in rows)]
    extra_cols = [{"train_flops": "train PFLOP", "disc_accuracy": "RTD acc"}[k] for k in extra]
    out = []
    if sweep.tasks:
        for task in sweep.tasks:
            trows = [r for r in rows if r.get("task") == task]
            if not trows:
                continue
            metric = trows[0]["metric"]
            chosen = dev_selected(sweep, trows)
            table = [r for r in trows if r["point"] in chosen]
            cols = [_selected_head(a, h) for a, h in zip(axes, head, strict=True)]
            cols += ["params", *extra_cols, "MLM acc (majority)", "SOP acc (majority)"]
            cols += [*cross_cols, f"dev {metric}", f"test {metric}"]
            controlled = any(_is_random(r) for r in table)
            cols += ["test Welch p vs random"] if controlled else []
            versus = "finetune.unshare" in axes and any(_is_shared(r) for r in table)
            cols += ["test Welch p vs shared", "MDE (α .05, power .8)"] if versus else []
            collapse = any(_has_collapse_flag(r) for r in table)
            cols += ["collapsed seeds"] if collapse else []
            rates = any(_learning_rate(r) is not None for r in table)
            cols += ["lr"] if rates else []
            cols += [f"dev {metric} after epoch 1", "seeds", "s/step"]
            out += [f"### {task} ({metric}, %; mean ± std over seeds)", ""]
            devices = sorted({r["device"] for r in trows if r.get("device")})
            if len(devices) > 1:  # a difference between arms must not be one between machines
                out += [f"Warning: this task's cells ran on {len(devices)} kinds of device "
                        f"({'; '.join(devices)}): compare arms run on one.", ""]  # fmt: skip
            out.append(_row(cols))
            out.append(_row(["---"] * len(cols)))
            scale = _scale([r.get(f"{x}_{metric}") for r in trows for x in ("dev", "test")])
            notes = []
            for name in chosen:
                pr = [r for r in table if r["point"] == name]
                first = pr[0]
                params = first.get("params_finetuned") or first.get("params_pretrained")
                line = _axis_cells(first, axes, label_axis) + [_fmt(params)]
                # random init used no pretraining: its group's pretraining figures are not its own
                pre = {} if _is_random(first) else first
                line += [_extra(pre, k) for k in extra]
                line += [_with_majority(pre, "mlm_accuracy", "mlm_majority_accuracy")]
                sop = "sop" if "pretrain_sop_accuracy" in pre else "nsp"
                line += [_with_majority(pre, f"{sop}_accuracy", "sop_majority_share")]
                line += [_fmt(pre.get(f"pretrain_{k}")) for k in cross]
                line += [_ms([r.get(f"dev_{metric}") for r in pr])]
                test = _ms([r.get(f"test_{metric}") for r in pr])
                flag = collapse_dominated(pr, f"test_{metric}")
                if flag:
                    test += " †"
                    notes.append(f"{name}: {flag}")
                line += [test]
                if controlled:
                    line += [_p_vs_random(pr, table, f"test_{metric}", axes, sweep)]
                if versus:
                    line += _vs_shared(pr, table, f"test_{metric}", axes, sweep, scale)
                if collapse:
                    line += [str(sum(_collapsed(r) for r in pr))]
                if rates:
                    line += [_fmt_lr(first)]
                line += [_ms([r.get("dev_first_epoch") for r in pr]), str(len(pr))]
                line += [_seconds(first.get("finetune_step_s"))]
                out.append(_row(line))
            out.append("")
            if versus:
                out += [MDE_NOTE, ""]
            if notes:
                out += [f"† spread dominated by collapsed seeds ({COLLAPSE_RULE}): "]
                out[-1] += "; ".join(notes) + "."
                out.append("")
            if len(chosen) < len({r["point"] for r in trows}):
                out += _every_value_table(sweep, trows, chosen, metric, axes, label_axis)
            out += _drift_table(table, chosen, axes, label_axis)
    else:
        cols = head + ["params", "MLM acc", "SOP/NSP acc", *cross_cols, "s/step", "wall s"]
        out += ["### pretraining (held-out, %)", "", _row(cols), _row(["---"] * len(cols))]
        for r in rows:
            acc = r.get("pretrain_sop_accuracy", r.get("pretrain_nsp_accuracy"))
            line = [_fmt(r[a]) for a in axes] + [_fmt(r.get("params_pretrained"))]
            line += [_fmt(r.get("pretrain_mlm_accuracy")), _fmt(acc)]
            line += [_fmt(r.get(f"pretrain_{k}")) for k in cross]
            line += [_seconds(r.get("pretrain_step_s")), _seconds(r.get("pretrain_wall_s"))]
            out.append(_row(line))
        out.append("")
    if sweep.paper:
        out += ["### the paper's numbers", "", sweep.paper.strip(), ""]
    return "\n".join(out)


# Grid axes tuned rather than compared: per value of the other axes (a layout), the report keeps
# the value with the best mean dev score and reports test there (`dev_selected`).
DEV_SELECTED = ("finetune.optim.learning_rate",)
COLLAPSE_RULE = (
    "a seed collapsed and the std over the other seeds is under half the std over all of them"
)
MDE_NOTE = (
    "MDE: the smallest difference of test means that this many seeds a side detect with a "
    "two-sided two-sample t-test at α = 0.05 with power 0.8, given the pooled std of the row "
    "and the shared row (`albert_jax.scoring.metrics.min_detectable_difference`): a difference "
    "below it, significant or not, is within what the design cannot tell apart."
)


def selected_axes(sweep: Sweep) -> list[str]:
    return [a for a in sweep.grid if a in DEV_SELECTED]


def dev_selected(sweep: Sweep, task_rows: list[dict]) -> list[str]:
    """The points a task's table shows, in grid order: every point; or, when the grid varies
    an axis of `DEV_SELECTED` (the learning rate), for each value of the other axes (each
    layout, the random-init control apart) the point whose mean dev metric is best (the first
    on a tie). Test is then read at the value dev chose, never chosen on test."""
    names = list(dict.fromkeys(r["point"] for r in task_rows))
    chosen = selected_axes(sweep)
    if not chosen:
        return names
    metric = task_rows[0]["metric"]
    sign = 1.0 if higher_is_better(metric) else -1.0
    best: dict[tuple, tuple[float, str]] = {}
    for name in names:
        pr = [r for r in task_rows if r["point"] == name]
        key = tuple(pr[0].get(a) for a in sweep.grid if a not in chosen) + (_is_random(pr[0]),)
        dev = [float(r[f"dev_{metric}"]) for r in pr if r.get(f"dev_{metric}") is not None]
        score = sign * statistics.fmean(dev) if dev else -math.inf
        if key not in best or score > best[key][0]:
            best[key] = (score, name)
    keep = {name for _, name in best.values()}
    return [n for n in names if n in keep]


def _selected_head(axis: str, head: str) -> str:
    return f"{head} (best dev)" if axis in DEV_SELECTED else head


def _is_shared(row: dict) -> bool:
    return not _is_random(row) and row.get("finetune.unshare") == ""


def _has_collapse_flag(row: dict) -> bool:
    return "dev_collapsed" in row or "test_collapsed" in row


def _collapsed(row: dict) -> bool:
    """The seed's dev or test predictions collapsed to one class (as `finetune.compare`)."""
    return bool(row.get("dev_collapsed") or row.get("test_collapsed"))


def _learning_rate(row: dict):
    """The rate the point's search chose, else the rate its grid value set (or None)."""
    lr = row.get("learning_rate")
    return lr if lr is not None else row.get("finetune.optim.learning_rate")


def _fmt_lr(row: dict) -> str:
    lr = _learning_rate(row)
    if lr is None:
        return "-"
    return f"{float(lr):g}" + (" (fallback)" if row.get("learning_rate_fallback") else "")


def _scale(values: list) -> float:
    """100 when every value is in [0, 1] (accuracies, F1 as fractions), as `_ms` shows them."""
    v = [float(x) for x in values if x is not None]
    return 100.0 if v and all(0.0 <= x <= 1.0 for x in v) else 1.0


def collapse_dominated(point_rows: list[dict], key: str) -> str | None:
    """Why the point's spread of `key` is mostly its collapsed seeds (`COLLAPSE_RULE`), with
    the mean ± std without them; None when it is not."""
    values = [(r[key], _collapsed(r)) for r in point_rows if r.get(key) is not None]
    bad = [v for v, c in values if c]
    good = [v for v, c in values if not c]
    if not bad or len(values) < 2:
        return None
    spread = statistics.stdev([v for v, _ in values])
    rest = statistics.stdev(good) if len(good) > 1 else 0.0
    if spread == 0 or rest >= 0.5 * spread:
        return None
    if not good:
        return f"all {len(bad)} seeds collapsed"
    return f"{len(bad)} of {len(values)} seeds collapsed, the others {_ms(good)}"


def _vs_shared(point_rows, table, key, axes, sweep, scale) -> list[str]:
    """[Welch's p, MDE] of the point's per-seed `key` against the shared layout's point (the
    same values of the other axes, `unshare` ''); '-' for the shared point itself."""
    first = point_rows[0]
    if _is_shared(first):
        return ["-", "-"]
    skip = ("finetune.unshare", "finetune.init", *selected_axes(sweep))
    same = [a for a in axes if a not in skip]
    control = [r for r in table if _is_shared(r) and all(r.get(k) == first.get(k) for k in same)]
    a, b = ([float(r[key]) for r in rs if r.get(key) is not None] for rs in (point_rows, control))
    _, p = welch_t(a, b)
    mde = min_detectable_difference(a, b) if len(a) > 1 and len(b) > 1 else math.nan
    return ["-" if p != p else f"{p:.2g}", "-" if mde != mde else f"{mde * scale:.2f}"]


def _every_value_table(sweep, trows, chosen, metric, axes, label_axis) -> list[str]:
    """Every point of a task with its dev and test: what the per-layout choice chose from."""
    names = ", ".join(a.split(".", 1)[1] for a in selected_axes(sweep))
    out = [f"Every {names} tried ({metric}, %; ← : best mean dev of its layout, the row above):"]
    cols = [a.split(".", 1)[1] for a in axes] + [f"dev {metric}", f"test {metric}", "seeds", ""]
    out += ["", _row(cols), _row(["---"] * len(cols))]
    for name in dict.fromkeys(r["point"] for r in trows):
        pr = [r for r in trows if r["point"] == name]
        line = _axis_cells(pr[0], axes, label_axis)
        line += [
            _ms([r.get(f"dev_{metric}") for r in pr]),
            _ms([r.get(f"test_{metric}") for r in pr]),
        ]
        out.append(_row(line + [str(len(pr)), "←" if name in chosen else ""]))
    return out + [""]


def _drift_table(table, chosen, axes, label_axis) -> list[str]:
    """Per unshared point: each sub-block's per-layer distance from the start and the layers'
    similarity at the last evaluation, mean over seeds (`sharing.layer_drift`)."""
    blocks = ("attention", "ffn")
    points = [
        n for n in chosen
        if any(f"drift_{b}_layers" in r for r in table if r["point"] == n for b in blocks)
    ]  # fmt: skip
    if not points:
        return []
    out = [
        "Layer drift at the last evaluation, mean over seeds: ||W_l - W_0|| / ||W_0|| of each "
        "layer l = 0 .. L-1 from the shared weights it started from, and the mean pairwise "
        "cosine similarity of the layers' weights (1: still identical; a sub-block left shared "
        "moves as one).",
        "",
    ]
    cols = [a.split(".", 1)[1] for a in axes]
    cols += [f"{b}: {what}" for b in blocks for what in ("distance per layer", "similarity")]
    out += [_row(cols + ["seeds"]), _row(["---"] * (len(cols) + 1))]
    for name in points:
        pr = [r for r in table if r["point"] == name]
        line = _axis_cells(pr[0], axes, label_axis)
        for b in blocks:
            layers = [r[f"drift_{b}_layers"] for r in pr if r.get(f"drift_{b}_layers")]
            sims = [r[f"similarity_{b}"] for r in pr if r.get(f"similarity_{b}") is not None]
            mean = [statistics.fmean(col) for col in zip(*layers, strict=True)] if layers else []
            line.append(" ".join(f"{x:.3g}" for x in mean) or "-")
            line.append(f"{statistics.fmean(sims):.6f}" if sims else "-")
        out.append(_row(line + [str(len(pr))]))
    return out + [""]


def _with_majority(row: dict, key: str, majority: str) -> str:
    """`12.87 (4.63)`: the held-out accuracy and, in brackets, what the constant predictor
    scores on the same batches (what a run that learned nothing gets)."""
    acc, base = row.get(f"pretrain_{key}"), row.get(f"pretrain_{majority}")
    return _fmt(acc) if base is None or acc is None else f"{_fmt(acc)} ({_fmt(base)})"


def _p_vs_random(point_rows: list[dict], task_rows: list[dict], key: str, axes, sweep) -> str:
    """Welch's p of the point's per-seed `key` against its random-init point (the same grid
    values but `finetune.unshare` and those chosen on dev: `sweep.control_points`); '-' for the
    control itself."""
    first = point_rows[0]
    if _is_random(first):
        return "-"
    skip = ("finetune.unshare", "finetune.init", *selected_axes(sweep))
    same = [a for a in axes if a not in skip]
    control = [r for r in task_rows if _is_random(r) and all(r.get(k) == first[k] for k in same)]
    values = [[r.get(key) for r in rs if r.get(key) is not None] for rs in (point_rows, control)]
    _, p = welch_t(*values)
    return "-" if p != p else f"{p:.2g}"  # nan: fewer than two seeds a side


def _extra(row: dict, key: str) -> str:
    v = row.get(f"pretrain_{key}")
    if key == "train_flops":
        return "-" if v is None else f"{float(v) / 1e15:.3g}"
    return _fmt(v)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def plots(sweep: Sweep, rows: list[dict], workdir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = os.path.join(workdir, "plots")
    os.makedirs(out_dir, exist_ok=True)
    written = []

    def save(fig, name):
        path = os.path.join(out_dir, name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    fig, axs = plt.subplots(1, 2, figsize=(10, 4))
    for group in groups(sweep):
        name = group[0].name("pretrain")
        evals = [
            r
            for r in _jsonl(os.path.join(workdir, "pretrain", name, "metrics.jsonl"))
            if r["split"] == "eval"
        ]
        for ax, key in zip(axs, ("mlm_accuracy", "sop_accuracy"), strict=True):
            pts = [(r["step"], r[key]) for r in evals if key in r]
            if key == "sop_accuracy" and not pts:
                pts = [(r["step"], r["nsp_accuracy"]) for r in evals if "nsp_accuracy" in r]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=name)
    for ax, title in zip(axs, ("MLM accuracy (held out)", "SOP / NSP accuracy"), strict=True):
        ax.set_title(title)
        ax.set_xlabel("pretraining step")
        ax.legend(fontsize=7)
    save(fig, "pretrain_curves.png")

    for task in sweep.tasks:
        trows = [r for r in rows if r.get("task") == task]
        if not trows:
            continue
        metric = trows[0]["metric"]
        names = dev_selected(sweep, trows)  # the table's rows (one per layout)
        seeds = [[r for r in trows if r["point"] == n and r.get(f"test_{metric}") is not None]
                 for n in names]  # fmt: skip
        scores = [[r[f"test_{metric}"] for r in rs] for rs in seeds]
        means = [statistics.fmean(s) if s else 0.0 for s in scores]
        stds = [statistics.stdev(s) if len(s) > 1 else 0.0 for s in scores]

        fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(names)), 4))
        ax.bar(range(len(names)), means, yerr=stds, capsize=4, alpha=0.6)
        for i, rs in enumerate(seeds):  # every seed; a collapsed one as x
            for collapsed, marker in ((False, "o"), (True, "x")):
                ys = [r[f"test_{metric}"] for r in rs if _collapsed(r) == collapsed]
                ax.scatter([i] * len(ys), ys, marker=marker, color="k", s=14, zorder=3)
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(f"test {metric} (mean ± std, {len(sweep.seeds)} seeds)")
        ax.set_title(f"{task} (dots: seeds; x: collapsed)")
        save(fig, f"{task}_scores.png")

        params = [
            next(
                r.get("params_finetuned") or r.get("params_pretrained")
                for r in trows
                if r["point"] == n
            )
            for n in names
        ]
        fig, ax = plt.subplots(figsize=(5, 4))
        for n, p, m, s in zip(names, params, means, stds, strict=True):
            ax.errorbar([p or 0], [m], yerr=[s], fmt="o", capsize=4, label=n)
        ax.set_xlabel("backbone parameters")
        ax.set_ylabel(f"test {metric}")
        ax.legend(fontsize=7)
        save(fig, f"{task}_params.png")

        fig, ax = plt.subplots(figsize=(6, 4))
        for n in names:
            curves = []
            for r in [r for r in trows if r["point"] == n]:
                sdir = _seed_dir(
                    os.path.join(workdir, "finetune", task, n), r["seed"], len(sweep.seeds)
                )
                config = _json(os.path.join(sdir, "config.json"))
                curves.append(dev_curve(sdir, metric, config.get("steps_per_epoch")))
            length = min((len(c) for c in curves), default=0)
            if not length:
                continue
            x = [curves[0][i][0] for i in range(length)]
            ys = [[c[i][1] for c in curves] for i in range(length)]
            m = [statistics.fmean(y) for y in ys]
            s = [statistics.stdev(y) if len(y) > 1 else 0.0 for y in ys]
            ax.errorbar(x, m, yerr=s, marker="o", capsize=3, label=n)
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"dev {metric}")
        ax.set_title(f"{task}: dev {metric} per evaluation")
        ax.legend(fontsize=7)
        save(fig, f"{task}_dev_curves.png")

        drift = {n: _drift_mean(sweep, workdir, task, n, trows) for n in names}
        drift = {n: d for n, d in drift.items() if d}
        if drift:
            save(_drift_figure(plt, task, drift), f"{task}_drift.png")
    return written


def _drift_mean(sweep, workdir, task, name, trows) -> list[dict]:
    """The point's drift curve, each field the mean over its seeds (their common length)."""
    curves = []
    for r in [r for r in trows if r["point"] == name]:
        fdir = os.path.join(workdir, "finetune", task, name)
        curve = drift_curve(_seed_dir(fdir, r["seed"], len(sweep.seeds)))
        if curve:
            curves.append(curve)
    length = min((len(c) for c in curves), default=0)
    out = []
    for i in range(length):
        rows = [c[i] for c in curves]
        mean = {
            "epoch": rows[0].get("epoch") if rows[0].get("epoch") is not None else rows[0]["step"]
        }
        for key in rows[0]:
            if key.endswith("_distance"):
                mean[key] = [
                    statistics.fmean(col) for col in zip(*(r[key] for r in rows), strict=True)
                ]
            elif key.endswith("_similarity"):
                mean[key] = statistics.fmean(r[key] for r in rows)
        out.append(mean)
    return out


def _drift_figure(plt, task: str, drift: dict[str, list[dict]]):
    """Per sub-block: each layer's distance from its start (top; darker: deeper layer) and the
    layers' mean pairwise cosine similarity (bottom), per evaluation, one colour per point."""
    fig, axs = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, block in enumerate(("attention", "ffn")):
        for k, (name, curve) in enumerate(drift.items()):
            color = colors[k % len(colors)]
            x = [r["epoch"] for r in curve]
            layers = len(curve[0].get(f"{block}_distance", []))
            for layer in range(layers):
                y = [r[f"{block}_distance"][layer] for r in curve]
                alpha = 0.35 + 0.65 * (layer + 1) / layers
                label = name if layer == layers - 1 else None
                axs[0, j].plot(x, y, marker="o", ms=3, color=color, alpha=alpha, label=label)
            if layers:
                y = [r[f"{block}_similarity"] for r in curve]
                axs[1, j].plot(x, y, marker="o", ms=3, color=color, label=name)
        axs[0, j].set_title(f"{task} {block}: ||W_l - W_0|| / ||W_0|| (darker: deeper)")
        axs[1, j].set_title(f"{task} {block}: mean pairwise cosine of the layers")
        axs[1, j].set_xlabel("epoch")
        for ax in axs[:, j]:
            ax.legend(fontsize=7)
    return fig


def write(sweep: Sweep, workdir: str) -> str:
    """Write results.csv, results.md and plots/; returns the Markdown."""
    rows = collect(sweep, workdir)
    write_csv(rows, os.path.join(workdir, "results.csv"))
    text = markdown(sweep, rows)
    figures = plots(sweep, rows, workdir)
    text += "\n" + "\n".join(
        f"![{os.path.basename(p)}](plots/{os.path.basename(p)})" for p in figures
    )
    with open(os.path.join(workdir, "results.md"), "w") as f:
        f.write(text + "\n")
    return text


def load_saved(workdir: str) -> Sweep:
    """The sweep as `python -m pretrain.sweep` recorded it in WORKDIR/sweep.json."""
    d = _json(os.path.join(workdir, "sweep.json"))
    if not d:
        raise FileNotFoundError(f"{workdir}/sweep.json not found: not a sweep directory")
    d["seeds"] = tuple(d["seeds"])
    return Sweep(**d)
