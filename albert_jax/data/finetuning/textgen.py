"""Text generation data for UniLM-style seq2seq fine-tuning: reading, featurizing, decoding, and
People's Daily entity extraction as generation (``python -m finetune.prepare entities``: the
target format, its parser and its entity-level score). Text metrics:
``albert_jax.scoring.generation``.

A row is ``[CLS] source [SEP] target [SEP]``: segment 0 for ``[CLS] source [SEP]``, 1 for
``target [SEP]``. ``labels[i] = input_ids[i + 1]`` from the last source position (the ``[SEP]``
that closes the source predicts the first target piece) to the last target piece (which predicts
the closing ``[SEP]``); every other position is ``IGNORE``. The model side (prefix-LM mask,
decoding) lives in ``albert_jax.tasks.seq2seq``.

Generated ids become text with ``decode_pieces``; compare that with ``reference_text(target)``,
not the raw target: the tokenizer's normalisation (lower-casing, NFKD, which turns the full-width
``：`` into ``:``) cannot be undone, so the reference goes through the same round trip. No JAX here.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Sequence

import numpy as np

from albert_jax.data import tables
from albert_jax.data.finetuning.records import IGNORE, DataError, _json_records, _special_ids
from albert_jax.scoring import squad

# CJK ideographs, CJK symbols and punctuation (、。「」...), full-width forms (：，；...).
_CJK = squad.CJK + "\u3000-\u303f\uff00-\uffef"
_SPACE_BY_CJK = re.compile(rf"\s+(?=[{_CJK}])|(?<=[{_CJK}])\s+")


@dataclasses.dataclass(frozen=True)
class Seq2SeqExample:
    where: str  # "file:line"
    source: str
    target: str | None = None  # None: the file has no target (inputs to generate from)


# ---- reading ----------------------------------------------------------------------------------
def read_seq2seq(
    path: str | os.PathLike,
    source_key: str = "source",
    target_key: str = "target",
    data_dir: str = "",
) -> tuple[list[Seq2SeqExample], dict]:
    """Examples of a JSONL file (one ``{source_key: str, target_key: str}`` object a line; other
    keys are ignored, blank lines skipped) and counts. Texts are stripped; an empty source is an
    error, an empty target is allowed (the model learns to stop at once). A file whose records
    have no ``target_key`` gives ``target=None``; mixing the two is an error. A parquet / arrow
    file or an ``hf:`` / ``tfds:`` reference (`albert_jax.data.tables`) is read by the same
    keys as columns (a missing source column: `tables.ColumnError`)."""
    path = os.fspath(path)
    name = os.path.basename(path)
    if tables.is_table(path):
        table = tables.open_table(path, data_dir)
        table.require({"source_key": source_key})
        name = path
        records = table.rows()
    else:
        records = ((f"{name}:{line}", rec) for line, rec in _json_records(path, name))
    examples: list[Seq2SeqExample] = []
    with_target = None
    for where, rec in records:
        if source_key not in rec:
            raise DataError(f"{where}: missing key {source_key!r}; the record has {sorted(rec)}")
        source = _string(rec[source_key], source_key, where).strip()
        if not source:
            raise DataError(f"{where}: {source_key!r} is empty")
        has_target = target_key in rec
        if with_target is None:
            with_target = has_target
        elif has_target != with_target:
            said = "no" if with_target else "a"
            raise DataError(
                f"{where}: {'a' if has_target else 'no'} {target_key!r}, but the first record "
                f"has {said} {target_key!r} (all records must have one, or none)"
            )
        target = _string(rec[target_key], target_key, where).strip() if has_target else None
        examples.append(Seq2SeqExample(where, source, target))
    if not examples:
        raise DataError(f"{name}: no records")
    with_targets = sum(ex.target is not None for ex in examples)
    return examples, {"examples": len(examples), "with_target": with_targets}


def _string(value, key: str, where: str) -> str:
    if not isinstance(value, str):
        raise DataError(f"{where}: {key!r} must be a string, got {value!r}")
    return value


# ---- featurizing ------------------------------------------------------------------------------
def featurize_seq2seq(
    examples: Sequence[Seq2SeqExample],
    tokenizer,
    max_seq_length: int,
    max_target_length: int,
    *,
    reserve_target: bool = False,
) -> tuple[dict[str, np.ndarray], dict]:
    """``[CLS] source [SEP] target [SEP]`` arrays of length ``max_seq_length`` (module docstring).

    A target longer than ``max_target_length`` pieces is cut to that (``targets_truncated``; the
    closing ``[SEP]`` is still appended), then the source is cut from its end to fit
    (``truncated``). An example without target gives ``[CLS] source [SEP]`` with labels all
    ``IGNORE``, its source cut so that ``max_target_length + 1`` pieces can still be generated.
    ``reserve_target=True`` cuts every source that way, so a row generated from has the same room
    whether or not it has a target (its gold length never limits generation).

    Features: ``input_ids``, ``token_type_ids``, ``attention_mask``, ``labels`` [N, T] int32 and
    ``source_length`` [N] int32 = len([CLS] source [SEP]), where generation starts.
    """
    if max_target_length < 1:
        raise ValueError(f"max_target_length must be at least 1, got {max_target_length}")
    if max_seq_length < max_target_length + 4:
        raise ValueError(
            f"max_seq_length ({max_seq_length}) must be at least max_target_length + 4 "
            f"({max_target_length + 4}): [CLS], [SEP] x2 and one source piece"
        )
    cls_id, sep_id, pad_id, _ = _special_ids(tokenizer)
    n, T = len(examples), max_seq_length
    input_ids = np.full((n, T), pad_id, np.int32)
    token_type_ids = np.zeros((n, T), np.int32)
    attention_mask = np.zeros((n, T), np.int32)
    labels = np.full((n, T), IGNORE, np.int32)
    source_length = np.zeros((n,), np.int32)
    truncated = targets_truncated = longest_source = longest_target = 0
    for row, ex in enumerate(examples):
        source = tokenizer.encode(ex.source)
        target = tokenizer.encode(ex.target) if ex.target is not None else None
        longest_source = max(longest_source, len(source))
        if target is not None:
            longest_target = max(longest_target, len(target))
            if len(target) > max_target_length:
                target = target[:max_target_length]
                targets_truncated += 1
        reserved = max_target_length if target is None or reserve_target else len(target)
        budget = T - 3 - reserved
        if len(source) > budget:
            source = source[:budget]
            truncated += 1
        ids = [cls_id, *source, sep_id]
        start = len(ids)
        if target is not None:
            ids += [*target, sep_id]
            # The [SEP] closing the source predicts target[0], ..., target[-1] predicts [SEP].
            labels[row, start - 1 : len(ids) - 1] = ids[start:]
        input_ids[row, : len(ids)] = ids
        token_type_ids[row, start : len(ids)] = 1
        attention_mask[row, : len(ids)] = 1
        source_length[row] = start
    features = {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
        "labels": labels,
        "source_length": source_length,
    }
    stats = {
        "examples": n,
        "truncated": truncated,
        "targets_truncated": targets_truncated,
        "longest_source_pieces": longest_source,
        "longest_target_pieces": longest_target,
    }
    return features, stats


# ---- decoding ---------------------------------------------------------------------------------
def decode_pieces(tokenizer, ids: Iterable[int]) -> str:
    """Text of generated ids: stops at the first ``[SEP]``, skips [CLS] / pad / [MASK], keeps unk
    (as the tokenizer writes it). Whitespace next to a CJK character or CJK / full-width
    punctuation is removed (a SentencePiece word-start piece or WordPiece's joining spaces would
    otherwise split Chinese text), other whitespace collapsed to one space."""
    _, sep_id, _, unk_id = _special_ids(tokenizer)
    skip = {i for i in tokenizer.special_ids().values() if i >= 0} - {unk_id}
    kept = []
    for i in ids:
        i = int(i)
        if i == sep_id:
            break
        if i not in skip:
            kept.append(i)
    text = tokenizer.decode(kept) if kept else ""
    return " ".join(_SPACE_BY_CJK.sub("", text).split())


def reference_text(tokenizer, text: str) -> str:
    """``text`` as ``decode_pieces`` would write it if the model generated it exactly: the form
    to score predictions against (module docstring)."""
    return decode_pieces(tokenizer, tokenizer.encode(text))


# ---- metrics ----------------------------------------------------------------------------------
# ---- People's Daily entities as generation ----------------------------------------------------
ENTITY_LABELS = {"PER": "人名", "LOC": "地名", "ORG": "机构"}  # in this order in every target
NO_ENTITY = "无"
LABEL_SEP, NAME_SEP, GROUP_SEP = "：", "、", "；"
# After the tokenizer's NFKD the full-width separators come back half-width: parse both.
_GROUPS = re.compile("[；;]")
_LABEL = re.compile("[：:]")
_NAMES = re.compile("[、，,]")


def entity_target(words: Sequence[tuple[str, str]]) -> str:
    """``人名：张三、李四；地名：北京；机构：新华社`` from (word, PER/LOC/ORG/O) items: per type in
    ``ENTITY_LABELS`` order, its entities in order of first appearance without repeats; types
    without entities left out, ``无`` when there is none at all."""
    found: dict[str, list[str]] = {kind: [] for kind in ENTITY_LABELS}
    for word, kind in words:
        if kind in found and word not in found[kind]:
            found[kind].append(word)
    groups = [
        f"{ENTITY_LABELS[kind]}{LABEL_SEP}{NAME_SEP.join(names)}"
        for kind, names in found.items()
        if names
    ]
    return GROUP_SEP.join(groups) or NO_ENTITY


def parse_entities(text: str) -> set[tuple[str, str]]:
    """(label, name) pairs of an entity target or a generated one (full- or half-width
    separators; spaces ignored). ``无``, empty groups and empty names give nothing; a group
    without a label gives pairs with label ``""`` (they never match a reference)."""
    pairs = set()
    text = "".join(text.split())
    if text == NO_ENTITY:
        return pairs
    for group in _GROUPS.split(text):
        parts = _LABEL.split(group, maxsplit=1)
        label, names = parts if len(parts) == 2 else ("", parts[0])
        pairs.update((label, name) for name in _NAMES.split(names) if name)
    return pairs


def entity_scores(predictions: Sequence[str], references: Sequence[str]) -> dict:
    """Micro precision / recall / F1 (0-100) of the (label, name) pairs of ``parse_entities``."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    tp = n_pred = n_gold = 0
    for p, r in zip(predictions, references, strict=True):
        pred, gold = parse_entities(p), parse_entities(r)
        tp += len(pred & gold)
        n_pred += len(pred)
        n_gold += len(gold)
    if n_pred == n_gold == 0:  # nothing to find and nothing found
        precision = recall = 1.0
    else:
        precision = tp / n_pred if n_pred else 0.0
        recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "entity_precision": 100.0 * precision,
        "entity_recall": 100.0 * recall,
        "entity_f1": 100.0 * f1,
    }
