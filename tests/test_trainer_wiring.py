"""The trainer's wiring, checked against a direct computation that shares none of its code: the
logged loss of each step equals the model applied to that step's batch with the parameters the
trainer held then (inputs in the right slots, the right batch, the right parameters), evaluation
runs without dropout on the current parameters, dropout is on in training, on grouped and
unshared layouts too, and each step and micro-batch gets its own dropout key."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen as nn
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from support.trainer import load_state, read_metrics
from trainer_worker import make_config, make_global_batch, make_task, tiny_model_config

from albert_jax.model.albert import AlbertForPreTraining
from albert_jax.train import partitioning
from albert_jax.train.task import Task
from albert_jax.train.trainer import TrainState, make_train_step, train


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def direct_losses(model_config, params, batch) -> dict[str, float]:
    """MLM + SOP as run_pretraining.py defines them, in float64 NumPy from the model's logits."""
    out = AlbertForPreTraining(model_config).apply(
        {"params": params},
        input_ids=batch["input_ids"],
        token_type_ids=batch["segment_ids"],
        attention_mask=batch["input_mask"],
        masked_positions=batch["masked_lm_positions"],
    )
    mlm = log_softmax(np.asarray(out.mlm_logits, np.float64))
    w = batch["masked_lm_weights"].astype(np.float64)
    nll = -np.take_along_axis(mlm, batch["masked_lm_ids"][..., None], -1)[..., 0]
    sop = log_softmax(np.asarray(out.sop_logits, np.float64))
    labels = batch["sentence_order_label"]
    mlm_loss = (w * nll).sum() / (w.sum() + 1e-5)
    sop_loss = -np.take_along_axis(sop, labels[:, None], -1).mean()
    return {"loss": mlm_loss + sop_loss, "mlm_loss": mlm_loss, "sop_loss": sop_loss}


def numpy_mlm_majority(batches) -> float:
    """Always predicting the piece with the most masked_lm_weights over all `batches`, scored per
    batch as mlm_accuracy (sum of weights of hits / (sum of weights + 1e-5)), then averaged."""
    totals: dict[int, float] = {}
    for b in batches:
        for i, w in zip(b["masked_lm_ids"].ravel(), b["masked_lm_weights"].ravel(), strict=True):
            totals[int(i)] = totals.get(int(i), 0.0) + float(w)
    top = max(sorted(totals), key=lambda i: totals[i])
    w = [b["masked_lm_weights"].astype(np.float64) for b in batches]
    hits = [(wb * (b["masked_lm_ids"] == top)).sum() for b, wb in zip(batches, w, strict=True)]
    return float(np.mean([h / (wb.sum() + 1e-5) for h, wb in zip(hits, w, strict=True)]))


def _planted_batches():
    """Piece 7 fills the most slots but mostly with weight 0; piece 9 has the most weight. The
    label-1 share is 5/8."""
    b0 = make_global_batch(0, batch=4)
    b0["masked_lm_ids"] = np.array([[7, 7, 9, 7], [7, 7, 9, 7], [9, 3, 4, 7], [5, 6, 7, 7]])
    b0["masked_lm_weights"] = np.array(
        [[0, 0, 1, 0], [0, 0, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0]], np.float32
    )
    b0["sentence_order_label"] = np.array([1, 1, 1, 0])
    b1 = make_global_batch(1, batch=4)
    b1["masked_lm_ids"] = np.array([[9, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]])
    b1["masked_lm_weights"] = np.zeros((4, 4), np.float32)
    b1["masked_lm_weights"][0, 0] = 1
    b1["sentence_order_label"] = np.array([1, 0, 1, 0])
    return [{k: np.asarray(v) for k, v in b.items()} for b in (b0, b1)]


