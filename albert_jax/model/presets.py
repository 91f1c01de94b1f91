"""Named model configurations: the released ALBERT sizes, albert_zh's small ones, and BERT.

`get(name, **overrides)`; a `layout=` override applies a named sharing layout (all, attention, ffn,
none, groups:G), e.g. `get('albert-base', embedding_size=768, layout='attention')`.
"""

from __future__ import annotations

from albert_jax.model.config import EXECUTION_KEYS, AlbertConfig


def _albert(hidden, layers, heads, dropout, **kw) -> AlbertConfig:
    return AlbertConfig(
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        intermediate_size=4 * hidden,
        hidden_dropout=dropout,
        attention_dropout=dropout,
        **kw,
    )


# The original TF code's "gelu" is the tanh approximation: gelu_new here (reference pitfall 1).
_PRESETS: dict[str, AlbertConfig] = {
    # albert_zh (brightmart) sizes: Chinese vocab, no dropout.
    "albert-tiny": _albert(312, 4, 12, 0.0, vocab_size=21128),
    "albert-small": _albert(384, 6, 12, 0.0, vocab_size=21128),
    # Google's releases; v1 trained with dropout 0.1 except xxlarge.
    "albert-base": _albert(768, 12, 12, 0.1),
    "albert-large": _albert(1024, 24, 16, 0.1),
    "albert-xlarge": _albert(2048, 24, 16, 0.1),
    "albert-xxlarge": _albert(4096, 12, 64, 0.0),
    # BERT as the not-shared layout with E = H (vocab 30000 as in the paper's comparison).
    "bert-base": _albert(768, 12, 12, 0.1, embedding_size=768),
    "bert-large": _albert(1024, 24, 16, 0.1, embedding_size=1024),
}
# Layouts are applied after overrides, so that e.g. num_layers can change.
_LAYOUTS = {"bert-base": "none", "bert-large": "none"}
for _size in ("base", "large", "xlarge", "xxlarge"):
    _PRESETS[f"albert-{_size}-v2"] = _PRESETS[f"albert-{_size}"].replace(
        hidden_dropout=0.0, attention_dropout=0.0
    )

NAMES = tuple(sorted(_PRESETS))


def get(name: str, layout: str | None = None, **overrides) -> AlbertConfig:
    if name not in _PRESETS:
        raise KeyError(f"unknown preset {name!r}; available: {', '.join(NAMES)}")
    explicit_groups = "attention_groups" in overrides or "ffn_groups" in overrides
    layout = layout or (None if explicit_groups else _LAYOUTS.get(name))
    config = _PRESETS[name].replace(**overrides)
    return config.with_layout(layout) if layout is not None else config


def from_run_config(config) -> AlbertConfig:
    """The AlbertConfig named by a run config's `model` section: a preset plus field overrides
    (what `configs/pretrain/common.py` writes and a pretraining workdir's config.json keeps).
    Its `layout` ('' = the preset's own) is absent from the config.json of a workdir written
    before the key existed: the preset's own too. The `Execution` keys (dtype, scan_layers, ...)
    that such a workdir's model section still holds are not the model's: dropped."""
    model = config.model
    layout = model["layout"] if "layout" in model else ""
    skip = {"preset", "layout", *EXECUTION_KEYS}
    overrides = {k: v for k, v in model.items() if k not in skip}
    return get(model.preset, layout=layout or None, **overrides)
