"""albert_jax.train.optim against a NumPy port of the reference LAMB / AdamWeightDecay
(lamb_optimizer.py, optimization.py), written from the update equations: a loop over TF-named
variables, float64."""

import re

import jax
import ml_collections
import numpy as np
import optax
import pytest

from albert_jax import AlbertConfig
from albert_jax.checkpoints import tf as tf_convert
from albert_jax.model.sharing import stacked_paths
from albert_jax.train.optim import (
    Label,
    OptimConfig,
    OptimConfigError,
    adamw,
    clip_by_global_norm,
    config_labels,
    lamb,
    lr_factors,
    make_optimizer,
    param_labels,
    path_str,
    scale_by_path,
    stacked_patterns,
    warmup_polynomial_decay,
)

H, E, V, FF, G = 4, 3, 7, 5, 3  # hidden, embedding, vocab, intermediate, attention groups
MODEL = AlbertConfig(num_layers=6, attention_groups=G, ffn_groups=1)
STACKED = ("encoder/attention/", "encoder/ffn/")  # every encoder leaf: [G, ...], G = 1 for the FFN
B1, B2, EPS = 0.9, 0.999, 1e-6

# Our path -> the reference's TF variable name ({g}: group index of a stacked leaf): the
# converter's table, plus a fine-tuning head as run_classifier.py names it.
TF_NAMES = {
    **tf_convert.TF_NAMES,
    "classifier/kernel": "output_weights",
    "classifier/bias": "output_bias",
}
DECAYED = {
    "embeddings/word_embeddings",
    "embeddings/position_embeddings",
    "embeddings/token_type_embeddings",
    "encoder/projection/kernel",
    *(f"encoder/attention/{n}/kernel" for n in ("query", "key", "value", "output")),
    "encoder/ffn/intermediate/kernel",
    "encoder/ffn/output/kernel",
    "pooler/kernel",
    "mlm/transform/kernel",
    "sop/kernel",
    "classifier/kernel",
}


def dense(i, o, groups=()):
    return {"kernel": (*groups, i, o), "bias": (*groups, o)}


def layer_norm(n, groups=()):
    return {"scale": (*groups, n), "bias": (*groups, n)}


SHAPES = {
    "embeddings": {
        "word_embeddings": (V, E),
        "position_embeddings": (6, E),
        "token_type_embeddings": (2, E),
        "LayerNorm": layer_norm(E),
    },
    "encoder": {
        "projection": dense(E, H),
        "attention": {
            **{n: dense(H, H, (G,)) for n in ("query", "key", "value", "output")},
            "LayerNorm": layer_norm(H, (G,)),
        },
        "ffn": {
            "intermediate": dense(H, FF, (1,)),
            "output": dense(FF, H, (1,)),
            "LayerNorm": layer_norm(H, (1,)),
        },
    },
    "pooler": dense(H, H),
    "mlm": {"transform": dense(H, E), "LayerNorm": layer_norm(E), "output_bias": (V,)},
    "sop": dense(H, 2),
    "classifier": dense(H, 3),
}
is_shape = lambda x: isinstance(x, tuple)


# A few leaves of each kind, for the tests that need no TF names (compile time grows with leaves).
SMALL = {
    "encoder": {"attention": {"query": dense(H, H, (G,)), "LayerNorm": layer_norm(H, (G,))}},
    "pooler": dense(H, H),
    "mlm": {"output_bias": (V,)},
}


def random_tree(rng, scale=1.0, shapes=SHAPES):
    """float32 NumPy leaves; stacked group g is scaled by g + 1, so per-group norms differ."""

    def one(path, shape):
        x = rng.normal(size=shape) * scale
        if path_str(path).startswith("encoder/attention/"):
            x *= np.arange(1, G + 1).reshape(G, *[1] * (len(shape) - 1))
        return x.astype(np.float32)

    return jax.tree_util.tree_map_with_path(one, shapes, is_leaf=is_shape)


def initial_params(rng, shapes=SHAPES):
    params = random_tree(rng, 0.5, shapes)
    if "classifier" in params:
        params["classifier"]["kernel"][:] = 0  # |w| = 0: trust ratio 1
    return params


