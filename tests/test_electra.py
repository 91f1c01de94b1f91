"""ELECTRA with ALBERT sharing (`albert_jax.model.electra`, `ElectraTask`): the replaced-token
labels, where the two losses' gradients go, the optimizer on two encoders of different layouts,
FLOPs against XLA's count, exact resume, and the objectives' configuration errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import traverse_util
from trainer_worker import make_config, make_global_batch, make_task, tiny_model_config

from albert_jax.model import electra
from albert_jax.tasks.pretraining import ObjectiveError, objective_leaves, objective_of
from albert_jax.train import trainer
from albert_jax.train.optim import config_labels, make_optimizer

BATCH = {k: jnp.asarray(v) for k, v in make_global_batch(3).items()}


def electra_task(**overrides):
    config = make_config(objective="electra", **overrides)
    return make_task(config), config


def flat(tree):
    return traverse_util.flatten_dict(tree, sep="/")


def test_corrupt_writes_samples_at_real_masked_positions_only():
    ids = jnp.array([[2, 10, 11, 12, 13, 3], [2, 20, 21, 3, 0, 0]], jnp.int32)
    pos = jnp.array([[1, 3, 0], [2, 0, 0]], jnp.int32)  # 0 with weight 0: padding slots
    w = jnp.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    original = jnp.array([[10, 12, 0], [21, 0, 0]], jnp.int32)
    sampled = jnp.array([[10, 40, 41], [42, 43, 44]], jnp.int32)  # 10: the original, kept
    got_ids, labels = electra.corrupt(ids, pos, w, sampled, original)
    np.testing.assert_array_equal(got_ids, [[2, 10, 11, 40, 13, 3], [2, 20, 42, 3, 0, 0]])
    np.testing.assert_array_equal(labels, [[0, 0, 0, 1, 0, 0], [0, 0, 1, 0, 0, 0]])


def test_model_labels_are_sampled_differs_from_original():
    """Through the model on a real batch: label 1 exactly where a real masked position got a
    sampled token other than the original, 0 everywhere else. The generator is made to favour
    token 7, the original at every other masked position, so both cases occur."""
    task, _ = electra_task()
    params = flat(jax.tree_util.tree_map(np.array, init_params_of(task)))
    params["generator/mlm/output_bias"][7] = 4.0
    params = traverse_util.unflatten_dict(params, sep="/")
    b = dict(BATCH)
    rows = np.arange(b["input_ids"].shape[0])[:, None]
    ids, mlm_ids = np.array(b["input_ids"]), np.array(b["masked_lm_ids"])
    mlm_ids[:, ::2] = 7
    ids[rows, np.asarray(b["masked_lm_positions"])[:, ::2]] = 7
    b["input_ids"], b["masked_lm_ids"] = jnp.asarray(ids), jnp.asarray(mlm_ids)
    outs = [
        task.model.apply(
            {"params": params},
            b["input_ids"],
            b["segment_ids"],
            b["input_mask"],
            masked_positions=b["masked_lm_positions"],
            masked_lm_ids=b["masked_lm_ids"],
            masked_lm_weights=b["masked_lm_weights"],
            sample_key=jax.random.key(k),
        )  # fmt: skip
        for k in (1, 2)
    ]
    for out in outs:
        want = np.zeros(b["input_ids"].shape, np.int32)
        sampled, pos = np.asarray(out.sampled), np.asarray(b["masked_lm_positions"])
        for r, c in zip(*np.nonzero(np.asarray(b["masked_lm_weights"]) > 0), strict=True):
            want[r, pos[r, c]] = int(sampled[r, c] != int(b["masked_lm_ids"][r, c]))
        np.testing.assert_array_equal(out.labels, want)
        kept = (sampled == mlm_ids) & (np.asarray(b["masked_lm_weights"]) > 0)
        assert want.sum() > 0 and kept.sum() > 0  # both kinds of masked position
    assert not np.array_equal(outs[0].sampled, outs[1].sampled)
    # The discriminator reads the corrupted sequence: the backbone and head on it, run apart.
    from albert_jax.model.albert import AlbertModel

    out = outs[0]
    ids, _ = electra.corrupt(b["input_ids"], b["masked_lm_positions"], b["masked_lm_weights"],
                             out.sampled, b["masked_lm_ids"])  # fmt: skip
    backbone = {k: params[k] for k in ("embeddings", "encoder", "pooler")}
    seq = (
        AlbertModel(task.model_config)
        .apply({"params": backbone}, ids, b["segment_ids"], b["input_mask"])
        .sequence_output
    )
    head = electra.DiscriminatorHead(task.model_config)
    want = head.apply({"params": params["discriminator"]}, seq)
    np.testing.assert_allclose(out.disc_logits, want, rtol=1e-5, atol=1e-5)


def init_params_of(task):
    import flax.linen as nn

    init = jax.jit(lambda k: nn.meta.unbox(task.model.init(k, **task.dummy_batch())["params"]))
    return init(jax.random.key(0))


def grads_of(task, params, term):
    """Gradient of one loss term (or the total) at a fixed sampling key."""

    def f(p):
        total, m = task.loss(p, BATCH, task.normalizers(BATCH), None)
        return {"total": total, "mlm": m["mlm_loss"], "disc": task.weight * m["disc_loss"]}[term]

    return flat(jax.grad(f)(params))


@pytest.mark.slow  # the default suite's time; CI runs it
def test_discriminator_loss_sends_no_gradient_into_the_generator():
    """Sampling is not differentiated: the discriminator term's gradient is exactly zero on
    every generator leaf (and not on the discriminator); the generator's MLM term reaches no
    discriminator leaf; the shared tables get gradient from both, adding up to the total's."""
    task, _ = electra_task()
    params = jax.tree_util.tree_map(np.asarray, init_params_of(task))
    disc, mlm, total = (grads_of(task, params, t) for t in ("disc", "mlm", "total"))
    nonzero = lambda g: float(jnp.max(jnp.abs(g))) > 0  # noqa: E731
    gen_paths = [p for p in disc if p.startswith("generator/")]
    disc_paths = [p for p in disc if p.split("/")[0] in ("encoder", "pooler", "discriminator")]
    assert gen_paths and disc_paths
    assert not any(nonzero(disc[p]) for p in gen_paths)
    assert all(nonzero(disc[p]) for p in disc_paths if not p.startswith("pooler/"))
    assert not any(nonzero(mlm[p]) for p in disc_paths)
    assert all(nonzero(mlm[p]) for p in gen_paths)
    for table in ("embeddings/word_embeddings", "embeddings/position_embeddings"):
        assert nonzero(disc[table]) and nonzero(mlm[table])
        np.testing.assert_allclose(disc[table] + mlm[table], total[table], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("disc_layout, gen_layout", [("all", "none"), ("none", "all")])
def test_optimizer_takes_each_encoders_layer_axis_from_its_own_layout(disc_layout, gen_layout):
    """Every encoder leaf of either network carries its group axis (G = L unshared, 1 shared)
    and LAMB's trust ratio is per group: the update equals that of the same tree with every
    group a leaf of its own."""
    task = make_task(
        make_config(objective="electra", **{"electra.generator_layout": gen_layout}),
        model=tiny_model_config().with_layout(disc_layout),
    )
    stacked = task.stacked_paths()
    unshared = "encoder/attention/query/kernel"
    assert unshared in stacked and f"generator/{unshared}" in stacked
    params = init_params_of(task)
    L = tiny_model_config().num_layers
    for enc, layout in (("", disc_layout), ("generator/", gen_layout)):
        kernel = traverse_util.flatten_dict(params, sep="/")[f"{enc}{unshared}"]
        assert kernel.shape[0] == (L if layout == "none" else 1)
    config = make_config()
    labels = config_labels(params, config.optim, task.model_config, stacked)
    for enc in ("", "generator/"):  # decay and trust-ratio masks by path, in either encoder
        norm, kernel = labels[f"{enc}encoder/ffn/LayerNorm/scale"], labels[f"{enc}{unshared}"]
        assert not norm.decay and not norm.adapt and kernel.decay and kernel.adapt
        assert kernel.stacked
    rng = np.random.default_rng(0)
    grads = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.normal(size=x.shape), x.dtype), params)
    config.optim.clip_norm = 0.0
    config.optim.warmup_steps = 0
    tx, _ = make_optimizer(config.optim, task.model_config, stacked=stacked)
    updates, _ = tx.update(grads, tx.init(params), params)
    split = lambda t: _per_group(t, stacked)  # noqa: E731
    ref_tx, _ = make_optimizer(config.optim, task.model_config, stacked=frozenset())
    ref, _ = ref_tx.update(split(grads), ref_tx.init(split(params)), split(params))
    got = flat(updates)
    want = {k: jnp.stack(v) if isinstance(v, tuple) else v for k, v in flat(ref).items()}
    assert sorted(got) == sorted(want)
    for path in got:
        np.testing.assert_allclose(got[path], want[path], rtol=1e-5, atol=1e-8, err_msg=path)


