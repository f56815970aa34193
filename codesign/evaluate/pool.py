"""Max and average pools on VTA's ALU (docs/vta.md §7.9; the instructions: `codesign.lower.pool`).

`Pool` is a quantized network's pool op in VTA terms; `pool_reason` says, in one line, when VTA
cannot run it (an average whose window is not a power of two needs a multiply, which VTA's ALU
lacks in hardware; non-square windows, dilation, ceil mode, channels not in whole blocks, rows too
wide for the SRAM). `run_pool` simulates it bit-exact against `codesign.network.reference`,
`measure_pool` times it (the full program: a pool is a few hundred instructions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codesign.errors import CodesignError
from codesign.evaluate.run import LayerRun, Measurement, _params
from codesign.hw.config import HwConfig
from codesign.lower.pool import MAX_PAD, PoolShape, lower_pool, pool_regions, tile_rows
from codesign.network.graph import Network, Op
from codesign.network.quantized import QParams
from codesign.network.reference import _int_op
from codesign.vta import timing
from codesign.vta.program import DramAllocator, Program
from codesign.vta.simulator import simulate
from codesign.workloads.layers import Conv2D

KINDS = ("max", "avg")


@dataclass(frozen=True)
class Pool:
    """A square pool of int8 NCHW data: `kind` "max" (pads are -128) or "avg" (window sum with
    zero pads, `* mul`, + 2^(shift-1), >> shift, clip; network/quantized.py)."""

    kind: str
    batch: int
    channels: int
    height: int
    width: int
    kernel: int
    stride: int
    padding: int = 0
    shift: int = 0
    mul: int = 1
    dilation: int = 1
    ceil_mode: bool = False

    @property
    def out_h(self) -> int:
        return (self.height + 2 * self.padding - self.kernel) // self.stride + 1

    @property
    def out_w(self) -> int:
        return (self.width + 2 * self.padding - self.kernel) // self.stride + 1

    @property
    def name(self) -> str:
        return (f"{self.kind}_pool_{self.batch}x{self.channels}x{self.height}x{self.width}_k{self.kernel}"
                f"_s{self.stride}_p{self.padding}")

    def _io(self) -> Conv2D:
        # the packed layouts of pool data/output are a conv's data/output layouts
        return Conv2D(self.batch, self.channels, self.height, self.width, self.channels, 1, 1, 1, 0)

    def _out(self) -> Conv2D:
        return Conv2D(self.batch, self.channels, self.out_h, self.out_w, self.channels, 1, 1, 1, 0)

    def as_op(self) -> Op:
        k, s, p = (self.kernel,) * 2, (self.stride,) * 2, (self.padding,) * 2
        attrs = ({"kernel": k, "stride": s, "padding": p, "dilation": (self.dilation,) * 2, "ceil_mode": self.ceil_mode}
                 if self.kind == "max" else {"kernel": k, "stride": s, "padding": p, "divisor": self.kernel ** 2})
        return Op(self.name, f"{self.kind}_pool2d", ("x",), (self.batch, self.channels, self.out_h, self.out_w), attrs)


def _square(v: object) -> int | None:
    vals = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    return int(vals[0]) if len(set(vals)) == 1 else None


def pool_of(net: Network, op: Op, params: QParams | None = None) -> tuple[Pool | None, str | None]:
    """(Pool, None) for a max/avg/adaptive-avg pool op of a (quantized) network, else (None, why)."""
    n, c, h, w = net.shape(op.inputs[0])
    p = params or QParams()
    a = op.attrs
    if op.kind == "adaptive_avg_pool2d":
        oh, ow = a["output_size"]
        if h % oh or w % ow or h // oh != w // ow:
            return None, f"adaptive avg pool {h}x{w} -> {oh}x{ow}: not one square window per output"
        k = h // oh
        return Pool("avg", n, c, h, w, k, k, 0, p.shift, p.mul), None
    if op.kind not in ("max_pool2d", "avg_pool2d"):
        return None, f"{op.kind} is not a pool"
    k, s, pad = _square(a["kernel"]), _square(a["stride"]), _square(a["padding"])
    if None in (k, s, pad):
        return None, f"non-square pool window/stride/padding {a['kernel']}/{a['stride']}/{a['padding']}"
    if op.kind == "max_pool2d":
        d = _square(a.get("dilation", 1))
        pool = Pool("max", n, c, h, w, k, s, pad, dilation=d or 0, ceil_mode=bool(a.get("ceil_mode")))
        if pool.ceil_mode and (pool.out_h, pool.out_w) == tuple(op.shape[2:]):
            pool = Pool("max", n, c, h, w, k, s, pad, dilation=d or 0)  # ceil mode that changes nothing
        return pool, None
    return Pool("avg", n, c, h, w, k, s, pad, p.shift, p.mul, ceil_mode=bool(a.get("ceil_mode"))), None


def _shape(pool: Pool, hw: HwConfig) -> PoolShape:
    return PoolShape(pool.kind, pool.batch // hw.batch, pool.channels // hw.block_in, pool.height, pool.width,
                     pool.kernel, pool.stride, pool.padding, pool.shift)


def pool_reason(pool: Pool, hw: HwConfig) -> str | None:
    """Why VTA cannot run `pool` on `hw` (one line), or None."""
    hw = HwConfig.resolve(hw)
    if pool.kind not in KINDS:
        return f"pool kind {pool.kind!r}: VTA runs {', '.join(KINDS)}"
    if pool.kind == "avg" and pool.mul != 1:
        return (f"average over a window of {pool.kernel}x{pool.kernel} = {pool.kernel ** 2} elements (not a power of "
                f"two) divides with a multiply by {pool.mul}; VTA's ALU has no MUL in hardware")
    if pool.dilation != 1 or pool.ceil_mode:
        return "dilated or ceil-mode pool windows are not lowered for VTA"
    if hw.block_in != hw.block_out:
        return (f"int8 data reaches ACC through an identity GEMM, which needs BLOCK_IN == BLOCK_OUT "
                f"({hw.name}: {hw.block_in} != {hw.block_out})")
    if pool.channels % hw.block_in or pool.batch % hw.batch:
        return (f"channels={pool.channels} / batch={pool.batch} are not multiples of BLOCK_IN={hw.block_in} / "
                f"BATCH={hw.batch}")
    if pool.padding > MAX_PAD or not 0 <= pool.shift <= 15:
        return f"padding {pool.padding} > {MAX_PAD} (DMA pad field) or shift {pool.shift} outside 0..15"
    p = _shape(pool, hw)
    if tile_rows(p, hw) is None:
        return (f"no tile of output rows fits {hw.name}: one output row reads {p.hin(1)}x{p.win} input pixels "
                f"(INP depth {hw.inp_depth}, ACC depth {hw.acc_depth})")
    return None


def _checked(pool: Pool, hw: HwConfig) -> PoolShape:
    why = pool_reason(pool, hw)
    if why is not None:
        raise CodesignError(f"{pool.name} cannot run on {hw.name}: {why}")
    return _shape(pool, hw)


def compile_pool(pool: Pool, hw: HwConfig, x: np.ndarray | None = None) -> Program:
    """The pool's program placed in DRAM (x int8 NCHW packed into "data" when given)."""
    hw = HwConfig.resolve(hw)
    p = _checked(pool, hw)
    prog = lower_pool(p, hw, *tile_rows(p, hw))
    data = {"identity": np.eye(hw.block_out, hw.block_in, dtype=np.int8)}
    if x is not None:
        data["data"] = pool._io().pack_data(np.asarray(x), hw)
    alloc = DramAllocator()
    for name, nbytes, align, role in pool_regions(p, hw):
        arr = data.get(name)
        alloc.alloc(name, nbytes, align, role, None if arr is None else np.ascontiguousarray(arr).view(np.uint8))
    alloc.alloc_uops(prog.uops, hw)
    meta = {"layer": pool.name, "template": f"{pool.kind}_pool", "rows": prog.rows, "slots": prog.slots}
    return Program(hw, prog.insns, prog.uops, alloc.regions, meta)