def flat(tree):
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {path_str(p): np.asarray(x, np.float64) for p, x in leaves}


def first_update(tx):
    """(grads, params) -> the first step's (updates, state), jitted: one compile per optimizer
    (eager dispatch compiles every small op for every shape, which is slower)."""
    return jax.jit(lambda g, p: tx.update(g, tx.init(p), p))


def optim_config(name, **kw):
    cfg = OptimConfig.section()
    cfg.update(name=name, learning_rate=0.05, warmup_steps=2, total_steps=8, **kw)
    return cfg


# ---------------------------------------------------------------- the NumPy port


def tf_variables(tree):
    """{tf_name: float64 array}: a stacked leaf becomes one variable per group, as in TF."""
    out = {}
    for path, x in flat(tree).items():
        if path.startswith(STACKED):
            out.update({TF_NAMES[path].format(g=g): x[g] for g in range(len(x))})
        else:
            out[TF_NAMES[path].format(g=0)] = x
    return out


def reference_lr(step, cfg):
    if step < cfg.warmup_steps:
        return cfg.learning_rate * step / cfg.warmup_steps
    return cfg.learning_rate * (1 - min(step, cfg.total_steps) / cfg.total_steps) ** cfg.power


class ReferenceOptimizer:
    """clip_by_global_norm, then LAMB / AdamWeightDecay per variable (no bias correction)."""

    def __init__(self, cfg, variables):
        self.cfg = cfg
        self.m = {n: np.zeros_like(w) for n, w in variables.items()}
        self.v = {n: np.zeros_like(w) for n, w in variables.items()}
        self.step = 0
        self.exclude = ["LayerNorm", "layer_norm", "bias"]

    def _excluded(self, name):
        return any(re.search(r, name) is not None for r in self.exclude)

    def apply(self, variables, grads):
        cfg = self.cfg
        global_norm = np.sqrt(sum(np.sum(g**2) for g in grads.values()))
        grads = {n: g * cfg.clip_norm / max(global_norm, cfg.clip_norm) for n, g in grads.items()}
        lr = reference_lr(self.step, cfg)
        out = {}
        for name, w in variables.items():
            g = grads[name]
            self.m[name] = cfg.b1 * self.m[name] + (1 - cfg.b1) * g
            self.v[name] = cfg.b2 * self.v[name] + (1 - cfg.b2) * g**2
            update = self.m[name] / (np.sqrt(self.v[name]) + cfg.eps)
            if cfg.weight_decay and not self._excluded(name):
                update = update + cfg.weight_decay * w
            ratio = 1.0
            if cfg.name == "lamb" and not self._excluded(name):
                w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            out[name] = w - ratio * lr * update
        self.step += 1
        return out


@pytest.mark.parametrize("name", ["lamb", "adamw"])
def test_matches_numpy_port_of_reference(name):
    rng = np.random.default_rng(0)
    cfg = optim_config(name)
    tx, _ = make_optimizer(cfg, MODEL)
    params = initial_params(rng)
    ref_vars = tf_variables(params)
    ref = ReferenceOptimizer(cfg, ref_vars)

    @jax.jit
    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    state, diffs = jax.jit(tx.init)(params), []
    for grad_scale in (0.05, 3.0, 0.1, 2.0, 0.5):  # global norm below and above clip_norm 1
        grads = random_tree(rng, grad_scale / 10)
        if name == "lamb":
            grads["embeddings"]["token_type_embeddings"][:] = 0  # u = wd * w only
        params, state = step(params, state, grads)
        ref_vars = ref.apply(ref_vars, tf_variables(grads))
        ours = tf_variables(params)
        diffs.append(max(np.abs(ours[k] - ref_vars[k]).max() for k in ref_vars))
    print(f"{name}: max |ours - reference| per step = {[f'{d:.2g}' for d in diffs]}")
    assert max(diffs) < 1e-6
    start = tf_variables(initial_params(np.random.default_rng(0)))
    assert max(np.abs(ours[k] - start[k]).max() for k in start) > 1e-2  # the test is not vacuous


# ---------------------------------------------------------------- per-layer trust ratio


