"""An independent float64 NumPy ALBERT forward pass written from the reference's equations (GA
modeling.py), used to check the Flax model: tanh GELU, post-LN order, additive -10000 mask, tied MLM
decoder. It reads nothing from albert_jax: every hyperparameter comes in `hp`, a plain dict."""

import numpy as np


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {"gelu_new": gelu_tanh}  # GA's "gelu" is this tanh form


def layer_norm(x, p, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * p["scale"] + p["bias"]


def dense(x, p):
    return x @ p["kernel"] + p["bias"]


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def pick(tree, groups, g):
    """The parameters of group g of a sub-block (its leaves stacked on axis 0, of length groups)."""
    return {k: pick(v, groups, g) if isinstance(v, dict) else v[g] for k, v in tree.items()}


def forward(params, hp, ids, types, mask, positions):
    """hp: num_layers, num_heads, attention_groups, ffn_groups, layer_norm_eps, hidden_act,
    mask_value. Returns (sequence, pooled, mlm_logits, sop_logits, hidden_states)."""
    eps, act, L = hp["layer_norm_eps"], ACTIVATIONS[hp["hidden_act"]], hp["num_layers"]
    e = params["embeddings"]
    T = ids.shape[1]
    x = e["word_embeddings"][ids] + e["token_type_embeddings"][types] + e["position_embeddings"][:T]
    x = layer_norm(x, e["LayerNorm"], eps)
    enc = params["encoder"]
    if "projection" in enc:
        x = dense(x, enc["projection"])
    B, N = ids.shape[0], hp["num_heads"]
    D = x.shape[-1] // N
    add_mask = (1.0 - mask[:, None, None, :]) * hp["mask_value"]
    states = [x]
    for i in range(L):
        a = pick(enc["attention"], hp["attention_groups"], i * hp["attention_groups"] // L)
        f = pick(enc["ffn"], hp["ffn_groups"], i * hp["ffn_groups"] // L)
        heads = lambda y: y.reshape(B, T, N, D).transpose(0, 2, 1, 3)
        q, k, v = (heads(dense(x, a[n])) for n in ("query", "key", "value"))
        probs = softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(D) + add_mask)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, N * D)
        x = layer_norm(dense(ctx, a["output"]) + x, a["LayerNorm"], eps)
        h = act(dense(x, f["intermediate"]))
        x = layer_norm(dense(h, f["output"]) + x, f["LayerNorm"], eps)
        states.append(x)
    pooled = np.tanh(dense(x[:, 0], params["pooler"]))
    m = params["mlm"]
    g = np.take_along_axis(x, positions[..., None], axis=1)
    g = layer_norm(act(dense(g, m["transform"])), m["LayerNorm"], eps)
    mlm_logits = g @ e["word_embeddings"].T + m["output_bias"]
    sop_logits = dense(pooled, params["sop"])
    return x, pooled, mlm_logits, sop_logits, states
