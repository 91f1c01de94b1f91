"""Sweeps (`python -m pretrain.sweep`): points, groups and their commands, the config check,
dry run against the cluster launchers, the report over known results, and (slow) a real tiny
sweep that is interrupted, resumed and submitted through submitit's debug executor."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from scipy import stats

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
from albert_jax.train import lock
from tests.test_workdir_source import CONFIG, MODEL, write_corpus

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
        assert [s.kind for s in ss] == ["pretrain"] + ["finetune"] * 4  # 2 points x 2 tasks
        pre = ss[0]
        assert pre.command[pre.command.index("--workdir") + 1] == pre.workdir
        assert f"--config.model.layout={layout}" in pre.command
        assert "--config.total_steps=7" in pre.command and "--config.data.mode=sop" in pre.command
        model = os.path.join(pre.workdir, "model")
        for s, point in zip(ss[1:], [p for p in g for _ in range(2)], strict=True):
            assert f"--config.init={model}" in s.command
            assert "--config.seeds=0,1" in s.command and "--config.num_epochs=1.0" in s.command
            assert f"--config.unshare={point.scope('finetune')['unshare']}" in s.command
            assert s.done_file.endswith("summary.json")
    # one data directory for both layouts (their data fields agree)
    dirs = {s.command[-1] for g in gs for s in steps(sweep, g, str(tmp_path))[:1]}
    assert len(dirs) == 1 and next(iter(dirs)).startswith("--config.data.data_dir=")
    names = [steps(sweep, g, str(tmp_path))[1].workdir for g in gs]
    assert len(set(names)) == 2


def test_random_init_row_fine_tunes_from_the_pretrained_shape_and_tokenizer(tmp_path):
    sweep = grid_sweep(random_init=True)
    check(sweep)
    assert len(points(sweep)) == 4  # the grid is unchanged; each group gains its control
    for g in groups(sweep):
        (control,) = control_points(sweep, g)  # one: unshare is the only fine-tuning axis
        assert control.random_init and "finetune.unshare" not in dict(control.values)
        ss = steps(sweep, g, str(tmp_path))
        assert [s.kind for s in ss] == ["pretrain"] + ["finetune"] * 6  # 3 points x 2 tasks
        model = os.path.join(ss[0].workdir, "model")
        randoms = [s for s in ss if "--config.init=none" in s.command]
        assert [s.label.split()[0] for s in randoms] == ["sentiment", "ner"]
        for s in randoms:
            assert s.workdir.endswith(control.name()) and control.name().endswith("init=none")
            assert f"--config.tokenizer={model}" in s.command
            assert f"--config.model_from={model}" in s.command
            assert f"--config.init={model}" not in s.command
            assert not any(a.startswith("--config.unshare") for a in s.command)
            assert "--config.seeds=0,1" in s.command and "--config.num_epochs=1.0" in s.command
    assert not control_points(grid_sweep(), groups(grid_sweep())[0])  # off by default
    # the quickstart and the unsharing sweep carry the row
    for name in ("quickstart", "unshare_finetune"):
        sweep = load(os.path.join(REPO, "configs", "sweeps", f"{name}.py"))
        (g,) = groups(sweep)
        commands = [" ".join(s.command) for s in steps(sweep, g, str(tmp_path))]
        assert sum("--config.init=none" in c for c in commands) == len(sweep.tasks)


def test_a_prepare_step_keeps_the_file_its_command_wrote(tmp_path):
    """A dataset's prepare step is done when its command has written the dataset's file: the
    sweep must not write its record over that file (it once replaced train.jsonl with it). A
    corpus step's done file is the sweep's own marker."""
    from albert_jax.experiments.sweep import Step, run_step

    made = tmp_path / "data" / "train.jsonl"
    write = f"import pathlib; pathlib.Path({str(made)!r}).write_text('{{\"text\": 1}}')"
    step = Step("prepare", "ds", [sys.executable, "-c", write], str(tmp_path / "d"), str(made))
    made.parent.mkdir()
    run_step(step, "[1/1]")
    assert made.read_text() == '{"text": 1}' and step.done()
    marker = tmp_path / "m" / "sweep_prepared.json"
    corpus = Step(
        "prepare", "c", [sys.executable, "-c", "pass"], str(marker.parent), str(marker), True
    )
    run_step(corpus, "[1/1]")
    assert json.loads(marker.read_text())["command"] == corpus.command
    lazy = Step(
        "prepare", "lazy", [sys.executable, "-c", "pass"], str(tmp_path / "l"), str(tmp_path / "no")
    )
    with pytest.raises(SweepError, match="did not write"):
        run_step(lazy, "[1/1]")


def test_prepared_datasets_are_built_and_read_in_the_sweep_directory(tmp_path):
    """A task config's `finetune.prepare` dataset (relative data/finetune/NAME/...) is built
    under the sweep directory (`--out`), its log beside it, and every fine-tuning run of the task
    reads it there; a task whose training file the sweep names gets neither."""
    work = str(tmp_path)
    sweep = grid_sweep(finetune={"task.dev": "/mine/dev.txt"})
    prep = [s for s in prepare_steps(sweep, work) if "finetune.prepare" in s.command]
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
    assert not [s for s in prepare_steps(own, work) if "finetune.prepare" in s.command]
    commands = [" ".join(s.command) for g in groups(own) for s in steps(own, g, work)]
    assert not any(os.path.join(work, "data", "finetune") in c for c in commands)


# A stand-in for a training run: drops the rows logged past its checkpoint (as MetricWriter
# does), appends this invocation's, writes summary.json when it exits 0.
FAKE_RUN = """
import json, os, sys
d, resume, rows, rc = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
path = os.path.join(d, "seed_0", "metrics.jsonl")
os.makedirs(os.path.dirname(path), exist_ok=True)
old = [json.loads(x) for x in open(path)] if os.path.exists(path) else []
rows = [{"step": s, "split": "train", "step_time_s": t} for s, t in rows]
with open(path, "w") as f:
    f.writelines(json.dumps(r) + "\\n" for r in [r for r in old if r["step"] <= resume] + rows)
