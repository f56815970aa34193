"""AutoTVM knobs of the VTA templates and the `Config` (one point of a schedule space).

Knob order, split candidates and the mixed-radix index are AutoTVM's (docs/vta.md §7.2, §8):
- conv2d_packed.vta: tile_b, tile_h, tile_w, tile_ci, tile_co (splits), oc_nthread, h_nthread
- dense_packed.vta:  tile_b, tile_ci, tile_co (splits), oc_nthread
A split of extent n lists one entity `[n // f, f]` per f in `get_factors(n)` (ascending); an "ot"
knob lists `[1, 2]`. The first-defined knob is the least-significant index digit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.mapping.batch import KnobValue
from codesign.workloads.layers import Conv2D, Layer

CONV_KNOBS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")
DENSE_KNOBS = ("tile_b", "tile_ci", "tile_co", "oc_nthread")
NTHREAD_CHOICES = (1, 2)  # "VTA only supports 2 virtual threads" (docs/vta.md §7.3)
#: A knob's value in an AutoTVM entity: a split `[outer, inner]` (a list; a tuple from code) or
#: a thread count.


def plain_knobs(knobs: dict[str, KnobValue]) -> dict[str, list[int] | int]:
    """Knob values as JSON-native lists/ints (entities may hold tuples or NumPy ints)."""
    return {k: [int(x) for x in v] if isinstance(v, (list, tuple)) else int(v) for k, v in knobs.items()}


def get_factors(n: int) -> list[int]:
    """AutoTVM's `get_factors`: sorted divisors of n (docs/vta.md §7.2)."""
    small = [i for i in range(1, math.isqrt(n) + 1) if n % i == 0]
    return sorted(set(small) | {n // i for i in small})


@dataclass(frozen=True)
class Knob:
    """One AutoTVM knob: kind "sp" (split; candidates are `[outer, inner]` lists) or "ot"."""

    name: str
    kind: str
    candidates: tuple

    def __len__(self) -> int:
        return len(self.candidates)

    def position(self, value: Any) -> int:  # Any: a value read from a user's file, checked here
        """Index of `value` among the candidates; splits match on the inner factor and accept
        `[-1, f]` or the explicit `[n // f, f]` (docs/vta.md §7.2)."""
        if self.kind == "sp":
            ok = isinstance(value, (list, tuple)) and len(value) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value)
            if ok:
                outer, inner = value
                for pos, c_outer in self._by_inner.get(inner, ()):
                    if outer in (-1, c_outer):
                        return pos
        elif type(value) is int:  # the usual value: a lookup (the first equal candidate, as the scan)
            pos = self._by_value.get(value)
            if pos is not None:
                return pos
        else:
            for pos, cand in enumerate(self.candidates):
                if value == cand and not isinstance(value, bool):
                    return pos
        allowed = ", ".join(str(list(c)) if self.kind == "sp" else str(c) for c in self.candidates)
        raise ConfigError(f"knob {self.name}={value!r} is not a candidate; allowed: {allowed}")

    @property
    def _by_value(self) -> dict[Any, int]:
        """An "ot" knob's position of each hashable candidate (its first)."""
        table = self.__dict__.get("_value_table")
        if table is None:
            table = {}
            for pos, cand in enumerate(self.candidates):
                try:
                    table.setdefault(cand, pos)
                except TypeError:  # an unhashable candidate: found by `position`'s scan
                    pass
            self.__dict__["_value_table"] = table
        return table

    @property
    def _by_inner(self) -> dict[int, tuple[tuple[int, int], ...]]:
        """A split knob's (position, outer) of its candidates by inner factor, in candidate order
        (`position` is called per knob of every evaluated config: a lookup, not a scan)."""
        table = self.__dict__.get("_inner_table")
        if table is None:
            acc: dict[int, list[tuple[int, int]]] = {}
            for pos, (c_outer, c_inner) in enumerate(self.candidates):
                acc.setdefault(c_inner, []).append((pos, c_outer))
            table = self.__dict__["_inner_table"] = {k: tuple(v) for k, v in acc.items()}
        return table


def split_extents(layer: Layer, hw: HwConfig) -> dict[str, int]:
    """Axis extent of each split knob (docs/vta.md §7.2), in hardware blocks for b/ci/co. Grouped
    and transposed convs split the axes of their `schedule_view()` conv: ci = kernel.shape[1]
    (blocks per group), OH of the transposed conv (docs/vta.md §7.2)."""
    layer = layer.schedule_view()
    if isinstance(layer, Conv2D):
        return {
            "tile_b": layer.batch // hw.batch,             # data.shape[0]
            "tile_h": layer.out_height,
            "tile_w": layer.out_width,
            "tile_ci": layer.in_channels // hw.block_in,   # data.shape[1]
            "tile_co": layer.out_channels // hw.block_out,  # kernel.shape[0]
        }
    return {
        "tile_b": layer.batch // hw.batch,
        "tile_ci": layer.in_features // hw.block_in,
        "tile_co": layer.out_features // hw.block_out,
    }


def make_knobs(layer: Layer, hw: HwConfig) -> tuple[Knob, ...]:
    """The template's knobs in define order."""
    names = CONV_KNOBS if isinstance(layer.schedule_view(), Conv2D) else DENSE_KNOBS
    extents = split_extents(layer, hw)
    knobs = []
    for name in names:
        if name in extents:
            n = extents[name]
            knobs.append(Knob(name, "sp", tuple((n // f, f) for f in get_factors(n))))
        else:
            knobs.append(Knob(name, "ot", NTHREAD_CHOICES))
    return tuple(knobs)


FAMILIES = ("autotvm", "vta")  # schedule families (`get_space(..., family=)`, `--schedules`)
#: A knob only the `vta` family has (schedule/vta_space.py): a knob dict holding it is a vta schedule.
VTA_MARKER_KNOB = "order"


@dataclass(frozen=True)
class Config:
    """One schedule: its index in its family's space and knob entity as a dict, e.g.
    `{"tile_b": [1, 1], "tile_h": [1, 7], ..., "oc_nthread": 2, "h_nthread": 1}` (AutoTVM).
    `family` names the space (`FAMILIES`); a knob dict of the `vta` family is recognized by its
    knobs, so code that rebuilds a Config from (index, knobs) keeps the family."""

    index: int
    knobs: dict[str, KnobValue] = field(hash=False)
    family: str = "autotvm"

    def __post_init__(self) -> None:
        if self.family == "autotvm" and VTA_MARKER_KNOB in self.knobs:
            object.__setattr__(self, "family", "vta")

    def entity(self) -> list[list[str | KnobValue]]:
        """AutoTVM's `[[name, kind, value], ...]` in define order."""
        return [[name, "sp", list(value)] if isinstance(value, (list, tuple)) else [name, "ot", value]
                for name, value in self.knobs.items()]

    def __getitem__(self, name: str) -> KnobValue:
        return self.knobs[name]

    def to_dict(self) -> dict[str, int | dict[str, list[int] | int]]:
        out: dict = {"index": self.index, "knobs": {k: (list(v) if isinstance(v, (list, tuple)) else v)
                                                    for k, v in self.knobs.items()}}
        if self.family != "autotvm":  # AutoTVM records stay exactly as before
            out["family"] = self.family
        return out


def family_of(config: Config | dict[str, KnobValue]) -> str:
    """The schedule family of a Config or a plain knob dict (`Config.__post_init__`)."""
    if isinstance(config, Config):
        return config.family
    return "vta" if isinstance(config, dict) and VTA_MARKER_KNOB in config else "autotvm"


# -- the mixed-radix index (docs/vta.md §8: the first-defined knob is the least-significant digit) --
def positions_of(indices: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """(n,) config indices -> (n, n_knobs) knob positions."""
    rest = np.asarray(indices, dtype=np.int64).reshape(-1).copy()
    out = np.empty((rest.shape[0], len(dims)), dtype=np.int64)
    for k, d in enumerate(dims):
        out[:, k] = rest % d
        rest //= d
    return out


def index_of_one(positions: Sequence[int], dims: Sequence[int]) -> int:
    """One config's index from its knob positions (`index_of` of one row, in plain Python: the
    producers call it per evaluated schedule)."""
    index = 0
    for p, d in zip(reversed(positions), reversed(dims)):
        index = index * d + int(p)
    return index


def index_of(positions: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """(n, n_knobs) knob positions -> (n,) config indices."""
    pos = np.asarray(positions, dtype=np.int64).reshape(-1, len(dims))
    index = np.zeros(len(pos), dtype=np.int64)
    for j in reversed(range(len(dims))):
        index = index * dims[j] + pos[:, j]
    return index
