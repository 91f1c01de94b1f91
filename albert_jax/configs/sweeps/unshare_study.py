"""Does unsharing help? Issue 37's study, made cheap and kept (issue 54): shared against three
unshared layouts, each with its own learning rate chosen on dev, five seeds a cell, five tasks,
the random-init control, and the layers' drift.

  uv run python -m finetune.prepare sentiment      # cpu_base.py's in-domain text, once
  uv run python -m pretrain.sweep --config configs/sweeps/unshare_study.py:relation@default,all \
      --workdir runs/sw_unshare_study                 # the hard cells first, a task at a time
  uv run python -m pretrain.sweep --config configs/sweeps/unshare_study.py \
      --workdir runs/sw_unshare_study                 # everything (done cells are skipped)
  uv run python -m pretrain.sweep --config configs/sweeps/unshare_study.py \
      --workdir runs/sw_unshare_study --report_only   # the report from the kept cells alone

`unshare_study.py:TASK,...@LAYOUT,...` runs some tasks and layouts (default = the checkpoint's
shared block, all, attention, ffn); the random-init control comes with every selection.

Kept cells (`Sweep.results` = results/unshare_study, committed): every finished seed of every
point (and its first seed's learning-rate search) copies its small files there with the
pretraining checkpoint's fingerprint, and the report (results.md, results.csv, plots/) is
written there. A later checkout runs the same command: the pretraining is rebuilt (it rebuilds
bit for bit: the fingerprint must match, or the sweep stops) and every kept cell is restored
instead of run, so the study resumes where the last checkout stopped.

Pretraining: `configs/pretrain/cpu_base.py`, the recipe behind the project's main checkpoint
(`runs/cpu_base/model`, docs/results.md section 1), built again in DIR/pretrain/base (about 30
minutes). Its corpus reads the sentiment *training* texts from
`data/finetune/sentiment/train.jsonl` under the current directory: hence the prepare line above.

Fine-tuning, from that model, for each task (`searched.py`: the task's own config with the
learning rate searched on dev, `albert_jax.jobs.lr_search`, on seed 0 of each point, so each
layout and the control gets its own rate; seeds 1-4 train at the rate seed 0 chose) and each
layout, plus the random-init control (`init=none`, the same shape and tokenizer), seeds 0-4:

- sentiment (reviews, accuracy), ner (People's Daily entities, F1), relation (triples, F1),
  entities (UniLM seq2seq generation, character F1), headlines (held-out classification, suite.py)

Cheaper, same question (issue 54): the search's trials and each epoch's dev pass score a fixed
sample of `DEV_SAMPLE` dev examples (`evals.dev.sample`, drawn once: the same for every run;
relation's dev has fewer, so all of it); the best epoch's final dev and test score the whole
sets. Generation is greedy on device with the key/value cache, the batch stopping once every
row has ended (`albert_jax.model.decoding`). `benchmarks/dev_sample.py` compares the sampled
point with the whole-dev one on the same seeds (docs/performance.md).

Each run evaluates dev once per epoch (the report's dev curves; dev after epoch 1 is the founding
write-up's early figure) and an unshared one records each layer's distance from the shared start
and the layers' similarity at each evaluation (`drift.jsonl`). The report: per task and layout
mean ± std over seeds, Welch's p and the minimum detectable difference against the shared
layout, collapsed seeds, the searched rate, dev after epoch 1, the layer drift table, and plots.

CPU cost, measured per cell in the kept sweep_step.json files (docs/results.md gives the
figures): a point is its search (half a run's steps over three trials) and five seeds.
"""

from albert_jax.configs.sweeps.unshare_finetune import PAPER
from albert_jax.experiments.sweep import Sweep

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
