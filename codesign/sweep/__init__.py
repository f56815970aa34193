"""The co-design outer loop: Ray Tune trials over hardware configs, each with inner schedule
tuning of every layer, tracked as a Pareto front of latency, area and power.

The names below load on first use (PEP 562): `codesign.sweep.options` or `.trial` -- what a Ray
worker and `codesign sweep --help` need -- must not import the runner and with it Ray Tune (~1 s)."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SEARCHES": "codesign.sweep.options", "SweepOptions": "codesign.sweep.options",
    "SweepResult": "codesign.sweep.runner", "run_sweep": "codesign.sweep.runner",
    "OBJECTIVES": "codesign.sweep.trial", "evaluate_hw": "codesign.sweep.trial",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'codesign.sweep' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
