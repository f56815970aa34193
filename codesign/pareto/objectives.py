"""The co-design objectives (all minimized), a point's objective vector and Pareto dominance.
The one definition the front, the hypervolume, the reference point and the sweep share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from codesign.errors import ConfigError

OBJECTIVES: tuple[str, ...] = ("latency_ms", "area", "power_w")


def objective_values(point: dict[str, Any], objectives: Sequence[str] = OBJECTIVES) -> tuple[float, ...]:
    """The objective vector of a point; ConfigError if one is missing or not a finite number."""
    out = []
    for name in objectives:
        value = point.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            label = point.get("config", "<point>")
            raise ConfigError(f"{label}: objective {name!r} must be a finite number, got {value!r}")
        out.append(float(value))
    return tuple(out)


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a dominates b: no worse in every objective and strictly better in at least one."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


__all__ = ["OBJECTIVES", "dominates", "objective_values"]
