"""Calibration profiles: host/runtime ("environment") terms fitted on top of the device model.

Measurements of the same layer and schedule on the same board taken in different sessions
differ by tens of percent, in proportion to the bytes moved, while the device physics does not
change: the host side (driver, cache maintenance, Python runtime) does. A profile therefore
keeps the shipped device parameters (`sim/timing_params.json`) and fits only the environment
terms of `timing.host_seconds` — per call, per instruction, per input byte, per output byte —
and only those the data show (below).

The environment terms enter the predicted seconds linearly:
    measured_i = device_i + sum_k x_ik * theta_k,
    x_i = (1, n_insns, in_bytes, out_bytes),
so the fit is a weighted linear least-squares problem (relative errors: each record's residual
is divided by DATA_SIGMA * measured_i) with a Gaussian prior per term and theta >= 0. `device_i`
is the device time the record carries when our own board runtime measured it (device time and
call time separately), otherwise the device model's prediction.

Which terms a profile fits is decided by evidence: every subset of the four terms is fitted and
scored by leave-one-out error, and the fewest terms that do as well as the best are kept, never
worse than the best single-term fit (`compare_subsets`, `choose_subset`). The priors are wide
enough for the host costs boards really show (docs/calibration-profiles.md); they only hold a
term the data cannot see near a physical value. Terms named with --terms are fitted as named if
the data *pin* them (posterior sd at most half the prior's); otherwise the refusal says how many
records of the same spread would (information grows linearly with the records).

Profiles live in `sim/profiles/` (shipped, never overwritten: `tophub-2019` is the fit on the
shipped tophub data) and in the user's profile folder (`$CODESIGN_PROFILE_DIR`, default
`~/.local/share/vta-codesign/profiles`), where `codesign calibrate --profile NAME` writes.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from codesign.calibrate.fit import DATA_SIGMA, FIT_PARAMS, calibrate, metrics
from codesign.calibrate.metrics import mape
from codesign.calibrate.replay import load_cases
from codesign.calibrate.sessions import session_labels, shipped_transfer
from codesign.errors import CodesignError, ConfigError
from codesign.evaluate.compiler import compile_insns
from codesign.evaluate.run import layer_io_bytes
from codesign.fileio import atomic_write_json, read_document
from codesign.hw.config import HwConfig
from codesign.paths import SIM_DATA, shipped
from codesign.schedule import ScheduleSpace
from codesign.tune.records import MeasureRecord
from codesign.vta.timing import DEFAULT_PARAMS_PATH, TimingParams, default_params, time_program
from codesign.workloads import parse_layer

SHIPPED_DIR = SIM_DATA / "profiles"
PROFILE_DIR_ENV = "CODESIGN_PROFILE_DIR"

# Environment terms, the feature they multiply, and their prior (mean, standard deviation, source).
ENV_TERMS: tuple[str, ...] = ("host_call_s", "host_per_insn_s", "host_per_in_byte_s", "host_per_out_byte_s")
FEATURES = {"host_call_s": "calls", "host_per_insn_s": "instructions", "host_per_in_byte_s": "input bytes",
            "host_per_out_byte_s": "output bytes"}
SHORT = {"host_call_s": "call", "host_per_insn_s": "insn", "host_per_in_byte_s": "in-byte",
         "host_per_out_byte_s": "out-byte"}
# The priors only keep an unidentifiable term near a physical value; they must not veto costs
# boards really show (docs/calibration-profiles.md, "Priors"). Which terms a profile fits is
# decided by leave-one-out error (`compare_subsets`), not by the priors.
ENV_PRIORS: dict[str, tuple[float, float, str]] = {
    "host_call_s": (
        1e-4, 1e-3,
        "docs/vta.md §4.7: each call starts the device by MMIO and polls done after a 1 us sleep plus "
        "yields (Linux sleeps take tens of us); tophub's pynq_1x16 LSTM dense call (128 GEMM cycles) "
        "took 0.141 ms in all. Mean 0.1 ms; sd 1 ms leaves room for RPC timer and scheduler costs"),
    "host_per_insn_s": (
        1e-6, 1e-5,
        "docs/vta.md §4.7, §5.4: the JIT runtime builds each instruction on the 650 MHz Cortex-A9 "
        "in C++, of order 1 us; sd 10 us allows a slow (debug, Python-side) runtime"),
    "host_per_in_byte_s": (
        0.0, 1e-7,
        "no session here shows an input-byte cost, but input and output buffers take the same host "
        "path (cache maintenance, copies), so it gets the output side's width: sd 100 ns/B"),
    "host_per_out_byte_s": (
        0.0, 1e-7,
        "tophub 2019 PYNQ-Z1 1x16 sessions (sim/calibration/): ~0 ns/B in the ResNet-18 session "
        "(July), ~45 ns/B in the ResNet-50/VGG/AlexNet session (August); sd 100 ns/B covers both"),
}
PIN_SHRINK = 0.5  # pinned: posterior sd <= PIN_SHRINK * prior sd


@dataclass(frozen=True)
class Observation:
    """One measured operator call, reduced to what the environment fit needs."""

    file: str
    line: int
    label: str
    hw: HwConfig
    n_insns: int
    in_bytes: int
    out_bytes: int
    device_s: float  # measured device time if the record has it, else the device model's
    measured_s: float
    device_measured: bool
    timestamp: float | None = None  # when it was measured (sessions: codesign.calibrate.sessions)

    def features(self) -> np.ndarray:
        return np.array([1.0, self.n_insns, self.in_bytes, self.out_bytes], dtype=np.float64)


# -- reading data -------------------------------------------------------------------------------
def _first_json(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such log or records file") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise ConfigError(f"{path}: cannot read this log or records file ({exc.__class__.__name__})") from None
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                return None
            return obj if isinstance(obj, dict) else None
    return None


def _device_seconds(layer: Any, config: Any, hw: HwConfig, params: TimingParams) -> tuple[float, int]:
    insns = compile_insns(layer, config, hw).insns
    cycles = time_program(insns, hw, params).cycles
    return cycles / hw.clock_hz, int(insns.shape[0])


def _from_autotvm(path: Path, params: TimingParams, skipped: list[dict[str, Any]]) -> list[Observation]:
    cases, skips = load_cases(path)
    skipped += [{"file": s.file, "line": s.line, "reason": s.reason} for s in skips]
    out = []
    for c in cases:
        if not c.valid:
            skipped.append({"file": c.file, "line": c.record.line, "reason": f"schedule invalid here: {c.why_invalid}"})
            continue
        try:
            dev, n = _device_seconds(c.layer, c.config, c.hw, params)
        except CodesignError as exc:
            skipped.append({"file": c.file, "line": c.record.line, "reason": f"compile failed: {exc}"})
            continue
        i, o = layer_io_bytes(c.layer)
        out.append(Observation(c.file, c.record.line, f"{c.record.model} {c.layer.name}", c.hw, n, i, o,
                               dev, c.measured_s, False, c.record.timestamp))
    return out


def _from_records(path: Path, params: TimingParams, skipped: list[dict[str, Any]]) -> list[Observation]:
    """Our records JSONL (`codesign.tune.records`); board lines also carry `device_s` (device
    time measured apart from the whole call), which then replaces the device model's time."""
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            raw = json.loads(line)
            rec = MeasureRecord.from_dict(raw)
        except (ValueError, TypeError, AttributeError) as exc:
            skipped.append({"file": str(path), "line": lineno, "reason": f"not a tuning record ({exc})"})
            continue
        if not rec.ok or not rec.seconds or rec.seconds <= 0:
            skipped.append({"file": str(path), "line": lineno, "reason": f"failed measurement ({rec.error})"})
            continue
        try:
            hw = HwConfig.resolve(rec.hw)
            layer = parse_layer(rec.layer_spec)
            config = ScheduleSpace(layer, hw).from_knobs(rec.knobs)
            dev, n = _device_seconds(layer, config, hw, params)
        except CodesignError as exc:
            skipped.append({"file": str(path), "line": lineno, "reason": str(exc)})
            continue
        measured_dev = rec.device_s  # a board's start-to-done time (records contract, optional key)
        has_dev = measured_dev is not None and 0 < measured_dev <= rec.seconds
        i, o = layer_io_bytes(layer)
        out.append(Observation(str(path), lineno, f"{rec.hw} {rec.layer}", hw, n, i, o,
                               float(measured_dev) if has_dev else dev, float(rec.seconds), bool(has_dev),
                               float(rec.timestamp)))
    return out


