"""Fused VTA ops: a conv/dense on the GEMM core with its requantization epilogue — bias, residual
add of a second tensor, ReLU, shift, clip — in the same program, so an add that can ride on a
conv costs no separate pass over DRAM (docs/vta.md §7.8 says how each step runs on VTA).

Semantics are `codesign.network.reference`'s, bit for bit (int32 wrap-around as VTA's ACC)::

    y = clip((conv(x, w) + bias) >> shift, -128, 127)
    residual (la, lb, s):  y = clip(((y << la) + (r << lb) + 2^(s-1)) >> s, -128, 127)   [no round if s = 0]
    relu:                  y = max(y, 0)   (the last clip's lower bound)
    clip (lo, hi):         y = clip(y, lo, hi)   (a fused clamp, relu6: the last clip's bounds)

`fused_reason` says when VTA cannot express an epilogue on a hardware config (a one-liner);
`compile_fused` / `run_fused` build and simulate the program, `measure_fused` times its block
form (exactly `time_program` of the full program). Any schedule family's mapping takes the
epilogue (`codesign.mapping.fuse`); a schedule whose SRAM leaves no room for the bias blocks, the
residual tile or the identity block is `InvalidSchedule` (`fused_invalid` says so up front).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from codesign.errors import CodesignError, InvalidSchedule
from codesign.evaluate.compiler import _check_shift, place_regions
from codesign.evaluate.run import LayerRun, Measurement, _params, layer_io_bytes, resolve_config
from codesign.hw.config import HwConfig
from codesign.lower import Lowered, PairBlocks, lower_blocks, lower_program
from codesign.lower.uops import uop_plan
from codesign.mapping.legality import violations
from codesign.mapping.mapping import AluOp, Mapping, fuse
from codesign.network.reference import _round_shift, conv2d_int, linear_int
from codesign.schedule.families import mapping_for
from codesign.schedule.knobs import Config, KnobValue
from codesign.schedule.space import get_space
from codesign.schedule.support import unsupported_reason
from codesign.vta import timing
from codesign.vta.program import Program
from codesign.vta.simulator import simulate
from codesign.workloads.layers import Conv2D, Dense, Layer

MAX_SHIFT = 15      # SHR amounts the HLS ALU executes (docs/vta.md §3.4)
MAX_LB = 6          # 2^lb on the identity's diagonal must be an int8 weight
INT8 = (-128, 127)


@dataclass(frozen=True)
class Epilogue:
    """What follows the GEMM: `shift` right of the int32 sum (+ `bias`), clip to int8; then the
    residual add `(la, lb, s)` of network/quantized.py (y << la + r << lb, rounded >> s, clip);
    `relu` clips at 0 instead of -128; `clip` (lo, hi) gives the last clip's bounds instead (a
    fused clamp such as ReLU6: the same MIN and MAX with other immediates)."""

    shift: int
    bias: bool = False
    relu: bool = False
    residual: tuple[int, int, int] | None = None
    clip: tuple[int, int] | None = None

    @property
    def bounds(self) -> tuple[int, int]:
        """The last clip's (lo, hi)."""
        if self.clip is not None:
            return int(self.clip[0]), int(self.clip[1])
        return (0 if self.relu else INT8[0]), INT8[1]


def _why_epilogue(epi: Epilogue) -> str | None:
    if not isinstance(epi.shift, (int, np.integer)) or not 0 <= int(epi.shift) <= MAX_SHIFT:
        return f"shift={epi.shift!r}: VTA's ALU shifts by 0..{MAX_SHIFT} (the HLS ALU reads a signed 5-bit amount)"
    if epi.clip is not None and not INT8[0] <= epi.clip[0] <= epi.clip[1] <= INT8[1]:
        return f"clip {epi.clip!r}: bounds must be int8 values with lo <= hi"
    if epi.residual is not None:
        la, lb, s = epi.residual
        if not 0 <= la <= MAX_SHIFT or not 0 <= s <= MAX_SHIFT:
            return f"residual (la={la}, s={s}): VTA's ALU shifts by 0..{MAX_SHIFT}"
        if not 0 <= lb <= MAX_LB:
            return (f"residual lb={lb}: the residual is multiplied by a 2^lb identity weight, which "
                    f"must fit int8 (lb <= {MAX_LB})")
    return None


