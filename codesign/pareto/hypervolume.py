"""Exact hypervolume of a set of points (all objectives minimized) w.r.t. a reference point.

Algorithm: slicing along the last objective (HSO, While et al. 2006) down to an exact 2-D
staircase sweep. For 3 objectives the cost is O(n^2) after sorting, fine for Pareto fronts of
hundreds of points. Points that are not strictly better than the reference in every objective
contribute nothing.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from codesign.errors import ConfigError
from codesign.pareto.objectives import OBJECTIVES, objective_values, sign
from codesign.pareto.record import JsonRecord


def _as_vectors(points: Sequence[Any], objectives: Sequence[str]) -> list[tuple[float, ...]]:
    out = []
    for p in points:
        out.append(objective_values(p, objectives) if isinstance(p, (Mapping, JsonRecord)) else tuple(float(x) for x in p))
    return out


def _as_reference(ref: dict[str, float] | Sequence[float], objectives: Sequence[str]) -> tuple[float, ...]:
    if isinstance(ref, dict):
        missing = [o for o in objectives if o not in ref]
        if missing:
            raise ConfigError(f"reference point misses objective {missing[0]!r}")
        return tuple(sign(o) * float(ref[o]) for o in objectives)  # signed like the points
    return tuple(float(x) for x in ref)


def _hv2(points: list[tuple[float, float]], rx: float, ry: float) -> float:
    area, best_y = 0.0, ry
    for x, y in sorted(points):
        if y < best_y:
            area += (rx - x) * (best_y - y)
            best_y = y
    return area


def _hv3(points: list[tuple[float, ...]], ref: tuple[float, ...]) -> float:
    # Sweep z upward; keep the 2-D staircase of points seen so far as x-sorted lists.
    pts = sorted(points, key=lambda p: p[2])
    xs: list[float] = []
    ys: list[float] = []  # staircase: x ascending, y strictly descending
    area = 0.0
    volume = 0.0
    for i, (x, y, z) in enumerate(pts):
        # Insert (x, y) into the staircase unless dominated in 2-D.
        j = bisect.bisect_right(xs, x)
        if not (j > 0 and ys[j - 1] <= y):  # else a point with x' <= x, y' <= y covers it
            # drop the points it covers (x' >= x and y' >= y): a contiguous run from x
            j0 = bisect.bisect_left(xs, x)
            k = j0
            while k < len(xs) and ys[k] >= y:
                k += 1
            del xs[j0:k]
            del ys[j0:k]
            xs.insert(j0, x)
            ys.insert(j0, y)
            area = _staircase_area(xs, ys, ref[0], ref[1])
        z_next = pts[i + 1][2] if i + 1 < len(pts) else ref[2]
        volume += area * (z_next - z)
    return volume


def _staircase_area(xs: list[float], ys: list[float], rx: float, ry: float) -> float:
    area, prev_y = 0.0, ry
    for x, y in zip(xs, ys):
        area += (rx - x) * (prev_y - y)
        prev_y = y
    return area


def _hv(points: list[tuple[float, ...]], ref: tuple[float, ...]) -> float:
    d = len(ref)
    if not points:
        return 0.0
    if d == 1:
        return ref[0] - min(p[0] for p in points)
    if d == 2:
        return _hv2([(p[0], p[1]) for p in points], ref[0], ref[1])
    if d == 3:
        return _hv3(points, ref)
    pts = sorted(points, key=lambda p: p[-1])  # slice along the last objective
    volume = 0.0
    for i, p in enumerate(pts):
        z_next = pts[i + 1][-1] if i + 1 < len(pts) else ref[-1]
        if z_next > p[-1]:
            volume += _hv([q[:-1] for q in pts[: i + 1]], ref[:-1]) * (z_next - p[-1])
    return volume


def hypervolume(points: Sequence[Any], reference_point: dict[str, float] | Sequence[float],
                objectives: Sequence[str] = OBJECTIVES) -> float:
    """Exact hypervolume dominated by `points` (dicts with the objective keys, or signed vectors:
    smaller is better) and bounded by `reference_point` (dict by objective name with values as
    measured, or a signed vector in objective order)."""
    ref = _as_reference(reference_point, objectives)
    vecs = _as_vectors(points, objectives)
    for v in vecs:
        if len(v) != len(ref):
            raise ConfigError(f"point {v} has {len(v)} objectives, reference point has {len(ref)}")
    inside = [v for v in vecs if all(x < r for x, r in zip(v, ref))]
    return float(_hv(inside, ref))


__all__ = ["hypervolume"]
