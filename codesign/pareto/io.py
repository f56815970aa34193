"""`pareto.json` of a sweep directory: writing (atomic), reading, and the stock comparison."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from codesign import fileio
from codesign.errors import ConfigError
from codesign.pareto.front import ParetoFront
from codesign.pareto.hypervolume import hypervolume
from codesign.pareto.objectives import OBJECTIVES, describe, dominates, objective_values, raw_values
from codesign.pareto.reference import REFERENCE_RULE

PARETO_FILE = "pareto.json"
# 2: objectives may be maximized (throughput); `objective_info` says what each one measures;
# latency_ms is one request through the whole network (version 1: per image, VTA layers only).
FORMAT_VERSION = 2
OLD_LATENCY = ("version 1 file: latency per image of a full batch, counting only the layers VTA "
               "offloads (CPU ops not included)")


def stock_comparison(front: ParetoFront | Iterable[dict[str, Any]], stock_points: Iterable[dict[str, Any]],
                     objectives: Sequence[str] | None = None, *,
                     verified_only: bool = True) -> dict[str, dict[str, Any]]:
    """For each stock point: the front designs that dominate it, and whether it is on the front.

    By default only designs whose clock is verified on the board count as beating a stock config
    (`dominated_by`); those that beat it only at an unverified clock are listed apart
    (`dominated_by_unverified`), since their latency rests on timing closure nobody has shown.
    `verified_only=False` counts every design in `dominated_by`. Points without the flag (files
    of older versions) count as verified."""
    if isinstance(front, ParetoFront):
        objectives = objectives or front.objectives
        pts = front.points
    else:
        pts = list(front)
    objectives = tuple(objectives or OBJECTIVES)
    out: dict[str, dict[str, Any]] = {}
    for s in stock_points:
        sv = objective_values(s, objectives)
        dom = [p for p in pts if dominates(objective_values(p, objectives), sv)]
        dom.sort(key=lambda p: objective_values(p, objectives))
        unverified = [p for p in dom if p.get("clock_verified") is False] if verified_only else []
        verified = [p for p in dom if not any(p is u for u in unverified)]
        out[str(s.get("config"))] = {
            "objectives": dict(zip(objectives, raw_values(s, objectives))),
            "clock_verified": s.get("clock_verified"),
            "dominated_by": [p.get("config") for p in verified],
            "dominated_by_unverified": [p.get("config") for p in unverified],
            "on_front": not dom and any(objective_values(p, objectives) == sv for p in pts),
        }
    return out


def pareto_document(front: ParetoFront, *, reference_point: dict[str, float],
                    stock_points: Iterable[dict[str, Any]] = (), reference_rule: str = REFERENCE_RULE,
                    hypervolume_history: Sequence[float] | None = None,
                    extra: dict[str, Any] | None = None) -> dict[str, Any]:
    stock = list(stock_points)
    doc: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "objectives": list(front.objectives),
        "objective_info": describe(front.objectives),
        "n_evaluated": front.n_seen,
        "points": front.sorted_points(),
        "hypervolume": hypervolume(front.values(), reference_point, front.objectives),
        "reference_point": {k: float(reference_point[k]) for k in front.objectives},
        "reference_rule": reference_rule,
        "stock": stock,
        "stock_comparison": stock_comparison(front, stock),
    }
    if hypervolume_history is not None:
        doc["hypervolume_history"] = [float(h) for h in hypervolume_history]
    if extra:
        clash = sorted(set(extra) & set(doc))
        if clash:
            raise ValueError(f"extra keys {clash} would overwrite pareto.json fields")
        doc.update(extra)
    return doc


def write_pareto_json(path: str | Path, front: ParetoFront, *, reference_point: dict[str, float],
                      stock_points: Iterable[dict[str, Any]] = (), reference_rule: str = REFERENCE_RULE,
                      hypervolume_history: Sequence[float] | None = None,
                      extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write `pareto.json` atomically (a directory path gets `pareto.json` inside); returns the
    document: objectives, points (sorted by latency), hypervolume, reference_point and its rule,
    stock points and which front designs dominate them, optional hypervolume history."""
    path = Path(path)
    if path.is_dir() or not path.suffix:
        path = path / PARETO_FILE
    doc = pareto_document(front, reference_point=reference_point, stock_points=stock_points,
                          reference_rule=reference_rule, hypervolume_history=hypervolume_history, extra=extra)
    fileio.atomic_write_json(path, doc)
    return doc


def read_pareto_json(path: str | Path) -> dict[str, Any]:
    """Read and check `DIR/pareto.json` (or a file path); one clear ConfigError otherwise."""
    path = Path(path)
    file = path / PARETO_FILE if path.is_dir() else path
    if not path.exists():
        raise ConfigError(f"{path}: no such sweep directory")
    try:
        doc = json.loads(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no {PARETO_FILE} (not a sweep directory, or the sweep has not "
                          "finished a trial yet)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{file}: expected a JSON object")
    for key, typ in (("points", list), ("reference_point", dict)):
        if not isinstance(doc.get(key), typ):
            raise ConfigError(f"{file}: missing or malformed {key!r} (expected a {typ.__name__})")
    if not isinstance(doc.get("hypervolume"), (int, float)):
        raise ConfigError(f"{file}: missing or malformed 'hypervolume' (expected a number)")
    objectives = tuple(doc.get("objectives") or OBJECTIVES)
    for i, p in enumerate(doc["points"]):
        if not isinstance(p, dict) or "config" not in p:
            raise ConfigError(f"{file}: points[{i}] must be an object with a 'config' name")
        try:
            objective_values(p, objectives)
        except ConfigError as exc:
            raise ConfigError(f"{file}: points[{i}]: {exc}") from None
    doc.setdefault("objectives", list(objectives))
    if "objective_info" not in doc:
        info = describe(objectives)
        for o in info:
            if o["key"] == "latency_ms":
                o["measures"] = OLD_LATENCY
        doc["objective_info"] = info
    doc.setdefault("stock", [])
    if "stock_comparison" not in doc:
        doc["stock_comparison"] = stock_comparison(doc["points"], doc["stock"], objectives)
    return doc


__all__ = ["FORMAT_VERSION", "PARETO_FILE", "pareto_document",
           "read_pareto_json", "stock_comparison", "write_pareto_json"]
