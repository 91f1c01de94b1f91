"""The fine-tuning learning-rate search: the grid by model size, the choice (never a collapsed or
diverged trial), one compiled step for every trial and trials equal to plain runs, the record in
lr_search.json / results.json / summary.json, one search for several seeds, resuming, and
tagging and QA searches end to end."""

import json
import os
import signal

import numpy as np
import pytest
from helpers import split_files_config
from support.choice import choice_config
from support.finetune import GOOD, make_config, sentences
from support.qa import qa_config, squad_file
from support.relation import re_config
from support.seq2seq import s2s_config

from albert_jax.configs.finetune import cloze, ner, tsv
from albert_jax.jobs import lr_search
from albert_jax.jobs import run as runs
from albert_jax.tasks import finetuning as F
from albert_jax.tasks.finetuning import FinetuneError

PLANTED_GRID = "1e-5,3e-3,3.0"  # stays at the prior / trains / blows up (on this task)


def searching(config, grid=PLANTED_GRID, budget=2.0, total_steps=60):
    config.total_steps, config.eval_every = total_steps, total_steps // 2
    config.optim.learning_rate = None
    config.lr_search.update(enabled=True, grid=grid, budget=budget)
    return config


def trial(lr, score, collapsed=False, finite=True):
    return {"learning_rate": lr, "score": score, "collapsed": collapsed, "finite": finite}


def test_the_grid_follows_the_model_size():
    assert lr_search.default_grid(128) == lr_search.default_grid(256) == (3e-5, 1e-4, 3e-4)
    assert lr_search.default_grid(768) == lr_search.default_grid(4096) == (1e-5, 2e-5, 5e-5)
    mid = lr_search.default_grid(384)  # albert-small: geometric in between, point by point
    assert all(
        lo < m < hi for lo, m, hi in zip((1e-5, 2e-5, 5e-5), mid, (3e-5, 1e-4, 3e-4), strict=True)
    )
    assert lr_search.parse_grid("3e-4, 1e-4,1e-4") == (1e-4, 3e-4)


def test_the_choice_is_never_a_collapsed_or_diverged_trial():
    # The collapsed trial scores highest (the majority class beats a model that learned a
    # little): a search on the score alone would pick it.
    trials = [trial(1e-5, 0.61), trial(1e-4, 0.58), trial(3e-4, 0.65, collapsed=True)]
    trials.append(trial(1e-3, None, finite=False))
    assert lr_search.choose(trials, "max") == 1e-5
    assert lr_search.choose(trials[1:], "max") == 1e-4
    assert lr_search.choose([trial(1e-4, 0.5), trial(3e-5, 0.5)], "max") == 3e-5  # tie: lower
    assert lr_search.choose([trial(1e-4, 2.0), trial(3e-4, 1.0)], "min") == 3e-4  # a loss
    assert lr_search.choose(trials[2:], "max") is None


@pytest.mark.parametrize(
    "bad",
    [{"grid": "1e-4,abc"}, {"grid": "0,1e-4"}, {"grid": "-1e-4"}, {"budget": 0}, {"retries": -1}],
)
def test_bad_search_settings_are_named(bad):
    c = tsv.get_config()
    c.lr_search.update(bad)
    with pytest.raises(FinetuneError, match=f"lr_search.{next(iter(bad))}"):
        lr_search.check_config(c)


def test_the_templates_search_unless_a_rate_is_given():
    for module in (tsv, ner, cloze):
        c = module.get_config()
        assert lr_search.wanted(c), module.__name__
        c.optim.learning_rate = 1e-4  # --config.optim.learning_rate=1e-4: that rate, no search
        assert not lr_search.wanted(c)
    c = tsv.get_config()
    c.lr_search.enabled = False  # the rate by model size (3e-4 at hidden <= 256)
    assert not lr_search.wanted(c)