def _io_bytes(pool: Pool) -> tuple[int, int]:
    return pool.batch * pool.channels * pool.height * pool.width, pool.batch * pool.channels * pool.out_h * pool.out_w


def run_pool(pool: Pool, hw: HwConfig, x: np.ndarray, *, params: timing.TimingParams | None = None,
             check: bool = False) -> LayerRun:
    """Compile and simulate `pool` on `x` (int8 NCHW); output int8 NCHW."""
    hw = HwConfig.resolve(hw)
    params = _params(params)
    program = compile_pool(pool, hw, x)
    res = simulate(program, params=params, check=check)
    output = pool._out().unpack_output(np.asarray(res.outputs["output"]).view(np.int8), hw)
    seconds = timing.predict_seconds(res.cycles, res.n_insns, hw, params, *_io_bytes(pool))
    return LayerRun(output=output, cycles=int(res.cycles), seconds=float(seconds), counters=dict(res.counters),
                    busy=dict(res.busy), n_insns=int(res.n_insns), program=program)


def measure_pool(pool: Pool, hw: HwConfig, params: timing.TimingParams | None = None) -> Measurement:
    """Timing-only `Measurement` of `pool` (`time_program` of its program)."""
    hw = HwConfig.resolve(hw)
    params = _params(params)
    p = _checked(pool, hw)
    insns = lower_pool(p, hw, *tile_rows(p, hw)).insns
    res = timing.time_program(insns, hw, params)
    seconds = float(timing.predict_seconds(res.cycles, int(insns.shape[0]), hw, params, *_io_bytes(pool)))
    return Measurement(seconds, int(res.cycles), {k: int(v) for k, v in res.busy.items()})


def reference_pool(pool: Pool, x: np.ndarray) -> np.ndarray:
    """codesign.network.reference's integer pool on `x`."""
    return _int_op(pool.as_op(), QParams(shift=pool.shift, mul=pool.mul), [np.asarray(x, dtype=np.int8)])


__all__ = ["Pool", "pool_of", "pool_reason", "compile_pool", "run_pool", "measure_pool", "reference_pool"]
