"""SentencePiece tokenization with ALBERT's preprocessing and id conventions.

Two modes (``mode``, kept in the tokenizer's ``tokenizer.json``):

* ``"transformers"`` (the default): transformers' ``AlbertTokenizer``, the tokenizer every released
  ALBERT checkpoint is used with, so a model pretrained here reads text as it will be read when it
  is fine-tuned or served through transformers.
* ``"reference"``: google-research/albert's ``tokenization.py`` as it runs under Python 3 (what
  its ``create_pretraining_data.py`` produced), for reproducing the original's data exactly.

They differ in two places, both in ``preprocess_text`` / ``encode_pieces``:

* ``preprocess_text``: collapse whitespace, NFKD and drop combining marks (unless
  ``keep_accents``), optional lower-casing; transformers also turns LaTeX-style quotes (two
  backticks, two apostrophes) into ``"``, the original does not. Lower-casing happens here, never
  inside SentencePiece (reference pitfall: ``FullTokenizer`` ignores ``do_lower_case`` with an
  spm model, so the text must be lower-cased before encoding).
* ``encode_pieces``: raw SentencePiece pieces, except that a piece ending in ``<digit>,`` is
  re-encoded without the comma and the comma is appended as its own piece (this is why ALBERT
  ids differ from raw SentencePiece ids on text such as ``1,000``). Re-encoding adds a word-start
  marker; transformers drops it when the original piece had none (``000,`` inside ``1,000,``).
  The original means to, but under Python 3 compares a ``str`` with ``bytes`` and keeps it.
* ``is_start_piece``: the whole-word rule used for masking (``_is_start_piece_sp``).

Id conventions (ALBERT's ``spm_train`` flags): pad=0, unk=1, ``[CLS]``=2, ``[SEP]``=3,
``[MASK]``=4, no BOS/EOS. ``SentencePieceTokenizer`` refuses a model that disagrees.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Sequence

import sentencepiece as spm
from etils import epath

from albert_jax import paths
from albert_jax.errors import InputError
from albert_jax.text import wordpiece
from albert_jax.text.wordpiece import WordPieceTokenizer

SPIECE_UNDERLINE = "\u2581"
PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
# The ids ALBERT's data and model code assume.
SPECIAL_IDS = {PAD: 0, UNK: 1, CLS: 2, SEP: 3, MASK: 4}
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = 0, 1, 2, 3, 4

MODEL_FILE = "spiece.model"
VOCAB_FILE = "spiece.vocab"
META_FILE = "tokenizer.json"

# `_is_start_piece_sp`'s punctuation list. The reference also adds "€" and "£" as *bytes*,
# which never compare equal to a str character under Python 3, so they are left out here to
# keep the Python 3 behaviour of the reference.
_START_PUNCT = frozenset('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')
_LATIN_OR_PUNCT = frozenset("abcdefghijklmnopqrstuvwxyz") | _START_PUNCT


class TokenizerError(InputError):
    """A tokenizer that cannot be used with ALBERT's conventions or the model config."""


MODES = ("transformers", "reference")


def preprocess_text(
    text: str,
    *,
    lower: bool = False,
    remove_space: bool = True,
    keep_accents: bool = False,
    mode: str = "transformers",
) -> str:
    """ALBERT's text normalisation applied before SentencePiece (see the module docstring)."""
    out = " ".join(text.strip().split()) if remove_space else text
    if mode == "transformers":
        out = out.replace("``", '"').replace("''", '"')
    if not keep_accents:
        out = unicodedata.normalize("NFKD", out)
        out = "".join(c for c in out if not unicodedata.combining(c))
    if lower:
        out = out.lower()
    return out


def encode_pieces(
    sp: spm.SentencePieceProcessor, text: str, mode: str = "transformers"
) -> list[str]:
    """SentencePiece pieces with the digit-comma re-split (see the module docstring)."""
    result: list[str] = []
    for piece in sp.encode(text, out_type=str):
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            sub = sp.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
            # Re-encoding adds a word-start marker; keep it only if the original piece had one.
            strip = mode == "transformers" and piece[0] != SPIECE_UNDERLINE
            if strip and sub and sub[0].startswith(SPIECE_UNDERLINE):
                sub = sub[1:] if len(sub[0]) == 1 else [sub[0][1:], *sub[1:]]
            result.extend(sub)
            result.append(",")
        else:
            result.append(piece)
    return result