def _per_group(tree, paths):
    """Every leaf at `paths` as a tuple of its group slices: each group a variable of its own."""
    flat_tree = traverse_util.flatten_dict(tree, sep="/")
    return traverse_util.unflatten_dict(
        {k: tuple(v) if k in paths else v for k, v in flat_tree.items()}, sep="/"
    )


def test_flops_count_both_networks_as_xla_does():
    """Forward + backward matmul FLOPs of generator and discriminator against XLA's count of the
    compiled gradient (unrolled layers: XLA counts a loop body once). Measured 1.016 (XLA adds
    elementwise work: sampling, GELU, softmax); leaving out the discriminator's head (+2 %), the
    generator (+6 %) or the backward pass falls outside [1, 1.03]."""
    model = tiny_model_config().replace(hidden_size=256, intermediate_size=1024, embedding_size=64)
    unrolled = {"electra.generator_layout": "none", "execution.scan_layers": False}
    config = make_config(objective="electra", **unrolled)
    task = make_task(config, model=model)
    params = init_params_of(task)

    def total(p):
        return task.loss(p, BATCH, task.normalizers(BATCH), None)[0]

    cost = jax.jit(jax.grad(total)).lower(params).compile().cost_analysis()
    xla = (cost[0] if isinstance(cost, list) else cost)["flops"]
    ours = task.flops_per_example() * BATCH["input_ids"].shape[0]
    assert 1.0 <= xla / ours <= 1.03, xla / ours


