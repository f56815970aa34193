"""A Ray Tune searcher wrapper that spends trials only on new, feasible hardware configs.

Feasibility (board resources, clock, space constraints, a valid VTA config) is known without any
simulation, and a config's objectives do not change when it is evaluated again. So when the
wrapped searcher suggests an infeasible config, or one already evaluated, the wrapper answers it on
the spot (the penalty objectives of `trial.infeasible_result`, or the known objectives), the
searcher learns from that answer, and it is asked again. Only a new feasible config becomes a Ray
trial. Infeasible suggestions are logged once per config with the reason to `skipped.jsonl`.
This runs in the driver's main thread (Ray calls searchers there).
"""

from __future__ import annotations

import pickle
import random
import time
from pathlib import Path
from typing import Any

from ray.tune.search import Searcher

from codesign.fileio import append_jsonl
from codesign.hw.config import HwConfig
from codesign.hw.space import HwSpace
from codesign.sweep.rows import TrialRow
from codesign.sweep.trial import OBJECTIVES, infeasible_result, searcher_metrics

SKIPPED_FILE = "skipped.jsonl"
MAX_TRIES = 25  # suggestions per trial before falling back to an unevaluated feasible config


class FeasibleSearch(Searcher):
    objectives: tuple[str, ...] = OBJECTIVES  # point keys in the inner searcher's metric order (older pickles)

    def __init__(self, inner: Searcher, space: HwSpace, out_dir: str | None = None, seed: int = 0,
                 max_tries: int = MAX_TRIES, objectives: tuple[str, ...] = OBJECTIVES) -> None:
        super().__init__(metric=inner.metric, mode=inner.mode)
        self.objectives = tuple(objectives)  # point keys, in the inner searcher's metric order
        self.inner = inner
        self.space = space
        self.out_dir = out_dir
        self.max_tries = max_tries
        self.rng = random.Random(seed)
        self.known: dict[str, dict[str, float]] = {}  # config name -> objectives
        self.alias: dict[str, str | None] = {}  # Ray trial id -> inner trial id (None: not the searcher's)
        self.config_of: dict[str, str] = {}  # Ray trial id -> config name
        self.pending: dict[str, list[str]] = {}  # config in flight -> inner ids waiting for its result
        self.logged: set[str] = set()
        self.suggestions = 0  # everything the inner searcher proposed
        self.answered = 0  # of which answered without a trial (infeasible or already known)

    # -- plumbing ------------------------------------------------------------------------------
    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        return self.inner.set_search_properties(metric, mode, config, **spec)

    def save(self, checkpoint_path: str) -> None:
        state = self.__dict__.copy()
        del state["space"]  # Ray pickles the searcher (and its space) itself; restore keeps ours
        with open(checkpoint_path, "wb") as f:
            pickle.dump(state, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))

    def preload(self, rows: list[TrialRow]) -> None:
        """Objectives of configs already evaluated in this directory (a resume that Ray's own
        state cannot restore): the searcher is not spent on them again."""
        for row in rows:
            objectives = row.objectives(self.objectives)
            if row.ok and row.config and objectives is not None:
                self.known.setdefault(row.config, objectives)

    # -- the filter ----------------------------------------------------------------------------
    def _answer(self, params: dict[str, Any]) -> tuple[str, dict[str, float] | None]:
        """(config name, objectives if known without a trial)."""
        hw, reason = self.space.check(dict(params))
        if hw is None:
            name = "invalid:" + ",".join(f"{k}={v}" for k, v in params.items())
            return name, self._infeasible(name, params, reason or "invalid point", None)
        if reason is not None:
            return hw.name, self._infeasible(hw.name, params, reason, hw)
        return hw.name, self.known.get(hw.name)

    def _infeasible(self, name: str, params: dict, reason: str, hw: HwConfig | None) -> dict[str, float]:
        if name not in self.known:
            res = infeasible_result(hw, reason, self.space.board, name=name,
                                    resources=self.space.estimate(hw) if hw is not None else None)
            self.known[name] = searcher_metrics(res, self.objectives)
            if self.out_dir is not None and name not in self.logged:
                self.logged.add(name)
                append_jsonl(Path(self.out_dir) / SKIPPED_FILE,
                            {"config": name, "params": dict(params), "reason": reason, "timestamp": time.time()})
        return self.known[name]

    def suggest(self, trial_id: str) -> dict | str | None:
        for attempt in range(self.max_tries):
            sub = trial_id if attempt == 0 else f"{trial_id}_r{attempt}"
            params = self.inner.suggest(sub)
            if params is None or params == Searcher.FINISHED:
                return params
            self.suggestions += 1
            name, objectives = self._answer(params)
            if objectives is not None:
                self.answered += 1
                self.inner.on_trial_complete(sub, dict(objectives))
                continue
            if name in self.pending:  # in flight: answer this one when that trial finishes
                self.answered += 1
                self.pending[name].append(sub)
                continue
            self.pending[name] = []
            self.alias[trial_id] = sub
            self.config_of[trial_id] = name
            return params
        return self._fallback(trial_id)

    def _fallback(self, trial_id: str) -> dict | str:
        """The searcher keeps proposing known configs: evaluate an unevaluated feasible one (the
        searcher is not told about it), or finish when every feasible config has been evaluated."""
        space = self.space
        fresh = [(p, hw) for p, hw in zip(space.enumerate_points(), space.enumerate())
                 if hw.name not in self.known and hw.name not in self.pending]
        if not fresh:
            return Searcher.FINISHED
        params, hw = self.rng.choice(fresh)
        name = hw.name
        self.pending[name] = []
        self.alias[trial_id] = None
        self.config_of[trial_id] = name
        return params

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        sub = self.alias.get(trial_id)
        if sub is not None:
            self.inner.on_trial_result(sub, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        sub = self.alias.pop(trial_id, None)
        name = self.config_of.pop(trial_id, None)
        waiting = self.pending.pop(name, []) if name is not None else []
        objectives = None
        if result and not error and all(k in result for k in self.objectives):
            objectives = {k: float(result[k]) for k in self.objectives}
            self.known[name] = objectives  # type: ignore[index]
        if sub is not None:
            self.inner.on_trial_complete(sub, result, error)
        for w in waiting:
            self.inner.on_trial_complete(w, dict(objectives) if objectives else None, objectives is None)
