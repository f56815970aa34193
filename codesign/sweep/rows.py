"""`TrialRow`: one line of trials.jsonl -- a finished trial as the driver recorded it -- with typed
fields instead of a dict read by string keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from codesign.fileio import read_jsonl
from codesign.pareto.objectives import OBJECTIVES
from codesign.pareto.point import DesignPoint, LayerResult, Step
from codesign.pareto.record import JsonObject, JsonRecord

TRIALS_FILE = "trials.jsonl"

# Keys of a row that are about the run, not the design (a cached result does not copy them).
RUN_KEYS = ("trial_id", "number", "status", "timestamp", "params", "retries", "node")


@dataclass(frozen=True)
class Unsupported(JsonRecord):
    """A layer a design leaves on the CPU (`count` per batch) and why."""

    layer: str = ""
    count: int = 1
    reason: str | None = None


@dataclass(frozen=True)
class TrialRow(JsonRecord):
    """A finished trial: `status` "ok" (the design's result, feasible or not) or "error" (`error`:
    the last line of the trial's exception). `retries`: failures Ray Tune ran it again after (a lost
    worker or node). `extra`: keys this version does not know, written back unchanged. A row read
    from trials.jsonl writes back the line it was read from (`JsonRecord`); a row the driver builds
    (`built()`) writes its fields in this order, as trials.jsonl has always had them."""

    trial_id: str = ""
    status: str = "ok"
    config: str | None = None
    feasible: bool = False
    number: int = 0
    timestamp: float = 0.0
    params: dict[str, Any] | None = None  # the searcher's sample (hardware knob -> value)
    reason: str | None = None  # why a design is infeasible
    error: str | None = None
    latency_ms: float | None = None  # one request (a BATCH=N design: its padded batch's time)
    throughput_ips: float | None = None  # images per second with full batches
    vta_ms: float | None = None  # of latency_ms: the steps on VTA
    cpu_ms: float | None = None  # of latency_ms: the steps on the CPU (None: not costed, scope "offloaded layers")
    scope: str | None = None  # what latency_ms counts (codesign.sweep.trial SCOPE_*)
    scope_note: str | None = None  # why a design is costed as its offloaded layers only
    area: float | None = None
    power_w: float | None = None
    energy_j: float | None = None
    hw: JsonObject | None = None  # `HwConfig.to_dict`
    resources: JsonObject | None = None  # `Resources.to_json`
    activity: dict[str, float] | None = None
    batch: int | None = None
    clock_verified: bool | None = None
    layers: tuple[LayerResult, ...] = ()  # best schedule per unique layer
    unsupported: tuple[Unsupported, ...] = ()  # layers left on the CPU, with the reason
    steps: tuple[Step, ...] = ()  # the network plan: every step, VTA and CPU
    objective_info: list[dict[str, str]] = field(default_factory=list)  # what the sweep's objectives measure
    measurements: int = 0
    wall_s: float | None = None
    cached: bool = False  # the result of an earlier trial of the same config
    node: str | None = None  # the Ray node that ran it
    retries: int = 0

    NESTED: ClassVar[dict[str, type[JsonRecord]]] = {"layers": LayerResult, "unsupported": Unsupported,
                                                     "steps": Step}
    OMIT: ClassVar[frozenset[str]] = frozenset({"retries", "node", "error"})

    @classmethod
    def coerce(cls, known: dict[str, Any]) -> dict[str, Any]:
        known["trial_id"] = str(known.get("trial_id"))
        for key in ("layers", "unsupported", "steps"):
            known[key] = tuple(known.get(key) or ())
        known["objective_info"] = list(known.get("objective_info") or [])
        known["retries"] = int(known.get("retries") or 0)
        known["feasible"] = bool(known.get("feasible"))
        return known

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def design(self) -> bool:
        """A finished feasible design (a point of the front's candidates)."""
        return self.ok and self.feasible and self.config is not None

    def objectives(self, objectives: tuple[str, ...] = OBJECTIVES) -> dict[str, float] | None:
        """The searcher's objectives (None for an error row, or a row without one of them)."""
        values = {k: self.get(k) for k in objectives}
        return None if any(v is None for v in values.values()) else {k: float(v) for k, v in values.items()}

    def point(self) -> DesignPoint:
        """The pareto.json point of this design (per-layer results compacted)."""
        return DesignPoint(
            config=str(self.config), latency_ms=self.latency_ms, throughput_ips=self.throughput_ips, area=self.area,
            power_w=self.power_w, energy_j=self.energy_j, vta_ms=self.vta_ms, cpu_ms=self.cpu_ms, scope=self.scope,
            scope_note=self.scope_note, resources=self.resources, activity=self.activity, hw=self.hw,
            batch=self.batch, clock_verified=self.clock_verified, trial_id=self.trial_id,
            layers=tuple(lay.compact() for lay in self.layers), steps=self.steps)

    def result_json(self) -> JsonObject:
        """The design's result without the run's keys (what a trial of the same config returns)."""
        return {k: v for k, v in self.built().to_json().items() if k not in RUN_KEYS}


def read_trials(out_dir: str | Path) -> list[TrialRow]:
    """The finished trials of a sweep in completion order, one per trial id (a trial that errored
    and later succeeded on resume keeps the success). Truncated lines are skipped."""
    rows: dict[str, TrialRow] = {}
    for data in read_jsonl(Path(out_dir) / TRIALS_FILE):
        row = TrialRow.from_json(data)
        if row.trial_id not in rows or not rows[row.trial_id].ok:
            rows[row.trial_id] = row
    return list(rows.values())
