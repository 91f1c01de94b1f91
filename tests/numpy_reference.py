"""An independent NumPy ALBERT forward pass written from the reference's equations (GA modeling.py),
used to check the Flax model: tanh GELU, post-LN order, additive -10000 mask, tied MLM decoder."""

import numpy as np


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


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
    """The parameters of group g of a sub-block (leaves stacked on axis 0 when groups > 1)."""
    if groups == 1:
        return tree
    return {k: pick(v, groups, g) if isinstance(v, dict) else v[g] for k, v in tree.items()}


def forward(params, cfg, ids, types, mask, positions):
    p = {k: v for k, v in params.items()}
    e = p["embeddings"]
    T = ids.shape[1]
    x = e["word_embeddings"][ids] + e["token_type_embeddings"][types] + e["position_embeddings"][:T]
    x = layer_norm(x, e["LayerNorm"], cfg.layer_norm_eps)
    enc = p["encoder"]
    if "projection" in enc:
        x = dense(x, enc["projection"])
    B, N, D = ids.shape[0], cfg.num_heads, cfg.head_dim
    add_mask = (1.0 - mask[:, None, None, :]) * -10000.0
    states = [x]
    for i in range(cfg.num_layers):
        a = pick(enc["attention"], cfg.attention_groups, i * cfg.attention_groups // cfg.num_layers)
        f = pick(enc["ffn"], cfg.ffn_groups, i * cfg.ffn_groups // cfg.num_layers)
        heads = lambda y: y.reshape(B, T, N, D).transpose(0, 2, 1, 3)
        q, k, v = (
            heads(dense(x, a["query"])),
            heads(dense(x, a["key"])),
            heads(dense(x, a["value"])),
        )
        probs = softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(D) + add_mask)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, N * D)
        x = layer_norm(dense(ctx, a["output"]) + x, a["LayerNorm"], cfg.layer_norm_eps)
        h = gelu_tanh(dense(x, f["intermediate"]))
        x = layer_norm(dense(h, f["output"]) + x, f["LayerNorm"], cfg.layer_norm_eps)
        states.append(x)
    pooled = np.tanh(dense(x[:, 0], p["pooler"]))
    m = p["mlm"]
    g = np.take_along_axis(x, positions[..., None], axis=1)
    g = layer_norm(gelu_tanh(dense(g, m["transform"])), m["LayerNorm"], cfg.layer_norm_eps)
    mlm_logits = g @ e["word_embeddings"].T + m["output_bias"]
    sop_logits = dense(pooled, p["sop"])
    return x, pooled, mlm_logits, sop_logits, states
