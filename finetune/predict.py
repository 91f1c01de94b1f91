"""`python -m finetune.predict --checkpoint DIR --input FILE [--output FILE]`: predictions of a
fine-tuned checkpoint (e.g. WORKDIR/best of `python -m finetune`) as JSONL, one row per input
example with its location, text and prediction (class probabilities for classification, a tag
per word for tagging, the letter and option probabilities for multiple choice). With labels in the
input, the metrics are printed too."""

from __future__ import annotations

import argparse
import json
import sys

from albert_jax import cli
from albert_jax.tasks.run import predict_file


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m finetune.predict", description=__doc__)
    parser.add_argument("--checkpoint", required=True, help="fine-tuned checkpoint directory")
    parser.add_argument(
        "--input", required=True, help="JSONL / TSV / CSV (CoNLL for tagging, RACE for choice)"
    )
    parser.add_argument("--output", help="predictions JSONL (default: INPUT.predictions.jsonl)")
    parser.add_argument("--batch_size", type=int, default=64)
    args = parser.parse_args(argv)
    output = args.output or args.input + ".predictions.jsonl"
    try:
        values = predict_file(args.checkpoint, args.input, output, args.batch_size)
    except cli.input_errors() as e:  # one line, exit 2, as every entry point
        return cli.report(e)
    print(json.dumps({"predictions": output, **values}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    cli.keep_freed_memory()  # as under cli.run: forward passes reuse their host buffers
    sys.exit(main())
