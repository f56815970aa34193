"""Fit the resource model's fixed terms and the boards' verified clocks to real builds
(`codesign calibrate resources`).

Data: the resource model's anchor build (`resources.PUBLISHED_BUILD`) plus every catalog entry
with a Vivado utilization report (`codesign bitstream add --utilization`). The model's per-unit
coefficients stay as they are (physics and documented assumptions, docs/resources.md); only the
four fixed terms (control, infrastructure) are refitted by least squares on relative errors (a
small and a large build weigh alike): with one fixed term f per resource and variable part v_i,
f = sum((m_i - v_i) / m_i^2) / sum(1 / m_i^2). Errors per build
and resource are reported before (shipped coefficients) and after.

A board's verified clock: the highest clock at which a build for that board met timing
(WNS >= 0 in its report_timing_summary), next to the board file's `verified_clock_mhz`.

Nothing shipped is written: the result goes to the JSON file the user names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from codesign.bitstream.catalog import Entry
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.hw.resource_model import FILE_KIND, FILE_VERSION, coefficients_to_json
from codesign.hw.resources import COEFFICIENTS, PUBLISHED_BUILD, RESOURCES, ResourceCoefficients, estimate


@dataclass(frozen=True)
class Build:
    name: str
    hw: HwConfig
    board: Board
    measured: dict[str, int]
    clock_mhz: float | None = None
    timing_met: bool | None = None
    wns_ns: float | None = None


def builds_from(entries: list[Entry], include_anchor: bool = True) -> list[Build]:
    out = []
    if include_anchor:
        out.append(Build(f"{PUBLISHED_BUILD['hw']} (model anchor)", HwConfig.from_name(PUBLISHED_BUILD["hw"]),
                         Board.named(PUBLISHED_BUILD["board"]), dict(PUBLISHED_BUILD["resources"])))
    for e in entries:
        if not e.utilization:
            continue
        t = e.timing or {}
        out.append(Build(f"{e.config} ({e.board}, {e.hw_ver}, {e.source})", HwConfig.from_name(e.config),
                         Board.named(e.board), {r: int(e.utilization[r]) for r in RESOURCES},
                         e.clock_mhz, t.get("met"), t.get("wns_ns")))
    return out


def _variable(b: Build, k: ResourceCoefficients) -> dict[str, float]:
    """The model without its fixed terms (fixed DSP kept: it sets the GEMM's DSP budget)."""
    res = estimate(b.hw, b.board, replace(k, fixed_lut=0.0, fixed_ff=0.0, fixed_bram18=0.0))
    return {"lut": res.lut, "ff": res.ff, "bram18": res.bram18, "dsp": res.dsp - k.fixed_dsp}


def errors(builds: list[Build], k: ResourceCoefficients) -> list[dict[str, Any]]:
    rows = []
    for b in builds:
        res = estimate(b.hw, b.board, k)
        row: dict[str, Any] = {"build": b.name}
        for r in RESOURCES:
            row[r] = {"model": getattr(res, r), "measured": b.measured[r],
                      "rel_error": (getattr(res, r) - b.measured[r]) / b.measured[r] if b.measured[r] else 0.0}
        rows.append(row)
    return rows


def fit(builds: list[Build], base: ResourceCoefficients = COEFFICIENTS) -> ResourceCoefficients:
    k = base
    for _ in range(3):  # the DSP budget depends on fixed_dsp; two passes settle it
        var = [_variable(b, k) for b in builds]
        fixed = {r: max(0.0, sum((b.measured[r] - v[r]) / b.measured[r] ** 2 for b, v in zip(builds, var))
                        / sum(1.0 / b.measured[r] ** 2 for b in builds)) for r in RESOURCES}
        k = replace(k, fixed_lut=fixed["lut"], fixed_ff=fixed["ff"], fixed_bram18=fixed["bram18"],
                    fixed_dsp=fixed["dsp"],
                    provenance={**base.provenance, "fixed_*": "mean residual over: " + "; ".join(b.name for b in builds)})
    return k


def verified_clocks(builds: list[Build]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for b in builds:
        if b.timing_met is None or b.clock_mhz is None:
            continue
        d = out.setdefault(b.board.name, {"board_file_mhz": b.board.verified_clock_mhz, "met_mhz": [],
                                          "failed_mhz": []})
        (d["met_mhz"] if b.timing_met else d["failed_mhz"]).append(b.clock_mhz)
    for d in out.values():
        d["fitted_mhz"] = max(d["met_mhz"]) if d["met_mhz"] else None
    return out


def calibrate_resources(entries: list[Entry], catalogs: list[str] | None = None) -> dict[str, Any]:
    """The fit as a self-describing JSON document: `codesign sweep --resources FILE` rebuilds the
    model from `coefficients` and `verified_clock` (`codesign.hw.resource_model`); `catalog`
    lists the catalog files the builds came from."""
    builds = builds_from(entries)
    k = fit(builds)
    def rms(rows: list[dict[str, Any]]) -> dict[str, float]:
        return {r: (sum(x[r]["rel_error"] ** 2 for x in rows) / len(rows)) ** 0.5 * 100 for r in RESOURCES}

    before, after = errors(builds, COEFFICIENTS), errors(builds, k)
    return {
        "kind": FILE_KIND, "version": FILE_VERSION,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "catalog": list(catalogs or []),
        "coefficients": coefficients_to_json(k),
        "builds": [b.name for b in builds],
        "fixed_before": {r: getattr(COEFFICIENTS, f"fixed_{r}") for r in RESOURCES},
        "fixed_after": {r: getattr(k, f"fixed_{r}") for r in RESOURCES},
        "before": before, "after": after,
        "rms_error_pct_before": rms(before), "rms_error_pct_after": rms(after),
        "verified_clock": verified_clocks(builds),
    }


__all__ = ["Build", "builds_from", "errors", "fit", "verified_clocks", "calibrate_resources"]
