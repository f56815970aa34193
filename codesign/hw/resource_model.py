"""Which resource model scores a design: the shipped coefficients, or a calibrated file.

`codesign calibrate resources -o FILE` writes the fitted `ResourceCoefficients` (every field, not
only the refitted fixed terms) and the boards' verified clocks fitted to the catalog's builds
(`codesign.calibrate.resources_fit`). `load_resource_model(FILE)` turns that file back into a
`ResourceModel`; `codesign sweep --resources FILE` keeps `to_json()` in sweep.json so a resume
scores with the same numbers, and `HwSpace.with_resource_model` is the one place the sweep's
feasibility, area and board clock take them from.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError
from codesign.fileio import read_text
from codesign.hw.board import Board
from codesign.hw.resources import COEFFICIENTS, ResourceCoefficients
from codesign.paths import shipped

FILE_KIND = "vta-codesign resource calibration"  # `kind` of the file `calibrate resources -o` writes
FILE_VERSION = 1
SHIPPED_SOURCE = "shipped"


def coefficients_to_json(k: ResourceCoefficients) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(k):
        v = getattr(k, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else (dict(v) if isinstance(v, dict) else v)
    return out


def coefficients_from_json(data: Any, where: str) -> ResourceCoefficients:
    """`ResourceCoefficients` from its JSON form; one ConfigError line naming the field otherwise."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected an object with the ResourceCoefficients fields")
    defaults = ResourceCoefficients()
    kw: dict[str, Any] = {}
    names = [f.name for f in fields(ResourceCoefficients)]
    for key in data:
        if key not in names:
            raise ConfigError(f"{where}.{key}: unknown field; allowed: {', '.join(names)}")
    for name in names:
        if name not in data:
            if name == "provenance":
                continue
            raise ConfigError(f"{where}.{name}: missing (every ResourceCoefficients field is required)")
        value, default = data[name], getattr(defaults, name)
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, tuple):
            ok = isinstance(value, list) and len(value) == len(default) and all(
                isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in value)
            value = tuple(value) if ok else value
        elif isinstance(default, dict):
            ok = isinstance(value, dict)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        if not ok:
            raise ConfigError(f"{where}.{name}: {value!r} has the wrong type or sign (shipped: {default!r})")
        kw[name] = float(value) if isinstance(default, float) else value
    return ResourceCoefficients(**kw)


@dataclass(frozen=True)
class ResourceModel:
    """Coefficients plus the boards' verified clocks (board name -> MHz) a sweep scores with."""

    coefficients: ResourceCoefficients = COEFFICIENTS
    verified_clocks: tuple[tuple[str, float], ...] = ()
    source: str = SHIPPED_SOURCE  # "shipped" or the calibrated file's path
    sha256: str | None = None  # of the calibrated file
    calibration: dict[str, Any] | None = None  # the file's catalog, date, builds, fit error

    @property
    def shipped(self) -> bool:
        return self.source == SHIPPED_SOURCE

    def board(self, board: Board) -> Board:
        """`board` with the verified clock the calibration fitted for it (unchanged if none)."""
        mhz = dict(self.verified_clocks).get(board.name)
        if mhz is None:
            return board
        note = f"calibrated: a catalog build met timing at {mhz:g} MHz ({self.source})"
        return replace(board, verified_clock_mhz=float(mhz), verified_clock_note=note)

    def label(self) -> str:
        """One line for tables and reports."""
        if self.shipped:
            return "shipped coefficients (codesign/hw/resources.py)"
        return f"calibrated file {self.source} (sha256 {self.sha256})"

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "sha256": self.sha256,
                "coefficients": coefficients_to_json(self.coefficients),
                "verified_clock_mhz": dict(self.verified_clocks), "calibration": self.calibration}

    def summary(self) -> dict[str, Any]:
        """What pareto.json and `codesign report` say about the model (no per-unit numbers)."""
        out: dict[str, Any] = {"source": self.source, "sha256": self.sha256, "label": self.label()}
        if not self.shipped:
            out["verified_clock_mhz"] = dict(self.verified_clocks)
            out["fixed"] = {r: getattr(self.coefficients, f"fixed_{r}") for r in ("lut", "ff", "bram18", "dsp")}
            out["calibration"] = self.calibration
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any] | None, where: str = "sweep.json resources") -> ResourceModel:
        """The model stored by `to_json` (None: the shipped one)."""
        if data is None:
            return SHIPPED
        if not isinstance(data, dict) or "coefficients" not in data:
            raise ConfigError(f"{where}: expected an object with source, sha256, coefficients, verified_clock_mhz")
        clocks = _clocks(data.get("verified_clock_mhz") or {}, f"{where}.verified_clock_mhz")
        return cls(coefficients_from_json(data["coefficients"], f"{where}.coefficients"), clocks,
                   str(data.get("source", "?")), data.get("sha256"), data.get("calibration"))


