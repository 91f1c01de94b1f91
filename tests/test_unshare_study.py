"""Issue 37's study (configs/sweeps/unshare_study.py): the layer drift of unshared fine-tuning
(`sharing.layer_drift`, recorded as drift.jsonl), the minimum detectable difference, the
report's per-layout columns (Welch p and MDE against shared, collapsed seeds, the searched rate,
the learning rate chosen per layout on dev, the drift table and plots) on planted results, and
the study config (a tiny version of the study run end to end:
tests/integration/test_sweep_runs.py)."""

from __future__ import annotations

import csv
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import random_params, tiny_batch, tiny_config
from scipy import stats
from support.finetune import make_config
from support.sweeps import MODEL_CONFIG, STUDY, table, write_json

from albert_jax import AlbertForPreTraining
from albert_jax.experiments import sweep_report
from albert_jax.experiments.sweep import (
    Sweep,
    SweepError,
    check,
    control_points,
    groups,
    load,
    prepared_data,
)
from albert_jax.jobs import lr_search
from albert_jax.jobs import run as runs
from albert_jax.model import sharing
from albert_jax.model.losses import mlm_loss
from albert_jax.scoring.metrics import detectable_effect, min_detectable_difference, welch_t
from albert_jax.tasks import finetuning as F

# ---------------------------------------------------------------- layer drift


def _drift(params, start, config):
    return sharing.layer_drift(params, start, config)


def test_layer_drift_is_exactly_zero_before_training_in_either_layout():
    """An unshared model is L copies of its shared start: every distance is exactly 0 and the
    layers are identical (cosine 1), whether the start is given unshared ([L, ...]) or shared
    ([1, ...])."""
    config = tiny_config("all")
    shared = random_params(AlbertForPreTraining(config))
    unshared, uconfig = sharing.unshare(shared, config)
    assert shared["encoder"]["ffn"]["output"]["kernel"].shape[0] == 1
    for params, start in [(unshared, unshared), (unshared, shared)]:
        drift = _drift(params, start, uconfig)
        for block in ("attention", "ffn"):
            assert drift[block]["distance"].shape == (config.num_layers,)
            assert np.all(drift[block]["distance"] == 0.0)
            assert drift[block]["similarity"] == pytest.approx(1.0, abs=1e-6)


def _sgd_steps(params, config, steps: int, lr: float = 0.3):
    model, batch = AlbertForPreTraining(config), tiny_batch()
    labels = jnp.asarray(np.random.default_rng(1).integers(5, 97, (2, 3)))

    def loss(p):
        out = model.apply({"params": p}, **batch)
        return mlm_loss(out.mlm_logits, labels, jnp.ones((2, 3)))

    tx = optax.sgd(lr)
    state = tx.init(params)
    grad = jax.jit(jax.grad(loss))
    for _ in range(steps):
        updates, state = tx.update(grad(params), state)
        params = optax.apply_updates(params, updates)
    return params


def test_layer_drift_grows_under_training_and_is_the_relative_frobenius_distance():
    config = tiny_config("all")
    start, uconfig = sharing.unshare(random_params(AlbertForPreTraining(config)), config)
    one, three = _sgd_steps(start, uconfig, 1), _sgd_steps(start, uconfig, 3)
    d1, d3 = _drift(one, start, uconfig), _drift(three, start, uconfig)
    for block in ("attention", "ffn"):
        assert np.all(d1[block]["distance"] > 0)
        assert d3[block]["distance"].mean() > d1[block]["distance"].mean()
        assert d3[block]["similarity"] < d1[block]["similarity"] < 1.0

    # by hand, in float64, layer 2 of the attention block: its leaves flattened together
    def layer(p, block, i):
        return np.concatenate(
            [
                np.asarray(x[i], np.float64).ravel()
                for x in jax.tree_util.tree_leaves(p["encoder"][block])
            ]
        )

    w, w0 = layer(three, "attention", 2), layer(start, "attention", 2)
    want = np.linalg.norm(w - w0) / np.linalg.norm(w0)
    assert d3["attention"]["distance"][2] == pytest.approx(want, rel=1e-6)
    # the mean cosine over the 15 pairs of layers, compared as 1 - cosine (all are near 1)
    layers = [layer(three, "ffn", i) for i in range(6)]
    cos = [a @ b / np.linalg.norm(a) / np.linalg.norm(b)
           for i, a in enumerate(layers) for b in layers[i + 1 :]]  # fmt: skip
    assert len(cos) == 15 and 1 - d3["ffn"]["similarity"] == pytest.approx(
        1 - np.mean(cos), rel=1e-4
    )


