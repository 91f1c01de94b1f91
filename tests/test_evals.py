"""The evaluators a config declares (`config.evals`, `albert_jax.train.config.EvalConfig`): which
split is evaluated every how many steps, which again at the end with the best parameters (their
readable predictions written then, never during training), which metrics are kept; an unknown
split is refused before anything is written, naming its key."""

import glob
import importlib
import json
import os

import pytest
from support.finetune import make_config

from albert_jax.jobs import run as runs
from albert_jax.tasks import finetuning as F
from albert_jax.train.config import EvalConfig, TrainConfigError, read_evals
from albert_jax.train.trainer import kept
from configs.finetune.common import get_common
from configs.pretrain.common import pretrain_defaults


def eval_steps(workdir, split="eval"):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r["step"] for r in map(json.loads, f) if r["split"] == split]


def test_defaults_are_todays_evaluations():
    """Fine-tuning: dev at the plan's every evaluation and at the end, test at the end only;
    pretraining: its eval split at every evaluation, nothing final."""
    ft = read_evals(get_common("classification"), {}, F.FinetuneTask.splits)
    assert ft == {
        "dev": EvalConfig(split="dev", every=0, final=True),
        "test": EvalConfig(split="test", every=-1, final=True),
    }
    assert read_evals(pretrain_defaults(), {}, ("",)) == {"eval": EvalConfig()}
    # a config built without the section gets the job's defaults
    assert read_evals({}, {"x": EvalConfig(every=5)}, ("",)) == {"x": EvalConfig(every=5)}


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(
    os.path.relpath(p, ROOT)[:-3].replace(os.sep, ".")
    for kind in ("pretrain", "finetune")
    for p in glob.glob(os.path.join(ROOT, "configs", kind, "*.py"))
    if os.path.basename(p) not in ("__init__.py", "common.py")
)


@pytest.mark.parametrize("module", CONFIGS)
def test_every_config_declares_its_evaluators(module):
    """Every config gets the defaults from its common.py, so `--config.evals.NAME.every=N`
    parses (here as the command line applies it) and reads back typed."""
    args = {"searched": ("sentiment",), "suite": ("headlines",)}  # those take an argument
    get_config = importlib.import_module(module).get_config
    config = get_config(*args.get(module.rsplit(".", 1)[1], ()))
    name = "eval" if module.startswith("configs.pretrain") else "dev"
    config.update_from_flattened_dict({f"evals.{name}.every": 100})
    splits = ("",) if name == "eval" else F.FinetuneTask.splits
    assert read_evals(config, {}, splits)[name].every == 100


def test_an_unknown_split_or_schedule_is_named_by_its_key(pretrained, files, tmp_path):
    config = make_config(pretrained, "classification", files, **{"evals.test.split": "valid"})
    with pytest.raises(TrainConfigError, match=r"evals\.test\.split='valid': not a split"):
        read_evals(config, {}, F.FinetuneTask.splits)
    with pytest.raises(TrainConfigError, match=r"evals\.dev\.every=-2"):
        read_evals(make_config(pretrained, "classification", files, **{"evals.dev.every": -2}),
                   {}, F.FinetuneTask.splits)  # fmt: skip
    # a run stops before it trains or writes a checkpoint
    with pytest.raises(TrainConfigError, match=r"evals\.test\.split='valid'"):
        runs.run(config, str(tmp_path / "run"))
    assert not os.path.exists(tmp_path / "run" / "checkpoints")


def test_metrics_kept_and_an_unknown_one_named():
    e = EvalConfig(metrics="accuracy, collapsed")
    values = {"accuracy": 0.5, "mcc": 0.0, "collapsed": 0.0}
    assert kept("dev", e, values) == {"accuracy": 0.5, "collapsed": 0.0}
    assert kept("dev", EvalConfig(), values) == values and kept("test", e, {}) == {}
    with pytest.raises(TrainConfigError, match=r"evals\.dev\.metrics: \['f1'\] not among"):
        kept("dev", EvalConfig(metrics="f1"), values)


def test_evals_every_sets_the_steps_and_predictions_come_at_the_end_only(
    pretrained, files, tmp_path, monkeypatch
):
    """`--config.evals.dev.every=2` (the plan's eval_every is 3): dev at 2, 4, 6; test during
    training too with `evals.test.every=3` (its own `eval_test` rows); the readable predictions
    of dev and test are written after training, with the best parameters, not at any
    evaluation before."""
    flags = {"evals.dev.every": 2, "evals.test.every": 3, "evals.test.metrics": "accuracy"}
    config = make_config(pretrained, "tagging", files, **flags)
    seen = []  # whether predictions existed at each training-time evaluation of dev
    on_evaluation = F.FinetuneTask.on_evaluation

    def spy(self, params, step):
        seen.append((step, os.path.exists(tmp_path / "predictions")))
        return on_evaluation(self, params, step)

    monkeypatch.setattr(F.FinetuneTask, "on_evaluation", spy)
    runs.run(config, str(tmp_path))
    assert seen == [(2, False), (4, False), (6, False)]
    assert eval_steps(tmp_path) == [2, 4, 6]
    assert eval_steps(tmp_path, "eval_test") == [3, 6]
    with open(tmp_path / "metrics.jsonl") as f:
        test_rows = [r for r in map(json.loads, f) if r["split"] == "eval_test"]
    assert all(set(r) == {"step", "split", "accuracy"} for r in test_rows)
    assert sorted(os.listdir(tmp_path / "predictions")) == ["dev.jsonl", "test.jsonl"]
    results = json.load(open(tmp_path / "results.json"))
    assert results["best_step"] in (2, 4, 6) and set(results["test"]) == {"accuracy"}
    assert "collapsed" in results["dev"]