def load_observations(paths: Sequence[str | Path], params: TimingParams) -> tuple[list[Observation], list[dict]]:
    """Observations from AutoTVM v0.2 logs and/or our records JSONL files (detected per file)."""
    obs: list[Observation] = []
    skipped: list[dict[str, Any]] = []
    for p in paths:
        path = shipped(p)
        first = _first_json(path)
        if first is not None and "layer_spec" in first:
            obs += _from_records(path, params, skipped)
        else:
            obs += _from_autotvm(path, params, skipped)
    return obs, skipped


# -- the linear environment fit ----------------------------------------------------------------
@dataclass(frozen=True)
class EnvFit:
    terms: tuple[str, ...]
    values: dict[str, float]
    posterior_sd: dict[str, float]
    predicted: np.ndarray


def _system(obs: Sequence[Observation], terms: Sequence[str], base: TimingParams,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Weighted design (A, b) of the data rows and the prior (mean, sd) of `terms`. Terms not fitted
    contribute their base value to the fixed part of the prediction."""
    cols = [ENV_TERMS.index(t) for t in terms]
    fixed = [k for k, t in enumerate(ENV_TERMS) if t not in terms]
    X = np.array([o.features() for o in obs])
    m = np.array([o.measured_s for o in obs])
    dev = np.array([o.device_s for o in obs])
    base_theta = np.array([getattr(base, t) for t in ENV_TERMS])
    known = dev + X[:, fixed] @ base_theta[fixed]
    w = 1.0 / (DATA_SIGMA * m)
    A = X[:, cols] * w[:, None]
    b = (m - known) * w
    mu = np.array([ENV_PRIORS[t][0] for t in terms])
    sd = np.array([ENV_PRIORS[t][1] for t in terms])
    return A, b, mu, sd


def fit_env(obs: Sequence[Observation], terms: Sequence[str], base: TimingParams) -> EnvFit:
    """MAP fit of `terms` (>= 0) with their priors; the other environment terms stay at `base`."""
    from scipy.optimize import lsq_linear

    terms = tuple(terms)
    A, b, mu, sd = _system(obs, terms, base)
    if terms:
        # Scale columns to the prior sd so the solver sees O(1) variables.
        As = np.vstack([A * sd, np.eye(len(terms))])
        bs = np.concatenate([b, mu / sd])
        z = lsq_linear(As, bs, bounds=(0.0, np.inf), method="bvls").x
        theta = z * sd
        H = A.T @ A + np.diag(1.0 / sd**2)
        post = np.sqrt(np.diag(np.linalg.inv(H)))
    else:
        theta, post = np.zeros(0), np.zeros(0)
    values = {t: float(v) for t, v in zip(terms, theta)}
    params = base.with_(**values)
    pred = np.array([predict_obs(o, params) for o in obs])
    return EnvFit(terms, values, {t: float(s) for t, s in zip(terms, post)}, pred)


def predict_obs(o: Observation, params: TimingParams) -> float:
    x = o.features()
    return float(o.device_s + params.host_call_s * x[0] + params.host_per_insn_s * x[1]
                 + params.host_per_in_byte_s * x[2] + params.host_per_out_byte_s * x[3])


def pin_analysis(obs: Sequence[Observation], terms: Sequence[str], base: TimingParams) -> dict[str, dict[str, Any]]:
    """Per term: prior sd, posterior sd, pinned?, and how many records of the same spread would pin it."""
    terms = tuple(terms)
    A, _b, _mu, sd = _system(obs, terms, base)
    Hd = A.T @ A
    P = np.diag(1.0 / sd**2)
    n = len(obs)

    def post_sd(scale: float) -> np.ndarray:
        return np.sqrt(np.diag(np.linalg.inv(scale * Hd + P)))

    now = post_sd(1.0)
    out: dict[str, dict[str, Any]] = {}
    for k, t in enumerate(terms):
        ok = bool(now[k] <= PIN_SHRINK * sd[k])
        needed: int | None = n
        if not ok:
            lo, hi = 1.0, 2.0
            while post_sd(hi)[k] > PIN_SHRINK * sd[k] and hi < 1e7:
                lo, hi = hi, hi * 2
            if hi >= 1e7:
                needed = None  # more records like these never pin it: the feature does not vary
            else:
                for _ in range(40):
                    mid = (lo + hi) / 2
                    lo, hi = (lo, mid) if post_sd(mid)[k] <= PIN_SHRINK * sd[k] else (mid, hi)
                needed = int(math.ceil(n * hi))
        out[t] = {"prior_sd": float(sd[k]), "posterior_sd": float(now[k]), "pinned": ok,
                  "records_needed": needed}
    return out


def _unpinned_message(t: str, info: dict[str, Any], n: int) -> str:
    feat = FEATURES[t]
    if info["records_needed"] is None:
        more = f"no number of records like these would: their {feat} do not vary independently"
    else:
        more = f"about {info['records_needed']} records with this spread of {feat} would"
    return (f"{t} cannot be pinned by these {n} records (posterior sd {info['posterior_sd']:.3g} vs prior "
            f"{info['prior_sd']:.3g}); {more}")


def check_pinned(obs: Sequence[Observation], terms: Sequence[str], base: TimingParams) -> dict[str, dict[str, Any]]:
    """Pin analysis of the terms a user named (--terms); a ConfigError says which the data cannot pin."""
    terms = tuple(terms)
    info = pin_analysis(obs, terms, base)
    bad = [t for t in terms if not info[t]["pinned"]]
    if bad:
        raise ConfigError("; ".join(_unpinned_message(t, info[t], len(obs)) for t in bad)
                          + ". Fit fewer terms (--terms) or add records; pinned here: "
                          + (", ".join(t for t in terms if info[t]["pinned"]) or "none"))
    return info


def leave_one_out(obs: Sequence[Observation], terms: Sequence[str], base: TimingParams) -> np.ndarray:
    preds = np.empty(len(obs))
    for k in range(len(obs)):
        rest = [o for j, o in enumerate(obs) if j != k]
        res = fit_env(rest, terms, base)
        preds[k] = predict_obs(obs[k], base.with_(**res.values))
    return preds


# -- choosing the terms by evidence ------------------------------------------------------------
@dataclass(frozen=True)
class SubsetScore:
    """One subset of the environment terms fitted to the records: in-sample and leave-one-out error."""

    terms: tuple[str, ...]
    values: dict[str, float]
    mape: float
    loo_mape: float
    loo_predicted: np.ndarray
    loo_ape: np.ndarray  # per-record |leave-one-out error| in percent (for the paired comparison)

    def label(self) -> str:
        return " + ".join(SHORT[t] for t in self.terms) or "none (base values)"


MIN_RECORDS_TO_CHOOSE = 3  # leave-one-out with one record left in each fold says nothing
# A term must earn its place out of sample: a subset with fewer terms is kept unless the bigger one
# lowers the leave-one-out MAPE by more than SE_FACTOR standard errors of the paired per-record
# difference. With 1 SE, an injected single host cost gained a spurious second term in 5 of 48
# noisy synthetic sessions (tests/test_profile_term_choice.py's generator, seeds 0-15); with 2 SE
# in 1 of 48, and every injected cost was still recovered within 8%.
SE_FACTOR = 2.0


def compare_subsets(obs: Sequence[Observation], candidates: Sequence[str], base: TimingParams,
                    ) -> list[SubsetScore]:
    """Every subset of `candidates` (the empty one = the base values) fitted and scored, in-sample
    and by leave-one-out MAPE; terms outside a subset keep their base value."""
    measured = np.array([o.measured_s for o in obs])
    out = []
    for r in range(len(candidates) + 1):
        for terms in combinations(tuple(candidates), r):
            fit = fit_env(obs, terms, base)
            loo = leave_one_out(obs, terms, base)
            ape = np.abs(loo / measured - 1.0) * 100.0
            out.append(SubsetScore(terms, fit.values, mape(fit.predicted, measured), float(ape.mean()), loo, ape))
    return out


def choose_subset(scores: Sequence[SubsetScore]) -> tuple[SubsetScore, SubsetScore]:
    """(chosen, best single term). Admissible: subsets no worse than the best single-term fit (the
    one with the lowest leave-one-out MAPE) both on the records and in leave-one-out. Among those,
    the fewest terms whose leave-one-out MAPE exceeds the lowest by at most SE_FACTOR standard
    errors of the paired per-record difference; ties: lowest leave-one-out MAPE."""
    singles = [s for s in scores if len(s.terms) == 1]
    best1 = min(singles, key=lambda s: (s.loo_mape, s.mape))
    ok = [s for s in scores if s.loo_mape <= best1.loo_mape and s.mape <= best1.mape]
    best = min(ok, key=lambda s: (s.loo_mape, len(s.terms)))

    def within(s: SubsetScore) -> bool:
        d = s.loo_ape - best.loo_ape
        se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0
        return float(d.mean()) <= SE_FACTOR * se

    chosen = min((s for s in ok if within(s)), key=lambda s: (len(s.terms), s.loo_mape))
    return chosen, best1


def selection_lines(selection: dict[str, Any]) -> list[str]:
    """The comparison table `codesign calibrate --profile` prints (from the profile's `selection`)."""
    lines = [f"term subsets compared ({selection['rule_short']}):",
             f"  {'terms':<34} {'fit MAPE':>9} {'LOO MAPE':>9}"]
    for row in sorted(selection["subsets"], key=lambda r: r["loo_mape"]):
        mark = "  <- chosen" if row["chosen"] else ("  (best single term)" if row["best_single"] else "")
        lines.append(f"  {row['label']:<34} {row['mape']:>8.2f}% {row['loo_mape']:>8.2f}%{mark}")
    return lines


# -- the profile file --------------------------------------------------------------------------
def user_dir() -> Path:
    env = os.environ.get(PROFILE_DIR_ENV)
    return Path(env) if env else Path.home() / ".local" / "share" / "vta-codesign" / "profiles"


def shipped_names() -> list[str]:
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.json"))


def _is_path(name: str) -> bool:
    return name.endswith(".json") or os.sep in name


def profile_path(name: str) -> Path:
    """Where profile `name` is read from (user folder first, then shipped), or a .json path."""
    if _is_path(name):
        return Path(name)
    for d in (user_dir(), SHIPPED_DIR):
        p = d / f"{name}.json"
        if p.exists():
            return p
    known = sorted(set(shipped_names()) | {p.stem for p in user_dir().glob("*.json")})
    raise ConfigError(f"unknown calibration profile {name!r}; known: {', '.join(known) or 'none'} "
                      f"(shipped in sim/profiles/, yours in {user_dir()})")


def is_protected(path: Path) -> bool:
    """Shipped files are never written by calibration: the shipped timing parameters and every
    file in sim/profiles/."""
    try:
        rp = path.resolve()
    except OSError:
        return False
    return rp == DEFAULT_PARAMS_PATH.resolve() or rp.parent == SHIPPED_DIR.resolve()


def write_path(name: str) -> Path:
    """Where `calibrate --profile name` writes; refuses shipped names and files."""
    if not _is_path(name) and not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ConfigError(f"--profile {name!r}: a profile name uses letters, digits, '-', '_' and '.'")
    path = Path(name) if _is_path(name) else user_dir() / f"{name}.json"
    if (not _is_path(name) and name in shipped_names()) or is_protected(path):
        raise ConfigError(f"profile {name!r} is shipped with the package and is never overwritten; "
                          "choose another name")
    return path


def load_profile(name: str) -> tuple[TimingParams, dict[str, Any]]:
    """(parameters, document) of a profile: the shipped device parameters with the profile's
    `params` (environment terms, and device terms for --device profiles) on top."""
    path = profile_path(name)
    doc = read_document(path, "calibration profile")
    if not isinstance(doc, dict) or not isinstance(doc.get("params"), dict) or doc.get("kind") != "profile":
        raise ConfigError(f"{path}: not a calibration profile (expected kind: profile and a params mapping)")
    base = TimingParams.load()
    try:
        return base.with_(**doc["params"]), doc
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def resolve_params(profile: str | None, params_file: str | None = None, hw: str | None = None,
                   ) -> tuple[TimingParams, str]:
    """The timing parameters a command should use and a label saying where they came from. With `hw`
    (the config the command runs), a profile fitted on another config prints `hw_warning` on stderr."""
    if profile and params_file:
        raise ConfigError("--profile and --params both given; use one")
    if profile:
        params, doc = load_profile(profile)
        warning = hw_warning(doc, [hw]) if hw else None
        if warning:
            print(warning, file=sys.stderr)
        return params, f"profile {doc.get('name', profile)} ({profile_path(profile)})"
    if params_file:
        return TimingParams.load(params_file), str(params_file)
    return default_params(), "sim/timing_params.json (shipped)"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


SELECTION_RULE = (
    "every subset of the candidate terms is fitted and scored by leave-one-out MAPE; admissible are "
    "the subsets no worse than the best single-term fit both on the records and in leave-one-out; "
    f"kept is the admissible subset with the fewest terms whose leave-one-out MAPE exceeds the lowest "
    f"by at most {SE_FACTOR:g} standard errors of the paired per-record difference")


def calibrate_profile(paths: Sequence[str | Path], name: str, terms: Sequence[str] | None = None,
                      device: bool = False) -> tuple[TimingParams, dict[str, Any]]:
    """Fit a profile; returns (params, document to save). `terms=None` chooses the terms by
    leave-one-out error (`choose_subset`); explicit `terms` are fitted as named if the data pin them."""
    base = TimingParams.load()
    explicit = terms is not None
    cand = tuple(terms) if terms is not None else ENV_TERMS
    for t in cand:
        if t not in ENV_TERMS:
            raise ConfigError(f"--terms: unknown environment term {t!r}; allowed: {', '.join(ENV_TERMS)}")
    device_report = None
    if device:
        dev_names = [n for n in FIT_PARAMS if n not in ENV_TERMS]
        dparams, device_report = calibrate(list(paths), base=base, names=dev_names, loo=False)
        base = dparams
    obs, skipped = load_observations(paths, base)
    if not obs:
        raise ConfigError("no usable records in " + ", ".join(str(p) for p in paths)
                          + (f" (first skip reason: {skipped[0]['reason']})" if skipped else ""))
    if not explicit and len(obs) < MIN_RECORDS_TO_CHOOSE:
        raise ConfigError(f"choosing the host terms by leave-one-out error needs at least {MIN_RECORDS_TO_CHOOSE} "
                          f"records; {', '.join(str(p) for p in paths)} gave {len(obs)}. Add records or name "
                          f"the terms with --terms ({', '.join(ENV_TERMS)})")
    if explicit:
        check_pinned(obs, cand, base)  # refuse before the comparison's fits
    scores = compare_subsets(obs, cand, base) if len(obs) >= MIN_RECORDS_TO_CHOOSE else []
    best1 = None
    if explicit:
        chosen = cand
    else:
        pick, best1 = choose_subset(scores)
        chosen = pick.terms
    pins = pin_analysis(obs, cand, base)
    pins.update(pin_analysis(obs, chosen, base))
    res = fit_env(obs, chosen, base)
    params = base.with_(**res.values)
    measured = np.array([o.measured_s for o in obs])
    before = np.array([predict_obs(o, base) for o in obs])
    by_terms = {s.terms: s for s in scores}
    loo_score = by_terms.get(tuple(t for t in cand if t in chosen))
    term_rows = {}
    for t in ENV_TERMS:
        row: dict[str, Any] = {"value": getattr(params, t), "fitted": t in chosen, "feature": FEATURES[t],
                               "prior_mean": ENV_PRIORS[t][0], "prior_sd": ENV_PRIORS[t][1],
                               "prior_source": ENV_PRIORS[t][2]}
        if t in pins:
            row.update(pins[t])
        without = by_terms.get(tuple(x for x in cand if x in chosen and x != t))
        if t in chosen and without is not None:
            # What this term buys out of sample: leave-one-out MAPE with the term held at its base.
            row["loo_mape_without"] = without.loo_mape
        term_rows[t] = row
    env_params = {t: getattr(params, t) for t in ENV_TERMS}
    if device:
        env_params.update({k: v for k, v in params.to_dict().items() if k not in ENV_TERMS})
    selection: dict[str, Any] = {
        "mode": "--terms (as named)" if explicit else "by leave-one-out error",
        "rule": "terms named with --terms are fitted as named" if explicit else SELECTION_RULE,
        "rule_short": ("fitted as named with --terms; shown for comparison" if explicit else
                       f"leave-one-out MAPE; fewest terms within {SE_FACTOR:g} standard errors of the best, "
                       "never worse than the best single term"),
        "chosen": list(chosen),
        "best_single": list(best1.terms) if best1 else None,
        "subsets": [{"terms": list(s.terms), "label": s.label(), "values": s.values, "mape": s.mape,
                     "loo_mape": s.loo_mape, "chosen": s.terms == chosen,
                     "best_single": best1 is not None and s.terms == best1.terms} for s in scores],
    }
    on = fitted_on(obs)
    used = {(str(Path(shipped(o.file)).resolve()), o.line) for o in obs}
    transfer = shipped_transfer(params, used, [o.timestamp for o in obs if o.timestamp is not None])
    doc: dict[str, Any] = {
        "kind": "profile",
        "name": Path(name).stem if _is_path(name) else name,
        "params": env_params,
        "provenance": {
            "created": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
            "tool": "codesign calibrate --profile",
            "device": ("refitted (--device): " + ", ".join(device_report["fitted"])) if device_report
            else "shipped sim/timing_params.json (sha256 " + _sha256(DEFAULT_PARAMS_PATH)[:16] + ")",
            "objective": ("weighted linear least squares of measured - device seconds on the environment "
                          "features (relative errors, sigma DATA_SIGMA), Gaussian priors, terms >= 0"),
            "data_sigma": DATA_SIGMA,
            "data": [{"file": str(p), "sha256": _sha256(Path(p)),
                      "records_used": sum(1 for o in obs if o.file == str(p))} for p in paths],
            "records_used": len(obs),
            "fitted_on": on,
            "shipped_sessions": transfer,
            "records_with_device_time": sum(1 for o in obs if o.device_measured),
            "records_skipped": skipped,
            "fitted": list(chosen),
            "not_fitted": [t for t in ENV_TERMS if t not in chosen],
            "selection": selection,
            "terms": term_rows,
            "before": metrics(before, measured),
            "after": metrics(res.predicted, measured),
            "per_record": [{"file": o.file, "line": o.line, "what": o.label, "measured_s": o.measured_s,
                            "device_s": o.device_s, "predicted_s": float(p),
                            "error_pct": float((p / o.measured_s - 1) * 100)} for o, p in zip(obs, res.predicted)],
        },
    }
    if len(obs) > len(chosen) + 1:
        loo = loo_score.loo_predicted if loo_score is not None else leave_one_out(obs, chosen, base)
        doc["provenance"]["leave_one_out"] = metrics(loo, measured)
    if device_report is not None:
        doc["provenance"]["device_fit"] = {k: device_report[k] for k in ("fitted", "before", "after", "records_used")}
    return params, doc


def fitted_on(obs: Sequence[Observation]) -> dict[str, Any]:
    """The hardware configs and sessions (codesign.calibrate.sessions) a profile's records come from."""
    stamps = [o.timestamp for o in obs if o.timestamp is not None]
    return {"hw": sorted({o.hw.vta_model for o in obs}),
            "sessions": sorted(set(session_labels(stamps))) if stamps else []}


def _fitted_hw(doc: dict[str, Any]) -> list[str]:
    on = doc.get("fitted_on") or doc.get("provenance", {}).get("fitted_on")
    if on:
        return list(on.get("hw", []))
    # Profiles written before fitted_on existed: the config names the labels of their records start with.
    return sorted({str(r.get("what", "")).split(" ")[0] for r in doc.get("provenance", {}).get("per_record", [])} - {""})


def transfer_line(doc: dict[str, Any]) -> str:
    """`fit MAPE a% on N records (session S, hw H); other shipped sessions: S2 b% (default c%) ...`"""
    prov = doc.get("provenance", {})
    if "after" not in prov:
        return "no fit provenance (not written by codesign calibrate --profile): where it holds is unknown"
    on = prov.get("fitted_on", {})
    parts = [f"fit MAPE {prov['after']['mape']:.2f}% on its {prov.get('records_used', '?')} records "
             f"(session {', '.join(on.get('sessions', [])) or '?'}; hw {', '.join(_fitted_hw(doc)) or '?'})"]
    for s, t in prov.get("shipped_sessions", {}).items():
        where = "same session, not fitted" if t["own"] else "other session"
        parts.append(f"{s} {'/'.join(t['networks'])} on {'/'.join(h.split('_i8')[0] for h in t['hw'])} ({where}) "
                     f"{t['mape']:.1f}% (shipped default {t['default_mape']:.1f}%)")
    return "; ".join(parts)


def hw_warning(doc: dict[str, Any], hw: Sequence[str]) -> str | None:
    """One line when a profile is applied to a hardware config it was not fitted on (None if it was).
    Warned, not refused: the device parameters of a profile are the shipped ones, valid on every config;
    its host terms were measured on one config in one session, and the line states how far they carried
    to the other shipped sessions."""
    fitted = _fitted_hw(doc)
    other = sorted(set(hw) - set(fitted))
    if not fitted or not other:
        return None
    worst = [t for t in doc.get("provenance", {}).get("shipped_sessions", {}).values() if not t["own"]]
    far = (f"; on the shipped records of other sessions it errs up to {max(t['mape'] for t in worst):.0f}% "
           f"(the shipped default {max(t['default_mape'] for t in worst):.0f}%)") if worst else ""
    return (f"warning: profile {doc.get('name', '?')} was fitted on {', '.join(fitted)}, not {', '.join(other)}: "
            f"its host terms may not hold here{far}")


def save_profile(doc: dict[str, Any], name: str) -> Path:
    path = write_path(name)
    atomic_write_json(path, doc)
    return path


__all__ = ["ENV_TERMS", "ENV_PRIORS", "Observation", "load_observations", "fit_env", "pin_analysis",
           "check_pinned", "leave_one_out", "SubsetScore", "compare_subsets", "choose_subset", "selection_lines",
           "calibrate_profile", "save_profile", "load_profile", "fitted_on", "hw_warning", "transfer_line",
           "resolve_params", "profile_path", "write_path", "is_protected", "user_dir", "SHIPPED_DIR"]
