"""python -m albert_jax.convert SRC OUT [--unshare] [--to hf] [--config albert_config.json]
    [--overwrite]

SRC: an albert_jax checkpoint, a transformers ALBERT directory, a Google TF1 checkpoint
(directory or prefix), or a pretraining workdir (its newest readable step) or one of its steps
(WORKDIR/checkpoints/N). A fine-tuning head (sequence or token classification) is carried through,
--unshare included. OUT: written atomically; nothing is written if any check fails. An existing
OUT is replaced only if it is empty or holds a conversion's output (its .albert_jax_convert.json
lists every file), or with --overwrite; never SRC itself, a directory inside SRC or one holding SRC.

In Python: `convert(src, out, ...)`, this command's body: SRC read by
`albert_jax.train.workdir.load_source`, written by `albert_jax.checkpoints.source.write_converted`.
"""

from __future__ import annotations

import argparse
import sys

from albert_jax import cli
from albert_jax.checkpoints.source import check_out, write_converted
from albert_jax.train.workdir import load_source


def convert(
    src: str,
    out: str,
    *,
    to: str = "albert_jax",
    unshare: bool = False,
    config_path: str | None = None,
    overwrite: bool = False,
) -> list[str]:
    """Reads SRC, optionally unshares it, writes OUT (our format or 'hf'); returns report lines.
    OUT is replaced only if it is empty or convert wrote it (`check_out`), or with `overwrite`:
    checked before SRC is read, and again before OUT is replaced."""

    check_out(src, out, overwrite, to=to)
    source = load_source(src, config_path)
    return write_converted(source, src, out, to=to, unshare=unshare, overwrite=overwrite)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m albert_jax.convert", description=__doc__.split("\n\n")[1]
    )
    parser.add_argument("src", help="source checkpoint (format detected)")
    parser.add_argument("out", help="output directory")
    parser.add_argument("--to", choices=("albert_jax", "hf"), default="albert_jax")
    parser.add_argument("--unshare", action="store_true", help="write the not-shared layout")
    parser.add_argument("--config", help="TF1 only: albert_config.json if not next to SRC")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace OUT even if convert did not write it"
    )
    args = parser.parse_args(argv)
    try:
        report = convert(
            args.src, args.out, to=args.to, unshare=args.unshare, config_path=args.config,
            overwrite=args.overwrite,
        )  # fmt: skip
    except cli.InputError as e:  # one line, exit 2, as every entry point
        return cli.report(e)
    print("\n".join(report))
    return 0


def entry():  # the console script
    sys.exit(main())


if __name__ == "__main__":
    entry()
