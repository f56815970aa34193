"""`run_layer` / `measure_seconds`: the public entry points."""

from __future__ import annotations

import numpy as np
import pytest

import codesign
from codesign.errors import CodesignError, ConfigError, InvalidSchedule
from codesign.evaluate.run import measure_seconds, random_inputs, run_layer
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.vta import timing
from codesign.workloads import Conv2D, Dense

HW = HwConfig()
WORKED = Conv2D(1, 256, 14, 14, 512, 3, 3, 2, 1)
KNOBS_203 = {"tile_b": [1, 1], "tile_h": [1, 7], "tile_w": [1, 7], "tile_ci": [16, 1],
             "tile_co": [2, 16], "oc_nthread": 2, "h_nthread": 1}


def test_run_layer_functional_matches_reference_and_reports_seconds():
    layer = Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1)
    space = get_space(layer, HW)
    knobs = space.get(int(space.valid_indices()[-1])).knobs
    data, weight = random_inputs(layer, seed=11)
    run = codesign.run_layer(layer, knobs, HW, data, weight)
    assert run.output.dtype == np.int8 and run.output.shape == layer.output_shape()
    assert np.array_equal(run.output, layer.reference(data, weight))
    params = timing.default_params()
    # run.seconds also carries the per-byte host terms (the default's are ~0): equal to rounding
    assert run.seconds == pytest.approx(timing.predict_seconds(run.cycles, run.n_insns, HW, params), rel=1e-9)
    assert run.n_insns == run.program.n_insns and run.cycles > 0
    assert set(run.busy) == {"load", "compute", "store"}
    # default inputs: fixed seed, so two runs agree
    a, b = run_layer(layer, knobs, HW), run_layer(layer, knobs, HW)
    assert np.array_equal(a.output, b.output)
    assert np.array_equal(a.output, layer.reference(*random_inputs(layer)))


def test_run_layer_dense_shape_and_timing_only():
    layer = Dense(1, 256, 128)
    knobs = {"tile_b": [-1, 1], "tile_ci": [-1, 4], "tile_co": [-1, 4], "oc_nthread": 2}
    run = run_layer(layer, knobs, "pynq_1x16", shift=6)
    data, weight = random_inputs(layer)
    assert run.output.shape == (1, 128)
    assert np.array_equal(run.output, layer.reference(data, weight, 6))
    t = run_layer(layer, knobs, HW, functional=False, shift=6)
    assert t.output is None
    assert (t.cycles, t.counters, t.n_insns) == (run.cycles, run.counters, run.n_insns)


def test_measure_seconds_equals_run_layer_timing():
    space = get_space(WORKED, HW)
    config = space.get(203)
    seconds, cycles = measure_seconds(WORKED, config, HW)
    run = run_layer(WORKED, KNOBS_203, HW, functional=False)
    assert (seconds, cycles) == (run.seconds, run.cycles)
    assert run.config.index == 203
    params = timing.TimingParams().with_(host_call_s=0.0, host_per_insn_s=0.0)
    s2, c2 = measure_seconds(WORKED, KNOBS_203, HW, params=params)
    assert s2 == pytest.approx(c2 / HW.clock_hz)


def test_invalid_config_raises_named_rule():
    layer = Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1)
    knobs = {"tile_b": [1, 1], "tile_h": [1, 8], "tile_w": [1, 8], "tile_ci": [1, 2],
             "tile_co": [1, 2], "oc_nthread": 1, "h_nthread": 1}
    why = get_space(layer, HW).why_invalid(knobs)
    assert why
    with pytest.raises(InvalidSchedule) as err:
        run_layer(layer, knobs, HW)
    assert why in str(err.value)


def test_unknown_knob_value_and_unsupported_layer():
    layer = Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1)
    bad = {"tile_b": [1, 1], "tile_h": [1, 3], "tile_w": [1, 8], "tile_ci": [1, 2],
           "tile_co": [1, 2], "oc_nthread": 1, "h_nthread": 1}
    with pytest.raises(ConfigError, match="tile_h"):
        run_layer(layer, bad, HW)
    with pytest.raises(CodesignError, match="in_channels=24"):
        run_layer(Conv2D(1, 24, 8, 8, 32, 3, 3, 1, 1), {}, HW)
    with pytest.raises(ConfigError, match="shift"):
        run_layer(Dense(1, 256, 128), {"tile_b": [1, 1], "tile_ci": [1, 16], "tile_co": [1, 8],
                                       "oc_nthread": 1}, HW, shift=40)


def test_measure_seconds_reuses_its_buffer_safely():
    """Big and small programs in turn through the reusable buffer give the same answers as
    fresh compiles (the buffer is only a scratch area)."""
    from codesign.evaluate.compiler import compile_insns

    layer = Conv2D(1, 32, 16, 16, 32, 3, 3, 1, 1)
    space = get_space(layer, HW)
    params = timing.TimingParams()
    picks = [space.get(int(i)) for i in space.valid_indices()[::6]]
    sizes = set()
    for config in picks + picks[::-1]:
        insns = compile_insns(layer, config, HW).insns
        sizes.add(insns.shape[0])
        fresh = timing.time_program(insns, HW, params).cycles
        expect = (timing.predict_seconds(fresh, insns.shape[0], HW, params), fresh)
        assert measure_seconds(layer, config, HW, params) == expect
    assert len(sizes) > 3


def test_program_blob_roundtrip_runs_identically():
    from codesign.evaluate.compiler import compile_layer
    from codesign.vta.program import Program
    from codesign.vta.simulator import simulate

    layer = Dense(1, 256, 128)
    knobs = {"tile_b": [1, 1], "tile_ci": [4, 4], "tile_co": [2, 4], "oc_nthread": 2}
    data, weight = random_inputs(layer, seed=9)
    prog = compile_layer(layer, knobs, HW, data=data, weight=weight)
    again = Program.from_bytes(prog.to_bytes())
    a, b = simulate(prog), simulate(again)
    assert np.array_equal(a.outputs["output"], b.outputs["output"]) and a.cycles == b.cycles
    assert again.meta["knobs"] == knobs and again.meta["template"] == "dense_packed.vta"
