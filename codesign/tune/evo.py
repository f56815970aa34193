"""Evolutionary search guided by the XGBoost cost model (Ansor's `SketchPolicy` search, Zheng et
al., OSDI 2020, §5.2; TVM `auto_scheduler/search_policy/sketch_policy.cc`).

Each round: the cost model (the XGBoost rank model of `XGBTuner`, transfer included) is refit on
every measurement so far; a population starts from the best measured configs and random valid
ones (Ansor: `sample_init_min_population` random states plus the best measured); for
`generations` generations every member is mutated (`SpaceView.mutate`: one knob changed, valid)
with probability `mutation`, parents are drawn with probability proportional to their model
score, and the population keeps the `population` best-scored distinct configs of parents and
children. The best-scored unmeasured configs seen in the whole evolution are measured, a fraction
`epsilon` of them replaced by random valid configs (Ansor's `eps_greedy`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.tune.xgb import HPARAM_RANGES as XGB_RANGES
from codesign.tune.xgb import HPARAMS as XGB_HPARAMS
from codesign.tune.xgb import XGBTuner

# Ansor's defaults are population 2048 and 4 generations for 1,000-trial budgets on GPUs; our
# budgets are ~10x smaller and a model call costs more than a mutation, so the population is too.
HPARAMS = {k: v for k, v in XGB_HPARAMS.items() if not k.startswith("sa_")} | {
    "population": 256,
    "generations": 4,
    "mutation": 0.85,  # Ansor's mutation probability
    "keep": 64,  # best unmeasured configs kept from the evolution
}
HPARAM_RANGES = {k: v for k, v in XGB_RANGES.items() if not k.startswith("sa_")} | {
    "population": (2, None), "generations": (1, None), "mutation": (0, 1), "keep": (1, None)}


class EvoTuner(XGBTuner):
    name = "evo"
    HPARAMS = HPARAMS
    HPARAM_RANGES = HPARAM_RANGES

    def __init__(self, space: Any, seed: int = 0, **kw: Any) -> None:
        super().__init__(space, seed, **kw)

    def _search(self) -> list[int]:
        view, rng, hp = self.view, self.rng, self.hp
        pop = np.asarray(self._starts(hp["population"]), dtype=np.int64)
        if pop.size == 0:
            return []
        score = self.score(pop)
        seen: dict[int, float] = {int(i): float(s) for i, s in zip(pop, score)}
        for _ in range(hp["generations"]):
            # parents by model score (rank-based weights: the scores are rank-objective margins)
            order = np.argsort(-score, kind="stable")
            weight = np.empty(pop.size)
            weight[order] = 1.0 / (1.0 + np.arange(pop.size))
            parents = pop[rng.choice(pop.size, size=pop.size, p=weight / weight.sum())]
            mutate = rng.random(pop.size) < hp["mutation"]
            children = parents.copy()
            if mutate.any():
                children[mutate] = view.mutate(parents[mutate], rng)
            merged = np.unique(np.concatenate([pop, children]))
            merged_score = self.score(merged)
            for i, s in zip(merged.tolist(), merged_score.tolist()):
                seen[i] = s
            top = np.argsort(-merged_score, kind="stable")[: hp["population"]]
            pop, score = merged[top], merged_score[top]
        fresh = [(s, i) for i, s in seen.items() if i not in self.results and np.isfinite(s)]
        fresh.sort(key=lambda t: (-t[0], t[1]))
        return [i for _, i in fresh[: hp["keep"]]]


__all__ = ["EvoTuner"]
