"""The model against the float64 NumPy reference (tests/numpy_reference.py), as the model and
accelerator-path tests check it: the layouts' groups, the reference's hyperparameters, params at
scales where every term shows, and the tolerances of the comparison."""

import jax
import jax.numpy as jnp
import numpy as np
from numpy_reference import forward

from albert_jax.model.albert import init_params

# Layout -> (attention_groups, ffn_groups) for L = 6, written out rather than read from the config.
LAYOUT_GROUPS = {
    "all": (1, 1),
    "attention": (1, 6),
    "ffn": (6, 1),
    "none": (6, 6),
    "groups:2": (2, 2),
    "groups:3": (3, 3),
    "groups:4": (4, 4),
}
# Reference hyperparameters from GA modeling.py, not from AlbertConfig's defaults.
REFERENCE_HP = dict(
    num_layers=6, num_heads=4, layer_norm_eps=1e-12, hidden_act="gelu_new", mask_value=-10000.0
)
# Max relative error max|f32 - f64| / max|f64| over the 7 layouts, measured: sequence 6.6e-7,
# pooled 1.3e-6, MLM 7.7e-7, SOP 5.5e-6 (groups:2, whose SOP logits are small: |max| 0.17),
# hidden states 9.6e-7. Tolerances are ~3-4x that. Each planted bug (erf GELU in the MLM head,
# LayerNorm eps 1e-6, one pre-LN sub-block) moves some output by >= 1.3e-4.
TOLERANCES = dict(sequence=2e-6, pooled=4e-6, mlm=3e-6, sop=2e-5, states=3e-6)


def reference_params(model, seed=0):
    """Params at scales where GELU form, LayerNorm eps and LN order all show: kernels
    N(0, 1.5^2 / fan_in) (pre-activations ~1-3, attention rows from flat to peaked), biases and
    LayerNorm offsets N(0, 0.3^2), LN scales 1 + N(0, 0.3^2), and embedding tables N(0, 0.02^2)
    so the embedding LayerNorm's input variance (~1e-3) is small enough for its eps to matter."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(init_params(model, jax.random.key(0)))
    rng = np.random.default_rng(seed)
    out = []
    for path, leaf in flat:
        name, z = jax.tree_util.keystr(path), rng.standard_normal(leaf.shape)
        if "scale" in name:
            v = 1.0 + 0.3 * z
        elif "embeddings" in name or "output_bias" in name:  # tables, and their MLM bias
            v = (0.3 if "LayerNorm" in name else 0.02) * z
        elif "bias" in name:
            v = 0.3 * z
        else:
            v = 1.5 / np.sqrt(leaf.shape[-2]) * z
        out.append(jnp.asarray(v, jnp.float32))
    return jax.tree_util.tree_unflatten(treedef, out)


def rel_err(ours, ref):
    return float(np.max(np.abs(np.asarray(ours, np.float64) - ref)) / np.max(np.abs(ref)))


def numpy_forward(cfg, layout, params, batch):
    """The float64 NumPy reference (numpy_reference.forward) of `layout` on these params and batch:
    (sequence, pooled, mlm, sop, hidden states)."""
    hp = REFERENCE_HP
    assert (cfg.num_layers, cfg.num_heads) == (hp["num_layers"], hp["num_heads"])
    a_groups, f_groups = LAYOUT_GROUPS[layout]
    hp = dict(hp, attention_groups=a_groups, ffn_groups=f_groups)
    p64 = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), params)
    b = {k: np.asarray(v) for k, v in batch.items()}
    mask = b["attention_mask"].astype(np.float64)
    return forward(p64, hp, b["input_ids"], b["token_type_ids"], mask, b["masked_positions"])


def check_against_numpy(cfg, layout, out, reference):
    """Each of the model's outputs within TOLERANCES of the NumPy reference's."""
    seq, pooled, mlm, sop, states = reference
    assert len(out.hidden_states) == cfg.num_layers + 1
    errors = dict(
        sequence=rel_err(out.sequence_output, seq),
        pooled=rel_err(out.pooled_output, pooled),
        mlm=rel_err(out.mlm_logits, mlm),
        sop=rel_err(out.sop_logits, sop),
        states=max(rel_err(o, r) for o, r in zip(out.hidden_states, states, strict=True)),
    )
    print(layout, {k: f"{v:.2e}" for k, v in errors.items()})
    for name, err in errors.items():
        assert err <= TOLERANCES[name], (name, err)
