"""A pure-NumPy reader for TF1 ("V2 format") checkpoints, so importing Google's ALBERT releases
never needs TensorFlow.

A checkpoint `PREFIX` is `PREFIX.index` plus `PREFIX.data-SSSSS-of-NNNNN` shards. The index is a
LevelDB-style SSTable (uncompressed blocks, each followed by a type byte and a masked CRC32C)
mapping tensor names to `BundleEntryProto`s (dtype, shape, shard, offset, size, CRC32C); the
empty key holds the `BundleHeaderProto` (shard count, endianness). Tensor bytes are raw,
little-endian, C order. Every block and tensor is checksummed, so truncation and corruption are
reported instead of silently producing wrong weights.
"""

from __future__ import annotations

import os
import struct

import numpy as np

from albert_jax.checkpoints.errors import ConversionError

_MAGIC = 0xDB4775248B80FB57
# TF DataType enum -> NumPy dtype (the types a model checkpoint holds).
_DTYPES = {
    1: np.float32,
    2: np.float64,
    3: np.int32,
    4: np.uint8,
    5: np.int16,
    6: np.int8,
    9: np.int64,
    10: np.bool_,
    19: np.float16,
}
_DT_BFLOAT16 = 14


# --- CRC32C (Castagnoli) -------------------------------------------------------------------------
def _crc_table() -> np.ndarray:
    table = np.zeros(256, np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table[i] = c
    return table


_TABLE = _crc_table()
_TABLE_LIST = [int(x) for x in _TABLE]


def _crc_bytes(crc: int, data: bytes) -> int:
    """Raw (no pre/post inversion) CRC register update, byte by byte."""
    t = _TABLE_LIST
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def _zeros_operator(n: int) -> list[list[int]]:
    """Per-byte lookup tables of the linear map 'feed n zero bytes' on the CRC register."""
    columns = [_crc_bytes(1 << bit, bytes(n)) for bit in range(32)]
    tables = []
    for byte in range(4):
        row = []
        for v in range(256):
            acc = 0
            for bit in range(8):
                if v >> bit & 1:
                    acc ^= columns[8 * byte + bit]
            row.append(acc)
        tables.append(row)
    return tables


_LANE = 4096
_LANE_OP = None


def crc32c(data: bytes | np.ndarray) -> int:
    """Standard CRC32C. Long inputs run as many parallel 4 KiB lanes in NumPy whose registers are
    then chained with the 'shift by 4 KiB of zeros' operator (CRC is linear over GF(2))."""
    global _LANE_OP
    buf = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8)
    head = len(buf) % _LANE
    crc = _crc_bytes(0xFFFFFFFF, buf[:head].tobytes())
    lanes = buf[head:].reshape(-1, _LANE)
    if len(lanes):
        if _LANE_OP is None:
            _LANE_OP = _zeros_operator(_LANE)
        regs = np.zeros(len(lanes), np.uint32)
        for j in range(_LANE):
            regs = _TABLE[(regs ^ lanes[:, j]) & 0xFF] ^ (regs >> 8)
        t0, t1, t2, t3 = _LANE_OP
        for r in regs.tolist():
            crc = t0[crc & 0xFF] ^ t1[crc >> 8 & 0xFF] ^ t2[crc >> 16 & 0xFF] ^ t3[crc >> 24] ^ r
    return crc ^ 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


# --- protobuf wire format ------------------------------------------------------------------------
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs of a serialized message; values are ints or bytes."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = struct.unpack_from("<Q", buf, pos)[0], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + n], pos + n
        elif wire == 5:
            value, pos = struct.unpack_from("<I", buf, pos)[0], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.append((field, value))
    if pos != len(buf):
        raise ValueError("truncated message")
    return out


class _Entry:
    """A BundleEntryProto: where one tensor's bytes are."""

    def __init__(self, buf: bytes):
        self.dtype, self.shape, self.shard, self.offset, self.size, self.crc = 0, (), 0, 0, 0, None
        self.sliced = False
        for field, value in _fields(buf):
            if field == 1:
                self.dtype = value
            elif field == 2:
                self.shape = tuple(
                    next((v for f, v in _fields(dim) if f == 1), 0)
                    for f, dim in _fields(value)
                    if f == 2
                )
            elif field == 3:
                self.shard = value
            elif field == 4:
                self.offset = value
            elif field == 5:
                self.size = value
            elif field == 6:
                self.crc = value
            elif field == 7:
                self.sliced = True


