"""`codesign space` summarises a large vta space from its sampler's estimate (listing the ~10^6 valid
schedules of a ResNet-18 conv took tens of seconds) and counts exactly when asked to list them."""

from __future__ import annotations

import json

from codesign.cli import main
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.tune.view import ENUMERATE_LIMIT
from codesign.workloads import parse_layer

SPEC = "conv2d:1,32,4,4,32,3,3,1,1"  # a vta space of ~9e8 configs with ~16,000 valid ones


def test_a_large_space_is_summarised_from_an_estimate_within_ten_percent(capsys):
    space = get_space(parse_layer(SPEC), HwConfig.resolve("pynq_1x16"), "vta")
    assert space.size > ENUMERATE_LIMIT
    assert main(["space", "--layer", SPEC, "--hw", "pynq_1x16", "--schedules", "vta", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    exact = space.n_valid
    assert info["valid_estimated"] is True and info["valid"] == round(space.valid_estimate())
    assert abs(info["valid"] - exact) <= 0.1 * exact
    assert main(["space", "--layer", SPEC, "--hw", "pynq_1x16", "--schedules", "vta"]) == 0
    assert "valid about" in capsys.readouterr().out


def test_a_template_space_is_counted_exactly(capsys):
    assert main(["space", "--layer", SPEC, "--hw", "pynq_1x16", "--schedules", "autotvm", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    space = get_space(parse_layer(SPEC), HwConfig.resolve("pynq_1x16"), "autotvm")
    assert info["valid_estimated"] is False and info["valid"] == space.n_valid