def is_start_piece(piece: str) -> bool:
    """True if ``piece`` starts a whole word (the reference ``_is_start_piece_sp`` rule).

    A piece starts a word if it begins with the word marker or ``<``, is a listed punctuation
    character, or contains any character outside a-z and that punctuation (so digits and
    non-Latin text, e.g. every Chinese piece, are always their own word).
    """
    if piece.startswith(SPIECE_UNDERLINE) or piece.startswith("<") or piece in _START_PUNCT:
        return True
    return not all(c.lower() in _LATIN_OR_PUNCT for c in piece)


@dataclasses.dataclass(frozen=True)
class TokenizerMeta:
    """Settings stored next to the model so encoding is reproduced exactly."""

    lower_case: bool = True
    keep_accents: bool = False
    vocab_size: int = 0
    character_coverage: float = 1.0
    model_type: str = "unigram"
    mode: str = "transformers"


class SentencePieceTokenizer:
    """ALBERT SentencePiece tokenizer: preprocessing + pieces + ids, with checked special ids."""

    def __init__(
        self,
        model_proto: bytes,
        *,
        lower_case: bool = True,
        keep_accents: bool = False,
        mode: str = "transformers",
        check: bool = True,
        where: str = "the SentencePiece model",
    ):
        """`where`: the file the proto was read from, for the error if it cannot be parsed."""
        if mode not in MODES:
            raise TokenizerError(f"tokenizer mode must be one of {MODES}, got {mode!r}")
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.load_from_serialized_proto(model_proto)
        except RuntimeError:  # e.g. a 0-byte or truncated file ("unk is not defined")
            raise TokenizerError(
                f"{where} is not a valid SentencePiece model ({len(model_proto)} bytes)"
            ) from None
        self.lower_case = lower_case
        self.keep_accents = keep_accents
        self.mode = mode
        self.vocab_size = self.sp.get_piece_size()
        self._pieces = [self.sp.id_to_piece(i) for i in range(self.vocab_size)]
        self._start = [is_start_piece(p) for p in self._pieces]
        if check:
            self.check_special_ids()

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_dir(cls, path: str | os.PathLike, **kwargs) -> SentencePieceTokenizer:
        """Loads ``spiece.model`` (+ ``tokenizer.json`` settings) from a directory or a file."""
        path = epath.Path(path)
        model_path = path / MODEL_FILE if path.is_dir() else path
        if not model_path.exists():
            raise TokenizerError(f"no SentencePiece model at {os.fspath(model_path)!r}")
        meta_path = model_path.parent / META_FILE
        settings = {}
        if meta_path.exists():
            meta = json.loads(meta_path.read_text())
            settings = {k: meta[k] for k in ("lower_case", "keep_accents", "mode") if k in meta}
        settings.update(kwargs)
        return cls(model_path.read_bytes(), where=os.fspath(model_path), **settings)

    def to_bytes(self) -> bytes:
        """The serialized model, so a checkpoint can carry the tokenizer."""
        return self.sp.serialized_model_proto()

    def meta(self) -> dict:
        return {
            "lower_case": self.lower_case,
            "keep_accents": self.keep_accents,
            "mode": self.mode,
            "vocab_size": self.vocab_size,
            "special_ids": self.special_ids(),
        }

    # ---- checks -------------------------------------------------------------------------
    def special_ids(self) -> dict[str, int]:
        """Id of each special symbol in this model (-1 for unk-mapped / absent symbols)."""
        out = {}
        for name in SPECIAL_IDS:
            i = self.sp.piece_to_id(name)
            out[name] = -1 if (i == self.sp.unk_id() and name != UNK) else i
        out[PAD] = self.sp.pad_id()
        out[UNK] = self.sp.unk_id()
        return out

    def check_special_ids(self) -> None:
        got = self.special_ids()
        bad = {k: v for k, v in got.items() if v != SPECIAL_IDS[k]}
        if bad:
            raise TokenizerError(
                "SentencePiece model does not follow ALBERT's id conventions "
                f"(expected {SPECIAL_IDS}); mismatching: {bad}. Retrain it with "
                "`python -m pretrain.tokenizer` (pad=0, unk=1, [CLS]/[SEP]/[MASK] control "
                "symbols 2/3/4)."
            )

    def check_vocab_size(self, model_vocab_size: int) -> None:
        if int(model_vocab_size) != self.vocab_size:
            raise TokenizerError(
                f"tokenizer has {self.vocab_size} pieces but the model config says "
                f"vocab_size={model_vocab_size}; they must be equal."
            )

    # ---- encoding -----------------------------------------------------------------------
    def preprocess(self, text: str) -> str:
        return preprocess_text(
            text, lower=self.lower_case, keep_accents=self.keep_accents, mode=self.mode
        )

    def tokenize(self, text: str) -> list[str]:
        return encode_pieces(self.sp, self.preprocess(text), self.mode)

    def convert_tokens_to_ids(self, pieces: Iterable[str]) -> list[int]:
        return [self.sp.piece_to_id(p) for p in pieces]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return [self._pieces[int(i)] for i in ids]

    def encode(self, text: str) -> list[int]:
        return self.convert_tokens_to_ids(self.tokenize(text))

    def encode_with_word_starts(self, text: str) -> tuple[list[int], list[bool]]:
        """Ids plus the whole-word start flag of each piece."""
        ids = self.encode(text)
        return ids, [self._start[i] for i in ids]

    def word_start_flags(self, ids: Sequence[int]) -> list[bool]:
        return [self._start[int(i)] for i in ids]

    def decode(self, ids: Iterable[int]) -> str:
        return self.sp.decode([int(i) for i in ids])


