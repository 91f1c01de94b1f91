"""`python -m finetune.predict --checkpoint DIR --input FILE [--output FILE]`: predictions of a
fine-tuned checkpoint (e.g. WORKDIR/best of `python -m finetune`) as JSONL, one row per input
example with its location, text and prediction (class probabilities and the logits they are the
softmax of for classification, e.g. for calibration or distillation; a tag per word for tagging;
the letter and each option's probability and logit for multiple choice). With labels in the
input, the metrics are printed too. A benchmark preset's checkpoint (configs/finetune/glue.py,
clue.py) given its test file also writes the leaderboard's submission file (GLUE's `CoLA.tsv`,
CLUE's `afqmc_predict.json`, ...) in `--submission_dir` (default: the output's directory):

  python -m finetune.predict --checkpoint runs/glue_cola/best --input GLUE_DIR/CoLA/test.tsv \
      --output runs/glue_cola/test.predictions.jsonl     # + runs/glue_cola/CoLA.tsv"""

from __future__ import annotations

import argparse
import json
import os
import sys

from albert_jax import cli, paths
from albert_jax.data import tables
from albert_jax.jobs.run import predict_file


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m finetune.predict", description=__doc__)
    parser.add_argument("--checkpoint", required=True, help="fine-tuned checkpoint directory")
    parser.add_argument(
        "--input", required=True, help="JSONL / TSV / CSV (CoNLL for tagging, RACE for choice)"
    )
    parser.add_argument("--output", help="predictions JSONL (default: INPUT.predictions.jsonl)")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument(
        "--submission_dir", help="a benchmark's submission file goes here (default: the output's)"
    )
    args = parser.parse_args(argv)
    output = args.output or args.input + ".predictions.jsonl"
    try:
        _check_args(args.input, output, args.batch_size)
        values = predict_file(
            args.checkpoint, args.input, output, args.batch_size, args.submission_dir
        )
    except cli.InputError as e:  # one line, exit 2, as every entry point
        return cli.report(e)
    print(json.dumps({"predictions": output, **values}, ensure_ascii=False))
    return 0


def _check_args(input_path: str, output: str, batch_size: int) -> None:
    """What is wrong with the arguments themselves, before the checkpoint is read."""
    if batch_size < 1:
        raise cli.InputError(f"--batch_size must be at least 1, got {batch_size}")
    if paths.is_uri(input_path) or tables.is_reference(input_path):  # read where it is
        return
    if not os.path.exists(input_path):
        raise cli.InputError(f"--input {input_path}: no such file or directory")
    if os.path.exists(output) and os.path.samefile(input_path, output):
        raise cli.InputError(
            f"--output {output} is the input file: name another one (the input is kept)"
        )


def entry():  # the console script
    cli.keep_freed_memory()  # as under cli.run: forward passes reuse their host buffers
    sys.exit(main())


if __name__ == "__main__":
    entry()
