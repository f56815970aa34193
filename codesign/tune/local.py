"""`local`: best-first neighbourhood search (hill climbing) from the best measured config. Each
round proposes unmeasured valid neighbours (`SpaceView.neighbours`: one knob changed) of the
fastest config measured so far, in a seeded random order; when the best's neighbourhood is
spent, those of the next fastest; random valid configs only when every measured config's
neighbourhood is. No model and no enumeration of the space: validity comes from the space's
vectorized mask, so it costs about its measurements even on spaces of 10^8 configs — the
`vta` family's default search starts it from the template optimum (`codesign.tune.template_local`)
with `ranked=True`: a centre's neighbours in the order `codesign.tune.rank` ranks them (the moves
of the knobs the templates lack first), not a random one, and once per layer its compound moves
(`rank.compound_moves`: residency with its loop order and tiles), made from the centre whose
frontier reaches their rank."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from codesign.schedule.knobs import Config
from codesign.tune.rank import RankedFrontier, apply_compound, compound_moves
from codesign.tune.tuner import Tuner

RANKED_BATCH = 2  # configs per round when ranked


class LocalTuner(Tuner):
    name = "local"
    batch_size = 8

    def __init__(self, *args, ranked: bool = False, tilings: Sequence[int] = (), **kw) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kw)
        self.ranked = ranked  # neighbours in `rank.ranked_neighbours`' order, else a seeded random one
        self.tilings = [int(i) for i in tilings]  # ranked: the template's fastest tilings, for transplants
        if ranked:  # best-first needs feedback: a round of 8 would spend half a sweep trial's budget blind
            self.batch_size = RANKED_BATCH
        self._frontier: dict[int, list[int] | RankedFrontier] = {}  # centre -> its neighbours not proposed yet
        self._proposed: set[int] = set()
        # ranked: the first centre's compound moves (`rank.compound_moves`), each proposed once per layer,
        # from the centre whose frontier reaches it (`rank.apply_compound`)
        self._compounds: list[int] | None = None
        self._compound_of: dict[int, int] = {}  # a compound move -> its position in _compounds
        self._compounds_done: set[int] = set()
        self._held: int | None = None  # a compound popped behind this round's moves, proposed next round

    def propose(self, n: int) -> list[Config]:
        out: list[int] = []
        ranked = sorted((r for r in self.results.values() if r.ok), key=lambda r: (r.seconds, int(r.config.index)))
        held, self._held = self._held, None
        if held is not None and ranked and int(ranked[0].config.index) in self._frontier:
            # a compound held back last round: made from the centre that won that round (a new centre's frontier
            # has it anyway)
            j = apply_compound(self.view, int(ranked[0].config.index), held)
            if j not in self.results and j not in self._proposed:
                out.append(j)
                self._proposed.add(j)
        elif held is not None:
            self._compounds_done.discard(self._compound_of[held])
        for r in ranked:  # the fastest first: its neighbourhood, then the next one's
            centre = int(r.config.index)
            if centre not in self._frontier:
                nb = self.view.neighbours(centre)
                if self.ranked:  # popped in rank order, re-ranked by what the search measures
                    self._frontier[centre] = RankedFrontier(self.view, centre, nb, self.rng, tilings=self.tilings,
                                                            measured=self.results,
                                                            compounds=lambda c=centre: self._compound(c))
                else:
                    self._frontier[centre] = [int(i) for i in self.rng.permutation(nb)]
            todo = self._frontier[centre]
            while todo and len(out) < n:
                j = todo.pop()
                k = self._compound_of.get(j) if self.ranked else None
                if k is not None:  # a compound move: made from this centre when its turn comes (once per layer)
                    if k in self._compounds_done:
                        continue
                    self._compounds_done.add(k)
                    if out:  # after this round's moves are timed: one of them may make a new centre to make it from
                        self._held = j
                        break
                    j = apply_compound(self.view, centre, j)
                if j not in self.results and j not in self._proposed:
                    out.append(j)
                    self._proposed.add(j)
            if len(out) >= n or self._held is not None:
                break
        if len(out) < n and self._held is None:  # nothing measured yet, or every neighbourhood spent
            extra = self.random_unmeasured(n - len(out), exclude=self._proposed)
            self._proposed.update(extra)
            out += extra
        return [self.view.config(int(i)) for i in np.asarray(out, dtype=np.int64)]

    def _compound(self, centre: int) -> list[int]:
        """The compound moves not proposed yet, as the first centre's (computed once; `propose` carries
        one onto its centre when popped: most frontiers are left before their compounds' rank)."""
        if self._compounds is None:
            self._compounds = [int(i) for i in compound_moves(self.view, centre)]
            self._compound_of = {c: k for k, c in enumerate(self._compounds)}
        return [c for k, c in enumerate(self._compounds) if k not in self._compounds_done]


__all__ = ["LocalTuner"]
