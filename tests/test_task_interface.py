"""The one task interface (`albert_jax.train.task.Task`): every fine-tuning task type is built
from its config and a tokenizer alone (`FinetuneTask.from_config`), takes a training step through
the trainer's compiled functions and is evaluated as predict(run, split) then score(split,
predictions); the pretraining tasks (MLM + SOP, ELECTRA) through the same members."""

import jax
import numpy as np
import pytest
from support.choice import choice_config
from support.finetune import TOKENIZER, make_config
from support.qa import qa_config
from support.relation import re_config
from support.seq2seq import s2s_config

from albert_jax.jobs import run as runs
from albert_jax.tasks.finetuning import FinetuneTask
from albert_jax.text.tokenization import load_tokenizer
from albert_jax.train.task import Task
from albert_jax.train.trainer import compile_task, global_batch, to_host

# task type -> (config builder, the data fixture it reads, the metric its dev score must have)
CASES = {
    "classification": (lambda d: make_config("", "classification", d), "files", "accuracy"),
    "regression": (lambda d: make_config("", "regression", d), "files", "pearson"),
    "tagging": (lambda d: make_config("", "tagging", d), "files", "f1"),
    "qa": (lambda d: qa_config("", d), "qa_files", "f1"),
    "multiple_choice": (lambda d: choice_config("", d), "race", "accuracy"),
    "relation": (lambda d: re_config("", d), "re_files", "f1"),
    "seq2seq": (lambda d: s2s_config("", d), "s2s_files", "token_accuracy"),
}


@pytest.mark.parametrize("task_type", list(CASES))
def test_each_task_type_builds_from_config_trains_and_evaluates(task_type, model_from, request):
    build, fixture, metric = CASES[task_type]
    config = build(request.getfixturevalue(fixture))
    config.model_from = model_from
    task = FinetuneTask.from_config(config, load_tokenizer(TOKENIZER))
    assert isinstance(task, Task) and task.data.task_type == task_type
    plan = runs.schedule(config, len(task.data.features["train"]["input_ids"]))
    plan = plan.with_optim(**runs.resolve_learning_rate(config, task.model_config)[0])
    task.config = plan.record(config)

    compiled = compile_task(config, task.job(), plan=plan)
    with compiled.scope():
        state = compiled.initial_state(0)
        batch = next(task.train_iterator(0, 1))
        state, metrics = compiled.step_fn(state, global_batch(batch, compiled.mesh))
        assert int(state.step) == 1 and np.isfinite(float(metrics["loss"]))

        def run(local):
            return to_host(compiled.eval_fn(state.params, global_batch(local, compiled.mesh)))

        run.params = state.params
        predictions = task.predict(run, "dev")
    values = task.score("dev", predictions)
    # score: metrics only, floats, the collapse flag among them; the rows come apart
    assert all(type(v) is float for v in values.values()), values
    assert metric in values and np.isfinite(values[metric]) and values["collapsed"] in (0.0, 1.0)
    rows = task.rows("dev", predictions)
    assert len(rows) == len(task.data.examples["dev"])  # every dev example predicted once
    assert all(isinstance(r, dict) for r in rows)
    assert task.rows_and_metrics("dev", predictions)[1] == {
        k: v for k, v in values.items() if k != "collapsed"
    }
    # evaluate is predict then score (then check: no metrics of its own)
    with compiled.scope():
        assert task.evaluate(run, 1) == values
    assert jax.tree.structure(state.params) == jax.tree.structure(compiled.abstract.params)


@pytest.mark.parametrize(
    "objective, metric", [("mlm+sop", "sop_majority_share"), ("electra", "disc_auc")]
)
def test_pretraining_trains_and_evaluates_as_predict_then_score(objective, metric):
    """The pretraining tasks through the same interface: predictions are the held-out batches'
    eval_step outputs beside their targets, and scoring them gives the metrics and the floors."""
    from trainer_worker import make_config
    from trainer_worker import make_task as make_pretraining_task

    config = make_config(objective=objective, eval_batches=2, eval_split="dev")
    task = make_pretraining_task(config)
    assert isinstance(task, Task)
    compiled = compile_task(config, task.job())
    with compiled.scope():
        state = compiled.initial_state(0)
        batch = next(task.train_iterator(0, 1))
        state, metrics = compiled.step_fn(state, global_batch(batch, compiled.mesh))
        assert np.isfinite(float(metrics["loss"]))

        def run(local):
            return to_host(compiled.eval_fn(state.params, global_batch(local, compiled.mesh)))

        predictions = task.predict(run)
        assert [len(batches) for batches in predictions.values()] == [2]  # eval_batches
        values = task.score(None, predictions)
        assert {"mlm_accuracy", "mlm_majority_accuracy", metric} <= set(values)
        assert all(type(v) is float for v in values.values()), values
        (batches,) = predictions.values()  # the score is the mean over every predicted batch
        mean = np.mean([float(out["mlm_loss"]) for out, _ in batches])
        assert values["mlm_loss"] == pytest.approx(mean, rel=1e-6)
        assert task.evaluate(run, 1) == values