def test_a_sub_block_left_shared_moves_as_one():
    """unshare=attention leaves the FFN one shared block: its layers stay identical (cosine 1)
    and move the same distance."""
    config = tiny_config("all")
    start, pconfig = sharing.regroup(
        random_params(AlbertForPreTraining(config)), config, attention_groups=6
    )
    drift = _drift(_sgd_steps(start, pconfig, 2), start, pconfig)
    ffn = drift["ffn"]["distance"]
    assert np.all(ffn > 0) and np.allclose(ffn, ffn[0]) and drift["ffn"]["similarity"] > 1 - 1e-5
    assert drift["attention"]["similarity"] < 1 - 1e-6


def test_an_unshared_run_records_its_drift_at_each_evaluation(pretrained, files, tmp_path):
    config = make_config(pretrained, "classification", files, total_steps=4, eval_every=2)
    config.unshare = "all"
    runs.run(config, str(tmp_path))
    rows = [json.loads(x) for x in open(tmp_path / F.DRIFT_FILE)]
    assert [r["step"] for r in rows] == [2, 4]
    for block in ("attention", "ffn"):
        first, last = (np.asarray(r[f"{block}_distance"]) for r in rows)
        assert first.shape == (3,) and np.all(first > 0) and last.mean() > first.mean()
        assert rows[1][f"{block}_similarity"] < 1.0
    assert rows[0]["epoch"] == pytest.approx(2 / 3)  # 24 examples, batches of 8: 3 steps an epoch
    # a step evaluated again (a resumed run) replaces its row and drops the ones after it
    data = F.FinetuneData(config, splits=("dev",))
    task = F.make_task(config, data, str(tmp_path))
    task.on_evaluation(data.source.params, 2)
    (row,) = [json.loads(x) for x in open(tmp_path / F.DRIFT_FILE)]
    assert row["step"] == 2 and row["attention_distance"] == [0.0, 0.0, 0.0]
    # a shared run writes none
    config.unshare = ""
    shared = F.make_task(config, F.FinetuneData(config, splits=("dev",)), str(tmp_path / "s"))
    shared.on_evaluation(data.source.params, 2)
    assert not os.path.exists(tmp_path / "s" / F.DRIFT_FILE)


# ---------------------------------------------------------------- power


def test_the_minimum_detectable_effect_matches_the_textbook_and_a_simulation():
    # n = 5 a side, alpha .05 two-sided, power .8: d = 2.02 (noncentral t; G*Power's table)
    d = detectable_effect(5, 5)
    assert d == pytest.approx(2.02, abs=0.01)
    # simulated: Student's t-test at that effect rejects 80 % of the time
    rng = np.random.default_rng(0)
    a = rng.standard_normal((100_000, 5)) + d
    b = rng.standard_normal((100_000, 5))
    power = np.mean(stats.ttest_ind(a, b, axis=1).pvalue < 0.05)
    assert power == pytest.approx(0.8, abs=0.006)
    # many seeds: the normal approximation (z_.975 + z_.8) sqrt(2 / n)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert detectable_effect(2000, 2000) == pytest.approx(z * np.sqrt(2 / 2000), rel=2e-3)
    assert detectable_effect(3, 3) > detectable_effect(5, 5) > detectable_effect(10, 10)
    assert np.isnan(detectable_effect(1, 5))
    # in the values' units: d times the pooled std (here both samples' std is 0.5)
    assert min_detectable_difference([1, 2, 1, 2], [3, 4, 3, 4]) == pytest.approx(
        detectable_effect(4, 4) * np.std([1, 2, 1, 2], ddof=1)
    )


