"""What every schedule space of a layer shares (`KnobSpace`): knobs with candidates, the
mixed-radix index (the first knob least significant, as AutoTVM's, docs/vta.md §8), index <->
positions <-> `Config`, the valid indices computed once from the subclass' vectorized
`valid_mask`. `ScheduleSpace` (AutoTVM templates) and `VtaSpace` (the `vta` family) subclass it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.mapping.batch import geometry
from codesign.schedule.knobs import Config, Knob, KnobValue, index_of, index_of_one, positions_of
from codesign.schedule.templates import template_of
from codesign.workloads.layers import Layer, parse_layer


class KnobSpace:
    """Subclasses set `family`, define `make_knobs()` (the knobs in define order), `valid_mask(indices)`,
    `why_invalid(config)` and `features_batch`."""

    family: str
    template: str
    knobs: tuple[Knob, ...]
    knob_names: tuple[str, ...]
    dims: tuple[int, ...]
    size: int
    _valid: np.ndarray | None

    def __init__(self, layer: Layer | str, hw: HwConfig | str) -> None:
        self.layer = parse_layer(layer)
        self.hw = HwConfig.resolve(hw)
        reason = self.layer.structural_reason(self.hw)
        if reason is not None:
            raise ConfigError(f"layer {self.layer.name} has no VTA schedule space on {self.hw.name}: {reason}")
        self.template = self.layer.template
        self.tmpl = template_of(self.layer)  # what the code decides by the template (`templates.Template`)
        self.knobs = self.make_knobs()
        self.knob_names = tuple(k.name for k in self.knobs)
        self.dims = tuple(len(k) for k in self.knobs)
        self.size = int(np.prod(self.dims, dtype=np.int64))
        self._geo = geometry(self.layer, self.hw)
        self._valid = None
        # inner factor (or thread count) of each candidate, per knob, for vectorized decoding
        self._values = [np.array([c[1] if k.kind == "sp" else c for c in k.candidates], dtype=np.int64)
                        for k in self.knobs]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.layer.name}, {self.hw.name}, size={self.size})"

    def make_knobs(self) -> tuple[Knob, ...]:
        raise NotImplementedError

    def valid_mask(self, indices: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError

    def why_invalid(self, config: Config | dict | list | int) -> str | None:
        raise NotImplementedError

    def features_batch(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.size

    # -- index <-> positions <-> knobs ---------------------------------------------------------
    def _check_index(self, index: Any) -> int:  # Any: user input (JSON, CLI), checked here
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise ConfigError(f"config index {index!r}: must be an integer in [0, {self.size})")
        if not 0 <= int(index) < self.size:
            raise ConfigError(f"config index {index} out of range [0, {self.size}) for {self.layer.name}")
        return int(index)

    def positions_of(self, indices: np.ndarray) -> np.ndarray:
        """(n, n_knobs) candidate positions of an array of indices (first knob least significant)."""
        return positions_of(indices, self.dims)

    def index_of(self, positions: np.ndarray) -> np.ndarray:
        return index_of(positions, self.dims)

    def from_positions(self, pos: Sequence[int] | np.ndarray) -> Config:
        pos = tuple(int(p) for p in pos)
        if len(pos) != len(self.dims):
            raise ConfigError(f"expected {len(self.dims)} knob positions ({', '.join(self.knob_names)}), got {len(pos)}")
        for p, d, k in zip(pos, self.dims, self.knobs):
            if not 0 <= p < d:
                raise ConfigError(f"knob {k.name} position {p} out of range [0, {d})")
        knobs = {k.name: (list(k.candidates[p]) if k.kind == "sp" else k.candidates[p])
                 for k, p in zip(self.knobs, pos)}
        return Config(index_of_one(pos, self.dims), knobs, self.family)

    def get(self, index: int) -> Config:
        """The config with AutoTVM index `index`."""
        index = self._check_index(index)
        return self.from_positions(self.positions_of(np.array([index]))[0])

    def positions(self, config: Config | dict) -> tuple[int, ...]:
        knobs = config.knobs if isinstance(config, Config) else config
        if type(knobs) is dict:  # the usual value: one lookup per knob (`_position_tables`)
            found = self._lookup_positions(knobs)
            if found is not None:
                return found[0]
        knobs = self._knob_dict(config)
        return tuple(k.position(knobs[k.name]) for k in self.knobs)

    def index_of_config(self, config: Config | dict) -> int:
        """The canonical index of `config`: its `positions` in mixed radix (`knobs.index_of_one`)."""
        knobs = config.knobs if isinstance(config, Config) else config
        if type(knobs) is dict:
            found = self._lookup_positions(knobs)
            if found is not None:
                return found[1]
        return index_of_one(self.positions(config), self.dims)

    def _lookup_positions(self, knobs: dict) -> tuple[tuple[int, ...], int] | None:
        """(`positions`, their index) of a knob dict holding exactly this space's knobs, each value a
        plain int or a split `[outer, inner]` of plain ints, found by `Knob.position`'s own rule (the
        first candidate that matches); None for anything else (the general path decides, or refuses)."""
        tables = self.__dict__.get("_position_tables")
        if tables is None:  # (name, split?, value -> position, the knob's digit weight in the index)
            weights = [math.prod(self.dims[:i]) for i in range(len(self.dims))]
            tables = self.__dict__["_position_tables"] = [
                (k.name, k.kind == "sp", _split_table(k) if k.kind == "sp" else k._by_value, w)
                for k, w in zip(self.knobs, weights)]
        if len(knobs) != len(tables):
            return None
        out = []
        index = 0
        for name, split, table, weight in tables:
            v = knobs.get(name)
            if split:
                if (type(v) is not list and type(v) is not tuple) or len(v) != 2:
                    return None
                outer, inner = v
                if type(outer) is not int or type(inner) is not int:
                    return None
                p = table.get((outer, inner))
            else:
                p = table.get(v) if type(v) is int else None
            if p is None:
                return None
            out.append(p)
            index += p * weight
        return tuple(out), index

    def _knob_dict(self, config: Any) -> dict[str, KnobValue]:  # Any: user input, checked here
        if isinstance(config, Config):
            knobs = config.knobs
        elif isinstance(config, dict):
            knobs = config
        elif isinstance(config, (list, tuple)):  # AutoTVM entity [[name, kind, value], ...]
            try:
                knobs = {str(e[0]): e[-1] for e in config}
            except (TypeError, IndexError):
                raise ConfigError(f"config entity {config!r}: expected [[name, kind, value], ...]") from None
        else:
            raise ConfigError(f"config {config!r}: expected a Config, a knob dict or an AutoTVM entity")
        missing = [n for n in self.knob_names if n not in knobs]
        extra = [n for n in knobs if n not in self.knob_names]
        if missing or extra:
            what = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(extra)}"
            raise ConfigError(f"knobs for {self.template}: {what}; expected {', '.join(self.knob_names)}")
        return knobs

    def from_knobs(self, knobs: Config | dict | list) -> Config:
        """The canonical config of a knob dict (or entity); splits accept `[-1, f]` and `[n/f, f]`."""
        return self.from_positions(self.positions(knobs))

    def as_config(self, config: Config | dict | list | int) -> Config:
        if isinstance(config, (int, np.integer)) and not isinstance(config, bool):
            return self.get(int(config))
        return self.from_knobs(config)

    def _valid_row(self, index: int) -> int | None:
        valid = self.valid_indices()
        row = int(np.searchsorted(valid, index))
        return row if row < len(valid) and valid[row] == index else None

    def is_valid(self, config: Config | dict | list | int) -> bool:
        if isinstance(config, (int, np.integer)) and not isinstance(config, bool):
            return self._check_index(config) in self._valid_set()
        return self.why_invalid(config) is None

    def _valid_set(self) -> frozenset[int]:
        if not hasattr(self, "_valid_frozen"):
            self._valid_frozen = frozenset(int(i) for i in self.valid_indices())
        return self._valid_frozen

    def valid_indices(self) -> np.ndarray:
        """Sorted int64 indices of every valid config (computed once, vectorized)."""
        if self._valid is None:
            mask = np.zeros(0, dtype=bool)
            chunk = 1 << 18  # bound the temporary arrays for very large spaces
            parts = [self.valid_mask(np.arange(s, min(s + chunk, self.size), dtype=np.int64))
                     for s in range(0, self.size, chunk)]
            mask = np.concatenate(parts) if parts else mask
            self._valid = np.flatnonzero(mask).astype(np.int64)
            self._valid.setflags(write=False)
        return self._valid

    @property
    def n_valid(self) -> int:
        return len(self.valid_indices())

    def valid_configs(self) -> list[Config]:
        return [self.get(int(i)) for i in self.valid_indices()]

    def features(self, config: Config | dict | int) -> np.ndarray:
        """float32 vector of length N_CONFIG_FEATURES (see `codesign.schedule.features`)."""
        return self.features_batch([self.as_config(config).index])[0]


def _split_table(knob: Knob) -> dict[tuple[int, int], int]:
    """A split knob's position of each `[outer, inner]` it accepts (`Knob.position`): `[c_outer, f]`
    and `[-1, f]` of each candidate, the first candidate of each (candidate order)."""
    table: dict[tuple[int, int], int] = {}
    for pos, (c_outer, c_inner) in enumerate(knob.candidates):
        table.setdefault((c_outer, c_inner), pos)
        table.setdefault((-1, c_inner), pos)
    return table