def test_stacked_trust_ratio_is_per_layer():
    rng = np.random.default_rng(1)
    w = rng.normal(size=(G, H, H)).astype(np.float32) * np.arange(1, G + 1)[:, None, None]

    grads = rng.normal(size=(3, G, H, H)).astype(np.float32)
    as_stacked = lambda x: {"encoder": {"attention": {"query": {"kernel": x}}}}
    as_split = lambda x: {f"layer{g}": {"kernel": x[g]} for g in range(G)}

    def run(tx, params, to_tree):
        state = tx.init(params)
        for g in grads:
            updates, state = tx.update(to_tree(g), state, params)
            params = optax.apply_updates(params, updates)
        return params

    @jax.jit
    def all_three(stacked, split):
        return (
            run(lamb(0.1, stacked=STACKED), stacked, as_stacked),
            run(lamb(0.1), split, as_split),
            run(lamb(0.1), stacked, as_stacked),  # one ratio for the whole stack: wrong
        )

    per_layer, separate, whole = all_three(as_stacked(w), as_split(w))
    ours = np.asarray(per_layer["encoder"]["attention"]["query"]["kernel"])
    for g in range(G):
        np.testing.assert_allclose(ours[g], separate[f"layer{g}"]["kernel"], rtol=1e-6, atol=1e-7)
    assert np.abs(ours - whole["encoder"]["attention"]["query"]["kernel"]).max() > 1e-3


# ---------------------------------------------------------------- exclusions


def test_labels():
    labels = param_labels(initial_params(np.random.default_rng(0)), stacked=STACKED)
    assert set(labels) == set(TF_NAMES)
    assert {p for p, lab in labels.items() if lab.decay} == DECAYED
    assert {p for p, lab in labels.items() if lab.adapt} == DECAYED
    assert {p for p, lab in labels.items() if lab.stacked} == {
        p for p in TF_NAMES if p.startswith(STACKED)
    }
    adamw_labels = param_labels({"k": {"kernel": 0}}, trust_ratio=False)
    assert adamw_labels == {"k/kernel": Label(decay=True, adapt=False, stacked=False)}
    params = {"encoder": {"attention": {"query": {"kernel": 0}}, "ffn": {"output": {"kernel": 0}}}}
    assert config_labels(params, OptimConfig.section(), MODEL) == {
        "encoder/attention/query/kernel": Label(decay=True, adapt=True, stacked=True),
        "encoder/ffn/output/kernel": Label(decay=True, adapt=True, stacked=True),
    }
    no_decay_adamw = ml_collections.ConfigDict({"name": "AdamW", "weight_decay": 0.0})
    labels = config_labels(params, no_decay_adamw, AlbertConfig())
    assert not any(lab.decay or lab.adapt for lab in labels.values())


def test_excluded_leaves_get_plain_adam_others_decay_and_trust_ratio():
    rng = np.random.default_rng(2)
    params, grads = initial_params(rng), random_tree(rng, 0.1)
    lr = 0.1
    lamb_update = first_update(lamb(lr, stacked=STACKED))
    updates = flat(lamb_update(grads, params)[0])
    g, w = flat(grads), flat(params)
    for path, u in updates.items():
        if path in DECAYED - {"classifier/kernel"}:  # |update| = lr * |w| (per group if stacked)
            axes = tuple(range(1, u.ndim)) if path.startswith(STACKED) else None
            u_norm = np.sqrt(np.sum(u**2, axis=axes))
            w_norm = np.sqrt(np.sum(w[path] ** 2, axis=axes))
            np.testing.assert_allclose(u_norm, lr * w_norm, rtol=1e-5, err_msg=path)
        else:  # excluded, or |w| = 0 (ratio 1, decay 0): first-step Adam without bias correction
            adam = (1 - B1) * g[path] / (np.sqrt((1 - B2) * g[path] ** 2) + EPS)
            np.testing.assert_allclose(u, -lr * adam, rtol=1e-5, atol=1e-7, err_msg=path)

    # Zero gradient: only the decayed leaves move, and by exactly lr * |w| (ratio = 1 / wd).
    # (AdamW's exclusions are checked against the reference in test_matches_numpy_port_*.)
    updates = flat(lamb_update(jax.tree.map(np.zeros_like, grads), params)[0])
    assert {p for p, u in updates.items() if np.abs(u).max() > 0} == DECAYED - {"classifier/kernel"}
    np.testing.assert_allclose(updates["pooler/kernel"], -lr * w["pooler/kernel"], rtol=1e-5)


