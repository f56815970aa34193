"""AutoTVM-style cost-model tuner: XGBoost ranking model + simulated-annealing proposals.

As AutoTVM's `XGBTuner` (`autotvm/tuner/xgboost_cost_model.py`, `sa_model_optimizer.py`):
after every batch, fit gradient-boosted trees with the pairwise rank objective on the measured
history (label = best / latency, 0 for failures); then run parallel simulated-annealing chains over
knob positions (a move sets one knob to another candidate) scored by the model, keep the best
unmeasured points, and propose the top of them, replacing a fraction `epsilon` by random configs.
Features: the schedule space's fixed-size config features plus normalized knob positions.
The model ranks every valid config of a small space at once and proposes its top (there the
annealing could only approximate that maximum); a large space (`SpaceView`, not enumerated) is
ranked where the search goes (SA chain states, evolutionary populations).

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
from codesign.tune.measure import MeasureResult
from codesign.tune.records import MeasureRecord, family_space, resolve_config
from codesign.tune.tuner import Tuner
from codesign.tune.view import SpaceView, squash
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


def _dmatrix(xgb: Any, data: np.ndarray, **kw: Any) -> Any:
    """An xgboost DMatrix built on one thread: the default (every core) spent ~8 ms per call on thread
    start-up, 30x the conversion of a search step's few hundred rows (the model is the same)."""
    return xgb.DMatrix(data, nthread=1, **kw)


