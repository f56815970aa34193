"""`pareto.json` of a sweep directory: writing (atomic), reading, and the stock comparison.
`ParetoDoc` is the file as typed fields (its points `DesignPoint`s); it writes back the bytes it read."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from codesign import fileio
from codesign.errors import ConfigError
from codesign.pareto.front import ParetoFront, PointLike
from codesign.pareto.hypervolume import hypervolume
from codesign.pareto.objectives import OBJECTIVES, describe, dominates, objective_values, raw_values
from codesign.pareto.point import DesignPoint
from codesign.pareto.record import JsonObject, JsonRecord
from codesign.pareto.reference import REFERENCE_RULE

PARETO_FILE = "pareto.json"
# 2: objectives may be maximized (throughput); `objective_info` says what each one measures;
# latency_ms is one request through the whole network (version 1: per image, VTA layers only).
FORMAT_VERSION = 2
OLD_LATENCY = ("version 1 file: latency per image of a full batch, counting only the layers VTA "
               "offloads (CPU ops not included)")


@dataclass(frozen=True)
class StockComparison(JsonRecord):
    """How one stock config fares against the front: its objective values (as measured), the front
    designs that dominate it at verified clocks and those that do so only at unverified ones."""

    objectives: dict[str, float] = field(default_factory=dict)
    clock_verified: bool | None = None
    dominated_by: list[str] = field(default_factory=list)
    dominated_by_unverified: list[str] = field(default_factory=list)
    on_front: bool = False


@dataclass(frozen=True)
class ParetoDoc(JsonRecord):
    """pareto.json: the front (`points`, best first), its hypervolume and reference point, the stock
    points and their comparison; the sweep's counts, board clocks, resource model and `confirm`
    section (`codesign sweep --confirm`) when it wrote them."""

    version: int | None = None
    objectives: list[str] = field(default_factory=list)
    objective_info: list[dict[str, str]] = field(default_factory=list)
    n_evaluated: int | None = None
    points: tuple[DesignPoint, ...] = ()
    hypervolume: float = 0.0
    reference_point: dict[str, float] = field(default_factory=dict)
    reference_rule: str | None = None
    stock: tuple[DesignPoint, ...] = ()
    stock_comparison: dict[str, StockComparison] = field(default_factory=dict)
    hypervolume_history: list[float] | None = None
    trials: int | None = None
    feasible_trials: int | None = None
    configs: int | None = None
    scopes: list[str] | None = None
    board: JsonObject | None = None  # `Board.clock_json`
    resource_model: JsonObject | None = None  # `ResourceModel.summary`
    confirm: JsonObject | None = None  # `codesign.sweep.confirm.confirm_section`

    NESTED: ClassVar[dict[str, type[JsonRecord]]] = {"points": DesignPoint, "stock": DesignPoint}
    NESTED_MAP: ClassVar[dict[str, type[JsonRecord]]] = {"stock_comparison": StockComparison}
    OMIT: ClassVar[frozenset[str]] = frozenset({"hypervolume_history", "trials", "feasible_trials", "configs",
                                                "scopes", "board", "resource_model", "confirm"})

    @property
    def objective_keys(self) -> tuple[str, ...]:
        """The objectives' point keys (a file without the list: its reference point's)."""
        return tuple(self.objectives or self.reference_point or OBJECTIVES)


def stock_comparison(front: ParetoFront | Iterable[PointLike], stock_points: Iterable[PointLike],
                     objectives: Sequence[str] | None = None, *,
                     verified_only: bool = True) -> dict[str, StockComparison]:
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
        pts = [DesignPoint.of(p) for p in front]
    objectives = tuple(objectives or OBJECTIVES)
    out: dict[str, StockComparison] = {}
    for s in map(DesignPoint.of, stock_points):
        sv = objective_values(s, objectives)
        dom = [p for p in pts if dominates(objective_values(p, objectives), sv)]
        dom.sort(key=lambda p: objective_values(p, objectives))
        unverified = [p for p in dom if p.clock_verified is False] if verified_only else []
        verified = [p for p in dom if not any(p is u for u in unverified)]
        out[str(s.config)] = StockComparison(
            objectives=dict(zip(objectives, raw_values(s, objectives))),
            clock_verified=s.clock_verified,
            dominated_by=[p.config for p in verified],
            dominated_by_unverified=[p.config for p in unverified],
            on_front=not dom and any(objective_values(p, objectives) == sv for p in pts),
        )
    return out


def pareto_document(front: ParetoFront, *, reference_point: dict[str, float],
                    stock_points: Iterable[PointLike] = (), reference_rule: str = REFERENCE_RULE,
                    hypervolume_history: Sequence[float] | None = None,
                    extra: JsonObject | None = None) -> ParetoDoc:
    stock = [DesignPoint.of(p) for p in stock_points]
    doc = ParetoDoc(
        version=FORMAT_VERSION,
        objectives=list(front.objectives),
        objective_info=describe(front.objectives),
        n_evaluated=front.n_seen,
        points=tuple(front.sorted_points()),
        hypervolume=hypervolume(front.values(), reference_point, front.objectives),
        reference_point={k: float(reference_point[k]) for k in front.objectives},
        reference_rule=reference_rule,
        stock=tuple(stock),
        stock_comparison=stock_comparison(front, stock),
        hypervolume_history=None if hypervolume_history is None else [float(h) for h in hypervolume_history],
    )
    if not extra:
        return doc
    # The sweep's own sections (trials, board, ...) in the order given, after the front's.
    data = doc.to_json()
    clash = sorted(set(extra) & set(data))
    if clash:
        raise ValueError(f"extra keys {clash} would overwrite pareto.json fields")
    return ParetoDoc.from_json({**data, **extra})


def write_pareto_json(path: str | Path, front: ParetoFront, *, reference_point: dict[str, float],
                      stock_points: Iterable[PointLike] = (), reference_rule: str = REFERENCE_RULE,
                      hypervolume_history: Sequence[float] | None = None,
                      extra: JsonObject | None = None) -> ParetoDoc:
    """Write `pareto.json` atomically (a directory path gets `pareto.json` inside); returns the
    document: objectives, points (sorted by latency), hypervolume, reference_point and its rule,
    stock points and which front designs dominate them, optional hypervolume history."""
    path = Path(path)
    if path.is_dir() or not path.suffix:
        path = path / PARETO_FILE
    doc = pareto_document(front, reference_point=reference_point, stock_points=stock_points,
                          reference_rule=reference_rule, hypervolume_history=hypervolume_history, extra=extra)
    fileio.atomic_write_json(path, doc.to_json())
    return doc


def read_pareto(path: str | Path) -> ParetoDoc:
    """`read_pareto_json` as a typed `ParetoDoc` (its `to_json()` is the checked object)."""
    return ParetoDoc.from_json(read_pareto_json(path))


def read_pareto_json(path: str | Path) -> JsonObject:
    """Read and check `DIR/pareto.json` (or a file path) as its JSON object, older versions'
    missing sections filled in; one clear ConfigError otherwise."""
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
        doc["stock_comparison"] = {k: c.to_json() for k, c in
                                   stock_comparison(doc["points"], doc["stock"], objectives).items()}
    return doc


__all__ = ["FORMAT_VERSION", "PARETO_FILE", "ParetoDoc", "StockComparison", "pareto_document", "read_pareto",
           "read_pareto_json", "stock_comparison", "write_pareto_json"]
