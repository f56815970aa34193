"""Runner: batching, worker processes, per-measurement timeout and error capture."""

from __future__ import annotations

import time

import pytest

from codesign.evaluate.run import measure_seconds, run_layer
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace
from codesign.tune import FunctionRunner, MeasureInput, SimulatorRunner
from codesign.tune.measure import TIMEOUT
from codesign.workloads import parse_layer

HW = HwConfig()
LAYER = parse_layer("conv2d:1,32,8,8,32,3,3,1,1")


def slow_or_fail(layer, config, hw):
    if config.index == 1:
        time.sleep(30)  # hangs: must become a timeout, not block the batch
    if config.index == 2:
        raise ValueError("bad config")
    return float(config.index), config.index * 10


def test_parallel_timeout_and_errors_per_measurement():
    space = ScheduleSpace(LAYER, HW)
    inputs = [MeasureInput(LAYER, HW, space.get(i)) for i in range(5)]
    runner = FunctionRunner(slow_or_fail, n_parallel=2, timeout_s=1.0)
    t0 = time.perf_counter()
    try:
        res = runner.run(inputs)
    finally:
        runner.close(kill=True)
    assert time.perf_counter() - t0 < 20
    assert [r.config.index for r in res] == [0, 1, 2, 3, 4]  # order kept
    assert res[1].error == TIMEOUT and res[1].seconds is None
    assert res[2].error == "ValueError: bad config"
    assert [(r.seconds, r.cycles) for r in (res[0], res[3], res[4])] == [(0.0, 0), (3.0, 30), (4.0, 40)]


def test_simulator_runner_matches_measure_seconds():
    space = ScheduleSpace(LAYER, HW)
    idx = [int(i) for i in space.valid_indices()[:3]]
    runner = SimulatorRunner(HW)
    res = runner.run([MeasureInput(LAYER, HW, space.get(i)) for i in idx])
    assert [(r.seconds, r.cycles) for r in res] == [measure_seconds(LAYER, space.get(i), HW) for i in idx]
    assert all(r.ok and r.measured for r in res)


def test_in_process_timeout_is_checked_after_the_fact():
    def slow(layer, config, hw):
        time.sleep(0.05)
        return 1.0, 1

    space = ScheduleSpace(LAYER, HW)
    res = FunctionRunner(slow, timeout_s=0.01).run([MeasureInput(LAYER, HW, space.get(0))])
    assert res[0].error == TIMEOUT


def test_simulator_measurement_carries_what_run_layer_reports():
    # One measurement gives the caller everything (the sweep needs busy cycles for power), so the
    # winner is never compiled and timed a second time.
    space = ScheduleSpace(LAYER, HW)
    configs = [space.get(int(i)) for i in space.valid_indices()[:3]]
    results = SimulatorRunner(HW).run([MeasureInput(LAYER, HW, c) for c in configs])
    for c, res in zip(configs, results):
        run = run_layer(LAYER, c.knobs, HW, functional=False)
        assert res.ok and (res.seconds, res.cycles, res.busy) == (run.seconds, run.cycles, run.busy)
        assert set(res.busy) == {"load", "compute", "store"} and res.device_s is None and res.call_s is None


def test_a_ctrl_c_that_a_ctypes_callback_swallowed_stops_the_next_measurement(monkeypatch):
    """numba's JIT compile runs a ctypes callback; a SIGINT handled inside it is printed and dropped
    by ctypes. The CLI's handler remembers it, and the measurement loop raises it again; the dropped
    one's traceback is not printed."""
    import ctypes
    import os
    import signal
    import sys

    from codesign import interrupts

    measured: list[int] = []

    @ctypes.CFUNCTYPE(None)
    def notifier() -> None:  # stands for numba's LLVM object-cache notifier
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs at one of these bytecodes, inside the callback
            pass

    def compiling(layer, config, hw):
        notifier()
        measured.append(config.index)
        return 1.0, 1

    unraisable: list = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    space = ScheduleSpace(LAYER, HW)
    inputs = [MeasureInput(LAYER, HW, space.get(i)) for i in range(3)]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with interrupts.catching():
        with pytest.raises(KeyboardInterrupt):
            FunctionRunner(compiling).run(inputs)
    assert measured == [0]  # the swallowed interrupt stopped the run before the second measurement
    assert unraisable == [] and sys.unraisablehook == unraisable.append
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    interrupts.check()  # and is forgotten once the block is left
