"""FPGA board descriptions (`hw_configs/boards/*.yaml`): resources, PL clocks and memory port."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError
from codesign.fileio import read_document
from codesign.paths import BOARDS

_REQUIRED = {
    "name": str, "fpga_part": str, "target": str, "lut": int, "ff": int, "bram36": int, "dsp": int,
    "pl_clocks_mhz": list, "axi_bits": int, "dram_bandwidth_gbps": (int, float),
}
_OPTIONAL = {"description": str, "source": str, "dsp_kind": str, "static_power_w": (int, float),
             "verified_clock_mhz": (int, float)}


@dataclass(frozen=True)
class Board:
    name: str
    fpga_part: str
    target: str  # the VTA TARGET that runs on it
    lut: int
    ff: int
    bram36: int
    dsp: int
    pl_clocks_mhz: tuple[float, ...]
    axi_bits: int
    dram_bandwidth_gbps: float  # peak of the board's DRAM, not of VTA's port
    description: str = ""
    source: str = ""
    dsp_kind: str = "DSP48E1"
    static_power_w: float | None = None
    # Highest PL clock at which a VTA build is known to close timing and compute correctly on this
    # board. Designs above it are still explored (timing closure is not modelled) but flagged.
    verified_clock_mhz: float | None = None

    def clock_verified(self, clock_mhz: float) -> bool:
        return self.verified_clock_mhz is None or clock_mhz <= self.verified_clock_mhz

    @property
    def bram18(self) -> int:
        return 2 * self.bram36

    def totals(self) -> dict[str, int]:
        return {"lut": self.lut, "ff": self.ff, "bram18": self.bram18, "dsp": self.dsp}

    @classmethod
    def load(cls, path: str | Path) -> Board:
        path = Path(path)
        data = read_document(path, "board file")
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of board fields")
        allowed = {**_REQUIRED, **_OPTIONAL}
        for key in data:
            if key not in allowed:
                raise ConfigError(f"{path}: unknown key {key!r}; allowed: {', '.join(sorted(allowed))}")
        for key in _REQUIRED:
            if key not in data:
                raise ConfigError(f"{path}: missing key {key!r}")
        for key, value in data.items():
            if not isinstance(value, allowed[key]) or isinstance(value, bool):
                raise ConfigError(f"{path}: {key}={value!r} has the wrong type")
        kw: dict[str, Any] = dict(data)
        kw["pl_clocks_mhz"] = tuple(float(c) for c in data["pl_clocks_mhz"])
        kw["dram_bandwidth_gbps"] = float(data["dram_bandwidth_gbps"])
        return cls(**kw)

    @classmethod
    def named(cls, name: str) -> Board:
        """A board from `hw_configs/boards/<name>.yaml`, or a path to such a file."""
        path = Path(name)
        if path.suffix in (".yaml", ".yml"):
            return cls.load(path)
        candidate = BOARDS / f"{name}.yaml"
        if not candidate.exists():
            known = sorted(p.stem for p in BOARDS.glob("*.yaml"))
            raise ConfigError(f"unknown board {name!r}; known boards: {', '.join(known)}")
        return cls.load(candidate)