# ---------------------------------------------------------------- the report, planted


def plant(work, sweep, cells, metric="accuracy"):
    """Results for every point: cells[point] = {"dev": [...], "test": [...], optional
    "collapsed": [seed, ...], "lr": chosen rate, "drift": [[distance per layer] per eval]}."""
    for g in groups(sweep):
        pdir = os.path.join(work, "pretrain", g[0].name("pretrain"))
        write_json(os.path.join(pdir, "metrics.jsonl"),
               [{"step": 20, "split": "eval", "mlm_accuracy": 0.3, "sop_accuracy": 0.7}],
               lines=True)  # fmt: skip
        write_json(os.path.join(pdir, "model", "config.json"), MODEL_CONFIG)
        for p in g + control_points(sweep, g):
            cell = cells[p.name()]
            for task in sweep.tasks:
                fdir = os.path.join(work, "finetune", task, p.name())
                per_seed = {}
                for i, seed in enumerate(sweep.seeds):
                    dev, test = cell["dev"][i], cell["test"][i]
                    fell = float(seed in cell.get("collapsed", ()))
                    per_seed[str(seed)] = {
                        "metric": metric, "best_step": 4, "dev_first_epoch": dev - 0.05,
                        "dev": {metric: dev, "collapsed": fell},
                        "test": {metric: test, "collapsed": fell},
                    }  # fmt: skip
                    sdir = os.path.join(fdir, f"seed_{seed}")
                    write_json(os.path.join(sdir, "metrics.jsonl"),
                           [{"step": 2, "split": "eval", metric: dev - 0.05},
                            {"step": 4, "split": "eval", metric: dev}], lines=True)  # fmt: skip
                    write_json(os.path.join(sdir, "config.json"), {"steps_per_epoch": 2})
                    if "drift" in cell:
                        rows = [{"step": 2 * (k + 1), "epoch": k + 1.0,
                                 "attention_distance": d, "attention_similarity": 1 - d[-1],
                                 "ffn_distance": [x / 2 for x in d],
                                 "ffn_similarity": 1 - d[-1] / 2}
                                for k, d in enumerate(cell["drift"])]  # fmt: skip
                        write_json(os.path.join(sdir, F.DRIFT_FILE), rows, lines=True)
                summary = {"per_seed": per_seed}
                if "lr" in cell:
                    summary["lr_search"] = {"chosen": cell["lr"], "fallback": cell["lr"] == 3e-4}
                write_json(os.path.join(fdir, "summary.json"), summary)