def test_the_templates_train_a_small_training_set_for_at_least_800_steps():
    for module in (tsv, ner, cloze):
        assert module.get_config().min_steps == 800, module.__name__
    c = tsv.get_config()  # 3 epochs at batch 32
    small = runs.schedule(c, 2653)  # 83 steps an epoch: 249 by the epochs alone
    assert (small.total_steps, small.optim["warmup_steps"], small.eval_every) == (800, 80, 83)
    assert runs.schedule(c, 15000).total_steps == 1407  # the epochs give more
    c.total_steps = 300  # set by hand: kept
    assert runs.schedule(c, 2653).total_steps == 300
    c.total_steps, c.min_steps = 0, 0  # --config.min_steps=0: the epochs alone
    assert runs.schedule(c, 2653).total_steps == 249
    c.min_steps = -1
    with pytest.raises(FinetuneError, match="min_steps must be an integer >= 0"):
        F.check_config(c)


@pytest.mark.slow  # 24-53 s: keeps the default suite under ~10 minutes
def test_the_search_picks_the_trial_that_trains_once_for_all_seeds(
    pretrained,
    one_word,
    tmp_path,
    capsys,
    monkeypatch,
):
    compiled = []
    real = lr_search.compile_task
    monkeypatch.setattr(
        lr_search, "compile_task", lambda *a, **k: compiled.append(1) or real(*a, **k)
    )
    c = searching(make_config(pretrained, "classification", one_word, seeds="0,1"))
    summary = runs.run(c, str(tmp_path))
    out = capsys.readouterr().out
    assert out.count("learning-rate search on seed 0: 3 trials of 40 steps") == 1
    assert len(compiled) == 1  # one compiled step for the three trials
    record = json.loads((tmp_path / "lr_search.json").read_text())
    by_lr = {t["learning_rate"]: t for t in record["trials"]}
    assert sorted(by_lr) == [1e-5, 3e-3, 3.0] and record["chosen"] == 3e-3
    assert by_lr[1e-5]["collapsed"] and by_lr[3e-3]["score"] == 1.0
    assert by_lr[3.0]["collapsed"] or not by_lr[3.0]["finite"]
    assert "learning rate 0.003 (best dev accuracy" in out
    assert summary["lr_search"] == record
    for seed in (0, 1):  # each seed trained with the chosen rate and carries the record
        wd = tmp_path / f"seed_{seed}"
        assert json.loads((wd / "config.json").read_text())["optim"]["learning_rate"] == 3e-3
        assert json.loads((wd / "results.json").read_text())["lr_search"] == record


@pytest.mark.slow  # 24-53 s: keeps the default suite under ~10 minutes
def test_trials_too_short_to_leave_the_prior_run_again_longer(
    pretrained,
    one_word,
    tmp_path,
    capsys,
):
    # 3e-3 learns the one-word task in 16 steps; at 6 and 12 it still predicts the prior.
    c = searching(make_config(pretrained, "classification", one_word), grid="3e-3", budget=0.1)
    record = runs.run(c, str(tmp_path))["lr_search"]
    steps = [(t["steps"], t["collapsed"]) for t in record["trials"]]
    assert steps == [(6, True), (12, True), (24, False)] and record["chosen"] == 3e-3
    out = capsys.readouterr().out
    assert "every trial collapsed: again at 12 steps" in out and "again at 24 steps" in out
    # without retries the same search falls back to the rate by model size
    c.lr_search.retries = 0
    record = runs.run(c, str(tmp_path / "none"))["lr_search"]
    assert len(record["trials"]) == 1 and record["fallback"] and record["chosen"] == 3e-4