if rc == 0:
    open(os.path.join(d, "summary.json"), "w").write("{}")
sys.exit(rc)
"""


def test_step_time_leaves_out_each_starts_interval_and_wall_time_sums_the_invocations(tmp_path):
    """A step failed, then killed outright, then resumed to the end: its step time is the median
    of the intervals that did not include a start (compilation), including a start whose rows a
    later resume cut off; its wall time is the sum of the three (the killed one's until its last
    log line)."""
    from albert_jax.experiments.sweep import Step, read_record, run_step

    d = str(tmp_path / "ft")

    def invoke(resume, rows, rc):
        cmd = [sys.executable, "-c", FAKE_RUN, d, str(resume), json.dumps(rows), str(rc)]
        step = Step("finetune", "ft", cmd, d, os.path.join(d, "summary.json"))
        if rc:
            with pytest.raises(SweepError, match="failed"):
                run_step(step, "[1/1]")
        else:
            run_step(step, "[1/1]")

    invoke(0, [[2, 9.0], [4, 0.1], [6, 0.1]], 1)  # compiled at the start, failed after step 6
    invoke(4, [[6, 7.0], [8, 0.3]], 1)  # resumed at 4; its rows are cut by the next resume
    record = read_record(d)
    del record["runs"][-1]["wall_s"]  # as if the sweep itself had been killed
    with open(os.path.join(d, "sweep_step.json"), "w") as f:
        json.dump(record, f)
    started = record["runs"][-1]["started"]
    os.utime(os.path.join(d, "sweep.log"), (started + 30, started + 30))  # its last output
    invoke(4, [[6, 5.0], [8, 0.2], [10, 0.4]], 0)  # the checkpoint at 8 was never written

    rows = [json.loads(x) for x in open(os.path.join(d, "seed_0", "metrics.jsonl"))]
    assert [(r["step"], r["step_time_s"]) for r in rows] == [
        (2, 9.0), (4, 0.1), (6, 5.0), (8, 0.2), (10, 0.4)
    ]  # fmt: skip
    assert sweep_report.steady_step_time(d, "seed_0/metrics.jsonl") == 0.2  # of 0.1, 0.2, 0.4
    runs = read_record(d)["runs"]
    assert len(runs) == 3 and runs[1]["wall_s"] == 30.0 and runs[1]["killed"]
    assert sweep_report.wall_time(d) == pytest.approx(sum(r["wall_s"] for r in runs), abs=0.11)
    assert 30 <= sweep_report.wall_time(d) < 40  # the other two: a fraction of a second each
    # a directory no sweep recorded: only its first interval is left out
    assert sweep_report.steady_step_time(os.path.join(d, "seed_0")) == 0.3


def test_report_sums_the_wall_time_of_every_invocation(tmp_path):
    sweep = grid_sweep(tasks={"sentiment": "configs/finetune/sentiment.py"}, seeds=(0, 1))
    sweep.grid.pop("pretrain.data.mode")
    work = str(tmp_path)
    fake_results(work, sweep, {p.name(): [0.8, 0.8] for p in points(sweep)})
    for g in groups(sweep):
        pdir = os.path.join(work, "pretrain", g[0].name("pretrain"))
        _write(os.path.join(pdir, "sweep_step.json"), {"runs": [{"wall_s": 10}, {"wall_s": 5}]})
        for p in g:
            fdir = os.path.join(work, "finetune", "sentiment", p.name())
            runs = [{"wall_s": 30.0}, {"wall_s": 20.0}, {"started": 1.0}]  # the last one running
            _write(os.path.join(fdir, "sweep_step.json"), {"wall_s": 20.0, "runs": runs})
    old = os.path.join(work, "finetune", "sentiment", "layout=all,unshare=all", "sweep_step.json")
    _write(old, {"wall_s": 8.0})  # a record from before invocations were kept
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


@pytest.mark.parametrize(
    "sets, message",
    [
        (["pretrain.total_stps=3"], "pretrain.total_stps: .*cpu_small.py's config has no field"),
        (["pretrain.total_steps=abc"], "pretrain.total_steps='abc': invalid literal for int"),
        (["finetune.optim.learning_rate=x"], "finetune.optim.learning_rate='x': could not conv"),
        (["seeds=a,b"], "--set 'seeds=a,b': seeds must be integers"),
    ],
)
def test_a_bad_set_fails_at_once_as_one_line_before_any_data(tmp_path, sets, message):
    work = tmp_path / "sw"
    start = time.monotonic()
    done = _cli("--config", "configs/sweeps/tiny.py", "--workdir", str(work),
                *[f"--set={s}" for s in sets], check_rc=False)  # fmt: skip
    assert time.monotonic() - start < 30  # not after the data build (~50 s)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert re.match(f"error: {message}", lines[0]), lines[0]
    assert not work.exists()


def test_a_missing_sweep_file_is_one_line(tmp_path):
    done = _cli("--config", "configs/sweeps/tny.py", "--workdir", str(tmp_path), check_rc=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: configs/sweeps/tny.py: no such config file"


SWEEP_CONFIGS = sorted(
    f[:-3] for f in os.listdir(os.path.join(REPO, "configs", "sweeps")) if f[0] != "_"
)


@pytest.mark.parametrize("name", SWEEP_CONFIGS)
def test_every_sweep_config_names_real_fields(name):
    from albert_jax.experiments.sweep import load

    sweep = load(os.path.join(REPO, "configs", "sweeps", f"{name}.py"))
    check(sweep)  # each grid axis and override exists in its pretraining / fine-tuning config
    assert points(sweep)


def _cli(*args, check_rc=True):
    done = subprocess.run(
        [sys.executable, "-m", "pretrain.sweep", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if check_rc:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _commands(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


@pytest.mark.slow  # 24-53 s: keeps the default suite under ~10 minutes
def test_dry_run_and_the_print_launcher_cover_exactly_the_same_steps(tmp_path):
    config = "configs/sweeps/tiny.py"
    work = str(tmp_path / "sw")
    full = _commands(_cli("--config", config, "--workdir", work, "--dry_run").stdout)
    # the sentiment dataset and the corpus, then 2 groups of (pretrain, sentiment x 2 unshare)
    assert len(full) == 2 + 2 * 3 and "finetune.prepare sentiment" in full[0]
    jobs = _commands(_cli("--config", config, "--workdir", work, "--launcher=print").stdout)
    assert len(jobs) == 2 and all(f"--group={i}" in j for i, j in enumerate(jobs))
    per_job = []
    for job in jobs:
        args = job.split()[3:]  # drop "python -m pretrain.sweep"
        per_job += _commands(_cli(*args, "--dry_run").stdout)[2:]  # each repeats the data steps
    assert per_job == full[2:]
    assert not os.path.exists(os.path.join(work, "pretrain"))  # nothing ran


# --- the report, over results written by hand ----------------------------------------------------
def _write(path, obj, lines=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        if lines:
            f.write("".join(json.dumps(r) + "\n" for r in obj))
        else:
            json.dump(obj, f)


MODEL_CONFIG = dict(
    vocab_size=100, embedding_size=16, hidden_size=32, num_layers=4, num_heads=2,
    intermediate_size=64, max_position_embeddings=32,
)  # fmt: skip


def fake_results(work, sweep, test_acc, last_eval=None):
    """Pretraining metrics, models and per-seed fine-tuning results for every point."""
    for g in groups(sweep):
        pdir = os.path.join(work, "pretrain", g[0].name("pretrain"))
        _write(
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
        _write(os.path.join(pdir, "model", "config.json"), {**MODEL_CONFIG, **groups_})
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
                _write(
                    os.path.join(sdir, "metrics.jsonl"),
                    [
                        {"step": 1, "split": "train", "step_time_s": 3.0},  # compiling
                        {"step": 2, "split": "train", "step_time_s": 0.1},
                        {"step": 2, "split": "eval", "accuracy": acc - 0.02},
                        {"step": 4, "split": "eval", "accuracy": acc - 0.01},
                    ],
                    lines=True,
                )
                _write(os.path.join(sdir, "config.json"), {"steps_per_epoch": 2})
            _write(os.path.join(fdir, "summary.json"), {"per_seed": per_seed})


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


# --- slow: a real sweep ---------------------------------------------------------------------------
# The synthetic pretraining config of test_workdir_source, with evaluation on half the corpus
PRETRAIN = (
    CONFIG
    + """

