"""The default search (`codesign.tune.search`): one value with its defaults in one place, the same
search through `codesign tune` and a sweep trial, and `tune --workload` tuning the plan's layers."""

from __future__ import annotations

import json

import pytest

from codesign.cli import main
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.sweep.options import SweepOptions
from codesign.sweep.trial import InnerTuning, LayerTuner
from codesign.tune.search import SWEEP_BUDGET, TUNE_BUDGET, Search, default_schedules
from codesign.workloads import parse_layer

SMALL = "conv2d:1,32,8,8,32,3,3,1,1"
HW = HwConfig.resolve("pynq_1x16")


def test_defaults_live_in_one_place():
    assert Search().family == "vta" and Search().budget == TUNE_BUDGET and Search().two_stage
    assert Search(tuner="xgb").family == default_schedules("xgb") == "autotvm"
    assert SweepOptions().budget == SWEEP_BUDGET and SweepOptions().schedules == Search().family
    assert InnerTuning().search() == Search(budget=SWEEP_BUDGET)


@pytest.mark.parametrize("kw, msg", [({"family": "tvm"}, "--schedules 'tvm'"), ({"budget": 0}, "--budget 0"),
                                     ({"policy": "fifo"}, "--task-scheduler 'fifo'")])
def test_bad_settings_are_refused_in_one_line(kw, msg):
    with pytest.raises(ConfigError, match=msg) as err:
        Search(**kw)
    assert "\n" not in str(err.value)


def test_tune_and_a_sweep_trial_find_the_same_schedule(capsys):
    """`codesign tune --budget 4` and a sweep trial's inner tuning at budget 4 are one search: the
    same schedule after the same measurements."""
    assert main(["tune", "--layer", SMALL, "--hw", "pynq_1x16", "--budget", "4", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    layer = parse_layer(SMALL)
    tuner = LayerTuner(HW, InnerTuning(budget=4), None, None)
    res, best = tuner.tune(layer)
    assert best is not None and res.best is not None
    assert cli["best"]["index"] == res.best.index and cli["best"]["seconds"] == pytest.approx(float(best.seconds))
    assert cli["measurements"] == res.measurements


def test_run_takes_the_record_whose_fused_op_is_fastest():
    """Records time the plain layer; `codesign run` times the fused op: of the records that fit the
    epilogue it takes the fastest fused one, whatever seconds the records claim."""
    from codesign.evaluate.fused import Epilogue, fused_invalid, measure_fused
    from codesign.netrun.schedules import ScheduleChooser
    from codesign.schedule import get_space
    from codesign.schedule.knobs import plain_knobs
    from codesign.tune.records import MeasureRecord

    layer = parse_layer(SMALL)
    space = get_space(layer, HW)
    epi = Epilogue(shift=1, bias=True, relu=True)
    fits = [space.get(int(i)) for i in space.valid_indices()[:40]]
    fits = [c for c in fits if fused_invalid(layer, c, HW, epi) is None]
    timed = sorted(fits, key=lambda c: measure_fused(layer, c, HW, epi).seconds)
    fast, slow = timed[0], timed[-1]
    assert measure_fused(layer, fast, HW, epi).seconds < measure_fused(layer, slow, HW, epi).seconds

    def record(config, seconds):
        return MeasureRecord(layer.name, SMALL, HW.name, plain_knobs(config.knobs), int(config.index), seconds, 1,
                             None, "test", 0, 0.0, family="autotvm")

    # the slow schedule claims the faster record
    chooser = ScheduleChooser(HW, [record(slow, 1e-6), record(fast, 1.0)])
    got = chooser.for_epilogue(layer, epi)
    assert got.source == "records" and got.config.index == fast.index
