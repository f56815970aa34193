"""Coupled knobs in the search's moves (`VtaSpace.coupled_knobs`, `SpaceView.neighbours` /
`mutate_positions`): the GEMM kernel's knobs exclude each other, so a schedule with a chosen micro-op
fold reaches its pad_skip twin (pad_skip = 1, uop_fold = uop_lift = 0) in one move of the search,
where every one-knob step towards it is invalid."""

from __future__ import annotations

import numpy as np

from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.vta_space import KERNEL_KNOBS
from codesign.tune.view import SpaceView
from codesign.workloads import Conv2D


def _twins(space, view: SpaceView) -> list[tuple[int, int]]:
    """(config with uop_fold > 0 and pad_skip = 0, its valid pad_skip twin), for every such pair."""
    names = [k.name for k in space.knobs]
    fold, ps, lift = (names.index(k) for k in ("uop_fold", "pad_skip", "uop_lift"))
    valid = space.valid_indices()
    pos = view.positions(valid)
    sel = (pos[:, fold] > 0) & (pos[:, ps] == 0)
    twin = pos[sel].copy()
    twin[:, [fold, lift]] = 0
    twin[:, ps] = 1
    tidx = view.index(twin)
    ok = np.isin(tidx, valid)
    return list(zip(valid[sel][ok].tolist(), tidx[ok].tolist()))


def test_kernel_knobs_are_coupled_and_the_pad_skip_twin_is_a_neighbour() -> None:
    space = get_space(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1), HwConfig.resolve("pynq_1x16"), "vta")
    names = [k.name for k in space.knobs]
    assert space.coupled_knobs == (tuple(names.index(k) for k in KERNEL_KNOBS),)
    view = SpaceView(space, enumerate_limit=0)  # the large-space path: no enumeration behind it
    pairs = _twins(space, view)
    assert len(pairs) >= 10
    for src, twin in pairs[:: max(1, len(pairs) // 10)]:
        single = np.flatnonzero(view.positions([src])[0] != view.positions([twin])[0])
        assert len(single) >= 2  # never a one-knob step
        nb = view.neighbours(src)
        assert twin in set(nb.tolist())
        assert np.all(space.valid_mask(nb)) and src not in set(nb.tolist())


def test_mutation_makes_the_joint_move_and_autotvm_spaces_are_unchanged() -> None:
    space = get_space(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1), HwConfig.resolve("pynq_1x16"), "vta")
    view = SpaceView(space, enumerate_limit=0)
    src, twin = _twins(space, view)[0]
    rng = np.random.default_rng(0)
    moved = view.mutate_positions(np.repeat(view.positions([src]), 20000, axis=0), rng)
    assert twin in set(view.index(moved).tolist())
    # a space without coupled knobs: the same random stream as a plain one-knob move
    tmpl = get_space(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1), HwConfig.resolve("pynq_1x16"), "autotvm")
    tview = SpaceView(tmpl)
    start = tview.positions(tview.valid[:5])
    a = tview.mutate_positions(start, np.random.default_rng(3))
    r = np.random.default_rng(3)
    knob = r.choice(tview._movable, size=5)
    b = start.copy()
    b[np.arange(5), knob] = r.integers(np.asarray(tview.dims)[knob])
    assert np.array_equal(a, b)
