"""`python -m finetune.baseline NAME --data DIR`: dev/test metrics of a simple non-neural baseline,
one JSON line: sentiment, headlines, library, poems, hsk and genre TF-IDF + logistic regression; ner
greedy longest match of train's entity strings; seg each character's most frequent train tag;
entities the ner dictionary's matches written as the generation target; relations every train
(subject, object) pair found in a text, with its usual predicate."""

from __future__ import annotations

import argparse
import json
import os

from albert_jax.experiments import baselines


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m finetune.baseline", description=__doc__)
    parser.add_argument("name", choices=sorted(baselines.BASELINES))
    parser.add_argument("--data", help="dataset directory (default: data/finetune/NAME)")
    args = parser.parse_args(argv)
    data_dir = args.data or os.path.join("data", "finetune", args.name)
    result = baselines.BASELINES[args.name](data_dir)
    print(json.dumps({"task": args.name, "data": data_dir, **result}))
    return result


def entry():  # the console script (main returns its result, for tests)
    main()


if __name__ == "__main__":
    entry()
