"""`TrialRow`: one line of trials.jsonl -- a finished trial as the driver recorded it -- with typed
fields instead of a dict read by string keys."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from codesign.fileio import read_jsonl
from codesign.pareto.objectives import OBJECTIVES

TRIALS_FILE = "trials.jsonl"

# Keys of a row that are about the run, not the design (a cached result does not copy them).
RUN_KEYS = ("trial_id", "number", "status", "timestamp", "params", "retries", "node")
# Fields of a row that go into pareto.json points (per-layer results compacted).
POINT_KEYS = ("config", "latency_ms", "throughput_ips", "area", "power_w", "energy_j", "vta_ms", "cpu_ms", "scope", "scope_note",
              "resources", "activity", "hw", "batch", "clock_verified", "trial_id")
LAYER_POINT_KEYS = ("layer", "count", "seconds", "knobs")


@dataclass(frozen=True)
class TrialRow:
    """A finished trial: `status` "ok" (the design's result, feasible or not) or "error" (`error`:
    the last line of the trial's exception). `retries`: failures Ray Tune ran it again after (a lost
    worker or node). `extra`: keys this version does not know, written back unchanged."""

    trial_id: str
    status: str = "ok"
    config: str | None = None
    feasible: bool = False
    number: int = 0
    timestamp: float = 0.0
    params: dict[str, Any] | None = None
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
    hw: dict[str, Any] | None = None
    resources: dict[str, Any] | None = None
    activity: dict[str, Any] | None = None
    batch: int | None = None
    clock_verified: bool | None = None
    layers: list[dict[str, Any]] = field(default_factory=list)  # best schedule per unique layer
    unsupported: list[dict[str, Any]] = field(default_factory=list)  # layers left on the CPU, with the reason
    steps: list[dict[str, Any]] = field(default_factory=list)  # the network plan: every step, VTA and CPU
    objective_info: list[dict[str, Any]] = field(default_factory=list)  # what the sweep's objectives measure
    measurements: int = 0
    wall_s: float | None = None
    cached: bool = False  # the result of an earlier trial of the same config
    node: str | None = None  # the Ray node that ran it
    retries: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def design(self) -> bool:
        """A finished feasible design (a point of the front's candidates)."""
        return self.ok and self.feasible and self.config is not None

    def objectives(self, objectives: tuple[str, ...] = OBJECTIVES) -> dict[str, float] | None:
        """The searcher's objectives (None for an error row, or a row without one of them)."""
        values = {k: getattr(self, k, None) for k in objectives}
        return None if any(v is None for v in values.values()) else {k: float(v) for k, v in values.items()}

    def point(self) -> dict[str, Any]:
        """The pareto.json point of this design."""
        point = {k: getattr(self, k) for k in POINT_KEYS}
        point["layers"] = [{k: lay[k] for k in LAYER_POINT_KEYS} for lay in self.layers]
        point["steps"] = [dict(st) for st in self.steps]
        return point

    def result_json(self) -> dict[str, Any]:
        """The design's result without the run's keys (what a trial of the same config returns)."""
        return {k: v for k, v in self.to_json().items() if k not in RUN_KEYS}

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "extra"}
        if not self.retries:
            del out["retries"]
        if self.node is None:
            del out["node"]
        if self.error is None:
            del out["error"]
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrialRow:
        names = {f.name for f in fields(cls)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names}
        known["trial_id"] = str(known.get("trial_id"))
        for key in ("layers", "unsupported", "steps", "objective_info"):
            known[key] = list(known.get(key) or [])
        known["retries"] = int(known.get("retries") or 0)
        known["feasible"] = bool(known.get("feasible"))
        return cls(**known, extra={k: v for k, v in data.items() if k not in names})


def read_trials(out_dir: str | Path) -> list[TrialRow]:
    """The finished trials of a sweep in completion order, one per trial id (a trial that errored
    and later succeeded on resume keeps the success). Truncated lines are skipped."""
    rows: dict[str, TrialRow] = {}
    for data in read_jsonl(Path(out_dir) / TRIALS_FILE):
        row = TrialRow.from_json(data)
        if row.trial_id not in rows or not rows[row.trial_id].ok:
            rows[row.trial_id] = row
    return list(rows.values())
