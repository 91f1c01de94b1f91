"""Tokenizer ids equal transformers 4.57's slow AlbertTokenizer / BertTokenizer (the reference ids
in tests/fixtures/reference/tokens.json, made by tests/fixtures/make_reference.py)."""

from __future__ import annotations

import json
import os

import pytest

from albert_jax.text import tokenization
from albert_jax.text.tokenization import SentencePieceTokenizer, find_tokenizer, load_tokenizer
from albert_jax.text.wordpiece import WordPieceTokenizer, basic_tokenize, wordpiece

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
with open(os.path.join(FIXTURES, "reference", "tokens.json"), encoding="utf-8") as f:
    REFERENCE = json.load(f)


def cases(kind):
    return [pytest.param(c, id=f"{kind}-{i}") for i, c in enumerate(REFERENCE[kind])]


@pytest.mark.parametrize("case", cases("sentencepiece"))
def test_sentencepiece_matches_albert_tokenizer(case):
    tok = load_tokenizer(os.path.join(FIXTURES, "tokenizer_sp"))
    assert isinstance(tok, SentencePieceTokenizer)
    assert tok.tokenize(case["text"]) == case["tokens"]
    assert tok.encode(case["text"]) == case["ids"]


@pytest.mark.parametrize("lower", [True, False])
def test_wordpiece_matches_bert_tokenizer(lower):
    tok = load_tokenizer(os.path.join(FIXTURES, "tokenizer_wp"), lower_case=lower)
    assert isinstance(tok, WordPieceTokenizer)
    for case in REFERENCE["wordpiece_uncased" if lower else "wordpiece_cased"]:
        assert tok.tokenize(case["text"]) == case["tokens"], case["text"]
        assert tok.encode(case["text"]) == case["ids"], case["text"]


def test_wordpiece_rules():
    vocab = {p: i for i, p in enumerate(["[UNK]", "un", "##aff", "##able", "a", "##b"])}
    assert wordpiece("unaffable", vocab) == ["un", "##aff", "##able"]  # longest match first
    assert wordpiece("unx", vocab) == ["[UNK]"]  # any unmatched rest -> the whole word is UNK
    assert wordpiece("a" + "b" * 100, vocab) == ["[UNK]"]  # > 100 characters
    assert basic_tokenize("Héllo,  WORLD中文!", lower_case=True) == [
        "hello", ",", "world", "中", "文", "!"
    ]  # fmt: skip
    assert basic_tokenize("Héllo\x00\u200b x", lower_case=False) == ["Héllo", "x"]
    assert basic_tokenize("[MASK] [mask]", True, frozenset({"[MASK]"})) == [
        "[MASK]", "[", "mask", "]"
    ]  # fmt: skip


def test_find_tokenizer_in_release_directories():
    hf_sp = find_tokenizer(os.path.join(FIXTURES, "hf_gelu_new"))
    tf_sp = find_tokenizer(os.path.join(FIXTURES, "tf_gelu_new"))  # Google's 30k-clean.model
    text = REFERENCE["sentencepiece"][0]["text"]
    assert hf_sp.encode(text) == tf_sp.encode(text) == REFERENCE["sentencepiece"][0]["ids"]
    wp = find_tokenizer(os.path.join(FIXTURES, "tf_relu"))  # vocab_chinese.txt
    assert isinstance(wp, WordPieceTokenizer) and wp.lower_case
    assert find_tokenizer(os.path.join(FIXTURES, "tf_sparse_groups")) is None


def test_save_and_load_round_trip(tmp_path):
    for name in ("tokenizer_sp", "tokenizer_wp"):
        tok = load_tokenizer(os.path.join(FIXTURES, name))
        tokenization.save_tokenizer(tok, tmp_path / name)
        again = load_tokenizer(tmp_path / name)
        text = "Héllo 我们爱北京, 1,000"
        assert type(again) is type(tok) and again.encode(text) == tok.encode(text)


with open(os.path.join(FIXTURES, "reference", "tokens_modes.json"), encoding="utf-8") as f:
    MODE_CASES = json.load(f)


@pytest.mark.parametrize("mode", tokenization.MODES)
def test_sentencepiece_modes_match_the_original_and_transformers(mode):
    """mode='reference' gives google-research/albert's ids (its tokenization.py under Python 3),
    mode='transformers' AlbertTokenizer's (tests/fixtures/make_original_tokens.py); the fixture
    model and texts tell the two apart (LaTeX quotes, digit-comma pieces inside numbers)."""
    cases = MODE_CASES["sentencepiece"]
    assert sum(c["reference"] != c["transformers"] for c in cases) >= 4
    for case in cases:
        tok = load_tokenizer(
            os.path.join(FIXTURES, "tokenizer_sp_numbers"), lower_case=case["lower_case"], mode=mode
        )
        assert tok.encode(case["text"]) == case[mode], case


def test_wordpiece_matches_the_original_full_tokenizer():
    """Our WordPiece gives the ids of google-research/albert's FullTokenizer (a vocab file) and of
    transformers' BertTokenizer, on English and Chinese text, cased and uncased."""
    for case in MODE_CASES["wordpiece"]:
        tok = load_tokenizer(os.path.join(FIXTURES, "tokenizer_wp"), lower_case=case["lower_case"])
        assert tok.encode(case["text"]) == case["reference"] == case["transformers"], case


with open(os.path.join(FIXTURES, "reference", "tokens_dup.json"), encoding="utf-8") as f:
    DUP_CASES = json.load(f)


def test_wordpiece_vocab_with_a_token_listed_twice():
    """A vocab.txt that lists a token twice (released BERT vocabularies do) loads as transformers'
    BertTokenizer loads it: the token's id is its LAST line (tokens_dup.json, made by
    make_reference.py --duplicate-vocab); ids stay line numbers, so the size is the line count."""
    path = os.path.join(FIXTURES, "tokenizer_wp_dup")
    tok = load_tokenizer(path)
    with open(os.path.join(path, "vocab.txt"), encoding="utf-8") as f:
        assert tok.vocab_size == len(f.read().splitlines()) == 102
    assert tok.pieces[5] == tok.pieces[63] == "world"
    assert tok.convert_tokens_to_ids(["world", "hello"]) == [63, 98]  # not 5 and 62
    for case in DUP_CASES:
        assert tok.tokenize(case["text"]) == case["tokens"]
        assert tok.encode(case["text"]) == case["ids"]
