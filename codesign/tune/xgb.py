"""AutoTVM-style cost-model tuner: XGBoost ranking model + simulated-annealing proposals.

As AutoTVM's `XGBTuner` (`autotvm/tuner/xgboost_cost_model.py`, `sa_model_optimizer.py`):
after every batch, fit gradient-boosted trees with the pairwise rank objective on the measured
history (label = best / latency, 0 for failures); then run parallel simulated-annealing chains over
knob positions (a move sets one knob to another candidate) scored by the model, keep the best
unmeasured points, and propose the top of them, replacing a fraction `epsilon` by random configs.
Features: the schedule space's fixed-size config features plus normalized knob positions.

Transfer (AutoTVM's `XGBTuner` with a `base_model`, `load_history`): `transfer(records)` trains
a base model on records of other layers and hardware configs — the rank objective with one query
group per (layer, config) task, on task-independent features (config features plus the layer's
and the hardware's, `codesign.schedule.features`). Its scores rank this task's configs before
anything is measured, and once the task's own model is fitted they are its base margin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from codesign.hw.config import HwConfig
from codesign.schedule.features import hw_features, layer_features
from codesign.schedule.knobs import Config
from codesign.schedule.space import ScheduleSpace, get_space
from codesign.tune.measure import MeasureResult
from codesign.tune.records import MeasureRecord
from codesign.tune.tuner import Tuner
from codesign.tune.view import SpaceView, index_of, positions_of, squash
from codesign.workloads.layers import Layer, parse_layer

# Hyper-parameters (AutoTVM defaults where they exist; budgets here are 10x smaller).
HPARAMS = {
    "batch_size": 8,  # AutoTVM plan_size is 64 for 1000-trial budgets
    "epsilon": 0.05,  # fraction of random proposals
    "min_train": 8,  # successful measurements before the model is used
    "num_rounds": 100,  # boosting rounds
    "max_depth": 3,
    "eta": 0.3,
    "sa_chains": 64,  # simulated-annealing chains
    "sa_iters": 120,
    "sa_keep": 64,  # best unmeasured points kept from the chains
}
# Bounds a --hparam value must keep (inclusive; the rest only need >= 0).
HPARAM_RANGES = {"batch_size": (1, None), "epsilon": (0, 1), "num_rounds": (1, None), "max_depth": (1, None),
                 "sa_chains": (1, None), "sa_keep": (1, None)}
XGB_PARAMS = {"objective": "rank:pairwise", "gamma": 1e-4, "min_child_weight": 1, "subsample": 1.0,
              "lambda": 1.0, "alpha": 0.0, "nthread": 1, "verbosity": 0}
SA_TEMP = (1.0, 0.0)  # linear schedule, AutoTVM's default
TRANSFER_MAX_TASKS = 64  # (layer, config) groups of records the base model learns from


class XGBTuner(Tuner):
    name = "xgb"
    HPARAMS = HPARAMS
    HPARAM_RANGES = HPARAM_RANGES

    def __init__(self, space: ScheduleSpace, seed: int = 0, **kw: Any) -> None:
        super().__init__(space, seed, **kw)
        self.batch_size = int(self.hp["batch_size"])
        self._scores: np.ndarray | None = None  # model score per valid config (row-aligned)
        self._dirty = True
        self._task: tuple[Layer, HwConfig] | None = None
        self._base: Any = None  # xgboost Booster trained on other tasks' records (transfer)
        self._base_scores: np.ndarray | None = None

    def _xgb_params(self) -> dict[str, Any]:
        return dict(XGB_PARAMS, max_depth=self.hp["max_depth"], eta=self.hp["eta"], seed=self.seed)

    def set_task(self, layer: Layer, hw: HwConfig) -> None:
        self._task = (layer, hw)

    @staticmethod
    def transfer_inputs(view: SpaceView, layer: Layer, hw: HwConfig, rows: np.ndarray | None = None) -> np.ndarray:
        """Task-independent features of valid configs: config features + layer + hardware."""
        feats = view.valid_features() if rows is None else view.valid_features()[rows]
        ctx = squash(np.concatenate([layer_features(layer), hw_features(hw)]).astype(np.float64))
        return np.hstack([feats, np.broadcast_to(ctx, (feats.shape[0], ctx.size))]).astype(np.float32)

    def transfer(self, records: list[MeasureRecord]) -> None:
        """Train the base model on records of other (layer, hardware) tasks (see module doc)."""
        import xgboost as xgb  # heavy optional library: only the XGBoost tuner needs it

        groups: dict[tuple[str, str], list[MeasureRecord]] = {}
        for r in records:
            groups.setdefault((r.layer_spec, r.hw), []).append(r)
        xs, labels, qid = [], [], []
        for q, ((spec, hw_name), recs) in enumerate(list(groups.items())[:TRANSFER_MAX_TASKS]):
            try:
                layer, hw = parse_layer(spec), HwConfig.resolve(hw_name)
                view = SpaceView(get_space(layer, hw))
                rows = {int(i): k for k, i in enumerate(view.valid)}
                keep = [(rows[int(view.space.from_knobs(r.knobs).index)], r) for r in recs]
            except Exception:  # noqa: BLE001, S112 - records of a layer/config we cannot rebuild: skip
                continue
            ok = [r.seconds for _, r in keep if r.ok]
            if len(keep) < 2 or not ok:
                continue
            best = min(ok)
            xs.append(self.transfer_inputs(view, layer, hw, np.asarray([k for k, _ in keep])))
            labels += [best / r.seconds if r.ok else 0.0 for _, r in keep]
            qid += [q] * len(keep)
        if not xs:
            return
        dtrain = xgb.DMatrix(np.vstack(xs), label=np.asarray(labels, dtype=np.float32))
        dtrain.set_group(np.unique(np.asarray(qid), return_counts=True)[1])
        self._base = xgb.train(self._xgb_params(), dtrain, num_boost_round=self.hp["num_rounds"])
        self._base_scores = None
        self._dirty = True

    def _base_margin(self) -> np.ndarray | None:
        if self._base is None:
            return None
        if self._base_scores is None:
            import xgboost as xgb  # heavy optional library: only the XGBoost tuner needs it

            layer, hw = self._task if self._task is not None else (self.space.layer, self.space.hw)
            x = self.transfer_inputs(self.view, layer, hw)
            self._base_scores = self._base.predict(xgb.DMatrix(x)).astype(np.float64)
        return self._base_scores

    def observe(self, results: Sequence[MeasureResult]) -> None:
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
        margin = self._base_margin()
        if len(ok) < self.hp["min_train"]:
            if margin is None:
                return False
            self._scores = margin  # too few own measurements: rank by the transferred model
            return True
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
        sel = np.asarray(rows)
        dtrain = xgb.DMatrix(x[sel], label=np.asarray(labels, dtype=np.float32),
                             base_margin=None if margin is None else margin[sel])
        booster = xgb.train(self._xgb_params(), dtrain, num_boost_round=self.hp["num_rounds"])
        self._scores = booster.predict(xgb.DMatrix(x, base_margin=margin)).astype(np.float64)
        return True

    # -- proposals --------------------------------------------------------------------------
    def propose(self, n: int) -> list[Config]:
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
            if self.rng.random() < self.hp["epsilon"]:
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
        starts = [int(r.config.index) for r in ok[: self.hp["sa_chains"] // 2]]
        starts += [int(i) for i in self.rng.choice(view.valid, size=self.hp["sa_chains"] - len(starts))]
        pos = positions_of(np.asarray(starts), view.dims)
        cur = score(np.asarray(starts))
        best: dict[int, float] = {}
        for i, s in zip(starts, cur):
            if i not in self.results:
                best[i] = float(s)
        movable = np.flatnonzero(dims > 1)
        sa_iters = self.hp["sa_iters"]
        for it in range(sa_iters):
            t = SA_TEMP[0] + (SA_TEMP[1] - SA_TEMP[0]) * it / max(sa_iters - 1, 1)
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
            if len(best) > 4 * self.hp["sa_keep"]:
                best = dict(sorted(best.items(), key=lambda kv: -kv[1])[:self.hp["sa_keep"]])
        return [i for i, _ in sorted(best.items(), key=lambda kv: -kv[1])[:self.hp["sa_keep"]]]
