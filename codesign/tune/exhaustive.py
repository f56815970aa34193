"""Ground truth: time every valid config of a layer (timing mode). Spaces of VTA templates are a
few thousand configs at most, so the true optimum is computable; benchmarks measure tuners
against it and `codesign space --exhaustive` reports it."""

from __future__ import annotations

from typing import Any

import numpy as np
from tqdm import tqdm

from codesign.errors import InvalidSchedule
from codesign.schedule import ScheduleSpace
from codesign.vta.run import measure_seconds


def exhaustive_table(layer: Any, hw: Any, *, params: Any = None, progress: bool = False,
                     space: Any = None) -> dict[int, tuple[float, int]]:
    """{config index: (seconds, cycles)} for every valid config that measures without error."""
    space = space if space is not None else ScheduleSpace(layer, hw)
    valid = np.sort(np.asarray(space.valid_indices(), dtype=np.int64))
    it = valid.tolist()
    if progress:
        it = tqdm(it, desc=f"exhaustive {layer.name}", unit="cfg", leave=False)
    table: dict[int, tuple[float, int]] = {}
    for idx in it:
        try:
            seconds, cycles = measure_seconds(layer, space.get(idx), hw, params)
        except Exception:  # noqa: BLE001, S112 - a config the compiler rejects is not a candidate
            continue
        table[int(idx)] = (float(seconds), int(cycles))
    return table


def exhaustive(layer: Any, hw: Any, *, params: Any = None, progress: bool = False) -> tuple[Any, float]:
    """(best Config, its seconds) over every valid config of `layer` on `hw`."""
    space = ScheduleSpace(layer, hw)
    table = exhaustive_table(layer, hw, params=params, progress=progress, space=space)
    if not table:
        raise InvalidSchedule(f"layer {layer.name} on {hw.name}: no valid schedule measures without error")
    best = min(table, key=lambda i: (table[i][0], i))
    return space.get(best), table[best][0]
