"""tokenizer.json (transformers' fast tokenizer, `albert_jax.text.fast_tokenizer`) read back by the
`tokenizers` library alone gives our tokenizer's ids; the transformers export writes it and our
readers still take a transformers directory's settings from tokenizer_config.json. transformers
4.57.6 and 5.x loading it: make_reference.py --check-export (the slow reference check)."""

from __future__ import annotations

import json
import os

import pytest
from support.convert import fixture
from tokenizers import Tokenizer

from albert_jax.convert import convert
from albert_jax.text.fast_tokenizer import build_fast_tokenizer
from albert_jax.text.tokenization import (
    SentencePieceTokenizer,
    TokenizerError,
    encode_pieces,
    read_tokenizer,
    train_sentencepiece,
)

with open(fixture("reference/tokens.json"), encoding="utf-8") as f:
    REFERENCE_TEXTS = [c["text"] for c in json.load(f)["sentencepiece"]]
with open(fixture("reference/tokens_modes.json"), encoding="utf-8") as f:
    MODE_TEXTS = [c["text"] for c in json.load(f)["sentencepiece"]]
TEXTS = [
    *REFERENCE_TEXTS,
    *MODE_TEXTS,
    "Café déjà vu: naïve Ångström, «quoted» ``latex'' and 'single' quotes.",
    "東京は日本の首都です。北京欢迎你！ 한국어 텍스트",
    "Mixed 中文 and English, 3.14 and 42,  tabs\tand\nnewlines  ",
    "  leading and trailing spaces   ",
    "",
    "ÉCOLE Über STRASSE (sentence-order) – 5 € / 3 £",
    "1,2,3, 10,000, 2,000,5,250, 1,000,000 dollars",
]


def reloaded(tok: SentencePieceTokenizer, tmp_path) -> Tokenizer:
    """The tokenizer.json written for `tok`, as the `tokenizers` library reads the file."""
    path = tmp_path / "tokenizer.json"
    build_fast_tokenizer(tok).save(str(path))
    return Tokenizer.from_file(str(path))


def resplit(tok: SentencePieceTokenizer, text: str) -> bool:
    """Whether our digit-comma rule changes SentencePiece's pieces for this text."""
    return encode_pieces(tok.sp, tok.preprocess(text), tok.mode) != tok.sp.encode(
        tok.preprocess(text), out_type=str
    )


@pytest.mark.parametrize("mode", ["transformers", "reference"])
@pytest.mark.parametrize("keep_accents", [False, True])
def test_fast_tokenizer_gives_our_ids(tmp_path, mode, keep_accents):
    """Every text (English and CJK, accents, quotes, digits, whitespace), lower-cased as ALBERT's
    released models are; and the [CLS] A [SEP] B [SEP] pair with its token types."""
    tok = SentencePieceTokenizer.from_dir(
        fixture("tokenizer_sp"), mode=mode, keep_accents=keep_accents
    )
    fast = reloaded(tok, tmp_path)
    for text in TEXTS:
        assert fast.encode(text, add_special_tokens=False).ids == tok.encode(text), text
    a, b = TEXTS[0], TEXTS[-4]
    pair = fast.encode(a, b)
    ids_a, ids_b = tok.encode(a), tok.encode(b)
    assert pair.ids == [2, *ids_a, 3, *ids_b, 3]
    assert pair.type_ids == [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1)
    assert fast.encode("[CLS] x [MASK] [SEP]", add_special_tokens=False).ids[0] == 2


def test_fast_tokenizer_cased(tmp_path):
    """Not lower-cased: the same ids on every text but one whose digits SentencePiece can split
    two ways with one score ('00'+'0' or '0'+'00'), which the two libraries break differently."""
    tok = SentencePieceTokenizer.from_dir(fixture("tokenizer_sp"), lower_case=False)
    fast = reloaded(tok, tmp_path)
    differ = [t for t in TEXTS if fast.encode(t, add_special_tokens=False).ids != tok.encode(t)]
    assert differ == ["Héllo Wörld! It costs 1,000 dollars, not 2,500."], differ


def test_fast_tokenizer_digit_comma_pieces(tmp_path):
    """A vocabulary with pieces such as '▁22,' and '5,000,': where our rule re-encodes such a
    piece (`encode_pieces`), the fast tokenizer avoids the piece (score - 100, as transformers'
    own conversion does) and splits the comma off, which can segment the digits otherwise; every
    other text gets the same ids."""
    tok = SentencePieceTokenizer.from_dir(fixture("tokenizer_sp_numbers"))
    fast = reloaded(tok, tmp_path)
    fired = [t for t in TEXTS if resplit(tok, t)]
    assert len(fired) >= 3
    for text in TEXTS:
        got = fast.encode(text, add_special_tokens=False)
        assert not any(p[-1:] == "," and p[-2:-1].isdigit() for p in got.tokens), text
        if text not in fired:
            assert got.ids == tok.encode(text), text


def test_fast_tokenizer_character_model(tmp_path):
    """A character SentencePiece model (the CPU configs' `model_type=char`) gets one Unigram
    piece per character: our ids on every text, characters outside the vocabulary included; a
    BPE model is refused with its type named."""
    corpus = [t.lower() for t in TEXTS if t.strip()] * 20 + ["北京欢迎你 东京 日本"] * 20
    kwargs = dict(vocab_size=200, hard_vocab_limit=False, character_coverage=1.0)
    tok = train_sentencepiece(corpus, tmp_path / "char", model_type="char", **kwargs)
    fast = reloaded(tok, tmp_path)
    texts = [*TEXTS, "𠀀𠀁 unknown 㐀㐁 chars 北京 ∮ ﬁ", "ɐɐ zz QQ"]
    for text in texts:
        assert fast.encode(text, add_special_tokens=False).ids == tok.encode(text), text
    assert tok.sp.unk_id() in tok.encode(texts[-2])  # unknown characters are in the texts
    bpe = train_sentencepiece(corpus, tmp_path / "bpe", model_type="bpe", **kwargs)
    with pytest.raises(TokenizerError, match="type is 2"):
        build_fast_tokenizer(bpe)


def test_export_writes_fast_tokenizer(tmp_path):
    """`convert --to hf` writes tokenizer.json beside spiece.model; reading the export back takes
    the casing from tokenizer_config.json, not from that file."""
    out = tmp_path / "hf"
    convert(fixture("hf_gelu_new"), str(out), to="hf")
    assert {"spiece.model", "tokenizer.json", "tokenizer_config.json"} <= set(os.listdir(out))
    fast = Tokenizer.from_file(str(out / "tokenizer.json"))
    ours = read_tokenizer(str(out))
    assert isinstance(ours, SentencePieceTokenizer) and ours.lower_case
    for text in TEXTS:
        assert fast.encode(text, add_special_tokens=False).ids == ours.encode(text), text
    config = json.loads((out / "tokenizer_config.json").read_text())
    config["do_lower_case"] = False
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    assert not read_tokenizer(str(out)).lower_case
