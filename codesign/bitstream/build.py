"""Build a bitstream for a config with the HLS + Vivado flow of the user's tvm-vta checkout.

VTA's flow (docs/vta.md §5.5): the config is read from `<vta-hw>/config/vta_config.json`;
`make ip` in `hardware/xilinx` runs HLS, `make` then runs Vivado and leaves
`build/hardware/xilinx/vivado/<cfg-str>/export/vta.bit`, cfg-str = TARGET_BITSTREAM. The PL clock
is not a vta_config.json key: pkg_config.py fixes it per TARGET (`fpga_freq`), so a config at
another clock needs that edit (said in the plan). A config the board cannot hold is refused
before anything is written or run.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from codesign.errors import CodesignError, ConfigError
from codesign.fileio import atomic_write_text
from codesign.hw.board import Board
from codesign.hw.config import TARGET_DEFAULTS, HwConfig
from codesign.hw.resources import estimate, infeasible_reason

HLS_TOOLS = ("vitis_hls", "vivado_hls")

REPORTS_TCL = """\
# Written by codesign bitstream build: utilization and timing reports of the routed design.
set proj [lindex [glob -nocomplain -directory [lindex $argv 0] *.xpr */*.xpr] 0]
open_project $proj
open_run impl_1
report_utilization -file [lindex $argv 1]/utilization.rpt
report_timing_summary -file [lindex $argv 1]/timing_summary.rpt
"""


@dataclass(frozen=True)
class BuildPlan:
    hw: HwConfig
    board: Board
    vta_hw: Path
    out: Path
    config_json: Path
    steps: list[tuple[str, list[str], Path]]  # (what, argv, cwd)
    bit: Path
    reports: Path
    notes: list[str] = field(default_factory=list)

    def add_command(self) -> str:
        return (f"codesign bitstream add {shlex.quote(str(self.bit))} --hw {self.hw.name} --board {self.board.name} "
                f"--utilization {shlex.quote(str(self.reports / 'utilization.rpt'))} "
                f"--timing {shlex.quote(str(self.reports / 'timing_summary.rpt'))}")

    def shell_lines(self) -> list[str]:
        return [f"cd {shlex.quote(str(cwd))} && {shlex.join(argv)}" for _what, argv, cwd in self.steps]


def plan(hw: HwConfig, board: Board, vta_hw: str | Path, out: str | Path) -> BuildPlan:
    """Check the config against the board and the checkout; nothing is written yet."""
    reason = infeasible_reason(hw, board)
    if reason is not None:
        res = estimate(hw, board)
        raise ConfigError(f"{hw.name} cannot be built for {board.name}: {reason} "
                          f"(estimate: {res.lut} LUT, {res.ff} FF, {res.bram18} BRAM18, {res.dsp} DSP)")
    vta_hw = Path(vta_hw).expanduser().resolve()
    xilinx = vta_hw / "hardware" / "xilinx"
    if not (xilinx / "Makefile").is_file() or not (vta_hw / "config").is_dir():
        raise ConfigError(f"--vta-hw {vta_hw}: not a tvm-vta hardware checkout (expected config/ and "
                          "hardware/xilinx/Makefile; e.g. tvm/3rdparty/vta-hw)")
    out = Path(out).resolve()
    cfg = hw.vta_model
    build = vta_hw / "build" / "hardware" / "xilinx" / "vivado" / cfg
    reports = out / "reports"
    vivado = shutil.which("vivado") or "vivado"
    steps = [
        ("install vta_config.json (the original is kept as vta_config.json.orig in the output folder)",
         ["cp", str(out / "vta_config.json"), str(vta_hw / "config" / "vta_config.json")], vta_hw),
        ("HLS: the four VTA modules", ["make", "ip"], xilinx),
        ("Vivado: block design, synthesis, place and route, bitstream", ["make"], xilinx),
        ("Vivado: utilization and timing reports",
         [vivado, "-mode", "batch", "-source", str(out / "reports.tcl"), "-tclargs", str(build), str(reports)], out),
    ]
    notes = []
    default_clock = TARGET_DEFAULTS[hw.TARGET]["clock_mhz"]
    if float(hw.clock_mhz) != float(default_clock):  # type: ignore[arg-type]
        notes.append(f"VTA's config/pkg_config.py fixes the {hw.TARGET} PL clock at {default_clock} MHz "
                     f"(fpga_freq); set it to {hw.clock_mhz:g} MHz before `make` for this config")
    if board.verified_clock_mhz is not None and float(hw.clock_mhz) > board.verified_clock_mhz:  # type: ignore[arg-type]
        notes.append(f"{hw.clock_mhz:g} MHz is above {board.name}'s verified {board.verified_clock_mhz:g} MHz: "
                     "check the timing report (WNS >= 0) and the deploy smoke test")
    return BuildPlan(hw, board, vta_hw, out, out / "vta_config.json", steps, build / "export" / "vta.bit",
                     reports, notes)


def write_inputs(p: BuildPlan) -> None:
    """vta_config.json and the reports script into the output folder; back up the checkout's config."""
    p.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(p.config_json, json.dumps(p.hw.to_vta_json(), indent=2) + "\n")
    atomic_write_text(p.out / "reports.tcl", REPORTS_TCL)
    current = p.vta_hw / "config" / "vta_config.json"
    backup = p.out / "vta_config.json.orig"
    if current.exists() and not backup.exists():
        shutil.copyfile(current, backup)


def tools_available() -> tuple[bool, list[str]]:
    """(all tools on PATH?, missing ones)."""
    missing = []
    if not shutil.which("vivado"):
        missing.append("vivado")
    if not any(shutil.which(t) for t in HLS_TOOLS):
        missing.append(" or ".join(HLS_TOOLS))
    if not shutil.which("make"):
        missing.append("make")
    return not missing, missing


def run(p: BuildPlan, log: Path | None = None) -> None:
    """Run the steps in order, each's output appended to `log` (default <out>/build.log)."""
    log = log or p.out / "build.log"
    with open(log, "a", encoding="utf-8") as fh:
        for what, argv, cwd in p.steps:
            fh.write(f"# {what}\n$ {shlex.join(argv)}  (in {cwd})\n")
            fh.flush()
            rc = subprocess.run(argv, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode
            if rc != 0:
                raise CodesignError(f"build step failed ({what}): `{shlex.join(argv)}` exited {rc}; see {log}")
    if not p.bit.exists():
        raise CodesignError(f"the flow finished but {p.bit} does not exist; see {log}")


__all__ = ["BuildPlan", "plan", "write_inputs", "tools_available", "run"]