# The epilogues a layer's schedule must carry, most demanding first (shift amounts >= 1 so the
# rounding and shift steps are in the program; their values change no SRAM footprint): what
# `codesign run` asks a stored schedule to fit (`netrun.schedules`) and so what a sweep's
# records.jsonl must keep the fastest fitting records of (`sweep.state.kept_records`).
DEMANDS = (Epilogue(shift=1, bias=True, relu=True, residual=(1, 1, 1)), Epilogue(shift=1, bias=True, relu=True),
           Epilogue(shift=0))
# How many of a layer's fastest records that fit its epilogue `codesign run` times as the fused op
# to pick one (records time the plain layer; the epilogue's ALU passes change their ranking).
FUSED_CANDIDATES = 16


@lru_cache(maxsize=1024)
def demand(layer: Layer, hw: HwConfig) -> Epilogue:
    """The most demanding of `DEMANDS` VTA can run on `layer` with some template schedule: what a
    layer's one schedule must fit, as it serves ops with and without a residual add (`codesign run`
    and a sweep trial both choose it so)."""
    space = get_space(layer, hw)
    return next((epi for epi in DEMANDS if fused_reason(layer, epi, hw) is None and any(
        fused_invalid(layer, space.get(int(i)), hw, epi) is None for i in space.valid_indices())), DEMANDS[-1])


def fused_reason(layer: Layer, epi: Epilogue, hw: HwConfig) -> str | None:
    """Why VTA cannot run `layer` with `epi` on `hw` (one line), or None when it can (with some
    schedule; `fused_invalid` checks a given one)."""
    hw = HwConfig.resolve(hw)
    why = _why_epilogue(epi)
    if why is not None:
        return why
    if epi.residual is not None and hw.block_in != hw.block_out:
        return (f"residual add: the int8 residual reaches ACC only as INP blocks through an identity GEMM, "
                f"which needs BLOCK_IN == BLOCK_OUT ({hw.name}: {hw.block_in} != {hw.block_out})")
    if not isinstance(layer, (Conv2D, Dense)):
        return f"{type(layer).__name__}: fused epilogues are lowered for conv2d and dense layers"
    return unsupported_reason(layer, hw)


def epilogue_steps(epi: Epilogue) -> tuple[AluOp, ...]:
    """The mapping's epilogue steps of `epi` (docs/vta.md §7.8): [ADD bias], SHR, MIN, MAX, then
    for a residual [SHR -la], GEMM 2^lb·I, [ADD 2^(s-1), SHR s], MIN, MAX."""
    lo, hi = epi.bounds if epi.residual is None else INT8
    steps = [AluOp("add", 0, "bias")] if epi.bias else []
    if epi.shift:
        steps.append(AluOp("shr", int(epi.shift)))
    steps += [AluOp("min", hi), AluOp("max", lo)]
    if epi.residual is not None:
        la, lb, s = (int(v) for v in epi.residual)
        if la:
            steps.append(AluOp("shr", -la))  # SHR by a negative amount shifts left (docs/vta.md §3.4)
        steps.append(AluOp("gemm", lb, "residual"))
        if s:
            steps += [AluOp("add", 1 << (s - 1)), AluOp("shr", s)]
        lo, hi = epi.bounds
        steps += [AluOp("min", hi), AluOp("max", lo)]
    return tuple(steps)


def _checked(layer: Layer, hw: HwConfig, epi: Epilogue) -> None:
    why = fused_reason(layer, epi, hw)
    if why is not None:
        raise CodesignError(f"layer {layer.name} with {epi} cannot run on {hw.name}: {why}")


