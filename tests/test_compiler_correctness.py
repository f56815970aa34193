"""Compiled programs compute the layer: the simulated output equals `layer.reference` bit for bit,
and no two modules touch the same SRAM row without a dependency token between them.

Counts: every valid config of 7 small layers (1x16 and 4x8; the count is printed in the report), and
2 random valid configs of each of the 10 ResNet-18 layers (20 programs, fixed seed)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import random_inputs
from codesign.hw.config import HwConfig
from codesign.schedule import get_space, partition
from codesign.vta.simulator import simulate
from codesign.workloads import Conv2D, Dense, get_workload

HW = HwConfig()
HW48 = HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18")

SMALL = [
    (Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1), HW),  # 3x3 s1 p1
    (Conv2D(1, 32, 8, 8, 32, 1, 1, 2, 0), HW),  # 1x1 s2 (unpadded: tile_ci > 1 patterns)
    (Conv2D(1, 32, 9, 9, 32, 3, 3, 2, 1), HW),  # 3x3 s2 with odd input
    (Conv2D(1, 64, 8, 8, 32, 1, 1, 1, 0), HW),  # 1x1 s1: inputs folded to 1-row DMAs
    (Dense(1, 256, 128), HW),
    (Conv2D(4, 16, 8, 8, 16, 3, 3, 1, 1), HW48),  # 4x8 config, batch 4
    (Dense(4, 64, 64), HW48),
]


def _run(layer, config, hw, data, weight, shift=8):
    prog = compile_layer(layer, config, hw, data=data, weight=weight, shift=shift)
    # check=True: every cross-module SRAM access must be ordered by a token (codesign.vta.races),
    # so a bit-exact result here cannot hide a race the device would expose
    res = simulate(prog, check=True)
    out = layer.unpack_output(np.asarray(res.outputs["output"]).view(np.int8), hw)
    return out, res


@pytest.mark.parametrize("layer,hw", SMALL, ids=[f"{ly.name}-{h.bitstream}" for ly, h in SMALL])
def test_every_valid_config_of_small_layers_is_bit_exact(layer, hw):
    space = get_space(layer, hw)
    valid = space.valid_indices()
    assert len(valid) > 0
    data, weight = random_inputs(layer, seed=3)
    ref = layer.reference(data, weight)
    assert ref.any() and (ref < 127).any()  # the clip is exercised both ways
    for index in valid:
        out, res = _run(layer, space.get(int(index)), hw, data, weight)
        assert np.array_equal(out, ref), f"{layer.name} config {index} differs from the reference"
        assert res.tokens_left == {}


def test_shift_is_honoured():
    layer = Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1)
    space = get_space(layer, HW)
    data, weight = random_inputs(layer, seed=5)
    config = space.get(int(space.valid_indices()[0]))
    for shift in (0, 5, 11):
        out, _ = _run(layer, config, HW, data, weight, shift=shift)
        assert np.array_equal(out, layer.reference(data, weight, shift))


@pytest.mark.parametrize("layer", [ly for ly, _ in partition(get_workload("resnet18"), HW)[0]],
                         ids=lambda ly: ly.name)
def test_resnet18_sampled_configs_are_bit_exact(layer):
    space = get_space(layer, HW)
    rng = np.random.default_rng(zlib.crc32(layer.name.encode()))
    picks = rng.choice(space.valid_indices(), size=2, replace=False)
    data, weight = random_inputs(layer, seed=1)
    ref = layer.reference(data, weight)
    for index in picks:
        out, _ = _run(layer, space.get(int(index)), HW, data, weight)
        assert np.array_equal(out, ref), f"{layer.name} config {index}"
