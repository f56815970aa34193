"""Compound moves of the ranked local search (`codesign.tune.rank.compound_moves`): a residency knob set with
its loop orders and whole-reduction tiles, ranked by a DMA estimate from the features (no program built),
where no one-knob move gets (ResNet-18's 64-channel 3x3 conv on pynq_4x8 at 167 MHz: 31.9 ms from the
template optimum, 21.7 ms the best known); and the frontier makes them, and the transplants, only when it
reaches their rank."""

from __future__ import annotations

import numpy as np

from codesign.evaluate.run import measure
from codesign.hw import HwConfig
from codesign.schedule import get_space
from codesign.tune import rank
from codesign.tune.local import LocalTuner
from codesign.tune.measure import MeasureResult
from codesign.tune.view import SpaceView
from codesign.workloads import Conv2D

HW = HwConfig.resolve("pynq_4x8_i8w8a32_15_14_16_15_167MHz")
LAYER = Conv2D(4, 64, 56, 56, 64, 3, 3, 1, 1)
#: The template optimum's point of the vta family for LAYER on HW (a default sweep trial's first family measurement).
TEMPLATE_BEST = {"tile_b": (1, 1), "tile_h": (56, 1), "tile_w": (2, 28), "tile_ci": (8, 1), "tile_co": (2, 4), "order": 0,
                 "wgt_stationary": 0, "vthread": 2, "uop_fold": 0, "inp_stationary": 0, "acc_resident": 0, "pad_skip": 0,
                 "n_threads": 2, "uop_lift": 0, "uop_preload": 0, "early_epilogue": 0}


def _view() -> tuple[object, SpaceView, int]:
    space = get_space(LAYER, HW, "vta")
    view = SpaceView(space, enumerate_limit=0)
    centre = int(space.from_knobs(TEMPLATE_BEST).index)
    assert space.why_invalid(space.get(centre)) is None
    return space, view, centre


def _knobs(space, index: int) -> dict[str, object]:
    return dict(space.get(index).knobs)


def test_a_compound_move_reaches_weight_residency_where_no_one_knob_move_does_and_is_faster():
    space, view, centre = _view()
    # no neighbour sets wgt_stationary: alone it is invalid (the reduction is split in 8 steps)
    assert not any(_knobs(space, j)["wgt_stationary"] for j in view.neighbours(centre).tolist())
    moves = rank.compound_moves(view, centre)
    assert len(moves) and view.valid_mask(moves).all()
    ws = [j for j in moves.tolist() if _knobs(space, j)["wgt_stationary"] == 1]
    assert ws, "a weight-stationary compound"
    k = _knobs(space, ws[0])
    assert k["order"] in rank.STATIONARY["wgt_stationary"] and k["tile_ci"][0] == 1  # the whole reduction
    assert k["uop_fold"] == 0 and k["uop_lift"] == 0 and k["acc_resident"] == 0
    before = measure(LAYER, space.get(centre), HW).seconds
    best = min(measure(LAYER, space.get(j), HW).seconds for j in moves.tolist())
    assert best < 0.75 * before  # 21.9 against 31.9 ms: the template stage's optimum is far from it


def test_the_dma_estimate_counts_weights_loaded_once_when_they_stay_resident():
    space, view, centre = _view()
    ws = [j for j in rank.compound_moves(view, centre).tolist() if _knobs(space, j)["wgt_stationary"] == 1][0]
    # the same schedule with the weights reloaded per tile: invalid in the family (no reuse), so compare the
    # estimate's weight term with the features' reloaded WGT bytes
    feats = view.features([ws])[0]
    names = list(rank._FEATURES)
    assert feats[names.index("log2_wgt_bytes_loaded")] < feats[names.index("log2_wgt_bytes")]
    est = rank.dma_estimate(view, [centre, ws])
    assert est.shape == (2,) and (est > 0).all()


def test_a_compound_carries_the_kernel_knobs_a_later_centre_has_set():
    space, view, centre = _view()
    move = int(rank.compound_moves(view, centre)[0])
    assert rank.apply_compound(view, centre, move) == move  # made from this centre: itself
    later = int(space.from_knobs({**TEMPLATE_BEST, "uop_preload": 1}).index)  # the search set uop_preload since
    carried = rank.apply_compound(view, later, move)
    assert view.valid_mask([carried])[0]
    k, shape = _knobs(space, carried), _knobs(space, move)
    assert k["uop_preload"] == 1
    assert all(k[n] == shape[n] for n in rank.SHAPE_KNOBS)


def test_the_frontier_makes_compounds_and_transplants_only_when_it_reaches_their_rank():
    space, view, centre = _view()
    made: list[str] = []
    moves = rank.compound_moves(view, centre)

    def compounds() -> np.ndarray:
        made.append("compound")
        return moves

    nb = view.neighbours(centre)
    measured: dict[int, MeasureResult] = {}
    frontier = rank.RankedFrontier(view, centre, nb, np.random.default_rng(0), measured=measured, compounds=compounds)
    ranks = dict(zip(nb.tolist(), rank.move_ranks(view, centre, nb).tolist()))
    early = sum(1 for r in ranks.values() if r < rank.COMPOUND_RANK)
    popped = [frontier.pop() for _ in range(early)]
    assert not made and all(ranks[j] < rank.COMPOUND_RANK for j in popped)  # the kernel knobs' moves first
    nxt = [frontier.pop() for _ in range(len(moves))]
    assert made == ["compound"] and nxt == moves.tolist()  # then the compounds, in their order
    rest = [frontier.pop() for _ in range(len(frontier))]
    assert sorted(popped + nxt + rest) == sorted(set(nb.tolist()) | set(moves.tolist()))


def test_the_local_search_proposes_each_compound_once_per_layer():
    space, view, centre = _view()
    tuner = LocalTuner(space, 0, view=view, ranked=True)
    tuner.observe([MeasureResult(space.get(centre), 0.0319, 1, None)])
    moves = set(rank.compound_moves(view, centre).tolist())
    proposed: list[int] = []
    for _ in range(12):  # every proposal slower than the centre: the search stays on the template optimum
        batch = tuner.propose(2)
        proposed += [int(c.index) for c in batch]
        tuner.observe([MeasureResult(c, 0.04, 1, None) for c in batch])
    assert moves and moves <= set(proposed)
    assert len(proposed) == len(set(proposed))
