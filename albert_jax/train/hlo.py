"""What a compiled program's collectives move, read from its optimized HLO text.

XLA's `cost_analysis()` counts every instruction once, but a collective inside a `while` body runs
once per iteration: the layer scan's trip count times the micro-batch scan's. Here every
computation gets the number of times it runs per program run (the product of the
`known_trip_count`s of the loops around it), and each collective's bytes are counted that many
times. Asynchronous collectives appear as `*-start` / `*-done` pairs: the start is counted.

Bytes per instruction, per chip: an all-gather's result (the gathered array), a reduce-scatter's
operand, an all-reduce's operand, a collective-permute's operand, an all-to-all's operand. On TPU a
gather feeding a matmul may be decomposed into a ring of collective-permutes; they are reported
under their own kind.
"""

from __future__ import annotations

import collections
import re

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")
DTYPE_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1,
    "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4,
    "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
}  # fmt: skip

_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s+\(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.+?)\s+([\w\-]+)\((.*)$")
_ARRAY = re.compile(r"\b([a-z]\w*)\[([\d,]*)\]")
_CALLS = re.compile(r"\b(?:body|condition|to_apply|calls|branch_computations)=\{?([^}\s]+)")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


def _array_bytes(shape_text: str) -> list[int]:
    """Bytes of each array in a result type: `f32[4,8]{1,0}` or a tuple of them."""
    out = []
    for dtype, dims in _ARRAY.findall(shape_text):
        if dtype not in DTYPE_BYTES:
            continue
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        out.append(n * DTYPE_BYTES[dtype])
    return out


def _parse(text: str):
    """{computation: [(result type, opcode, rest of line)]}, the entry's name."""
    computations: dict[str, list] = {}
    entry, current = None, None
    for line in text.splitlines():
        m = _COMPUTATION.match(line)
        if m:
            current = m.group(1)
            computations[current] = []
            if line.startswith("ENTRY"):
                entry = current
            continue
        if current is None:
            continue
        if line.strip() == "}":
            current = None
            continue
        m = _INSTRUCTION.match(line)
        if m:
            computations[current].append(m.groups())
    return computations, entry


def _trip_count(rest: str, computations) -> int:
    """A while loop's iterations: its `known_trip_count`, else the constant its condition
    compares the counter against (`i < N`, as scans lower), else 1."""
    m = _TRIP.search(rest)
    if m:
        return int(m.group(1))
    m = re.search(r"condition=%?([\w.\-]+)", rest)
    constants = [
        int(c)
        for _, opcode, args in computations.get(m.group(1) if m else "", [])
        if opcode == "constant"
        for c in re.findall(r"^(-?\d+)\)", args)
    ]
    return constants[0] if len(constants) == 1 and constants[0] > 0 else 1


def _multiplicities(computations, entry) -> dict[str, int]:
    """How many times each computation runs per run of the entry computation."""
    callees = collections.defaultdict(list)  # caller -> [(callee, times per caller run)]
    for name, instructions in computations.items():
        for _, opcode, rest in instructions:
            trip = 1
            if opcode == "while":
                trip = _trip_count(rest, computations)
            for group in _CALLS.findall(rest):
                for callee in group.split(","):
                    callee = callee.strip().lstrip("%")
                    if callee in computations:
                        callees[name].append((callee, trip))
    times = collections.Counter({entry: 1})
    order, seen = [], set()

    def visit(name):  # callers before callees (the call graph is acyclic)
        if name in seen:
            return
        seen.add(name)
        for callee, _ in callees[name]:
            visit(callee)
        order.append(name)

    visit(entry)
    for name in reversed(order):
        for callee, trip in callees[name]:
            times[callee] += times[name] * trip
    return dict(times)


def collective_stats(text: str) -> dict[str, dict[str, float]]:
    """Per collective kind: `count` (instructions in the program), `executed` (instructions run
    per program run, through loop trip counts), `bytes` (per chip, each instruction once) and
    `executed_bytes` (per chip per program run)."""
    computations, entry = _parse(text)
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    times = _multiplicities(computations, entry)
    stats = {k: {"count": 0, "executed": 0, "bytes": 0, "executed_bytes": 0} for k in KINDS}
    # The TPU compiler splits an asynchronous collective into a chain of fusions, each holding a
    # copy of the instruction under the same channel_id and chain_id: one collective, counted
    # once (channel ids alone are shared by unrelated collectives).
    seen: dict[str, tuple] = {}
    found = []
    for name, instructions in computations.items():
        n = times.get(name, 0)
        for shape, opcode, rest in instructions:
            kind = opcode.removesuffix("-start")
            if kind not in stats or opcode.endswith("-done"):
                continue
            channel = re.search(r"channel_id=(\d+)", rest)
            chain = re.search(r'chain_id="(\d+)"', rest)
            if channel and chain:
                key = (kind, channel.group(1), chain.group(1))
                if key in seen and seen[key][1] >= n:
                    continue
                if key in seen:
                    found.remove(seen[key])
                seen[key] = (shape, n, kind, rest, opcode)
                found.append(seen[key])
            else:
                found.append((shape, n, kind, rest, opcode))
    for shape, n, kind, rest, opcode in found:
        sizes = _array_bytes(shape)
        if not sizes:
            continue
        if opcode.endswith("-start") and len(sizes) > 1:
            # (operand, result[, context...]): the result for a gather, else the operand
            size = sizes[1] if kind == "all-gather" else sizes[0]
        elif kind == "reduce-scatter":
            size = sum(sizes) * _scatter_factor(rest)  # the operand: result x shards
        else:
            size = sum(sizes)
        s = stats[kind]
        s["count"] += 1
        s["executed"] += n
        s["bytes"] += size
        s["executed_bytes"] += size * n
    return stats


def _scatter_factor(rest: str) -> int:
    """The number of shards a reduce-scatter splits its operand into (its replica group size)."""
    m = re.search(r"replica_groups=\{\{([\d,]+)\}", rest)
    if m:
        return len(m.group(1).split(","))
    m = re.search(r"replica_groups=\[\d+,(\d+)\]", rest)
    return int(m.group(1)) if m else 1
