"""Multiple choice in RACE format: reading, one sequence per option, the task.

A RACE record is ``{"article", "questions": [...], "options": [[...], ...], "answers": ["A", ...],
"id"}``; every question is an example. Each option becomes ``[CLS] article [SEP] question+option
[SEP]`` (the option fills the question's ``_`` blank, else follows the question), the model scores
the ``[N * C, T]`` sequences with one number each and the task takes a softmax over each
question's C options. The head needs a fixed C: questions with fewer options are refused unless
``task.num_choices`` is set, and then padded with masked options that get no probability.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence

import jax.numpy as jnp
import numpy as np
from etils import epath

from albert_jax import paths
from albert_jax.data.finetuning.records import DataError, _special_ids
from albert_jax.model.flops import forward_flops_per_sequence
from albert_jax.model.losses import cross_entropy
from albert_jax.scoring import metrics as M
from albert_jax.tasks.finetune_config import ChoiceSettings
from albert_jax.tasks.finetuning import FinetuneReader, FinetuneTask

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_BLANK = re.compile(r"_+")  # RACE writes a blank as "_" or a run of them
RACE_KEYS = "article, questions, options, answers (and id)"


@dataclasses.dataclass(frozen=True)
class ChoiceExample:
    where: str  # "file:line: questions[k]" (JSONL) or "file: questions[k]"
    qid: str  # the record's id and the question's index: "high123.txt-0"
    article: str
    question: str
    options: tuple[str, ...]
    label: int  # index of the answer in options


def fill_blank(question: str, option: str) -> str:
    """The RACE convention: the option replaces each ``_`` blank (a run of underscores) of a
    cloze question; any other question is followed by the option."""
    if "_" in question:
        return _BLANK.sub(lambda _: option, question)
    return f"{question} {option}".strip()


def read_race(path: str | os.PathLike) -> list[ChoiceExample]:
    """Examples of a RACE-format ``.jsonl`` file (one record a line), a directory as RACE ships
    (every ``.txt`` / ``.json`` file below it one record, in sorted path order) or any other
    file holding one record."""
    path = os.fspath(path)
    examples: list[ChoiceExample] = []
    for where, rec in _records(path):
        examples.extend(_questions(rec, where))
    if not examples:
        raise DataError(f"{path}: no questions found")
    return examples


def _records(path: str) -> Iterator[tuple[str, dict]]:
    if epath.Path(path).is_dir():
        files = [f for f in paths.files_under(path) if f.endswith((".txt", ".json"))]
        for file in files:
            with paths.open_text(file) as f:
                yield file, _parse(f.read(), file, whole_file=True)
    elif path.endswith(".jsonl"):
        with paths.open_text(path) as f:
            for line, raw in enumerate(f, 1):
                if raw.strip():
                    yield f"{path}:{line}", _parse(raw, f"{path}:{line}", whole_file=False)
    else:
        with paths.open_text(path) as f:
            yield path, _parse(f.read(), path, whole_file=True)


def _parse(text: str, where: str, whole_file: bool) -> dict:
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as e:  # in a whole file, say where in it
        at = f"{where}:{e.lineno}:{e.colno}" if whole_file else where
        raise DataError(f"{at}: malformed JSON ({e.msg})") from None
    if not isinstance(rec, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    return rec


def _questions(rec: dict, where: str) -> Iterator[ChoiceExample]:
    for key, kind in (("article", str), ("questions", list), ("options", list), ("answers", list)):
        if key not in rec:
            raise DataError(f"{where}: missing key {key!r} (a RACE record has {RACE_KEYS})")
        if not isinstance(rec[key], kind):
            raise DataError(f"{where}: {key!r} must be a {kind.__name__}")
    questions, options, answers = rec["questions"], rec["options"], rec["answers"]
    if not len(questions) == len(options) == len(answers):
        raise DataError(
            f"{where}: {len(questions)} questions, {len(options)} option lists and "
            f"{len(answers)} answers: one of each per question"
        )
    rid = str(rec.get("id", "")) or os.path.basename(where)
    for k, (question, opts, answer) in enumerate(zip(questions, options, answers, strict=True)):
        at = f"{where}: questions[{k}]"
        if not isinstance(question, str):
            raise DataError(f"{at}: the question must be a string")
        if not isinstance(opts, list) or not all(isinstance(o, str) for o in opts):
            raise DataError(f"{at}: options[{k}] must be a list of strings")
        if not 2 <= len(opts) <= len(LETTERS):
            raise DataError(f"{at}: {len(opts)} options (2 to {len(LETTERS)} are possible)")
        letter = answer.strip().upper() if isinstance(answer, str) else ""
        if len(letter) != 1 or letter not in LETTERS[: len(opts)]:
            raise DataError(
                f"{at}: answer {answer!r} is not one of its {len(opts)} options "
                f"(A-{LETTERS[len(opts) - 1]})"
            )
        yield ChoiceExample(
            at, f"{rid}-{k}", rec["article"], question.strip(), tuple(opts), LETTERS.index(letter)
        )


def num_choices(splits: Mapping[str, Sequence[ChoiceExample]], configured: int = 0) -> int:
    """The head's option count. ``configured`` (task.num_choices) > 0: the most any question may
    have (shorter lists are padded and masked); 0: that of the first question, which every
    question must then have."""
    first = next((exs[0] for exs in splits.values() if exs), None)
    if first is None:
        raise DataError("no questions to count options of")
    expected = configured or len(first.options)
    for exs in splits.values():
        for ex in exs:
            n = len(ex.options)
            if configured and n > configured:
                raise DataError(f"{ex.where}: {n} options but task.num_choices={configured}")
            if not configured and n != expected:
                raise DataError(
                    f"{ex.where}: {n} options but {expected} expected (as {first.where}); the "
                    "head scores a fixed number of options: set task.num_choices to the most a "
                    "question has and shorter option lists are padded with masked options"
                )
    return expected


def featurize_choice(
    examples: Sequence[ChoiceExample], tokenizer, max_seq_length: int, num_choices: int
) -> tuple[dict[str, np.ndarray], dict]:
    """Arrays [N, C, T] of ``[CLS] article [SEP] question+option [SEP]``; the article is cut
    first (``truncated`` counts such questions); a question+option longer than T - 3 keeps its
    end, where an appended option sits (``qa_truncated`` counts such sequences). Padded options
    are ``[CLS] [SEP]`` with ``choice_mask`` 0; ``label`` [N] is the answer's index."""
    if max_seq_length < 4:
        raise ValueError(f"max_seq_length must be at least 4, got {max_seq_length}")
    cls_id, sep_id, pad_id, _ = _special_ids(tokenizer)
    N, C, T = len(examples), num_choices, max_seq_length
    ids = np.full((N, C, T), pad_id, np.int32)
    types = np.zeros((N, C, T), np.int32)
    mask = np.zeros((N, C, T), np.int32)
    choice_mask = np.zeros((N, C), np.int32)
    truncated = qa_truncated = longest = 0
    article, article_ids = None, []  # RACE asks several questions about one article in a row
    for n, ex in enumerate(examples):
        if ex.article != article:
            article, article_ids = ex.article, tokenizer.encode(ex.article)
        cut = False
        for c in range(C):
            if c >= len(ex.options):
                ids[n, c, :2], mask[n, c, :2] = (cls_id, sep_id), 1
                continue
            b = tokenizer.encode(fill_blank(ex.question, ex.options[c]))
            longest = max(longest, len(article_ids) + len(b))
            if len(b) > T - 3:
                b, qa_truncated = b[len(b) - (T - 3) :], qa_truncated + 1
            a = article_ids[: T - 3 - len(b)]
            cut |= len(a) < len(article_ids)
            seq = [cls_id, *a, sep_id, *b, sep_id]
            ids[n, c, : len(seq)] = seq
            types[n, c, len(a) + 2 : len(seq)] = 1
            mask[n, c, : len(seq)] = 1
            choice_mask[n, c] = 1
        truncated += cut
    features = {
        "input_ids": ids,
        "token_type_ids": types,
        "attention_mask": mask,
        "choice_mask": choice_mask,
        "label": np.asarray([ex.label for ex in examples], np.int32).reshape(N),
    }
    stats = {
        "examples": N,
        "truncated": truncated,
        "qa_truncated": qa_truncated,
        "padded_options": int(N * C - choice_mask.sum()),
        "longest_pieces": longest,
    }
    return features, stats


