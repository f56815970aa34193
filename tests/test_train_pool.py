"""Agent pre-training on a family too large to enumerate (issue 19, the vta family: 10^5 valid
schedules per ResNet-18 conv): each task is tuned on a fixed uniform sample of its valid configs
(`SampledView`), so training measures only configs of that sample and never lists the family."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.tune import TableRunner, exhaustive_table
from codesign.tune import env as env_mod
from codesign.tune.env import SampledView, pretrain, sample_valid_pool
from codesign.tune.view import SpaceView
from codesign.workloads import parse_layer

HW = HwConfig()
LAYER = parse_layer("conv2d:1,16,8,8,16,3,3,1,1")  # ~1,800 valid vta schedules: small enough to check them all
# One worker for the three files that time every vta schedule of LAYER: exhaustive_table's in-process
# cache then times them once.
pytestmark = pytest.mark.xdist_group("vta_table_conv2d_1x16x8x8")


def test_sampled_view_is_the_sample():
    space = get_space(LAYER, HW, "vta")
    pool = sample_valid_pool(space, 40, np.random.default_rng(0))
    assert pool.size == 40 and space.valid_mask(pool).all()  # distinct, valid
    assert not np.array_equal(pool, sample_valid_pool(space, 40, np.random.default_rng(1)))  # random
    view = SampledView(space, pool[::-1])
    assert view.enumerable and np.array_equal(view.valid, pool)
    outside = int(np.setdiff1d(space.valid_indices(), pool)[0])
    assert not view.is_valid(outside) and view.is_valid(int(pool[3]))
    assert sorted(view.sample_valid(100, np.random.default_rng(0))) == pool.tolist()


def test_pretrain_measures_only_the_sampled_pool_of_a_large_space(monkeypatch):
    table = exhaustive_table(LAYER, HW, family="vta")
    measured: list[int] = []

    class Recording(TableRunner):
        def measure_one(self, inp):
            measured.append(int(inp.config.index))
            return super().measure_one(inp)

    # the space as the view sees a 10^10 one: not enumerable (this one is ~10^8, listed by default)
    monkeypatch.setattr(env_mod, "SpaceView", lambda space: SpaceView(space, enumerate_limit=0))
    agent = pretrain("bandit", [(LAYER, HW)], budget=12, seed=3, family="vta", pool=30,
                     runner_factory=lambda layer, hw: Recording(table))
    assert agent.trained and len(agent.y) == 12 and len(set(measured)) == 12
    pool = sample_valid_pool(get_space(LAYER, HW, "vta"), 30, np.random.default_rng(3))  # task 0, seed 3
    assert set(measured) <= set(pool.tolist())


def test_local_moves_stay_in_the_sample():
    space = get_space(LAYER, HW, "vta")
    pool = sample_valid_pool(space, 50, np.random.default_rng(0))
    view = SampledView(space, pool)
    rng = np.random.default_rng(0)
    moved = view.mutate(pool[:20], rng)
    assert set(moved.tolist()) <= set(pool.tolist()) and (moved != pool[:20]).all()
    pos = view.mutate_positions(view.positions(pool[:20]), rng)
    assert view.valid_mask(view.index(pos)).all()
    nb = view.neighbours(int(pool[0]))
    assert nb.size and set(nb.tolist()) <= set(pool.tolist()) - {int(pool[0])}
    # nearest: no other member differs in fewer knobs
    d = (view.valid_pos != view.positions([int(pool[0])])[0]).sum(axis=1)
    assert (view.valid_pos[np.searchsorted(view.valid, nb)] != view.positions([int(pool[0])])[0]).sum(axis=1).max() \
        == d[d > 0].min()


def test_moves_from_members_reach_exactly_their_nearest_members_uniformly():
    """A sampled view's move from a member (a search's chains walk member to member) goes to a
    member at the fewest knobs changed, every such member as likely (a fixed nearest-member table
    spanning several 64-row blocks); a row outside the sample still moves to its nearest member."""
    space = get_space(LAYER, HW, "vta")
    pool = sample_valid_pool(space, 300, np.random.default_rng(2))
    view = SampledView(space, pool)
    pos = view.valid_pos
    d = (pos[:, None, :] != pos[None, :, :]).sum(axis=2)
    np.fill_diagonal(d, 10**6)
    nearest = [set(np.flatnonzero(row == row.min()).tolist()) for row in d]  # brute force, per member
    rng = np.random.default_rng(0)
    draws = 400
    moved = view.mutate_positions(np.repeat(pos, draws, axis=0), rng)
    rows = np.searchsorted(view.valid, view.index(moved)).reshape(len(pool), draws)
    for r in range(len(pool)):
        counts = np.bincount(rows[r], minlength=len(pool))
        assert set(np.flatnonzero(counts).tolist()) == nearest[r]  # only nearest members, and all of them
        k = len(nearest[r])
        if k > 1:  # uniform over ties: every tied member's share within 5 sigma of 1/k
            share = counts[list(nearest[r])] / draws
            assert np.abs(share - 1 / k).max() <= 5 * np.sqrt((1 / k) * (1 - 1 / k) / draws) + 1e-9
    outside = space.positions_of(np.setdiff1d(space.valid_indices(), pool)[:5])
    moved_out = view.mutate_positions(outside, rng)
    for p, m in zip(outside, moved_out):
        dist = (pos != p).sum(axis=1)
        assert (m != p).sum() == dist[dist > 0].min() and view.is_valid(int(view.index(m[None])[0]))
