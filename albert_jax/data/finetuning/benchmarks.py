"""Published benchmarks' files as they come, and their leaderboards' submission files.

A preset names its benchmark task in `task.benchmark` ('glue/cola', 'clue/afqmc', ...); what
its files' columns, labels and metric are is the preset's business (configs/finetune/glue.py,
clue.py), set through the ordinary task leaves. Here is only what a config cannot say: which
submission file a split's predictions go to (by the split file's name: GLUE's MNLI has two test
files) and in which format, and a reader for files the generic one cannot read.

Formats: `glue` (the GLUE server's TSV: a header `index	prediction`, then the test row's index
and the predicted label, or the score for STS-B), `clue` (CLUE's JSON lines:
`{"id": ..., "label": ...}` per test row) and `qa` (one JSON object `{question id: answer
text}`: what SQuAD's official evaluation script and CodaLab take, and CMRC 2018's submission).

CLUE's files are JSON lines read by the generic reader with the preset's columns, except CSL
(`read_csl`: the keyword list joined) and CLUEWSC2020 (`read_wsc`: the two spans marked in the
text); a test row without an `id` field gets its 0-based row number, which is what CLUE's own
baselines write as the id.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence

from albert_jax import paths
from albert_jax.data.finetuning.records import (
    DataError,
    Example,
    _json_records,
    _label,
    _text,
    read_examples,
)


@dataclasses.dataclass(frozen=True)
class Benchmark:
    name: str  # 'glue/cola'
    format: str  # 'glue' | 'clue': the submission's (`FORMATS`)
    submissions: Mapping[str, str]  # a split file's name -> its submission file's name
    # a reader for what the generic readers cannot read, (path, settings) -> examples; None:
    # the task kind's own reader with the preset's columns
    read: Callable | None = None

    def submission(self, split_file: str) -> str | None:
        """The submission file's name for predictions of `split_file`, or None."""
        return self.submissions.get(os.path.basename(str(split_file)))


def _glue(name: str, folder: str, **files: str) -> Benchmark:
    subs = files or {"test.tsv": f"{folder}.tsv"}
    return Benchmark(f"glue/{name}", "glue", subs)


def _names(value) -> tuple[str, ...]:
    """A settings leaf of names: a sequence, or one string of comma-separated names."""
    if isinstance(value, str):
        return tuple(x.strip() for x in value.split(",") if x.strip())
    return tuple(value or ())


def _with_row_ids(examples: list[Example]) -> list[Example]:
    """Rows without an id get their 0-based row number (CLUE's baselines' ids)."""
    return [
        ex if ex.id is not None else dataclasses.replace(ex, id=i) for i, ex in enumerate(examples)
    ]


def read_clue(path, s) -> list[Example]:
    """A CLUE classification file (JSON lines) with the settings' columns."""
    examples = read_examples(
        path, text_a=s.text_a, text_b=s.text_b or None, label=s.label, id=s.id or None,
        skip_labels=_names(s.skip_labels),
    )  # fmt: skip
    return _with_row_ids(examples)


def _records(path, s, build) -> list[Example]:
    """Examples of a JSON-lines file whose texts `build(record, where)` makes (texts, or a
    DataError naming the line); labels and ids as the generic reader reads them."""
    name = os.path.basename(str(path))
    records = list(_json_records(str(path), name))
    has_label = any(s.label in rec for _, rec in records)
    skip, examples = _names(s.skip_labels), []
    for line, rec in records:
        where = f"{name}:{line}"
        text_a, text_b = build(rec, where)
        label = None
        if has_label:
            if s.label not in rec:
                raise DataError(
                    f"{where}: missing column(s) [{s.label!r}]; the row has {sorted(rec)}"
                )
            if rec[s.label] in skip:
                continue
            label = _label(rec[s.label], s.label, "classification", where)
        key = rec.get(s.id) if s.id else None
        examples.append(Example(where, text_a, text_b, label, key))
    return _with_row_ids(examples)


def _need(rec: dict, key: str, where: str):
    if key not in rec:
        raise DataError(f"{where}: missing column(s) [{key!r}]; the row has {sorted(rec)}")
    return rec[key]


def csl_texts(rec: dict, where: str) -> tuple[str, str]:
    """CSL: (the keywords joined by spaces, the abstract), the pair CLUE's baseline reads."""
    keywords = _need(rec, "keyword", where)
    if not isinstance(keywords, list) or not keywords:
        raise DataError(f"{where}: 'keyword' must be a non-empty list of strings, got {keywords!r}")
    words = [_text(k, "keyword", where) for k in keywords]
    return " ".join(words), _text(_need(rec, "abst", where), "abst", where)


def read_csl(path, s) -> list[Example]:
    """CLUE's CSL file: text_a the keyword list joined by spaces, text_b the abstract."""
    return _records(path, s, csl_texts)


WSC_MARKS = {"span1": ("_", "_"), "span2": ("[", "]")}  # the noun, the pronoun


