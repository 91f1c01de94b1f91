"""A fine-tuning run: the schedule and learning rate resolved for the model, one training per
seed (`albert_jax.train.trainer.train` with the task of `finetuning.make_task`), the summary over
seeds, and predictions of a fine-tuned checkpoint for a file (`predict_file`)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

import jax
import numpy as np
from etils import epath

from albert_jax import paths
from albert_jax.checkpoints import checkpoint
from albert_jax.jobs import lr_search
from albert_jax.tasks.finetune_config import TASK_SETTINGS, FinetuneConfig
from albert_jax.tasks.finetuning import (
    FRESH_HEAD,
    FinetuneData,
    FinetuneError,
    make_task,
    parse_seeds,
    write_jsonl,
)
from albert_jax.train import lock
from albert_jax.train.config import Plan, TrainerConfig
from albert_jax.train.trackers import read_rows
from albert_jax.train.trainer import train

# ---------------------------------------------------------------- schedules


def schedule(config, num_train: int) -> Plan:
    """The run's plan, steps from epochs: total_steps (unless set; at least `min_steps`, so a
    small training set gets more epochs), warmup from `warmup_fraction`, evaluation and
    checkpoints once per epoch (unless set)."""
    f, t = FinetuneConfig.from_config(config), TrainerConfig.from_config(config)
    per_epoch = max(1, math.ceil(num_train / int(f.batch_size)))
    by_epochs = max(math.ceil(float(f.num_epochs) * per_epoch), int(f.min_steps))
    total = int(t.total_steps or 0) or by_epochs
    eval_every = int(t.eval_every or 0) or per_epoch
    checkpoint_every = int(t.checkpoint_every or 0) or eval_every
    plan = Plan(total, eval_every, checkpoint_every, t.seed, steps_per_epoch=per_epoch)
    return plan.with_optim(total_steps=total, warmup_steps=round(f.warmup_fraction * total))


# `optim.learning_rate` / `optim.lr_multipliers` left at None are chosen by the model's hidden
# size. The reference's 2e-5 (1x) is right for base-and-larger checkpoints but leaves the
# project's small CPU ones (hidden 128-256) at the label prior; they train at 3e-4 with the fresh
# head at 10x (ner.py). Between the two sizes both are interpolated geometrically.
AUTO_LR = ((256, 3e-4, 10.0), (768, 2e-5, 1.0))  # (hidden size, learning rate, head multiplier)


def auto_learning_rate(hidden_size: int) -> tuple[float, float, str]:
    """(learning rate, head multiplier, why) for a model of this hidden size (AUTO_LR)."""
    (h0, lr0, m0), (h1, lr1, m1) = AUTO_LR
    if hidden_size <= h0:
        return lr0, m0, f"hidden {hidden_size} <= {h0}"
    if hidden_size >= h1:
        return lr1, m1, f"hidden {hidden_size} >= {h1}"
    t = math.log(hidden_size / h0) / math.log(h1 / h0)
    lr = float(f"{lr0 * (lr1 / lr0) ** t:.2g}")
    m = round(m0 * (m1 / m0) ** t, 1)
    return lr, m, f"hidden {hidden_size}: geometric between {lr0:g} at {h0} and {lr1:g} at {h1}"


def resolve_learning_rate(config, model_config, search: bool = False):
    """(optim, line): the optimizer leaves chosen for an auto (None) `optim.learning_rate` and
    `optim.lr_multipliers` by `auto_learning_rate` (for `Plan.with_optim`), and the line saying
    what was chosen and why ({} and None when both are set explicitly). `search`: the rate stays
    None for the learning-rate search (`lr_search`); the multiplier is chosen."""
    lr, mult = config.optim.learning_rate, config.optim.lr_multipliers
    if lr is not None and mult is not None:
        return {}, None
    auto_lr, auto_mult, why = auto_learning_rate(model_config.hidden_size)
    optim, chosen, flags = {}, [], []
    if lr is None and search:
        chosen.append("learning rate searched on dev")
        flags.append("--config.optim.learning_rate")
    elif lr is None:
        optim["learning_rate"] = auto_lr
        chosen.append(f"learning rate {auto_lr:g}")
        flags.append("--config.optim.learning_rate")
    if mult is None:
        optim["lr_multipliers"] = f"{FRESH_HEAD}={auto_mult:g}" if auto_mult != 1 else ""
        chosen.append(f"head lr x{auto_mult:g}")
        flags.append("--config.optim.lr_multipliers")
    return optim, f"{', '.join(chosen)} (auto: {why}; pass {' / '.join(flags)} to override)"


# ---------------------------------------------------------------- runs


def run(config, workdir: str) -> dict[str, Any]:
    """Fine-tune once per seed (`workdir/seed_S` when there are several); returns the summary
    (also in `workdir/summary.json`): per-seed results and mean ± std of dev and test metrics;
    {} when SIGTERM stopped it (its checkpoint saved: rerunning resumes)."""
    with lock.hold(paths.resolve(workdir), enabled=jax.process_index() == 0):
        return _run(config, workdir)


def _run(config, workdir: str) -> dict[str, Any]:
    seeds = parse_seeds(config)
    data = FinetuneData(config)
    _print_data(data)
    # The model's size is known now: an auto learning rate is chosen (or searched for on the
    # first seed) before the optimizer is built.
    searching = lr_search.wanted(config)
    optim, chosen = resolve_learning_rate(config, data.model_config, search=searching)
    if chosen and jax.process_index() == 0:
        print(chosen, flush=True)
    # Epochs count training rows (QA: windows, several per question), as the iterator does.
    plan = schedule(config, len(data.features["train"]["input_ids"])).with_optim(**optim)
    searched = None
    if searching:
        fallback = auto_learning_rate(data.model_config.hidden_size)[0]
        searched = lr_search.search(config, plan.replace(seed=seeds[0]), data, workdir, fallback)
        if searched is None:  # SIGTERM: the finished trials are in lr_search.json
            if jax.process_index() == 0:
                print("stopped during the learning-rate search: rerun to resume", flush=True)
            return {}
        plan = plan.with_optim(learning_rate=searched["chosen"])
    per_seed = {}
    for seed in seeds:
        seeded = plan.replace(seed=seed)
        wd = paths.resolve(workdir if len(seeds) == 1 else paths.join(workdir, f"seed_{seed}"))
        task = make_task(seeded.record(config), data, wd)
        if searched:
            task.results_info["lr_search"] = searched
        train(config, wd, task.job(), seeded)
        if not epath.Path(wd, "results.json").exists():  # stopped by SIGTERM, checkpoint saved
            if jax.process_index() == 0:
                print(f"stopped before step {seeded.total_steps}: rerun to resume", flush=True)
            return {}
        per_seed[seed] = _seed_result(wd, seeded, data.task_settings.extras)
    summary = summarize(per_seed, data)
    if searched:
        summary["lr_search"] = searched
    if jax.process_index() == 0:
        text = json.dumps(summary, indent=2, sort_keys=True)
        paths.write_text(paths.join(workdir, "summary.json"), text)
        print(format_summary(summary), flush=True)
    return summary


def _print_data(data: FinetuneData) -> None:
    if jax.process_index() != 0:
        return
    for note in data.notes:
        print(f"note: {note}", flush=True)
    for split, s in data.stats.items():
        cut = s.get("truncated", 0)
        extra = f", {s['words_dropped']} words dropped" if s.get("words_dropped") else ""
        extra += f" ({s['windows']} windows)" if "windows" in s else ""
        if s.get("targets_truncated"):
            extra += f", {s['targets_truncated']} targets cut to task.max_target_length"
        if s.get("answers_not_found"):
            kept = "skipped" if s.get("skipped") else "scored on their texts"
            extra += f", {s['answers_not_found']} answers not at their offsets ({kept})"
        if s.get("bad_rows_skipped"):
            extra += f", {s['bad_rows_skipped']} rows with the wrong number of fields skipped"
        if s.get("skipped_labels"):
            extra += f", {s['skipped_labels']} rows skipped for their label (task.skip_labels)"
        print(f"{split}: {s['examples']} examples, {cut} truncated{extra}", flush=True)


def _seed_result(workdir: str, plan: Plan, extras=()) -> dict[str, Any]:
    """A seed's result; `extras`: the task's extra splits (their final evaluations, when
    `config.evals` names them after their splits)."""
    res = json.loads(epath.Path(workdir, "results.json").read_text())
    # read_rows: metrics.jsonl and a bucket run's part files not yet folded into it
    evals = {row["step"]: row for row in read_rows(workdir) if row["split"] == "eval"}
    metric = res["metric"]
    first = evals.get(plan.steps_per_epoch, {}).get(metric)
    last = evals[max(evals)] if evals else {}
    return {
        "metric": metric,
        "best_step": res["best_step"],
        "dev": res.get("dev", {}),
        "test": res.get("test", {}),
        "dev_first_epoch": first,
        "dev_last": last.get(metric),
        **{name: res[name] for name in extras if name in res},
    }


def summarize(per_seed: dict[int, dict], data: FinetuneData) -> dict[str, Any]:
    """The run's summary: `over_seeds` and what it started from."""
    extras = list(data.task_settings.extras)
    out = over_seeds(per_seed, ("dev", "test", *extras))
    if extras:
        out["extra_splits"] = extras
    out["metric"] = next(iter(per_seed.values()))["metric"]
    out["layout"] = data.model_config.layout
    out["init"] = "none" if data.random_init else data.source.location
    out["random_init"] = data.random_init
    return out


