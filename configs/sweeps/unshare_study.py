"""Does unsharing help? Issue 37's study: shared against three unshared layouts, each with its
own learning rate chosen on dev, five seeds a cell, five tasks, and the layers' drift.

  uv run python -m finetune.prepare sentiment      # cpu_base.py's in-domain text, once
  uv run python -m pretrain.sweep --config configs/sweeps/unshare_study.py \
      --workdir runs/sw_unshare_study
  uv run python -m pretrain.sweep --config configs/sweeps/unshare_study.py:sentiment,ner \
      --workdir runs/sw_unshare_study                 # some of the tasks (same directory)

Pretraining: `configs/pretrain/cpu_base.py`, the recipe behind the project's main checkpoint
(`runs/cpu_base/model`, docs/results.md section 1). A sweep cannot start from an existing
checkpoint (each group pretrains its own), so the study builds that model again in
DIR/pretrain/base (28 minutes; the recipe reproduced its published held-out figures when rebuilt,
results.md section 6). Its corpus reads the sentiment *training* texts from
`data/finetune/sentiment/train.jsonl` under the current directory: hence the prepare line above
(the same deterministic split the sweep builds for fine-tuning under DIR).

Fine-tuning, from that model, for each task (`searched.py`: the task's own config with the
learning rate searched on dev, `albert_jax.jobs.lr_search`, on seed 0 of each point, so each
layout and the control gets its own rate) and each layout, `finetune.unshare` = '' (the
checkpoint's shared block), all, attention, ffn (per-layer copies of both sub-blocks, of the
attention only, of the FFN only), plus the random-init control (`init=none`, the same shape and
tokenizer), seeds 0-4:

- sentiment (reviews, accuracy), ner (People's Daily entities, F1), relation (triples, F1),
  entities (UniLM seq2seq generation, character F1), headlines (held-out classification, suite.py)

Each run evaluates dev once per epoch (the report's dev curves) and an unshared one records each
layer's distance from the shared start and the layers' similarity at each evaluation
(`drift.jsonl`, `FinetuneTask.on_evaluation`). The report (results.csv, results.md, plots/):
per task and layout mean ± std over seeds, Welch's p and the minimum detectable difference
against the shared layout, collapsed seeds, the searched rate, dev after epoch 1, the layer drift
table, and the plots (score by layout with each seed, dev curves, layer drift).

CPU time, estimated (not measured as a whole): about 45 hours on a quiet 2-core machine, more
beside other jobs; entities' generated evaluations are half of it. 25 points (5 tasks x 4
layouts + random init), each one search (trials of half a run's steps, each trial scored on the
whole dev set) and 5 seeds (dev once per epoch, then dev and test with the best weights).
Anchors: headlines' points in docs/results.md section 6 (search + 5 seeds of 750 steps of
32 x 32 tokens: 1027-1230 s; median step 0.20-0.24 s in runs/suite/headlines_*/seed_*/
metrics.jsonl; a dev pass of 1,004 texts ~4.8 s in their train.log). Each task's cost relative
to headlines: interleaved timings with the cpu_base model (10 steps and a 128-example dev pass
per task and round, medians of 3 rounds, on a loaded machine): a training step 2.2x
(sentiment), 2.8x (ner), 4.4x (relation), 4.6x (entities); an evaluated example 3.1x, 4.2x,
6.4x, and 29x for entities, which generates its targets token by token. Per point, then:
sentiment ~50 min (874 steps), ner ~95 (800 steps, a dev of 4,500 sentences scored 5 times a
seed), relation ~80 (770 steps, 10 epochs of dev), entities ~4.3 hours (1,286 steps; 2,658 dev
and 2,580 test generations ~6 minutes a pass, 4 passes a seed and 3 in the search), headlines
~20: 8.4 hours a point, 42 for the 25, plus a few % for the unshared layouts (docs/results.md
section 5: 8 % a step for albert-base; none measurable for headlines) and 30 minutes of
pretraining and data. A search whose trials all collapse runs them again longer (up to 4x the
search's cost, poems in section 6). The sweep resumes step by step (a finished run is skipped,
an interrupted one resumes from its checkpoint), and `unshare_study.py:TASK,TASK` runs only those
tasks in the same directory (the pretraining is shared): a task at a time, each with its table,
then the whole command for the report over all five (`--report_only` writes it at any point).
"""

from albert_jax.experiments.sweep import Sweep
from configs.sweeps.unshare_finetune import PAPER

TASKS = {
    "sentiment": "configs/finetune/searched.py:sentiment",
    "ner": "configs/finetune/searched.py:ner",
    "relation": "configs/finetune/searched.py:relation",
    "entities": "configs/finetune/searched.py:entities",
    "headlines": "configs/finetune/searched.py:suite:headlines",
}
LAYOUTS = {"default": "", "all": "all", "attention": "attention", "ffn": "ffn"}  # default: shared
RESULTS = "results/unshare_study"  # the kept cells, in the repository
DEV_SAMPLE = 1000  # dev examples scored by each epoch and search trial (final dev: all)


def get_sweep(arg: str | None = None) -> Sweep:
    tasks, _, layouts = (arg or "").partition("@")
    names = [t for t in tasks.split(",") if t] or list(TASKS)
    unknown = sorted(set(names) - set(TASKS))
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}: unshare_study.py:TASK,... with {list(TASKS)}")
    chosen = [x for x in layouts.split(",") if x] or list(LAYOUTS)
    if set(chosen) - set(LAYOUTS):
        raise ValueError(
            f"unknown layout(s) {sorted(set(chosen) - set(LAYOUTS))}: "
            f"unshare_study.py:TASKS@LAYOUT,... with {list(LAYOUTS)}"
        )
    return Sweep(
        pretrain_config="configs/pretrain/cpu_base.py",
        tasks={name: TASKS[name] for name in names},
        grid={"finetune.unshare": [LAYOUTS[x] for x in chosen]},
        finetune={"evals.dev.sample": DEV_SAMPLE},
        seeds=(0, 1, 2, 3, 4),
        paper=PAPER,
        random_init=True,
        results=RESULTS,
    )