_base = get_config


def get_config(arg=None):
    c = _base(arg)
    c.eval_every, c.eval_batches = 2, 1
    c.train_split, c.eval_split = "train[:50%]", "train[50%:]"  # enough for one eval batch
    return c
"""
)
SWEEP = """
from albert_jax.experiments.sweep import Sweep


def get_sweep():
    return Sweep(
        pretrain_config={pretrain!r},
        tasks={{"cls": "configs/finetune/tsv.py"}},
        grid={{"pretrain.model.layout": ["all", "none"], "finetune.unshare": ["", "all"]}},
        finetune={{
            "task.train": {train!r}, "task.dev": {dev!r}, "task.test": {dev!r},
            "task.max_seq_length": 32,
            "total_steps": 2, "eval_every": 2, "batch_size": 8, "eval_batch_size": 8,
            "log_every": 1, "progress_bar": False,
        }},
        seeds=(0, 1),
    )
"""


def write_task(d, n):
    """A classification TSV of made-up words (label: whether 'ka' occurs)."""
    rows = ["text\tlabel"]
    for i in range(n):
        words = ["ka" if i % 2 else "lo", "mi", "ne", "su"][: 2 + i % 3]
        rows.append(f"{' '.join(words)} ta\t{'yes' if i % 2 else 'no'}")
    d.write_text("\n".join(rows) + "\n")


def write_tiny_inputs(tmp_path) -> None:
    """pre.py (a 2-step pretraining of MODEL, shared, on a synthetic corpus), train.tsv (24
    examples) and dev.tsv (11) in tmp_path: a sweep's smallest inputs."""
    write_corpus(tmp_path / "corpus.txt")
    model = dict(MODEL, layout="all")
    model.pop("vocab_size")
    (tmp_path / "pre.py").write_text(
        PRETRAIN.format(corpus=str(tmp_path / "corpus.txt"), model=model, steps=2)
    )
    write_task(tmp_path / "train.tsv", 24)
    write_task(tmp_path / "dev.tsv", 11)


