"""Genetic algorithm over knob positions (AutoTVM's GATuner, made validity-aware).

Each generation keeps the `elite` best measured configs, picks parents by tournament on measured
latency, mixes them with uniform crossover of their knob positions and mutates the child: as many
one-knob moves (`SpaceView.mutate`, valid) as knobs drawn with probability `mutation`. Children
that are invalid or already measured are re-drawn; the space's validity mask makes that cheap.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.schedule.knobs import Config
from codesign.tune.tuner import Tuner

HPARAMS = {
    "pop_size": 16,  # configs per generation (the loop's batch)
    "elite": 3,  # fastest measured configs always in the parent pool
    "tournament": 3,  # contestants per parent pick
    "mutation": 0.25,  # probability each knob moves
    "max_tries": 200,  # children tried per wanted proposal before giving up
}
# Bounds a --hparam value must keep (inclusive; the rest only need >= 0).
HPARAM_RANGES = {"pop_size": (1, None), "tournament": (1, None), "mutation": (0, 1), "max_tries": (1, None)}


class GATuner(Tuner):
    name = "ga"
    HPARAMS = HPARAMS
    HPARAM_RANGES = HPARAM_RANGES

    def __init__(self, space: Any, seed: int = 0, **kw: Any) -> None:
        super().__init__(space, seed, **kw)
        self.batch_size = int(self.hp["pop_size"])

    def _fitness_pool(self) -> tuple[np.ndarray, np.ndarray]:
        ok = [r for r in self.results.values() if r.ok]
        ok.sort(key=lambda r: r.seconds)
        idx = np.array([int(r.config.index) for r in ok[: 4 * self.hp["pop_size"]]], dtype=np.int64)
        sec = np.array([r.seconds for r in ok[: 4 * self.hp["pop_size"]]], dtype=float)
        return idx, sec

    def propose(self, n: int) -> list[Config]:
        idx, sec = self._fitness_pool()
        if idx.size < 2:  # first generation: random
            return [self.view.config(i) for i in self.random_unmeasured(n)]
        view = self.view
        pos = view.positions(idx)
        n_movable = int(np.count_nonzero(np.asarray(view.dims) > 1))
        chosen: list[int] = []
        taken = set(self.results)
        tries = 0
        while len(chosen) < n and tries < self.hp["max_tries"] * n:
            tries += 1
            a = self._tournament(sec)
            b = self._tournament(sec)
            mask = self.rng.random(pos.shape[1]) < 0.5
            ci = int(view.index(np.where(mask, pos[a], pos[b])[None, :])[0])
            for _ in range(int(self.rng.binomial(n_movable, self.hp["mutation"]))):
                ci = int(view.mutate([ci], self.rng)[0])
            if ci in taken or not view.is_valid(ci):
                continue
            taken.add(ci)
            chosen.append(ci)
        if len(chosen) < n:  # population converged: top up with random configs
            chosen += self.random_unmeasured(n - len(chosen), exclude=chosen)
        return [self.view.config(i) for i in chosen]

    def _tournament(self, sec: np.ndarray) -> int:
        # Elites (the `elite` fastest) are always in the parent pool; others compete in tournaments.
        if self.rng.random() < self.hp["elite"] / self.hp["pop_size"]:
            return int(self.rng.integers(min(self.hp["elite"], sec.size)))
        cand = self.rng.integers(sec.size, size=min(self.hp["tournament"], sec.size))
        return int(cand[np.argmin(sec[cand])])
