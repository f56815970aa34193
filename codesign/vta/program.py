"""A VTA program: instruction matrix, micro-ops, and the DRAM regions it reads and writes.

Addresses are physical byte addresses as the device sees them (docs/vta.md §3.1: address 0 is
invalid; docs/vta.md §5.1: data base registers are 0, so `dram_base` fields are absolute addresses divided
by the element size of the memory type). The allocator starts at 4096 and aligns every region
to the element size of the memory type that addresses it, so `addr // elem_bytes` is exact.

`Program.to_bytes()` is one self-describing blob (what a board receives):

    magic b"VTAPROG\\x01" | u32 header length | header JSON (version, hw config, meta, counts,
    region table) | n_insns * 16 B instructions (isa.encode_insns) | n_uops * 4 B micro-ops |
    data of every region that has data, in table order | u32 CRC-32 of everything before it
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import CodesignError
from codesign.fileio import atomic_write_bytes, json_default_or_str
from codesign.hw.config import HwConfig
from codesign.vta import isa

MAGIC = b"VTAPROG\x01"
BLOB_VERSION = 1
ROLES = ("input", "output", "uop")
DRAM_START = 4096  # first page; physical address 0 is invalid (docs/vta.md §3.1)


@dataclass(eq=False)
class DramRegion:
    """A named DRAM buffer. `addr` is a physical byte address (> 0); `data` is np.uint8 of
    length `nbytes`, or None (outputs, or inputs supplied at simulation time)."""

    name: str
    addr: int
    nbytes: int
    role: str
    data: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise CodesignError(f"DRAM region {self.name!r}: role={self.role!r}; allowed: {', '.join(ROLES)}")
        if self.addr <= 0:
            raise CodesignError(f"DRAM region {self.name!r}: addr={self.addr}; physical address 0 is invalid")
        if self.nbytes < 0:
            raise CodesignError(f"DRAM region {self.name!r}: nbytes={self.nbytes} must be >= 0")
        if self.data is not None:
            self.data = check_region_data(self.name, self.data, self.nbytes)

    @property
    def end(self) -> int:
        return self.addr + self.nbytes

    def elem_base(self, elem_bytes: int) -> int:
        """`dram_base` field value for this region's start in units of `elem_bytes`."""
        if self.addr % elem_bytes:
            raise CodesignError(f"DRAM region {self.name!r} at {self.addr:#x} is not aligned to "
                                f"{elem_bytes}-byte elements")
        return self.addr // elem_bytes


def check_region_data(name: str, data: Any, nbytes: int) -> np.ndarray:
    """Region data as a flat np.uint8 array of exactly `nbytes` (other dtypes are reinterpreted
    byte-wise, e.g. an int8 tensor)."""
    arr = np.ascontiguousarray(np.asarray(data))
    arr = arr.reshape(-1).view(np.uint8)
    if arr.size != nbytes:
        raise CodesignError(f"DRAM region {name!r}: data has {arr.size} bytes, region has {nbytes}")
    return arr


