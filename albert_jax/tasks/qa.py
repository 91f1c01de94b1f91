"""Extractive question answering (SQuAD v1.1 / v2.0): reading, sliding windows, the task.

Contexts are split into words (a CJK character, a run of letters and digits, or one punctuation
mark), each word is tokenized on its own (as the tagging task does), and a question's context
pieces are cut into windows of ``max_seq_length - len(question) - 3`` pieces every ``doc_stride``
pieces: ``[CLS] question [SEP] window [SEP]``. A context piece may start or end an answer only in
the window where it has the most context on both sides (the reference's max-context rule);
``offsets`` [T, 2] holds the character span of its word there (-1 elsewhere), so decoding
(`albert_jax.scoring.squad`) maps any span back to the original text without re-tokenizing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from albert_jax import paths
from albert_jax.data import tables
from albert_jax.data.finetuning.records import DataError, _special_ids, word_pieces
from albert_jax.model.losses import cross_entropy
from albert_jax.scoring import metrics as M
from albert_jax.scoring import squad
from albert_jax.tasks.finetune_config import QASettings
from albert_jax.tasks.finetuning import FinetuneReader, FinetuneTask

CJK = squad.CJK  # one character a word
_WORD = re.compile(rf"[{CJK}]|[^\W{CJK}]+|[^\w\s]")


@dataclasses.dataclass(frozen=True)
class QAExample:
    where: str  # "file: data[i].paragraphs[j].qas[k]"
    qid: str
    question: str
    context: str
    # gold texts (empty: unanswerable); None: the file gives none (a test split to predict)
    answers: tuple[str, ...] | None
    answer_start: int | None  # character offset of the first answer (training target)
    given_start: int | None = None  # the file's answer_start (even where the text is not there)


def read_squad(path: str | os.PathLike) -> tuple[list[QAExample], dict]:
    """Examples of a SQuAD v1.1 / v2.0 JSON file, and counts. Answers not found at their
    offsets are counted (``answers_not_found``) and the question keeps its gold texts for
    scoring but gets no training target. A file none of whose questions has an answer or
    `is_impossible` (no `answers` key, or empty lists: CMRC 2018's test set) is one to predict:
    its examples have ``answers=None`` (no metrics; training on it is refused); a file that
    gives answers for some questions must give them (or `is_impossible`) for all."""
    name = os.fspath(path)
    try:
        with paths.open_text(name) as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise DataError(f"{name}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise DataError(f"{name}: expected a SQuAD file, {{'data': [...]}} at the top")
    examples, not_found, seen, unlabelled = [], 0, set(), []
    for i, article in enumerate(doc["data"]):
        for j, para in enumerate(_field(article, "paragraphs", list, f"{name}: data[{i}]")):
            at = f"{name}: data[{i}].paragraphs[{j}]"
            context = _field(para, "context", str, at)
            for k, qa in enumerate(_field(para, "qas", list, at)):
                where = f"{at}.qas[{k}]"
                qid = str(_field(qa, "id", (str, int), where))
                if qid in seen:
                    raise DataError(f"{where}: question id {qid!r} appears twice")
                seen.add(qid)
                question = _field(qa, "question", str, where).strip()
                if not question:
                    raise DataError(f"{where}: empty question")
                impossible = bool(qa.get("is_impossible", False))
                if impossible or qa.get("answers"):
                    answers = [] if impossible else _field(qa, "answers", list, where)
                else:  # no gold here: a file to predict, unless others have theirs (below)
                    if "answers" in qa:
                        _field(qa, "answers", list, where)
                    unlabelled.append(where)
                    examples.append(QAExample(where, qid, question, context, None, None))
                    continue
                texts, start, given = [], None, None
                for n, a in enumerate(answers):
                    text = _field(a, "text", str, f"{where}.answers[{n}]")
                    offset = _field(a, "answer_start", int, f"{where}.answers[{n}]")
                    texts.append(text)
                    if n == 0:
                        given = offset
                        # a negative offset would slice from the end (Python): not an offset
                        at = context[offset : offset + len(text)] if offset >= 0 else None
                        if at == text and text.strip():
                            start = offset
                        else:
                            not_found += 1
                examples.append(
                    QAExample(where, qid, question, context, tuple(texts), start, given)
                )
    if unlabelled and len(unlabelled) < len(examples):
        raise DataError(f"{unlabelled[0]}: no answers and not is_impossible")
    return examples, {"answers_not_found": not_found}


def read_squad_table(ref: str, data_dir: str = "") -> tuple[list[QAExample], dict]:
    """Examples of a table of SQuAD rows (a parquet / arrow file, an ``hf:`` or ``tfds:``
    dataset: `albert_jax.data.tables`), one question a row as `datasets`' and TFDS's ``squad``
    have them: ``id``, ``question``, ``context`` and ``answers`` = {``text``: [...],
    ``answer_start``: [...]} (``title`` and other columns are ignored). Empty answers are an
    unanswerable question (SQuAD v2.0); a table with no ``answers`` column, or none of whose
    rows has an answer, is one to predict (``answers=None``), as `read_squad` reads files."""
    table = tables.open_table(ref, data_dir)
    fix = "a QA table has SQuAD's columns: id, question, context, answers"
    table.require({"id": "id", "question": "question", "context": "context"}, fix)
    rows = list(table.rows())
    has_answers = "answers" in table.columns and any(
        isinstance(r.get("answers"), dict) and r["answers"].get("text") for _, r in rows
    )
    examples, not_found, seen = [], 0, set()
    for where, rec in rows:
        qid = str(_field(rec, "id", (str, int), where))
        if qid in seen:
            raise DataError(f"{where}: question id {qid!r} appears twice")
        seen.add(qid)
        question = _field(rec, "question", str, where).strip()
        if not question:
            raise DataError(f"{where}: empty question")
        context = _field(rec, "context", str, where)
        if not has_answers:
            examples.append(QAExample(where, qid, question, context, None, None))
            continue
        answers = _field(rec, "answers", dict, where)
        texts = _field(answers, "text", list, f"{where}.answers")
        offsets = _field(answers, "answer_start", list, f"{where}.answers")
        if len(texts) != len(offsets) or not all(isinstance(t, str) for t in texts):
            raise DataError(f"{where}: answers need a text (a string) per answer_start")
        start = given = None
        if texts:
            given = offsets[0]
            at = context[given : given + len(texts[0])] if given >= 0 else None
            if at == texts[0] and texts[0].strip():
                start = given
            else:
                not_found += 1
        examples.append(QAExample(where, qid, question, context, tuple(texts), start, given))
    return examples, {"answers_not_found": not_found}


# A training file with more of its answered questions than this not at their `answer_start` most
# likely counts offsets another way (bytes, UTF-16 units, from 1): refused, not trained on a
# remnant of itself.
MAX_BAD_OFFSETS = 0.10


class OffsetError(DataError):
    """A training file whose answer offsets mostly miss their answer texts."""


def training_examples(examples: Sequence[QAExample], path) -> tuple[list[QAExample], list[str]]:
    """(The questions to train on, notes). One whose answer is not at its offset is left out:
    without a target it would be trained as unanswerable. More than `MAX_BAD_OFFSETS` of the
    answered questions so: an `OffsetError` (dev and test keep them: their texts are scored)."""
    bad = [e for e in examples if e.answers and e.answer_start is None]
    if not bad:
        return list(examples), []
    answered = sum(1 for e in examples if e.answers)
    share = len(bad) / answered
    named = "; ".join(f"{e.where} (id {e.qid!r})" for e in bad[:3]) + (" ..." if bad[3:] else "")
    if share > MAX_BAD_OFFSETS:
        e = bad[0]
        found = e.context.find(e.answers[0])
        end = e.given_start + len(e.answers[0])
        at = e.context[e.given_start : end] if e.given_start >= 0 else ""  # negative: nothing
        raise OffsetError(
            f"{path}: {len(bad)} of {answered} answered questions ({share:.0%}, more than "
            f"{MAX_BAD_OFFSETS:.0%}) have their answer text not at answer_start; the file "
            "likely counts offsets another way (bytes, UTF-16 units, from 1) than characters. "
            f"E.g. {e.where} (id {e.qid!r}): answer_start {e.given_start} holds {at!r}, "
            f"{e.answers[0]!r} is " + (f"at {found}" if found >= 0 else "not in the context")
        )
    kept = [e for e in examples if not (e.answers and e.answer_start is None)]
    note = (
        f"{path}: {len(bad)} of {answered} answered questions skipped from training, their "
        f"answer text not at answer_start: {named}"
    )
    return kept, [note]


def _field(record, key, kind, where):
    if not isinstance(record, dict) or key not in record:
        raise DataError(f"{where}: missing key {key!r}")
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{where}: {key!r} has type {type(value).__name__}")
    return value


def context_words(text: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the words of `text` (CJK characters one by one)."""
    return [m.span() for m in _WORD.finditer(text)]


def _windows(n: int, max_len: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) windows over n pieces: every `stride` pieces until the end is covered."""
    out, start = [], 0
    while True:
        length = min(n - start, max_len)
        out.append((start, length))
        if start + length >= n:
            return out
        start += min(length, stride)


def _max_context(windows, p: int) -> int:
    """Index of the window in which piece p has the most context (ties: the longer window)."""
    best, best_score = -1, -1.0
    for w, (start, length) in enumerate(windows):
        if start <= p < start + length:
            score = min(p - start, start + length - 1 - p) + 0.01 * length
            if score > best_score:
                best, best_score = w, score
    return best


def featurize_qa(
    examples: Sequence[QAExample],
    tokenizer,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
) -> tuple[dict[str, np.ndarray], dict]:
    """Window arrays: input_ids / token_type_ids / attention_mask, ``start_positions`` /
    ``end_positions`` (0, the [CLS], when the answer is not wholly inside the window or the
    question has none), ``offsets`` [N, T, 2] and ``example_index`` [N]."""
    cls_id, sep_id, pad_id, _ = _special_ids(tokenizer)
    T = max_seq_length
    keys = ("ids", "types", "length", "start", "end", "offsets", "example")
    rows: dict[str, list] = {k: [] for k in keys}
    cut_questions = 0
    cache: dict[tuple[str, bool], list[int]] = {}
    for e, ex in enumerate(examples):
        q = tokenizer.encode(ex.question)
        if len(q) > max_query_length:
            q, cut_questions = q[:max_query_length], cut_questions + 1
        spans = context_words(ex.context)
        pieces, piece_word = [], []
        for w, (a, _) in enumerate(spans):
            spaced = a == 0 or ex.context[a - 1].isspace()
            key = (ex.context[spans[w][0] : spans[w][1]], spaced)
            ids = cache.get(key)
            if ids is None:
                ids = cache[key] = word_pieces(tokenizer, key[0], spaced)
            pieces.extend(ids)
            piece_word.extend([w] * len(ids))
        target = None  # (first piece, last piece) of the answer
        if ex.answer_start is not None:
            a0, a1 = ex.answer_start, ex.answer_start + len(ex.answers[0])
            words = [w for w, (s, t) in enumerate(spans) if s < a1 and t > a0]
            if words:
                first = piece_word.index(words[0])
                last = len(piece_word) - 1 - piece_word[::-1].index(words[-1])
                target = (first, last)
        max_ctx = T - len(q) - 3
        if max_ctx < 1:
            raise DataError(f"{ex.where}: the question leaves no room for context at {T}")
        windows = _windows(len(pieces), max_ctx, doc_stride)
        owner = [_max_context(windows, p) for p in range(len(pieces))]
        for w, (start, length) in enumerate(windows):
            ids = [cls_id, *q, sep_id, *pieces[start : start + length], sep_id]
            types = [0] * (len(q) + 2) + [1] * (length + 1)
            offsets = np.full((T, 2), -1, np.int32)
            base = len(q) + 2
            for p in range(start, start + length):
                if owner[p] == w:
                    offsets[base + p - start] = spans[piece_word[p]]
            s = e_ = 0
            if target and start <= target[0] and target[1] < start + length:
                s, e_ = base + target[0] - start, base + target[1] - start
            rows["ids"].append(ids + [pad_id] * (T - len(ids)))
            rows["types"].append(types + [0] * (T - len(types)))
            rows["length"].append(len(ids))
            rows["start"].append(s)
            rows["end"].append(e_)
            rows["offsets"].append(offsets)
            rows["example"].append(e)
    n = len(rows["ids"])
    ids = np.asarray(rows["ids"], np.int32).reshape(n, T)
    features = {
        "input_ids": ids,
        "token_type_ids": np.asarray(rows["types"], np.int32).reshape(n, T),
        "attention_mask": (np.arange(T) < np.asarray(rows["length"])[:, None]).astype(np.int32),
        "start_positions": np.asarray(rows["start"], np.int32),
        "end_positions": np.asarray(rows["end"], np.int32),
        "offsets": np.asarray(rows["offsets"], np.int32).reshape(n, T, 2),
        "example_index": np.asarray(rows["example"], np.int32),
    }
    stats = {
        "examples": len(examples),
        "windows": n,
        "truncated": cut_questions,
        "multi_window": int(np.sum(np.bincount(features["example_index"]) > 1)) if n else 0,
    }
    return features, stats


class QATask(FinetuneTask):
    """Start / end logits per token; loss: the mean of the start and end cross-entropies over
    each window's tokens (the [CLS] target for windows without the answer). Evaluation decodes
    every example over all its windows; for SQuAD v2 (unanswerable questions in the split) the
    no-answer threshold is tuned on dev and the last tuned value applies to test."""

    targets = ("start_positions", "end_positions")

    def __init__(self, config, data, workdir=None):
        super().__init__(config, data, workdir)
        self.null_threshold: float | None = None

    def normalizers(self, batch):
        return {"examples": jnp.asarray(batch["input_ids"].shape[0], jnp.float32)}

    def loss(self, params, batch, norms, rng):
        logits = self.apply(params, batch, rng)  # [B, T, 2]
        pos = jnp.stack([batch["start_positions"], batch["end_positions"]], -1)  # [B, 2]
        nll = cross_entropy(logits, pos, axis=1)  # over positions: [B, 2]
        n = norms["examples"]
        hit = jnp.all(jnp.argmax(logits, axis=1) == pos, axis=-1)
        return jnp.sum(nll) / (2 * n), {"accuracy": jnp.sum(hit) / n}

    def eval_step(self, params, batch):
        return self.apply(params, batch, None)

    def rows_and_metrics(self, split, logits):
        examples, feats = self.data.examples[split], self.data.features[split]
        h = self.head
        windows: list[list[dict]] = [[] for _ in examples]
        for i, e in enumerate(feats["example_index"]):
            windows[e].append(
                {"start_logits": logits[i, :, 0], "end_logits": logits[i, :, 1],
                 "offsets": feats["offsets"][i]}
            )  # fmt: skip
        decoded = [
            squad.decode(w, ex.context, int(h["max_answer_length"]), int(h["n_best"]))
            for ex, w in zip(examples, windows, strict=True)
        ]
        preds = {ex.qid: d["text"] for ex, d in zip(examples, decoded, strict=True)}
        # a split without gold (CMRC 2018's test set: `read_squad`) is predicted, not scored
        scored = [ex for ex in examples if ex.answers is not None]
        golds = {ex.qid: list(ex.answers) for ex in scored}
        char_level = bool(h["char_level"])
        values, na = {}, None
        if any(not a for a in golds.values()):  # v2: some questions have no answer
            na = {ex.qid: d["null_score_diff"] for ex, d in zip(examples, decoded, strict=True)}
            if split == "dev" or self.null_threshold is None:
                tuned = squad.squad_evaluate(golds, preds, na, char_level=char_level)
                self.null_threshold = float(tuned["best_f1_thresh"])
            values["null_threshold"] = self.null_threshold
        threshold = self.null_threshold if na is not None else None  # v1: never no-answer
        if not scored:  # no gold: dev's tuned threshold, if dev had unanswerable questions
            threshold = self.null_threshold
        if scored:
            values.update(
                squad.squad_evaluate(golds, preds, na, threshold or 0.0, char_level=char_level)
            )
        if scored and na is not None:
            values = _with_floors(values, golds, preds, char_level)
        rows = []
        for ex, d in zip(examples, decoded, strict=True):
            text = d["text"]
            if threshold is not None and d["null_score_diff"] > threshold:
                text = ""
            rows.append(
                {"where": ex.where, "id": ex.qid, "question": ex.question, "prediction": text,
                 "answers": None if ex.answers is None else list(ex.answers),
                 "null_score_diff": d["null_score_diff"],
                 "nbest": d["nbest"][:5]}
            )  # fmt: skip
        return rows, {k: float(v) for k, v in values.items() if isinstance(v, int | float)}

    def collapse(self, rows, values):
        def show(text):
            return "'' (no answer)" if not text else f"the same span {text[:60]!r}"

        what = M.prediction_collapse(
            [r["prediction"] for r in rows], "questions", "answered", None, show
        )
        if what and "span_f1" in values:
            what += (
                f" (official f1 {values['f1']:.1f}, span-only f1 {values['span_f1']:.1f}, "
                f"always-no-answer floor {values['no_answer_floor']:.1f})"
            )
        return what

    def write_predictions(self, stem: str, rows) -> None:
        super().write_predictions(stem, rows)
        # The official evaluation script's input: {question id: answer text}.
        _write_json(stem + "_official.json", {r["id"]: r["prediction"] for r in rows})


class QAReader(FinetuneReader):
    """The data side (`FinetuneData` reads and featurizes with it before a task exists): SQuAD
    files, windows of the settings' stride and question length."""

    settings: QASettings

    def read(self, path):
        if tables.is_table(path):  # parquet / arrow, hf:..., tfds:...: SQuAD rows
            return read_squad_table(path, self.settings.data_dir)
        return read_squad(path)

    def check_targets(self, examples) -> None:
        if ex := next((e for e in examples if e.answers is None), None):
            raise DataError(
                f"task.train {self.settings.train}: {ex.where}: no answers and not "
                "is_impossible (a file to predict, not to train on)"
            )

    def training_examples(self, examples, path):
        return training_examples(examples, path)

    def featurize(self, examples, data):
        stride, query = int(self.settings.doc_stride), int(self.settings.max_query_length)
        return featurize_qa(examples, data.tokenizer, data.max_seq_length, stride, query)

    def head_fields(self, data) -> dict:
        fields = {k: getattr(self.settings, k) for k in QA_FIELDS}
        return {"type": "question_answering", "num_labels": 2, **fields}


def _with_floors(values: dict, golds, preds, char_level: bool) -> dict:
    """The official metrics with, after `f1`, what the threshold hides: `span_exact` /
    `span_f1` (the best span of every question, no threshold) and `no_answer_floor` (the F1 and
    exact match of answering "" everywhere: the share of questions without an answer)."""
    span = squad.squad_evaluate(golds, preds, None, char_level=char_level)
    floor = squad.squad_evaluate(golds, dict.fromkeys(golds, ""), None, char_level=char_level)
    extra = {"span_exact": span["exact"], "span_f1": span["f1"], "no_answer_floor": floor["f1"]}
    out = {}
    for k, v in values.items():
        out[k] = v
        if k == "f1":
            out.update(extra)
    return out | extra


def _write_json(path: str, obj) -> None:
    paths.write_text(path, json.dumps(obj, ensure_ascii=False, indent=1))


QA_FIELDS = ("doc_stride", "max_query_length", "max_answer_length", "n_best", "char_level")
Task = QATask  # the task of this module's types (`finetuning.TASK_MODULES`)
Reader = QAReader  # its data side
