"""Fit the timing model's few physical parameters to measured AutoTVM records.

Objective: least squares on log(predicted / measured) seconds (relative errors, so 1 ms and
100 ms layers weigh alike), with physical bounds, by `scipy.optimize.least_squares`. Programs
are compiled once per record; only `time_program` + `predict_seconds` run inside the fit.
Host overhead is an explicit term (docs/vta.md §4.7), never folded into device parameters.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from codesign.calibrate.metrics import log_rmse, mape, spearman
from codesign.calibrate.replay import Case, Skip, load_cases
from codesign.errors import CodesignError, ConfigError
from codesign.evaluate.compiler import compile_insns
from codesign.evaluate.run import layer_io_bytes
from codesign.hw.config import HwConfig
from codesign.paths import ROOT
from codesign.vta.timing import TimingParams, default_params, predict_seconds, time_program

# The parameters `codesign calibrate` fits by default, with their physical bounds and the scale
# used to normalize the optimizer's variables. Everything else stays at its hardware value.
BOUNDS: dict[str, tuple[float, float, float]] = {
    # name: (low, high, scale)
    "dma_bytes_per_cycle_efficiency": (0.05, 1.0, 0.5),
    "dma_dram_efficiency": (0.05, 1.0, 0.5),
    "dma_insn_latency": (0.0, 1000.0, 50.0),
    "dma_row_overhead": (0.0, 200.0, 10.0),
    "gemm_insn_overhead": (0.0, 1000.0, 20.0),
    "gemm_loop_overhead": (0.0, 100.0, 5.0),
    "alu_insn_overhead": (0.0, 1000.0, 20.0),
    "alu_loop_overhead": (0.0, 100.0, 5.0),
    "host_call_s": (1e-6, 20e-3, 1e-4),
    "host_per_insn_s": (0.0, 100e-6, 1e-6),
    "host_per_in_byte_s": (0.0, 1e-6, 1e-9),
    "host_per_out_byte_s": (0.0, 1e-6, 1e-9),
}
FIT_PARAMS: tuple[str, ...] = (
    "dma_bytes_per_cycle_efficiency", "dma_dram_efficiency", "dma_insn_latency", "dma_row_overhead",
    "gemm_loop_overhead", "alu_loop_overhead", "host_call_s", "host_per_insn_s",
)
# Log-normal priors (median, factor for one standard deviation, source) for parameters that
# records of large layers cannot pin down on their own. Calibration is a MAP fit: each record's
# log-latency error is taken to have standard deviation DATA_SIGMA.
DATA_SIGMA = 0.05
PRIORS: dict[str, tuple[float, float, str]] = {
    "host_call_s": (
        1e-4, 2.0,
        "docs/vta.md §4.7: every operator call starts the device by MMIO and polls its done "
        "register after a 1 us nanosleep plus yields (Linux sleeps take tens of us); docs/vta.md §9: tophub's "
        "pynq_1x16 LSTM dense 256->128 (128 GEMM cycles of work) measured 0.141 ms in total, so the "
        "fixed cost per call is of order 0.1 ms. ResNet-18 layers (>= 1 ms, DMA-heavy) cannot "
        "separate it from per-DMA latencies.",
    ),
}


@dataclass(frozen=True)
class FitCase:
    """A valid record with its compiled instruction matrix (compiled once, timed many times)."""

    case: Case
    insns: np.ndarray
    n_insns: int
    in_bytes: int = 0
    out_bytes: int = 0

    @property
    def measured_s(self) -> float:
        return self.case.measured_s

    def predict(self, params: TimingParams) -> float:
        cycles = time_program(self.insns, self.case.hw, params).cycles
        return predict_seconds(cycles, self.n_insns, self.case.hw, params, self.in_bytes, self.out_bytes)


@dataclass
class FitResult:
    params: TimingParams
    names: tuple[str, ...]
    predicted: np.ndarray
    cost: float
    nfev: int
    success: bool
    message: str
    extra: dict[str, Any] = field(default_factory=dict)


def prepare(cases: Sequence[Case]) -> tuple[list[FitCase], list[Skip]]:
    """Compile every valid case in timing mode; invalid ones are skipped with the rule."""
    out: list[FitCase] = []
    skipped: list[Skip] = []
    for case in cases:
        if not case.valid:
            skipped.append(Skip(case.file, case.record.line, f"schedule invalid here: {case.why_invalid}"))
            continue
        try:
            insns = compile_insns(case.layer, case.config, case.hw).insns
        except CodesignError as exc:
            skipped.append(Skip(case.file, case.record.line, f"compile failed: {exc}"))
            continue
        insns = np.ascontiguousarray(insns, dtype=np.int64)
        out.append(FitCase(case, insns, int(insns.shape[0]), *layer_io_bytes(case.layer)))
    return out, skipped


def predict_all(fcases: Sequence[FitCase], params: TimingParams) -> np.ndarray:
    return np.array([fc.predict(params) for fc in fcases], dtype=np.float64)


def metrics(predicted: Sequence[float], measured: Sequence[float]) -> dict[str, float]:
    p = np.asarray(predicted, dtype=np.float64)
    m = np.asarray(measured, dtype=np.float64)
    return {
        "mape": mape(p, m),
        "spearman": spearman(p, m),
        "log_rmse": log_rmse(p, m),
        "max_abs_error_pct": float(np.max(np.abs(p / m - 1)) * 100) if p.size else float("nan"),
    }


def _check_names(names: Sequence[str]) -> tuple[str, ...]:
    for n in names:
        if n not in BOUNDS:
            raise ConfigError(f"cannot fit timing parameter {n!r}; fittable: {', '.join(BOUNDS)}")
    return tuple(names)


def check_pinnable(n_records: int, names: Sequence[str]) -> None:
    """Refuse a fit with more free parameters than the records can pin. Parameters with a prior
    (PRIORS) are held by it; every other one needs a record of its own, plus one left over so the
    fit has a residual (and leave-one-out has something to predict)."""
    free = [n for n in names if n not in PRIORS]
    need = len(free) + 1
    if n_records < need:
        raise ConfigError(
            f"{n_records} usable record(s) cannot pin {len(free)} free parameter(s) "
            f"({', '.join(free)}); at least {need} records are needed. Fit fewer with --fit NAMES, "
            "or fit only the host terms with --profile NAME")


def multistart(residuals: Callable[[np.ndarray], np.ndarray], starts: Sequence[np.ndarray], lo: np.ndarray,
               hi: np.ndarray, scale: np.ndarray) -> tuple[Any, int]:
    """The lowest-cost bounded least-squares fit (trf, on parameters / `scale`) from each start ->
    (scipy's result, function evaluations in all). Starts are clipped strictly inside the bounds
    (least_squares requires it)."""
    from scipy.optimize import least_squares

    best, nfev = None, 0
    for x0 in starts:
        x0 = np.minimum(np.maximum(np.clip(x0, lo, hi), lo + 1e-9 * scale), hi - 1e-9 * scale)
        res = least_squares(residuals, x0 / scale, bounds=(lo / scale, hi / scale), method="trf",
                            diff_step=1e-3, x_scale=1.0, max_nfev=400)
        nfev += int(res.nfev)
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    return best, nfev


def fit(fcases: Sequence[FitCase], base: TimingParams, names: Sequence[str] = FIT_PARAMS,
        starts: Sequence[TimingParams] | None = None) -> FitResult:
    """Least-squares fit of `names` (others fixed at `base`) on log-latency. Several starting
    points may be given; the best final cost wins."""
    names = _check_names(names)
    if not fcases:
        raise ConfigError("no usable records to fit")
    lo = np.array([BOUNDS[n][0] for n in names])
    hi = np.array([BOUNDS[n][1] for n in names])
    scale = np.array([BOUNDS[n][2] for n in names])
    measured = np.array([fc.measured_s for fc in fcases])
    base_dict = base.to_dict()

    def make(z: np.ndarray) -> TimingParams:
        x = np.clip(z * scale, lo, hi)
        return TimingParams(**{**base_dict, **{n: float(v) for n, v in zip(names, x)}})

    prior_idx = [(k, *PRIORS[n][:2]) for k, n in enumerate(names) if n in PRIORS]

    def residuals(z: np.ndarray) -> np.ndarray:
        pred = predict_all(fcases, make(z))
        r = np.log(pred / measured)
        if prior_idx:
            x = np.clip(z * scale, lo, hi)
            pr = [DATA_SIGMA * np.log(x[k] / med) / np.log(fac) for k, med, fac in prior_idx]
            r = np.concatenate([r, pr])
        return r

    unique: list[TimingParams] = []
    for start in (starts or [base]):
        if start not in unique:
            unique.append(start)
    best, total_nfev = multistart(residuals, [np.array([getattr(st, n) for n in names]) for st in unique],
                                  lo, hi, scale)
    params = make(best.x)
    pred = predict_all(fcases, params)
    return FitResult(params=params, names=names, predicted=pred, cost=float(best.cost),
                     nfev=total_nfev, success=bool(best.success), message=str(best.message))


def leave_one_out(fcases: Sequence[FitCase], base: TimingParams, names: Sequence[str],
                  start: TimingParams, on_fold: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Refit without each record in turn and predict the held-out one."""
    preds = np.empty(len(fcases))
    for k in range(len(fcases)):
        rest = [fc for j, fc in enumerate(fcases) if j != k]
        res = fit(rest, base, names, starts=[start])
        preds[k] = fcases[k].predict(res.params)
        if on_fold is not None:
            on_fold(k + 1, len(fcases))
    measured = np.array([fc.measured_s for fc in fcases])
    out: dict[str, Any] = metrics(preds, measured)
    out["per_record"] = [
        {"file": fc.case.file, "line": fc.case.record.line, "predicted_s": float(p),
         "error_pct": float((p / fc.measured_s - 1) * 100)}
        for fc, p in zip(fcases, preds)
    ]
    return out


def cross_config(fcases: Sequence[FitCase], base: TimingParams, names: Sequence[str],
                 start: TimingParams) -> dict[str, Any]:
    """Generalization to an unseen hardware config: for each config (`-model=`), fit on the
    records of the other configs and predict this one's."""
    models = sorted({fc.case.record.model or "" for fc in fcases})
    out: dict[str, Any] = {}
    for model in models:
        train = [fc for fc in fcases if fc.case.record.model != model]
        test = [fc for fc in fcases if fc.case.record.model == model]
        if len(train) <= len(names) + 1 or not test:
            continue
        res = fit(train, base, names, starts=[start])
        pred = predict_all(test, res.params)
        out[model] = {"trained_on": sorted({fc.case.record.model or "" for fc in train}),
                      "records": len(test),
                      **metrics(pred, [fc.measured_s for fc in test])}
    return out


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def per_record(fcases: Sequence[FitCase], pred_before: np.ndarray, pred_after: np.ndarray) -> list[dict[str, Any]]:
    return [
        {"file": fc.case.file, "line": fc.case.record.line, "model": fc.case.record.model,
         "layer": fc.case.layer.name, "index": fc.case.record.index, "n_insns": fc.n_insns,
         "measured_s": fc.measured_s, "before_s": float(b), "predicted_s": float(a),
         "error_pct": float((a / fc.measured_s - 1) * 100)}
        for fc, b, a in zip(fcases, pred_before, pred_after)
    ]


def calibrate(paths: Sequence[str | Path], base: TimingParams | None = None,
              names: Sequence[str] = FIT_PARAMS, loo: bool = True,
              on_fold: Callable[[int, int], None] | None = None, hw: HwConfig | None = None,
              ) -> tuple[TimingParams, dict[str, Any]]:
    """Fit parameters to the records of `paths` (`hw`: the config of records whose `-model=`
    names none, as in v0.1 logs). Returns (params, provenance/report dict)."""
    names = _check_names(names)
    base = default_params() if base is None else base
    cases, skipped = load_cases(list(paths), hw)
    fcases, bad = prepare(cases)
    skipped += bad
    if not fcases:
        raise ConfigError("no usable records in " + ", ".join(str(p) for p in paths)
                          + (f" (first skip reason: {skipped[0].reason})" if skipped else ""))
    check_pinnable(len(fcases), names)
    measured = np.array([fc.measured_s for fc in fcases])
    pred_before = predict_all(fcases, base)
    # Two starts: the given parameters and the documented physical defaults.
    result = fit(fcases, base, names, starts=[base, TimingParams(**{
        **base.to_dict(), **{n: getattr(TimingParams(), n) for n in names}})])
    report: dict[str, Any] = {
        "created": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "tool": "codesign calibrate",
        "objective": ("least squares on log(predicted_s / measured_s) (sigma DATA_SIGMA per record) plus "
                      "log-normal priors, scipy.optimize.least_squares (trf, bounds)"),
        "data_sigma": DATA_SIGMA,
        "priors": {n: {"median": PRIORS[n][0], "factor": PRIORS[n][1], "source": PRIORS[n][2]}
                   for n in names if n in PRIORS},
        "data": [],
        "records_used": len(fcases),
        "records_skipped": [{"file": s.file, "line": s.line, "reason": s.reason} for s in skipped],
        "fitted": list(names),
        "fixed": {k: v for k, v in result.params.to_dict().items() if k not in names},
        "bounds": {n: list(BOUNDS[n][:2]) for n in names},
        "before": metrics(pred_before, measured),
        "after": metrics(result.predicted, measured),
        "fit": {"cost": result.cost, "nfev": result.nfev, "success": result.success, "message": result.message},
        "per_record": per_record(fcases, pred_before, result.predicted),
    }
    for p in paths:
        path = Path(p)
        report["data"].append({
            "file": _display_path(path), "sha256": _sha256(path),
            "records_used": sum(1 for fc in fcases if fc.case.file == str(p)),
        })
    if loo and len(fcases) > len(names) + 1:
        report["leave_one_out"] = leave_one_out(fcases, base, names, result.params, on_fold)
        report["leave_one_config_out"] = cross_config(fcases, base, names, result.params)
    return result.params, report


__all__ = ["BOUNDS", "FIT_PARAMS", "check_pinnable", "PRIORS", "DATA_SIGMA", "FitCase", "FitResult", "prepare", "predict_all", "metrics", "fit",
           "leave_one_out", "cross_config", "calibrate", "per_record"]
