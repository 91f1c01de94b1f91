"""`AlbertConfig`: the model's hyperparameters and its cross-layer sharing layout; `Execution`: how
it runs (dtypes, scan or loop, remat, attention and matmul-gradient variants), kept out of
AlbertConfig so that a checkpoint's or exported model's config.json says what the model is only.

A sharing layout is two integers, `attention_groups` and `ffn_groups`, each G in 1..L: layer i uses
group `(i * G) // L` of that sub-block (the transformers `num_hidden_groups` rule). G=1 shares the
sub-block across all layers (ALBERT), G=L shares nothing (BERT). The attention sub-block owns the
post-attention LayerNorm, the FFN sub-block owns the final LayerNorm of the layer.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from albert_jax.sections import Section

ACTIVATIONS = ("gelu_new", "gelu", "relu")
REMAT_POLICIES = ("none", "full", "save_dots")
ATTENTION_IMPLS = ("auto", "fused", "explicit")
MATMUL_GRADS = ("auto", "custom", "autodiff")
DTYPES = ("float32", "bfloat16", "float16")

# Named layouts: name -> function of L giving (attention_groups, ffn_groups).
LAYOUTS = {
    "all": lambda L: (1, 1),
    "attention": lambda L: (1, L),  # attention shared, FFN not (paper's "shared-attention")
    "ffn": lambda L: (L, 1),  # FFN shared, attention not (paper's "shared-FFN")
    "none": lambda L: (L, L),  # not shared: BERT
}


def layout_groups(layout: str, num_layers: int) -> tuple[int, int]:
    """(attention_groups, ffn_groups) for a named layout: all, attention, ffn, none or groups:G."""
    if layout in LAYOUTS:
        return LAYOUTS[layout](num_layers)
    if layout.startswith("groups:"):
        try:
            g = int(layout.split(":", 1)[1])
        except ValueError:
            g = None
        if g is not None:
            return g, g
    raise ValueError(
        f"unknown sharing layout {layout!r}: expected one of {sorted(LAYOUTS)} or 'groups:G'"
    )


@dataclasses.dataclass(frozen=True)
class AlbertConfig:
    vocab_size: int = 30000
    embedding_size: int = 128  # E: width of the embedding tables
    hidden_size: int = 768  # H
    num_layers: int = 12  # L: number of layer applications
    num_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu_new"  # gelu_new = tanh approximation (the original ALBERT's "gelu")
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02  # stddev of the truncated normal used for every kernel/table
    attention_groups: int = 1
    ffn_groups: int = 1
    # The E->H projection exists when E != H (original ALBERT). transformers always creates it, so
    # converted models set this to keep it when E == H.
    embedding_projection_always: bool = False

    def __post_init__(self):
        def check(ok: bool, msg: str):
            if not ok:
                raise ValueError(f"AlbertConfig: {msg}")

        for name in (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            check(
                isinstance(value, int) and value > 0,
                f"{name} must be a positive int, got {value!r}",
            )
        check(
            self.hidden_size % self.num_heads == 0,
            f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}",
        )
        check(
            self.hidden_act in ACTIVATIONS,
            f"unknown hidden_act {self.hidden_act!r}; expected one of {ACTIVATIONS}",
        )
        for name in ("attention_groups", "ffn_groups"):
            g = getattr(self, name)
            check(
                isinstance(g, int) and 1 <= g <= self.num_layers,
                f"{name} must be an int in 1..num_layers={self.num_layers}, got {g!r}",
            )
        for name in ("hidden_dropout", "attention_dropout"):
            p = getattr(self, name)
            check(0.0 <= p < 1.0, f"{name} must be in [0, 1), got {p!r}")
        check(self.layer_norm_eps > 0, "layer_norm_eps must be > 0")
        check(self.initializer_range > 0, "initializer_range must be > 0")

    # --- sharing layout -------------------------------------------------------------------------
    def with_layout(self, layout: str) -> AlbertConfig:
        """This config with a named sharing layout: all, attention, ffn, none or groups:G."""
        a, f = layout_groups(layout, self.num_layers)
        return self.replace(attention_groups=a, ffn_groups=f)

    @property
    def layout(self) -> str:
        """The layout's name, or 'attention_groups=A,ffn_groups=F' if it has none."""
        L, pair = self.num_layers, (self.attention_groups, self.ffn_groups)
        for name, fn in LAYOUTS.items():
            if fn(L) == pair:
                return name
        if pair[0] == pair[1]:
            return f"groups:{pair[0]}"
        return f"attention_groups={pair[0]},ffn_groups={pair[1]}"

    @property
    def has_projection(self) -> bool:
        return self.embedding_size != self.hidden_size or self.embedding_projection_always

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    # --- (de)serialization ----------------------------------------------------------------------
    def replace(self, **changes: Any) -> AlbertConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AlbertConfig:
        """From `to_dict`'s keys; the `Execution` keys that a config.json written before they
        left AlbertConfig still has (checkpoints, exported models, workdirs) are dropped."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known - EXECUTION_KEYS)
        if unknown:
            raise ValueError(f"AlbertConfig: unknown keys {unknown}")
        return cls(**{k: v for k, v in d.items() if k in known})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AlbertConfig:
        return cls.from_dict(json.loads(text))


@dataclasses.dataclass(frozen=True)
class Execution(Section):
    """How the model runs: the same math whatever these say (the numbers up to the dtypes'
    rounding and XLA's fusion). A run config's `execution` section (`Execution.section()`); the
    Flax modules take it beside their AlbertConfig."""

    dtype: str = "float32"  # compute dtype; matmuls accumulate in float32 regardless
    param_dtype: str = "float32"
    scan_layers: bool = True  # False: a Python loop over layers (same numbers; faster on CPU)
    remat: str = "none"  # none | full | save_dots (keep matmul outputs, recompute the rest)
    # How attention and the matmuls' gradients run (same math; albert.resolve_attention and
    # resolve_matmul_grad). auto: fused attention and autodiff off CPU, explicit and the
    # hand-written gradient on it; fused with attention dropout in training is an error.
    attention_impl: str = "auto"  # auto | fused | explicit
    matmul_grad: str = "auto"  # auto | custom | autodiff (forward-mode autodiff needs it)

    def __post_init__(self):
        for name, allowed in (
            ("dtype", DTYPES),
            ("param_dtype", DTYPES),
            ("remat", REMAT_POLICIES),
            ("attention_impl", ATTENTION_IMPLS),
            ("matmul_grad", MATMUL_GRADS),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"Execution: {name} must be one of {allowed}, got {value!r}")

    def replace(self, **changes: Any) -> Execution:
        return dataclasses.replace(self, **changes)


# What a config.json written before `Execution` left AlbertConfig may still carry.
EXECUTION_KEYS = frozenset(f.name for f in dataclasses.fields(Execution))
