"""The co-design outer loop: Ray Tune trials over hardware configs, each with inner schedule
tuning of every layer, tracked as a Pareto front of latency, area and power."""

from codesign.sweep.options import SEARCHES, SweepOptions
from codesign.sweep.runner import SweepResult, run_sweep
from codesign.sweep.trial import OBJECTIVES, evaluate_hw

__all__ = ["OBJECTIVES", "SEARCHES", "SweepOptions", "SweepResult", "evaluate_hw", "run_sweep"]
