"""benchmarks/tuners.py --schedules vta with a reduced ground truth (issue 19): each held-out
task's family is reduced to a uniform sample of valid schedules, timed exhaustively; every search
runs on that sample and is scored against its optimum."""

from __future__ import annotations

import json

import numpy as np

from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.workloads import parse_layer

HW = HwConfig()
LAYER = parse_layer("conv2d:1,16,8,8,16,3,3,1,1")  # ~8,700 valid vta schedules
SMALL = parse_layer("conv2d:1,16,4,4,16,3,3,1,1")  # ~1,600: fewer than a 5,000 sample


def test_sampled_ground_truth_is_the_sample_optimum(tmp_path, bench_module):
    tuners = bench_module("tuners")
    out = tuners.vta_task(HW.name, LAYER.spec, ("random", "bandit"), 2, 500, str(tmp_path), 0.99, 60.0, None, None,
                          sample=60)
    data = json.loads(next((tmp_path / "vta_sample60").rglob("*.json")).read_text())
    sample = np.asarray(data["sample"])
    space = get_space(LAYER, HW, "vta")
    assert sample.size == 60 and space.valid_mask(sample).all()  # valid schedules, distinct
    # the optimum is the sample's, timed on the simulator (spot-check the best against measure())
    best = min(data["table"], key=lambda k: data["table"][k][0])
    assert out["opt_s"] == data["table"][best][0] == measure(LAYER, space.get(int(best)), HW).seconds
    assert out["truth"]["kind"] == "exhaustive over 60 valid schedules drawn uniformly" and out["truth"]["sample"] == 60
    n_valid = len(space.valid_indices())  # the whole family's count is still reported (estimated when unlisted)
    assert abs(out["valid"] - n_valid) <= 0.15 * n_valid
    for runs in out["runs"].values():
        for r in runs:
            assert r["n99"] is not None and r["n99"] <= 60 and r["stopped"] == "reached 0.99"
            assert min(r["curve"]) >= 1.0 - 1e-12  # nothing beats the sample's optimum: all runs stay in it
    # the whole family, small enough: exhaustive over all of it
    small = get_space(SMALL, HW, "vta")
    assert len(small.valid_indices()) < 5000
    whole = tuners.vta_task(HW.name, SMALL.spec, ("random",), 1, 20000, str(tmp_path), 0.99, 60.0, None, None,
                            sample=5000)
    assert whole["truth"]["kind"] == "exhaustive (the whole family)"
    assert whole["truth"]["sample"] == len(small.valid_indices())