def train_sentencepiece(
    sentences: Iterable[str],
    out_dir: str | os.PathLike,
    *,
    vocab_size: int,
    character_coverage: float = 0.9995,
    lower_case: bool = True,
    keep_accents: bool = False,
    mode: str = "transformers",
    model_type: str = "unigram",
    input_sentence_size: int = 10_000_000,
    seed_sentencepiece_size: int = 1_000_000,
    num_threads: int = 2,
    hard_vocab_limit: bool = True,
    extra_args: dict | None = None,
    extra_meta: dict | None = None,
) -> SentencePieceTokenizer:
    """Trains an ALBERT-convention SentencePiece model on preprocessed ``sentences``.

    Writes ``tokenizer.json`` (settings used at encode time, plus ``extra_meta``), ``spiece.vocab``
    and ``spiece.model`` to ``out_dir`` and returns the loaded, checked tokenizer. Each file is
    written whole or not at all, ``spiece.model`` last: its presence means a complete tokenizer.
    A corpus too small for ``vocab_size`` is an error giving the largest size it allows, unless
    ``hard_vocab_limit`` is False (SentencePiece then stops below ``vocab_size``).
    """
    out_dir = os.fspath(out_dir)
    with tempfile.TemporaryDirectory() as tmp:  # SentencePiece writes local files only
        text_path = os.path.join(tmp, "input.txt")
        n = 0
        with open(text_path, "w", encoding="utf-8") as f:
            for s in sentences:
                s = preprocess_text(s, lower=lower_case, keep_accents=keep_accents, mode=mode)
                if s:
                    f.write(s + "\n")
                    n += 1
        if n == 0:
            raise TokenizerError("no non-empty sentences to train the tokenizer on")
        args = dict(
            input=text_path,
            model_prefix=os.path.join(tmp, "spiece"),
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            pad_id=0,
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            control_symbols=[CLS, SEP, MASK],
            user_defined_symbols=["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"],
            shuffle_input_sentence=True,
            input_sentence_size=input_sentence_size,
            seed_sentencepiece_size=seed_sentencepiece_size,
            num_threads=num_threads,
            hard_vocab_limit=hard_vocab_limit,
            minloglevel=2,
        )
        args.update(extra_args or {})
        try:
            spm.SentencePieceTrainer.train(**args)
        except RuntimeError as e:
            limit = re.search(r"Vocabulary size too high \((\d+)\).*<= (\d+)", str(e))
            if limit:
                raise TokenizerError(
                    f"vocab_size={limit.group(1)} is more than this corpus allows: at most "
                    f"{limit.group(2)}. Lower it (--vocab_size / data.vocab_size), or let "
                    "SentencePiece stop below it (--nohard_vocab_limit / "
                    "data.hard_vocab_limit=False)"
                ) from None
            raise TokenizerError(f"SentencePiece training failed: {e}") from e
        proto = epath.Path(tmp, MODEL_FILE).read_bytes()
        pieces = epath.Path(tmp, VOCAB_FILE).read_bytes()
    size = spm.SentencePieceProcessor(model_proto=proto).get_piece_size()
    meta = TokenizerMeta(
        lower_case=lower_case,
        keep_accents=keep_accents,
        vocab_size=size,  # below the requested size when hard_vocab_limit is False
        character_coverage=character_coverage,
        model_type=model_type,
        mode=mode,
    )
    meta = {**dataclasses.asdict(meta), **(extra_meta or {})}
    paths.write_text(paths.join(out_dir, META_FILE), json.dumps(meta, indent=2))
    paths.write_bytes(paths.join(out_dir, VOCAB_FILE), pieces)
    paths.write_bytes(paths.join(out_dir, MODEL_FILE), proto)
    return SentencePieceTokenizer.from_dir(out_dir)


