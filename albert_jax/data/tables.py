"""Dataset-library inputs: rows of parquet / arrow files, Hugging Face datasets and TFDS datasets.

A split of a fine-tuning task (`task.train` ...) or an entry of `data.input_files` may name, in
place of a text file, one of these *table references*:

* ``PATH.parquet``, ``PATH.arrow``, ``PATH.feather``: a local or bucket file read with pyarrow
  (``.arrow``: the Arrow IPC file or stream format, as `datasets` writes its cache files).
* ``hf:DIR`` / ``hf:DIR:SPLIT``: a directory written by `datasets`' ``Dataset.save_to_disk``
  (no split) or ``DatasetDict.save_to_disk`` (``SPLIT`` picks one), read with ``load_from_disk``.
* ``hf:NAME[:CONFIG]:SPLIT``: ``datasets.load_dataset(NAME, CONFIG, split=SPLIT)``, as
  `datasets` itself does it: from the hub (or its local cache, ``HF_HOME``; with
  ``HF_HUB_OFFLINE=1`` the cache only), or a local folder of data files.
* ``tfds:NAME[/CONFIG][:VERSION]:SPLIT``: a prepared TFDS dataset in ``data_dir`` (the TFDS
  default when none is given). ArrayRecord datasets are read with ``as_data_source`` (no
  TensorFlow); TFRecord ones need TensorFlow (the ``tf`` extra), else an error says so.

Each row comes as ``(where, {column: value})``, ``where`` = ``REF:row N`` (N from 0, as
``dataset[N]``), with plain Python values: bytes decoded as UTF-8, NumPy values as numbers and
lists, and class labels (a `datasets` or TFDS ``ClassLabel``, also in a sequence) as their names,
so that labels, tags and predictions read as words; a negative class id (GLUE's unlabelled test
rows: -1) is None. `datasets` and pyarrow are the ``datasets`` extra; without them a reference is a
one-line error naming it.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence

from etils import epath

from albert_jax.errors import InputError

FILE_EXTENSIONS = (".parquet", ".arrow", ".feather")
PREFIXES = ("hf:", "tfds:")
_URI = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)
_SAVED = ("dataset_dict.json", "state.json")  # what save_to_disk leaves in its directory
_EXTRA = "pip install 'albert-jax[datasets]' (or uv sync --extra datasets)"


class TableError(InputError):
    """A table reference that cannot be read; the message names it."""


class ColumnError(TableError):
    """A mapped column the table does not have; the message names the columns it has."""


def is_reference(ref) -> bool:
    """Whether ``ref`` names a dataset (``hf:...``, ``tfds:...``) rather than a path."""
    return isinstance(ref, str) and ref.startswith(PREFIXES)


def is_table(ref) -> bool:
    """Whether ``ref`` is read by this module: a reference or a parquet / arrow / feather file."""
    ref = os.fspath(ref) if isinstance(ref, os.PathLike) else ref
    if not isinstance(ref, str):
        return False
    return is_reference(ref) or os.path.splitext(ref)[1].lower() in FILE_EXTENSIONS


@dataclasses.dataclass
class Table:
    ref: str  # as the user wrote it, for messages
    columns: list[str]
    length: int
    _rows: Callable[[], Iterator[dict]]

    def __len__(self) -> int:
        return self.length

    def rows(self) -> Iterator[tuple[str, dict]]:
        """``(REF:row N, record)`` for every row, in the table's order."""
        for i, rec in enumerate(self._rows()):
            yield f"{self.ref}:row {i}", rec

    def require(self, mapped: dict[str, str], fix: str = "") -> None:
        """Every column of ``mapped`` ({setting: column}; empty columns skipped) is one of the
        table's, else a `ColumnError` naming the columns it has and the setting to change
        (``--config.task.SETTING=COLUMN``; ``fix``: what to say instead)."""
        for setting, column in mapped.items():
            if column and column not in self.columns:
                raise ColumnError(
                    f"{self.ref}: no column {column!r} (the rows have: "
                    f"{', '.join(self.columns)}); "
                    + (fix or f"name it with --config.task.{setting}=COLUMN")
                )


def open_table(ref: str | os.PathLike, data_dir: str | None = None) -> Table:
    """The table ``ref`` names (see the module's doc); ``data_dir`` is where TFDS datasets are."""
    ref = os.fspath(ref)
    if ref.startswith("hf:"):
        return _hf_table(ref)
    if ref.startswith("tfds:"):
        return _tfds_table(ref, data_dir or None)
    if os.path.splitext(ref)[1].lower() in FILE_EXTENSIONS:
        return _arrow_file(ref)
    kinds = ", ".join(FILE_EXTENSIONS)
    raise TableError(f"{ref}: not a table (a {kinds} file, hf:... or tfds:...)")


