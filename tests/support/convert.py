"""The converters' reference fixtures (tests/fixtures/make_reference.py) as the conversion tests
read them: a fixture's path, its reference outputs and the largest difference from them, and the
bytes of every file under a directory (to show that nothing was written)."""

import os

import numpy as np

from support import ROOT

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
OUTPUTS = ("sequence_output", "pooled_output", "mlm_logits", "sop_logits", "hidden_states")


def fixture(name):
    return os.path.join(FIXTURES, name)


def reference(name):
    return dict(np.load(os.path.join(FIXTURES, "reference", f"{name}.npz")))


def max_diffs(got, ref):
    return {k: float(np.abs(got[k] - ref[k]).max()) for k in OUTPUTS}


# --- OUT: never the user's files, never the source (issue 39) -------------------------------------
def tree(directory):
    """Every path under `directory` with its bytes (None for a directory)."""
    out = {}
    for root, dirs, names in os.walk(directory):
        out.update({os.path.relpath(os.path.join(root, d), directory): None for d in dirs})
        for name in names:
            with open(os.path.join(root, name), "rb") as f:
                out[os.path.relpath(f.name, directory)] = f.read()
    return out
