"""The PYNQ driver for VTA: runs a compiled `Program` on a loaded VTA bitstream through the
register protocol of VTA's `pynq_driver.cc` (docs/vta.md §5), from Python over the pynq API.

What a run does (docs/vta.md §5.1-§5.3):
- one physically contiguous buffer (`pynq.allocate`) per DRAM region of the program, plus one for
  the instruction stream; input and micro-op data are copied in, outputs are zeroed;
- every LOAD/STORE `dram_base` is relocated from the program's own address space to the buffer's
  physical address divided by the element size of its memory type (the data base registers are
  all 0, so addresses are absolute), with the alignment checked;
- caches: buffers that are not coherent are flushed before the start and outputs invalidated
  after done;
- `device_run`: the start sequence of `VTADeviceRun` (docs/vta.md §5.2) and done polling with a timeout.

The pynq slice (`PynqApi`) hides the PYNQ 2.x / 3.x differences. An emulated pynq
(`codesign.board.emulated`) implements the same slice over the simulator for tests. This module
imports numpy and codesign's program/ISA code only (no numba, ray, torch, ...): it runs on boards.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import BoardError
from codesign.hw.config import HwConfig
from codesign.vta import isa
from codesign.vta.program import Program

# -- register map (docs/vta.md §5.1; VTA pkg_config.py for the pynq target) --------------------------------
FETCH_BASE, LOAD_BASE, COMPUTE_BASE, STORE_BASE = 0x43C00000, 0x43C01000, 0x43C02000, 0x43C03000
REG_RANGE = 0x1000  # VTA_IP_REG_MAP_RANGE
CTRL = 0x00
FETCH_INSN_COUNT, FETCH_INSN_ADDR = 0x10, 0x18
LOAD_INP_ADDR, LOAD_WGT_ADDR = 0x10, 0x18
COMPUTE_DONE_WR, COMPUTE_DONE_RD, COMPUTE_UOP_ADDR, COMPUTE_BIAS_ADDR = 0x10, 0x18, 0x20, 0x28
STORE_OUT_ADDR = 0x10
VTA_START, VTA_AUTORESTART, VTA_DONE = 0x1, 0x81, 0x1
MAX_XFER = 1 << 25  # VTA_MAX_XFER: largest single CMA allocation the driver makes (32 MiB)
PHYS_LIMIT = 1 << 32  # physical addresses are uint32 without USE_VTA64 (docs/vta.md §5.3)
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RunResult:
    """Output bytes per output region, device seconds from start to done (one per repeat, each
    the mean of `number` runs) and the seconds of the whole call (allocation, copies, runs)."""

    outputs: dict[str, np.ndarray]
    device_s: list[float]
    call_s: float
    n_insns: int
    buffers: dict[str, int] = field(default_factory=dict)  # region -> physical address used


class PynqApi:
    """The slice of the pynq package the driver uses: `allocate`, `MMIO`, `Bitstream`, plus the
    differences between PYNQ 2.x and 3.x (buffer address attribute, allocator reset)."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.version = str(getattr(module, "__version__", "unknown"))
        missing = [n for n in ("allocate", "MMIO", "Bitstream") if not hasattr(module, n)]
        if missing:
            raise BoardError(f"pynq {self.version} lacks {', '.join('pynq.' + n for n in missing)}; "
                             "the VTA driver needs PYNQ >= 2.5 (pynq.allocate, pynq.MMIO, pynq.Bitstream)")
        self.emulated = bool(getattr(module, "EMULATED", False))
        # Real boards time the device with the host clock; the emulated one has a device clock
        # that advances by the timing model's seconds (the physical boundary it emulates).
        self.clock = getattr(module, "device_clock", time.perf_counter)

    @classmethod
    def real(cls) -> PynqApi:
        try:
            import pynq  # heavy and board-only: present on PYNQ images, absent on hosts
        except ImportError:
            raise BoardError("pynq is not installed: run the board server on a PYNQ image, or pass "
                             "--emulate HW_CONFIG for the emulated board") from None
        return cls(pynq)

    def allocate(self, nbytes: int) -> Any:
        if nbytes > MAX_XFER:
            raise BoardError(f"buffer of {nbytes} bytes exceeds VTA's largest transfer buffer "
                             f"({MAX_XFER} bytes, VTA_MAX_XFER)")
        return self.module.allocate(shape=(max(int(nbytes), 1),), dtype=np.uint8)

    @staticmethod
    def phys_addr(buf: Any) -> int:
        # PYNQ 3.x: device_address; PYNQ 2.x: physical_address (2.7 has both).
        for attr in ("device_address", "physical_address"):
            value = getattr(buf, attr, None)
            if value is not None:
                return int(value)
        raise BoardError("pynq buffer has neither .device_address (PYNQ 3.x) nor .physical_address "
                         "(PYNQ 2.x); unsupported pynq version")

    @staticmethod
    def free(buf: Any) -> None:
        for attr in ("freebuffer", "close"):  # 2.x: freebuffer(); 3.x: both
            fn = getattr(buf, attr, None)
            if fn is not None:
                fn()
                return

    @staticmethod
    def coherent(buf: Any) -> bool:
        # Buffers of old PYNQ versions do not say: treat them as cached (flush to be safe).
        return bool(getattr(buf, "coherent", False))

    def mmio(self, base: int) -> Any:
        return self.module.MMIO(base, REG_RANGE)

    def download(self, path: str | Path) -> None:
        """Program the FPGA. PYNQ 2.x must reset its CMA allocator first (VTA's rpc_server did
        `xlnk.Xlnk().xlnk_reset()`); PYNQ 3.x has no Xlnk."""
        xlnk = getattr(self.module, "Xlnk", None)
        if xlnk is not None:
            xlnk().xlnk_reset()
        self.module.Bitstream(str(path)).download()

    def fault(self) -> str | None:
        """What the (emulated) device reports about a hang; real boards cannot say."""
        fn = getattr(self.module, "device_fault", None)
        return fn() if fn is not None else None


