"""TPU topologies by name, as compile-only devices: a pod slice's program is built and measured on
a host that does not own it (`pretrain.compile`).

Names are MaxText's / Cloud TPU's: `v5e-256` (v5e and v6e count chips), `v4-256` and `v5p-128`
(count TensorCores: two per chip, so 128 and 64 chips), or libtpu's own `v5e:16x16` /
`v4:4x4x8`. `devices(name, slices)` needs `libtpu` (`uv sync --extra tpu`) and runs nothing.
The chip figures are the vendors' data-sheet numbers; the interconnect bandwidth is a rough
per-chip figure that ignores the topology's shape and the overlap of transfers with compute.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

from albert_jax.errors import InputError

GIB = 2**30
LIBTPU_ENV = {
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    "TPU_SKIP_MDS_QUERY": "1",
    "TPU_WORKER_HOSTNAMES": "localhost",
}


@dataclasses.dataclass(frozen=True)
class Chip:
    generation: str  # libtpu's name: v4, v5e, v5p, v6e
    hbm_bytes: int  # usable per chip
    peak_bf16_flops: float  # dense, per chip
    ici_bytes_per_s: float  # interconnect, per chip (rough)
    cores_per_chip: int  # what the "-N" of a name counts per chip
    dims: int  # 3: a torus (v4, v5p); 2: a grid (v5e, v6e)


CHIPS = {
    "v4": Chip("v4", 32 * GIB, 275e12, 300e9, 2, 3),
    "v5e": Chip("v5e", int(15.75 * GIB), 197e12, 200e9, 1, 2),
    "v5p": Chip("v5p", 95 * GIB, 459e12, 600e9, 2, 3),
    "v6e": Chip("v6e", 32 * GIB, 918e12, 448e9, 1, 2),
}
_ALIASES = {"v5litepod": "v5e", "v5lite": "v5e", "v6lite": "v6e"}


class TopologyError(InputError):
    pass


@dataclasses.dataclass(frozen=True)
class Topology:
    name: str  # as given
    chip: Chip
    shape: tuple[int, ...]  # chips along each axis of one slice
    slices: int = 1

    @property
    def libtpu_name(self) -> str:
        return f"{self.chip.generation}:{'x'.join(map(str, self.shape))}"

    @property
    def chips(self) -> int:
        return math.prod(self.shape) * self.slices

    def devices(self):
        """The compile-only devices of every slice (one per chip)."""
        from jax.experimental import topologies

        # Compile-only devices own no chip: let several processes load libtpu at once (it locks
        # the chips for one otherwise), and skip the TPU VM metadata lookups a host has none of.
        for key, value in LIBTPU_ENV.items():
            os.environ.setdefault(key, value)
        kwargs = {"num_slices": self.slices} if self.slices > 1 else {}
        if self.chip.generation in ("v4", "v5p"):
            kwargs["chip_config_name"] = "megacore"  # one device per chip
        try:
            desc = topologies.get_topology_desc(
                platform="tpu", topology_name=self.libtpu_name, **kwargs
            )
        except Exception as e:  # no libtpu, or a shape libtpu does not know
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise TopologyError(
                f"cannot build TPU topology {self.libtpu_name} ({self.name}): {first}; "
                "compiling for TPU needs libtpu (`uv sync --extra tpu`)"
            ) from e
        return list(desc.devices)


def _grid(chips: int, dims: int) -> tuple[int, ...]:
    """The usual slice shape for a power-of-two chip count: as square (cube) as possible,
    smallest axis first (v4-256 -> 4x4x8, v5e-128 -> 8x16)."""
    if chips < 1 or chips & (chips - 1):
        raise TopologyError(f"{chips} chips: expected a power of two")
    shape = [1] * dims
    n, i = chips, 0
    if dims == 3 and chips >= 4:  # a v4 / v5p slice starts at 2x2x1
        shape, n = [2, 2, 1], chips // 4
        i = 2
    while n > 1:
        shape[i % dims] *= 2
        n //= 2
        i += 1
    return tuple(shape) if 1 in shape else tuple(sorted(shape))  # v4-8 is 2x2x1


def parse(name: str, slices: int = 1) -> Topology:
    """`v5e-256`, `v4-256` (TensorCores), `v5p-128`, `v6e-64` or `v5e:16x16`, `v4:4x4x8`."""
    if slices < 1:
        raise TopologyError(f"--slices {slices}: expected 1 or more")
    text = name.strip().lower()
    m = re.fullmatch(r"(v\w+?)[:](\d+(?:x\d+)*)", text)
    if m:
        gen = _ALIASES.get(m.group(1), m.group(1))
        if gen not in CHIPS:
            raise TopologyError(f"topology {name!r}: unknown TPU generation {m.group(1)!r}")
        shape = tuple(int(d) for d in m.group(2).split("x"))
        return Topology(name, CHIPS[gen], shape, slices)
    m = re.fullmatch(r"(v\w+?)-(\d+)", text)
    if not m:
        raise TopologyError(
            f"topology {name!r}: expected e.g. v5e-256, v4-128, v5p-128 or v5e:4x4, v4:2x2x1"
        )
    gen = _ALIASES.get(m.group(1), m.group(1))
    if gen not in CHIPS:
        raise TopologyError(
            f"topology {name!r}: unknown TPU generation {m.group(1)!r} (known: {', '.join(CHIPS)})"
        )
    chip = CHIPS[gen]
    count = int(m.group(2))
    if count % chip.cores_per_chip:
        raise TopologyError(f"topology {name!r}: {gen} names count TensorCores, two per chip")
    return Topology(name, chip, _grid(count // chip.cores_per_chip, chip.dims), slices)
