"""Sweeps (`python -m pretrain.sweep`): points, groups and their commands, the config check,
prepared datasets, and the report over known results. The sweeps that run processes (the dry
run against the cluster launchers, a real tiny sweep interrupted, resumed and submitted through
submitit's local executor): tests/integration/test_sweep_runs.py."""

from __future__ import annotations

import csv
import glob
import math
import os

import pytest
from scipy import stats
from support.sweeps import MODEL_CONFIG, write_json

from albert_jax.experiments import sweep_report
from albert_jax.experiments.sweep import (
    Sweep,
    SweepError,
    apply_sets,
    check,
    control_points,
    groups,
    load,
    points,
    prepare_steps,
    steps,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def grid_sweep(**kw) -> Sweep:
    base = dict(
        pretrain_config="configs/pretrain/cpu_small.py",
        tasks={"sentiment": "configs/finetune/sentiment.py", "ner": "configs/finetune/ner.py"},
        grid={
            "pretrain.model.layout": ["all", "none"],
            "finetune.unshare": ["", "all"],
            "pretrain.data.mode": ["sop"],
        },
        pretrain={"total_steps": 7},
        finetune={"num_epochs": 1.0},
        seeds=(0, 1),
    )
    return Sweep(**{**base, **kw})


def test_points_share_their_pretraining_run_and_commands_carry_every_override(tmp_path):
    sweep = grid_sweep()
    assert len(points(sweep)) == 4
    gs = groups(sweep)
    assert [len(g) for g in gs] == [2, 2]  # unshare does not change the pretraining run
    for g in gs:
        layout = g[0].scope("pretrain")["model.layout"]
        assert all(p.scope("pretrain")["model.layout"] == layout for p in g)
        ss = steps(sweep, g, str(tmp_path))
        # 2 points x 2 tasks x 2 seeds, each seed its own run
        assert [s.kind for s in ss] == ["pretrain"] + ["finetune"] * 8
        pre = ss[0]
        assert pre.command[pre.command.index("--workdir") + 1] == pre.workdir
        assert f"--config.model.layout={layout}" in pre.command
        assert "--config.total_steps=7" in pre.command and "--config.data.mode=sop" in pre.command
        model = os.path.join(pre.workdir, "model")
        for s, point in zip(ss[1:], [p for p in g for _ in range(4)], strict=True):
            assert f"--config.init={model}" in s.command and "--config.num_epochs=1.0" in s.command
            assert f"--config.unshare={point.scope('finetune')['unshare']}" in s.command
            seed = s.label.rsplit(" ", 1)[1]
            assert f"--config.seeds={seed}" in s.command and s.workdir.endswith(f"seed_{seed}")
            assert s.done_file == os.path.join(s.workdir, "summary.json")
            assert (s.late_flags is None) == (seed == "0")  # later seeds: the searched rate
    # one data directory for both layouts (their data fields agree)
    dirs = {s.command[-1] for g in gs for s in steps(sweep, g, str(tmp_path))[:1]}
    assert len(dirs) == 1 and next(iter(dirs)).startswith("--config.data.data_dir=")
    names = [os.path.dirname(steps(sweep, g, str(tmp_path))[1].workdir) for g in gs]
    assert len(set(names)) == 2


def test_random_init_row_fine_tunes_from_the_pretrained_shape_and_tokenizer(tmp_path):
    sweep = grid_sweep(random_init=True)
    check(sweep)
    assert len(points(sweep)) == 4  # the grid is unchanged; each group gains its control
    for g in groups(sweep):
        (control,) = control_points(sweep, g)  # one: unshare is the only fine-tuning axis
        assert control.random_init and "finetune.unshare" not in dict(control.values)
        ss = steps(sweep, g, str(tmp_path))
        assert [s.kind for s in ss] == ["pretrain"] + ["finetune"] * 12  # 3 points x 2 x 2
        model = os.path.join(ss[0].workdir, "model")
        randoms = [s for s in ss if "--config.init=none" in s.command]
        assert [s.label.split()[0] for s in randoms] == ["sentiment"] * 2 + ["ner"] * 2
        for s in randoms:
            point_dir = os.path.dirname(s.workdir)
            assert point_dir.endswith(control.name()) and control.name().endswith("init=none")
            assert f"--config.tokenizer={model}" in s.command
            assert f"--config.model_from={model}" in s.command
            assert f"--config.init={model}" not in s.command
            assert not any(a.startswith("--config.unshare") for a in s.command)
            assert "--config.num_epochs=1.0" in s.command
    assert not control_points(grid_sweep(), groups(grid_sweep())[0])  # off by default
    # the quickstart and the unsharing sweep carry the row
    for name in ("quickstart", "unshare_finetune"):
        sweep = load(os.path.join(REPO, "configs", "sweeps", f"{name}.py"))
        (g,) = groups(sweep)
        commands = [" ".join(s.command) for s in steps(sweep, g, str(tmp_path))]
        n = len(sweep.tasks) * len(sweep.seeds)
        assert sum("--config.init=none" in c for c in commands) == n


def test_prepared_datasets_are_built_and_read_in_the_sweep_directory(tmp_path):
    """A task config's `finetune.prepare` dataset (relative data/finetune/NAME/...) is built
    under the sweep directory (`--out`), its log beside it, and every fine-tuning run of the task
    reads it there; a task whose training file the sweep names gets neither."""
    work = str(tmp_path)
    sweep = grid_sweep(finetune={"task.dev": "/mine/dev.txt"})
    prep = [s for s in prepare_steps(sweep, work) if "albert_jax.finetune.prepare" in s.command]
    data = {t: os.path.join(work, "data", "finetune", t) for t in ("sentiment", "ner")}
    assert [s.command[-3:] for s in prep] == [[t, "--out", d] for t, d in data.items()]
    for s, (t, d) in zip(prep, data.items(), strict=True):
        ext = "jsonl" if t == "sentiment" else "conll"
        assert s.done_file == os.path.join(d, f"train.{ext}") and not s.marker
        assert s.workdir == d + ".sweep"  # not inside: prepare replaces the dataset's directory
    for g in groups(sweep):
        for s in steps(sweep, g, work)[1:]:  # the fine-tuning runs
            task = s.label.split()[0]
            d, ext = data[task], "jsonl" if task == "sentiment" else "conll"
            want = [f"--config.task.train={d}/train.{ext}", f"--config.task.test={d}/test.{ext}"]
            want.append("--config.task.dev=/mine/dev.txt")  # the sweep's own, once
            assert [a for a in s.command if a.startswith("--config.task.")] == want
    own = grid_sweep(finetune={"task.train": "/mine/train.txt"})
    assert not [s for s in prepare_steps(own, work) if "albert_jax.finetune.prepare" in s.command]
    commands = [" ".join(s.command) for g in groups(own) for s in steps(own, g, work)]
    assert not any(os.path.join(work, "data", "finetune") in c for c in commands)


def test_report_sums_the_wall_time_of_every_invocation(tmp_path):
    sweep = grid_sweep(tasks={"sentiment": "configs/finetune/sentiment.py"}, seeds=(0, 1))
    sweep.grid.pop("pretrain.data.mode")
    work = str(tmp_path)
    fake_results(work, sweep, {p.name(): [0.8, 0.8] for p in points(sweep)})
    for g in groups(sweep):
        pdir = os.path.join(work, "pretrain", g[0].name("pretrain"))
        write_json(os.path.join(pdir, "sweep_step.json"), {"runs": [{"wall_s": 10}, {"wall_s": 5}]})
        for p in g:
            fdir = os.path.join(work, "finetune", "sentiment", p.name())
            runs = [{"wall_s": 30.0}, {"wall_s": 20.0}, {"started": 1.0}]  # the last one running
            write_json(os.path.join(fdir, "sweep_step.json"), {"wall_s": 20.0, "runs": runs})
    old = os.path.join(work, "finetune", "sentiment", "layout=all,unshare=all", "sweep_step.json")
    write_json(old, {"wall_s": 8.0})  # a record from before invocations were kept
    rows = sweep_report.collect(sweep, work)
    assert {r["pretrain_wall_s"] for r in rows} == {15}
    walls = {r["point"]: r["finetune_wall_s"] for r in rows}
    assert walls.pop("layout=all,unshare=all") == 4.0
    assert set(walls.values()) == {25.0}  # (30 + 20) / 2 seeds


def test_set_overrides_fix_an_axis_and_the_seeds():
    sweep = apply_sets(grid_sweep(), ["finetune.unshare=all", "seeds=3", "pretrain.seed=5"])
    assert "finetune.unshare" not in sweep.grid and sweep.finetune["unshare"] == "all"
    assert sweep.seeds == (3,) and sweep.pretrain["seed"] == "5"
    assert len(points(sweep)) == 2
    with pytest.raises(SweepError, match="expected pretrain.FIELD"):
        apply_sets(grid_sweep(), ["model.layout=all"])


def test_check_names_the_field_that_does_not_exist():
    check(grid_sweep())  # every override exists in its config
    bad = grid_sweep(grid={"pretrain.model.sharing": ["all"]})
    with pytest.raises(SweepError, match=r"pretrain.model.sharing: .*cpu_small.py.* 'sharing'"):
        check(bad)
    with pytest.raises(SweepError, match="finetune.optim.lr: .* 'lr'"):
        check(grid_sweep(finetune={"optim.lr": 1}))
    with pytest.raises(SweepError, match="nope.py: no such config file"):
        check(grid_sweep(tasks={"x": "configs/finetune/nope.py"}))


SWEEP_CONFIGS = sorted(
    f[:-3] for f in os.listdir(os.path.join(REPO, "configs", "sweeps")) if f[0] != "_"
)


@pytest.mark.parametrize("name", SWEEP_CONFIGS)
def test_every_sweep_config_names_real_fields(name):
    from albert_jax.experiments.sweep import load

    sweep = load(os.path.join(REPO, "configs", "sweeps", f"{name}.py"))
    check(sweep)  # each grid axis and override exists in its pretraining / fine-tuning config
    assert points(sweep)


# --- the report, over results written by hand ----------------------------------------------------
def fake_results(work, sweep, test_acc, last_eval=None):
    """Pretraining metrics, models and per-seed fine-tuning results for every point."""
    for g in groups(sweep):
        pdir = os.path.join(work, "pretrain", g[0].name("pretrain"))
        write_json(
            os.path.join(pdir, "metrics.jsonl"),
            [
                {"step": 2, "split": "train", "step_time_s": 4.0},  # compiling: not in s/step
                {"step": 5, "split": "train", "step_time_s": 0.5},
                {"step": 10, "split": "eval", "mlm_accuracy": 0.2, "sop_accuracy": 0.6},
                {"step": 20, "split": "eval", "mlm_accuracy": 0.3, "sop_accuracy": 0.7}
                | (last_eval or {}),
            ],
            lines=True,
        )
        layout = g[0].scope("pretrain")["model.layout"]
        groups_ = dict(attention_groups=4, ffn_groups=4) if layout == "none" else {}
        write_json(os.path.join(pdir, "model", "config.json"), {**MODEL_CONFIG, **groups_})
        for p in g + control_points(sweep, g):
            fdir = os.path.join(work, "finetune", "sentiment", p.name())
            per_seed = {}
            for seed in sweep.seeds:
                acc = test_acc[p.name()][seed]
                per_seed[str(seed)] = {
                    "metric": "accuracy", "best_step": 4, "dev": {"accuracy": acc - 0.01},
                    "test": {"accuracy": acc}, "dev_first_epoch": acc - 0.02,
                }  # fmt: skip
                sdir = os.path.join(fdir, f"seed_{seed}")
                write_json(
                    os.path.join(sdir, "metrics.jsonl"),
                    [
                        {"step": 1, "split": "train", "step_time_s": 3.0},  # compiling
                        {"step": 2, "split": "train", "step_time_s": 0.1},
                        {"step": 2, "split": "eval", "accuracy": acc - 0.02},
                        {"step": 4, "split": "eval", "accuracy": acc - 0.01},
                    ],
                    lines=True,
                )
                write_json(os.path.join(sdir, "config.json"), {"steps_per_epoch": 2})
            write_json(os.path.join(fdir, "summary.json"), {"per_seed": per_seed})


def test_report_tables_csv_and_plots_from_known_results(tmp_path):
    sweep = grid_sweep(tasks={"sentiment": "configs/finetune/sentiment.py"}, seeds=(0, 1, 2))
    sweep.grid.pop("pretrain.data.mode")
    accs = {
        "layout=all,unshare=default": [0.80, 0.82, 0.84],
        "layout=all,unshare=all": [0.81, 0.81, 0.81],
        "layout=none,unshare=default": [0.70, 0.75, 0.80],
        "layout=none,unshare=all": [0.60, 0.60, 0.63],
    }
    work = str(tmp_path)
    fake_results(work, sweep, accs)
    text = sweep_report.write(sweep, work)

    with open(tmp_path / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 * 3
    row = next(r for r in rows if r["point"] == "layout=none,unshare=all" and r["seed"] == "2")
    assert float(row["test_accuracy"]) == pytest.approx(0.63)
    assert float(row["pretrain_mlm_accuracy"]) == pytest.approx(0.3)  # the last evaluation
    assert float(row["pretrain_step_s"]) == 0.5 and float(row["finetune_step_s"]) == 0.1
    from albert_jax.model.albert import count_params
    from albert_jax.model.config import AlbertConfig

    unshared = count_params(AlbertConfig(**MODEL_CONFIG, attention_groups=4, ffn_groups=4))
    assert int(row["params_pretrained"]) == unshared
    assert count_params(AlbertConfig(**MODEL_CONFIG)) < unshared

    lines = text.splitlines()
    assert lines[0].startswith("### sentiment (accuracy")
    # mean ± sample std in percent: 70, 75, 80 -> 75.00 ± 5.00; 80, 82, 84 -> 82.00 ± 2.00
    none_default = next(line for line in lines if line.startswith("| none | default |"))
    assert "| 75.00 ± 5.00 |" in none_default and "| 3 |" in none_default
    all_default = next(line for line in lines if line.startswith("| all | default |"))
    assert "| 82.00 ± 2.00 |" in all_default and "| 81.00 ± 2.00 |" in all_default  # test, dev
    assert "| 30.00 | 70.00 |" in all_default  # held-out MLM and SOP accuracy
    assert all_default.endswith("| 3 | 0.1 |")  # seeds, s/step (seconds, not a percentage)
    for name in ("pretrain_curves", "sentiment_scores", "sentiment_params", "sentiment_dev_curves"):
        png = tmp_path / "plots" / f"{name}.png"
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 5000
        assert f"(plots/{name}.png)" in (tmp_path / "results.md").read_text()


def test_report_labels_the_random_init_row(tmp_path):
    sweep = grid_sweep(
        tasks={"sentiment": "configs/finetune/sentiment.py"}, seeds=(0, 1), random_init=True
    )
    sweep.grid.pop("pretrain.data.mode")
    accs = {p.name(): [0.8, 0.82] for p in points(sweep)}
    accs |= {"layout=all,init=none": [0.6, 0.64], "layout=none,init=none": [0.5, 0.5]}
    majority = {"mlm_majority_accuracy": 0.05, "sop_majority_share": 0.5}
    fake_results(str(tmp_path), sweep, accs, last_eval=majority)
    lines = sweep_report.write(sweep, str(tmp_path)).splitlines()
    random = [line for line in lines if "random init" in line]
    assert random[0].startswith("| all | random init | ") and random[1].startswith("| none |")
    # its test accuracy; no MLM / SOP figures (its group's pretraining was not used)
    assert "| - | - | 61.00 ± 2.83 | 62.00 ± 2.83 | - |" in random[0]  # dev, test, p
    # the pretrained rows: held-out accuracies beside the constant predictor's, and Welch's p of
    # test accuracy against the random-init row of the same pretraining run (by hand:
    # [0.8, 0.82] against [0.6, 0.64], t = 0.19 / sqrt(0.0005), df = 0.0005^2 / 1.7e-7)
    t, df = 0.19 / math.sqrt(0.0005), 0.0005**2 / 1.7e-7
    p = 2 * stats.t.sf(t, df)
    assert "| MLM acc (majority) | SOP acc (majority) |" in lines[2]
    assert "| test Welch p vs random |" in lines[2]
    shared = next(line for line in lines if line.startswith("| all | default |"))
    assert f"| 30.00 (5.00) | 70.00 (50.00) | 80.00 ± 1.41 | 81.00 ± 1.41 | {p:.2g} |" in shared
    assert len([line for line in lines if line.startswith("| all | ")]) == 3
    with open(tmp_path / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 * 2
    assert {r["point"] for r in rows if r["finetune.init"] == "none"} == set(accs) - {
        p.name() for p in points(sweep)
    }
    # with unshare fixed (no unshare column) the table gains an init column instead
    fixed = apply_sets(sweep, ["finetune.unshare=all"])
    work = str(tmp_path / "fixed")
    fake_results(work, fixed, {**accs, "layout=all": [0.7, 0.7], "layout=none": [0.7, 0.7]})
    text = sweep_report.markdown(fixed, sweep_report.collect(fixed, work))
    assert "| model.layout | init | params |" in text
    assert "\n| all | pretrained |" in text and "\n| all | random init |" in text


def test_report_shows_the_cross_task_accuracies(tmp_path):
    """With cross_eval (sop_vs_nsp.py) the table gains each sentence task's accuracy and the
    accuracy of always answering its more frequent label."""
    sweep = grid_sweep(tasks={"sentiment": "configs/finetune/sentiment.py"}, seeds=(0,))
    sweep.grid.pop("pretrain.data.mode")
    accs = {p.name(): [0.8] for p in points(sweep)}
    cross = {"sop_task_accuracy": 0.7, "sop_task_majority": 0.65}
    cross |= {"nsp_task_accuracy": 0.55, "nsp_task_majority": 0.6}
    fake_results(str(tmp_path), sweep, accs, last_eval=cross)
    lines = sweep_report.write(sweep, str(tmp_path)).splitlines()
    assert "| SOP task acc | SOP task majority | NSP task acc | NSP task majority |" in lines[2]
    assert all("| 30.00 | 70.00 | 70.00 | 65.00 | 55.00 | 60.00 |" in line for line in lines[4:8])
    with open(tmp_path / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert float(rows[0]["pretrain_nsp_task_accuracy"]) == pytest.approx(0.55)


def test_one_seed_shows_no_spread():
    assert sweep_report._ms([0.7884]) == "78.84"  # not "78.84 ± 0.00"
    assert sweep_report._ms([0.70, 0.80]) == "75.00 ± 7.07"


def test_kept_cells_are_restored_only_for_their_own_pretraining(tmp_path, pretrained):
    """`Sweep.results`: a finished seed's small files are copied to the mirror with the
    pretraining's fingerprint; in a fresh sweep directory the cell is done (its files restored
    and the point's summary merged) when the rebuilt pretraining has that fingerprint, and
    runs again when it has another."""
    import json
    import shutil

    from albert_jax.experiments.sweep import Kept, Step, fingerprint, merge_seeds

    work, kept_dir = tmp_path / "sw", tmp_path / "kept"
    pdir = work / "pretrain" / "base"
    shutil.copytree(pretrained, pdir / "model")
    kept = Kept(str(kept_dir), str(work), str(pdir))
    fdir = work / "finetune" / "t" / "base"
    for seed, acc in ((0, 0.5), (1, 0.7)):
        sdir = fdir / f"seed_{seed}"
        res = {"metric": "accuracy", "dev": {"accuracy": acc}, "test": {"accuracy": acc},
               "dev_first_epoch": acc, "dev_last": acc, "best_step": 2}  # fmt: skip
        summary = {"per_seed": {str(seed): res}, "metric": "accuracy", "layout": "all"}
        write_json(str(sdir / "summary.json"), {**summary, "lr_search": {"chosen": seed}})
        write_json(str(sdir / "checkpoints" / "big"), {})  # never kept
        kept.keep_pretraining()
        kept.keep(str(sdir), cell=True)
    merged = merge_seeds(str(fdir), (0, 1))
    assert merged["seeds"] == [0, 1] and merged["lr_search"] == {"chosen": 0}  # the first's
    assert merged["test"]["accuracy"]["mean"] == pytest.approx(0.6)
    cell = json.loads((kept_dir / "finetune/t/base/seed_1/cell.json").read_text())
    assert cell["fingerprint"] == fingerprint(str(pdir / "model")) and "device" in cell
    assert not (kept_dir / "finetune/t/base/seed_1/checkpoints").exists()
    assert (kept_dir / "pretrain/base/model/config.json").exists()

    def step(workdir):
        sdir = workdir / "finetune" / "t" / "base" / "seed_1"
        k = Kept(str(kept_dir), str(workdir), str(workdir / "pretrain" / "base"))
        fd = str(sdir.parent)

        def merged():
            write_json(fd + "/summary.json", merge_seeds(fd, (0, 1)))

        done = str(sdir / "summary.json")
        return Step("finetune", "t", ["true"], str(sdir), done, kept=k, restored=merged)

    fresh = tmp_path / "fresh"
    assert not step(fresh).done()  # no pretraining yet: nothing to match
    shutil.copytree(pretrained, fresh / "pretrain" / "base" / "model")
    assert step(fresh).done()  # the same pretraining: restored, the point merged
    restored = fresh / "finetune/t/base/seed_1/summary.json"
    assert json.loads(restored.read_text())["per_seed"]["1"]["test"]["accuracy"] == 0.7
    assert json.loads((fresh / "finetune/t/base/summary.json").read_text())["seeds"] == [1]
    other = tmp_path / "other"
    shutil.copytree(pretrained, other / "pretrain" / "base" / "model")
    (other / "pretrain" / "base" / "fingerprint.json").write_text('{"sha256": "f00"}')
    assert not step(other).done()  # another pretraining: the cell runs again
    with pytest.raises(SweepError, match="is not the pretraining the kept results"):
        Kept(str(kept_dir), str(other), str(other / "pretrain" / "base")).keep_pretraining()


def test_the_fingerprint_sees_one_changed_bit(tmp_path, pretrained):
    import shutil

    import numpy as np

    from albert_jax.checkpoints import checkpoint
    from albert_jax.experiments.sweep import fingerprint

    config, params = checkpoint.load(pretrained)
    again = str(tmp_path / "again")
    checkpoint.save(again, config, params)
    assert fingerprint(again) == fingerprint(pretrained)  # written again: the same
    emb = np.array(params["embeddings"]["word_embeddings"])
    emb.view(np.uint32)[0, 0] ^= 1  # one bit of one parameter
    params["embeddings"]["word_embeddings"] = emb
    changed = str(tmp_path / "changed")
    checkpoint.save(changed, config, params)
    assert fingerprint(changed) != fingerprint(pretrained)
    shutil.rmtree(changed)


def test_report_warns_when_a_tasks_cells_ran_on_different_devices(tmp_path):
    """Kept cells record their machine (cell.json): a task whose arms ran on two kinds of
    device says so above its table; one kind says nothing."""
    sweep = grid_sweep(tasks={"sentiment": "configs/finetune/sentiment.py"}, seeds=(0, 1))
    sweep.grid.pop("pretrain.data.mode")
    work = str(tmp_path)
    fake_results(work, sweep, {p.name(): [0.8, 0.8] for p in points(sweep)})
    cells = sorted(glob.glob(os.path.join(work, "finetune", "sentiment", "*", "seed_*")))
    for sdir in cells:
        write_json(os.path.join(sdir, "cell.json"), {"device": "cpu: cpu"})
    assert "kinds of device" not in sweep_report.write(sweep, work)
    write_json(os.path.join(cells[0], "cell.json"), {"device": "gpu: NVIDIA H100"})
    text = sweep_report.write(sweep, work)
    assert (
        "Warning: this task's cells ran on 2 kinds of device (cpu: cpu; gpu: NVIDIA H100)" in text
    )
    rows = sweep_report.collect(sweep, work)
    assert sorted({r["device"] for r in rows}) == ["cpu: cpu", "gpu: NVIDIA H100"]