def missing(ref: str) -> str:
    """Why ``ref`` names nothing that exists ('' when it may: hub names and TFDS datasets are
    only found when read): a missing file, or a missing directory named as a path."""
    if not is_reference(ref):
        return "" if epath.Path(ref).exists() else f"{ref} does not exist"
    if ref.startswith("hf:"):
        name = _hf_parts(ref)[0]
        if _pathlike(name) and not epath.Path(name).exists():
            return f"{ref}: {name} does not exist"
    return ""


# ---------------------------------------------------------------- values


def _plain(value):
    """Python values of what pyarrow / TFDS give: bytes as str, NumPy scalars and arrays as
    numbers and lists."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalar or array
        return _plain(value.tolist())
    return value


def _class_name(names: Sequence[str]):
    return lambda v: None if v is None or v < 0 else names[v]


def _labeller(spec) -> Callable | None:
    """A function turning a column's class ids into names, from its `datasets` feature spec as
    JSON (`Features.to_dict()`, also the ``huggingface`` metadata of the files `datasets`
    writes): a ClassLabel, or a sequence of them. None: nothing to change."""
    if isinstance(spec, list) and len(spec) == 1:  # the old `[feature]` form of a sequence
        spec = {"_type": "Sequence", "feature": spec[0]}
    if not isinstance(spec, dict):
        return None
    kind = spec.get("_type")
    if kind == "ClassLabel" and spec.get("names"):
        return _class_name(list(spec["names"]))
    if kind in ("Sequence", "List", "LargeList"):
        inner = _labeller(spec.get("feature"))
        if inner is None:
            return None
        return lambda v: v if not isinstance(v, list) else [inner(x) for x in v]
    return None


def _labelled(rows: Iterator[dict], labellers: dict[str, Callable]) -> Iterator[dict]:
    for rec in rows:
        for column, f in labellers.items():
            if column in rec:
                rec[column] = f(rec[column])
        yield rec


def _labellers(features: dict) -> dict[str, Callable]:
    out = {}
    for column, spec in (features or {}).items():
        if (f := _labeller(spec)) is not None:
            out[column] = f
    return out


def _require(module: str, ref: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise TableError(
            f"{ref}: reading it needs the {module.split('.')[0]} package: {_EXTRA}"
        ) from None


# ---------------------------------------------------------------- parquet / arrow / feather


def _arrow_file(ref: str) -> Table:
    pa = _require("pyarrow", ref)
    if not epath.Path(ref).exists():
        raise TableError(f"{ref}: no such file")
    bad = f"{ref}: not a readable {os.path.splitext(ref)[1]} file"
    try:
        if ref.lower().endswith(".parquet"):  # read a row group at a time (a corpus may be big)
            pq = _require("pyarrow.parquet", ref)
            with epath.Path(ref).open("rb") as f:
                meta = pq.ParquetFile(f).metadata
            schema, length = meta.schema.to_arrow_schema(), meta.num_rows

            def batches():
                with epath.Path(ref).open("rb") as f:
                    yield from pq.ParquetFile(f).iter_batches(batch_size=1024)

        else:
            table = _read_ipc(pa, ref)
            schema, length = table.schema, table.num_rows

            def batches():
                yield from table.to_batches(max_chunksize=1024)

    except (OSError, pa.ArrowException) as e:
        raise TableError(f"{bad} ({_first_line(e)})") from None
    features = {}
    if meta_json := (schema.metadata or {}).get(b"huggingface"):
        try:
            features = json.loads(meta_json).get("info", {}).get("features") or {}
        except (ValueError, AttributeError):
            features = {}
    labellers = _labellers(features)

    def rows():
        try:
            for batch in batches():
                yield from _labelled((_plain(r) for r in batch.to_pylist()), labellers)
        except (OSError, pa.ArrowException) as e:
            raise TableError(f"{bad} ({_first_line(e)})") from None

    return Table(ref, list(schema.names), length, rows)


def _read_ipc(pa, ref: str):
    """An Arrow IPC file (feather v2, ``.arrow``) or stream (the `datasets` cache files)."""
    ipc = _require("pyarrow.ipc", ref)
    data = epath.Path(ref).read_bytes()
    try:
        return ipc.open_file(pa.BufferReader(data)).read_all()
    except pa.ArrowInvalid:
        try:
            return ipc.open_stream(pa.BufferReader(data)).read_all()
        except pa.ArrowInvalid:
            feather = _require("pyarrow.feather", ref)  # feather v1
            return feather.read_table(pa.BufferReader(data))


# ---------------------------------------------------------------- Hugging Face datasets


def _pathlike(name: str) -> bool:
    return bool(_URI.match(name)) or name.startswith(("/", ".", "~")) or os.path.isdir(name)


def _hf_parts(ref: str) -> tuple[str, str | None, str | None]:
    """``hf:NAME[:CONFIG][:SPLIT]`` -> (NAME, CONFIG, SPLIT); a URI's ``scheme://`` stays."""
    body = ref[len("hf:") :]
    scheme = _URI.match(body)
    head = scheme.group(0) if scheme else ""
    parts = body[len(head) :].split(":")
    if not parts[0] or len(parts) > 3 or not all(parts):
        raise TableError(f"{ref}: expected hf:NAME[:CONFIG]:SPLIT or hf:DIR[:SPLIT]")
    name = head + parts[0]
    if len(parts) == 1:
        return name, None, None
    if len(parts) == 2:
        return name, None, parts[1]
    return name, parts[1], parts[2]


