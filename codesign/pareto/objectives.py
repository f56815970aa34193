"""The co-design objectives: what each one measures, which way is better, a point's objective
vector and Pareto dominance. The one definition the front, the hypervolume, the reference point,
the sweep's searcher and `codesign report` share.

A point's objective vector is signed so that smaller is always better: a maximized objective
(throughput) enters negated. Everything that compares points (dominance, the front, the
hypervolume) works on that vector; everything a user reads shows the values as measured.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codesign.errors import ConfigError
from codesign.pareto.record import JsonRecord

# A design point (`codesign.pareto.point.DesignPoint`) or a JSON object with the objective keys.
Point = JsonRecord | Mapping[str, Any]


@dataclass(frozen=True)
class Objective:
    """One objective: `key` in a design point, `name` on the command line (`--objectives`)."""

    name: str
    key: str
    direction: str  # "min" or "max"
    unit: str
    label: str  # axis / column label
    measures: str  # what the number is, in one sentence (pareto.json, report, README)

    @property
    def sign(self) -> float:
        return -1.0 if self.direction == "max" else 1.0

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "key": self.key, "direction": self.direction, "unit": self.unit,
                "measures": self.measures}


CATALOG: dict[str, Objective] = {o.name: o for o in (
    Objective("latency", "latency_ms", "min", "ms", "latency per request (ms)",
              "time of one request (one image) through the network: the steps a design's `scope` "
              "names (the whole network: VTA steps with their tuned schedules plus CPU steps on the "
              "board's CPU; or the layers VTA offloads); a BATCH=N design serves a request in the "
              "time of its padded batch of N images"),
    Objective("area", "area", "min", "", "area (mean utilization of LUT/FF/BRAM/DSP)",
              "mean utilization of the board's LUT, FF, BRAM18 and DSP (docs/resources.md)"),
    Objective("power", "power_w", "min", "W", "power (W)",
              "board power at the simulated VTA activity over one request"),
    Objective("throughput", "throughput_ips", "max", "images/s", "throughput (images/s)",
              "images per second with full batches back to back: BATCH / the padded batch's time"),
    Objective("energy", "energy_j", "min", "J", "energy per request (J)",
              "board power x latency per request"),
)}
BY_KEY: dict[str, Objective] = {o.key: o for o in CATALOG.values()}

DEFAULT_OBJECTIVES = ("latency", "area", "power")
# The default objectives' point keys (what most code and old pareto.json files use).
OBJECTIVES: tuple[str, ...] = tuple(CATALOG[n].key for n in DEFAULT_OBJECTIVES)


def objective(key_or_name: str) -> Objective:
    """The objective of a point key (`latency_ms`) or a CLI name (`latency`)."""
    found = BY_KEY.get(key_or_name) or CATALOG.get(key_or_name)
    if found is None:
        raise ConfigError(f"unknown objective {key_or_name!r}; allowed: {', '.join(CATALOG)}")
    return found


def parse_objectives(text: str | Iterable[str], where: str = "--objectives") -> tuple[str, ...]:
    """Point keys of `latency,area,power` (CLI names or keys); one line for a bad list."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    keys = []
    for n in names:
        found = BY_KEY.get(n) or CATALOG.get(n)
        if found is None:
            raise ConfigError(f"{where} {n!r}: unknown objective; allowed: {', '.join(CATALOG)}")
        keys.append(found.key)
    if len(keys) < 2 or len(set(keys)) != len(keys):
        raise ConfigError(f"{where} {','.join(names)!r}: give at least two distinct objectives of "
                          f"{', '.join(CATALOG)}")
    return tuple(keys)


def sign(key: str) -> float:
    """+1 for a minimized objective, -1 for a maximized one (unknown keys: minimized)."""
    found = BY_KEY.get(key)
    return found.sign if found is not None else 1.0


def directions(objectives: Sequence[str]) -> list[str]:
    """"min"/"max" per objective key (the searcher's modes)."""
    return ["max" if sign(k) < 0 else "min" for k in objectives]


def describe(objectives: Sequence[str]) -> list[dict[str, str]]:
    """What each objective measures (pareto.json `objective_info`, trials.jsonl)."""
    return [BY_KEY[k].to_json() if k in BY_KEY else {"key": k, "direction": "min"} for k in objectives]


def objective_values(point: Point, objectives: Sequence[str] = OBJECTIVES) -> tuple[float, ...]:
    """The signed objective vector of a point (smaller is better in every entry: maximized
    objectives negated); ConfigError if one is missing or not a finite number."""
    return tuple(sign(k) * v for k, v in zip(objectives, raw_values(point, objectives)))


def raw_values(point: Point, objectives: Sequence[str] = OBJECTIVES) -> tuple[float, ...]:
    """The objective values of a point as measured; ConfigError if one is missing or not finite."""
    out = []
    for name in objectives:
        value = point.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            label = point.get("config", "<point>")
            raise ConfigError(f"{label}: objective {name!r} must be a finite number, got {value!r}")
        out.append(float(value))
    return tuple(out)


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a dominates b (signed vectors): no worse in every objective and strictly better in one."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


__all__ = ["BY_KEY", "CATALOG", "DEFAULT_OBJECTIVES", "OBJECTIVES", "Objective", "describe", "directions",
           "dominates", "objective", "objective_values", "parse_objectives", "raw_values", "sign"]
