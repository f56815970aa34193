"""Parsers for the text reports of a Vivado build: `report_utilization` (LUT, FF, BRAM, DSP) and
`report_timing_summary` (WNS, clock periods). Both start with a `| Command : report_...` header
line, which is how a report of another tool (an HLS csynth report, the other Vivado report) is
recognised and refused.

Utilization tables name the rows by family: 7-series says `Slice LUTs`/`Slice Registers`,
UltraScale+ `CLB LUTs`/`CLB Registers`; both count block RAM as `Block RAM Tile` (36 Kb tiles,
an 18 Kb half counts 0.5) and DSP slices as `DSPs`. BRAM18 equivalents = 2 x tiles.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError

_HEAD = re.compile(r"^\|\s*(?P<key>[A-Za-z ]+?)\s*:\s*(?P<value>.*?)\s*$")
_ROW = re.compile(r"^\|\s*(?P<name>[^|]+?)\s*\|\s*(?P<used>[\d.]+)\s*\|")


def _read(path_or_text: str | Path, what: str) -> tuple[str, str]:
    if isinstance(path_or_text, Path) or ("\n" not in str(path_or_text) and Path(str(path_or_text)).exists()):
        path = Path(path_or_text)
        try:
            return path.read_text(encoding="utf-8", errors="replace"), str(path)
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such {what}") from None
        except (IsADirectoryError, PermissionError) as exc:
            raise ConfigError(f"{path}: cannot read this {what} ({exc.__class__.__name__})") from None
    if "\n" not in str(path_or_text):
        raise ConfigError(f"{path_or_text}: no such {what}")
    return str(path_or_text), what


def header(text: str) -> dict[str, str]:
    """The `| Key : value` lines at the top of a Vivado report."""
    out: dict[str, str] = {}
    for line in text.splitlines()[:30]:
        m = _HEAD.match(line)
        if m:
            out[m.group("key").strip()] = m.group("value")
    return out


def _expect(text: str, source: str, command: str) -> dict[str, str]:
    head = header(text)
    cmd = head.get("Command", "")
    if not cmd.startswith(command):
        got = cmd.split()[0] if cmd else ("a Vivado HLS report" if "Vivado HLS Report" in text[:2000]
                                          or "HLS Report" in text[:2000] else "no '| Command :' header")
        raise ConfigError(f"{source}: not a Vivado {command} report (found {got}); expected the text "
                          f"file written by `{command} -file ...`")
    return head


def parse_utilization(path_or_text: str | Path) -> dict[str, Any]:
    """LUT, FF, BRAM18 (2 x BRAM tiles), BRAM tiles and DSP used, with device, tool and design."""
    text, source = _read(path_or_text, "utilization report")
    head = _expect(text, source, "report_utilization")
    rows: dict[str, float] = {}
    for line in text.splitlines():
        m = _ROW.match(line)
        if m and m.group("name") not in rows:  # first occurrence: the summary tables come first
            rows[m.group("name")] = float(m.group("used"))

    def first(*names: str) -> float:
        for n in names:
            if n in rows:
                return rows[n]
        raise ConfigError(f"{source}: utilization report without a {' / '.join(names)} row")

    tiles = first("Block RAM Tile")
    return {
        "lut": int(first("CLB LUTs", "Slice LUTs", "CLB LUTs*", "Slice LUTs*")),
        "ff": int(first("CLB Registers", "Slice Registers")),
        "bram_tiles": tiles,
        "bram18": int(round(2 * tiles)),
        "dsp": int(first("DSPs")),
        "device": head.get("Device", ""),
        "tool_version": head.get("Tool Version", ""),
        "design": head.get("Design", ""),
        "design_state": head.get("Design State", ""),
    }


def parse_timing_summary(path_or_text: str | Path) -> dict[str, Any]:
    """WNS/TNS/WHS (ns), whether all constraints are met, and the clocks (name, period, MHz). The
    design clock is the fastest clock of the Clock Summary (VTA runs everything on one PL clock)."""
    text, source = _read(path_or_text, "timing summary report")
    head = _expect(text, source, "report_timing_summary")
    lines = text.splitlines()
    summary = None
    for k, line in enumerate(lines):
        if "Design Timing Summary" in line:
            for row in lines[k + 1:k + 12]:
                cells = row.split()
                if len(cells) >= 8 and re.fullmatch(r"-?\d+\.\d+", cells[0]):
                    summary = cells
                    break
            break
    if summary is None:
        raise ConfigError(f"{source}: timing summary report without a Design Timing Summary table")
    clocks = []
    for k, line in enumerate(lines):
        if "Clock Summary" in line:
            for row in lines[k + 1:k + 60]:
                m = re.match(r"^\s*(?P<name>\S+)\s+\{[^}]*\}\s+(?P<period>\d+\.\d+)\s+(?P<mhz>\d+\.\d+)\s*$", row)
                if m:
                    clocks.append({"name": m.group("name"), "period_ns": float(m.group("period")),
                                   "mhz": float(m.group("mhz"))})
                elif clocks and not row.strip():
                    break
            break
    if not clocks:
        raise ConfigError(f"{source}: timing summary report without a Clock Summary table")
    fastest = min(clocks, key=lambda c: c["period_ns"])
    wns = float(summary[0])
    return {
        "wns_ns": wns,
        "tns_ns": float(summary[1]),
        "whs_ns": float(summary[4]),
        "met": "All user specified timing constraints are met." in text and wns >= 0,
        "clocks": clocks,
        "clock": fastest["name"],
        "period_ns": fastest["period_ns"],
        "clock_mhz": fastest["mhz"],
        # The clock this build would close at: its period minus the slack left on its worst path.
        "fmax_mhz": 1000.0 / (fastest["period_ns"] - wns),
        "device": head.get("Device", ""),
        "tool_version": head.get("Tool Version", ""),
        "design": head.get("Design", ""),
    }


__all__ = ["header", "parse_utilization", "parse_timing_summary"]