def relocate(insns: np.ndarray, program: Program, phys: dict[str, int]) -> np.ndarray:
    """A copy of `insns` whose LOAD/STORE `dram_base` fields point at the physical buffers:
    byte = dram_base * elem_bytes(memory type) must lie in one region r; the new field is
    (phys[r] + byte - r.addr) / elem_bytes, which must be exact and fit 32 bits."""
    hw = program.hw
    out = np.array(insns, dtype=np.int64, copy=True)
    col = isa.COL
    ops = out[:, col["opcode"]]
    rows = np.nonzero(((ops == isa.OP_LOAD) | (ops == isa.OP_STORE))
                      & (out[:, col["y_size"]] * out[:, col["x_size"]] > 0))[0]
    regions = sorted((r for r in program.regions if r.nbytes > 0), key=lambda r: r.addr)
    starts = np.array([r.addr for r in regions], dtype=np.int64)
    eb = isa.elem_bytes(hw)
    for i in rows:
        mem = int(out[i, col["memory_type"]])
        size = eb.get(mem)
        what = f"instruction {i} ({isa.OPCODE_NAMES[int(ops[i])]} {isa.MEM_NAMES.get(mem, mem)})"
        if size is None:
            raise BoardError(f"{what}: unknown memory type {mem}")
        byte = int(out[i, col["dram_base"]]) * size
        k = int(np.searchsorted(starts, byte, side="right")) - 1
        if k < 0 or byte >= regions[k].end:
            raise BoardError(f"{what}: DRAM address {byte:#x} is outside every region of the program")
        region = regions[k]
        new_byte = phys[region.name] + byte - region.addr
        if new_byte % size:
            raise BoardError(f"{what}: physical address {new_byte:#x} of region {region.name!r} is not "
                             f"aligned to its {size}-byte elements")
        if new_byte // size >= PHYS_LIMIT:
            raise BoardError(f"{what}: physical address {new_byte:#x} does not fit the 32-bit dram_base field")
        out[i, col["dram_base"]] = new_byte // size
    return out


INSNS = "\0insns"  # the instruction buffer's key among a loaded program's buffers (no region has it)


@dataclass
class Resident:
    """A program kept in the board's contiguous buffers between runs (`VTADriver.load`): its
    constant regions (weights, bias, micro-ops) and relocated instructions are copied and flushed
    once; each run writes only the named input regions and reads the outputs."""

    program: Program
    bufs: dict[str, Any]
    insn_phys: int
    nbytes: int


def resident_bytes(program: Program) -> int:
    """Bytes of contiguous memory `VTADriver.load` takes for `program` (regions + instructions)."""
    return sum(max(r.nbytes, 1) for r in program.regions) + program.n_insns * isa.INSN_BYTES