# ---- tokenizer assets: our checkpoints, transformers and Google release directories ----
def load_tokenizer(path: str | os.PathLike, *, strict: bool = True, **kwargs):
    """The tokenizer stored in a directory: ``spiece.model`` (SentencePiece) or ``vocab.txt``
    (WordPiece, see ``albert_jax.text.wordpiece``), with its ``tokenizer.json`` settings. With
    ``strict=False`` a SentencePiece model need not have ALBERT's special ids (pretraining reads
    them from the model: ``pretraining_ids``)."""
    path = os.fspath(path)
    if epath.Path(path, MODEL_FILE).exists():
        return SentencePieceTokenizer.from_dir(path, check=strict, **kwargs)
    if epath.Path(path, wordpiece.VOCAB_FILE).exists():
        return WordPieceTokenizer.from_dir(path, **kwargs)
    raise TokenizerError(f"no {MODEL_FILE} or {wordpiece.VOCAB_FILE} in {path!r}")


def pretraining_ids(tokenizer) -> dict[str, int]:
    """The ids pretraining examples are built with, read from the tokenizer (ALBERT's
    SentencePiece models: 2, 3, 4 and 0; BERT-style WordPiece vocabularies: 101, 102, 103, 0)."""
    ids = tokenizer.special_ids()
    out = {
        "cls": ids.get(CLS, -1),
        "sep": ids.get(SEP, -1),
        "mask": ids.get(MASK, -1),
        "pad": ids.get(PAD, ids.get("[PAD]", -1)),
    }
    missing = [k for k, v in out.items() if v is None or v < 0]
    if missing:
        raise TokenizerError(
            f"the tokenizer has no {', '.join(missing)} symbol ({ids}): pretraining needs "
            "[CLS], [SEP], [MASK] and a padding id"
        )
    return out


def read_tokenizer(
    path: str | os.PathLike, *, lower_case: bool = True, keep_accents=False, mode="transformers"
):
    """A tokenizer someone brings (``data.tokenizer_model``): a SentencePiece ``.model`` file, a
    WordPiece ``vocab.txt``, or a directory (ours, transformers' or a Google release). For a bare
    file the casing is ``lower_case`` (and a SentencePiece model encodes in ``mode``); a
    directory's own settings win."""
    path = os.fspath(path)
    if epath.Path(path).is_dir():
        if epath.Path(path, META_FILE).exists() and not is_fast_tokenizer_file(path):
            return load_tokenizer(path)
        tok = find_tokenizer(path)
        if tok is None:
            raise TokenizerError(f"{path}: no SentencePiece .model or WordPiece vocab*.txt in it")
        return tok
    if not epath.Path(path).is_file():
        raise TokenizerError(f"tokenizer {path!r}: no such file or directory")
    if path.endswith(".txt"):
        return WordPieceTokenizer.from_file(path, lower_case=lower_case)
    proto = epath.Path(path).read_bytes()
    try:
        return SentencePieceTokenizer(
            proto, lower_case=lower_case, keep_accents=keep_accents, mode=mode, check=False,
            where=path,
        )  # fmt: skip
    except TokenizerError as e:
        if mode not in MODES:
            raise
        raise TokenizerError(f"{e}; a WordPiece vocabulary must end in .txt") from None


