"""An emulated PYNQ board: the slice of the pynq API the VTA driver uses, over this project's
simulator. For tests, CI and demos only, and only when asked for (`--emulate HW_CONFIG`).

Only the physical boundary is emulated; the driver, relocation, buffers and RPC above it are the
real code. So that their bugs fail tests, the emulation is strict:
- `allocate` hands out buffers at physical addresses inside one emulated physical memory (from
  `PHYS_BASE`, page-aligned), far from the program's own addresses. Buffers are NOT coherent: the
  array the host writes is its cache; `flush()` copies it to physical memory and `invalidate()`
  copies physical memory back, so a missing flush or invalidate shows stale data.
- `MMIO` windows at VTA's register map (docs/vta.md §5.1). Writing ap_start to the fetch control register
  arms the fetch module; when load, compute and store are also started (0x81), the device reads
  `insn_count` instructions from physical memory at the fetch address register, executes them on
  the functional simulator over physical memory (micro-ops and data come from DRAM through the
  relocated `dram_base` fields), and the compute done register (read offset 0x18) reads 1.
  Non-zero data base registers, an instruction address outside memory or a faulting program
  leave done at 0 -- a hang, as on the board -- and `device_fault()` says why.
- Device time comes from the timing model: `device_clock()` advances by cycles / clock.
- `Bitstream(path).download()` parses the .bit header and refuses one for another FPGA die.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from codesign.bitstream.bitfile import die_of, read_header
from codesign.board import driver
from codesign.errors import BoardError, CodesignError
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.vta import isa, timing
from codesign.vta.program import DramRegion, Program
from codesign.vta.simulator import Machine

PHYS_BASE = 0x1800_0000  # where PYNQ-Z1's CMA pool typically starts; far from program addresses
PAGE = 4096


class EmulatedBuffer(np.ndarray):
    """A pynq buffer: the ndarray is the host's (cached) view of `device_address`."""

    device_address: int
    coherent: bool
    _mem: PhysicalMemory

    def flush(self) -> None:
        self._mem.write(self.device_address, np.asarray(self).view(np.uint8).reshape(-1))

    def invalidate(self) -> None:
        data = self._mem.read(self.device_address, self.nbytes)
        np.asarray(self).view(np.uint8).reshape(-1)[:] = data

    def freebuffer(self) -> None:
        self._mem.free(self.device_address)

    close = freebuffer