class DramAllocator:
    """Bump allocator for physical DRAM addresses, starting at `start` (> 0)."""

    def __init__(self, start: int = DRAM_START) -> None:
        if start <= 0:
            raise CodesignError(f"DramAllocator start={start}: must be > 0 (address 0 is invalid)")
        self.next = start
        self.regions: list[DramRegion] = []

    def alloc(self, name: str, nbytes: int, align: int, role: str, data: Any = None) -> DramRegion:
        if align <= 0:
            raise CodesignError(f"DRAM region {name!r}: align={align} must be positive")
        if any(r.name == name for r in self.regions):
            raise CodesignError(f"DRAM region {name!r} allocated twice")
        addr = -(-self.next // align) * align
        region = DramRegion(name, addr, int(nbytes), role, data)
        self.next = addr + int(nbytes)
        self.regions.append(region)
        return region

    def alloc_uops(self, uops: np.ndarray, hw: HwConfig, name: str = "uop") -> DramRegion:
        """The micro-op region: data = encoded micro-ops; LOAD UOP's dram_base = addr / 4."""
        data = np.frombuffer(isa.encode_uops(uops, hw), dtype=np.uint8)
        return self.alloc(name, data.size, isa.UOP_BYTES, "uop", data)


@dataclass(eq=False)
class Program:
    """Instructions (int64 matrix, see `isa`), micro-ops ((m, 3) int64), DRAM regions, metadata."""

    hw: HwConfig
    insns: np.ndarray
    uops: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    regions: Sequence[DramRegion] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.insns = np.ascontiguousarray(np.asarray(self.insns, dtype=np.int64))
        if self.insns.ndim != 2 or self.insns.shape[1] != isa.N_FIELDS:
            raise CodesignError(f"Program.insns must have shape (n, {isa.N_FIELDS}), got {self.insns.shape}")
        self.uops = np.ascontiguousarray(np.asarray(self.uops, dtype=np.int64).reshape(-1, 3))
        self.regions = list(self.regions)
        names = [r.name for r in self.regions]
        if len(set(names)) != len(names):
            raise CodesignError(f"Program has duplicate DRAM region names: {names}")
        spans = sorted((r.addr, r.end, r.name) for r in self.regions)
        for (_, end0, n0), (a1, _, n1) in zip(spans, spans[1:]):
            if a1 < end0:
                raise CodesignError(f"DRAM regions {n0!r} and {n1!r} overlap")

    @property
    def n_insns(self) -> int:
        return int(self.insns.shape[0])

    @property
    def n_uops(self) -> int:
        return int(self.uops.shape[0])

    def region(self, name: str) -> DramRegion:
        for r in self.regions:
            if r.name == name:
                return r
        raise CodesignError(f"program has no DRAM region {name!r}; regions: "
                            + ", ".join(r.name for r in self.regions))

    def regions_with_role(self, role: str) -> list[DramRegion]:
        return [r for r in self.regions if r.role == role]

    # -- serialization -------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        header = {
            "version": BLOB_VERSION,
            "hw": self.hw.to_dict(),
            "meta": self.meta,
            "n_insns": self.n_insns,
            "n_uops": self.n_uops,
            "regions": [{"name": r.name, "addr": r.addr, "nbytes": r.nbytes, "role": r.role,
                         "has_data": r.data is not None} for r in self.regions],
        }
        head = json.dumps(header, default=json_default_or_str, sort_keys=True).encode()
        parts = [MAGIC, struct.pack("<I", len(head)), head,
                 isa.encode_insns(self.insns, self.hw), isa.encode_uops(self.uops, self.hw)]
        parts += [r.data.tobytes() for r in self.regions if r.data is not None]
        body = b"".join(parts)
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls, blob: bytes, source: str = "program") -> Program:
        def bad(msg: str) -> CodesignError:
            return CodesignError(f"{source}: not a valid VTA program blob ({msg})")

        blob = bytes(blob)
        if len(blob) < len(MAGIC) + 8 or not blob.startswith(MAGIC):
            raise bad("missing magic header b'VTAPROG\\x01'")
        body, (crc,) = blob[:-4], struct.unpack("<I", blob[-4:])
        if zlib.crc32(body) != crc:
            raise bad("checksum mismatch: the file is truncated or corrupt")
        pos = len(MAGIC)
        (hlen,) = struct.unpack_from("<I", body, pos)
        pos += 4
        try:
            header = json.loads(body[pos:pos + hlen])
            pos += hlen
            if header["version"] != BLOB_VERSION:
                raise bad(f"version {header['version']}, this reader understands {BLOB_VERSION}")
            hw = HwConfig.from_dict(header["hw"], source=source)
            n, m = int(header["n_insns"]), int(header["n_uops"])
            insns = isa.decode_insns(body[pos:pos + 16 * n], hw)
            pos += 16 * n
            uops = isa.decode_uops(body[pos:pos + 4 * m], hw)
            pos += 4 * m
            regions = []
            for r in header["regions"]:
                data = None
                if r["has_data"]:
                    data = np.frombuffer(body[pos:pos + r["nbytes"]], dtype=np.uint8).copy()
                    pos += r["nbytes"]
                regions.append(DramRegion(r["name"], int(r["addr"]), int(r["nbytes"]), r["role"], data))
        except CodesignError:
            raise
        except (KeyError, TypeError, ValueError, struct.error) as exc:
            raise bad(str(exc)) from None
        if pos != len(body):
            raise bad(f"{len(body) - pos} trailing bytes")
        return cls(hw, insns, uops, regions, header.get("meta", {}))

    @staticmethod
    def blob_parts(blob: bytes) -> list[tuple[int, int]]:
        """Byte ranges [start, end) that cut a `to_bytes()` blob, in order and without gaps, into
        its code (magic, header, instructions, micro-ops), each region's data and the CRC. What
        repeats between the programs of one layer (inputs, weights) is then a part of its own, so
        a transport can send it once (docs/board.md, the board protocol). Only the header is
        read; a blob whose header does not parse is one part (whoever decodes it refuses it)."""
        whole = [(0, len(blob))]
        try:
            if not blob.startswith(MAGIC):
                return whole
            (hlen,) = struct.unpack_from("<I", blob, len(MAGIC))
            pos = len(MAGIC) + 4
            header = json.loads(bytes(blob[pos:pos + hlen]))
            end = pos + hlen + 16 * int(header["n_insns"]) + 4 * int(header["n_uops"])
            cuts = [(0, end)]
            for r in header["regions"]:
                if r["has_data"]:
                    cuts.append((end, end + int(r["nbytes"])))
                    end += int(r["nbytes"])
        except (KeyError, TypeError, ValueError, struct.error):
            return whole
        if end + 4 != len(blob):
            return whole
        return cuts + [(end, end + 4)]

    def save(self, path: str | Path) -> Path:
        """Write atomically (temp file + os.replace)."""
        return atomic_write_bytes(path, self.to_bytes())

    @classmethod
    def load(cls, path: str | Path) -> Program:
        path = Path(path)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise CodesignError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise CodesignError(f"{path}: is a directory, expected a program file") from None
        return cls.from_bytes(blob, source=str(path))


