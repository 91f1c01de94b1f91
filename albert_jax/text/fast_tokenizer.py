"""`tokenizer.json` for a SentencePiece tokenizer: transformers' fast tokenizer, built here.

The transformers export (`albert_jax.checkpoints.hf.write_hf`) writes it beside ``spiece.model``
so that ``AutoTokenizer.from_pretrained(EXPORT)`` loads the fast tokenizer as it is, with no
conversion of the SentencePiece model (transformers 5 has no slow ALBERT tokenizer; 4.57.6 takes
the file too). It is built with the `tokenizers` library alone, no transformers:

* model: Unigram over the SentencePiece pieces and their scores (read from the model's proto),
  ``<unk>`` as the unknown piece. A character model (``model_type=char``, what the CPU configs
  train) is the same: with single-character pieces only, the Unigram segmentation is one piece
  per character, as SentencePiece's character model splits. BPE and word models are refused;
* normalizer: our ``preprocess_text`` step by step (whitespace collapsed and stripped, the
  LaTeX-style quotes turned into ``"`` in ``"transformers"`` mode, NFKD and combining marks
  dropped unless ``keep_accents`` (then NFC: the `tokenizers` copy of SentencePiece's map below
  does not recompose Hangul jamo, which SentencePiece's does), lower-casing when the tokenizer
  lower-cases, then
  SentencePiece's own normalization (its precompiled character map) and runs of spaces collapsed;
* pre-tokenizer / decoder: Metaspace (``▁`` word marker, prefixed as SentencePiece's dummy prefix);
* post-processor: ``[CLS] A [SEP]`` / ``[CLS] A [SEP] B [SEP]``, token types 0 for A and 1 for B;
* special tokens ``<pad> <unk> [CLS] [SEP] [MASK]`` at their ids, never split or normalized.

One rule of ours cannot be a Unigram model: a piece ending in ``<digit>,`` is re-encoded without
the comma (`encode_pieces`). Those pieces' scores are lowered by 100 instead, so the segmentation
avoids them and the comma becomes its own piece, as transformers' own conversion of ALBERT's
tokenizer does; on such text the ids can still differ where re-encoding the digits alone would
segment them otherwise (tests/test_fast_tokenizer.py measures the agreement).
"""

from __future__ import annotations

import os

from albert_jax.text.tokenization import (
    CLS,
    MASK,
    PAD,
    SEP,
    SPIECE_UNDERLINE,
    UNK,
    SentencePieceTokenizer,
    TokenizerError,
)

FAST_FILE = "tokenizer.json"  # transformers' name; our own checkpoints use it for settings
DIGIT_COMMA_PENALTY = 100.0
_UNIGRAM, _CHAR = 1, 4  # sentencepiece ModelProto.TrainerSpec.ModelType
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED = 1, 2, 3, 4  # ModelProto.SentencePiece.Type


def _ends_in_digit_comma(piece: str) -> bool:
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def _proto(tokenizer: SentencePieceTokenizer):
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(tokenizer.to_bytes())
    return proto


def build_fast_tokenizer(tokenizer: SentencePieceTokenizer):
    """A `tokenizers.Tokenizer` that encodes as `tokenizer` does (see the module docstring)."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    proto = _proto(tokenizer)
    if proto.trainer_spec.model_type not in (_UNIGRAM, _CHAR):
        raise TokenizerError(
            "tokenizer.json is written for unigram (ALBERT's) and character SentencePiece models "
            f"only; this model's type is {proto.trainer_spec.model_type} (2: BPE, 3: word)"
        )
    vocab = [
        (p.piece, p.score - (DIGIT_COMMA_PENALTY if _ends_in_digit_comma(p.piece) else 0.0))
        for p in proto.pieces
    ]
    unk_id = tokenizer.sp.unk_id()
    fast = Tokenizer(
        models.Unigram(vocab, unk_id=unk_id, byte_fallback=proto.trainer_spec.byte_fallback)
    )
    steps = [normalizers.Strip(), normalizers.Replace(Regex(r"\s+"), " ")]
    if tokenizer.mode == "transformers":
        steps += [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if not tokenizer.keep_accents:
        steps += [normalizers.NFKD(), normalizers.StripAccents(), normalizers.NFC()]
    if tokenizer.lower_case:
        steps.append(normalizers.Lowercase())
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if charsmap:
        steps.append(normalizers.Precompiled(charsmap))
    steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    fast.normalizer = normalizers.Sequence(steps)
    scheme = "always" if proto.normalizer_spec.add_dummy_prefix else "never"
    fast.pre_tokenizer = pre_tokenizers.Metaspace(SPIECE_UNDERLINE, prepend_scheme=scheme)
    fast.decoder = decoders.Metaspace(SPIECE_UNDERLINE, prepend_scheme=scheme)
    ids = {p.piece: i for i, p in enumerate(proto.pieces)}
    if CLS in ids and SEP in ids:
        fast.post_processor = processors.TemplateProcessing(
            single=f"{CLS}:0 $A:0 {SEP}:0",
            pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
            special_tokens=[(CLS, ids[CLS]), (SEP, ids[SEP])],
        )
    special = [p.piece for p in proto.pieces if p.type in (_UNKNOWN, _CONTROL)]
    special += [s for s in (PAD, UNK, CLS, SEP, MASK) if s in ids and s not in special]
    # [MASK] takes the space before it, as transformers' ALBERT tokenizer declares it.
    fast.add_special_tokens(
        [AddedToken(s, special=True, normalized=False, lstrip=s == MASK) for s in special]
    )
    return fast


def write_fast_tokenizer(tokenizer: SentencePieceTokenizer, out_dir: str | os.PathLike) -> str:
    """Writes OUT_DIR/tokenizer.json (`build_fast_tokenizer`); returns its path."""
    path = os.path.join(os.fspath(out_dir), FAST_FILE)
    build_fast_tokenizer(tokenizer).save(path, pretty=True)
    return path
