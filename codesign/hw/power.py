"""Board power of a VTA design: static + clock tree + activity-scaled dynamic power + memory port.

Coefficients and their sources live in `hw_configs/power/default.yaml`; the calibration block of
that file pins the scales to the landscape's ZU3EG board measurements (the fit is computed here,
at load time, so a user file with other measurements gets its own fit). Energy = power x latency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError
from codesign.fileio import read_document
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.hw.resources import RESOURCES, Resources, estimate
from codesign.paths import HW_CONFIGS

DEFAULT_PATH = HW_CONFIGS / "power" / "default.yaml"
ACTIVITY_KEYS = ("load", "compute", "store")
_TOP_KEYS = {"static_w", "family_scale", "clock_uw_per_mhz", "dynamic_uw_per_mhz",
             "port_uw_per_mhz_per_bit", "clock_scale", "dynamic_scale", "calibration"}
_CAL_KEYS = {"hw", "board", "idle", "running", "source"}


def _component_activity(name: str, a: dict[str, float]) -> float:
    """Which module's busy fraction toggles a resource component (see resources.estimate detail).

    Compute drives the GEMM core and ALU and its private UOP/ACC memories; INP/WGT are written by
    load and read by compute, OUT written by compute and read by store; the AXI buffers and FIFOs
    move with the DMA traffic; control is on whenever any module is busy.
    """
    load, compute, store = a["load"], a["compute"], a["store"]
    return {
        "gemm": compute, "alu": compute, "uop_mem": compute, "acc_mem": compute,
        "inp_mem": 0.5 * (load + compute), "wgt_mem": 0.5 * (load + compute),
        "out_mem": 0.5 * (compute + store),
        "datapath": (load + compute + store) / 3.0,
        "axi_buffers": min(1.0, load + store), "fifos": min(1.0, load + store),
        "axi_datapath": 0.0,  # its switching is the port term (port_uw_per_mhz_per_bit)
        "control": max(load, compute, store),
    }.get(name, 0.0)


def normalize_activity(activity: dict[str, float] | None) -> dict[str, float]:
    activity = dict(activity or {})
    unknown = sorted(set(activity) - set(ACTIVITY_KEYS))
    if unknown:
        raise ConfigError(f"activity key {unknown[0]!r} unknown; allowed: {', '.join(ACTIVITY_KEYS)}")
    out = {}
    for k in ACTIVITY_KEYS:
        v = float(activity.get(k, 0.0))
        out[k] = min(1.0, max(0.0, v))  # busy fractions; clip rounding noise
    return out


@dataclass(frozen=True)
class PowerModel:
    static_w: dict[str, float]
    family_scale: dict[str, float]
    clock_uw_per_mhz: dict[str, float]
    dynamic_uw_per_mhz: dict[str, float]
    port_uw_per_mhz_per_bit: float
    clock_scale: float = 1.0
    dynamic_scale: float = 1.0
    calibration: dict[str, Any] | None = None
    source: str = ""
    fitted: dict[str, float] = field(default_factory=dict)

    # -- loading and fitting -------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path | None = None) -> PowerModel:
        """Read coefficients from YAML (default `hw_configs/power/default.yaml`) and fit the scales
        to its `calibration` block if it has one."""
        path = Path(path) if path is not None else DEFAULT_PATH
        data = read_document(path, "power coefficient file")
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping with keys {', '.join(sorted(_TOP_KEYS))}")
        for key in data:
            if key not in _TOP_KEYS:
                raise ConfigError(f"{path}: unknown key {key!r}; allowed: {', '.join(sorted(_TOP_KEYS))}")

        def per_resource(key: str) -> dict[str, float]:
            value = data.get(key)
            if not isinstance(value, dict) or set(value) != set(RESOURCES):
                raise ConfigError(f"{path}: {key} must map each of {', '.join(RESOURCES)} to a number")
            return {r: _number(path, f"{key}.{r}", value[r]) for r in RESOURCES}

        static = data.get("static_w") or {}
        if not isinstance(static, dict):
            raise ConfigError(f"{path}: static_w must map board names to watts")
        family = data.get("family_scale") or {}
        if not isinstance(family, dict):
            raise ConfigError(f"{path}: family_scale must map dsp_kind (DSP48E1, DSP48E2) to a factor")
        model = cls(
            static_w={str(k): _number(path, f"static_w.{k}", v) for k, v in static.items()},
            family_scale={str(k): _number(path, f"family_scale.{k}", v) for k, v in family.items()},
            clock_uw_per_mhz=per_resource("clock_uw_per_mhz"),
            dynamic_uw_per_mhz=per_resource("dynamic_uw_per_mhz"),
            port_uw_per_mhz_per_bit=_number(path, "port_uw_per_mhz_per_bit",
                                            data.get("port_uw_per_mhz_per_bit", 0.0)),
            clock_scale=_number(path, "clock_scale", data.get("clock_scale", 1.0)),
            dynamic_scale=_number(path, "dynamic_scale", data.get("dynamic_scale", 1.0)),
            calibration=data.get("calibration"),
            source=str(path),
        )
        return model._fit(path) if model.calibration else model

    def _fit(self, path: Path) -> PowerModel:
        cal = self.calibration
        if not isinstance(cal, dict):
            raise ConfigError(f"{path}: calibration must be a mapping with keys {', '.join(sorted(_CAL_KEYS))}")
        for key in cal:
            if key not in _CAL_KEYS:
                raise ConfigError(f"{path}: unknown key calibration.{key}; allowed: {', '.join(sorted(_CAL_KEYS))}")
        try:
            hw = HwConfig.resolve(cal["hw"])
            board = Board.named(cal["board"])
            idle = [(float(f), float(p)) for f, p in cal["idle"]]
            run = cal["running"]
            f_run, p_run = float(run["clock_mhz"]), float(run["power_w"])
            act = normalize_activity(run["activity"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: calibration needs hw, board, idle [[MHz, W], [MHz, W]] and running "
                              f"{{clock_mhz, power_w, activity}} ({exc!r})") from None
        slope, static = _idle_line(path, idle, f_run)
        res = estimate(hw, board)
        fam = self.family_scale.get(board.dsp_kind, 1.0)
        # Idle power is linear in clock: the slope is the clock tree of this design.
        clock_unit = fam * sum(self.clock_uw_per_mhz[r] * getattr(res, r) for r in RESOURCES) * 1e-6
        clock_scale = slope / clock_unit
        # Running - idle at the same clock is the activity-driven part.
        dyn_unit = self._dynamic_w(hw, board, res, act, f_run, 1.0)
        idle_at_run = static + slope * f_run
        if p_run < idle_at_run:
            raise ConfigError(f"{path}: calibration.running.power_w {p_run} is below idle {idle_at_run:.3f} W")
        dynamic_scale = (p_run - idle_at_run) / dyn_unit
        statics = dict(self.static_w)
        statics[board.name] = static
        fitted = {"clock_scale": clock_scale, "dynamic_scale": dynamic_scale,
                  f"static_w.{board.name}": static, "idle_slope_w_per_mhz": slope,
                  "idle_max_abs_error_w": max(abs(static + slope * f - p) for f, p in idle)}
        return PowerModel(statics, self.family_scale, self.clock_uw_per_mhz, self.dynamic_uw_per_mhz,
                          self.port_uw_per_mhz_per_bit, clock_scale, dynamic_scale, cal, self.source, fitted)

    # -- evaluation ------------------------------------------------------------------------------
    def static_for(self, board: Board) -> float:
        if board.name in self.static_w:
            return self.static_w[board.name]
        if board.static_power_w is not None:
            return float(board.static_power_w)
        raise ConfigError(f"{self.source}: no static_w for board {board.name!r}; known: "
                          f"{', '.join(sorted(self.static_w))} (add static_w.{board.name})")

    def _dynamic_w(self, hw: HwConfig, board: Board, res: Resources, act: dict[str, float],
                   mhz: float, scale: float) -> float:
        fam = self.family_scale.get(board.dsp_kind, 1.0)
        uw = 0.0
        for name, part in res.detail.items():
            a = _component_activity(name, act)
            if a:
                uw += a * sum(self.dynamic_uw_per_mhz[r] * part.get(r, 0.0) for r in RESOURCES)
        uw += self.port_uw_per_mhz_per_bit * float(hw.axi_bits) * min(1.0, act["load"] + act["store"])  # type: ignore[arg-type]
        return scale * fam * uw * mhz * 1e-6

    def breakdown(self, hw: HwConfig, board: Board, resources: Resources | None = None,
                  activity: dict[str, float] | None = None) -> dict[str, float]:
        """Watts by part: static, clock (idle dynamic), dynamic (activity-driven incl. port)."""
        res = resources or estimate(hw, board)
        act = normalize_activity(activity)
        mhz = float(hw.clock_mhz)  # type: ignore[arg-type]
        fam = self.family_scale.get(board.dsp_kind, 1.0)
        clock = self.clock_scale * fam * mhz * 1e-6 * sum(
            self.clock_uw_per_mhz[r] * getattr(res, r) for r in RESOURCES)
        dynamic = self._dynamic_w(hw, board, res, act, mhz, self.dynamic_scale)
        static = self.static_for(board)
        return {"static_w": static, "clock_w": clock, "dynamic_w": dynamic,
                "total_w": static + clock + dynamic}

    def power_w(self, hw: HwConfig, board: Board, resources: Resources | None = None,
                activity: dict[str, float] | None = None) -> float:
        """Board power in watts of `hw` on `board` at the given module busy fractions."""
        return self.breakdown(hw, board, resources, activity)["total_w"]

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "clock_scale": self.clock_scale, "dynamic_scale": self.dynamic_scale,
                "static_w": dict(self.static_w), "fitted": dict(self.fitted)}


def energy_j(power_w: float, latency_s: float) -> float:
    """Energy per inference: average board power x latency."""
    return power_w * latency_s


def activity_from_busy(busy: dict[str, int], cycles: int) -> dict[str, float]:
    """Busy cycles per module (simulator/timing `busy`) -> busy fractions of the run."""
    if cycles <= 0:
        return {k: 0.0 for k in ACTIVITY_KEYS}
    return {k: min(1.0, busy.get(k, 0) / cycles) for k in ACTIVITY_KEYS}


def _idle_line(path: Path, idle: list[tuple[float, float]], f_run: float) -> tuple[float, float]:
    """Idle power = static + slope x MHz. The line passes through the idle point measured at the
    running clock (same build as the running figure) if there is one, with the slope least-squares
    over the other points; otherwise an ordinary least-squares line."""
    if len({f for f, _ in idle}) < 2:
        raise ConfigError(f"{path}: calibration.idle needs idle power at two or more clocks")
    anchor = [p for f, p in idle if f == f_run]
    if anchor:
        others = [(f - f_run, p - anchor[0]) for f, p in idle if f != f_run]
        slope = sum(df * dp for df, dp in others) / sum(df * df for df, _ in others)
        static = anchor[0] - slope * f_run
    else:
        n = len(idle)
        mf, mp = sum(f for f, _ in idle) / n, sum(p for _, p in idle) / n
        slope = sum((f - mf) * (p - mp) for f, p in idle) / sum((f - mf) ** 2 for f, _ in idle)
        static = mp - slope * mf
    if slope <= 0 or static < 0:
        raise ConfigError(f"{path}: calibration.idle must rise with clock from a non-negative static power")
    return slope, static


def _number(path: Path, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(f"{path}: {key}={value!r} must be a non-negative number")
    return float(value)


_DEFAULT: PowerModel | None = None


def default_model() -> PowerModel:
    """The shipped model, loaded once."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = PowerModel.load()
    return _DEFAULT


__all__ = ["ACTIVITY_KEYS", "DEFAULT_PATH", "PowerModel", "activity_from_busy", "default_model",
           "energy_j", "normalize_activity"]