def _hf_dataset(ref: str):
    datasets = _require("datasets", ref)
    name, config, split = _hf_parts(ref)
    saved = epath.Path(name)
    if _pathlike(name) and any((saved / f).exists() for f in _SAVED):
        try:
            ds = datasets.load_from_disk(name)
        except (OSError, ValueError) as e:
            raise TableError(f"{ref}: {_first_line(e)}") from None
        if config:
            raise TableError(f"{ref}: a saved dataset has no configs; name it hf:{name}:SPLIT")
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                got, what = ", ".join(ds), f"no split {split!r}" if split else "name a split"
                raise TableError(f"{ref}: {what} (the dataset has: {got}); hf:DIR:SPLIT")
            return ds[split]
        if split:
            raise TableError(f"{ref}: {name} holds one dataset, no splits: name it hf:{name}")
        return ds
    if _pathlike(name) and not saved.exists():
        raise TableError(f"{ref}: {name} does not exist")
    if not split:
        raise TableError(f"{ref}: name the split, hf:{name}{':' + config if config else ''}:SPLIT")
    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as e:  # hub, cache and builder errors of every kind: one line naming ref
        offline = " (offline: only the local datasets cache is read)"
        hint = offline if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
        raise TableError(f"{ref}: {type(e).__name__}: {_first_line(e)}{hint}") from None


def _hf_table(ref: str) -> Table:
    ds = _hf_dataset(ref)
    labellers = _labellers(ds.features.to_dict())
    return Table(ref, list(ds.column_names), len(ds), lambda: _labelled(iter(ds), labellers))


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0]


# ---------------------------------------------------------------- TFDS


def _tfds_table(ref: str, data_dir: str | None) -> Table:
    tfds = importlib.import_module("tensorflow_datasets")  # a core dependency
    name, sep, split = ref[len("tfds:") :].rpartition(":")
    if not sep or not name or not split:
        raise TableError(f"{ref}: expected tfds:NAME[/CONFIG][:VERSION]:SPLIT")
    try:
        builder = tfds.builder(name, data_dir=data_dir)
        info = builder.info
        if split not in info.splits:
            got = ", ".join(info.splits)
            raise TableError(f"{ref}: no split {split!r} (the dataset has: {got})")
    except TableError:
        raise
    except Exception as e:  # not prepared in data_dir, unknown name, ...
        where = f" in {data_dir}" if data_dir else ""
        raise TableError(f"{ref}: {type(e).__name__}{where}: {_first_line(e)}") from None
    features = info.features
    labellers = {}
    for column, feature in features.items():
        inner = getattr(feature, "feature", None)  # a Sequence's element
        if isinstance(feature, tfds.features.ClassLabel):
            labellers[column] = _class_name(feature.names)
        elif isinstance(inner, tfds.features.ClassLabel):
            names = _class_name(inner.names)
            labellers[column] = lambda v, f=names: [f(x) for x in v]
    fmt = str(getattr(info, "file_format", "") or "")
    if "array_record" in fmt.lower():
        source = builder.as_data_source(split=split)

        def rows():
            for i in range(len(source)):
                yield _plain(source[i])

        length = len(source)
    else:
        try:
            importlib.import_module("tensorflow")
        except ImportError:
            raise TableError(
                f"{ref}: stored as {fmt or 'tfrecord'}, which TFDS reads only with TensorFlow: "
                "pip install 'albert-jax[tf]', or prepare the dataset with "
                "file_format='array_record'"
            ) from None

        def rows():
            yield from (_plain(r) for r in tfds.as_numpy(builder.as_dataset(split=split)))

        length = info.splits[split].num_examples
    return Table(ref, list(features.keys()), length, lambda: _labelled(rows(), labellers))
