"""A listed vta space maps configs from its table of every valid config only when they are few
(`schedule.vta.producer.TABLE_MAX`): counting ResNet-18's 2.4M valid schedules of a 56x56 conv on pynq_4x8 (what
`benchmarks/networks.py` reports) then tabulated them all at ~2 KB each, and a 10-layer run was
killed out of memory. Above the limit each config is mapped from its own row — the same mapping."""

from __future__ import annotations

import numpy as np

from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.schedule.vta import producer
from codesign.workloads import Conv2D

HW = HwConfig.resolve("pynq_1x16")
LAYER = Conv2D(1, 32, 14, 14, 32, 3, 3, 1, 1)


def test_a_large_listing_is_not_tabulated_and_maps_the_same(monkeypatch) -> None:
    space = get_space(LAYER, HW, "vta")
    valid = space.valid_indices()
    picks = valid[np.random.default_rng(0).choice(len(valid), 5, replace=False)]
    monkeypatch.setattr(producer, "TABLE_MAX", len(valid) - 1)
    one_row = [mapping_for(LAYER, space.get(int(i)), HW) for i in picks]
    assert not hasattr(space, "_table")
    monkeypatch.setattr(producer, "TABLE_MAX", len(valid))
    producer.row_mapping.cache_clear()
    tabled = [mapping_for(LAYER, space.get(int(i)), HW) for i in picks]
    assert hasattr(space, "_table")
    for a, b in zip(one_row, tabled):
        assert (a.tile, a.loops, a.vthreads, a.residency, a.dma, a.info, a.inp_loads, a.gemm_trim) == \
            (b.tile, b.loops, b.vthreads, b.residency, b.dma, b.info, b.inp_loads, b.gemm_trim)
        assert np.array_equal(a.gemm.uops, b.gemm.uops) and np.array_equal(a.reset.uops, b.reset.uops)
