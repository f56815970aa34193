"""Error metrics for predicted vs measured latencies (one definition used by replay and calibrate)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Mean absolute percentage error, in percent (NaN for no data)."""
    p = np.asarray(predicted, dtype=np.float64)
    m = np.asarray(measured, dtype=np.float64)
    if p.size == 0:
        return float("nan")
    return float(np.mean(np.abs(p - m) / m) * 100.0)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(x.size, dtype=np.float64)
    sorted_x = x[order]
    i = 0
    while i < x.size:
        j = i
        while j + 1 < x.size and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman rank correlation (Pearson correlation of average ranks); NaN if undefined."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.size < 2:
        return float("nan")
    rx, ry = _ranks(x), _ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    den = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / den) if den > 0 else float("nan")


def log_rmse(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Root mean square of log(predicted/measured) — the quantity calibration minimizes."""
    p = np.asarray(predicted, dtype=np.float64)
    m = np.asarray(measured, dtype=np.float64)
    if p.size == 0:
        return float("nan")
    return float(np.sqrt(np.mean(np.log(p / m) ** 2)))


__all__ = ["mape", "spearman", "log_rmse"]