class VTADriver:
    """Runs programs on the VTA bitstream the FPGA holds. One instance per process (it maps the
    register windows once)."""

    def __init__(self, api: PynqApi, poll_sleep_s: float = 1e-6) -> None:
        self.api = api
        self.poll_sleep_s = poll_sleep_s
        self._regs: tuple[Any, Any, Any, Any] | None = None

    def _mmio(self) -> tuple[Any, Any, Any, Any]:
        if self._regs is None:
            self._regs = tuple(self.api.mmio(b) for b in (FETCH_BASE, LOAD_BASE, COMPUTE_BASE, STORE_BASE))
        return self._regs

    def program_bitstream(self, path: str | Path) -> None:
        self._regs = None  # a new bitstream: map the windows again
        self.api.download(path)

    def device_run(self, insn_phys: int, insn_count: int, timeout_s: float) -> float:
        """`VTADeviceRun` (docs/vta.md §5.2): returns device seconds from start to done; raises BoardError on
        timeout (the device never signalled done)."""
        fetch, load, compute, store = self._mmio()
        fetch.write(FETCH_INSN_COUNT, insn_count)
        fetch.write(FETCH_INSN_ADDR, insn_phys)
        for mmio, off in ((load, LOAD_INP_ADDR), (load, LOAD_WGT_ADDR), (compute, COMPUTE_UOP_ADDR),
                          (compute, COMPUTE_BIAS_ADDR), (store, STORE_OUT_ADDR)):
            mmio.write(off, 0)  # data bases 0: dram_base fields are absolute (docs/vta.md §5.1)
        t0 = self.api.clock()
        fetch.write(CTRL, VTA_START)
        load.write(CTRL, VTA_AUTORESTART)
        compute.write(CTRL, VTA_AUTORESTART)
        store.write(CTRL, VTA_AUTORESTART)
        # "allow device to respond": done still reads 1 from the previous run for a moment (docs/vta.md §5.2).
        time.sleep(1e-6)
        deadline = time.perf_counter() + timeout_s
        while compute.read(COMPUTE_DONE_RD) != VTA_DONE:
            if time.perf_counter() > deadline:
                fault = self.api.fault()
                raise BoardError(f"device did not signal done within {timeout_s:g} s"
                                 + (f" ({fault})" if fault else " (board hang: reprogram the bitstream)"))
            if self.poll_sleep_s:
                time.sleep(self.poll_sleep_s)
            else:
                os.sched_yield()
        return float(self.api.clock() - t0)

    def run(self, program: Program, number: int = 1, repeat: int = 1,
            timeout_s: float = DEFAULT_TIMEOUT_S) -> RunResult:
        if number < 1 or repeat < 1:
            raise BoardError(f"number={number}, repeat={repeat}: both must be >= 1")
        start = time.perf_counter()
        res = self.load(program)
        try:
            device: list[float] = []
            for _ in range(repeat):
                total = 0.0
                for _ in range(number):
                    total += self.device_run(res.insn_phys, program.n_insns, timeout_s)
                device.append(total / number)
            outputs = self._outputs(res)
            phys = {name: self.api.phys_addr(b) for name, b in res.bufs.items() if name != INSNS}
        finally:
            self.unload(res)
        return RunResult(outputs, device, time.perf_counter() - start, program.n_insns, phys)

    def load(self, program: Program) -> Resident:
        api, bufs = self.api, {}
        try:
            for r in program.regions:
                buf = bufs[r.name] = api.allocate(r.nbytes)
                if r.data is not None:
                    buf[:r.nbytes] = r.data
                else:
                    buf[:] = 0
            phys = {name: api.phys_addr(b) for name, b in bufs.items()}
            code = np.frombuffer(isa.encode_insns(relocate(program.insns, program, phys), program.hw), dtype=np.uint8)
            ibuf = bufs[INSNS] = api.allocate(code.size)
            ibuf[:code.size] = code
            insn_phys = api.phys_addr(ibuf)
            if insn_phys % isa.INSN_BYTES:
                raise BoardError(f"instruction buffer at {insn_phys:#x} is not {isa.INSN_BYTES}-byte aligned")
            for buf in bufs.values():
                if not api.coherent(buf):
                    buf.flush()
        except BaseException:
            for buf in bufs.values():
                api.free(buf)
            raise
        return Resident(program, bufs, insn_phys, resident_bytes(program))

    def run_resident(self, res: Resident, inputs: dict[str, np.ndarray],
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[dict[str, np.ndarray], float]:
        """Write `inputs` (region name -> bytes) into a resident program's buffers, run it once ->
        (output bytes per output region, device seconds)."""
        api = self.api
        for name, data in inputs.items():
            buf = res.bufs[name]
            buf[:] = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
            if not api.coherent(buf):
                buf.flush()
        outs = res.program.regions_with_role("output")
        for r in outs:  # the simulator starts every output at zero: so does each run here
            buf = res.bufs[r.name]
            buf[:] = 0
            if not api.coherent(buf):
                buf.flush()
        device_s = self.device_run(res.insn_phys, res.program.n_insns, timeout_s)
        return self._outputs(res), device_s

    def _outputs(self, res: Resident) -> dict[str, np.ndarray]:
        """The output regions' bytes after a run (invalidated first where not coherent)."""
        outputs = {}
        for r in res.program.regions_with_role("output"):
            buf = res.bufs[r.name]
            if not self.api.coherent(buf):
                buf.invalidate()
            outputs[r.name] = np.array(buf[:r.nbytes], dtype=np.uint8)
        return outputs

    def unload(self, res: Resident) -> None:
        for buf in res.bufs.values():
            self.api.free(buf)
        res.bufs.clear()


def check_hw(program: Program, loaded: HwConfig | str | None) -> None:
    """Refuse a program compiled for another config than the loaded bitstream's."""
    name = loaded if isinstance(loaded, str) or loaded is None else loaded.name
    if name is None:
        raise BoardError("no VTA bitstream is loaded on this board: program one first "
                         "(--bitstream FILE)")
    if program.hw.name != name:
        raise BoardError(f"program is compiled for {program.hw.name}, but the board runs {name}; "
                         "program that config's bitstream first")


__all__ = ["PynqApi", "VTADriver", "Resident", "resident_bytes", "RunResult", "relocate", "check_hw", "MAX_XFER", "DEFAULT_TIMEOUT_S",
           "FETCH_BASE", "LOAD_BASE", "COMPUTE_BASE", "STORE_BASE"]