@pytest.mark.slow  # ~40 s
def test_trials_score_the_runs_dev_sample(pretrained, one_word, tmp_path, capsys):
    """With `evals.dev.sample=N` a trial is scored on the N dev examples the run's own epochs
    score (so the two agree), the record says so, and a record scored otherwise is not reused."""
    c = searching(make_config(pretrained, "classification", one_word, seeds="0"), "3e-3", 2 / 3)
    c.evals.dev.sample = 16
    runs.run(c, str(tmp_path))
    record = json.loads((tmp_path / "lr_search.json").read_text())
    assert record["scored_on"] == "dev_sample16"
    assert "scored by dev_sample16 accuracy" in capsys.readouterr().out
    # the trial's dev figures are the plain run's evaluation of the same 16 examples
    plain = make_config(pretrained, "classification", one_word, total_steps=40, eval_every=40)
    plain.optim.learning_rate, plain.evals.dev.sample = 3e-3, 16
    runs.run(plain, str(tmp_path / "plain"))
    rows = [json.loads(x) for x in (tmp_path / "plain" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if r.get("split") == "eval" and r["step"] == 40]
    trial = record["trials"][0]["dev"]
    assert {k: trial[k] for k in ("accuracy", "collapsed")} == pytest.approx(
        {k: evals[0][k] for k in ("accuracy", "collapsed")}
    )
    # the whole dev set instead: the record does not match, the search runs again
    c.evals.dev.sample = 0
    runs.run(c, str(tmp_path))
    assert "scored_on" not in json.loads((tmp_path / "lr_search.json").read_text())


@pytest.mark.slow
def test_a_trial_is_a_plain_run_at_its_rate_and_a_rerun_reuses_the_search(
    pretrained,
    one_word,
    tmp_path,
    capsys,
    monkeypatch,
):
    c = searching(make_config(pretrained, "classification", one_word))
    runs.run(c, str(tmp_path))
    record = json.loads((tmp_path / "lr_search.json").read_text())
    by_lr = {t["learning_rate"]: t for t in record["trials"]}
    # A trial at rate r is a plain run built with r (the rate scales the whole update).
    plain = make_config(pretrained, "classification", one_word, total_steps=40, eval_every=40)
    plain.optim.learning_rate = 3e-3
    runs.run(plain, str(tmp_path / "plain"))
    rows = [json.loads(x) for x in (tmp_path / "plain" / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in rows if r.get("split") == "train" and r["step"] == 40][0]
    assert by_lr[3e-3]["train_loss"] == pytest.approx(last["loss"], rel=1e-4)

    # Rerun: the record is reused, no trial runs again.
    monkeypatch.setattr(lr_search, "_trial", lambda *a: pytest.fail("trial rerun"))
    runs.run(c, str(tmp_path))
    assert "reused from lr_search.json" in capsys.readouterr().out


@pytest.mark.slow
def test_a_killed_search_resumes_at_the_next_trial(pretrained, one_word, tmp_path, monkeypatch):
    c = searching(make_config(pretrained, "classification", one_word, seeds="0"))
    real, ran = lr_search._trial, []

    def killed_after_one(compiled, lr, steps, seed, stop, split):
        if ran:
            raise KeyboardInterrupt
        ran.append(lr)
        return real(compiled, lr, steps, seed, stop, split)

    monkeypatch.setattr(lr_search, "_trial", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        runs.run(c, str(tmp_path))
    assert [
        t["learning_rate"] for t in json.loads((tmp_path / "lr_search.json").read_text())["trials"]
    ] == [1e-5]
    again = []
    monkeypatch.setattr(lr_search, "_trial", lambda *a: again.append(a[1]) or real(*a))
    runs.run(c, str(tmp_path))
    assert again == [3e-3, 3.0]
    # other settings (another grid) are a new search, not the old record
    c.lr_search.grid = "3e-3,1e-2"
    again.clear()
    runs.run(c, str(tmp_path / "other"))
    assert again == [3e-3, 1e-2]


@pytest.mark.slow
def test_sigterm_stops_the_search_keeps_its_trials_and_exits_clean(
    pretrained,
    one_word,
    tmp_path,
    capsys,
    monkeypatch,
):
    """Preemption during the search: the trial under way is dropped, the finished ones stay in
    lr_search.json, run() returns {} (exit 0 at the command line) and the rerun goes on."""
    c = searching(make_config(pretrained, "classification", one_word), budget=0.3)
    real, ran = lr_search._trial, []

    def preempted_after_one(*args):
        result = real(*args)
        ran.append(result)
        if len(ran) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler only sets a flag
        return result

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(lr_search, "_trial", preempted_after_one)
    assert runs.run(c, str(tmp_path)) == {}
    assert "stopped during the learning-rate search: rerun to resume" in capsys.readouterr().out
    assert [t is None for t in ran] == [False, True]  # the second trial stopped at its first step
    record = json.loads((tmp_path / "lr_search.json").read_text())
    assert [t["learning_rate"] for t in record["trials"]] == [1e-5] and "chosen" not in record
    assert signal.getsignal(signal.SIGTERM) == before  # the search's handler is gone
    assert not (tmp_path / "results.json").exists()
    again = []
    monkeypatch.setattr(lr_search, "_trial", lambda *a: again.append(a[1]) or real(*a))
    assert runs.run(c, str(tmp_path))["lr_search"]["chosen"] is not None
    assert again[:2] == [3e-3, 3.0]  # 1e-5 is not run again at its length (retries may follow)


@pytest.mark.slow
def test_every_trial_collapsing_falls_back_to_the_rate_by_model_size(
    pretrained,
    one_word,
    tmp_path,
    capsys,
):
    c = searching(make_config(pretrained, "classification", one_word), grid="1e-6,3.0")
    summary = runs.run(c, str(tmp_path))
    assert "warning: every trial collapsed or diverged; learning rate 0.0003" in (
        capsys.readouterr().out
    )
    record = summary["lr_search"]
    assert record["fallback"] is True and record["chosen"] == 3e-4  # hidden 32: 3e-4
    assert json.loads((tmp_path / "config.json").read_text())["optim"]["learning_rate"] == 3e-4


@pytest.mark.slow
def test_a_tagging_search_runs_end_to_end(pretrained, tmp_path):
    d = tmp_path / "tag"
    d.mkdir()
    rng = np.random.default_rng(1)
    for split, n in (("train", 48), ("dev", 16), ("test", 8)):
        with open(d / f"{split}.conll", "w") as f:
            for t in sentences(rng, n, 3):
                f.writelines(f"{w}\t{'B-X' if w in GOOD else 'O'}\n" for w in t.split())
                f.write("\n")
    c = split_files_config("tagging", pretrained, d, "conll", 40, task={"max_seq_length": 16})
    summary = runs.run(searching(c, grid="1e-3,1e-2", budget=1.0, total_steps=40), str(tmp_path))
    record = summary["lr_search"]
    first = [t for t in record["trials"] if t["steps"] == 20]
    assert record["metric"] == "f1" and len(first) == 2
    assert record["chosen"] in (1e-3, 1e-2)
    assert all("f1" in t["dev"] for t in record["trials"])


@pytest.mark.slow
def test_a_qa_search_runs_end_to_end(pretrained, tmp_path):
    d = tmp_path / "qa"
    d.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (("train", 16), ("dev", 7), ("test", 5)):
        squad_file(d / f"{split}.json", rng, n)
    c = searching(qa_config(pretrained, d), grid="1e-3,1e-2", budget=1.0, total_steps=8)
    record = runs.run(c, str(tmp_path / "run"))["lr_search"]  # 16 questions: may fall back
    first = [t["learning_rate"] for t in record["trials"] if t["steps"] == 4]
    assert record["metric"] == "f1" and first == [1e-3, 1e-2]
    assert all(t["finite"] and "exact" in t["dev"] for t in record["trials"])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["regression", "multiple_choice", "seq2seq", "relation"])
def test_every_other_task_type_searches(
    kind,
    pretrained,
    files,
    race,
    s2s_files,
    re_files,
    tmp_path,
):
    """The search drives each task's own evaluation (choice over options, generation, triples)."""
    config = {
        "regression": lambda: make_config(pretrained, "regression", files),
        "multiple_choice": lambda: choice_config(pretrained, race),
        "seq2seq": lambda: s2s_config(pretrained, s2s_files),
        "relation": lambda: re_config(pretrained, re_files),
    }[kind]()
    summary = runs.run(
        searching(config, grid="1e-3,1e-2", budget=1.0, total_steps=4), str(tmp_path)
    )
    record = summary["lr_search"]
    assert [t["learning_rate"] for t in record["trials"] if t["steps"] == 2] == [1e-3, 1e-2]
    assert all(record["metric"] in t["dev"] for t in record["trials"])  # scored on dev
    assert record["chosen"] in (1e-3, 1e-2, 3e-4)  # a trial's, or the fallback by model size
    assert json.loads((tmp_path / "results.json").read_text())["lr_search"] == record
