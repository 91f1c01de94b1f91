"""WordPiece tokenization for Google's Chinese ALBERT and brightmart's albert_zh releases.

BERT's BasicTokenizer + WordpieceTokenizer semantics, as transformers' slow `BertTokenizer`
(4.57) runs them, so ids equal the reference: NFC-normalise; drop NUL, U+FFFD and control
characters, map whitespace to spaces; put spaces around CJK ideographs; split on whitespace; per
word lower-case and strip accents (NFD, drop Mn) when `lower_case`, split off punctuation; then
greedy longest-match-first pieces with `##` continuations, `[UNK]` for a word with no match or
longer than 100 characters. Whole words equal to a special token ([CLS], [MASK], ...) are kept.
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Iterable, Sequence

from etils import epath

from albert_jax import paths

VOCAB_FILE = "vocab.txt"
META_FILE = "tokenizer.json"
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_WORD_CHARS = 100
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)  # all non-alphanumeric ASCII counts, e.g. "^", "$", "`"
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK)


def basic_tokenize(text: str, lower_case: bool, never_split: frozenset = frozenset()) -> list[str]:
    text = unicodedata.normalize("NFC", text)
    chars = []
    for ch in text:
        if ch in ("\x00", "\ufffd") or _is_control(ch):
            continue
        if _is_whitespace(ch):
            chars.append(" ")
        elif _is_cjk(ch):
            chars.extend((" ", ch, " "))
        else:
            chars.append(ch)
    words = []
    for word in "".join(chars).split():
        if word in never_split:
            words.append(word)
            continue
        if lower_case:
            word = unicodedata.normalize("NFD", word.lower())
            word = "".join(c for c in word if unicodedata.category(c) != "Mn")
        current: list[str] = []
        for ch in word:  # punctuation characters become words of their own
            if _is_punctuation(ch):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(ch)
            else:
                current.append(ch)
        if current:
            words.append("".join(current))
    return words


def wordpiece(word: str, vocab: dict[str, int], unk: str = "[UNK]") -> list[str]:
    if len(word) > MAX_WORD_CHARS:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


class WordPieceTokenizer:
    """A BERT-style vocab.txt tokenizer with the same interface as SentencePieceTokenizer."""

    def __init__(self, vocab: Sequence[str], *, lower_case: bool = True):
        self.pieces = list(vocab)
        # Ids are line numbers. Released vocabularies list some tokens twice: such a token maps
        # to its last line, as in transformers' `load_vocab` (its earlier ids are never produced).
        self.vocab = {p: i for i, p in enumerate(self.pieces)}
        missing = [s for s in ("[UNK]",) if s not in self.vocab]
        if missing:
            raise ValueError(f"WordPiece vocab lacks {missing}")
        self.lower_case = lower_case
        self.vocab_size = len(self.pieces)
        self._never_split = frozenset(s for s in SPECIALS if s in self.vocab)

    @classmethod
    def from_file(cls, path: str | os.PathLike, **kwargs) -> WordPieceTokenizer:
        vocab = [line.rstrip("\r") for line in epath.Path(path).read_text("utf-8").split("\n")]
        while vocab and vocab[-1] == "":
            vocab.pop()
        return cls(vocab, **kwargs)

    @classmethod
    def from_dir(cls, path: str | os.PathLike, **kwargs) -> WordPieceTokenizer:
        """Loads ``vocab.txt`` (+ ``tokenizer.json`` settings) from a directory or a file."""
        path = epath.Path(path)
        vocab_path = path / VOCAB_FILE if path.is_dir() else path
        meta_path = vocab_path.parent / META_FILE
        settings = {}
        if meta_path.exists():
            meta = json.loads(meta_path.read_text())
            settings = {k: v for k, v in meta.items() if k == "lower_case"}
        settings.update(kwargs)
        return cls.from_file(vocab_path, **settings)

    def save(self, out_dir: str | os.PathLike, extra_meta: dict | None = None) -> None:
        """tokenizer.json (with `extra_meta`), then vocab.txt: each whole or not at all."""
        meta = {**self.meta(), **(extra_meta or {})}
        paths.write_text(paths.join(out_dir, META_FILE), json.dumps(meta, indent=2))
        paths.write_text(paths.join(out_dir, VOCAB_FILE), "".join(p + "\n" for p in self.pieces))

    def meta(self) -> dict:
        return {
            "type": "wordpiece",
            "lower_case": self.lower_case,
            "vocab_size": self.vocab_size,
            "special_ids": self.special_ids(),
        }

    def special_ids(self) -> dict[str, int]:
        return {s: self.vocab.get(s, -1) for s in SPECIALS}

    def check_vocab_size(self, model_vocab_size: int) -> None:
        if int(model_vocab_size) != self.vocab_size:
            raise ValueError(
                f"tokenizer has {self.vocab_size} pieces but the model config says "
                f"vocab_size={model_vocab_size}; they must be equal."
            )

    def tokenize(self, text: str) -> list[str]:
        return [
            piece
            for word in basic_tokenize(text, self.lower_case, self._never_split)
            for piece in wordpiece(word, self.vocab)
        ]

    def convert_tokens_to_ids(self, pieces: Iterable[str]) -> list[int]:
        unk = self.vocab["[UNK]"]
        return [self.vocab.get(p, unk) for p in pieces]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.pieces[int(i)] for i in ids]

    def encode(self, text: str) -> list[int]:
        return self.convert_tokens_to_ids(self.tokenize(text))

    def word_start_flags(self, ids: Sequence[int]) -> list[bool]:
        return [not self.pieces[int(i)].startswith("##") for i in ids]

    def encode_with_word_starts(self, text: str) -> tuple[list[int], list[bool]]:
        ids = self.encode(text)
        return ids, self.word_start_flags(ids)

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.convert_ids_to_tokens(ids)).replace(" ##", "")
