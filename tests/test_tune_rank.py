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
from codesign.tune.measure import MeasureResult, SimulatorRunner
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
    assert ranks2[centre] == len(rank.MOVE_ORDER) + 1


def test_a_move_that_drops_a_knob_the_centre_set_ranks_after_the_tile_moves():
    # from a centre with pad_skip set, uop_fold and uop_lift moves reset it (a coupled group): they
    # undo the search's own find, so they come after every tile move (ResNet-18 on pynq_4x8 at 167 MHz:
    # a 16-measurement trial spent 7 of them so and never reached the tile_ci move worth 20%)
    space, view, points = _spaces()
    start = _with_pad_skip(space, view, points)
    centre = next(j for j in view.neighbours(start).tolist() if _moved(space, start, j) == {"pad_skip": 1})
    nb = view.neighbours(centre)
    ranks = dict(zip(nb.tolist(), rank.move_ranks(view, centre, nb).tolist()))
    drops = [j for j in nb.tolist() if _moved(space, centre, j).get("pad_skip") == 0]
    tiles = [j for j in nb.tolist() if set(_moved(space, centre, j)) <= set(TILE_KNOBS)]
    assert len(drops) > 1 and tiles
    assert {ranks[j] for j in drops} == {len(rank.MOVE_ORDER) + 1}
    assert {ranks[j] for j in tiles} == {len(rank.MOVE_ORDER)}
    order = rank.ranked_neighbours(view, centre, nb, np.random.default_rng(0))
    assert max(order.index(j) for j in tiles) < min(order.index(j) for j in drops)


def test_tile_moves_come_each_knobs_nearest_split_first():
    space, view, points = _spaces()
    centre = points[0]
    nb = view.neighbours(centre)
    order = rank.ranked_neighbours(view, centre, nb, np.random.default_rng(0))
    tiles = [j for j in order if set(_moved(space, centre, j)) <= set(TILE_KNOBS)]
    knob_of = {j: next(iter(_moved(space, centre, j))) for j in tiles}
    here = space.get(centre).knobs

    def dist(j: int) -> float:
        k = knob_of[j]
        return abs(np.log2(space.get(j).knobs[k][1] / here[k][1]))

    knobs = set(knob_of.values())
    assert len(knobs) > 1
    head = tiles[:len(knobs)]  # one move of each tile knob, each its nearest split, before any second one
    assert {knob_of[j] for j in head} == knobs
    for j in head:
        assert dist(j) == min(dist(i) for i in tiles if knob_of[i] == knob_of[j])
    for k in knobs:  # within a knob, nearest first
        d = [dist(j) for j in tiles if knob_of[j] == k]
        assert d == sorted(d)


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


def _timed(space, index: int, seconds: float) -> MeasureResult:
    return MeasureResult(space.get(index), seconds, int(seconds * 1e8))


def _lift_moves(space, view: SpaceView, centre: int) -> list[int]:
    """`centre`'s uop_lift moves (ranked before the tile moves, and the template optimum has many)."""
    moves = [j for j in view.neighbours(centre).tolist() if set(_moved(space, centre, j)) == {"uop_lift"}]
    assert len(moves) > rank.FLAT_TRIES, "the test layer's template optimum has enough valid uop_lift moves"
    return moves


def test_a_knob_is_flat_when_its_moves_did_not_pay_on_the_layer():
    space, view, points = _spaces()
    centre = points[0]
    assert view.positions([centre])[0][space.knob_names.index("uop_lift")] == 0
    moves = _lift_moves(space, view, centre)[:rank.FLAT_TRIES]
    same = [_timed(space, centre, 1e-3)] + [_timed(space, j, 1e-3 * (1 + rank.FLAT_TOL / 2)) for j in moves]
    assert rank.flat_knobs(view, same) == {"uop_lift"}
    assert rank.flat_knobs(view, same[:-1]) == set()  # one try short
    paid = same[:-1] + [_timed(space, moves[-1], 1e-3 * (1 - 2 * rank.FLAT_TOL))]
    assert rank.flat_knobs(view, paid) == set()
    worse = same[:-1] + [_timed(space, moves[-1], 2e-3)]  # a knob whose moves only hurt does not pay either
    assert rank.flat_knobs(view, worse) == {"uop_lift"}


def test_the_frontier_learns_from_what_the_search_measures():
    space, view, points = _spaces()
    centre = points[0]
    nb = view.neighbours(centre)
    measured: dict[int, MeasureResult] = {centre: _timed(space, centre, 1e-3)}
    frontier = rank.RankedFrontier(view, centre, nb, np.random.default_rng(0), measured=measured)
    assert len(frontier) == len(nb)
    # unlearned: the same order as ranked_neighbours
    assert [frontier.pop() for _ in range(3)] == rank.ranked_neighbours(view, centre, nb, np.random.default_rng(0))[:3]
    # the search times uop_lift moves that change nothing: the other uop_lift moves go after the tile moves
    flat = _lift_moves(space, view, centre)
    for j in flat[:rank.FLAT_TRIES]:
        measured[j] = _timed(space, j, 1e-3)
    rest = [frontier.pop() for _ in range(len(frontier))]
    assert sorted(rest + [int(i) for i in rank.ranked_neighbours(view, centre, nb, np.random.default_rng(0))[:3]]) \
        == sorted(nb.tolist())
    tiles = [rest.index(j) for j in rest if set(_moved(space, centre, j)) <= set(TILE_KNOBS)]
    late = [rest.index(j) for j in flat if j in rest]
    assert tiles and late and max(tiles) < min(late)
