"""Which neighbours of a centre the `vta` family's local search times first (`LocalTuner(ranked=True)`,
the family stage of the default search, `template_local`), ranked before any is timed.

A sweep trial affords about 16 family measurements per layer (a vta-family measurement costs ~4 ms
of CPU against ~0.3 ms for a template one), while the template optimum has 100-300 valid one-knob
neighbours: in a random order the search spends its budget on tile and fold moves. The fastest
schedules known for ResNet-18's layers (1,000-measurement learned searches, pynq_1x16 and pynq_4x8)
differ from the template optimum's point mostly in the knobs the templates do not have: the GEMM
kernel skipping padding taps (`pad_skip`), every micro-op kernel loaded once (`uop_preload`), the
epilogue overlapped with the next tile (`early_epilogue`), then residency (`inp_stationary`,
`acc_resident`, `wgt_stationary`) and the loop nest (`vthread`, `order`); the tiles, mostly, the
template stage has already chosen. So moves of those knobs come first, in `MOVE_ORDER`, each
group in a seeded random order; then every other move. The search stays best-first: an improving
move makes a new centre whose neighbours are ranked the same way, so three kernel knobs set on the
template optimum cost about three measurements.

The template stage also ranked the tilings: the best known schedules' tiles are mostly among the
template's ten fastest (ResNet-18 on pynq_1x16: 8 of 12 layers), not always its fastest. So a
centre whose non-tile knobs differ from a template point's also has as neighbours its
*transplants*: its non-tile knobs on the tiles of the template stage's `TRANSPLANTS` fastest
tilings, fastest first, ranked right after the kernel knobs' moves (`TRANSPLANT_RANK`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from codesign.schedule.vta.knobs import TILE_KNOBS
from codesign.tune.view import SpaceView

#: The knobs whose one-knob moves are timed first, in this order (module doc); every other knob after.
MOVE_ORDER: tuple[str, ...] = ("pad_skip", "uop_preload", "early_epilogue", "inp_stationary", "acc_resident",
                               "wgt_stationary", "vthread", "order", "n_threads", "uop_fold", "uop_lift")

#: Template tilings a centre is transplanted onto (the template stage's fastest, fastest first).
TRANSPLANTS = 4
#: Where transplants rank among the one-knob moves: after `MOVE_ORDER`'s first three (the GEMM kernel's).
TRANSPLANT_RANK = 2.5


def transplants(view: SpaceView, centre: int, tilings: Sequence[int]) -> np.ndarray:
    """The valid configs with `centre`'s non-tile knobs on the tiles of each of `tilings` (indices
    of this space, in order), other than `centre` and the tilings themselves."""
    names = list(getattr(view.space, "knob_names", ()))
    tiles = [j for j, n in enumerate(names) if n in TILE_KNOBS]
    if not tiles or not len(tilings):
        return np.zeros(0, dtype=np.int64)
    pos = view.positions(list(tilings))
    rows = np.repeat(view.positions([centre]), len(pos), axis=0)
    rows[:, tiles] = pos[:, tiles]
    idx = view.index(rows)
    keep = (idx != centre) & ~np.isin(idx, np.asarray(tilings, dtype=np.int64))
    idx = idx[keep]
    idx = idx[np.sort(np.unique(idx, return_index=True)[1])]  # first occurrence, order kept
    return idx[view.valid_mask(idx)] if len(idx) else idx


def move_ranks(view: SpaceView, centre: int, neighbours: np.ndarray, order: Sequence[str] = MOVE_ORDER) -> np.ndarray:
    """Per neighbour, the rank of the knob it moves (its position in `order`; a move that also resets
    coupled knobs to position 0 ranks by the knob it sets; `len(order)` for a knob not listed and
    for a move that only sets knobs back to position 0)."""
    names = list(getattr(view.space, "knob_names", ()))
    rank = np.full(len(neighbours), len(order), dtype=np.int64)
    if not names or len(neighbours) == 0:
        return rank
    pos = view.positions(neighbours)
    moved = pos != view.positions([centre])[0][None, :]
    # a move ranks by the knobs it sets off position 0 (today's program); one that only resets knobs
    # to 0 (a coupled reset, `SpaceView.neighbours`, or undoing how the search got to the centre) last
    setting = moved & (pos != 0)
    for j, name in enumerate(names):
        if name in order:
            rank = np.where(setting[:, j], np.minimum(rank, order.index(name)), rank)
    return rank


def ranked_neighbours(view: SpaceView, centre: int, neighbours: np.ndarray, rng: np.random.Generator,
                      order: Sequence[str] = MOVE_ORDER, tilings: Sequence[int] = ()) -> list[int]:
    """`neighbours` of `centre` and its `transplants` onto `tilings` in the order to time them
    (first first): by `move_ranks` (transplants at `TRANSPLANT_RANK`, in the tilings' order), ties
    in a seeded random order."""
    nb = np.asarray(neighbours, dtype=np.int64)
    shuffled = nb[rng.permutation(len(nb))]
    moves = transplants(view, centre, tilings)
    ids = np.concatenate([moves, shuffled[~np.isin(shuffled, moves)]])  # a transplant may be a tile move too
    rank = np.concatenate([np.full(len(moves), TRANSPLANT_RANK),
                           move_ranks(view, centre, ids[len(moves):], order).astype(float)])
    return [int(i) for i in ids[np.argsort(rank, kind="stable")]]


__all__ = ["MOVE_ORDER", "TRANSPLANTS", "TRANSPLANT_RANK", "move_ranks", "ranked_neighbours", "transplants"]
