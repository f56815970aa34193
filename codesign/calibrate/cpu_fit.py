"""Fit the CPU cost model's few physical parameters to measured arm_cpu records
(`codesign calibrate cpu LOG... -o FILE`; the shipped fit is sim/cpu_params.json).

Per CPU: call overhead (s), bandwidth (bytes/s) and one sustained rate (GMAC/s) per kernel
kind and dtype the records measure. Least squares on log(predicted / measured) (relative
errors, so 1 ms and 1 s convs weigh alike) within physical bounds; the bandwidth is bounded by
the peak DRAM bandwidth of the board the records were measured on (hw_configs/boards/).
Leave-one-out refits the record's CPU without it and predicts it. docs/cpu-model.md.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from codesign.calibrate.cpu_replay import CpuCase, load_cpu_cases
from codesign.calibrate.metrics import log_rmse, mape, spearman
from codesign.cpu import CpuModel, CpuParams, predict, rate_key
from codesign.errors import ConfigError
from codesign.hw.board import Board
from codesign.paths import ROOT

# (low, high) physical bounds. The per-call overhead of a TVM function call through its
# runtime is microseconds to a fraction of a millisecond; sustained conv rates of these
# cores are 0.01-100 GMAC/s; bandwidth below 10 MB/s or above the board's DRAM peak is not physical.
OVERHEAD_BOUNDS = (1e-6, 5e-3)
GMACS_BOUNDS = (0.01, 100.0)
MIN_BYTES_PER_S = 1e7
MODEL = "seconds = call_overhead_s + macs / (gmacs[kind/dtype] * 1e9) + bytes / bytes_per_s"


def _groups(cases: Sequence[CpuCase]) -> list[str]:
    return sorted({rate_key(c.op.kind, c.op.dtype) for c in cases})


def _predict(x: np.ndarray, keys: Sequence[str], macs: np.ndarray, nbytes: np.ndarray, gi: np.ndarray) -> np.ndarray:
    ov, bw = np.exp(x[0]), np.exp(x[1])
    rates = np.exp(x[2:])[gi] * 1e9
    return ov + macs / rates + nbytes / bw


def fit_cpu(cases: Sequence[CpuCase], bw_peak: float, start: CpuParams | None = None) -> tuple[CpuParams, dict[str, Any]]:
    """Fit one CPU's parameters to its cases. Returns (params, {"at_bound": [...], "cost": ...})."""
    from scipy.optimize import least_squares

    if not cases:
        raise ConfigError("no records to fit")
    cpu = cases[0].cpu
    keys = _groups(cases)
    n_params = 2 + len(keys)
    if len(cases) < n_params + 1:
        raise ConfigError(f"{cpu}: {len(cases)} record(s) cannot pin {n_params} parameters (overhead, bandwidth, "
                          f"{', '.join(keys)}); at least {n_params + 1} are needed")
    works = [c.work for c in cases]
    macs = np.array([w.macs for w in works], dtype=np.float64)
    nbytes = np.array([w.bytes for w in works], dtype=np.float64)
    gi = np.array([keys.index(rate_key(c.op.kind, c.op.dtype)) for c in cases])
    meas = np.array([c.measured_s for c in cases])
    lo = np.log([OVERHEAD_BOUNDS[0], MIN_BYTES_PER_S] + [GMACS_BOUNDS[0]] * len(keys))
    hi = np.log([OVERHEAD_BOUNDS[1], bw_peak] + [GMACS_BOUNDS[1]] * len(keys))
    if start is not None and all(k in start.gmacs for k in keys):
        x0 = np.log([start.call_overhead_s, start.bytes_per_s] + [start.gmacs[k] for k in keys])
    else:
        # Start: 10 us per call, half the DRAM peak, each kind's median measured MAC rate.
        x0 = np.log([1e-5, bw_peak / 2] + [float(np.median(macs[gi == j] / meas[gi == j])) / 1e9
                                              for j in range(len(keys))])
    x0 = np.clip(x0, lo + 1e-6, hi - 1e-6)
    res = least_squares(lambda x: np.log(_predict(x, keys, macs, nbytes, gi) / meas), x0, bounds=(lo, hi),
                        method="trf", x_scale=1.0, max_nfev=2000)
    x = res.x
    names = ["call_overhead_s", "bytes_per_s"] + [f"gmacs[{k}]" for k in keys]
    at_bound = [n for n, v, a, b in zip(names, x, lo, hi) if v - a < 1e-3 or b - v < 1e-3]
    params = CpuParams(cpu=cpu, call_overhead_s=float(np.exp(x[0])), bytes_per_s=float(np.exp(x[1])),
                       gmacs={k: float(np.exp(v)) for k, v in zip(keys, x[2:])}, measured_on=cases[0].board)
    return params, {"at_bound": at_bound, "cost": float(res.cost), "nfev": int(res.nfev),
                    "bounds": {"call_overhead_s": list(OVERHEAD_BOUNDS), "bytes_per_s": [MIN_BYTES_PER_S, bw_peak],
                               "gmacs": list(GMACS_BOUNDS)}}


def predict_case(case: CpuCase, params: CpuParams) -> float:
    return predict(case.work, params).seconds


def metrics(pred: Sequence[float], meas: Sequence[float]) -> dict[str, float]:
    p, m = np.asarray(pred, dtype=np.float64), np.asarray(meas, dtype=np.float64)
    return {"records": int(p.size), "mape": mape(p, m), "spearman": spearman(p, m), "log_rmse": log_rmse(p, m),
            "max_abs_error_pct": float(np.max(np.abs(p / m - 1)) * 100) if p.size else float("nan")}