def test_report_picks_each_layouts_learning_rate_on_dev_and_reads_test_there(tmp_path):
    """Planted: for each layout the best mean dev is not the best test. The table shows, per
    layout, the rate with the best mean dev and the test at that rate, and tests the layouts
    against each other at their chosen rates."""
    sweep = Sweep(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"sentiment": "configs/finetune/sentiment.py"},
        grid={"finetune.unshare": ["", "all"], "finetune.optim.learning_rate": [1e-4, 3e-4, 1e-3]},
        seeds=(0, 1, 2),
    )
    cells = {
        "unshare=default,learning_rate=0.0001": {
            "dev": [0.80, 0.82, 0.81],
            "test": [0.70, 0.71, 0.72],
        },
        "unshare=default,learning_rate=0.0003": {
            "dev": [0.78, 0.79, 0.77],
            "test": [0.90, 0.91, 0.89],
        },
        "unshare=default,learning_rate=0.001": {
            "dev": [0.60, 0.62, 0.61],
            "test": [0.60, 0.60, 0.61],
        },
        "unshare=all,learning_rate=0.0001": {"dev": [0.70, 0.70, 0.71], "test": [0.95, 0.94, 0.95]},
        "unshare=all,learning_rate=0.0003": {"dev": [0.74, 0.70, 0.72], "test": [0.75, 0.77, 0.76]},
        "unshare=all,learning_rate=0.001": {"dev": [0.75, 0.76, 0.74], "test": [0.66, 0.64, 0.65]},
    }
    work = str(tmp_path)
    plant(work, sweep, cells)
    text = sweep_report.write(sweep, work)
    head = table(text, "| unshare |")[0]
    assert "| optim.learning_rate (best dev) |" in head and "| lr |" in head
    rows = table(text, "| default |") + table(text, "| all |")
    chosen = [r for r in rows if r.count("|") == head.count("|")]
    assert len(chosen) == 2  # one row a layout
    shared, unshared = chosen
    assert shared.startswith("| default | 0.0001 |") and "| 81.00 ± 1.00 | 71.00 ± 1.00 |" in shared
    assert unshared.startswith("| all | 0.001 |") and "| 75.00 ± 1.00 | 65.00 ± 1.00 |" in unshared
    _, p = welch_t([0.66, 0.64, 0.65], [0.70, 0.71, 0.72])
    mde = 100 * min_detectable_difference([0.66, 0.64, 0.65], [0.70, 0.71, 0.72])
    assert f"| {p:.2g} | {mde:.2f} |" in unshared and "| - | - |" in shared
    # every rate is listed with the chosen one marked
    marked = [r for r in rows if r.rstrip().endswith("← |")]
    assert [r.split("|")[1:3] for r in marked] == [[" default ", " 0.0001 "], [" all ", " 0.001 "]]
    assert len([r for r in rows if r not in chosen]) == 6
    # the plots show the chosen points
    assert (tmp_path / "plots" / "sentiment_scores.png").stat().st_size > 5000
    assert sweep_report.dev_selected(sweep, sweep_report.collect(sweep, work)) == [
        "unshare=default,learning_rate=0.0001", "unshare=all,learning_rate=0.001"
    ]  # fmt: skip


def test_report_compares_every_layout_with_shared_and_flags_collapsed_seeds(tmp_path):
    seeds = (0, 1, 2, 3, 4)
    sweep = Sweep(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"ner": "configs/finetune/ner.py"},
        grid={"finetune.unshare": ["", "all", "attention", "ffn"]},
        seeds=seeds,
        random_init=True,
    )
    drift = [[0.01, 0.02, 0.03, 0.04], [0.02, 0.04, 0.06, 0.08]]
    cells = {
        "unshare=default": {"dev": [.5] * 5, "test": [.50, .52, .54, .51, .53], "lr": 1e-4},
        "unshare=all": {"dev": [.5] * 5, "test": [.55, .57, .56, .58, .54], "lr": 3e-5,
                        "drift": drift},
        # two seeds collapsed to 0 F1: they are the spread
        "unshare=attention": {"dev": [.5] * 5, "test": [.52, .0, .53, .0, .52], "lr": 1e-4,
                              "collapsed": [1, 3], "drift": drift},
        "unshare=ffn": {"dev": [.5] * 5, "test": [.50, .52, .54, .51, .53], "lr": 3e-4,
                        "drift": drift},
        "init=none": {"dev": [.4] * 5, "test": [.40, .41, .42, .43, .44], "lr": 1e-4},
    }  # fmt: skip
    work = str(tmp_path)
    plant(work, sweep, cells, metric="f1")
    text = sweep_report.write(sweep, work)
    head = table(text, "| unshare |")[0]
    for col in ("test Welch p vs random", "test Welch p vs shared", "MDE (α .05, power .8)",
                "collapsed seeds", "lr", "dev f1 after epoch 1", "seeds"):  # fmt: skip
        assert f"| {col} |" in head, col
    cols = [c.strip() for c in head.split("|")[1:-1]]
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[1:-1]]
            for r in table(text, "| ") if r.count("|") == head.count("|") and r != head
            and "---" not in r}  # fmt: skip
    at = lambda name, col: rows[name][cols.index(col)]  # noqa: E731
    shared = [0.50, 0.52, 0.54, 0.51, 0.53]
    for name, test in (("all", cells["unshare=all"]["test"]), ("ffn", shared)):
        _, p = welch_t(test, shared)
        assert at(name, "test Welch p vs shared") == f"{p:.2g}"
        assert (
            at(name, "MDE (α .05, power .8)")
            == f"{100 * min_detectable_difference(test, shared):.2f}"
        )  # noqa: E501
    assert at("ffn", "test Welch p vs shared") == "1"  # the same values
    assert at("default", "test Welch p vs shared") == "-" and at("default", "lr") == "0.0001"
    assert at("ffn", "lr") == "0.0003 (fallback)" and at("random init", "lr") == "0.0001"
    assert at("attention", "collapsed seeds") == "2" and at("all", "collapsed seeds") == "0"
    assert at("attention", "test f1").endswith("†") and not at("all", "test f1").endswith("†")
    assert "† spread dominated by collapsed seeds" in text
    assert "unshare=attention: 2 of 5 seeds collapsed, the others 52.33 ± 0.58" in text
    assert "MDE: the smallest difference" in text
    # the drift table: the last evaluation's distances per layer, and the similarity
    drift_rows = table(text, "| all | 0.02 0.04 0.06 0.08 |")
    assert (
        len(drift_rows) == 1
        and "| 0.920000 | 0.01 0.02 0.03 0.04 | 0.960000 | 5 |" in drift_rows[0]
    )
    assert len(table(text, "| all |")) == 2 and len(table(text, "| default |")) == 1  # no drift
    with open(tmp_path / "results.csv") as f:
        csv_rows = [r for r in csv.DictReader(f) if r["point"] == "unshare=all"]
    assert csv_rows[0]["drift_attention_layers"] == "0.02 0.04 0.06 0.08"
    assert float(csv_rows[0]["drift_attention"]) == pytest.approx(0.05)
    assert float(csv_rows[0]["similarity_ffn"]) == pytest.approx(0.96)
    for name in ("ner_scores", "ner_dev_curves", "ner_drift"):
        png = tmp_path / "plots" / f"{name}.png"
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 5000, name
        assert f"(plots/{name}.png)" in (tmp_path / "results.md").read_text()


