"""The evaluators a config declares (`config.evals`, `albert_jax.train.config.EvalConfig`): which
split is evaluated every how many steps, which again at the end with the best parameters (their
readable predictions written then, never during training), which metrics are kept; an unknown
split is refused before anything is written, naming its key."""

import glob
import importlib
import json
import os

import pytest
from support.finetune import make_config, read_jsonl

from albert_jax.configs.finetune.common import get_common
from albert_jax.configs.pretrain.common import pretrain_defaults
from albert_jax.jobs import run as runs
from albert_jax.tasks import finetuning as F
from albert_jax.tasks.finetune_config import TaskSettings
from albert_jax.train.config import EvalConfig, TrainConfigError, read_evals
from albert_jax.train.trainer import kept


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
    for p in glob.glob(os.path.join(ROOT, "albert_jax", "configs", kind, "*.py"))
    if os.path.basename(p) not in ("__init__.py", "common.py")
)


@pytest.mark.parametrize("module", CONFIGS)
def test_every_config_declares_its_evaluators(module):
    """Every config gets the defaults from its common.py, so `--config.evals.NAME.every=N`
    parses (here as the command line applies it) and reads back typed."""
    args = {"searched": ("sentiment",), "suite": ("headlines",), "glue": ("mnli",),
            "clue": ("cmrc2018",), "squad": ("v1",)}  # those take an argument  # fmt: skip
    get_config = importlib.import_module(module).get_config
    config = get_config(*args.get(module.rsplit(".", 1)[1], ()))
    name = "eval" if module.startswith("albert_jax.configs.pretrain") else "dev"
    config.update_from_flattened_dict({f"evals.{name}.every": 100})
    splits = ("",) if name == "eval" else TaskSettings.from_config(config.task).splits
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


def test_a_dev_sample_in_training_and_the_whole_split_at_the_end(pretrained, files, tmp_path):
    """`evals.dev.sample=N`: every evaluation during training scores the same N dev examples
    (drawn once, in file order, whatever the run's seed), which pick the best step; the final
    dev and test score every example with the best parameters."""
    config = make_config(pretrained, "classification", files, **{"evals.dev.sample": 5})
    data = F.FinetuneData(config)
    name = data.sample("dev", 5)
    assert name == "dev_sample5" and len(data.examples[name]) == 5
    assert len(data.features[name]["input_ids"]) == 5
    dev = data.examples["dev"]
    picked = [dev.index(e) for e in data.examples[name]]
    assert picked == sorted(picked) and len(set(picked)) == 5
    again = F.FinetuneData(make_config(pretrained, "classification", files, seed=7))
    assert again.examples[again.sample("dev", 5)] == data.examples[name]
    assert data.sample("dev", len(dev)) == "dev"  # the whole split: no sample
    # the run: training-time rows are the sample's, the final ones the whole split's
    scored = []
    score = F.FinetuneTask.score

    def spy(self, split, predictions):
        scored.append((split, len(predictions)))
        return score(self, split, predictions)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(F.FinetuneTask, "score", spy)
        runs.run(config, str(tmp_path))
    assert scored == [("dev_sample5", 5), ("dev_sample5", 5), ("dev", len(dev)), ("test", 11)]
    assert len(read_jsonl(tmp_path / "predictions" / "dev.jsonl")) == len(dev)
    with pytest.raises(TrainConfigError, match=r"evals\.dev\.sample=-1"):
        read_evals(make_config(pretrained, "classification", files, **{"evals.dev.sample": -1}),
                   {}, F.FinetuneTask.splits)  # fmt: skip


def test_an_evaluator_that_cannot_sample_is_named(tmp_path):
    """Pretraining's evaluator scores whole batches of its eval split: a sample is refused,
    naming the key, before anything is written."""
    from albert_jax.train.task import Evaluator
    from albert_jax.train.trainer import training_evals

    class Whole(Evaluator):
        def predict(self, run, split=None):
            return None

        def score(self, split, predictions):
            return {}

    job = type("J", (), {"evaluator": Whole()})()
    with pytest.raises(TrainConfigError, match=r"evals\.eval\.sample=8: Whole scores whole"):
        training_evals({"eval": EvalConfig(sample=8)}, job, 10)
    assert training_evals({"eval": EvalConfig(every=5)}, job, 10) == {
        "eval": (EvalConfig(every=5), 5, None)
    }
