"""Replay AutoTVM logs on the timing model and fit its physical parameters.

`replay` (codesign.calibrate.replay) and `calibrate`/`fit` (codesign.calibrate.fit) share the
record→case rebuild and the metrics (codesign.calibrate.metrics).
"""

from codesign.calibrate.fit import BOUNDS, FIT_PARAMS, calibrate, fit, leave_one_out, prepare
from codesign.calibrate.metrics import log_rmse, mape, spearman
from codesign.calibrate.replay import Case, ReplayRow, Skip, build_case, load_cases, replay, summarize

__all__ = ["BOUNDS", "FIT_PARAMS", "calibrate", "fit", "leave_one_out", "prepare", "log_rmse", "mape",
           "spearman", "Case", "ReplayRow", "Skip", "build_case", "load_cases", "replay", "summarize"]