# ---------------------------------------------------------------- bias correction


def run_steps(txs, params, n=3, seed=3):
    """Params after n steps of each optimizer on the same gradients (one compile for all)."""
    rng = np.random.default_rng(seed)
    grads = jax.tree.map(lambda *g: np.stack(g), *[random_tree(rng, 0.1, SMALL) for _ in range(n)])

    def run(tx, params):
        def step(carry, g):
            p, state = carry
            updates, state = tx.update(g, state, p)
            return (optax.apply_updates(p, updates), state), None

        return jax.lax.scan(step, (params, tx.init(params)), grads)[0][0]

    return [flat(p) for p in jax.jit(lambda p: [run(tx, p) for tx in txs])(params)]


def test_bias_correction_matches_optax():
    params = initial_params(np.random.default_rng(4), SMALL)
    ours, theirs, ours_lamb, theirs_lamb, uncorrected = run_steps(
        [
            adamw(0.01, weight_decay=0.0, bias_correction=True),
            optax.adam(0.01, b1=B1, b2=B2, eps=EPS),
            # optax.lamb decays and adapts every leaf: the same as ours with nothing excluded.
            lamb(0.01, exclude=None, bias_correction=True),
            optax.lamb(0.01, b1=B1, b2=B2, eps=EPS, weight_decay=0.01),
            adamw(0.01, weight_decay=0.0),
        ],
        params,
    )
    for k in ours:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-6, atol=1e-7, err_msg=k)
        np.testing.assert_allclose(ours_lamb[k], theirs_lamb[k], rtol=1e-6, atol=1e-7, err_msg=k)
    assert max(np.abs(uncorrected[k] - ours[k]).max() for k in ours) > 1e-3


# ---------------------------------------------------------------- schedule


