"""`ScheduleSpace`: the AutoTVM ConfigSpace of a layer's VTA template on one hardware config.

Index <-> knobs follows AutoTVM exactly (docs/vta.md §8): mixed radix over the knobs in define
order, the first knob least significant. Validity (docs/vta.md §7.4) and features are vectorized
over the whole grid, so enumerating every valid config is one NumPy pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.mapping.batch import MappingBatch
from codesign.mapping.mapping import Mapping
from codesign.schedule import templates
from codesign.schedule.features import config_features
from codesign.schedule.indexed import KnobSpace
from codesign.schedule.knobs import Config, Knob, index_of, make_knobs, positions_of
from codesign.schedule.producer import geometry_table, template_mapping
from codesign.schedule.validity import first_failure, valid_mask
from codesign.schedule.vta_space import VtaSpace
from codesign.workloads.layers import Layer


class ScheduleSpace(KnobSpace):
    """All schedules of `layer` (template `layer.template`) on `hw`."""

    family = "autotvm"

    def make_knobs(self) -> tuple[Knob, ...]:
        return make_knobs(self.layer, self.hw)

    # -- geometry and validity -----------------------------------------------------------------
    def mapping_batch(self, indices: np.ndarray) -> MappingBatch:
        """Tile geometry of the configs `indices`, with the template's adjustments
        (`templates.adapt`): the one place a space's geometry is built (validity, features and
        the compiler read it)."""
        pos = self.positions_of(indices)
        values = {k.name: self._values[j][pos[:, j]] for j, k in enumerate(self.knobs)}
        return templates.adapt(self.layer, MappingBatch(self._geo, self.hw, values))

    def why_invalid(self, config: Config | dict | list | int) -> str | None:
        """The first VTA rule `config` breaks (named, with the numbers), or None if it is valid."""
        cfg = self.as_config(config)
        if self._valid_row(cfg.index) is not None:
            return None
        t = self.mapping_batch(np.array([cfg.index], dtype=np.int64))
        return first_failure(t) or templates.first_failure(self.layer, t)

    def valid_mask(self, indices: np.ndarray | None = None) -> np.ndarray:
        """Boolean validity of `indices` (default: the whole space, in index order)."""
        idx = np.arange(self.size, dtype=np.int64) if indices is None else np.asarray(indices, dtype=np.int64)
        # the whole space (`valid_indices`): the producer's table of it, built once for both
        whole = idx.size == self.size and (self.size == 0 or (idx[0] == 0 and bool((np.diff(idx) == 1).all())))
        t = geometry_table(self) if whole else None
        t = self.mapping_batch(idx) if t is None else t
        return valid_mask(t) & templates.mask(self.layer, t)

    # -- the producer ------------------------------------------------------------------------------
    def mapping(self, config: Config | dict | int, shift: int = 8, *, skip: tuple[str, ...] = ()) -> Mapping:
        """The `Mapping` of `config` (a Config, knob dict or index; `schedule.producer`):
        InvalidSchedule naming the first rule it breaks (rules named in `skip` aside)."""
        if isinstance(config, (int, np.integer)) and not isinstance(config, bool):
            config = self.get(int(config))
        return template_mapping(self, self.view, config, shift, skip=skip)

    @property
    def view(self) -> ScheduleSpace:
        """The space whose tile geometry this template's mapping uses: its `schedule_view()` conv's
        for a grouped or transposed conv, itself otherwise."""
        if not (self.tmpl.grouped or self.tmpl.transposed):
            return self
        return get_space(self.layer.schedule_view(), self.hw)  # type: ignore[return-value]

    # -- features --------------------------------------------------------------------------------
    def features_batch(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        return config_features(self.mapping_batch(idx))


SPACES: dict[str, type[KnobSpace]] = {"autotvm": ScheduleSpace, "vta": VtaSpace}  # by family (knobs.FAMILIES)


def get_space(layer: Layer, hw: HwConfig, family: str = "autotvm") -> ScheduleSpace | VtaSpace:
    """The cached schedule space of `layer` on `hw` of a family: "autotvm" (`ScheduleSpace`, the
    templates) or "vta" (`VtaSpace`); its valid indices are computed once per layer and config."""
    return _cached_space(layer, hw, family)  # one cache key however the family is passed


@lru_cache(maxsize=512)
def _cached_space(layer: Layer, hw: HwConfig, family: str) -> ScheduleSpace | VtaSpace:
    if family not in SPACES:
        raise ConfigError(f"schedule family {family!r}: allowed {', '.join(SPACES)}")
    return SPACES[family](layer, hw)


get_space.cache_clear = _cached_space.cache_clear  # type: ignore[attr-defined]


__all__ = ["SPACES", "ScheduleSpace", "VtaSpace", "get_space", "index_of", "positions_of"]