def leave_one_out(cases: Sequence[CpuCase], bw_peak: float, start: CpuParams,
                  on_fold: Callable[[int, int], None] | None = None) -> tuple[list[float | None], list[str]]:
    """Refit without each record, predict it. A record whose kind/dtype no other record
    measures cannot be predicted from the rest: None, with the reason."""
    preds: list[float | None] = []
    notes: list[str] = []
    for k, case in enumerate(cases):
        rest = [c for j, c in enumerate(cases) if j != k]
        key = rate_key(case.op.kind, case.op.dtype)
        if not any(rate_key(c.op.kind, c.op.dtype) == key for c in rest):
            preds.append(None)
            notes.append(f"only record of {key} on {case.cpu}")
        else:
            params, _ = fit_cpu(rest, bw_peak, start)
            preds.append(predict_case(case, params))
            notes.append("")
        if on_fold is not None:
            on_fold(k + 1, len(cases))
    return preds, notes


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def calibrate_cpu(paths: Sequence[str | Path], loo: bool = True,
                  on_fold: Callable[[int, int], None] | None = None) -> tuple[CpuModel, dict[str, Any], dict[str, Any]]:
    """Fit every CPU the records of `paths` measure. Returns (model, per-CPU fit reports, provenance)."""
    cases, skipped = load_cpu_cases(list(paths))
    if not cases:
        raise ConfigError("no usable arm_cpu records in " + ", ".join(str(p) for p in paths)
                          + (f" (first skip reason: line {skipped[0].line}: {skipped[0].reason})" if skipped else ""))
    by_cpu: dict[str, list[CpuCase]] = {}
    for c in cases:
        by_cpu.setdefault(c.cpu, []).append(c)
    cpus: dict[str, CpuParams] = {}
    fits: dict[str, Any] = {}
    per_record: list[dict[str, Any]] = []
    all_pred, all_meas, loo_pred, loo_meas = [], [], [], []
    total = len(cases)
    done = 0

    def fold(_k: int, _n: int) -> None:
        nonlocal done
        done += 1
        if on_fold is not None:
            on_fold(done, total)

    for cpu, cc in sorted(by_cpu.items()):
        boards = sorted({c.board for c in cc})
        bw_peak = min(Board.named(b).dram_bandwidth_gbps for b in boards) * 1e9
        params, info = fit_cpu(cc, bw_peak)
        cpus[cpu] = params
        pred = [predict_case(c, params) for c in cc]
        meas = [c.measured_s for c in cc]
        rep: dict[str, Any] = {"records": len(cc), "boards": boards, **info, "after": metrics(pred, meas)}
        lp: list[float | None] = [None] * len(cc)
        notes = [""] * len(cc)
        if loo:
            lp, notes = leave_one_out(cc, bw_peak, params, fold)
            ok = [(p, m) for p, m in zip(lp, meas) if p is not None]
            rep["leave_one_out"] = metrics([p for p, _ in ok], [m for _, m in ok])
            rep["leave_one_out"]["not_predictable"] = sum(1 for p in lp if p is None)
            loo_pred += [p for p, _ in ok]
            loo_meas += [m for _, m in ok]
        rep["per_kind"] = {}
        for key in params.gmacs:
            idx = [i for i, c in enumerate(cc) if rate_key(c.op.kind, c.op.dtype) == key]
            row = {"after": metrics([pred[i] for i in idx], [meas[i] for i in idx])}
            if loo:
                ok_i = [i for i in idx if lp[i] is not None]
                row["leave_one_out"] = metrics([lp[i] for i in ok_i], [meas[i] for i in ok_i])  # type: ignore[misc]
            rep["per_kind"][key] = row
        fits[cpu] = rep
        all_pred += pred
        all_meas += meas
        for c, p, q, note in zip(cc, pred, lp, notes):
            row = {"file": c.file, "line": c.record.line, "cpu": cpu, "layer": c.op.shape.name,
                   "kind": c.op.kind, "dtype": c.op.dtype, "measured_s": c.measured_s, "predicted_s": p,
                   "error_pct": (p / c.measured_s - 1) * 100}
            if loo:
                row["loo_predicted_s"] = q
                row["loo_error_pct"] = None if q is None else (q / c.measured_s - 1) * 100
                if note:
                    row["loo_note"] = note
            per_record.append(row)
    provenance: dict[str, Any] = {
        "created": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "tool": "codesign calibrate cpu",
        "model": MODEL,
        "objective": "least squares on log(predicted_s / measured_s), scipy.optimize.least_squares (trf, bounds), "
                     "parameters in log space",
        "data": [{"file": _display_path(Path(p)), "sha256": hashlib.sha256(Path(p).read_bytes()).hexdigest(),
                  "records_used": sum(1 for c in cases if c.file == str(p))} for p in paths],
        "records_used": len(cases),
        "records_skipped": [{"file": s.file, "line": s.line, "reason": s.reason} for s in skipped],
        "after": metrics(all_pred, all_meas),
        "per_record": per_record,
    }
    if loo:
        provenance["leave_one_out"] = metrics(loo_pred, loo_meas)
    return CpuModel(cpus=cpus, source="fit", provenance=provenance), fits, provenance


__all__ = ["OVERHEAD_BOUNDS", "GMACS_BOUNDS", "MODEL", "fit_cpu", "predict_case", "metrics", "leave_one_out",
           "calibrate_cpu"]