def test_majority_baselines_are_the_constant_predictors_accuracies():
    """mlm_majority_accuracy / sop_majority_share equal the real mlm_accuracy / sop_accuracy of a
    model that always answers the weight-most-frequent piece / the more frequent label."""
    from albert_jax.model import losses

    batches = _planted_batches()
    task = make_task(make_config(eval_batches=5))
    task.eval_iterator = lambda *a: iter(batches)

    def constant(batch):  # 9: most weight; 7: most slots. Label 1: 5 of 8.
        logits = jax.nn.one_hot(np.full(batch["masked_lm_ids"].shape, 9), 12)
        sop = jax.nn.one_hot(np.ones(len(batch["sentence_order_label"]), int), 2)
        ids, w, y = (
            batch["masked_lm_ids"],
            batch["masked_lm_weights"],
            batch["sentence_order_label"],
        )
        return {
            "mlm_accuracy": losses.mlm_accuracy(logits, ids, w),
            "sop_accuracy": losses.sop_accuracy(sop, y),
        }

    m = task.evaluate(constant, 0)
    assert list(m) == [
        "mlm_accuracy",
        "mlm_majority_accuracy",
        "mlm_learned_nothing",
        "sop_accuracy",
        "sop_majority_share",
        "sop_learned_nothing",
    ]
    assert m["mlm_learned_nothing"] == m["sop_learned_nothing"] == 1.0  # the floors themselves
    assert m["mlm_majority_accuracy"] == pytest.approx(m["mlm_accuracy"], rel=1e-6)
    # by hand: 3 of 8 weight in batch 0, 1 of 1 in batch 1, each over (weight + 1e-5)
    assert m["mlm_majority_accuracy"] == pytest.approx((3 / 8 + 1) / 2, rel=1e-5)
    assert m["mlm_majority_accuracy"] == pytest.approx(numpy_mlm_majority(batches), rel=1e-9)
    assert m["sop_majority_share"] == m["sop_accuracy"] == 0.625
    # Mostly label 0 instead: the share is still the majority's.
    for b in batches:
        b["sentence_order_label"] = 1 - b["sentence_order_label"]
    assert task.evaluate(constant, 0)["sop_majority_share"] == 0.625


def initial_params(task, seed=0):
    """What train() starts from: the task model initialised with jax.random.key(config.seed)."""
    variables = task.model.init(jax.random.key(seed), **task.dummy_batch())
    return jax.tree_util.tree_map(np.asarray, nn.meta.unbox(variables["params"]))


def test_each_logged_loss_equals_the_model_on_that_batch_with_those_params(tmp_path):
    config = make_config(total_steps=3, checkpoint_every=1)
    task = make_task(config)
    train(config, str(tmp_path), task.job())
    rows = read_metrics(tmp_path)
    params = initial_params(task)
    for step in (1, 2, 3):
        want = direct_losses(task.model_config, params, make_global_batch(step - 1))
        for k, v in want.items():
            assert rows[step][k] == pytest.approx(v, rel=2e-5), (step, k)
        params = load_state(tmp_path, step)["params"]
    # The parameters moved, so a stale copy (or batch) would have shown above.
    assert rows[3]["loss"] != pytest.approx(rows[1]["loss"], rel=1e-3)