class XGBTuner(Tuner):
    name = "xgb"
    HPARAMS = HPARAMS
    HPARAM_RANGES = HPARAM_RANGES

    def __init__(self, space: Any, seed: int = 0, **kw: Any) -> None:
        super().__init__(space, seed, **kw)
        self.batch_size = int(self.hp["batch_size"])
        self._booster: Any = None  # this task's model (None: not fitted yet)
        self._ready = False  # a model (own or transferred) can rank configs
        self._scores: np.ndarray | None = None  # enumerable spaces: score per valid config (row-aligned)
        self._cache: dict[int, float] = {}  # large spaces: scores computed so far (this fit)
        self._dirty = True
        self._task: tuple[Layer, HwConfig] | None = None
        self._base: Any = None  # xgboost Booster trained on other tasks' records (transfer)

    def _xgb_params(self) -> dict[str, Any]:
        return dict(XGB_PARAMS, max_depth=self.hp["max_depth"], eta=self.hp["eta"], seed=self.seed)

    def set_task(self, layer: Layer, hw: HwConfig) -> None:
        self._task = (layer, hw)

    @staticmethod
    def transfer_inputs(view: SpaceView, layer: Layer, hw: HwConfig, indices: np.ndarray | None = None) -> np.ndarray:
        """Task-independent features of configs (default: every valid one): config features +
        layer + hardware."""
        feats = view.valid_features() if indices is None else view.features(indices)
        ctx = squash(np.concatenate([layer_features(layer), hw_features(hw)]).astype(np.float64))
        return np.hstack([feats, np.broadcast_to(ctx, (feats.shape[0], ctx.size))]).astype(np.float32)

    def transfer(self, records: list[MeasureRecord]) -> None:
        """Train the base model on records of other (layer, hardware) tasks (see module doc)."""
        import xgboost as xgb  # heavy optional library: only the XGBoost tuner needs it

        groups: dict[tuple[str, str, str], list[MeasureRecord]] = {}
        for r in records:
            groups.setdefault((r.layer_spec, r.hw, r.family), []).append(r)
        xs, labels, qid = [], [], []
        for q, ((spec, hw_name, family), recs) in enumerate(list(groups.items())[:TRANSFER_MAX_TASKS]):
            try:
                layer, hw = parse_layer(spec), HwConfig.resolve(hw_name)
                view = SpaceView(family_space(layer, hw, family))
            except Exception:  # noqa: BLE001, S112 - records of a layer/config we cannot rebuild: skip
                continue
            configs = [resolve_config(view.space, r.knobs) for r in recs]  # by knobs: vta indices change
            recs = [r for r, c in zip(recs, configs) if c is not None]
            idx = np.asarray([int(c.index) for c in configs if c is not None], dtype=np.int64)
            keep = [(int(i), r) for i, r, ok in zip(idx, recs, view.valid_mask(idx)) if ok]
            ok = [r.seconds for _, r in keep if r.ok]
            if len(keep) < 2 or not ok:
                continue
            best = min(ok)
            xs.append(self.transfer_inputs(view, layer, hw, np.asarray([i for i, _ in keep], dtype=np.int64)))
            labels += [best / r.seconds if r.ok else 0.0 for _, r in keep]
            qid += [q] * len(keep)
        if not xs:
            return
        dtrain = _dmatrix(xgb, np.vstack(xs), label=np.asarray(labels, dtype=np.float32))
        dtrain.set_group(np.unique(np.asarray(qid), return_counts=True)[1])
        self._base = xgb.train(self._xgb_params(), dtrain, num_boost_round=self.hp["num_rounds"])
        self._dirty = True

    def observe(self, results: Sequence[MeasureResult]) -> None:
        super().observe(results)
        self._dirty = True

    # -- model ------------------------------------------------------------------------------
    def _inputs(self, indices: np.ndarray | None = None) -> np.ndarray:
        """Model inputs of configs (default: every valid one): features + normalized positions."""
        dims = np.maximum(np.asarray(self.view.dims) - 1, 1)
        if indices is None:
            return np.hstack([self.view.valid_features(), self.view.valid_pos / dims]).astype(np.float32)
        return np.hstack([self.view.features(indices), self.view.positions(indices) / dims]).astype(np.float32)

    def _margin(self, indices: np.ndarray | None = None) -> np.ndarray | None:
        """The transferred model's score of configs (default: every valid one); None without one."""
        if self._base is None:
            return None
        import xgboost as xgb  # heavy optional library: only the XGBoost tuner needs it

        layer, hw = self._task if self._task is not None else (self.space.layer, self.space.hw)
        return self._base.predict(_dmatrix(xgb, self.transfer_inputs(self.view, layer, hw, indices))).astype(np.float64)

    def _predict(self, indices: np.ndarray | None = None) -> np.ndarray:
        import xgboost as xgb  # heavy optional library: only the XGBoost tuner needs it

        margin = self._margin(indices)
        if self._booster is None:
            assert margin is not None
            return margin  # too few own measurements: rank by the transferred model
        return self._booster.predict(_dmatrix(xgb, self._inputs(indices), base_margin=margin)).astype(np.float64)

    def _fit(self) -> bool:
        import xgboost as xgb

        self._booster, self._scores, self._cache = None, None, {}
        measured = [r for r in self.results.values() if r.measured or r.ok]
        ok = [r for r in measured if r.ok]
        if len(ok) < self.hp["min_train"]:
            if self._base is None:
                return False
        else:
            best = min(r.seconds for r in ok)
            idx = np.asarray([int(r.config.index) for r in measured], dtype=np.int64)
            keep = self.view.valid_mask(idx)  # invalid configs are never candidates: no need to rank them
            labels = np.asarray([best / r.seconds if r.ok else 0.0 for r in measured], dtype=np.float32)[keep]
            idx = idx[keep]
            margin = self._margin(idx)
            dtrain = _dmatrix(xgb, self._inputs(idx), label=labels, base_margin=margin)
            self._booster = xgb.train(self._xgb_params(), dtrain, num_boost_round=self.hp["num_rounds"])
        if self.view.enumerable:
            self._scores = self._predict()
        return True

    def score(self, indices: np.ndarray, *, exact: bool = True) -> np.ndarray:
        """Model score of configs (higher = faster); -inf for invalid ones (`exact=False`: the
        view's cheaper superset of the valid ones, `SpaceView.valid_mask`). Call after `_fit`."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        out = np.full(idx.size, -np.inf)
        ok = self.view.valid_mask(idx, exact=exact)
        if self._scores is not None:  # enumerable: every valid config scored at fit time
            out[ok] = self._scores[np.searchsorted(self.view.valid, idx[ok])]
            return out
        cache = self._cache
        miss = np.unique(idx[ok][[int(i) not in cache for i in idx[ok]]]) if ok.any() else idx[:0]
        if miss.size:
            cache.update(zip(miss.tolist(), self._predict(miss).tolist()))
        out[ok] = [cache[int(i)] for i in idx[ok]]
        return out

    def _model(self) -> bool:
        """Refit after new observations; True if a model can rank configs."""
        if self._dirty:
            self._ready = self._fit()
            self._dirty = False
        return self._ready

    # -- proposals --------------------------------------------------------------------------
    def propose(self, n: int) -> list[Config]:
        if not self._model():
            return [self.view.config(i) for i in self.random_unmeasured(n)]
        return [self.view.config(i) for i in self.pick(self._search(), n)]

    def pick(self, plan: list[int], n: int) -> list[int]:
        """The first `n` of `plan` (best first), each replaced by a random unmeasured config with
        probability `epsilon` (AutoTVM's and Ansor's epsilon-greedy); topped up at random."""
        chosen: list[int] = []
        for idx in plan:
            if len(chosen) >= n:
                break
            if self.rng.random() < self.hp["epsilon"]:
                chosen += self.random_unmeasured(1, exclude=chosen + plan)
            else:
                chosen.append(idx)
        if len(chosen) < n:
            chosen += self.random_unmeasured(n - len(chosen), exclude=chosen)
        return chosen[:n]

    def _search(self) -> list[int]:
        # Annealing searches a space too large to score; where the fit scored every valid config
        # (an enumerable view) its maximum is read off exactly: on a 5,000-schedule sample of
        # ResNet-18's 56x56 3x3 conv (tuners.py) XGBoost with transfer reached 99% of the optimum
        # within 352-2,104 measurements annealing, 32-40 proposing the model's own top.
        return self._ranked() if self._scores is not None else self._anneal()

    def _ranked(self) -> list[int]:
        """The `sa_keep` unmeasured valid configs the model scores highest (enumerable views)."""
        assert self._scores is not None
        order = np.argsort(-self._scores, kind="stable")
        fresh = ~np.isin(self.view.valid[order], np.fromiter(self.results, dtype=np.int64, count=len(self.results)))
        return self.view.valid[order[fresh][: self.hp["sa_keep"]]].tolist()

    def _starts(self, n: int) -> list[int]:
        """Search starts: the best measured configs (up to half) and random valid ones."""
        ok = sorted((r for r in self.results.values() if r.ok), key=lambda r: r.seconds)
        starts = [int(r.config.index) for r in ok[: n // 2]]
        return starts + self.view.sample_valid(n - len(starts), self.rng, exclude=set(starts), strata=True)

    def _anneal(self) -> list[int]:
        """Simulated annealing over knob positions (`SpaceView.mutate_positions`: one knob moves
        per step); returns unmeasured valid indices, best first. The chains walk the view's cheap
        validity (`exact=False`); the points kept are checked exactly at the end."""
        view = self.view
        starts = self._starts(self.hp["sa_chains"])
        if not starts:
            return []
        first = self.score(np.asarray(starts))
        finite = first[np.isfinite(first)]
        scale = float(np.std(self._scores if self._scores is not None else finite)) or 1.0
        pos = view.positions(np.asarray(starts))
        cur = first / scale
        best: dict[int, float] = {i: float(s) for i, s in zip(starts, cur) if i not in self.results}
        sa_iters = self.hp["sa_iters"]
        for it in range(sa_iters):
            t = SA_TEMP[0] + (SA_TEMP[1] - SA_TEMP[0]) * it / max(sa_iters - 1, 1)
            new = view.mutate_positions(pos, self.rng)
            idx = view.index(new)
            s = self.score(idx, exact=False) / scale
            accept = self.rng.random(len(new)) < np.exp(np.minimum((s - cur) / (t + 1e-5), 1.0))
            accept &= np.isfinite(s)
            pos[accept], cur[accept] = new[accept], s[accept]
            for i, v in zip(idx[accept].tolist(), s[accept].tolist()):
                if i not in self.results:
                    best[i] = v
            if len(best) > 4 * self.hp["sa_keep"]:
                best = dict(sorted(best.items(), key=lambda kv: -kv[1])[:self.hp["sa_keep"]])
        ranked = np.asarray([i for i, _ in sorted(best.items(), key=lambda kv: -kv[1])], dtype=np.int64)
        out: list[int] = []
        for part in range(0, ranked.size, self.hp["sa_keep"]):  # the best sa_keep that are exactly valid
            chunk = ranked[part:part + self.hp["sa_keep"]]
            out += chunk[view.valid_mask(chunk)].tolist()
            if len(out) >= self.hp["sa_keep"]:
                break
        return out[:self.hp["sa_keep"]]
