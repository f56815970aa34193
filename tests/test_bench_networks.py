"""benchmarks/networks.py --schedules vta: a layer's row counts the family's valid schedules
without leaving the cached space listed (a listed space maps configs from a table of all its
valid schedules, >1 GB per layer at 10^6 valid: ResNet-50 ran out of memory)."""

from __future__ import annotations

from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.vta.producer import listed
from codesign.schedule.vta_space import VtaSpace
from codesign.workloads import parse_layer

HW = HwConfig()
LAYER = parse_layer("conv2d:1,16,6,6,16,3,3,1,1")  # a few thousand valid vta schedules


def test_vta_row_counts_valid_without_listing_the_cached_space(bench_module):
    row = bench_module("networks").vta_layer(LAYER, HW, exhaustive_max=0, budget=4, seed=0, learned="random")
    assert row["valid"] == len(VtaSpace(LAYER, HW).valid_indices()) > 0
    assert row["bit_exact"] and row["race_free"] and row["best_ms"] <= row["template_best_ms"] * (1 + 1e-9)
    assert not listed(get_space(LAYER, HW, "vta"))  # the winner was mapped from its own row