def masked_softmax(logits: np.ndarray, choice_mask: np.ndarray) -> np.ndarray:
    """Probabilities over each question's real options; padded ones get exactly 0."""
    x = np.where(choice_mask > 0, logits, -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


class ChoiceTask(FinetuneTask):
    """One score per option (``AlbertForMultipleChoice``), softmax cross-entropy over each
    question's options with padded ones at -inf; accuracy; predictions with the chosen letter
    and every real option's probability."""

    # choice_mask is no model input, but the loss needs it in each batch.
    targets = ("label", "choice_mask")

    def __init__(self, config, data, workdir=None):
        super().__init__(config, data, workdir)
        # Each example is C sequences: tokens/s and FLOPs count all of them.
        self.num_choices = int(self.head["num_choices"])
        self.seq_length = data.max_seq_length * self.num_choices

    def flops_per_example(self) -> float:
        T = self.data.max_seq_length
        return 3.0 * self.num_choices * forward_flops_per_sequence(self.model_config, T, 0)

    def normalizers(self, batch):
        return {"examples": jnp.asarray(batch["input_ids"].shape[0], jnp.float32)}

    def loss(self, params, batch, norms, rng):
        logits = self.apply(params, batch, rng)  # [B, C]
        masked = jnp.where(batch["choice_mask"] > 0, logits, -jnp.inf)
        nll = cross_entropy(masked, batch["label"])
        n = norms["examples"]
        correct = jnp.argmax(masked, -1) == batch["label"]
        return jnp.sum(nll) / n, {"accuracy": jnp.sum(correct) / n}

    def eval_step(self, params, batch):
        return self.apply(params, batch, None)  # masked in `score`: the mask is no model input

    def rows_and_metrics(self, split, logits):
        examples, feats = self.data.examples[split], self.data.features[split]
        probs = masked_softmax(np.asarray(logits, np.float64), feats["choice_mask"])
        preds = probs.argmax(-1)
        values = {"accuracy": float(np.mean(preds == feats["label"]))} if examples else {}
        rows = [
            {"where": ex.where, "id": ex.qid, "question": ex.question, "options": list(ex.options),
             "answer": LETTERS[ex.label], "prediction": LETTERS[p],
             "probabilities": np.round(pr[: len(ex.options)], 6).tolist(),
             "logits": np.round(np.asarray(lg[: len(ex.options)], np.float64), 6).tolist()}
            for ex, p, pr, lg in zip(examples, preds, probs, logits, strict=True)
        ]  # fmt: skip
        return rows, values

    def collapse(self, rows, values):
        golds = [r["answer"] for r in rows]
        preds = [r["prediction"] for r in rows]
        return M.prediction_collapse(preds, "questions", "chose", golds, "option {!r}".format)


class ChoiceReader(FinetuneReader):
    """The data side (`FinetuneData` reads and featurizes with it before a task exists): RACE
    records, every split with the head's option count."""

    settings: ChoiceSettings
    num_choices: int  # the head's, counted at the first split featurized

    def read(self, path):
        return read_race(path), {}

    def featurize(self, examples, data):
        # Over every split: one head serves them all, so all must fit its option count.
        self.num_choices = num_choices(data.examples, int(self.settings.num_choices or 0))
        return featurize_choice(examples, data.tokenizer, data.max_seq_length, self.num_choices)

    def head_fields(self, data) -> dict:
        return {"type": "multiple_choice", "num_labels": 1, "num_choices": self.num_choices}


Task = ChoiceTask  # the task of this module's types (`finetuning.TASK_MODULES`)
Reader = ChoiceReader  # its data side
