"""Incremental non-dominated set over named objectives (each minimized or maximized:
`codesign.pareto.objectives`). Points are `DesignPoint`s; a JSON object offered is read into one."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from codesign.errors import ConfigError
from codesign.pareto.hypervolume import hypervolume
from codesign.pareto.objectives import OBJECTIVES, dominates, objective_values, sign
from codesign.pareto.point import DesignPoint
from codesign.pareto.record import JsonObject

PointLike = DesignPoint | Mapping[str, Any]  # a point, or its JSON object (tests, scripts)


class ParetoFront:
    """The non-dominated points seen so far. A point equal to a front point in every objective is
    not added (the first one found stays), so the front never holds duplicates."""

    def __init__(self, objectives: Sequence[str] = OBJECTIVES, points: Iterable[PointLike] = ()) -> None:
        if not objectives or len(set(objectives)) != len(objectives):
            raise ConfigError(f"objectives must be distinct names, got {list(objectives)!r}")
        self.objectives = tuple(objectives)
        self._points: list[DesignPoint] = []
        self._values: list[tuple[float, ...]] = []
        self.n_seen = 0
        for p in points:
            self.add(p)

    def add(self, point: PointLike) -> bool:
        """Offer a point; True if it joined the front (dominated front points are dropped)."""
        point = DesignPoint.of(point)
        v = objective_values(point, self.objectives)
        self.n_seen += 1
        for q in self._values:
            if q == v or dominates(q, v):
                return False
        keep = [i for i, q in enumerate(self._values) if not dominates(v, q)]
        self._points = [self._points[i] for i in keep] + [point]
        self._values = [self._values[i] for i in keep] + [v]
        return True

    def extend(self, points: Iterable[PointLike]) -> int:
        return sum(self.add(p) for p in points)

    @property
    def points(self) -> list[DesignPoint]:
        """Front points in insertion order; sort as needed."""
        return list(self._points)

    def values(self) -> list[tuple[float, ...]]:
        return list(self._values)

    def dominated_by(self, point: PointLike) -> list[DesignPoint]:
        """Front points that dominate `point` (empty if `point` is non-dominated)."""
        v = objective_values(DesignPoint.of(point), self.objectives)
        return [p for p, q in zip(self._points, self._values) if dominates(q, v)]

    def hypervolume(self, reference_point: dict[str, float] | Sequence[float]) -> float:
        return hypervolume(self._values, reference_point, self.objectives)

    def sorted_points(self, key: str | None = None) -> list[DesignPoint]:
        key = key or self.objectives[0]  # best first
        return sorted(self._points, key=lambda p: (sign(key) * p.get(key), *objective_values(p, self.objectives)))

    def __len__(self) -> int:
        return len(self._points)

    def __iter__(self) -> Iterator[DesignPoint]:
        return iter(list(self._points))

    def to_json(self) -> JsonObject:
        return {"objectives": list(self.objectives), "points": [p.to_json() for p in self.sorted_points()],
                "n_seen": self.n_seen}

    @classmethod
    def from_json(cls, data: JsonObject) -> ParetoFront:
        if not isinstance(data, dict) or not isinstance(data.get("points"), list):
            raise ConfigError("Pareto front JSON needs a 'points' list (and optionally 'objectives')")
        front = cls(tuple(data.get("objectives") or OBJECTIVES), data["points"])
        front.n_seen = max(front.n_seen, int(data.get("n_seen", 0)))
        return front

    def __repr__(self) -> str:
        return f"ParetoFront({len(self)} points over {', '.join(self.objectives)})"


def hypervolume_history(points: Sequence[PointLike | Sequence[float]], reference_point: dict[str, float] | Sequence[float],
                        objectives: Sequence[str] = OBJECTIVES) -> list[float]:
    """Hypervolume of the first k points, for k = 1..len(points) (evaluation order)."""
    front = ParetoFront(objectives)
    out: list[float] = []
    for p in points:
        point = p if isinstance(p, (DesignPoint, Mapping)) else dict(zip(objectives, p))
        if front.add(point) or not out:
            out.append(front.hypervolume(reference_point))
        else:
            out.append(out[-1])
    return out
