"""The timing fast path's shortcuts (issue 35 §4) give what the code they replace gave: knob
positions by lookup, kernels shared by configs of one fold, ring plans shared by configs of one
kernel/use/pair signature, and a block program's tail in one compiled call."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.lower import uops as uops_mod
from codesign.lower.emit import block_tail
from codesign.mapping.batch import GEMM_LOOPS, RESET_LOOPS, Kernel
from codesign.schedule import get_space
from codesign.schedule.knobs import Knob
from codesign.schedule.producer import geometry_table
from codesign.workloads import Conv2D

HW = HwConfig()
LAYER = Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1)


def _scan(knob: Knob, value) -> int | None:  # noqa: ANN001 - any user value
    """`Knob.position` as the linear scan it was (None: not a candidate)."""
    for pos, cand in enumerate(knob.candidates):
        if knob.kind == "sp":
            if (isinstance(value, (list, tuple)) and len(value) == 2 and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in value)
                    and value[1] == cand[1] and value[0] in (-1, cand[0])):
                return pos
        elif value == cand and not isinstance(value, bool):
            return pos
    return None


def test_knob_position_lookup_matches_the_scan():
    split = Knob("tile_h", "sp", ((4, 2), (8, 1), (2, 4), (1, 8), (3, 2)))  # inner 2 twice: the first wins
    other = Knob("n", "ot", (1, 2, 4, True))
    values = [[4, 2], [-1, 2], [3, 2], [-1, 8], [1, 8], [2, 8], [8, 1], [-1, 5], (4, 2), [True, 2], [4, 2.0], 7,
              1, 2, 4, True, False, 3, 2.0, "2", [1], None]
    for knob in (split, other):
        for value in values:
            want = _scan(knob, value)
            if want is None:
                with pytest.raises(ConfigError, match=f"knob {knob.name}="):
                    knob.position(value)
            else:
                assert knob.position(value) == want, (knob.name, value)


def test_configs_of_one_fold_share_their_kernels():
    space = get_space(LAYER, HW)
    table = geometry_table(space)
    valid = space.valid_indices()
    seen: dict[bytes, tuple[Kernel, Kernel]] = {}
    for i in valid[:300].tolist():
        gemm, reset = table.kernels(i)
        key = table.gemm["loops"][i].tobytes() + table.gemm["roles"][i].tobytes() + \
            table.reset["loops"][i].tobytes() + table.reset["roles"][i].tobytes()
        fresh = (Kernel.from_fold(table.gemm["roles"][i], table.gemm["loops"][i], GEMM_LOOPS),
                 Kernel.from_fold(table.reset["roles"][i], table.reset["loops"][i], RESET_LOOPS))
        for shared, new in zip((gemm, reset), fresh):
            assert shared.size == new.size and np.array_equal(shared.uops, new.uops)
            assert shared.factors() == new.factors() and shared.names == new.names
        if key in seen:
            assert seen[key][0] is gemm and seen[key][1] is reset
        seen[key] = (gemm, reset)
    assert len(seen) < 300  # configs do share folds (the `is` check ran)


def test_shared_ring_plan_is_the_plan_of_each_config():
    space = get_space(LAYER, HW)
    for i in space.valid_indices()[::25].tolist():
        m = space.mapping(i)
        if m.edges is not None or m.uop_preload:
            continue
        u = uops_mod.uop_plan(m, HW.uop_depth)
        sizes = u.sizes
        ring = uops_mod.ring_schedule(sizes, u.uses, m.n_pairs, HW.uop_depth)
        assert np.array_equal(ring.load, u.ring.load) and np.array_equal(ring.bgn, u.ring.bgn)
        assert ring.start == u.ring.start
        assert u.ring.steady(m.n_pairs) == (ring.start != 0 and not ring.load[1:].any())


def test_block_tail_matches_numpy():
    rng = np.random.default_rng(0)
    for _ in range(50):
        nb = int(rng.integers(1, 8))
        counts = rng.integers(1, 40, size=nb).astype(np.int64)
        P = int(rng.integers(1, 60))
        pair_class = np.append(rng.integers(0, nb, size=P), nb).astype(np.int64)
        loops = np.column_stack([rng.integers(1, 6, size=3), rng.integers(1, 20, size=3),
                                 np.zeros(3, int), np.ones(3, int)]).astype(np.int64)
        extra = int(rng.integers(0, 5))
        start, n_insns, periods = block_tail(counts, pair_class, loops, P, extra)
        want_start = np.concatenate([[0], np.cumsum(counts), [counts.sum() + 3]])
        want = set((loops[:, 0] * loops[:, 1]).tolist()) | {2, 1} | ({extra} if extra else set())
        assert np.array_equal(start, want_start)
        assert n_insns == int(counts[pair_class[:-1]].sum()) + 3
        assert periods.tolist() == sorted((c for c in want if c < P), reverse=True)
