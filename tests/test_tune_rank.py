"""The family stage's ranked local search (`codesign.tune.rank`, `LocalTuner(ranked=True)`): a centre's
neighbours in the order `MOVE_ORDER` ranks them (the kernel knobs the templates lack first, undo and
coupled-reset moves last), transplants of its knobs onto the template's fastest tilings, and the
validity a neighbour batch proved is not recomputed per proposal."""

from __future__ import annotations

import numpy as np

from codesign.evaluate.run import measure
from codesign.hw import HwConfig
from codesign.schedule import get_space
from codesign.schedule.vta.knobs import TILE_KNOBS
from codesign.tune import rank
from codesign.tune.local import LocalTuner
from codesign.tune.loop import tune_task
from codesign.tune.measure import SimulatorRunner
from codesign.tune.task import TuneTask
from codesign.tune.view import SpaceView
from codesign.workloads import Conv2D

HW = HwConfig.resolve("pynq_1x16")
LAYER = Conv2D(1, 32, 14, 14, 64, 3, 3, 1, 1)


def _spaces() -> tuple[object, SpaceView, list[int]]:
    """(the vta space, its view, the template's valid schedules as family points, fastest first)."""
    tspace, space = get_space(LAYER, HW), get_space(LAYER, HW, "vta")
    view = SpaceView(space, enumerate_limit=0)
    points = [int(space.from_template(tspace.get(int(i))).index) for i in tspace.valid_indices()]
    points = [p for p, ok in zip(points, view.valid_mask(points)) if ok]
    return space, view, sorted(dict.fromkeys(points), key=lambda p: measure(LAYER, space.get(p), HW).seconds)


def _with_pad_skip(space, view: SpaceView, points: list[int]) -> int:
    """The fastest template point with a valid pad_skip move: where the ranking has something to rank."""
    return next(p for p in points if any(_moved(space, p, j) == {"pad_skip": 1} for j in view.neighbours(p).tolist()))


def _moved(space, a: int, b: int) -> dict[str, object]:
    ka, kb = space.get(a).knobs, space.get(b).knobs
    return {k: kb[k] for k in ka if ka[k] != kb[k]}


def test_neighbours_are_ranked_by_the_knob_they_set_and_undo_moves_come_last():
    space, view, points = _spaces()
    centre = _with_pad_skip(space, view, points)
    nb = view.neighbours(centre)
    order = rank.ranked_neighbours(view, centre, nb, np.random.default_rng(0))
    assert sorted(order) == sorted(int(i) for i in nb)  # a permutation: nothing lost, nothing added
    ranks = rank.move_ranks(view, centre, np.asarray(order))
    assert (np.diff(ranks) >= 0).all()
    first = _moved(space, centre, order[0])
    assert set(first) & set(rank.MOVE_ORDER[:1]) or ranks[0] > 0  # pad_skip first when it is a valid move
    # from a centre with pad_skip set, the move that only clears it again ranks last
    on = [j for j in order if _moved(space, centre, j) == {"pad_skip": 1}]
    assert on, "the test layer has a valid pad_skip move"
    nb2 = view.neighbours(on[0])
    ranks2 = dict(zip(nb2.tolist(), rank.move_ranks(view, on[0], nb2).tolist()))
    assert ranks2[centre] == len(rank.MOVE_ORDER)


def test_transplants_put_a_centres_other_knobs_on_the_template_tilings():
    space, view, points = _spaces()
    start = _with_pad_skip(space, view, points)
    centre = next(j for j in view.neighbours(start).tolist() if _moved(space, start, j) == {"pad_skip": 1})
    tilings = [p for p in points if p != start]
    moves = rank.transplants(view, centre, tilings)
    assert len(moves) and view.valid_mask(moves).all()
    c = space.get(centre).knobs
    tiles = {tuple(tuple(space.get(t).knobs[k]) for k in TILE_KNOBS) for t in tilings}
    for j in moves.tolist():
        k = space.get(j).knobs
        assert tuple(tuple(k[n]) for n in TILE_KNOBS) in tiles
        assert {n: v for n, v in k.items() if n not in TILE_KNOBS} == {n: v for n, v in c.items() if n not in TILE_KNOBS}
    # ranked right after the kernel knobs' moves, fastest tiling first
    order = rank.ranked_neighbours(view, centre, view.neighbours(centre), np.random.default_rng(0), tilings=tilings)
    head = [j for j in order if j in set(moves.tolist())]
    assert head == [j for j in moves.tolist()]


def test_ranked_local_search_from_the_template_optimum_times_the_kernel_knobs_first_and_beats_a_random_order():
    space, view, points = _spaces()
    best = {}
    for ranked in (False, True):
        tuner = LocalTuner(space, 0, view=SpaceView(space, enumerate_limit=0), ranked=ranked)
        task = TuneTask(LAYER, HW, space, tuner.view, tuner)
        res = tune_task(task, budget=6, runner=SimulatorRunner(HW), seeds=[space.get(points[0])])
        best[ranked] = res.best_seconds
        if ranked:
            first = [_moved(space, points[0], int(r.config.index)) for r in res.history[1:3]]
            assert all(set(m) <= set(rank.MOVE_ORDER[:3]) | {"uop_fold", "uop_lift"} for m in first), first
    assert best[True] < best[False]


def test_a_neighbour_batchs_validity_is_remembered(monkeypatch):
    space, view, points = _spaces()
    fresh = SpaceView(space, enumerate_limit=0)
    nb = fresh.neighbours(points[0])
    calls = []
    real = space.valid_mask_staged
    monkeypatch.setattr(space, "valid_mask_staged", lambda idx, **kw: calls.append(len(idx)) or real(idx, **kw))
    assert all(fresh.is_valid(int(j)) for j in nb) and calls == []