def over_seeds(per_seed: dict[int, dict], splits=("dev", "test")) -> dict[str, Any]:
    """The seeds' results and the mean and sample std (ddof=1; 0 for one seed) of every scalar
    metric of each of `splits` over them (also how a sweep merges its one-seed runs)."""
    out = {"seeds": sorted(per_seed), "per_seed": {str(k): v for k, v in per_seed.items()}}
    for split in splits:
        keys = sorted({k for r in per_seed.values() for k in r.get(split, {})})
        out[split] = {
            k: _mean_std([r.get(split, {}).get(k) for r in per_seed.values()]) for k in keys
        }
    for key in ("dev_first_epoch", "dev_last"):
        out[key] = _mean_std([r[key] for r in per_seed.values()])
    return out


def _mean_std(values):
    v = np.asarray([x for x in values if x is not None], np.float64)
    if v.size == 0:
        return None
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0}


def format_summary(summary) -> str:
    init = ", random init" if summary.get("random_init") else ""
    lines = [f"seeds {summary['seeds']} ({summary['layout']} layout{init}): mean ± std"]
    for split in ("dev", "test", *summary.get("extra_splits", ())):
        for k, ms in summary[split].items():
            if ms is not None:
                lines.append(f"  {split} {k}: {ms['mean']:.4f} ± {ms['std']:.4f}")
    fe = summary["dev_first_epoch"]
    if fe:
        lines.append(f"  dev {summary['metric']} after epoch 1: {fe['mean']:.4f} ± {fe['std']:.4f}")
    return "\n".join(lines)