@pytest.mark.slow
def test_tiny_sweep_runs_resumes_without_redoing_and_submits(tmp_path):
    write_tiny_inputs(tmp_path)
    config = tmp_path / "sweep.py"
    config.write_text(
        SWEEP.format(
            pretrain=str(tmp_path / "pre.py"),
            train=str(tmp_path / "train.tsv"),
            dev=str(tmp_path / "dev.tsv"),
        )
    )
    work = tmp_path / "sw"
    out = _cli("--config", str(config), "--workdir", str(work)).stdout
    assert "sweep: 6 steps, 0 already done" in out  # 2 pretraining + 4 fine-tuning runs
    with open(work / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 * 2 and {r["task"] for r in rows} == {"cls"}
    layout, unshare = "pretrain.model.layout", "finetune.unshare"
    assert {r[layout] for r in rows} == {"all", "none"}
    shared = [r for r in rows if r[layout] == "all" and r[unshare] == ""]
    unshared = [r for r in rows if r[layout] == "all" and r[unshare] == "all"]
    assert int(unshared[0]["params_finetuned"]) > int(shared[0]["params_finetuned"])
    assert (work / "plots" / "cls_scores.png").exists()
    # tsv.py searches the learning rate: every point (layout) its own search, in its row
    for row in rows:
        record = json.loads(
            (work / "finetune" / "cls" / row["point"] / "lr_search.json").read_text()
        )
        assert float(row["learning_rate"]) == record["chosen"]
        rates = [t["learning_rate"] for t in record["trials"]]  # 3 a round (retries: more rounds)
        assert len(set(rates)) == 3 and len(rates) % 3 == 0

    # rerun: nothing is redone (no file of a finished step is rewritten)
    summary = work / "finetune" / "cls" / "layout=none,unshare=all" / "summary.json"
    stamp = summary.stat().st_mtime_ns
    again = _cli("--config", str(config), "--workdir", str(work)).stdout
    assert "sweep: 6 steps, 6 already done" in again and "..." not in again
    assert summary.stat().st_mtime_ns == stamp

    # an interrupted point (its summary never written) is the only step run again, here
    # through submitit's local executor (the cluster path, on this machine)
    summary.unlink()
    done = _cli("--config", str(config), "--workdir", str(work), "--launcher=local")
    assert "group 1: job" in done.stdout and "group 0: job" in done.stdout
    log = "".join(p.read_text() for p in (work / "submitit").glob("**/*_log.out"))
    assert log.count("already done") == 2 and log.count(" ...") == 1
    assert "cls layout=none,unshare=all ..." in log
    assert summary.exists()


def _running(pid: int) -> bool:
    """Whether pid is a live process (a zombie waiting to be reaped is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


# A sweep that runs one step (a process that prints its pid and sleeps), in a process of its own
ONE_STEP = """
import sys
from albert_jax.experiments.sweep import Step, run_step

work = sys.argv[1]
command = [sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(300)"]
run_step(Step("pretrain", "sleeper", command, work, work + "/done"), "[1/1]")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG)")
def test_a_step_dies_with_its_killed_sweep(tmp_path):
    sweep = subprocess.Popen([sys.executable, "-c", ONE_STEP, str(tmp_path)], cwd=REPO)
    log, child = tmp_path / "sweep.log", None
    try:
        lines = lambda: log.exists() and log.read_text().splitlines()[1:]  # noqa: E731
        child = int(_wait_for(lines, 60, "the step to start")[0])
        assert _running(child)
        sweep.kill()  # SIGKILL: the sweep cannot stop its step itself
        sweep.wait()
        _wait_for(lambda: not _running(child), 10, "the step to die with the sweep")
    finally:
        sweep.kill()
        if child is not None and _running(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.slow
def test_a_sweep_waits_while_another_prepares_the_data(tmp_path):
    write_corpus(tmp_path / "corpus.txt")
    model = dict(MODEL, layout="all")
    model.pop("vocab_size")
    (tmp_path / "pre.py").write_text(
        PRETRAIN.format(corpus=str(tmp_path / "corpus.txt"), model=model, steps=2)
    )
    config = tmp_path / "sweep.py"
    config.write_text(SWEEP_PRETRAIN_ONLY.format(pretrain=str(tmp_path / "pre.py")))
    work = tmp_path / "sw"
    lock.acquire(str(work), ".lock-data")  # another sweep (this process) preparing the data
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "pretrain.sweep", "--config", str(config), "--workdir",
             str(work)], cwd=REPO, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        _wait_for(lambda: "note: waiting: " in out.read_text(), 120, "the sweep to wait")
        time.sleep(2)
        assert sweep.poll() is None and not (work / "data").exists()  # waits, builds nothing
        lock.release(str(work), ".lock-data")
        _wait_for(lambda: "] data " in out.read_text(), 60, "the data preparation to start")
    finally:
        lock.release(str(work), ".lock-data")
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait()
    assert "sweep: 1 steps, 0 already done" in out.read_text()


SWEEP_PRETRAIN_ONLY = """
from albert_jax.experiments.sweep import Sweep


def get_sweep():
    return Sweep(pretrain_config={pretrain!r}, tasks={{}}, grid={{}})
"""


@pytest.mark.slow
def test_the_shipped_tiny_sweep_runs_end_to_end(tmp_path):
    """configs/sweeps/tiny.py as shipped (its vocabulary, warmup, data): every step runs, the
    sentiment dataset is built in the sweep directory and read from there, and the report has
    every point and seed with its step and wall times. ~5 minutes on two CPU cores."""
    work = tmp_path / "sw"
    out = _cli("--config", "configs/sweeps/tiny.py", "--workdir", str(work)).stdout
    assert "sentiment dataset ..." in out and "sweep: 6 steps, 0 already done" in out
    data = work / "data" / "finetune" / "sentiment"
    assert (data / "train.jsonl").exists() and (data / "test.jsonl").exists()
    seed = work / "finetune" / "sentiment" / "layout=none,unshare=all" / "seed_1"
    assert json.loads((seed / "config.json").read_text())["task"]["dev"] == str(data / "dev.jsonl")
    with open(work / "results.csv") as f:
        rows = list(csv.DictReader(f))
    points = {(r["pretrain.model.layout"], r["finetune.unshare"], r["seed"]) for r in rows}
    assert len(rows) == 8 and points == {
        (layout, unshare, seed) for layout in ("all", "none") for unshare in ("", "all")
        for seed in ("0", "1")
    }  # fmt: skip
    for r in rows:
        assert 0 <= float(r["test_accuracy"]) <= 1 and float(r["pretrain_mlm_loss"]) > 0
        for key in ("pretrain_step_s", "pretrain_wall_s", "finetune_step_s", "finetune_wall_s"):
            assert float(r[key]) > 0, key  # each run logged an interval past its first
    md = (work / "results.md").read_text()
    scores, drift = (block for block in md.split("\n\n") if block.startswith("| model.layout"))
    assert md.startswith("### sentiment (accuracy") and scores.count("\n| all |") == 2
    # The drift table: the unshared rows only, from either pretrained layout.
    assert [row.split(" | ")[:2] for row in drift.splitlines()[2:]] == [
        ["| all", "all"],
        ["| none", "all"],
    ]
    assert (work / "plots" / "sentiment_scores.png").exists()


def test_one_seed_shows_no_spread():
    assert sweep_report._ms([0.7884]) == "78.84"  # not "78.84 ± 0.00"
    assert sweep_report._ms([0.70, 0.80]) == "75.00 ± 7.07"
