"""One evaluated design: `design_point` computes it as a JSON-ready dict (a trial's result);
`DesignPoint` is the typed point the front, pareto.json, the report and the plots read
(with its per-layer `LayerResult`s and network `Step`s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.hw.power import PowerModel, default_model, energy_j, normalize_activity
from codesign.hw.resources import Resources, estimate
from codesign.pareto.record import JsonObject, JsonRecord


@dataclass(frozen=True)
class LayerResult(JsonRecord):
    """The best schedule of one unique layer of a design: `count` runs per batch of `seconds` each.
    A pareto point keeps layer, count, seconds and knobs; a trial row all of them."""

    layer: str = ""
    count: int = 1
    seconds: float = 0.0
    cycles: int | None = None
    knobs: JsonObject | None = None
    index: int | None = None  # the schedule's index in its space
    measurements: int | None = None
    gops: float | None = None

    OMIT: ClassVar[frozenset[str]] = frozenset({"cycles", "index", "measurements", "gops"})

    def compact(self) -> LayerResult:
        """What a pareto point keeps of it."""
        return LayerResult(layer=self.layer, count=self.count, seconds=self.seconds, knobs=self.knobs)


@dataclass(frozen=True)
class Step(JsonRecord):
    """One step of one request through the network plan: where it runs and its time (ms); a VTA
    step names its layer, a host rewrite its transform."""

    name: str = ""
    kind: str = ""
    placement: str = ""  # "vta" or "cpu"
    ms: float = 0.0
    layer: str | None = None
    transform: str | None = None

    OMIT: ClassVar[frozenset[str]] = frozenset({"layer", "transform"})


@dataclass(frozen=True)
class DesignPoint(JsonRecord):
    """A point of the front (pareto.json `points` and `stock`): the objectives as measured, what
    latency counts (`scope`), resources/activity/hw as the design's own JSON, its per-layer
    schedules and network steps; `measured_*`: the board's latency (`codesign sweep --confirm`)."""

    config: str = ""
    latency_ms: float | None = None
    throughput_ips: float | None = None
    area: float | None = None
    power_w: float | None = None
    energy_j: float | None = None
    vta_ms: float | None = None
    cpu_ms: float | None = None
    scope: str | None = None
    scope_note: str | None = None
    resources: JsonObject | None = None
    activity: dict[str, float] | None = None
    hw: JsonObject | None = None
    batch: int | None = None
    clock_verified: bool | None = None
    trial_id: str | None = None
    layers: tuple[LayerResult, ...] = ()
    steps: tuple[Step, ...] = ()
    measured_latency_ms: float | None = None
    measured_device_ms: float | None = None

    NESTED: ClassVar[dict[str, type[JsonRecord]]] = {"layers": LayerResult, "steps": Step}
    OMIT: ClassVar[frozenset[str]] = frozenset({"measured_latency_ms", "measured_device_ms"})

    def utilization(self, resource: str) -> float | None:
        """The fraction of the board's `resource` (lut, ff, bram18, dsp) the design uses."""
        util = (self.resources or {}).get("utilization") or {}
        return util.get(resource)


def design_point(hw: HwConfig, board: Board, latency_ms: float, activity: dict[str, float] | None = None,
                 *, power_model: PowerModel | None = None, resources: Resources | None = None,
                 **extra: Any) -> dict[str, Any]:
    """{config, latency_ms, area, power_w, energy_j, resources, activity, hw, ...extra}.

    `latency_ms` is the time of one request (for BATCH > 1: of its padded batch; what it counts is
    the caller's `scope`); `activity` the busy fractions {"load", "compute", "store"} over it;
    energy = power x latency.
    """
    res = resources or estimate(hw, board)
    model = power_model or default_model()
    act = normalize_activity(activity)
    power = model.power_w(hw, board, res, act)
    point: dict[str, Any] = {
        "config": hw.name,
        "latency_ms": float(latency_ms),
        "area": res.area(board),
        "power_w": power,
        "energy_j": energy_j(power, float(latency_ms) * 1e-3),
        "resources": res.to_json(board),
        "activity": act,
        "hw": hw.to_dict(),
        # False: above the board's highest clock known to close timing (latency is optimistic)
        "clock_verified": board.clock_verified(float(hw.clock_mhz)),
    }
    point.update(extra)
    return point


__all__ = ["DesignPoint", "LayerResult", "Step", "design_point"]