@pytest.mark.slow  # three short training runs
def test_electra_resume_is_bit_exact(tmp_path):
    """Stop at step 4, resume to 6: the state (both encoders, different layouts) and the step
    metrics equal those of a straight run."""
    from support.trainer import assert_trees_equal, load_state, read_metrics

    kw = {"objective": "electra", "electra.generator_layout": "none", "optim.total_steps": 6}

    def run(workdir, steps):
        config = make_config(total_steps=steps, **kw)
        return trainer.train(config, str(workdir), make_task(config).job())

    run(tmp_path / "straight", 6)
    run(tmp_path / "resumed", 4)
    last = run(tmp_path / "resumed", 6)
    assert_trees_equal(load_state(tmp_path / "resumed", 6), load_state(tmp_path / "straight", 6))
    a, b = read_metrics(tmp_path / "resumed"), read_metrics(tmp_path / "straight")
    for k in ("loss", "mlm_loss", "disc_loss", "disc_precision", "disc_recall", "grad_norm"):
        assert a[6][k] == b[6][k], k
    assert 0.0 <= last["sampled_original"] <= 1.0 and last["train_flops"] > 0


def test_disc_auc_is_sklearns_with_ties_counted_half():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500)
    scores = np.round(rng.normal(size=500) + labels, 1)  # many tied scores, across both classes
    assert len(np.unique(scores)) < 100
    assert electra.disc_auc(labels, scores) == pytest.approx(
        roc_auc_score(labels, scores), abs=1e-12
    )
    assert electra.disc_auc([0, 1, 1, 0], [0.5, 0.5, 0.9, 0.1]) == 0.875  # the tie: half a pair
    assert np.isnan(electra.disc_auc([1, 1], [0.2, 0.3]))  # one class: undefined


