"""The emitter's kept scratch (`lower._into_scratch`): the measuring path borrows its rows instead of
copying them, and the next lowering zeroes them first (the emitter writes only some fields of a row)."""

from __future__ import annotations

import numpy as np

from codesign.evaluate.compiler import compile_insns
from codesign.evaluate.run import measure_seconds
from codesign.hw.config import HwConfig
from codesign.lower import lower_blocks
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.vta import timing
from codesign.workloads import Conv2D


def test_borrowed_rows_are_the_copied_ones_and_the_next_lowering_zeroes_them():
    """A long schedule's rows lent by the scratch equal its copied rows; a shorter schedule lowered
    after it (lent or copied) is row for row what it is from a clean scratch, and so is the long one
    lowered again after the short one was lent; measuring both in turn gives the instruction-level
    model's cycles on their full programs."""
    hw = HwConfig.resolve("pynq_1x16")
    layer = Conv2D(1, 176, 14, 14, 64, 3, 3, 1, 1)  # tests/test_timing_fast.py's pinned long schedule
    space = get_space(layer, hw, "vta")
    long_cfg, short_cfg = space.get(3590181882), None
    long_ = mapping_for(layer, long_cfg, hw)
    ref_long = lower_blocks(long_, hw).rows
    for index in space.sample_strata(32, np.random.default_rng(0)):
        cfg = space.get(int(index))
        rows = lower_blocks(mapping_for(layer, cfg, hw), hw).rows
        if 0 < rows.shape[0] < ref_long.shape[0] // 2:
            short_cfg, ref_short = cfg, rows
            break
    assert short_cfg is not None
    short = mapping_for(layer, short_cfg, hw)
    # rows the short program leaves to zero hold the long one's values, and they differ
    assert not np.array_equal(ref_long[:ref_short.shape[0]], ref_short)
    lent = lower_blocks(long_, hw, borrow=True)
    assert np.array_equal(lent.rows, ref_long)
    assert np.array_equal(lower_blocks(short, hw).rows, ref_short)  # copied, after the long rows lent
    lent = lower_blocks(long_, hw, borrow=True)
    assert np.array_equal(lower_blocks(short, hw, borrow=True).rows, ref_short)  # lent after lent
    assert np.array_equal(lower_blocks(long_, hw, borrow=True).rows, ref_long)
    for cfg in (long_cfg, short_cfg, long_cfg, short_cfg):
        _, cycles = measure_seconds(layer, cfg, hw)
        assert cycles == timing.time_program(compile_insns(layer, cfg, hw).insns, hw).cycles