def save_tokenizer(tokenizer, out_dir: str | os.PathLike, extra_meta: dict | None = None) -> None:
    """Writes a tokenizer so that ``load_tokenizer(out_dir)`` gives the same one back, with
    ``extra_meta`` in its tokenizer.json. Each file whole or not at all, the model (or vocab.txt)
    last: its presence means a complete tokenizer."""
    if isinstance(tokenizer, SentencePieceTokenizer):
        meta = {"type": "sentencepiece", **tokenizer.meta(), **(extra_meta or {})}
        paths.write_text(paths.join(out_dir, META_FILE), json.dumps(meta, indent=2))
        paths.write_bytes(paths.join(out_dir, MODEL_FILE), tokenizer.to_bytes())
    else:
        tokenizer.save(out_dir, extra_meta)


def is_fast_tokenizer_file(path: str | os.PathLike) -> bool:
    """Whether PATH/tokenizer.json is transformers' fast tokenizer (a transformers directory,
    e.g. our export: `albert_jax.text.fast_tokenizer`) rather than our settings file; the
    directory's settings are then in tokenizer_config.json (`find_tokenizer`)."""
    try:
        meta = json.loads(epath.Path(path, META_FILE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and isinstance(meta.get("model"), dict)


def find_tokenizer(path: str | os.PathLike):
    """The tokenizer shipped with a transformers or Google ALBERT directory, or None.

    transformers: ``spiece.model`` or ``vocab.txt`` plus ``tokenizer_config.json``
    (``do_lower_case``, ``keep_accents``). Google releases: ``30k-clean.model`` (English, lower-
    cased) or ``vocab_chinese.txt`` / ``vocab.txt`` (Chinese, lower-cased). The SentencePiece
    special ids are not enforced here: the caller reports them.
    """
    path = os.fspath(path)
    settings = {}
    cfg = epath.Path(path, "tokenizer_config.json")
    if cfg.exists():
        settings = json.loads(cfg.read_text())
    lower = bool(settings.get("do_lower_case", True))
    models = sorted(os.fspath(p) for p in epath.Path(path).glob("*.model"))
    vocabs = sorted(os.fspath(p) for p in epath.Path(path).glob("vocab*.txt"))
    if len(models) == 1:
        proto = epath.Path(models[0]).read_bytes()
        keep = bool(settings.get("keep_accents", False))
        return SentencePieceTokenizer(
            proto, lower_case=lower, keep_accents=keep, check=False, where=models[0]
        )
    if len(vocabs) == 1 and not models:
        return WordPieceTokenizer.from_file(vocabs[0], lower_case=lower)
    if models or vocabs:
        found = [os.path.basename(p) for p in models + vocabs]
        raise TokenizerError(f"{path}: several tokenizer files {found}; cannot tell which")
    return None


def save_hf_tokenizer(tokenizer, out_dir: str | os.PathLike) -> None:
    """Tokenizer files that transformers' AlbertTokenizer / BertTokenizer load."""
    if isinstance(tokenizer, SentencePieceTokenizer):
        with open(os.path.join(out_dir, MODEL_FILE), "wb") as f:
            f.write(tokenizer.to_bytes())
        config = {
            "tokenizer_class": "AlbertTokenizer",
            "do_lower_case": tokenizer.lower_case,
            "keep_accents": tokenizer.keep_accents,
            "remove_space": True,
            # transformers 5's AlbertTokenizer leaves token_type_ids out unless told: ALBERT
            # reads them (sentence pairs), and 4.57's tokenizers return them.
            "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
        }
    else:
        with open(os.path.join(out_dir, wordpiece.VOCAB_FILE), "w", encoding="utf-8") as f:
            f.write("".join(p + "\n" for p in tokenizer.pieces))
        config = {"tokenizer_class": "BertTokenizer", "do_lower_case": tokenizer.lower_case}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
