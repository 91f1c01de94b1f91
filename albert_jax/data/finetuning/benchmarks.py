"""Published benchmarks' files as they come, and their leaderboards' submission files.

A preset names its benchmark task in `task.benchmark` ('glue/cola', 'clue/afqmc', ...); what
its files' columns, labels and metric are is the preset's business (configs/finetune/glue.py,
clue.py), set through the ordinary task leaves. Here is only what a config cannot say: which
submission file a split's predictions go to (by the split file's name: GLUE's MNLI has two test
files) and in which format, and a reader for files the generic one cannot read.

Formats: `glue` (the GLUE server's TSV: a header `index	prediction`, then the test row's index
and the predicted label, or the score for STS-B) and `clue` (CLUE's JSON lines:
`{"id": ..., "label": ...}` per test row).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence

from albert_jax import paths
from albert_jax.data.finetuning.records import DataError


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


FORMATS = {"glue": _glue_tsv, "clue": _clue_jsonl}
