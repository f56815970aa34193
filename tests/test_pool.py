"""Max and average pools on VTA's ALU (codesign/evaluate/pool.py, codesign/lower/pool.py,
docs/vta.md §7.9): bit-exact against codesign.network.reference's integer pools on the
simulator, race-free, FIFOs empty at FINISH; what the ALU cannot do is a one-line `pool_reason`."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import CodesignError
from codesign.evaluate.pool import Pool, measure_pool, pool_of, pool_reason, reference_pool, run_pool
from codesign.hw.config import HwConfig
from codesign.network.graph import Network, Op
from codesign.network.quantized import QParams
from codesign.vta import timing
from codesign.vta.simulator import simulate

HWS = ["pynq_1x16", "pynq_4x8"]


def _pools(n):
    return [Pool("max", n, 32, 16, 16, 3, 2, 1),   # ResNet's stem pool shape, smaller image
            Pool("max", n, 16, 9, 9, 3, 2, 1),     # odd size: bottom pad only in the last tile
            Pool("max", n, 16, 8, 8, 2, 2, 0),
            Pool("avg", n, 32, 8, 8, 2, 2, 0, shift=2),
            Pool("avg", n, 16, 6, 6, 2, 2, 1, shift=2),  # zero pads counted (count_include_pad)
            Pool("avg", n, 16, 4, 4, 4, 4, 0, shift=4)]  # global 4x4 average


@pytest.mark.parametrize("hw_name", HWS)
def test_pools_bit_exact_and_race_free(hw_name):
    hw = HwConfig.resolve(hw_name)
    rng = np.random.default_rng(0)
    for pool in _pools(hw.batch):
        assert pool_reason(pool, hw) is None, pool.name
        x = rng.integers(-128, 128, (pool.batch, pool.channels, pool.height, pool.width), dtype=np.int8)
        x[..., 0, :] = -128  # border values below any pad a zero-padded max would let win
        run = run_pool(pool, hw, x, check=True)
        ref = reference_pool(pool, x)
        np.testing.assert_array_equal(run.output, ref, err_msg=pool.name)
        res = simulate(run.program)
        assert not res.tokens_left and not res.not_run
        assert measure_pool(pool, hw).cycles == run.cycles == timing.time_program(run.program.insns, hw).cycles


def test_max_pool_pads_are_minus_128_not_zero():
    """A window of negative values next to the border: the reference pads with -128, VTA's DMA
    pads with 0; the MIN -128 on the pad positions is what makes them agree."""
    hw = HwConfig.resolve("pynq_1x16")
    pool = Pool("max", 1, 16, 8, 8, 3, 2, 1)
    x = np.full((1, 16, 8, 8), -5, dtype=np.int8)
    out = run_pool(pool, hw, x).output
    assert (out == -5).all() and (reference_pool(pool, x) == -5).all()


def test_pool_reasons_are_one_line():
    hw = HwConfig.resolve("pynq_1x16")
    why = pool_reason(Pool("avg", 1, 16, 7, 7, 7, 7, 0, shift=16, mul=1337), hw)
    assert "MUL" in why and "49" in why and "\n" not in why
    odd = HwConfig.resolve("pynq_1x16x8_i8w8a32_15_15_17_16")
    assert "BLOCK_IN == BLOCK_OUT" in pool_reason(Pool("max", 1, 16, 8, 8, 2, 2, 0), odd)
    assert "BLOCK_IN" in pool_reason(Pool("max", 1, 3, 8, 8, 2, 2, 0), hw)
    wide = pool_reason(Pool("max", 1, 16, 4, 4000, 3, 1, 1), hw)
    assert "no tile" in wide
    with pytest.raises(CodesignError, match="MUL"):
        run_pool(Pool("avg", 1, 16, 7, 7, 7, 7, 0, shift=16, mul=1337), hw, np.zeros((1, 16, 7, 7), np.int8))


def test_pool_of_network_ops():
    net = Network("n", (("x", (1, 16, 8, 8)),), (
        Op("mp", "max_pool2d", ("x",), (1, 16, 4, 4), {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1),
                                                      "dilation": (1, 1), "ceil_mode": False}),
        Op("gap", "adaptive_avg_pool2d", ("mp",), (1, 16, 1, 1), {"output_size": (1, 1)}),
        Op("ap", "avg_pool2d", ("x",), (1, 16, 4, 4), {"kernel": (2, 3), "stride": (2, 2), "padding": (0, 0),
                                                      "divisor": 6})), ("gap", "ap"))
    mp, why = pool_of(net, net.op("mp"))
    assert why is None and (mp.kind, mp.kernel, mp.stride, mp.padding) == ("max", 3, 2, 1)
    gap, why = pool_of(net, net.op("gap"), QParams(shift=4))
    assert why is None and (gap.kind, gap.kernel, gap.shift, gap.height) == ("avg", 4, 4, 4)
    assert pool_of(net, net.op("ap"))[0] is None and "non-square" in pool_of(net, net.op("ap"))[1]