SHIPPED = ResourceModel()


def _clocks(data: Any, where: str) -> tuple[tuple[str, float], ...]:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected an object of board name -> MHz")
    out = []
    for board, mhz in data.items():
        if mhz is None:
            continue
        if isinstance(mhz, bool) or not isinstance(mhz, (int, float)) or mhz <= 0:
            raise ConfigError(f"{where}.{board}: {mhz!r} is not a clock in MHz (a positive number or null)")
        out.append((str(board), float(mhz)))
    return tuple(sorted(out))


def load_resource_model(path: str | Path) -> ResourceModel:
    """The model in a file written by `codesign calibrate resources -o FILE`; one ConfigError line
    naming the file and field for anything else."""
    path = Path(path)
    what = "resource calibration file (codesign calibrate resources -o FILE)"
    text = read_text(path, what)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); expected a {what}") from None
    if not isinstance(data, dict) or data.get("kind") != FILE_KIND:
        raise ConfigError(f"{path}: kind: expected {FILE_KIND!r} (a {what}; written by an older version? "
                          "run `codesign calibrate resources -o FILE` again)")
    if data.get("version") != FILE_VERSION:
        raise ConfigError(f"{path}: version {data.get('version')!r}: this codesign reads version {FILE_VERSION}")
    if "coefficients" not in data:
        raise ConfigError(f"{path}: coefficients: missing (the fitted ResourceCoefficients)")
    k = coefficients_from_json(data["coefficients"], f"{path}: coefficients")
    vc = data.get("verified_clock")
    if not isinstance(vc, dict):
        raise ConfigError(f"{path}: verified_clock: missing or not an object of board name -> {{fitted_mhz, ...}}")
    fitted: dict[str, Any] = {}
    for board, d in vc.items():
        if not isinstance(d, dict) or "fitted_mhz" not in d:
            raise ConfigError(f"{path}: verified_clock.{board}.fitted_mhz: missing")
        fitted[board] = d["fitted_mhz"]
    clocks = _clocks(fitted, f"{path}: verified_clock")
    for board, _ in clocks:
        try:
            Board.named(board)
        except ConfigError as exc:
            raise ConfigError(f"{path}: verified_clock.{board}: {exc}") from None
    calibration = {key: data.get(key) for key in ("catalog", "date", "builds", "rms_error_pct_before",
                                                    "rms_error_pct_after")}
    digest = hashlib.sha256(shipped(path).read_bytes()).hexdigest()  # of the bytes: a copy elsewhere is the same model
    # The absolute path: sweep.json and pareto.json must still say which file it was from elsewhere.
    return ResourceModel(k, clocks, str(shipped(path).resolve()), digest, calibration)


__all__ = ["FILE_KIND", "FILE_VERSION", "SHIPPED", "ResourceModel", "coefficients_from_json",
           "coefficients_to_json", "load_resource_model"]
