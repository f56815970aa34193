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
template optimum cost about three measurements."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from codesign.tune.view import SpaceView

#: The knobs whose one-knob moves are timed first, in this order (module doc); every other knob after.
MOVE_ORDER: tuple[str, ...] = ("pad_skip", "uop_preload", "early_epilogue", "inp_stationary", "acc_resident",
                               "wgt_stationary", "vthread", "order", "n_threads", "uop_fold", "uop_lift")


def move_ranks(view: SpaceView, centre: int, neighbours: np.ndarray, order: Sequence[str] = MOVE_ORDER) -> np.ndarray:
    """Per neighbour, the rank of the knob it moves (its position in `order`; a move that also resets
    coupled knobs ranks by the best of them; `len(order)` for a knob not listed)."""
    names = list(getattr(view.space, "knob_names", ()))
    rank = np.full(len(neighbours), len(order), dtype=np.int64)
    if not names or len(neighbours) == 0:
        return rank
    moved = view.positions(neighbours) != view.positions([centre])[0][None, :]
    for j, name in enumerate(names):
        if name in order:
            rank = np.where(moved[:, j], np.minimum(rank, order.index(name)), rank)
    return rank


def ranked_neighbours(view: SpaceView, centre: int, neighbours: np.ndarray, rng: np.random.Generator,
                      order: Sequence[str] = MOVE_ORDER) -> list[int]:
    """`neighbours` of `centre` in the order to time them (first first): by `move_ranks`, ties in a
    seeded random order."""
    nb = np.asarray(neighbours, dtype=np.int64)
    shuffled = rng.permutation(len(nb))
    rank = move_ranks(view, centre, nb[shuffled], order)
    return [int(i) for i in nb[shuffled][np.argsort(rank, kind="stable")]]


__all__ = ["MOVE_ORDER", "move_ranks", "ranked_neighbours"]
