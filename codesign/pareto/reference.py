"""The hypervolume reference point: one documented rule, stable across runs of the same space."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from codesign.errors import ConfigError
from codesign.hw.power import PowerModel, default_model
from codesign.hw.space import HwSpace
from codesign.pareto.objectives import OBJECTIVES, Point, sign

MARGIN = 1.1
REFERENCE_RULE = (
    "reference = 1.1 x the worst value of each objective over its bounds: "
    "latency_ms: the evaluated stock configs (the space's `stock` list; all evaluated points only "
    "if no stock config was evaluated); area: 1.0, the largest utilization a feasible design can "
    "have; power_w: the largest board power of any usable config of the space at full activity "
    "(load = compute = store = 1) and of the stock points; energy_j: the stock points, like latency; a maximized "
    "objective (throughput_ips): the smallest stock value / 1.1. Everything but latency and "
    "throughput depends only on the space and the power model, and the stock latencies only on the "
    "workload and the inner tuning options, so runs of the same sweep share the reference point."
)


def space_power_bound(space: HwSpace, power_model: PowerModel | None = None) -> float:
    """Largest board power over the usable configs of `space` with every module always busy."""
    model = power_model or default_model()
    full = {"load": 1.0, "compute": 1.0, "store": 1.0}
    configs = space.enumerate()
    if not configs:
        raise ConfigError(space.why_empty())  # which rule removed how many points
    # The space's resource model (`HwSpace.estimate`): the same numbers its feasibility used.
    return max(model.power_w(hw, space.board, space.estimate(hw), full) for hw in configs)


def reference_point(stock_points: Iterable[Point] = (), *, space: HwSpace | None = None,
                    power_model: PowerModel | None = None,
                    points: Iterable[Point] = (), objectives: Sequence[str] = OBJECTIVES,
                    margin: float = MARGIN) -> dict[str, float]:
    """Per objective: margin x the worst of its bounds, or the worst / margin for a maximized
    objective (see REFERENCE_RULE). Values as measured (not signed)."""
    stock = [p for p in stock_points if p is not None]
    evaluated = list(points)
    ref: dict[str, float] = {}
    for name in objectives:
        candidates = [float(p.get(name)) for p in stock if p.get(name) is not None]
        if name == "area":
            candidates.append(1.0)
        elif name == "power_w" and space is not None:
            candidates.append(space_power_bound(space, power_model))
        if not candidates:
            candidates = [float(p.get(name)) for p in evaluated if p.get(name) is not None]
        if not candidates:
            raise ConfigError(f"reference point: no stock or evaluated value for objective {name!r}")
        if sign(name) < 0:  # maximized: below the smallest value
            ref[name] = min(candidates) / margin
        else:
            ref[name] = margin * max(candidates)
    return ref


__all__ = ["MARGIN", "REFERENCE_RULE", "reference_point", "space_power_bound"]