class PhysicalMemory:
    """Emulated DDR: a bump allocator of page-aligned buffers over one growing byte array."""

    def __init__(self, base: int = PHYS_BASE) -> None:
        self.base = base
        self.data = np.zeros(1 << 20, dtype=np.uint8)  # offset 0 = physical address `base`
        self.next = 0
        self.live: dict[int, int] = {}  # physical address -> nbytes

    def alloc(self, nbytes: int) -> int:
        addr = self.base + self.next
        self.next += -(-max(nbytes, 1) // PAGE) * PAGE
        if self.next > self.data.size:
            grown = np.zeros(max(self.next, 2 * self.data.size), dtype=np.uint8)
            grown[:self.data.size] = self.data
            self.data = grown
        self.data[addr - self.base:addr - self.base + nbytes] = 0xA5  # stale garbage, not zeros
        self.live[addr] = nbytes
        return addr

    def free(self, addr: int) -> None:
        self.live.pop(addr, None)
        if not self.live:
            self.next = 0  # everything freed: start over (keeps the memory small)

    def contains(self, addr: int, nbytes: int) -> bool:
        return any(a <= addr and addr + nbytes <= a + n for a, n in self.live.items())

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        off = addr - self.base
        return self.data[off:off + nbytes].copy()

    def write(self, addr: int, data: np.ndarray) -> None:
        off = addr - self.base
        self.data[off:off + data.size] = data


class EmulatedVTA:
    """The VTA accelerator behind the register windows."""

    def __init__(self, hw: HwConfig, mem: PhysicalMemory, params: Any = None) -> None:
        self.hw = hw
        self.mem = mem
        self.params = params
        self.regs: dict[int, int] = {}
        self.clock_s = 0.0
        self.fault: str | None = None
        self.runs = 0
        self.machine = Machine(hw)
        self.lock = threading.Lock()

    def reset(self) -> None:
        self.regs.clear()
        self.fault = None
        self.machine = Machine(self.hw)

    def read(self, addr: int) -> int:
        return self.regs.get(addr, 0)

    def write(self, addr: int, value: int) -> None:
        with self.lock:
            self.regs[addr] = int(value) & 0xFFFFFFFF
            if addr == driver.FETCH_BASE + driver.CTRL and value & 1:
                self.regs[driver.COMPUTE_BASE + driver.COMPUTE_DONE_RD] = 0
                self.fault = None
            started = all(self.regs.get(b + driver.CTRL, 0) & 1 for b in (
                driver.FETCH_BASE, driver.LOAD_BASE, driver.COMPUTE_BASE, driver.STORE_BASE))
            if started and self.regs.get(driver.FETCH_BASE + driver.CTRL, 0) & 1:
                self.regs[driver.FETCH_BASE + driver.CTRL] = 0  # ap_start clears once fetch runs
                self._execute()

    def _execute(self) -> None:
        bases = [(driver.LOAD_BASE, driver.LOAD_INP_ADDR), (driver.LOAD_BASE, driver.LOAD_WGT_ADDR),
                 (driver.COMPUTE_BASE, driver.COMPUTE_UOP_ADDR), (driver.COMPUTE_BASE, driver.COMPUTE_BIAS_ADDR),
                 (driver.STORE_BASE, driver.STORE_OUT_ADDR)]
        nonzero = [f"{b + o:#x}" for b, o in bases if self.regs.get(b + o, 0)]
        if nonzero:
            self.fault = f"data base registers {', '.join(nonzero)} are not 0"
            return
        count = self.regs.get(driver.FETCH_BASE + driver.FETCH_INSN_COUNT, 0)
        addr = self.regs.get(driver.FETCH_BASE + driver.FETCH_INSN_ADDR, 0)
        nbytes = count * isa.INSN_BYTES
        if count <= 0 or not self.mem.contains(addr, nbytes):
            self.fault = f"fetch of {count} instructions at {addr:#x} is outside allocated memory"
            return
        try:
            insns = isa.decode_insns(self.mem.read(addr, nbytes).tobytes(), self.hw)
            regions = [DramRegion(f"buf{a:#x}", a, n, "output", self.mem.read(a, n))
                       for a, n in sorted(self.mem.live.items())]
            outputs = self.machine.run(Program(self.hw, insns, regions=regions))
            for region in regions:
                self.mem.write(region.addr, outputs[region.name])
            cycles = timing.time_program(insns, self.hw, self.params).cycles
        except (CodesignError, ValueError) as exc:  # garbage instructions or a faulting program
            self.fault = f"device fault: {exc}"
            return
        self.clock_s += float(cycles) / self.hw.clock_hz
        self.runs += 1
        self.regs[driver.COMPUTE_BASE + driver.COMPUTE_DONE_RD] = driver.VTA_DONE


class EmulatedMMIO:
    def __init__(self, device: EmulatedVTA, base: int, length: int) -> None:
        self.device, self.base, self.length = device, base, length

    def _addr(self, offset: int) -> int:
        if not 0 <= offset < self.length or offset % 4:
            raise ValueError(f"MMIO offset {offset:#x} outside the {self.length:#x}-byte window")
        return self.base + offset

    def read(self, offset: int = 0, length: int = 4) -> int:
        return self.device.read(self._addr(offset))

    def write(self, offset: int, data: int) -> None:
        self.device.write(self._addr(offset), int(data))


class EmulatedPynq:
    """Stands in for the `pynq` module: `allocate`, `MMIO`, `Bitstream`, `__version__`."""

    EMULATED = True
    __version__ = "3.0.1"  # the API generation it implements (device_address, coherent)

    def __init__(self, hw: HwConfig | str, board: Board | str = "pynq-z1", params: Any = None) -> None:
        self.hw = HwConfig.resolve(hw)
        self.board = Board.named(board) if isinstance(board, str) else board
        self.mem = PhysicalMemory()
        self.device = EmulatedVTA(self.hw, self.mem, params)
        pynq = self

        class Bitstream:
            def __init__(self, path: str) -> None:
                self.path = path

            def download(self) -> None:
                header = read_header(self.path)
                if header.die != die_of(pynq.board.fpga_part):
                    raise BoardError(f"{self.path}: bitstream for {header.part} cannot configure this "
                                     f"{pynq.board.fpga_part}")
                pynq.device.reset()

        self.Bitstream = Bitstream

    def allocate(self, shape: Any, dtype: Any = np.uint8, **_: Any) -> EmulatedBuffer:
        dtype = np.dtype(dtype)
        n = int(np.prod(shape)) * dtype.itemsize
        addr = self.mem.alloc(n)
        buf = np.zeros(shape, dtype=dtype).view(EmulatedBuffer)
        buf.view(np.uint8).reshape(-1)[:] = self.mem.read(addr, n)  # the cache starts as memory does
        buf.device_address = addr
        buf.coherent = False
        buf._mem = self.mem
        return buf

    def MMIO(self, base: int, length: int = driver.REG_RANGE) -> EmulatedMMIO:  # noqa: N802 - pynq's name
        return EmulatedMMIO(self.device, base, length)

    def device_clock(self) -> float:
        return self.device.clock_s

    def device_fault(self) -> str | None:
        return self.device.fault


__all__ = ["EmulatedPynq", "PhysicalMemory", "EmulatedVTA", "PHYS_BASE"]