def fused_mapping(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, epi: Epilogue) -> Mapping:
    """The family's mapping of `config` with the fused epilogue (InvalidSchedule if it does not fit)."""
    hw = HwConfig.resolve(hw)
    _checked(layer, hw, epi)
    m = fuse(mapping_for(layer, config, hw, _check_shift(epi.shift)), epilogue_steps(epi))
    bad = violations(m, hw)
    if bad:
        raise InvalidSchedule(bad[0][1])
    if m.edges is not None:  # edge tiles keep every kernel cached: the bias kernels must fit too
        uop_plan(m, hw.uop_depth)
    return m


def fused_invalid(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, epi: Epilogue) -> str | None:
    """Why `config` cannot carry `epi` (its SRAM has no room for the fused operands), or None."""
    try:
        fused_mapping(layer, config, hw, epi)
    except InvalidSchedule as exc:
        return str(exc)
    return None


def _packed_bias(layer: Layer, hw: HwConfig, bias: np.ndarray) -> np.ndarray:
    """int32 (OUT,) -> ACC blocks (OUT/BLOCK_OUT, BATCH, BLOCK_OUT): every batch row holds it."""
    out = layer.output_shape()[1]
    b = np.asarray(bias)
    if b.shape != (out,) or not np.issubdtype(b.dtype, np.integer):
        raise CodesignError(f"bias of {layer.name}: expected an int32 array of shape ({out},), got "
                            f"{b.dtype} {b.shape}")
    blocks = b.astype(np.int32).reshape(out // hw.block_out, 1, hw.block_out)
    return np.ascontiguousarray(np.broadcast_to(blocks, (out // hw.block_out, hw.batch, hw.block_out)))


def _identity(hw: HwConfig, lb: int) -> np.ndarray:
    """The WGT block (BLOCK_OUT, BLOCK_IN) with 2^lb on its diagonal."""
    return (np.eye(hw.block_out, hw.block_in, dtype=np.int8) * np.int8(1 << lb)).astype(np.int8)


def compile_fused(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, epi: Epilogue,
                  x: np.ndarray | None = None, w: np.ndarray | None = None, bias: np.ndarray | None = None,
                  residual: np.ndarray | None = None, *, functional: bool = True) -> Program:
    """The fused program of `layer` under `config`, placed in DRAM with its packed tensors: x, r
    int8 NCHW (dense (N, IN) / (N, OUT)), w int8 OIHW / (OUT, IN), bias int32 (OUT,)."""
    hw = HwConfig.resolve(hw)
    m = fused_mapping(layer, config, hw, epi)
    comp: Lowered = lower_program(m, hw)
    if functional:
        for name, arr, need in (("bias", bias, epi.bias), ("residual", residual, epi.residual is not None)):
            if need and arr is None:
                raise CodesignError(f"{layer.name}: the epilogue has a {name} but no {name} array was given")
    data = {}
    if functional:
        data = {"data": None if x is None else layer.pack_data(np.asarray(x), hw),
                "weight": None if w is None else layer.pack_weight(np.asarray(w), hw)}
        if epi.bias:
            data["bias"] = _packed_bias(layer, hw, bias)
        if epi.residual is not None:
            r = np.asarray(residual)
            if not np.issubdtype(r.dtype, np.integer) or r.min(initial=0) < -128 or r.max(initial=0) > 127:
                raise CodesignError(f"residual of {layer.name}: expected int8 values, got {r.dtype}")
            data["residual"] = layer.pack_output(r.astype(np.int8), hw)
            data["identity"] = _identity(hw, int(epi.residual[1]))
    placed = place_regions(comp, hw, {k: v for k, v in data.items() if v is not None}, functional)
    meta = {"layer": layer.name, "template": layer.template, "knobs": dict(getattr(config, "knobs", config)),
            "shift": int(epi.shift), "epilogue": {"bias": epi.bias, "relu": epi.relu,
                                                  "residual": None if epi.residual is None else list(epi.residual),
                                                  **({} if epi.clip is None else {"clip": list(epi.clip)})},
            "index": getattr(config, "index", None), "n_pairs": m.n_pairs, "n_steps": m.n_steps,
            "n_threads": m.n_threads, **dict(m.info)}
    return Program(hw, comp.insns, comp.uops, placed, meta)


def fused_io_bytes(layer: Layer, epi: Epilogue) -> tuple[int, int]:
    """(input bytes, output bytes) of one fused call: the layer's, plus the int32 bias and the
    int8 residual read (the host terms of a calibration profile scale with them)."""
    n_in, n_out = layer_io_bytes(layer)
    return n_in + (4 * layer.output_shape()[1] if epi.bias else 0) + (n_out if epi.residual else 0), n_out


def run_fused(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, epi: Epilogue,
              x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, residual: np.ndarray | None = None,
              *, params: timing.TimingParams | None = None, check: bool = False) -> LayerRun:
    """Compile and simulate the fused op (`check`: the simulator's race check too)."""
    hw = HwConfig.resolve(hw)
    _checked(layer, hw, epi)
    config = resolve_config(layer, config, hw)
    params = _params(params)
    program = compile_fused(layer, config, hw, epi, x, w, bias, residual)
    res = simulate(program, params=params, check=check)
    output = layer.unpack_output(np.asarray(res.outputs["output"]).view(np.int8), hw)
    seconds = timing.predict_seconds(res.cycles, res.n_insns, hw, params, *fused_io_bytes(layer, epi))
    return LayerRun(output=output, cycles=int(res.cycles), seconds=float(seconds), counters=dict(res.counters),
                    busy=dict(res.busy), n_insns=int(res.n_insns), program=program, config=config)


def compile_fused_blocks(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, epi: Epilogue
                         ) -> PairBlocks:
    """The fused program as `PairBlocks` (the timing fast path)."""
    return lower_blocks(fused_mapping(layer, config, hw, epi), hw)


def measure_fused(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, epi: Epilogue,
                  params: timing.TimingParams | None = None) -> Measurement:
    """Timing-only `Measurement` of the fused op, from its block form (exactly the full
    program's `time_program`, tests/test_fused.py)."""
    params = _params(params)
    hw = HwConfig.resolve(hw)
    m = fused_mapping(layer, config, hw, epi)
    blocks = lower_blocks(m, hw)
    n_insns = blocks.n_insns
    res = timing.time_blocks(blocks.rows, blocks.block_start, blocks.pair_class, blocks.periods, hw, params)
    if res is None:  # more tokens in flight than the block kernel keeps
        insns = lower_program(m, hw).insns
        n_insns = int(insns.shape[0])
        res = timing.time_program(insns, hw, params)
    seconds = float(timing.predict_seconds(res.cycles, n_insns, hw, params, *fused_io_bytes(layer, epi)))
    return Measurement(seconds, int(res.cycles), {k: int(v) for k, v in res.busy.items()})


def reference_fused(layer: Layer, epi: Epilogue, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None,
                    residual: np.ndarray | None = None) -> np.ndarray:
    """The integer reference of the fused op, from codesign.network.reference's kernels."""
    b = bias if epi.bias else None
    if isinstance(layer, Dense):
        y = linear_int(np.asarray(x), np.asarray(w), b, int(epi.shift))
    else:
        s, p, d = layer.stride, layer.padding, layer.dilation
        y = conv2d_int(np.asarray(x), np.asarray(w), b, int(epi.shift), (s, s), (p, p), (d, d), layer.groups)
    if epi.residual is not None:
        la, lb, s = epi.residual
        total = (y.astype(np.int32) << np.int32(la)) + (np.asarray(residual).astype(np.int32) << np.int32(lb))
        y = np.clip(_round_shift(total, s), *INT8).astype(np.int8)
    lo, hi = epi.bounds
    return np.clip(y, lo, hi).astype(np.int8)


__all__ = ["DEMANDS", "Epilogue", "demand", "fused_reason", "fused_invalid", "epilogue_steps", "fused_mapping", "compile_fused",
           "compile_fused_blocks", "run_fused", "measure_fused", "reference_fused", "fused_io_bytes"]
