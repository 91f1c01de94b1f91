"""unshare / regroup: pure functions on the parameter tree that keep the model's outputs."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import random_params, tiny_batch, tiny_config

from albert_jax import AlbertForPreTraining, Execution
from albert_jax.model import sharing
from albert_jax.model.losses import mlm_loss

LAYOUTS = ["all", "attention", "ffn", "groups:2", "groups:3", "none"]


def forward(cfg, params, batch):
    return jax.jit(lambda p: AlbertForPreTraining(cfg).apply({"params": p}, **batch))(params)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_grouped_leaf_has_its_group_axis_scanned_or_unrolled(layout):
    """One parameter tree per layout: each encoder/attention (encoder/ffn) leaf is [G, ...] with
    G = attention_groups (ffn_groups), 1 included, and scan vs unrolled changes nothing in it."""
    cfg = tiny_config(layout)
    scanned = random_params(AlbertForPreTraining(cfg))
    unrolled = random_params(AlbertForPreTraining(cfg, Execution(scan_layers=False)))
    assert jax.tree.structure(scanned) == jax.tree.structure(unrolled)
    jax.tree.map(np.testing.assert_array_equal, scanned, unrolled)
    for block, field in sharing.SUB_BLOCKS.items():
        for leaf in jax.tree_util.tree_leaves(scanned["encoder"][block]):
            assert leaf.shape[0] == getattr(cfg, field)
    assert sharing.stacked_paths(cfg) == sharing.stacked_paths(cfg.with_layout("none"))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_unshare_keeps_outputs_and_gives_not_shared_layout(layout):
    cfg = tiny_config(layout)
    params = random_params(AlbertForPreTraining(cfg))
    batch = tiny_batch()
    new_params, new_cfg = sharing.unshare(params, cfg)
    assert (new_cfg.attention_groups, new_cfg.ffn_groups) == (6, 6)
    assert new_cfg.layout == "none"
    for leaf in jax.tree_util.tree_leaves(new_params["encoder"]["attention"]):
        assert leaf.shape[0] == 6
    # Layer i's copy is exactly the weights layer i used before.
    q_old = params["encoder"]["attention"]["query"]["kernel"]
    q_new = new_params["encoder"]["attention"]["query"]["kernel"]
    for i in range(6):
        g = i * cfg.attention_groups // 6
        np.testing.assert_array_equal(q_new[i], q_old[g])
    a, b = forward(cfg, params, batch), forward(new_cfg, new_params, batch)
    np.testing.assert_allclose(a.sequence_output, b.sequence_output, atol=1e-6)
    np.testing.assert_allclose(a.mlm_logits, b.mlm_logits, atol=1e-5)
    np.testing.assert_allclose(a.sop_logits, b.sop_logits, atol=1e-6)


@pytest.mark.parametrize(
    "src,dst",
    [((1, 1), (2, 2)), ((1, 1), (3, 1)), ((2, 2), (6, 2)), ((3, 3), (6, 3)), ((1, 6), (3, 6))],
)
def test_regroup_to_finer_groups_keeps_outputs(src, dst):
    cfg = tiny_config(attention_groups=src[0], ffn_groups=src[1])
    params = random_params(AlbertForPreTraining(cfg))
    batch = tiny_batch()
    new_params, new_cfg = sharing.regroup(params, cfg, attention_groups=dst[0], ffn_groups=dst[1])
    assert (new_cfg.attention_groups, new_cfg.ffn_groups) == dst
    a, b = forward(cfg, params, batch), forward(new_cfg, new_params, batch)
    np.testing.assert_allclose(a.sequence_output, b.sequence_output, atol=1e-6)


def test_regroup_refuses_groups_that_straddle_sources():
    cfg = tiny_config("groups:3")  # layers 0-1 | 2-3 | 4-5
    params = random_params(AlbertForPreTraining(cfg))
    with pytest.raises(ValueError, match="spans source groups"):
        sharing.regroup(params, cfg, attention_groups=1)  # would merge different groups
    with pytest.raises(ValueError, match="target group 0 spans source groups \\[0, 1\\]"):
        sharing.regroup(params, cfg, ffn_groups=2)  # layers 0-2 -> one target group
    with pytest.raises(ValueError, match="attention_groups"):
        sharing.regroup(params, cfg, attention_groups=7)


def test_after_one_step_the_unshared_copies_differ():
    """Untied: each layer's copy gets its own gradient, so the copies drift apart."""
    cfg = tiny_config("all")
    params = random_params(AlbertForPreTraining(cfg))
    params, cfg = sharing.unshare(params, cfg)
    batch = tiny_batch()

    def loss(p):
        out = AlbertForPreTraining(cfg).apply({"params": p}, **batch)
        labels = batch["input_ids"][:, :3]
        return mlm_loss(out.mlm_logits, labels, jnp.ones_like(labels))

    grads = jax.jit(jax.grad(loss))(params)
    opt = optax.sgd(0.1)
    updates, _ = opt.update(grads, opt.init(params), params)
    stepped = optax.apply_updates(params, updates)
    for block in ("attention", "ffn"):
        for path, leaf in jax.tree_util.tree_leaves_with_path(stepped["encoder"][block]):
            before = params["encoder"][block]
            for k in path:
                before = before[k.key]
            np.testing.assert_array_equal(before[0], before[5])  # identical copies before
            if jax.tree_util.keystr(path) == "['key']['bias']":
                continue  # softmax is invariant to the key bias: its gradient is exactly zero
            assert not np.array_equal(leaf[0], leaf[5]), jax.tree_util.keystr(path)


def test_layer_groups_is_the_transformers_rule():
    np.testing.assert_array_equal(sharing.layer_groups(4, 6), [0, 0, 1, 2, 2, 3])
    np.testing.assert_array_equal(sharing.layer_groups(1, 6), [0] * 6)
    np.testing.assert_array_equal(sharing.layer_groups(6, 6), np.arange(6))
    # L=G=22: the TF float formula int(i / L * G) gives 14 at i=15; the integer rule gives 15.
    assert sharing.layer_groups(22, 22)[15] == 15