# ---------------------------------------------------------------- the study config


def test_the_study_searches_the_rate_of_every_task_and_can_run_some_tasks():
    sweep = load(STUDY)
    assert list(sweep.tasks) == ["sentiment", "ner", "relation", "entities", "headlines"]
    assert sweep.grid == {"finetune.unshare": ["", "all", "attention", "ffn"]}
    assert sweep.seeds == (0, 1, 2, 3, 4) and sweep.random_init and sweep.paper
    assert sweep.pretrain_config == "configs/pretrain/cpu_base.py"
    from albert_jax.experiments.sweep import _import

    for path in sweep.tasks.values():
        config = _import(path, "get_config")
        assert lr_search.wanted(config), path  # a rate left to the search on dev
    assert _import(sweep.tasks["entities"], "get_config").task.type == "seq2seq"
    headlines = _import(sweep.tasks["headlines"], "get_config")
    assert headlines.task.prepare == "headlines" and headlines.min_steps == 800
    name, files_ = prepared_data(sweep, sweep.tasks["headlines"], "/sw")
    assert name == "headlines" and files_["task.train"] == "/sw/data/finetune/headlines/train.jsonl"
    some = load(STUDY + ":sentiment,headlines")
    assert list(some.tasks) == ["sentiment", "headlines"] and some.grid == sweep.grid
    check(some)
    # the hard cells first: some layouts of some tasks, kept in the repository, dev sampled
    hard = load(STUDY + ":relation@default,all")
    assert list(hard.tasks) == ["relation"] and hard.grid == {"finetune.unshare": ["", "all"]}
    assert hard.results == "results/unshare_study" and hard.random_init
    assert hard.finetune == {"evals.dev.sample": 1000}
    check(hard)
    with pytest.raises(SweepError, match="unknown layout"):
        load(STUDY + ":relation@alll")
    with pytest.raises(SweepError, match="unknown task"):
        load(STUDY + ":sentimant")
    with pytest.raises(SweepError, match="searched.py:TASK"):
        check(Sweep(pretrain_config="configs/pretrain/cpu_small.py",
                    tasks={"x": "configs/finetune/searched.py"}, grid={}))  # fmt: skip
