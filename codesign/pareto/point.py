"""One evaluated design as a JSON-ready dict: the objectives plus resources, power and energy."""

from __future__ import annotations

from typing import Any

from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.hw.power import PowerModel, default_model, energy_j, normalize_activity
from codesign.hw.resources import Resources, estimate


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


__all__ = ["design_point"]
