"""The shipped default timing model: one fit to every real VTA record shipped, judged out of session.

Board records of the same bitstream taken in different sessions differ by a host cost the device
does not have (docs/calibration-profiles.md: 0 ns per output byte in July 2019, 47 ns in August).
Pooling them into one set of parameters lets that cost bend the device physics (a pooled fit is
off by 34% in sample). So the default fit is joint: the device parameters and the call/instruction
host terms (`FIT_PARAMS`) are shared by every record, and the host terms that vary between
sessions (`SESSION_TERMS`) get one value per session. The default cannot know the session it will
be used in; it ships the value `DEFAULT_RULES` names, chosen like everything else here by
leave-one-session-out error (each session predicted by a fit on the others, at the unseen-session
value). Leave-one-network-out error is reported next to it.

A session is a run of measurements with no gap longer than SESSION_GAP_S between consecutive
records (the record timestamps, any file); a network is the `# Name - config` heading over the
record in its log (else the file's name).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.calibrate.fit import (
    BOUNDS,
    DATA_SIGMA,
    FIT_PARAMS,
    PRIORS,
    FitCase,
    metrics,
    multistart,
    prepare,
)
from codesign.calibrate.metrics import mape
from codesign.calibrate.replay import load_cases
from codesign.errors import ConfigError
from codesign.paths import ROOT, SIM_DATA, shipped
from codesign.vta.timing import TimingParams, default_params

SESSION_GAP_S = 2 * 86400.0  # a tuning run on one board measures continuously; days apart = another session
SESSION_TERMS: tuple[str, ...] = ("host_per_out_byte_s",)
# How the default picks a session term's value for a session it has not seen.
DEFAULT_RULES: dict[str, Callable[[Sequence[float]], float]] = {
    "min": lambda v: float(np.min(v)),      # a session's extra host cost is an anomaly on a clean baseline
    "median": lambda v: float(np.median(v)),
}
CALIBRATION_DIR = SIM_DATA / "calibration"


def shipped_vta_logs() -> list[Path]:
    """Every shipped AutoTVM log of VTA records (sim/calibration/pynq_*.log; the arm_cpu log is the CPU model's)."""
    return sorted(p for p in CALIBRATION_DIR.glob("*.log") if not p.name.startswith("arm_cpu"))


def session_labels(timestamps: Sequence[float], gap_s: float = SESSION_GAP_S) -> list[str]:
    """Label each timestamp with its session: the UTC date (YYYY-MM-DD) its session started."""
    order = np.argsort(np.asarray(timestamps, dtype=np.float64), kind="mergesort")
    labels = [""] * len(timestamps)
    start = prev = None
    for k in order:
        t = float(timestamps[k])
        if prev is None or t - prev > gap_s:
            start = t
        prev = t
        labels[k] = _dt.datetime.fromtimestamp(start, _dt.UTC).strftime("%Y-%m-%d")
    return labels


def network_label(file: str, line: int) -> str:
    """The `# Name - config` heading above `line` in `file` (tophub's section comments), else the file stem."""
    lines = shipped(file).read_text(encoding="utf-8", errors="replace").splitlines()[:max(line - 1, 0)]
    for text in reversed(lines):
        if text.startswith("#"):
            return text[1:].split(" - ")[0].strip() or Path(file).stem
    return Path(file).stem


@dataclass(frozen=True)
class GroupedFit:
    """Shared parameters and, per session, the values of the session terms."""

    params: TimingParams
    session_values: dict[str, dict[str, float]]
    predicted: np.ndarray  # each record at its own session's values
    cost: float
    nfev: int

    def for_session(self, session: str) -> TimingParams:
        return self.params.with_(**self.session_values[session])

    def default(self, rule: str) -> TimingParams:
        """The parameters for a session not in the fit: each session term by `rule` over the fitted sessions."""
        vals = {t: DEFAULT_RULES[rule]([v[t] for v in self.session_values.values()]) for t in self.session_terms}
        return self.params.with_(**vals)

    @property
    def session_terms(self) -> tuple[str, ...]:
        first = next(iter(self.session_values.values()), {})
        return tuple(first)


def fit_grouped(fcases: Sequence[FitCase], sessions: Sequence[str], base: TimingParams,
                shared: Sequence[str] = FIT_PARAMS, session_terms: Sequence[str] = SESSION_TERMS,
                starts: Sequence[TimingParams] | None = None) -> GroupedFit:
    """MAP fit on log-latency (as `fit.fit`): `shared` for every record, `session_terms` per session."""

    shared = tuple(n for n in shared if n not in session_terms)
    groups = sorted(set(sessions))
    if not fcases:
        raise ConfigError("no usable records to fit")
    names = list(shared) + [t for _g in groups for t in session_terms]
    lo = np.array([BOUNDS[n][0] for n in names])
    hi = np.array([BOUNDS[n][1] for n in names])
    scale = np.array([BOUNDS[n][2] for n in names])
    measured = np.array([fc.measured_s for fc in fcases])
    gidx = np.array([groups.index(s) for s in sessions])
    ns, nt = len(shared), len(session_terms)
    prior_idx = [(k, *PRIORS[n][:2]) for k, n in enumerate(shared) if n in PRIORS]

    def unpack(z: np.ndarray) -> tuple[TimingParams, dict[str, dict[str, float]]]:
        x = np.clip(z * scale, lo, hi)
        params = base.with_(**{n: float(v) for n, v in zip(shared, x[:ns])})
        per = {g: {t: float(x[ns + i * nt + j]) for j, t in enumerate(session_terms)} for i, g in enumerate(groups)}
        return params, per

    def predict(z: np.ndarray) -> np.ndarray:
        params, per = unpack(z)
        by_group = [params.with_(**per[g]) for g in groups]
        return np.array([fc.predict(by_group[gidx[i]]) for i, fc in enumerate(fcases)])

    def residuals(z: np.ndarray) -> np.ndarray:
        r = np.log(predict(z) / measured)
        x = np.clip(z * scale, lo, hi)
        pr = [DATA_SIGMA * np.log(x[k] / med) / np.log(fac) for k, med, fac in prior_idx]
        return np.concatenate([r, pr]) if pr else r

    best, nfev = multistart(residuals, [np.array([getattr(st, n) for n in shared]
                                                 + [getattr(st, t) for _g in groups for t in session_terms])
                                        for st in (starts or [base])], lo, hi, scale)
    params, per = unpack(best.x)
    return GroupedFit(params, per, predict(best.x), float(best.cost), nfev)


def _err(fcases: Sequence[FitCase], params: TimingParams) -> tuple[np.ndarray, np.ndarray]:
    pred = np.array([fc.predict(params) for fc in fcases])
    return pred, np.array([fc.measured_s for fc in fcases])


def leave_group_out(fcases: Sequence[FitCase], sessions: Sequence[str], groups: Sequence[str], base: TimingParams,
                    rule: str | None, start: TimingParams,
                    on_fold: Callable[[str], None] | None = None) -> dict[str, Any]:
    """For each group (session or network): fit on the records of the other groups, predict the group's
    records with the fold's default (`rule`: the unseen-session value of the session terms; None: a
    pooled fit with no session terms). Returns per group and the mean over groups of their MAPE."""
    out: dict[str, Any] = {}
    for g in sorted(set(groups)):
        train = [i for i, x in enumerate(groups) if x != g]
        test = [i for i, x in enumerate(groups) if x == g]
        tr = [fcases[i] for i in train]
        if not tr:
            continue  # one group only: nothing to fit on without it
        if rule is None:
            res = fit_grouped(tr, ["all"] * len(tr), base, FIT_PARAMS, (), starts=[start])
            params = res.params
        else:
            res = fit_grouped(tr, [sessions[i] for i in train], base, starts=[start])
            params = res.default(rule)
        pred, meas = _err([fcases[i] for i in test], params)
        out[g] = {"records": len(test), "trained_on": sorted({groups[i] for i in train}),
                  "trained_records": len(train), **metrics(pred, meas)}
        known = {sessions[i] for i in test}
        if rule is not None and known <= set(res.session_values):
            # The held-out group's session is in the fit (another network of it): with that session's
            # own host terms, the error is the device model's transfer to the unseen network alone.
            own = np.array([fcases[i].predict(res.for_session(sessions[i])) for i in test])
            out[g]["mape_with_own_session_terms"] = mape(own, meas)
        if on_fold is not None:
            on_fold(g)
    per = [v["mape"] for v in out.values()]
    return {"mape_mean_over_groups": float(np.mean(per)) if per else float("nan"),
            "max_group_mape": float(np.max(per)) if per else float("nan"), "per_group": out}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _by(labels: Sequence[str], pred: np.ndarray, meas: np.ndarray) -> dict[str, dict[str, Any]]:
    return {g: {"records": int(sum(1 for x in labels if x == g)),
                **metrics(pred[[i for i, x in enumerate(labels) if x == g]],
                          meas[[i for i, x in enumerate(labels) if x == g]])}
            for g in sorted(set(labels))}


def calibrate_default(paths: Sequence[str | Path] | None = None, base: TimingParams | None = None,
                      rules: Sequence[str | None] = ("min", "median", None),
                      progress: Callable[[str], None] | None = None) -> tuple[TimingParams, dict[str, Any]]:
    """Fit the shipped default on `paths` (default: every shipped VTA log). Every candidate in `rules`
    (an unseen-session rule for the session terms, or None = one pooled fit) is scored by
    leave-one-session-out MAPE (mean over sessions); the lowest is shipped. Returns (params, provenance)."""
    base = TimingParams() if base is None else base
    files = [shipped(p) for p in (paths if paths is not None else shipped_vta_logs())]
    cases, skipped = load_cases(files)
    fcases, bad = prepare(cases)
    skipped += bad
    if not fcases:
        raise ConfigError("no usable VTA records in " + ", ".join(str(p) for p in files))
    sessions = session_labels([fc.case.record.timestamp for fc in fcases])
    networks = [network_label(fc.case.file, fc.case.record.line) for fc in fcases]
    if len(set(sessions)) < 2:
        raise ConfigError(f"leave-one-session-out needs records of at least 2 sessions; {len(fcases)} records "
                          f"form one (a gap of more than {SESSION_GAP_S / 86400:g} days starts a session)")
    say = progress or (lambda _m: None)
    say("full fit")
    full = fit_grouped(fcases, sessions, base, starts=[base])
    pooled = fit_grouped(fcases, ["all"] * len(fcases), base, FIT_PARAMS, (), starts=[base])
    candidates = []
    for rule in rules:
        say(f"leave-one-session-out, rule {rule or 'pooled'}")
        # Every fold starts where the full fit started: starting at the full fit's solution would leak
        # the held-out records into a fold that does not pin every parameter (10 records, 9 parameters).
        loso = leave_group_out(fcases, sessions, sessions, base, rule, base)
        candidates.append({"rule": rule or "pooled", "loso": loso})
    chosen = min(candidates, key=lambda c: c["loso"]["mape_mean_over_groups"])
    rule = None if chosen["rule"] == "pooled" else chosen["rule"]
    params = full.default(rule) if rule else pooled.params
    say("leave-one-network-out")
    lono = leave_group_out(fcases, sessions, networks, base, rule, base)
    pred, meas = _err(fcases, params)
    pred_before, _ = _err(fcases, base)
    fitted = list(FIT_PARAMS) + ([t for t in SESSION_TERMS if t not in FIT_PARAMS] if rule else [])
    sess_info = {}
    for s in sorted(set(sessions)):
        idx = [i for i, x in enumerate(sessions) if x == s]
        ts = [fcases[i].case.record.timestamp for i in idx]
        sess_info[s] = {
            "first": _dt.datetime.fromtimestamp(min(ts), _dt.UTC).isoformat(timespec="seconds"),
            "last": _dt.datetime.fromtimestamp(max(ts), _dt.UTC).isoformat(timespec="seconds"),
            "records": len(idx), "networks": sorted({networks[i] for i in idx}),
            "hw": sorted({fcases[i].case.record.model or "" for i in idx}),
            "files": sorted({_display(Path(fcases[i].case.file)) for i in idx}),
            "session_terms": full.session_values[s] if rule else {},
        }
    prov: dict[str, Any] = {
        "created": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "tool": "codesign calibrate default",
        "method": (
            "MAP least squares on log(predicted_s / measured_s) (sigma DATA_SIGMA) with log-normal priors, "
            "scipy.optimize.least_squares (trf, bounds). Shared by every record: "
            + ", ".join(FIT_PARAMS) + "; one value per session: " + ", ".join(SESSION_TERMS)
            + " (the host cost that differs between sessions). The shipped value of a session term is the rule "
              "'chosen_rule' over the fitted sessions (what a session the fit has not seen gets). Candidates "
              "(each rule, and one pooled fit without session terms) are ranked by leave-one-session-out MAPE, "
              "mean over sessions; leave-one-network-out uses the chosen candidate."),
        "data_sigma": DATA_SIGMA,
        "session_gap_s": SESSION_GAP_S,
        "priors": {n: {"median": PRIORS[n][0], "factor": PRIORS[n][1], "source": PRIORS[n][2]} for n in PRIORS},
        "data": [{"file": _display(p), "sha256": _sha256(p),
                  "records_used": sum(1 for fc in fcases if fc.case.file == str(p))} for p in files],
        "records_used": len(fcases),
        "records_skipped": [{"file": s.file, "line": s.line, "reason": s.reason} for s in skipped],
        "sessions": sess_info,
        "networks": {n: {"records": networks.count(n), "sessions": sorted({s for s, x in zip(sessions, networks)
                                                                          if x == n})} for n in sorted(set(networks))},
        "fitted": fitted,
        "session_terms": list(SESSION_TERMS) if rule else [],
        "chosen_rule": chosen["rule"],
        "candidates": [{"rule": c["rule"], "loso_mape_mean": c["loso"]["mape_mean_over_groups"],
                        "loso_per_session": {g: v["mape"] for g, v in c["loso"]["per_group"].items()}}
                       for c in candidates],
        "fixed": {k: v for k, v in params.to_dict().items() if k not in fitted},
        "bounds": {n: list(BOUNDS[n][:2]) for n in fitted},
        "start": "documented defaults (TimingParams())",
        "before": metrics(pred_before, meas),
        "in_sample": {
            **metrics(pred, meas),
            "per_session": _by(sessions, pred, meas),
            "per_network": _by(networks, pred, meas),
            "with_session_terms": metrics(full.predicted, meas) if rule else None,
        },
        "leave_one_session_out": chosen["loso"],
        "leave_one_network_out": lono,
        "fit": {"cost": full.cost if rule else pooled.cost, "nfev": full.nfev if rule else pooled.nfev},
        "per_record": [
            {"file": _display(Path(fc.case.file)), "line": fc.case.record.line, "session": s, "network": n,
             "model": fc.case.record.model, "layer": fc.case.layer.name, "measured_s": fc.measured_s,
             "predicted_s": float(p), "error_pct": float((p / fc.measured_s - 1) * 100)}
            for fc, s, n, p in zip(fcases, sessions, networks, pred)],
    }
    return params, prov


def session_mape(fcases: Sequence[FitCase], sessions: Sequence[str], params: TimingParams) -> dict[str, float]:
    pred, meas = _err(fcases, params)
    return {s: mape(pred[[i for i, x in enumerate(sessions) if x == s]], meas[[i for i, x in enumerate(sessions)
                                                                              if x == s]])
            for s in sorted(set(sessions))}


__all__ = ["SESSION_GAP_S", "SESSION_TERMS", "DEFAULT_RULES", "shipped_vta_logs", "session_labels", "network_label",
           "GroupedFit", "fit_grouped", "leave_group_out", "calibrate_default", "session_mape"]


def shipped_transfer(params: TimingParams, used: set[tuple[str, int]], timestamps: Sequence[float],
                     default: TimingParams | None = None) -> dict[str, dict[str, Any]]:
    """Error of `params` (a profile) on every shipped session's records it was not fitted on (`used`:
    (resolved file, line) pairs), next to the shipped default's. A session is the profile's own
    (`own: True`) when one of its fit `timestamps` falls in it."""
    default = default_params() if default is None else default
    cases, _skipped = load_cases(shipped_vta_logs())
    fcases, _bad = prepare(cases)
    stamps = [fc.case.record.timestamp for fc in fcases] + [float(t) for t in timestamps]
    labels = session_labels(stamps)
    shipped_labels, own = labels[:len(fcases)], set(labels[len(fcases):])
    out: dict[str, dict[str, Any]] = {}
    for s in sorted(set(shipped_labels)):
        test = [fc for fc, x in zip(fcases, shipped_labels)
                if x == s and (str(Path(fc.case.file).resolve()), fc.case.record.line) not in used]
        if not test:
            continue
        pred, meas = _err(test, params)
        dpred, _ = _err(test, default)
        out[s] = {"own": s in own, "records": len(test),
                  "hw": sorted({fc.case.record.model or "" for fc in test}),
                  "networks": sorted({network_label(fc.case.file, fc.case.record.line) for fc in test}),
                  "mape": mape(pred, meas), "default_mape": mape(dpred, meas)}
    return out


__all__ += ["shipped_transfer"]