@pytest.mark.parametrize("end_lr, power", [(0.0, 1.0), (1e-5, 2.0)])
@pytest.mark.parametrize("offset", [False, True])
def test_schedule(offset, end_lr, power):
    peak, warmup, total = 0.00176, 3125, 125000
    sched = warmup_polynomial_decay(peak, warmup, total, end_lr, power, offset_decay=offset)
    start = warmup if offset else 0

    def expected(step):
        if step < warmup:
            return peak * step / warmup
        frac = (min(step, total) - start) / (total - start)
        return (peak - end_lr) * (1 - frac) ** power + end_lr

    for step in (0, warmup // 2, warmup - 1, warmup, total // 2, total, total + 10):
        np.testing.assert_allclose(sched(step), expected(step), rtol=1e-6, atol=1e-12)
    if offset:
        np.testing.assert_allclose(sched(warmup), peak, rtol=1e-6)
    elif power == 1.0 and end_lr == 0.0:  # the reference's drop at the end of warmup
        np.testing.assert_allclose(sched(warmup), 0.001716, rtol=1e-6)
    no_warmup = warmup_polynomial_decay(peak, 0, total, end_lr, power, offset_decay=offset)
    np.testing.assert_allclose(no_warmup(0), peak, rtol=1e-6)


def test_schedule_rejects_bad_steps():
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_polynomial_decay(1.0, 10, 5)


# ---------------------------------------------------------------- make_optimizer


def test_make_optimizer_rejects_unknown_name():
    with pytest.raises(ValueError, match=r"unknown optimizer 'sgd'.*\['lamb', 'adamw'\]"):
        make_optimizer(optim_config("sgd"), MODEL)


def test_optim_section_parses_reads_back_and_checks():
    """The optimizer's leaves parse on the command line with their types, a config lacking some
    reads back with the section's defaults, and a bad value is refused naming its field."""
    c = OptimConfig.section()
    c.update(learning_rate=1, warmup_steps=7, name="ADAMW")  # an int where a float is: a float
    o = OptimConfig.from_config(c)
    assert isinstance(o.learning_rate, float) and o.learning_rate == 1.0
    assert (o.warmup_steps, o.optimizer(), o.clip_norm) == (7, "adamw", 1.0)
    with pytest.raises(TypeError):
        c.warmup_steps = "many"
    o = OptimConfig.from_config({"b2": 0.98, "frozen": "^embeddings/"})
    assert o == OptimConfig(b2=0.98, frozen="^embeddings/")
    assert (o.name, o.learning_rate, o.total_steps, o.exclude) == (
        "lamb", 0.00176, 125000, r"LayerNorm|layer_norm|bias",
    )  # fmt: skip
    o.check(125000)
    with pytest.raises(OptimConfigError, match=r"^optim\.b1 must be a finite number >= 0 and < 1"):
        OptimConfig.from_config({"b1": 1.0}).check()
    with pytest.raises(OptimConfigError, match=r"^optim\.eps must be a finite number > 0"):
        OptimConfig(eps=0.0).check()


def test_make_optimizer_defaults_and_clipping():
    cfg = OptimConfig.section()
    assert (cfg.name, cfg.learning_rate, cfg.warmup_steps, cfg.total_steps) == (
        "lamb",
        0.00176,
        3125,
        125000,
    )
    assert (cfg.weight_decay, cfg.b1, cfg.b2, cfg.eps, cfg.clip_norm) == (0.01, 0.9, 0.999, 1e-6, 1)
    assert not cfg.bias_correction and not cfg.offset_decay
    # Missing fields take the defaults; clip_norm 0 / None turns clipping off.
    tx, sched = make_optimizer(ml_collections.ConfigDict({"name": "adamw"}), MODEL)
    assert float(sched(3125)) == pytest.approx(0.001716, rel=1e-6)
    params = initial_params(np.random.default_rng(5), SMALL)
    big = jax.tree.map(lambda x: x * 0 + 10.0, params)  # global norm >> 1
    clips = (1.0, 4.0, 0.0, None)
    txs = [make_optimizer(optim_config("lamb", clip_norm=c), MODEL)[0] for c in clips]
    # The lr is 0 at step 0: look at the first moments.
    first_mu = lambda g, p: [optax.tree.get(tx.update(g, tx.init(p), p)[1], "mu") for tx in txs]
    after = dict(zip(clips, map(flat, jax.jit(first_mu)(big, params)), strict=True))
    assert np.abs(after[0.0]["pooler/kernel"]).max() == pytest.approx(1.0, rel=1e-6)
    assert np.abs(after[1.0]["pooler/kernel"]).max() < 0.1
    # The configured norm is the one clipped to (a fixed 1.0 would pass the line above).
    np.testing.assert_allclose(after[4.0]["pooler/kernel"], 4 * after[1.0]["pooler/kernel"], 1e-6)
    assert after[None]["pooler/kernel"].max() == after[0.0]["pooler/kernel"].max()


# ---------------------------------------------------------------- fine-tuning learning rates


def _tree(config):
    from albert_jax.model.heads import param_shapes

    head = {"type": "sequence_classification", "num_labels": 2}
    return jax.tree.map(lambda s: np.ones(s.shape, np.float32), param_shapes(config, head))


def _one_step(optim, config, params):
    """The update of one AdamW step with gradient 1 everywhere (lr constant: no warmup)."""
    optim.warmup_steps = 0
    tx, _ = make_optimizer(optim, config, params)
    grads = jax.tree.map(np.ones_like, params)
    updates, _ = tx.update(grads, tx.init(params), params)
    return flat(updates)


def test_lr_multipliers_layerwise_decay_and_frozen():
    config = AlbertConfig(
        vocab_size=11, embedding_size=4, hidden_size=8, num_layers=3, num_heads=2,
        intermediate_size=6, max_position_embeddings=8,
    ).with_layout("none")  # fmt: skip
    params = _tree(config)
    base = optim_config("adamw", clip_norm=0.0, weight_decay=0.0)
    plain = _one_step(base, config, params)
    cfg = optim_config(
        "adamw", clip_norm=0.0, weight_decay=0.0,
        lr_multipliers="^classifier/=10,^embeddings/=0.5", layerwise_decay=0.5,
        frozen="^pooler/",
    )  # fmt: skip
    got = _one_step(cfg, config, params)
    ratio = lambda p: got[p] / plain[p]
    # depth: embeddings 0, layer i i+1, head L+1 -> factor 0.5 ** (L + 1 - depth)
    np.testing.assert_allclose(ratio("embeddings/word_embeddings"), 0.5 * 0.5**4)
    np.testing.assert_allclose(ratio("encoder/projection/kernel"), 0.5**4)
    q = ratio("encoder/attention/query/kernel")
    for layer in range(3):
        np.testing.assert_allclose(q[layer], 0.5 ** (3 - layer), rtol=1e-6)
    np.testing.assert_allclose(ratio("classifier/kernel"), 10.0)
    assert not np.any(got["pooler/kernel"]) and not np.any(got["pooler/bias"])  # frozen
    # A shared block has no depth: refused with a message that says what to do instead.
    with pytest.raises(
        ValueError, match=r"'all' layout shares encoder/attention and encoder/ffn.*Unshare"
    ):
        make_optimizer(cfg, config.with_layout("all"), _tree(config.with_layout("all")))
    with pytest.raises(ValueError, match="not 'regex=multiplier'"):
        make_optimizer(optim_config("adamw", lr_multipliers="oops"), config, params)


def test_frozen_leaves_have_no_optimizer_state_and_the_others_train_as_before():
    """`optim.frozen` (and a multiplier of 0) freezes leaves: no Adam moments for them, no
    change in 3 steps, and every other leaf bitwise where the optimizer took it when frozen
    leaves were merely scaled by 0 (the clip's global norm still counts their gradients)."""
    config = AlbertConfig(
        vocab_size=11, embedding_size=4, hidden_size=8, num_layers=3, num_heads=2,
        intermediate_size=6, max_position_embeddings=8,
    ).with_layout("none")  # fmt: skip
    rng = np.random.default_rng(0)
    normal = lambda x: rng.normal(size=x.shape).astype(np.float32)  # noqa: E731
    params = jax.tree.map(normal, _tree(config))
    grads = [jax.tree.map(normal, params) for _ in range(3)]  # norms > clip_norm: clipped
    cfg = optim_config("lamb", lr_multipliers="^classifier/=10,^pooler/=0", frozen="^embeddings/")
    cfg.warmup_steps = 0
    tx, schedule = make_optimizer(cfg, config, params)
    before = optax.chain(  # the chain that scaled frozen leaves by 0 and kept their moments
        optax.chain(clip_by_global_norm(1.0), lamb(schedule, stacked=stacked_patterns(config))),
        scale_by_path(lr_factors(params, cfg, config, stacked_paths(config))),
    )

    def run(tx):
        def go(p, gs):
            state = tx.init(p)
            for g in gs:
                u, state = tx.update(g, state, p)
                p = optax.apply_updates(p, u)
            return p, state

        return jax.jit(go)(params, grads)

    (got, state), (want, old_state) = run(tx), run(before)
    frozen = {p for p in flat(params) if p.startswith(("embeddings/", "pooler/"))}
    assert len(frozen) == 7
    nbytes = lambda t: sum(x.nbytes for x in jax.tree_util.tree_leaves(t))  # noqa: E731
    frozen_bytes = sum(x.nbytes for p, x in flat(params).items() if p in frozen) // 2  # f32
    assert nbytes(state) == nbytes(old_state) - 2 * frozen_bytes  # neither mu nor nu for them
    got, want, start = flat(got), flat(want), flat(params)
    for path in start:
        if path in frozen:
            assert np.array_equal(got[path], start[path]), path
        else:
            assert not np.array_equal(got[path], start[path]), path
            assert np.array_equal(got[path], want[path]), path


def test_a_checkpoint_with_moments_for_frozen_leaves_is_refused_by_name(tmp_path):
    """A train state saved when frozen leaves still had Adam moments does not fit the frozen
    optimizer's: the restore says so in one line instead of resuming on shifted leaves."""
    import grain

    from albert_jax.checkpoints.checkpoint import CheckpointError
    from albert_jax.checkpoints.train_state import Checkpointer

    config = AlbertConfig(
        vocab_size=11, embedding_size=4, hidden_size=8, num_layers=2, num_heads=2,
        intermediate_size=6, max_position_embeddings=8,
    )  # fmt: skip
    params = _tree(config)
    cfg = optim_config("lamb", frozen="^embeddings/")
    tx, schedule = make_optimizer(cfg, config, params)
    before = optax.chain(
        optax.chain(clip_by_global_norm(1.0), lamb(schedule, stacked=stacked_patterns(config))),
        scale_by_path(lr_factors(params, cfg, config, stacked_paths(config))),
    )
    data = iter(grain.MapDataset.range(4).to_iter_dataset())
    ckpt = Checkpointer(str(tmp_path), async_save=False)
    try:
        ckpt.save(1, {"params": params, "opt_state": before.init(params)}, data, force=True)
        abstract = jax.eval_shape(lambda: {"params": params, "opt_state": tx.init(params)})
        with pytest.raises(CheckpointError, match=r"Structure mismatch.*optim\.frozen"):
            ckpt.restore_latest(abstract, data)
    finally:
        ckpt.close()


# ---------------------------------------------------------------- several attention and FFN groups


@pytest.mark.parametrize("groups", [(6, 6), (3, 2)])
def test_grouped_model_updates_each_group_as_its_own_variable(groups):
    """make_optimizer on a real model whose attention and FFN are both stacked: group g of every
    stacked leaf must get exactly the update a one-group model gets from that group's slice (a
    trust ratio over the whole stack, or a stacked leaf taken for one variable, changes it)."""
    from albert_jax.model.albert import AlbertModel, init_params

    A, F = groups
    one = AlbertConfig(
        vocab_size=11, embedding_size=4, hidden_size=8, num_layers=6, num_heads=2,
        intermediate_size=12, max_position_embeddings=8,
    )  # fmt: skip
    grouped = one.replace(attention_groups=A, ffn_groups=F)
    ocfg = OptimConfig.section()
    ocfg.update(name="lamb", learning_rate=0.1, warmup_steps=0, total_steps=10, clip_norm=0.0)
    rng = np.random.default_rng(0)
    normal = lambda x: rng.normal(size=x.shape).astype(np.float32)
    params = init_params(AlbertModel(grouped), jax.random.key(0))
    # Groups of very different scales, so one ratio over a whole stack differs from per-group ones.
    scale = lambda x: x * np.arange(1, len(x) + 1).reshape(-1, *[1] * (x.ndim - 1)) ** 2
    params["encoder"] = {
        "attention": jax.tree_util.tree_map(scale, params["encoder"]["attention"]),
        "ffn": jax.tree_util.tree_map(scale, params["encoder"]["ffn"]),
    }
    grads = [jax.tree_util.tree_map(normal, params) for _ in range(2)]

    def run(config, p, gs):
        tx, _ = make_optimizer(ocfg, config)
        state = tx.init(p)
        for g in gs:
            u, state = tx.update(g, state, p)
            p = optax.apply_updates(p, u)
        return p

    def single(tree, a, f):  # attention group a and FFN group f as a one-group tree
        enc = tree["encoder"]
        return {**tree, "encoder": {
            "attention": jax.tree_util.tree_map(lambda x: x[a : a + 1], enc["attention"]),
            "ffn": jax.tree_util.tree_map(lambda x: x[f : f + 1], enc["ffn"]),
        }}  # fmt: skip

    ours = jax.jit(lambda p, gs: run(grouped, p, gs))(params, grads)
    alone = jax.jit(lambda p, gs: run(one, p, gs))
    for k in range(max(A, F)):
        a, f = k % A, k % F
        want = alone(single(params, a, f), [single(g, a, f) for g in grads])
        got = single(ours, a, f)
        for (path, x), y in zip(
            jax.tree_util.tree_flatten_with_path(got)[0],
            jax.tree_util.tree_leaves(want),
            strict=True,
        ):
            np.testing.assert_allclose(
                x, y, rtol=2e-6, atol=1e-7, err_msg=f"{path_str(path)}, groups ({a}, {f})"
            )
