"""Relation extraction (subject, predicate, object) as bert4keras' "half-pointer half-tagging".

Data: DuIE-style JSON lines, ``{"text": ..., "spo_list": [{"subject", "predicate", "object"}]}``
(DuIE 2.0's ``"object": {"@value": ...}`` too). Each entity is located at its first occurrence
in the text, as bert4keras does; a triple whose subject or object is not in its text is counted
and skipped. Gold and predicted triples are sets of strings: micro precision / recall / F1 over
a split (counts summed over texts).

Model (`albert_jax.model.heads.AlbertForRelationExtraction`): ``[CLS] text [SEP]`` -> per token a
sigmoid start and end score for subjects; for one subject, its start and end vectors condition a
LayerNorm of the sequence, and per token and predicate a sigmoid start and end score for its
objects, [T, P, 2]. Binary cross-entropy on both, over the text's tokens.

Training rows are one per text with all its triples stored compactly (``subjects`` [S, 2],
``triples`` [M, 5] as piece positions), and the loss samples one subject per row and step from
the step's rng and builds that subject's object labels on the device. Why not one row per
(text, subject) pair: an epoch stays a pass over the texts (as bert4keras, which samples a
subject each time it sees a text), a text with many subjects does not weigh more in the subject
loss, and the stored targets are M * 5 numbers per text instead of S * T * P * 2.

Evaluation rows are one per text. ``eval_step`` decodes inside the jitted function with fixed
shapes: up to ``max_subjects`` subjects (first in the text first), each subject's objects per
predicate, a span being a start with p > threshold and the nearest end at or after it with
p > threshold, at most ``max_span_length`` pieces long and only on text pieces (never [CLS],
[SEP] or padding). Spans go back to the text through each piece's character offsets.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from albert_jax.data.finetuning.records import DataError, _json_records, _special_ids, word_pieces
from albert_jax.scoring import metrics as M
from albert_jax.tasks.finetune_config import RelationSettings
from albert_jax.tasks.finetuning import INPUTS, FinetuneError, FinetuneReader, FinetuneTask
from albert_jax.tasks.qa import context_words

THRESHOLD = RelationSettings.threshold  # decoding's default (task.threshold sets a run's)


@dataclasses.dataclass(frozen=True)
class Triple:
    subject: str
    predicate: str
    object: str
    subject_start: int  # character offsets of the first occurrences in the text
    object_start: int


@dataclasses.dataclass(frozen=True)
class RelationExample:
    where: str  # "file:line"
    text: str
    triples: tuple[Triple, ...]

    def gold(self) -> set[tuple[str, str, str]]:
        return {(t.subject, t.predicate, t.object) for t in self.triples}


# ---------------------------------------------------------------- reading


def read_duie(path: str | os.PathLike) -> tuple[list[RelationExample], dict]:
    """Examples of a DuIE-style JSONL file and counts: ``triples`` kept, ``not_found`` triples
    skipped because an entity is not in the text, ``duplicates`` repeated triples dropped."""
    path = os.fspath(path)
    examples, counts = [], collections.Counter(triples=0, not_found=0, duplicates=0)
    for line, rec in _json_records(path, os.path.basename(path)):
        where = f"{os.path.basename(path)}:{line}"
        text = _string(rec, "text", where)
        spo = rec.get("spo_list")
        if not isinstance(spo, list):
            raise DataError(f"{where}: missing key 'spo_list' (a list of triples)")
        triples, seen = [], set()
        for k, item in enumerate(spo):
            at = f"{where}: spo_list[{k}]"
            if not isinstance(item, dict):
                raise DataError(f"{at}: expected an object")
            s, p = _string(item, "subject", at), _string(item, "predicate", at)
            o = item.get("object")
            if isinstance(o, dict):  # DuIE 2.0: the object's main value (other slots ignored)
                o = _string(o, "@value", f"{at}.object")
            else:
                o = _string(item, "object", at)
            if (s, p, o) in seen:
                counts["duplicates"] += 1
                continue
            seen.add((s, p, o))
            a, b = (text.find(x) if x else -1 for x in (s, o))
            if a < 0 or b < 0:
                counts["not_found"] += 1
                continue
            triples.append(Triple(s, p, o, a, b))
        counts["triples"] += len(triples)
        examples.append(RelationExample(where, text, tuple(triples)))
    return examples, dict(counts)


def _string(record: dict, key: str, where: str) -> str:
    if key not in record:
        raise DataError(f"{where}: missing key {key!r}")
    if not isinstance(record[key], str):
        raise DataError(f"{where}: {key!r} must be a string, got {type(record[key]).__name__}")
    return record[key]


# ---------------------------------------------------------------- features


def featurize_relations(
    examples: Sequence[RelationExample], tokenizer, max_seq_length: int, predicates: Sequence[str]
) -> tuple[dict[str, np.ndarray], dict]:
    """Arrays of ``[CLS] text [SEP]`` (one row per text): the inputs, ``offsets`` [N, T, 2]
    (each text piece's character span, the span of its word; -1 elsewhere), ``subject_labels``
    [N, T, 2] (start / end of every subject), ``subjects`` [N, S, 2] (distinct subject spans)
    and ``triples`` [N, M, 5] (subject start, end, predicate, object start, end), -1 padded.

    The text is split into words as in QA (a CJK character, a run of letters and digits, a
    punctuation mark) and each word tokenized on its own, so pieces map back to characters.
    Triples with an entity past the cut (``triples_cut``) or a predicate not in ``predicates``
    (``unknown_predicate``) get no targets; ``unaligned`` counts entities whose edges fall
    inside a word (their span decodes to the whole words)."""
    cls_id, sep_id, pad_id, _ = _special_ids(tokenizer)
    T, N = max_seq_length, len(examples)
    if T < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {T}")
    index = {p: i for i, p in enumerate(predicates)}
    ids = np.full((N, T), pad_id, np.int32)
    mask = np.zeros((N, T), np.int32)
    offsets = np.full((N, T, 2), -1, np.int32)
    subject_labels = np.zeros((N, T, 2), np.int32)
    rows_subjects, rows_triples = [], []
    stats = dict.fromkeys(("truncated", "triples", "triples_cut", "unknown_predicate"), 0)
    stats["unaligned"] = 0
    cache: dict[tuple[str, bool], list[int]] = {}
    for n, ex in enumerate(examples):
        spans = context_words(ex.text)
        pieces, piece_word = [], []
        for w, (a, b) in enumerate(spans):
            key = (ex.text[a:b], a == 0 or ex.text[a - 1].isspace())
            if key not in cache:
                cache[key] = word_pieces(tokenizer, *key)
            pieces.extend(cache[key])
            piece_word.extend([w] * len(cache[key]))
        kept = min(len(pieces), T - 2)
        stats["truncated"] += int(kept < len(pieces))
        seq = [cls_id, *pieces[:kept], sep_id]
        ids[n, : len(seq)], mask[n, : len(seq)] = seq, 1
        first, last = {}, {}  # word -> its first / last sequence position
        for i in range(kept):
            offsets[n, i + 1] = spans[piece_word[i]]
            first.setdefault(piece_word[i], i + 1)
            last[piece_word[i]] = i + 1
        subjects, triples = [], []
        for tr in ex.triples:
            if tr.predicate not in index:
                stats["unknown_predicate"] += 1
                continue
            s = _piece_span(spans, first, last, tr.subject_start, len(tr.subject))
            o = _piece_span(spans, first, last, tr.object_start, len(tr.object))
            if s is None or o is None:
                stats["triples_cut"] += 1
                continue
            stats["unaligned"] += int(not s[2]) + int(not o[2])
            s, o = s[:2], o[:2]
            triples.append((*s, index[tr.predicate], *o))
            if s not in subjects:
                subjects.append(s)
                subject_labels[n, s[0], 0] = subject_labels[n, s[1], 1] = 1
        rows_subjects.append(subjects)
        rows_triples.append(triples)
        stats["triples"] += len(triples)
    S = max([1, *map(len, rows_subjects)])
    M = max([1, *map(len, rows_triples)])
    subjects_arr = np.full((N, S, 2), -1, np.int32)
    triples_arr = np.full((N, M, 5), -1, np.int32)
    for n, (subs, trs) in enumerate(zip(rows_subjects, rows_triples, strict=True)):
        if subs:
            subjects_arr[n, : len(subs)] = subs
            triples_arr[n, : len(trs)] = trs
    features = {
        "input_ids": ids,
        "token_type_ids": np.zeros((N, T), np.int32),
        "attention_mask": mask,
        "offsets": offsets,
        "subject_labels": subject_labels,
        "subjects": subjects_arr,
        "triples": triples_arr,
    }
    return features, {"examples": N, **stats, "most_subjects": S, "most_triples": M}


def _piece_span(spans, first: dict, last: dict, start: int, length: int):
    """(first, last sequence position, whether the entity starts and ends at word edges) of
    the words covering characters [start, start + length); None when a word is cut off."""
    words = [w for w, (a, b) in enumerate(spans) if a < start + length and b > start]
    if not words or words[0] not in first or words[-1] not in last:
        return None  # (no words: an entity of spaces only)
    aligned = spans[words[0]][0] == start and spans[words[-1]][1] == start + length
    return first[words[0]], last[words[-1]], aligned


# ---------------------------------------------------------------- decoding (jitted, fixed shapes)


def text_mask(attention_mask):
    """[B, T] bool: the text pieces of ``[CLS] text [SEP] pad...`` (not [CLS], [SEP], padding)."""
    pos = jnp.arange(attention_mask.shape[-1])
    length = jnp.sum(attention_mask, axis=-1, keepdims=True)
    return (pos >= 1) & (pos < length - 1)


def decode_spans(start_p, end_p, valid, max_len: int, threshold: float = THRESHOLD):
    """End position of the span opening at each position, -1 where none: [..., T] from start
    and end probabilities [..., T] and the positions a span may cover ``valid`` [..., T].

    A span opens where start_p > threshold on a valid position and closes at the nearest
    position at or after it with end_p > threshold, unless an invalid position comes first or
    it would be longer than ``max_len``: never end < start, never across [CLS] / [SEP] / pad."""
    T = start_p.shape[-1]
    pos = jnp.arange(T)
    is_end = (end_p > threshold) & valid
    stop = is_end | ~valid  # the first of these at or after a start decides
    next_stop = jax.lax.cummin(jnp.where(stop, pos, T), axis=start_p.ndim - 1, reverse=True)
    safe = jnp.minimum(next_stop, T - 1)
    closes = (next_stop < T) & jnp.take_along_axis(is_end, safe, axis=-1)
    ok = (start_p > threshold) & valid & closes & (next_stop - pos < max_len)
    return jnp.where(ok, next_stop, -1).astype(jnp.int32)


def first_spans(ends, k: int):
    """[..., k, 2] (start, end) of the first k spans of ``ends`` [..., T] (decode_spans' output)
    in text order, (-1, -1) filling the rest."""
    T = ends.shape[-1]
    pos = jnp.arange(T)
    order = jnp.argsort(jnp.where(ends >= 0, pos, T + pos), axis=-1)[..., : min(k, T)]
    end = jnp.take_along_axis(ends, order, axis=-1)
    spans = jnp.stack([order.astype(jnp.int32), end], axis=-1)
    return jnp.where((end >= 0)[..., None], spans, -1)


def spans_text(text: str, offsets: np.ndarray, start: int, end: int) -> str:
    """The characters of pieces start..end (inclusive) through their offsets [T, 2]."""
    return text[offsets[start, 0] : offsets[end, 1]]


def unpack(packed: np.ndarray, num_predicates: int):
    """``eval_step``'s [N, K, 2 + P * T] -> subject spans [N, K, 2], object ends [N, K, P, T]."""
    N, K = packed.shape[:2]
    return packed[..., :2], packed[..., 2:].reshape(N, K, num_predicates, -1)


def decode_triples(
    text: str, offsets: np.ndarray, subjects: np.ndarray, ends: np.ndarray, predicates
) -> set[tuple[str, str, str]]:
    """(subject, predicate, object) strings of one text from its subject spans [K, 2] and
    object ends [K, P, T] (decode_spans' layout per subject and predicate)."""
    out = set()
    for k, (s, e) in enumerate(subjects):
        if s < 0:
            continue
        subject = spans_text(text, offsets, s, e)
        for p, t in zip(*np.nonzero(ends[k] >= 0), strict=True):
            out.add((subject, predicates[p], spans_text(text, offsets, t, ends[k, p, t])))
    return out


# ---------------------------------------------------------------- metrics


def triple_metrics(
    gold: Sequence[Iterable[tuple]], predicted: Sequence[Iterable[tuple]]
) -> dict[str, float]:
    """Micro precision / recall / F1 of exact triples: counts summed over texts (bert4keras)."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold texts but {len(predicted)} predicted")
    tp = n_pred = n_gold = 0
    for g, p in zip(gold, predicted, strict=True):
        g, p = set(g), set(p)
        tp, n_pred, n_gold = tp + len(g & p), n_pred + len(p), n_gold + len(g)
    return {
        "precision": tp / n_pred if n_pred else 0.0,
        "recall": tp / n_gold if n_gold else 0.0,
        "f1": 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 0.0,
    }


# ---------------------------------------------------------------- the task


def sample_subjects(subjects, rng):
    """One subject span per row [B, 2] and whether the row has any [B]: uniform over the row's
    distinct subjects with ``rng``, the first one without; (0, 0) for rows without subjects."""
    real = subjects[..., 0] >= 0  # [B, S]
    if rng is None:
        pick = jnp.zeros(subjects.shape[0], jnp.int32)
    else:
        pick = jax.random.categorical(rng, jnp.where(real, 0.0, -1e9), axis=-1)
    span = jnp.take_along_axis(subjects, pick[:, None, None], axis=1)[:, 0]
    has = jnp.any(real, axis=-1)
    return jnp.where(has[:, None], span, 0), has


def object_labels(triples, span, T: int, P: int):
    """[B, T, P, 2] start / end labels of the objects of subject ``span`` [B, 2] from the rows'
    triples [B, M, 5] (-1 padded)."""
    mine = (triples[..., 0] == span[:, None, 0]) & (triples[..., 1] == span[:, None, 1])
    mine &= triples[..., 2] >= 0  # [B, M]
    pred = jax.nn.one_hot(triples[..., 2], P) * mine[..., None]  # [B, M, P]
    ends = [jax.nn.one_hot(triples[..., c], T) for c in (3, 4)]  # [B, M, T] each
    labels = jnp.stack([jnp.einsum("bmt,bmp->btp", e, pred) for e in ends], axis=-1)
    return jnp.minimum(labels, 1.0)


class RelationTask(FinetuneTask):
    """Subject and object pointers (``AlbertForRelationExtraction``); loss: the mean over start
    and end of the subject cross-entropies per text token, plus the same for the sampled
    subject's objects summed over predicates (bert4keras' weighting), each over the global
    batch's text tokens (object terms: of rows that have a subject)."""

    targets = ("subject_labels", "subjects", "triples")
    progress_keys = ("loss", "subject_loss", "object_loss", "learning_rate")

    def __init__(self, config, data, workdir=None):
        super().__init__(config, data, workdir)
        self.predicates = list(self.head["predicates"])
        self.max_subjects = int(self.head["max_subjects"])
        self.max_span_length = int(self.head["max_span_length"])
        self.threshold = float(self.head["threshold"])

    def normalizers(self, batch):
        m = text_mask(batch["attention_mask"]).astype(jnp.float32)
        has = (batch["subjects"][:, 0, 0] >= 0).astype(jnp.float32)
        return {
            "tokens": jnp.maximum(jnp.sum(m), 1.0),
            "object_tokens": jnp.maximum(jnp.sum(m * has[:, None]), 1.0),
        }

    def loss(self, params, batch, norms, rng):
        sample_rng, dropout_rng = (None, None) if rng is None else jax.random.split(rng)
        span, has = sample_subjects(batch["subjects"], sample_rng)
        logits = self.model.apply(
            {"params": params},
            *(batch[k] for k in INPUTS),
            subject_spans=span,
            deterministic=rng is None,
            rngs=None if rng is None else {"dropout": dropout_rng},
        ).logits
        T, P = batch["input_ids"].shape[1], len(self.predicates)
        m = text_mask(batch["attention_mask"])
        bce = optax.sigmoid_binary_cross_entropy
        sub = bce(logits["subject"], batch["subject_labels"].astype(jnp.float32)).mean(-1)
        obj_labels = object_labels(batch["triples"], span, T, P)
        obj = bce(logits["object"], obj_labels).mean(-1).sum(-1)  # [B, T]
        sub_loss = jnp.sum(sub * m) / norms["tokens"]
        obj_loss = jnp.sum(obj * (m & has[:, None])) / norms["object_tokens"]
        return sub_loss + obj_loss, {"subject_loss": sub_loss, "object_loss": obj_loss}

    def eval_step(self, params, batch):
        """[B, K, 2 + P * T] int32: per candidate subject its span (-1: none, and the rest of
        that row means nothing), then for each predicate the end of the object opening at each
        position (-1: none). One array, as `predict_all` gathers."""
        variables = {"params": params}
        out = self.model.apply(variables, *(batch[k] for k in INPUTS), deterministic=True)
        valid = text_mask(batch["attention_mask"])
        p = jax.nn.sigmoid(out.logits["subject"])
        L, th = self.max_span_length, self.threshold
        subjects = first_spans(decode_spans(p[..., 0], p[..., 1], valid, L, th), self.max_subjects)
        obj = self.model.apply(
            variables, out.sequence_output, jnp.maximum(subjects, 0), method="object_logits"
        )  # [B, K, T, P, 2]
        q = jnp.moveaxis(jax.nn.sigmoid(obj), 2, -2)  # [B, K, P, T, 2]
        ends = decode_spans(q[..., 0], q[..., 1], valid[:, None, None], L, th)
        B, K = subjects.shape[:2]
        return jnp.concatenate([subjects, ends.reshape(B, K, -1)], axis=-1)

    def rows_and_metrics(self, split, packed):
        examples, feats = self.data.examples[split], self.data.features[split]
        subjects, ends = unpack(np.asarray(packed), len(self.predicates))
        predicted = [
            decode_triples(ex.text, feats["offsets"][i], subjects[i], ends[i], self.predicates)
            for i, ex in enumerate(examples)
        ]
        gold = [ex.gold() for ex in examples]
        values = {}
        if examples:
            values = triple_metrics(gold, predicted)
            sub = triple_metrics(
                [{t[0] for t in g} for g in gold], [{t[0] for t in p} for p in predicted]
            )
            values["subject_f1"] = sub["f1"]
        rows = [
            {"where": ex.where, "text": ex.text, "spo_list": _spo(g), "predicted": _spo(p)}
            for ex, g, p in zip(examples, gold, predicted, strict=True)
        ]
        return rows, values

    def collapse(self, rows, values):
        return M.nothing_predicted([len(r["predicted"]) for r in rows], "sentences", "triple")


class RelationReader(FinetuneReader):
    """The data side (`FinetuneData` reads and featurizes with it before a task exists): DuIE
    JSONL, the head's predicate list and the settings' decoding limits."""

    settings: RelationSettings
    predicates: list[str] | None = None  # the head's, once per run (`predicates_of`)

    def read(self, path):
        return read_duie(path)

    def featurize(self, examples, data):
        return featurize_relations(
            examples, data.tokenizer, data.max_seq_length, self.predicates_of(data)
        )

    def head_fields(self, data) -> dict:
        P, s = self.predicates_of(data), self.settings
        return {
            "type": "relation_extraction",
            "num_labels": len(P),
            "predicates": list(P),
            "max_subjects": int(s.max_subjects),
            "max_span_length": int(s.max_span_length),
            "threshold": float(s.threshold),
        }

    def predicates_of(self, data) -> list[str]:
        """The head's predicate list (once per run): ``task.predicates`` if set, else the
        sorted predicates of the training file (of all splits without one)."""
        if self.predicates is None:
            fixed = [str(p) for p in (self.settings.predicates or ())]
            source = data.examples.get("train") or [
                e for exs in data.examples.values() for e in exs
            ]
            found = sorted({tr.predicate for ex in source for tr in ex.triples})
            self.predicates = fixed or found
            if not self.predicates:
                raise DataError("no triples to learn from: every spo_list is empty or skipped")
            head = getattr(data.source, "head", None) or {}
            old = head.get("predicates")
            if old is not None and list(old) != self.predicates and not data.fresh_params:
                raise FinetuneError(
                    f"predicates {self.predicates} differ from those of the head in "
                    f"{data.source.location} ({old}); start that head fresh with "
                    "--config.fresh_params='^classifier/'"
                )
        return self.predicates


def _spo(triples) -> list[dict[str, str]]:
    return [{"subject": s, "predicate": p, "object": o} for s, p, o in sorted(triples)]


Task = RelationTask  # the task of this module's types (`finetuning.TASK_MODULES`)
Reader = RelationReader  # its data side
