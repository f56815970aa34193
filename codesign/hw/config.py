"""VTA hardware configuration: the `vta_config.json` keys plus clock and AXI width.

Every derived quantity (shapes, element sizes, SRAM depths, ISA field widths) is computed here
and nowhere else. Source for the formulas: docs/vta.md §1.2 (pkg_config.py), §1.4 (targets),
docs/vta.md §1.5 (naming), §1.3 and §2 (the limits the 128-bit instruction and 32-bit micro-op impose).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError
from codesign.fileio import read_document
from codesign.paths import HW_CONFIGS

# Per-target FPGA defaults (docs/vta.md §1.4): PL clock in MHz and AXI data width in bits.
TARGET_DEFAULTS: dict[str, dict[str, int]] = {
    "pynq": {"clock_mhz": 100, "axi_bits": 64},
    "sim": {"clock_mhz": 100, "axi_bits": 64},
    "tsim": {"clock_mhz": 100, "axi_bits": 64},
    "intelfocl": {"clock_mhz": 100, "axi_bits": 64},
    "de10nano": {"clock_mhz": 100, "axi_bits": 64},
    "ultra96": {"clock_mhz": 333, "axi_bits": 128},
    "zcu104": {"clock_mhz": 333, "axi_bits": 128},
    # Not an upstream VTA target: this project's name for the Kria KV260 (XCK26). Defaults follow
    # VTA's other Zynq UltraScale+ targets (ultra96/zcu104: 333 MHz, 128-bit AXI).
    "kv260": {"clock_mhz": 333, "axi_bits": 128},
}

VTA_JSON_KEYS = (
    "TARGET", "HW_VER", "LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH", "LOG_BATCH",
    "LOG_BLOCK", "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE",
)
_EXTRA_KEYS = ("LOG_BLOCK_IN", "LOG_BLOCK_OUT", "clock_mhz", "axi_bits")

# ISA constants (docs/vta.md §2.2, §2.3): fixed widths that do not depend on the config.
INSN_BITS = 128
UOP_BITS = 32
LOOP_ITER_BITS = 14
SRAM_BASE_BITS = 16

_NAME_RE = re.compile(
    r"^(?P<target>[a-z0-9]+)_(?P<batch>\d+)x(?P<block_in>\d+)(?:x(?P<block_out>\d+))?"
    r"_i(?P<inp>\d+)w(?P<wgt>\d+)a(?P<acc>\d+)"
    r"_(?P<uop>\d+)_(?P<ibuf>\d+)_(?P<wbuf>\d+)_(?P<abuf>\d+)"
    r"(?:_(?P<clock>\d+(?:\.\d+)?)MHz)?(?:_axi(?P<axi>\d+))?$"
)


def _log2_exact(value: int, what: str) -> int:
    if value <= 0 or value & (value - 1):
        raise ConfigError(f"{what}={value}: must be a positive power of two")
    return value.bit_length() - 1


@dataclass(frozen=True)
class HwConfig:
    """One VTA hardware design point. Field names are the `vta_config.json` keys."""

    TARGET: str = "pynq"
    # HW_VER only selects a bitstream download directory (docs/vta.md §1.1); it is not part of
    # the design, so two configs differing only in HW_VER compare equal.
    HW_VER: str = field(default="0.0.2", compare=False)
    LOG_INP_WIDTH: int = 3
    LOG_WGT_WIDTH: int = 3
    LOG_ACC_WIDTH: int = 5
    LOG_BATCH: int = 0
    LOG_BLOCK: int | None = None  # None with no LOG_BLOCK_IN/OUT means the default 4
    LOG_UOP_BUFF_SIZE: int = 15
    LOG_INP_BUFF_SIZE: int = 15
    LOG_WGT_BUFF_SIZE: int = 18
    LOG_ACC_BUFF_SIZE: int = 17
    # The older VTA form with a rectangular GEMM core; normalized so both are always set.
    LOG_BLOCK_IN: int | None = None
    LOG_BLOCK_OUT: int | None = None
    clock_mhz: float | None = None
    axi_bits: int | None = None
    source: str = field(default="", compare=False, repr=False)  # file it came from, for errors

    def __post_init__(self) -> None:
        where = f"{self.source}: " if self.source else ""
        if self.TARGET not in TARGET_DEFAULTS:
            raise ConfigError(
                f"{where}TARGET={self.TARGET!r} is not a known target; allowed: "
                + ", ".join(sorted(TARGET_DEFAULTS))
            )
        for key in ("LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH", "LOG_BATCH",
                    "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE",
                    "LOG_ACC_BUFF_SIZE"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{where}{key}={value!r}: must be a non-negative integer")
        bin_, bout = self.LOG_BLOCK_IN, self.LOG_BLOCK_OUT
        if bin_ is None and bout is None:
            bin_ = bout = 4 if self.LOG_BLOCK is None else self.LOG_BLOCK
        elif bin_ is None or bout is None:
            raise ConfigError(f"{where}LOG_BLOCK_IN and LOG_BLOCK_OUT must be given together")
        elif self.LOG_BLOCK is not None and not (self.LOG_BLOCK == bin_ == bout):
            raise ConfigError(
                f"{where}LOG_BLOCK={self.LOG_BLOCK} contradicts LOG_BLOCK_IN={bin_}, LOG_BLOCK_OUT={bout}"
            )
        for key, value in (("LOG_BLOCK_IN", bin_), ("LOG_BLOCK_OUT", bout)):
            if not isinstance(value, int) or value < 0:
                raise ConfigError(f"{where}{key}={value!r}: must be a non-negative integer")
        object.__setattr__(self, "LOG_BLOCK_IN", bin_)
        object.__setattr__(self, "LOG_BLOCK_OUT", bout)
        object.__setattr__(self, "LOG_BLOCK", bin_ if bin_ == bout else None)
        defaults = TARGET_DEFAULTS[self.TARGET]
        if self.clock_mhz is None:
            object.__setattr__(self, "clock_mhz", defaults["clock_mhz"])
        if self.axi_bits is None:
            object.__setattr__(self, "axi_bits", defaults["axi_bits"])
        if not (isinstance(self.clock_mhz, (int, float)) and self.clock_mhz > 0):
            raise ConfigError(f"{where}clock_mhz={self.clock_mhz!r}: must be a positive number")
        if float(self.clock_mhz).is_integer():
            object.__setattr__(self, "clock_mhz", int(self.clock_mhz))
        if self.axi_bits not in (32, 64, 128, 256, 512):
            raise ConfigError(f"{where}axi_bits={self.axi_bits!r}: allowed 32, 64, 128, 256, 512")
        self._validate(where)

    # -- validation ------------------------------------------------------------------------
    def _validate(self, where: str) -> None:
        def fail(key: str, msg: str) -> None:
            raise ConfigError(f"{where}{key}={getattr(self, key)}: {msg}")

        if self.LOG_INP_WIDTH != 3:
            fail("LOG_INP_WIDTH", "VTA's conv2d/dense flow needs 8-bit inputs (LOG_INP_WIDTH=3)")
        if self.LOG_WGT_WIDTH != 3:
            fail("LOG_WGT_WIDTH", "VTA's conv2d/dense flow needs 8-bit weights (LOG_WGT_WIDTH=3)")
        if self.LOG_ACC_WIDTH != 5:
            fail("LOG_ACC_WIDTH", "the simulator and runtime need 32-bit accumulators (LOG_ACC_WIDTH=5)")
        # Each buffer must hold at least one element.
        for key, depth_log in (
            ("LOG_UOP_BUFF_SIZE", self.log_uop_depth_raw),
            ("LOG_INP_BUFF_SIZE", self.log_inp_depth_raw),
            ("LOG_WGT_BUFF_SIZE", self.log_wgt_depth_raw),
            ("LOG_ACC_BUFF_SIZE", self.log_acc_depth_raw),
        ):
            if depth_log < 0:
                fail(key, "buffer smaller than one element")
            if depth_log > SRAM_BASE_BITS:
                fail(key, f"depth 2^{depth_log} exceeds the 16-bit sram_base field (max 2^16)")
        u, a, i, w = self.log_uop_depth, self.log_acc_depth, self.log_inp_depth, self.log_wgt_depth
        # GEMM/ALU word 0: opcode 3 + deps 4 + reset 1 + uop_bgn U + uop_end U+1 + 2 x 14 <= 64.
        if 3 + 4 + 1 + u + (u + 1) + 2 * LOOP_ITER_BITS > 64:
            fail("LOG_UOP_BUFF_SIZE", f"GEMM instruction word 0 overflows 64 bits (uop depth log {u} > 13; "
                 "LOG_UOP_BUFF_SIZE must be <= 15)")
        if 2 * a + 2 * i + 2 * w > 64:
            fail("LOG_ACC_BUFF_SIZE", f"GEMM instruction word 1 overflows: 2*({a}+{i}+{w}) > 64 "
                 "(reduce LOG_ACC/INP/WGT_BUFF_SIZE)")
        if 4 * a + 3 + 1 + 16 > 64:
            fail("LOG_ACC_BUFF_SIZE", f"ALU instruction word 1 overflows: acc depth log {a} > 11")
        if a + max(a, i) + w > UOP_BITS:
            fail("LOG_ACC_BUFF_SIZE", f"micro-op overflows 32 bits: acc {a} + max(acc {a}, inp {i}) + "
                 f"wgt {w} = {a + max(a, i) + w} (reduce LOG_ACC/INP/WGT_BUFF_SIZE)")

    # -- shapes and element sizes ----------------------------------------------------------
    @property
    def batch(self) -> int:
        return 1 << self.LOG_BATCH

    @property
    def block_in(self) -> int:
        return 1 << self.LOG_BLOCK_IN  # type: ignore[operator]

    @property
    def block_out(self) -> int:
        return 1 << self.LOG_BLOCK_OUT  # type: ignore[operator]

    @property
    def macs_per_cycle(self) -> int:
        return self.batch * self.block_in * self.block_out

    @property
    def inp_width(self) -> int:
        return 1 << self.LOG_INP_WIDTH

    @property
    def wgt_width(self) -> int:
        return 1 << self.LOG_WGT_WIDTH

    @property
    def acc_width(self) -> int:
        return 1 << self.LOG_ACC_WIDTH

    @property
    def out_width(self) -> int:
        return self.inp_width  # LOG_OUT_WIDTH = LOG_INP_WIDTH

    @property
    def inp_elem_bytes(self) -> int:
        return self.inp_width * self.batch * self.block_in // 8

    @property
    def wgt_elem_bytes(self) -> int:
        return self.wgt_width * self.block_out * self.block_in // 8

    @property
    def acc_elem_bytes(self) -> int:
        return self.acc_width * self.batch * self.block_out // 8

    @property
    def out_elem_bytes(self) -> int:
        return self.out_width * self.batch * self.block_out // 8

    uop_elem_bytes = UOP_BITS // 8
    insn_bytes = INSN_BITS // 8

    # -- buffer depths (elements); "raw" forms may be negative and are only for validation ---
    @property
    def log_uop_depth_raw(self) -> int:
        return self.LOG_UOP_BUFF_SIZE - 5 + 3

    @property
    def log_inp_depth_raw(self) -> int:
        return self.LOG_INP_BUFF_SIZE - self.LOG_BATCH - self.LOG_BLOCK_IN - self.LOG_INP_WIDTH + 3

    @property
    def log_wgt_depth_raw(self) -> int:
        return self.LOG_WGT_BUFF_SIZE - self.LOG_BLOCK_OUT - self.LOG_BLOCK_IN - self.LOG_WGT_WIDTH + 3

    @property
    def log_acc_depth_raw(self) -> int:
        return self.LOG_ACC_BUFF_SIZE - self.LOG_BATCH - self.LOG_BLOCK_OUT - self.LOG_ACC_WIDTH + 3

    log_uop_depth = log_uop_depth_raw
    log_inp_depth = log_inp_depth_raw
    log_wgt_depth = log_wgt_depth_raw
    log_acc_depth = log_acc_depth_raw

    @property
    def uop_depth(self) -> int:
        return 1 << self.log_uop_depth

    @property
    def inp_depth(self) -> int:
        return 1 << self.log_inp_depth

    @property
    def wgt_depth(self) -> int:
        return 1 << self.log_wgt_depth

    @property
    def acc_depth(self) -> int:
        return 1 << self.log_acc_depth

    @property
    def out_depth(self) -> int:
        return self.acc_depth  # OUT buffer has the ACC buffer's depth (docs/vta.md §1.2 table)

    # -- ISA field widths (docs/vta.md §2.4, §2.5, §2.7) ---------------------------------------
    @property
    def uop_dst_bits(self) -> int:
        return self.log_acc_depth

    @property
    def uop_src_bits(self) -> int:
        return max(self.log_acc_depth, self.log_inp_depth)

    @property
    def uop_wgt_bits(self) -> int:
        return self.log_wgt_depth

    # -- clock and bus -----------------------------------------------------------------------
    @property
    def clock_hz(self) -> float:
        return float(self.clock_mhz) * 1e6  # type: ignore[arg-type]

    @property
    def bus_bytes(self) -> int:
        return self.axi_bits // 8  # type: ignore[operator]

    # -- naming (docs/vta.md §1.5) -------------------------------------------------------------
    @property
    def bitstream(self) -> str:
        shape = (f"{self.batch}x{self.block_in}" if self.LOG_BLOCK is not None
                 else f"{self.batch}x{self.block_in}x{self.block_out}")
        return (f"{shape}_i{self.inp_width}w{self.wgt_width}a{self.acc_width}_"
                f"{self.LOG_UOP_BUFF_SIZE}_{self.LOG_INP_BUFF_SIZE}_"
                f"{self.LOG_WGT_BUFF_SIZE}_{self.LOG_ACC_BUFF_SIZE}")

    @property
    def name(self) -> str:
        """VTA's MODEL string; a non-default clock or AXI width is appended so names stay unique."""
        defaults = TARGET_DEFAULTS[self.TARGET]
        name = f"{self.TARGET}_{self.bitstream}"
        if self.clock_mhz != defaults["clock_mhz"]:
            name += f"_{self.clock_mhz:g}MHz"
        if self.axi_bits != defaults["axi_bits"]:
            name += f"_axi{self.axi_bits}"
        return name

    @property
    def vta_model(self) -> str:
        """The AutoTVM `-model=` value: exactly VTA's TARGET_BITSTREAM, without our suffixes."""
        return f"{self.TARGET}_{self.bitstream}"

    def __str__(self) -> str:
        return self.name

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def from_name(cls, name: str) -> HwConfig:
        m = _NAME_RE.match(name.strip())
        if not m:
            raise ConfigError(
                f"hardware name {name!r} is not of the form TARGET_BATCHxBLOCK[xBLOCK_OUT]_i8w8a32_UOP_INP_WGT_ACC"
                "[_<MHz>MHz][_axi<bits>], e.g. pynq_1x16_i8w8a32_15_15_18_17"
            )
        g = m.groupdict()
        bin_ = _log2_exact(int(g["block_in"]), "BLOCK_IN")
        bout = _log2_exact(int(g["block_out"]), "BLOCK_OUT") if g["block_out"] else bin_
        kw: dict[str, Any] = dict(
            TARGET=g["target"],
            LOG_INP_WIDTH=_log2_exact(int(g["inp"]), "INP_WIDTH"),
            LOG_WGT_WIDTH=_log2_exact(int(g["wgt"]), "WGT_WIDTH"),
            LOG_ACC_WIDTH=_log2_exact(int(g["acc"]), "ACC_WIDTH"),
            LOG_BATCH=_log2_exact(int(g["batch"]), "BATCH"),
            LOG_BLOCK=None,
            LOG_BLOCK_IN=bin_,
            LOG_BLOCK_OUT=bout,
            LOG_UOP_BUFF_SIZE=int(g["uop"]),
            LOG_INP_BUFF_SIZE=int(g["ibuf"]),
            LOG_WGT_BUFF_SIZE=int(g["wbuf"]),
            LOG_ACC_BUFF_SIZE=int(g["abuf"]),
        )
        if g["clock"]:
            kw["clock_mhz"] = float(g["clock"])
        if g["axi"]:
            kw["axi_bits"] = int(g["axi"])
        return cls(**kw)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "") -> HwConfig:
        allowed = set(VTA_JSON_KEYS) | set(_EXTRA_KEYS) | {"HW_FREQ", "name"}
        where = f"{source}: " if source else ""
        if not isinstance(data, dict):
            raise ConfigError(f"{where}expected a mapping of vta_config keys, got {type(data).__name__}")
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ConfigError(f"{where}unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
        kw = {k: v for k, v in data.items() if k not in ("HW_FREQ", "name")}
        if "HW_FREQ" in data and "clock_mhz" not in data:  # legacy key (docs/vta.md §1.1)
            kw["clock_mhz"] = data["HW_FREQ"]
        if "name" in data and len(data) == 1:
            return replace(cls.from_name(data["name"]), source=source)
        return cls(**kw, source=source)

    @classmethod
    def from_vta_json(cls, path_or_dict: str | Path | dict[str, Any]) -> HwConfig:
        if isinstance(path_or_dict, dict):
            return cls.from_dict(path_or_dict)
        path = Path(path_or_dict)
        return cls.from_dict(read_document(path), source=str(path))

    @classmethod
    def load(cls, path: str | Path) -> HwConfig:
        """Load a YAML (or JSON) hardware config file from `hw_configs/`."""
        path = Path(path)
        return cls.from_dict(read_document(path) or {}, source=str(path))

    @classmethod
    def resolve(cls, spec: str | Path | HwConfig) -> HwConfig:
        """A config from a name, a short alias in `hw_configs/`, or a YAML/JSON path."""
        if isinstance(spec, HwConfig):
            return spec
        text = str(spec)
        path = Path(text)
        if path.suffix in (".yaml", ".yml", ".json") or path.exists():
            return cls.from_vta_json(path) if path.suffix == ".json" else cls.load(path)

        alias = HW_CONFIGS / f"{text}.yaml"
        if alias.exists():
            return cls.load(alias)
        if not _NAME_RE.match(text.strip()):  # neither a short name nor a full one: say both work
            short = ", ".join(sorted(p.stem for p in HW_CONFIGS.glob("*.yaml")))
            raise ConfigError(
                f"hardware name {text!r} is unknown: give a short name ({short}), a full name "
                "TARGET_BATCHxBLOCK[xBLOCK_OUT]_i8w8a32_UOP_INP_WGT_ACC[_<MHz>MHz][_axi<bits>] such as "
                "pynq_1x16_i8w8a32_15_15_18_17, or a YAML/JSON config file")
        return cls.from_name(text)

    # -- writers -----------------------------------------------------------------------------
    def to_vta_json(self) -> dict[str, Any]:
        """The `vta_config.json` dict; LOG_BLOCK_IN/OUT only when the core is rectangular."""
        out: dict[str, Any] = {k: getattr(self, k) for k in VTA_JSON_KEYS}
        if self.LOG_BLOCK is None:
            del out["LOG_BLOCK"]
            out["LOG_BLOCK_IN"] = self.LOG_BLOCK_IN
            out["LOG_BLOCK_OUT"] = self.LOG_BLOCK_OUT
        return out

    def to_dict(self) -> dict[str, Any]:
        """Everything, including clock and bus width (our YAML format)."""
        out = self.to_vta_json()
        out["clock_mhz"] = self.clock_mhz
        out["axi_bits"] = self.axi_bits
        return out

    def with_(self, **changes: Any) -> HwConfig:
        return replace(self, **changes)


def _check_fields_cover_keys() -> None:
    names = {f.name for f in fields(HwConfig)}
    assert set(VTA_JSON_KEYS) <= names, "HwConfig must carry every vta_config.json key"


_check_fields_cover_keys()
DEFAULT = HwConfig()
# Every value a LOG_* key can take in some valid config: the instruction fields cap each SRAM depth
# at 2^16 and each element is at most 2^(2 + LOG_BATCH + LOG_BLOCK) bytes, so 40 is beyond any.
LOG_KEY_RANGE = range(0, 41)
LOG_KEYS = ("LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH", "LOG_BATCH", "LOG_BLOCK", "LOG_BLOCK_IN",
            "LOG_BLOCK_OUT", "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE")


def why_invalid(**kw: Any) -> str | None:
    """The ConfigError `HwConfig(**kw)` raises (its message), or None for a valid config."""
    try:
        HwConfig(**kw)
    except ConfigError as exc:
        return str(exc)
    return None


def allowed_values(key: str, **others: Any) -> list[int]:
    """The values of LOG_* `key` that make a valid HwConfig with `others` (the other keys): the
    same checks as `HwConfig`, tried over `LOG_KEY_RANGE` (what error messages list)."""
    if key not in LOG_KEYS:
        raise ValueError(f"{key} is not one of {', '.join(LOG_KEYS)}")
    return [v for v in LOG_KEY_RANGE if why_invalid(**{**others, key: v}) is None]


__all__ = ["HwConfig", "DEFAULT", "LOG_KEYS", "LOG_KEY_RANGE", "TARGET_DEFAULTS", "VTA_JSON_KEYS", "allowed_values",
           "asdict", "why_invalid"]