@pytest.mark.parametrize("layout", ["groups:2", "none"])
def test_dropout_and_evaluation_on_grouped_and_unshared_layouts(tmp_path, layout, capsys):
    model = (
        tiny_model_config().with_layout(layout).replace(hidden_dropout=0.1, attention_dropout=0.1)
    )
    config = make_config(total_steps=3, checkpoint_every=3, eval_every=3, eval_batches=2)
    task = make_task(config, model=model)
    train(config, str(tmp_path), task.job())
    rows = read_metrics(tmp_path)
    start = initial_params(task)
    # Training applies dropout: step 1's loss is not the deterministic one, but close to it
    # (without dropout the two agree to float32 rounding, ~1e-7; the masks of 8 one-example
    # shards move this loss by a few 1e-6 to 1e-4).
    clean = direct_losses(model, start, make_global_batch(0))["loss"]
    assert rows[1]["loss"] != pytest.approx(clean, rel=1e-6)
    assert rows[1]["loss"] == pytest.approx(clean, rel=0.2)
    # Evaluation is deterministic, on the final parameters, averaged over the eval batches.
    final = load_state(tmp_path, 3)["params"]
    evals = [direct_losses(model, final, make_global_batch(i)) for i in range(2)]
    with open(tmp_path / "metrics.jsonl") as f:
        import json

        ev = [json.loads(line) for line in f if '"eval"' in line]
    assert [r["step"] for r in ev] == [3]
    for k in ("mlm_loss", "sop_loss"):
        assert ev[0][k] == pytest.approx(np.mean([e[k] for e in evals]), rel=2e-5), k
    # The baselines land beside the accuracies, from the same two held-out batches.
    batches = [make_global_batch(i) for i in range(2)]
    assert ev[0]["mlm_majority_accuracy"] == pytest.approx(numpy_mlm_majority(batches), rel=1e-6)
    share = np.mean([b["sentence_order_label"] for b in batches])
    assert ev[0]["sop_majority_share"] == pytest.approx(max(share, 1 - share))
    keys = list(ev[0])
    assert keys[keys.index("mlm_accuracy") + 1] == "mlm_majority_accuracy"
    assert keys[keys.index("sop_accuracy") + 1] == "sop_majority_share"
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("step 3: eval ")]
    assert len(line) == 1 and "mlm_accuracy=" in line[0]
    assert " mlm_majority_accuracy=" in line[0] and " sop_majority_share=" in line[0]
    # Every group of every stacked leaf trained (the key bias has an exactly zero gradient).
    for path, before in jax.tree_util.tree_flatten_with_path(start["encoder"])[0]:
        name = jax.tree_util.keystr(path)
        after = final["encoder"]
        for p in path:
            after = after[p.key]
        moved = np.abs(after - before).reshape(len(before), -1).max(1)
        if "key']['bias" not in name:
            assert (moved > 0).all(), f"{name}: groups {np.nonzero(moved == 0)[0]} did not move"


class _KeyTask:
    """A task whose loss ignores the data and reports one uniform draw from the dropout key it is
    given, so the keys the train step hands out can be read off its metrics."""

    # the train step's members only, the rest unneeded
    finish_metrics, stacked_paths = Task.finish_metrics, lambda self: frozenset()

    def normalizers(self, batch):
        return {}

    def loss(self, params, batch, norms, rng):
        u = jax.random.uniform(rng, ())
        return params["w"] * u, {"u": u}


@pytest.mark.parametrize("accum", [1, 2])
def test_dropout_key_is_folded_with_the_step_and_the_micro_batch(accum):
    """The key of step s is fold_in(base, s) (so every step draws new masks and a resumed run the
    same ones), and micro-batch i of an accumulated step uses fold_in(that, i)."""
    mesh = partitioning.make_mesh((1, 1, 1), devices=jax.devices()[:1])
    tx = optax.sgd(0.0)
    params = {"w": jnp.ones(())}
    abstract = {"w": jax.ShapeDtypeStruct((), jnp.float32, sharding=NamedSharding(mesh, P()))}
    step_fn = jax.jit(make_train_step(_KeyTask(), tx, lambda s: 0.0, mesh, accum, abstract))
    base = jax.random.key(3)
    state = TrainState(step=jnp.int32(0), params=params, opt_state=tx.init(params), rng=base)
    draws = []
    for step in range(3):
        state, metrics = step_fn(state, {"x": np.zeros((4, 1), np.float32)})
        key = jax.random.fold_in(base, step)
        if accum == 1:
            want = jax.random.uniform(key, ())
        else:
            want = sum(jax.random.uniform(jax.random.fold_in(key, i), ()) for i in range(accum))
        assert float(metrics["u"]) == pytest.approx(float(want), rel=1e-6), step
        draws.append(float(metrics["u"]))
    assert len(set(draws)) == 3  # a new key every step