# --- SSTable -------------------------------------------------------------------------------------
def _block(data: bytes, offset: int, size: int, what: str) -> bytes:
    if offset + size + 5 > len(data):
        raise ValueError(f"{what} block runs past the end of the file")
    contents, kind = data[offset : offset + size], data[offset + size]
    (masked,) = struct.unpack_from("<I", data, offset + size + 1)
    if crc32c(data[offset : offset + size + 1]) != unmask_crc(masked):
        raise ValueError(f"checksum mismatch in {what} block at offset {offset}")
    if kind != 0:
        raise ValueError(f"compressed SSTable blocks (type {kind}) are not supported")
    return contents


def _block_entries(block: bytes) -> list[tuple[bytes, bytes]]:
    (num_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * num_restarts
    out, pos, key = [], 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        vlen, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        out.append((key, block[pos : pos + vlen]))
        pos += vlen
    return out


def _read_table(data: bytes) -> list[tuple[bytes, bytes]]:
    if len(data) < 48 or struct.unpack_from("<Q", data, len(data) - 8)[0] != _MAGIC:
        raise ValueError("not an SSTable (bad magic number: truncated or not a .index file)")
    footer = data[-48:]
    _, pos = _varint(footer, 0)  # metaindex handle (unused)
    _, pos = _varint(footer, pos)
    index_offset, pos = _varint(footer, pos)
    index_size, _ = _varint(footer, pos)
    entries = []
    for _, handle in _block_entries(_block(data, index_offset, index_size, "index")):
        offset, p = _varint(handle, 0)
        size, _ = _varint(handle, p)
        entries.extend(_block_entries(_block(data, offset, size, "data")))
    return entries


class TFCheckpoint:
    """Tensors of a TF1 checkpoint by name, read lazily and verified against their CRC32C."""

    def __init__(self, prefix: str | os.PathLike):
        self.prefix = os.fspath(prefix)
        index = self.prefix + ".index"
        try:
            with open(index, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ConversionError(f"cannot read TF checkpoint index {index}: {e}") from e
        try:
            table = _read_table(data)
            header = dict(_fields(table[0][1])) if table and table[0][0] == b"" else {}
            self.entries = {k.decode(): _Entry(v) for k, v in table if k}
        except (ValueError, struct.error, IndexError, UnicodeDecodeError) as e:
            raise ConversionError(f"corrupted TF checkpoint index {index}: {e}") from e
        if header.get(2, 0) != 0:
            raise ConversionError(f"{index}: big-endian checkpoints are not supported")
        self.num_shards = header.get(1, 1)

    def names(self) -> list[str]:
        return sorted(self.entries)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.entries[name].shape

    def shard_path(self, shard: int) -> str:
        return f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}"

    def read(self, name: str) -> np.ndarray:
        e = self.entries[name]
        if e.sliced:
            raise ConversionError(f"{self.prefix}: partitioned variable {name!r} not supported")
        if e.dtype == _DT_BFLOAT16:
            import ml_dtypes  # a JAX dependency

            dtype = np.dtype(ml_dtypes.bfloat16)
        elif e.dtype in _DTYPES:
            dtype = np.dtype(_DTYPES[e.dtype])
        else:
            raise ConversionError(f"{self.prefix}: tensor {name!r} has unsupported dtype {e.dtype}")
        expected = int(np.prod(e.shape, dtype=np.int64)) * dtype.itemsize
        path = self.shard_path(e.shard)
        if e.size != expected:
            raise ConversionError(
                f"{path}: tensor {name!r} has {e.size} bytes, its shape {e.shape} needs {expected}"
            )
        try:
            with open(path, "rb") as f:
                f.seek(e.offset)
                raw = f.read(e.size)
        except OSError as err:
            raise ConversionError(f"cannot read TF checkpoint data {path}: {err}") from err
        if len(raw) != e.size:
            raise ConversionError(f"{path} is truncated: tensor {name!r} is cut off")
        if e.crc is not None and crc32c(raw) != unmask_crc(e.crc):
            raise ConversionError(f"{path} is corrupted: checksum mismatch in tensor {name!r}")
        return np.frombuffer(raw, dtype.newbyteorder("<")).reshape(e.shape).copy()
