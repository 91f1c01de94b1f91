"""Parameter counts of the presets against the ALBERT paper (Tables 1, 3, 4) within 3%."""

import pytest

from albert_jax import count_params
from albert_jax.model import presets

PAPER = [
    # (preset, overrides, paper figure in millions)
    ("albert-base", {}, 12),
    ("albert-large", {}, 18),
    ("albert-xlarge", {}, 60),
    ("albert-base", {"embedding_size": 768, "layout": "none"}, 108),
    ("albert-base", {"layout": "none"}, 89),
    ("albert-base", {"layout": "attention"}, 64),
    ("albert-base", {"embedding_size": 768, "layout": "attention"}, 83),
    ("albert-base", {"layout": "ffn"}, 38),
    ("albert-base", {"embedding_size": 768, "layout": "ffn"}, 57),
    ("albert-base", {"embedding_size": 768}, 31),
    ("bert-base", {}, 108),
    ("bert-large", {}, 334),
]


@pytest.mark.parametrize("name,overrides,paper", PAPER)
def test_within_three_percent_of_the_paper(name, overrides, paper):
    n = count_params(presets.get(name, **overrides)) / 1e6
    assert abs(n - paper) / paper < 0.03, f"{name} {overrides}: {n:.2f}M vs paper {paper}M"


def expected_backbone(V, E, H, L, I, P=512, T=2, attention_groups=1, ffn_groups=1):  # noqa: E741
    """Backbone parameters by hand: embeddings + projection + encoder + pooler."""
    embeddings = V * E + P * E + T * E + 2 * E
    projection = (E * H + H) if E != H else 0
    attention = 4 * (H * H + H) + 2 * H
    ffn = H * I + I + I * H + H + 2 * H
    pooler = H * H + H
    return embeddings + projection + attention_groups * attention + ffn_groups * ffn + pooler


@pytest.mark.parametrize("name", presets.NAMES)
def test_exact_arithmetic(name):
    c = presets.get(name)
    expect = expected_backbone(
        c.vocab_size,
        c.embedding_size,
        c.hidden_size,
        c.num_layers,
        c.intermediate_size,
        attention_groups=c.attention_groups,
        ffn_groups=c.ffn_groups,
    )
    assert count_params(c) == expect


def test_xxlarge_is_the_released_architecture():
    """The paper prints 233M/235M; the released xxlarge (H=4096, I=16384, 64 heads) has 222.6M."""
    c = presets.get("albert-xxlarge")
    assert (c.hidden_size, c.intermediate_size, c.num_heads, c.num_layers) == (4096, 16384, 64, 12)
    assert count_params(c) == 222_595_584


def test_v2_has_no_dropout_and_bert_is_not_shared():
    assert presets.get("albert-base").hidden_dropout == 0.1
    assert presets.get("albert-base-v2").hidden_dropout == 0.0
    assert presets.get("albert-base-v2").attention_dropout == 0.0
    bert = presets.get("bert-base")
    assert bert.layout == "none" and not bert.has_projection
    assert presets.get("bert-base", num_layers=4).layout == "none"
    with pytest.raises(KeyError, match="unknown preset 'albert-huge'"):
        presets.get("albert-huge")
