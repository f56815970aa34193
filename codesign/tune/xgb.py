"""AutoTVM-style cost-model tuner: XGBoost ranking model + simulated-annealing proposals.

As AutoTVM's `XGBTuner` (`autotvm/tuner/xgboost_cost_model.py`, `sa_model_optimizer.py`):
after every batch, fit gradient-boosted trees with the pairwise rank objective on the measured
history (label = best / latency, 0 for failures); then run parallel simulated-annealing chains over
knob positions (a move sets one knob to another candidate) scored by the model, keep the best
unmeasured points, and propose the top of them, replacing a fraction `EPSILON` by random configs.
Features: the schedule space's fixed-size config features plus normalized knob positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.tune.tuner import Tuner
from codesign.tune.view import index_of, positions_of

# Hyper-parameters (AutoTVM defaults where they exist; budgets here are 10x smaller).
BATCH_SIZE = 8  # AutoTVM plan_size is 64 for 1000-trial budgets
EPSILON = 0.05  # fraction of random proposals
MIN_TRAIN = 8  # successful measurements before the model is used
XGB_PARAMS = {"objective": "rank:pairwise", "max_depth": 3, "gamma": 1e-4, "min_child_weight": 1,
              "subsample": 1.0, "eta": 0.3, "lambda": 1.0, "alpha": 0.0, "nthread": 1,
              "verbosity": 0}
NUM_ROUNDS = 100
SA_CHAINS = 64
SA_ITERS = 120
SA_TEMP = (1.0, 0.0)  # linear schedule, AutoTVM's default
SA_KEEP = 64  # best unmeasured points kept from the chains


class XGBTuner(Tuner):
    name = "xgb"
    batch_size = BATCH_SIZE

    def __init__(self, space: Any, seed: int = 0, **kw: Any) -> None:
        super().__init__(space, seed, **kw)
        self._scores: np.ndarray | None = None  # model score per valid config (row-aligned)
        self._dirty = True

    def observe(self, results: Any) -> None:
        super().observe(results)
        self._dirty = True

    # -- model ------------------------------------------------------------------------------
    def _inputs(self) -> np.ndarray:
        dims = np.maximum(np.asarray(self.view.dims) - 1, 1)
        return np.hstack([self.view.valid_features(), self.view.valid_pos / dims]).astype(np.float32)

    def _fit(self) -> bool:
        import xgboost as xgb

        measured = [r for r in self.results.values() if r.measured or r.ok]
        ok = [r for r in measured if r.ok]
        if len(ok) < MIN_TRAIN:
            return False
        best = min(r.seconds for r in ok)
        row = {int(i): k for k, i in enumerate(self.view.valid)}
        rows, labels = [], []
        for r in measured:
            k = row.get(int(r.config.index))
            if k is None:
                continue  # invalid configs are never in the candidate set; no need to rank them
            rows.append(k)
            labels.append(best / r.seconds if r.ok else 0.0)
        x = self._inputs()
        dtrain = xgb.DMatrix(x[np.asarray(rows)], label=np.asarray(labels, dtype=np.float32))
        params = dict(XGB_PARAMS, seed=self.seed)
        booster = xgb.train(params, dtrain, num_boost_round=NUM_ROUNDS)
        self._scores = booster.predict(xgb.DMatrix(x)).astype(np.float64)
        return True

    # -- proposals --------------------------------------------------------------------------
    def propose(self, n: int) -> list[Any]:
        if self._dirty:
            fitted = self._fit()
            self._dirty = False
            if not fitted:
                self._scores = None
        if self._scores is None:
            return [self.view.config(i) for i in self.random_unmeasured(n)]
        plan = self._anneal()
        chosen: list[int] = []
        for idx in plan:
            if len(chosen) >= n:
                break
            if self.rng.random() < EPSILON:
                extra = self.random_unmeasured(1, exclude=chosen + plan)
                chosen += extra
            else:
                chosen.append(idx)
        if len(chosen) < n:
            chosen += self.random_unmeasured(n - len(chosen), exclude=chosen)
        return [self.view.config(i) for i in chosen[:n]]

    def _anneal(self) -> list[int]:
        """Simulated annealing over knob positions; returns unmeasured valid indices, best first."""
        view, dims = self.view, np.asarray(self.view.dims)
        scores = self._scores
        assert scores is not None
        scale = float(np.std(scores)) or 1.0
        row = {int(i): k for k, i in enumerate(view.valid)}

        def score(indices: np.ndarray) -> np.ndarray:
            return np.array([scores[row[i]] / scale if i in row else -np.inf for i in indices.tolist()])

        # Chains start from the best measured configs and random valid ones (AutoTVM: from the
        # previous chain ends / random points).
        ok = sorted((r for r in self.results.values() if r.ok), key=lambda r: r.seconds)
        starts = [int(r.config.index) for r in ok[: SA_CHAINS // 2]]
        starts += [int(i) for i in self.rng.choice(view.valid, size=SA_CHAINS - len(starts))]
        pos = positions_of(np.asarray(starts), view.dims)
        cur = score(np.asarray(starts))
        best: dict[int, float] = {}
        for i, s in zip(starts, cur):
            if i not in self.results:
                best[i] = float(s)
        movable = np.flatnonzero(dims > 1)
        for it in range(SA_ITERS):
            t = SA_TEMP[0] + (SA_TEMP[1] - SA_TEMP[0]) * it / max(SA_ITERS - 1, 1)
            new = pos.copy()
            knob = self.rng.choice(movable, size=len(new))
            new[np.arange(len(new)), knob] = self.rng.integers(dims[knob])
            idx = index_of(new, view.dims)
            s = score(idx)
            accept = self.rng.random(len(new)) < np.exp(np.minimum((s - cur) / (t + 1e-5), 1.0))
            accept &= np.isfinite(s)
            pos[accept], cur[accept] = new[accept], s[accept]
            for i, v in zip(idx[accept].tolist(), s[accept].tolist()):
                if i not in self.results:
                    best[i] = v
            if len(best) > 4 * SA_KEEP:
                best = dict(sorted(best.items(), key=lambda kv: -kv[1])[:SA_KEEP])
        return [i for i, _ in sorted(best.items(), key=lambda kv: -kv[1])[:SA_KEEP]]