def test_eval_disc_auc_is_sklearns_over_all_non_padding_tokens():
    """disc_auc at evaluation: sklearn's roc_auc_score of the discriminator's sigmoid
    probabilities over every non-padding token of all the evaluated batches (padded rows here)."""
    from sklearn.metrics import roc_auc_score

    task, _ = electra_task(eval_batches=3)
    params = init_params_of(task)
    step = jax.jit(task.eval_step)
    metrics = task.evaluate(lambda b: jax.device_get(step(params, b)), 0)
    keys = list(metrics)
    assert keys[keys.index("disc_accuracy") + 1] == "disc_auc"
    assert not any(k.startswith("disc_token") for k in keys)  # the arrays are no metrics
    labels, probs = [], []
    for i in range(3):
        batch = {k: jnp.asarray(v) for k, v in make_global_batch(i).items()}
        assert (batch["input_mask"] == 0).any()
        out = task._apply(
            params, batch, None, masked_lm_ids=batch["masked_lm_ids"],
            masked_lm_weights=batch["masked_lm_weights"], sample_key=jax.random.key(0),
        )  # fmt: skip
        real = batch["input_mask"] > 0
        labels.append(np.asarray(out.labels)[real])
        logits = np.asarray(out.disc_logits, np.float64)[real]
        probs.append(1 / (1 + np.exp(-logits)))
    labels, probs = np.concatenate(labels), np.concatenate(probs)
    assert 0 < labels.mean() < 0.5
    assert metrics["disc_auc"] == pytest.approx(roc_auc_score(labels, probs), abs=1e-9)


def test_objectives_are_checked():
    def cfg(objective, mode="sop", **kw):
        return ml_collections.ConfigDict(
            {"objective": objective, "data": {"mode": mode}, "cross_eval": False, **kw}
        )

    config = cfg("mlm+nsp")
    assert objective_leaves(config) == {"data.mode": "nsp"}  # the objective sets the pairs
    assert objective_leaves(cfg("mlm+nsp", "nsp")) == {} and objective_leaves(cfg("mlm+sop")) == {}
    with pytest.raises(ObjectiveError, match="objective=mlm\\+nsp"):
        objective_of(cfg("mlm+sop", "nsp"))  # not silently SOP
    with pytest.raises(ObjectiveError, match="expected one of"):
        objective_of(cfg("electric"))
    with pytest.raises(ObjectiveError, match="no"):
        objective_of(cfg("mlm", cross_eval=True))
    with pytest.raises(ObjectiveError, match="generator_fraction"):
        make_task(make_config(objective="electra", **{"electra.generator_fraction": 1.5}))
    with pytest.raises(ObjectiveError, match="layerwise_decay"):
        make_task(make_config(objective="electra", **{"optim.layerwise_decay": 0.8}))


def test_nsp_objective_builds_nsp_pairs():
    """The task of 'mlm+nsp' reads NSP pairs even when its data section still says SOP."""
    config = make_config(objective="mlm+nsp")
    assert config.data.get("mode", "sop") == "sop"
    assert make_task(config).data.mode == "nsp"


def test_mlm_objective_has_no_sentence_head():
    task = make_task(make_config(objective="mlm"))
    params = flat(init_params_of(task))
    assert not any(p.startswith("sop/") for p in params)
    loss, metrics = task.loss(
        jax.tree_util.tree_map(jnp.asarray, traverse_util.unflatten_dict(params, sep="/")),
        BATCH,
        task.normalizers(BATCH),
        None,
    )
    assert sorted(metrics) == ["mlm_accuracy", "mlm_loss"] and float(loss) == metrics["mlm_loss"]
    assert task.progress_keys == ("loss", "mlm_accuracy", "learning_rate")
