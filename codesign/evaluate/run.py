"""Run one layer under one schedule on the simulated VTA: the public `run_layer` and the fast
timing path `measure_seconds` that tuners call thousands of times.

Seconds always come from `timing.predict_seconds` (device cycles at the config clock plus the
explicit host overhead, docs/vta.md §4.7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from codesign.errors import CodesignError, InvalidSchedule
from codesign.evaluate.blocks import compile_blocks
from codesign.evaluate.compiler import compile_insns, compile_layer
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.knobs import Config, KnobValue, family_of
from codesign.schedule.support import unsupported_reason
from codesign.vta import timing
from codesign.vta.program import Program
from codesign.vta.simulator import simulate
from codesign.workloads import parse_layer
from codesign.workloads.layers import Layer

DEFAULT_SEED = 0


@dataclass(frozen=True)
class LayerRun:
    """Result of `run_layer`. `output` is int8 NCHW (dense: (N, OUT)), None in timing-only mode."""

    output: np.ndarray | None
    cycles: int
    seconds: float
    counters: dict[str, int]
    busy: dict[str, int]
    n_insns: int
    program: Program
    config: Config | None = None


@dataclass(frozen=True)
class Measurement:
    """Everything one timing-mode measurement yields, so no caller compiles or times a schedule a
    second time: seconds (device cycles at the clock plus the host model), device cycles and busy
    cycles per module (load/compute/store; power activity). A board runner also fills the device
    time and the host call time it measured (None from the model)."""

    seconds: float
    cycles: int | None
    busy: dict[str, int] = field(default_factory=dict, hash=False)
    device_s: float | None = None
    call_s: float | None = None


def resolve_config(layer: Layer, knobs: Config | dict[str, KnobValue], hw: HwConfig) -> Config:
    """The schedule `Config` for an AutoTVM knob dict (or a Config); raises CodesignError for an
    unsupported layer and InvalidSchedule (naming the failing rule) for an invalid config."""
    reason = unsupported_reason(layer, hw)
    if reason is not None:
        raise CodesignError(f"layer {layer.name} cannot run on {hw.name}: {reason}")
    space = get_space(layer, hw, family_of(knobs))
    config = knobs if hasattr(knobs, "knobs") else space.from_knobs(dict(knobs))
    why = space.why_invalid(config)
    if why is not None:
        raise InvalidSchedule(f"schedule {config.knobs} is invalid for {layer.name} on {hw.name}: {why}")
    return config


def random_inputs(layer: Layer, seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Fixed-seed int8 data and weights for `layer` (full int8 range)."""
    rng = np.random.default_rng(seed)
    data = rng.integers(-128, 128, size=layer.data_shape(), dtype=np.int8)
    weight = rng.integers(-128, 128, size=layer.weight_shape(), dtype=np.int8)
    return data, weight


@lru_cache(maxsize=1024)  # per measurement otherwise: ~10 us of NumPy on shape tuples
def layer_io_bytes(layer: Layer) -> tuple[int, int]:
    """(input bytes, output bytes) of one operator call: int8 data + weights in, int8 output out.
    The per-byte host terms of a calibration profile scale with these."""
    n_in = math.prod(layer.data_shape()) + math.prod(layer.weight_shape())
    return int(n_in), int(math.prod(layer.output_shape()))


def _params(params: timing.TimingParams | None) -> timing.TimingParams:
    return timing.default_params() if params is None else params


def run_layer(layer: Layer | str, knobs: Config | dict[str, KnobValue], hw: HwConfig | str, data: np.ndarray | None = None,
              weight: np.ndarray | None = None, *, shift: int = 8, functional: bool = True,
              params: timing.TimingParams | None = None) -> LayerRun:
    """Compile `layer` with the AutoTVM knob dict `knobs` for `hw` and simulate it.

    `data` int8 NCHW ((N, IN) for dense) and `weight` int8 OIHW ((OUT, IN)) default to fixed-seed
    random tensors. `functional=False` runs the timing model only (output None)."""
    hw = HwConfig.resolve(hw)
    layer = parse_layer(layer)
    config = resolve_config(layer, knobs, hw)
    params = _params(params)
    if functional and (data is None or weight is None):
        rd, rw = random_inputs(layer)
        data = rd if data is None else data
        weight = rw if weight is None else weight
    program = compile_layer(layer, config, hw, data=data, weight=weight, shift=shift,
                            functional=functional)
    res = simulate(program, functional=functional, params=params)
    output = None
    if functional:
        packed = np.asarray(res.outputs["output"]).view(np.int8)
        output = layer.unpack_output(packed, hw)
    seconds = timing.predict_seconds(res.cycles, res.n_insns, hw, params, *layer_io_bytes(layer))
    return LayerRun(output=output, cycles=int(res.cycles), seconds=float(seconds),
                    counters=dict(res.counters), busy=dict(res.busy), n_insns=int(res.n_insns),
                    program=program, config=config)


def measure(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, params: timing.TimingParams | None = None) -> Measurement:
    """`Measurement` of `config` (a Config or knob dict) in timing-only mode: the cycles and busy
    cycles of the instruction-level model (`time_program` on `compile_insns`, the same as
    `run_layer(..., functional=False)`), exactly, computed from one assembled pair per class of
    identical pairs (`compile_blocks` + `time_blocks`). The caller is responsible for passing a
    valid config (tuners draw from `ScheduleSpace.valid_indices()`); invalid ones raise
    InvalidSchedule naming the validity rule."""
    seconds, res = _timed(layer, config, hw, params)
    return Measurement(seconds, int(res.cycles), {k: int(v) for k, v in res.busy.items()})


def _timed(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, params: timing.TimingParams | None
           ) -> tuple[float, timing.TimingResult]:
    """(seconds, the cycle model's result) of `measure`."""
    params = _params(params)
    hw = HwConfig.resolve(hw)
    blocks = compile_blocks(layer, config, hw, borrow=True)  # timed at once: its rows need no copy
    n_insns = blocks.n_insns
    res = timing.time_blocks(blocks.rows, blocks.block_start, blocks.pair_class, blocks.periods, hw, params)
    if res is None:  # more tokens in flight than the block kernel keeps
        insns = compile_insns(layer, config, hw).insns
        n_insns = int(insns.shape[0])
        res = timing.time_program(insns, hw, params)
    return float(timing.predict_seconds(res.cycles, n_insns, hw, params, *layer_io_bytes(layer))), res


def measure_seconds(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig,
                    params: timing.TimingParams | None = None) -> tuple[float, int]:
    """(seconds, cycles) of `measure` (calibration and the exhaustive table need no more: no
    `Measurement` nor busy cycles built)."""
    seconds, res = _timed(layer, config, hw, params)
    return seconds, int(res.cycles)


__all__ = ["LayerRun", "Measurement", "run_layer", "measure", "measure_seconds", "resolve_config", "random_inputs", "layer_io_bytes"]