class ProgramBuilder:
    """Hand-building programs one instruction at a time (tests, examples, benchmarks). The
    compiler builds instruction matrices vectorized instead.

    `load_uops(uops)` appends micro-ops to the program's micro-op table and emits the LOAD UOP
    for them; the "uop" region is allocated last, at `build()`, and those LOADs are patched."""

    def __init__(self, hw: HwConfig, start: int = DRAM_START) -> None:
        self.hw = hw
        self.alloc = DramAllocator(start)
        self.rows: list[dict[str, int]] = []
        self._uops: list[np.ndarray] = []
        self._n_uops = 0
        self._uop_loads: list[tuple[int, int]] = []  # (row, uop offset in the table)

    def input(self, name: str, data: Any, align: int) -> DramRegion:
        arr = np.ascontiguousarray(np.asarray(data)).reshape(-1).view(np.uint8)
        return self.alloc.alloc(name, arr.size, align, "input", arr)

    def output(self, name: str, nbytes: int, align: int) -> DramRegion:
        return self.alloc.alloc(name, nbytes, align, "output")

    def insn(self, **fields: int) -> int:
        unknown = sorted(set(fields) - set(isa.COL))
        if unknown:
            raise ValueError(f"unknown instruction field {unknown[0]!r}")
        self.rows.append({k: int(v) for k, v in fields.items()})
        return len(self.rows) - 1

    def load(self, mem: int, sram_base: int, dram_base: int, y_size: int, x_size: int,
             x_stride: int | None = None, pads: tuple[int, int, int, int] = (0, 0, 0, 0),
             **deps: int) -> int:
        """LOAD; `pads` = (y_pad_0, y_pad_1, x_pad_0, x_pad_1); x_stride defaults to x_size."""
        y0, y1, x0, x1 = pads
        return self.insn(opcode=isa.OP_LOAD, memory_type=mem, sram_base=sram_base, dram_base=dram_base,
                         y_size=y_size, x_size=x_size, x_stride=x_size if x_stride is None else x_stride,
                         y_pad_0=y0, y_pad_1=y1, x_pad_0=x0, x_pad_1=x1, **deps)

    def store(self, sram_base: int, dram_base: int, y_size: int, x_size: int,
              x_stride: int | None = None, **deps: int) -> int:
        return self.insn(opcode=isa.OP_STORE, memory_type=isa.MEM_OUT, sram_base=sram_base,
                         dram_base=dram_base, y_size=y_size, x_size=x_size,
                         x_stride=x_size if x_stride is None else x_stride, **deps)

    def load_uops(self, uops: Any, sram_base: int = 0, **deps: int) -> tuple[int, int]:
        """Append micro-ops and emit their LOAD UOP; returns (uop_bgn, uop_end) in SRAM."""
        u = np.asarray(uops, dtype=np.int64).reshape(-1, 3)
        row = self.load(isa.MEM_UOP, sram_base, 0, 1, len(u), **deps)
        self._uop_loads.append((row, self._n_uops))
        self._uops.append(u)
        self._n_uops += len(u)
        return sram_base, sram_base + len(u)

    def gemm(self, uop_bgn: int, uop_end: int, iter_out: int = 1, iter_in: int = 1,
             dst: tuple[int, int] = (0, 0), src: tuple[int, int] = (0, 0), wgt: tuple[int, int] = (0, 0),
             reset: bool = False, **deps: int) -> int:
        """GEMM; dst/src/wgt = (factor_out, factor_in)."""
        return self.insn(opcode=isa.OP_GEMM, reset_reg=int(reset), uop_bgn=uop_bgn, uop_end=uop_end,
                         iter_out=iter_out, iter_in=iter_in, dst_factor_out=dst[0], dst_factor_in=dst[1],
                         src_factor_out=src[0], src_factor_in=src[1], wgt_factor_out=wgt[0],
                         wgt_factor_in=wgt[1], **deps)

    def alu(self, alu_opcode: int, uop_bgn: int, uop_end: int, iter_out: int = 1, iter_in: int = 1,
            dst: tuple[int, int] = (0, 0), src: tuple[int, int] = (0, 0), imm: int | None = None,
            **deps: int) -> int:
        """ALU; with `imm` it uses the immediate, otherwise the ACC source operand."""
        return self.insn(opcode=isa.OP_ALU, alu_opcode=alu_opcode, uop_bgn=uop_bgn, uop_end=uop_end,
                         iter_out=iter_out, iter_in=iter_in, dst_factor_out=dst[0], dst_factor_in=dst[1],
                         src_factor_out=src[0], src_factor_in=src[1], use_imm=int(imm is not None),
                         imm=0 if imm is None else imm, **deps)

    def finish(self, **deps: int) -> int:
        return self.insn(opcode=isa.OP_FINISH, **deps)

    def build(self, meta: dict[str, Any] | None = None) -> Program:
        insns = isa.empty_insns(len(self.rows))
        for i, row in enumerate(self.rows):
            for k, v in row.items():
                insns[i, isa.COL[k]] = v
        uops = np.concatenate(self._uops) if self._uops else np.zeros((0, 3), dtype=np.int64)
        regions = list(self.alloc.regions)
        if len(uops):
            region = DramAllocator(self.alloc.next)
            region.regions = list(regions)
            uop_region = region.alloc_uops(uops, self.hw)
            regions = region.regions
            for row, offset in self._uop_loads:
                insns[row, isa.COL["dram_base"]] = uop_region.addr // isa.UOP_BYTES + offset
        return Program(self.hw, insns, uops, regions, dict(meta or {}))


__all__ = ["DramRegion", "DramAllocator", "Program", "ProgramBuilder",
           "check_region_data", "MAGIC", "DRAM_START", "ROLES"]
