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
             "verified_clock_mhz": (int, float), "verified_clock_note": str, "uram": int,
             "axi_bits_choices": list, "cpu": str}
AXI_WIDTHS = (32, 64, 128, 256, 512)


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
    # None: no VTA build is known for the board, so no clock is verified.
    verified_clock_mhz: float | None = None
    verified_clock_note: str = ""  # the evidence (or its absence), shown by `codesign report`
    uram: int = 0  # UltraRAM blocks (ZU+): listed for completeness, VTA's memories are BRAM
    # AXI data widths VTA's memory port can be built with on this board (the PS port's width and
    # narrower ones the port accepts); the widest is `axi_bits`.
    axi_bits_choices: tuple[int, ...] = ()
    # The processing system's application CPU (`cortex-a9`, `cortex-a53`): the key of its
    # parameters in the CPU cost model (codesign.cpu, docs/cpu-model.md). "" if not stated.
    cpu: str = ""

    def __post_init__(self) -> None:
        if not self.axi_bits_choices:
            object.__setattr__(self, "axi_bits_choices", (self.axi_bits,))

    def clock_verified(self, clock_mhz: float) -> bool:
        """True only if a VTA build is known to run correctly at this clock on this board."""
        return self.verified_clock_mhz is not None and float(clock_mhz) <= self.verified_clock_mhz + 1e-9

    def verified_clocks(self) -> tuple[float, ...]:
        """The board's PL clocks at or below its verified clock (empty if none is known)."""
        return tuple(c for c in self.pl_clocks_mhz if self.clock_verified(c))

    def clock_json(self) -> dict[str, Any]:
        """The board's clock evidence as stored in pareto.json (`codesign report` prints it)."""
        return {"name": self.name, "verified_clock_mhz": self.verified_clock_mhz,
                "verified_clock_note": self.verified_clock_note, "status": self.clock_status()}

    def clock_status(self) -> str:
        """One line for users: which clock is verified on this board and why (or that none is)."""
        if self.verified_clock_mhz is None:
            return f"{self.name}: no verified clock" + (f" ({self.verified_clock_note})"
                                                         if self.verified_clock_note else "")
        return (f"{self.name}: verified up to {self.verified_clock_mhz:g} MHz"
                + (f" ({self.verified_clock_note})" if self.verified_clock_note else ""))

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
        if data["axi_bits"] not in AXI_WIDTHS:
            raise ConfigError(f"{path}: axi_bits={data['axi_bits']!r}; allowed: "
                              + ", ".join(map(str, AXI_WIDTHS)))
        if "axi_bits_choices" in data:
            choices = data["axi_bits_choices"]
            if not choices or any(c not in AXI_WIDTHS or c > data["axi_bits"] for c in choices):
                raise ConfigError(f"{path}: axi_bits_choices={choices!r}: each must be one of "
                                  f"{', '.join(map(str, AXI_WIDTHS))} and <= axi_bits={data['axi_bits']}")
            kw["axi_bits_choices"] = tuple(sorted(set(choices)))
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

    @classmethod
    def for_target(cls, target: str) -> Board:
        """The shipped board whose VTA/TVM target name is `target` (a `-model=` such as `pynq`,
        `ultra96`), or the board of that name."""
        for path in sorted(BOARDS.glob("*.yaml")):
            board = cls.load(path)
            if target in (board.target, board.name):
                return board
        known = sorted(cls.load(p).target for p in BOARDS.glob("*.yaml"))
        raise ConfigError(f"no board has target {target!r}; known targets: {', '.join(known)}")
