"""SentencePiece wrapper: reference preprocessing, digit-comma re-split, start pieces, id checks."""

from __future__ import annotations

import pytest
import sentencepiece as spm

from albert_jax.text import tokenization as tk


def test_preprocess_text():
    assert tk.preprocess_text("  a \t b\n\nc  ") == "a b c"
    assert tk.preprocess_text("``hi''") == '"hi"'
    assert tk.preprocess_text("Café Über") == "Cafe Uber"
    assert tk.preprocess_text("Café", lower=True) == "cafe"
    assert tk.preprocess_text("Café", keep_accents=True) == "Café"
    # NFKD maps full-width digits/punctuation (People's Daily) to ASCII.
    assert tk.preprocess_text("１９９８年，") == "1998年,"


class _StubSP:
    """Stands in for SentencePiece: fixed pieces per input text."""

    def __init__(self, table):
        self.table = table

    def encode(self, text, out_type=str):
        assert out_type is str
        return list(self.table[text])


def test_encode_pieces_digit_comma_resplit():
    u = tk.SPIECE_UNDERLINE
    sp = _StubSP(
        {
            "x 12,000": [f"{u}x", f"{u}12,", "000"],
            "12": [f"{u}12"],
            "a7,b": [f"{u}a", "7,", "b"],
            "7": [f"{u}", "7"],
            "ab,": [f"{u}ab,"],
        }
    )
    # A piece ending in <digit>, is re-encoded without the comma; the comma is its own piece.
    assert tk.encode_pieces(sp, "x 12,000") == [f"{u}x", f"{u}12", ",", "000"]
    # Without a leading marker on the original piece, the re-encoding's marker is dropped.
    assert tk.encode_pieces(sp, "a7,b") == [f"{u}a", "7", ",", "b"]
    # Only digit-comma endings are re-split.
    assert tk.encode_pieces(sp, "ab,") == [f"{u}ab,"]


@pytest.mark.parametrize(
    "piece,start",
    [
        ("\u2581the", True),
        ("ing", False),
        ("<unk>", True),
        (",", True),
        ("中国", True),
        ("a1", True),
        ("ab,", False),
        ("'s", True),  # the apostrophe is not in the reference's punctuation list
        ("x-y", False),
    ],
)
def test_is_start_piece(piece, start):
    assert tk.is_start_piece(piece) is start


def test_trained_tokenizer_follows_conventions(pd_tokenizer):
    tok = pd_tokenizer
    assert tok.special_ids() == tk.SPECIAL_IDS
    assert tok.vocab_size == 4000
    text = "１２月３１日，中共中央总书记发表新年讲话。"
    ids = tok.encode(text)
    assert ids == tok.convert_tokens_to_ids(tok.tokenize(text))
    assert tk.UNK_ID not in ids
    assert tok.decode(ids) == tk.preprocess_text(text, lower=True)
    # Every Chinese piece is its own whole word under the reference rule.
    _, starts = tok.encode_with_word_starts(text)
    assert all(starts)
    # The serialized model reloads to the same tokenizer (what a checkpoint carries).
    again = tk.SentencePieceTokenizer(tok.to_bytes())
    assert again.encode(text) == ids


def _train_plain_spm(tmp_path, **extra) -> str:
    text = tmp_path / "t.txt"
    text.write_text("\n".join(f"the quick brown fox {i} jumps over a lazy dog" for i in range(200)))
    prefix = str(tmp_path / "plain")
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=prefix, vocab_size=40, minloglevel=2, **extra
    )
    return prefix + ".model"


def test_wrong_special_ids_are_rejected(tmp_path):
    model = _train_plain_spm(tmp_path)  # sentencepiece defaults: unk=0, bos=1, eos=2
    with pytest.raises(tk.TokenizerError, match="ALBERT's id conventions") as e:
        tk.SentencePieceTokenizer.from_dir(model)
    assert "[CLS]" in str(e.value) and "pretrain.tokenizer" in str(e.value)


def test_vocab_size_mismatch_message(pd_tokenizer):
    with pytest.raises(tk.TokenizerError, match="4000 pieces but the model config says"):
        pd_tokenizer.check_vocab_size(30000)
    pd_tokenizer.check_vocab_size(4000)


def test_missing_model_message(tmp_path):
    with pytest.raises(tk.TokenizerError, match="no SentencePiece model"):
        tk.SentencePieceTokenizer.from_dir(tmp_path)
