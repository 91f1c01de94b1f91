"""The one way every benchmark reports: a JSON document on stdout, and in `--out` when given."""

from __future__ import annotations

import json


def emit(result: dict, out: str | None = None) -> None:
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