def wsc_text(rec: dict, where: str) -> tuple[str, None]:
    """CLUEWSC2020: the text with its noun (span1) between underscores and its pronoun (span2)
    in square brackets, as CLUE's baseline marks them: `_床_上 ... [它]突然响了`."""
    _text(_need(rec, "text", where), "text", where)  # a string, not blank
    text = rec["text"]  # as it is: the indices count from its first character
    target = _need(rec, "target", where)
    if not isinstance(target, dict):
        raise DataError(f"{where}: 'target' must be an object, got {target!r}")
    spans = []
    for span, (left, right) in WSC_MARKS.items():
        words = _need(target, f"{span}_text", f"{where}: target")
        start = _need(target, f"{span}_index", f"{where}: target")
        if not isinstance(words, str) or not words or not isinstance(start, int):
            raise DataError(
                f"{where}: target {span}_text / {span}_index must be a string and an integer, "
                f"got {words!r} / {start!r}"
            )
        if start < 0 or text[start : start + len(words)] != words:
            found = text.find(words)
            raise DataError(
                f"{where}: target {span}_text {words!r} is not at {span}_index {start} of the "
                + (f"text (it is at {found})" if found >= 0 else "text (nor anywhere in it)")
            )
        spans.append((start, start + len(words), left, right))
    (a0, a1, *_), (b0, b1, *_) = sorted(spans)
    if b0 < a1:
        raise DataError(f"{where}: target spans overlap ({a0}-{a1} and {b0}-{b1})")
    out, at = [], 0
    for start, end, left, right in sorted(spans):
        out += [text[at:start], left, text[start:end], right]
        at = end
    return "".join([*out, text[at:]]), None


def read_wsc(path, s) -> list[Example]:
    """CLUE's CLUEWSC2020 file: one text with its two spans marked (`wsc_text`)."""
    return _records(path, s, wsc_text)


def _clue(name: str, submissions: dict[str, str], read: Callable = read_clue) -> Benchmark:
    return Benchmark(f"clue/{name}", "clue", submissions, read)


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        _glue("cola", "CoLA"),
        _glue("sst2", "SST-2"),
        _glue("mrpc", "MRPC"),
        _glue("stsb", "STS-B"),
        _glue("qqp", "QQP"),
        _glue(
            "mnli",
            "MNLI",
            **{"test_matched.tsv": "MNLI-m.tsv"},
            **{"test_mismatched.tsv": "MNLI-mm.tsv"},
        ),  # fmt: skip
        _glue("qnli", "QNLI"),
        _glue("rte", "RTE"),
        _glue("wnli", "WNLI"),
        # CLUE 1.1's file names (TNEWS' and CLUEWSC2020's 1.0 test sets, test1.0.json, make
        # their 1.0 files through `finetune.predict`)
        _clue("afqmc", {"test.json": "afqmc_predict.json"}),
        _clue(
            "tnews", {"test.json": "tnews11_predict.json", "test1.0.json": "tnews10_predict.json"}
        ),
        _clue("iflytek", {"test.json": "iflytek_predict.json"}),
        _clue("cmnli", {"test.json": "cmnli_predict.json"}),
        _clue("ocnli", {"test.json": "ocnli_50k_predict.json"}),
        _clue("csl", {"test.json": "csl_predict.json"}, read_csl),
        _clue(
            "wsc",
            {"test.json": "cluewsc11_predict.json", "test1.0.json": "cluewsc10_predict.json"},
            read_wsc,
        ),
        Benchmark("clue/cmrc2018", "qa", {"test.json": "cmrc2018_predict.json"}),
        # SQuAD has no public test set: dev's predictions, for the official script
        Benchmark("squad/v1.1", "qa", {"dev-v1.1.json": "predictions.json"}),
        Benchmark("squad/v2.0", "qa", {"dev-v2.0.json": "predictions.json"}),
    )
}


def get(name: str) -> Benchmark:
    """The benchmark task `name` (`task.benchmark`); an unknown name is an error listing them."""
    if name not in BENCHMARKS:
        raise DataError(f"task.benchmark={name!r}: unknown; one of {sorted(BENCHMARKS)}")
    return BENCHMARKS[name]


def check_ids(benchmark: str, split_file: str, examples: Sequence, column: str) -> None:
    """A split whose predictions make a submission file needs every example's id: the error
    names the file and the id column it lacks, before any training."""
    if not benchmark or get(benchmark).submission(split_file) is None:
        return
    missing = next((ex for ex in examples if getattr(ex, "id", None) is None), None)
    if missing is not None:
        raise DataError(
            f"{missing.where}: no id (column {column!r}) for {benchmark}'s submission file; "
            "name the id column with --config.task.id=COLUMN"
        )


def write_submission(benchmark: str, split_file: str, rows: Sequence[dict], out_dir: str):
    """`rows` (a split's readable predictions, with `id` and `prediction`) as the benchmark's
    submission file for `split_file` in `out_dir`; its path, or None when the split makes none."""
    b = get(benchmark)
    name = b.submission(split_file)
    if name is None:
        return None
    path = paths.join(out_dir, name)
    paths.write_text(path, FORMATS[b.format](rows))
    return path


def _glue_tsv(rows) -> str:
    lines = ["index\tprediction"]
    for r in rows:
        p = r["prediction"]
        lines.append(f"{r['id']}\t{p:.6f}" if isinstance(p, float) else f"{r['id']}\t{p}")
    return "\n".join(lines) + "\n"


def _clue_jsonl(rows) -> str:
    lines = (
        json.dumps({"id": r["id"], "label": r["prediction"]}, ensure_ascii=False) for r in rows
    )
    return "".join(x + "\n" for x in lines)


def _qa_json(rows) -> str:
    return json.dumps({r["id"]: r["prediction"] for r in rows}, ensure_ascii=False) + "\n"


FORMATS = {"glue": _glue_tsv, "clue": _clue_jsonl, "qa": _qa_json}
