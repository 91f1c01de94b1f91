"""An offline stand-in for a gs:// bucket: every `gs://B/...` path is stored under a local
directory, for our code (through etils.epath) and for the libraries that take the URI themselves
(orbax's TensorStore specs, ArrayRecord readers and writers).

    python tests/fake_bucket.py STORE -m pretrain --config ... --workdir gs://bucket/run

runs the module with the fake bucket in place (STORE/bucket/run/... on disk); in a test,
`with fake_gcs(store): ...` does the same in-process. Code that bypasses epath (os.path, open)
on a gs:// path writes under the current directory's `gs:` folder instead, which is how the
tests catch it.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import tempfile
from unittest import mock

PREFIX = "gs://"


def _translator(store: str):
    store = os.path.abspath(store)

    def to_local(p):
        p = os.fspath(p)
        return os.path.join(store, p[len(PREFIX) :]) if p.startswith(PREFIX) else p

    def to_uri(p):
        p = os.fspath(p)
        return PREFIX + os.path.relpath(p, store) if p.startswith(store + os.sep) else p

    return to_local, to_uri


@contextlib.contextmanager
def fake_gcs(store: str):
    from array_record.python import array_record_module
    from etils.epath import testing
    from orbax.checkpoint._src.path import gcs_utils
    from orbax.checkpoint._src.serialization import tensorstore_utils

    to_local, to_uri = _translator(store)

    def one(orig, path, *args, **kwargs):
        return orig(to_local(path), *args, **kwargs)

    def two(orig, path, dst, *args, **kwargs):
        return orig(to_local(path), to_local(dst), *args, **kwargs)

    def glob(orig, pattern):
        return [to_uri(p) for p in orig(to_local(pattern))]

    def walk(orig, top, **kwargs):
        for root, dirs, files in orig(to_local(top), **kwargs):
            yield to_uri(root), dirs, files

    fns = {n: one for n in ("exists", "isdir", "listdir", "makedirs", "mkdir", "open",
                            "remove", "rmtree", "stat")}  # fmt: skip
    fns.update(rename=two, replace=two, copy=two, glob=glob, walk=walk)
    writer, reader = array_record_module.ArrayRecordWriter, array_record_module.ArrayRecordReader

    def local_writer(path, *args, **kwargs):
        return writer(to_local(path), *args, **kwargs)

    def local_reader(path, *args, **kwargs):
        return reader(to_local(path), *args, **kwargs)

    with (
        testing.mock_epath(**fns),
        mock.patch.object(
            tensorstore_utils, "_normalize_path", lambda p: os.path.normpath(to_local(p))
        ),
        # orbax asks the GCS API whether the bucket has a hierarchical namespace
        mock.patch.object(gcs_utils, "is_hierarchical_namespace_enabled", lambda p: False),
        mock.patch.object(array_record_module, "ArrayRecordWriter", local_writer),
        mock.patch.object(array_record_module, "ArrayRecordReader", local_reader),
    ):
        yield


def _install_in_children(store: str) -> None:
    """Processes this one starts (grain's prefetch workers are spawned: fresh interpreters)
    get the fake bucket too, through a `sitecustomize` on their PYTHONPATH."""
    hook = tempfile.mkdtemp(prefix="fake_gcs_")
    with open(os.path.join(hook, "sitecustomize.py"), "w") as f:
        f.write(
            "import os, sys\n"
            f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
            "from fake_bucket import fake_gcs\n"
            f"_fake = fake_gcs({os.path.abspath(store)!r})\n"  # kept: collected, it would exit
            "_fake.__enter__()\n"
        )
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = hook + (os.pathsep + path if path else "")


if __name__ == "__main__":
    store, flag, module, *rest = sys.argv[1:]
    assert flag == "-m", "usage: fake_bucket.py STORE -m MODULE ARGS..."
    sys.argv = [module, *rest]
    _install_in_children(store)
    with fake_gcs(store):
        runpy.run_module(module, run_name="__main__", alter_sys=True)