# ---------------------------------------------------------------- prediction from a checkpoint


def predict_file(
    checkpoint_dir: str, input_path: str, output_path: str, batch_size: int = 64,
    submission_dir: str | None = None,
):  # fmt: skip
    """Predictions of a fine-tuned checkpoint (ours, with its head) for every example of
    `input_path` (the task's file format: JSONL / TSV / CSV, CoNLL / JSONL words for tagging,
    RACE records for multiple choice), written as JSONL. Returns the metrics when the input has
    labels, else {}; and `submission`, the path of the benchmark's submission file when the
    head's task is a benchmark's and `input_path` is the file of a split it submits (GLUE's
    `test.tsv`), written in `submission_dir` (default: the output's directory)."""
    import ml_collections

    head = checkpoint.load_head(checkpoint_dir)
    kinds = (
        "sequence_classification", "token_classification", "multiple_choice", "seq2seq",
        "relation_extraction",
    )  # fmt: skip
    if head and head.get("type") == "question_answering":
        raise FinetuneError(
            f"{checkpoint_dir} is a question-answering checkpoint: `finetune.predict` does not "
            "take those yet; its dev/test predictions are in the run's WORKDIR/predictions"
        )
    if not head or head.get("type") not in kinds:
        raise FinetuneError(
            f"{checkpoint_dir} has no fine-tuning head (head: {head}); predict needs a "
            "checkpoint written by `python -m finetune` (WORKDIR/best)"
        )
    # the kind's settings ride in its head (columns, QA's doc_stride, seq2seq's beam_size, ...);
    # what a head lacks takes the settings' defaults
    task = dataclasses.asdict(TASK_SETTINGS[head["task_type"]].from_config(head))
    task.update(type=head["task_type"], input=input_path)
    if "text_b" in task:
        task["text_b"] = task["text_b"] or ""  # None in the head of a single-sentence task
    model = {k: head[k] for k in ("classifier_dropout",) if k in head}
    config = ml_collections.ConfigDict(
        {"init": checkpoint_dir, "task": task, "model": model, "batch_size": batch_size, "seed": 0}
    )
    data = FinetuneData(config, splits=("input",))
    task = make_task(config, data)
    params = data.source.params
    eval_fn = jax.jit(task.eval_step)

    def run(batch):
        return jax.device_get(eval_fn(params, batch))

    run.params = params
    # the readable rows and the metrics alone (no `collapsed`: a file's, not a run's)
    rows, values = task.rows_and_metrics("input", task.predict(run, "input"))
    write_jsonl(paths.resolve(output_path), rows)
    out_dir = submission_dir or os.path.dirname(paths.resolve(output_path)) or "."
    submission = task.write_submission("input", rows, out_dir)
    return {**values, "submission": submission} if submission else values
