"""`ScheduleSpace`: the AutoTVM ConfigSpace of a layer's VTA template on one hardware config.

Index <-> knobs follows AutoTVM exactly (docs/vta.md §8): mixed radix over the knobs in define
order, the first knob least significant. Validity (docs/vta.md §7.4) and features are vectorized
over the whole grid, so enumerating every valid config is one NumPy pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.mapping.batch import MappingBatch, geometry
from codesign.schedule import templates
from codesign.schedule.features import config_features
from codesign.schedule.knobs import Config, Knob, KnobValue, make_knobs
from codesign.schedule.validity import first_failure, valid_mask
from codesign.workloads.layers import Layer, parse_layer


# -- the mixed-radix index (docs/vta.md §8: the first-defined knob is the least-significant digit) --
def positions_of(indices: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """(n,) config indices -> (n, n_knobs) knob positions."""
    rest = np.asarray(indices, dtype=np.int64).reshape(-1).copy()
    out = np.empty((rest.shape[0], len(dims)), dtype=np.int64)
    for k, d in enumerate(dims):
        out[:, k] = rest % d
        rest //= d
    return out


def index_of(positions: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """(n, n_knobs) knob positions -> (n,) config indices."""
    pos = np.asarray(positions, dtype=np.int64).reshape(-1, len(dims))
    index = np.zeros(len(pos), dtype=np.int64)
    for j in reversed(range(len(dims))):
        index = index * dims[j] + pos[:, j]
    return index


class ScheduleSpace:
    """All schedules of `layer` (template `layer.template`) on `hw`."""

    def __init__(self, layer: Layer | str, hw: HwConfig | str) -> None:
        self.layer = parse_layer(layer)
        self.hw = HwConfig.resolve(hw)
        reason = self.layer.structural_reason(self.hw)
        if reason is not None:
            raise ConfigError(f"layer {self.layer.name} has no VTA schedule space on {self.hw.name}: {reason}")
        self.template: str = self.layer.template
        self.knobs: tuple[Knob, ...] = make_knobs(self.layer, self.hw)
        self.knob_names: tuple[str, ...] = tuple(k.name for k in self.knobs)
        self.dims: tuple[int, ...] = tuple(len(k) for k in self.knobs)
        self.size: int = int(np.prod(self.dims, dtype=np.int64))
        self._geo = geometry(self.layer, self.hw)
        self._valid: np.ndarray | None = None
        # inner factor (or thread count) of each candidate, per knob, for vectorized decoding
        self._values = [np.array([c[1] if k.kind == "sp" else c for c in k.candidates], dtype=np.int64)
                        for k in self.knobs]

    def __repr__(self) -> str:
        return f"ScheduleSpace({self.layer.name}, {self.hw.name}, size={self.size})"

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
        return Config(int(self.index_of(np.array(pos))[0]), knobs)

    def get(self, index: int) -> Config:
        """The config with AutoTVM index `index`."""
        index = self._check_index(index)
        return self.from_positions(self.positions_of(np.array([index]))[0])

    def positions(self, config: Config | dict) -> tuple[int, ...]:
        knobs = self._knob_dict(config)
        return tuple(k.position(knobs[k.name]) for k in self.knobs)

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

    # -- geometry and validity -----------------------------------------------------------------
    def mapping_batch(self, indices: np.ndarray) -> MappingBatch:
        """Tile geometry of the configs `indices`, with the template's adjustments
        (`templates.adapt`): the one place a space's geometry is built (validity, features and
        the compiler read it)."""
        pos = self.positions_of(indices)
        values = {k.name: self._values[j][pos[:, j]] for j, k in enumerate(self.knobs)}
        return templates.adapt(self.layer, MappingBatch(self._geo, self.hw, values))

    def _valid_row(self, index: int) -> int | None:
        valid = self.valid_indices()
        row = int(np.searchsorted(valid, index))
        return row if row < len(valid) and valid[row] == index else None

    def why_invalid(self, config: Config | dict | list | int) -> str | None:
        """The first VTA rule `config` breaks (named, with the numbers), or None if it is valid."""
        cfg = self.as_config(config)
        if self._valid_row(cfg.index) is not None:
            return None
        t = self.mapping_batch(np.array([cfg.index], dtype=np.int64))
        return first_failure(t) or templates.first_failure(self.layer, t)

    def is_valid(self, config: Config | dict | list | int) -> bool:
        if isinstance(config, (int, np.integer)) and not isinstance(config, bool):
            return self._check_index(config) in self._valid_set()
        return self.why_invalid(config) is None

    def _valid_set(self) -> frozenset[int]:
        if not hasattr(self, "_valid_frozen"):
            self._valid_frozen = frozenset(int(i) for i in self.valid_indices())
        return self._valid_frozen

    def valid_mask(self, indices: np.ndarray | None = None) -> np.ndarray:
        """Boolean validity of `indices` (default: the whole space, in index order)."""
        idx = np.arange(self.size, dtype=np.int64) if indices is None else np.asarray(indices, dtype=np.int64)
        t = self.mapping_batch(idx)
        return valid_mask(t) & templates.mask(self.layer, t)

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

    # -- features --------------------------------------------------------------------------------
    def features(self, config: Config | dict | int) -> np.ndarray:
        """float32 vector of length N_CONFIG_FEATURES (see `codesign.schedule.features`)."""
        return self.features_batch([self.as_config(config).index])[0]

    def features_batch(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        return config_features(self.mapping_batch(idx))


@lru_cache(maxsize=512)
def get_space(layer: Layer, hw: HwConfig) -> ScheduleSpace:
    """A cached `ScheduleSpace` (its valid indices are computed once per layer and config)."""
    return ScheduleSpace(layer, hw)
