"""The tuning loop (AutoTVM's `tuner.tune`). `tune_task` owns everything tuners must not have to
get right: the measurement budget, the cache (a config is never measured twice), validity (invalid
configs are never sent to the runner; the tuner sees them as `MeasureResult(error="invalid:
<rule>", measured=False)`), early stopping and warm start from records. What happens to the
measurements is up to callbacks, as in AutoTVM (`RecordCallback` = `log_to_file`,
`ProgressCallback` = `progress_bar`). `tune_layer` builds the task and the usual callbacks."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule.knobs import Config, plain_knobs
from codesign.schedule.space import ScheduleSpace
from codesign.tune.measure import INVALID, MeasureInput, MeasureResult, Runner, SimulatorRunner
from codesign.tune.records import DEFAULT_FAMILY, MeasureRecord, RecordWriter, load_records, resolve_config
from codesign.tune.task import TuneTask, make_task
from codesign.tune.tuner import Tuner
from codesign.tune.view import SpaceView
from codesign.workloads.layers import Layer


@dataclass
class TuneResult:
    """Outcome of `tune_layer`. `history` holds every measured result in measurement order
    (warm-start records and unmeasured invalid configs are not in it)."""

    layer: Layer
    hw: HwConfig
    tuner: str
    seed: int
    best: Config | None
    best_seconds: float | None
    best_cycles: int | None
    history: list[MeasureResult] = field(default_factory=list)
    best_result: MeasureResult | None = None  # the best's full measurement (busy cycles, ...)
    measurements: int = 0
    invalid_skipped: int = 0
    stopped: str = "budget"
    warm_skipped: int = 0  # warm-start records of this task whose knobs are no longer a valid schedule

    def curve(self) -> np.ndarray:
        """Best seconds after each measurement (inf until the first success)."""
        best, out = math.inf, []
        for r in self.history:
            if r.ok and r.seconds < best:  # type: ignore[operator]
                best = r.seconds  # type: ignore[assignment]
            out.append(best)
        return np.asarray(out, dtype=float)

    def to_json(self) -> dict:
        best = None
        if self.best is not None:
            best = {"knobs": plain_knobs(self.best.knobs), "index": int(self.best.index),
                    "seconds": self.best_seconds, "cycles": self.best_cycles}
        per_image = None
        batch = getattr(self.layer, "batch", 1) or 1
        if self.best_seconds is not None:
            per_image = self.best_seconds / batch
        return {"layer": self.layer.name, "hw": self.hw.name, "tuner": self.tuner, "seed": self.seed,
                "best": best, "seconds_per_image": per_image, "measurements": self.measurements,
                "invalid_skipped": self.invalid_skipped, "stopped": self.stopped}

    def offer(self, res: MeasureResult) -> bool:
        """Keep `res` if it is the fastest success so far; True if it was."""
        if res.ok and (self.best_result is None or res.seconds < self.best_result.seconds):  # type: ignore[operator]
            self.best_result = res
            self.best, self.best_seconds, self.best_cycles = res.config, res.seconds, res.cycles
            return True
        return False


class TuneCallback:
    """Called after every measured round with the running result and that round's measurements."""

    def __call__(self, result: TuneResult, measured: Sequence[MeasureResult]) -> None:
        """Default: nothing."""

    def close(self) -> None:
        """Called once when the loop ends, however it ends."""


class RecordCallback(TuneCallback):
    """Appends every measurement to a records file (AutoTVM's `log_to_file`). Given an open
    `RecordWriter` it leaves it open for the caller."""

    def __init__(self, records: str | Path | RecordWriter, layer: Layer, hw: HwConfig, tuner: str,
                 seed: int) -> None:
        self._own = isinstance(records, (str, Path))
        self.writer = RecordWriter(records) if isinstance(records, (str, Path)) else records
        self.layer, self.hw, self.tuner, self.seed = layer, hw, tuner, seed

    def __call__(self, result: TuneResult, measured: Sequence[MeasureResult]) -> None:
        now = time.time()
        for res in measured:
            self.writer.write(MeasureRecord.make(self.layer, self.hw, res.config, res.seconds, res.cycles,
                                                 res.error, self.tuner, self.seed, now, source=res.source,
                                                 device_s=res.device_s, call_s=res.call_s))

    def close(self) -> None:
        if self._own:
            self.writer.close()


class ProgressCallback(TuneCallback):
    """A tqdm bar of measurements with the best latency so far (AutoTVM's `progress_bar`)."""

    def __init__(self, total: int, desc: str) -> None:
        self.bar = tqdm(total=total, desc=desc, unit="meas", leave=False)

    def __call__(self, result: TuneResult, measured: Sequence[MeasureResult]) -> None:
        self.bar.update(len(measured))
        if result.best_seconds is not None:
            self.bar.set_postfix_str(f"best {result.best_seconds * 1e3:.4f} ms")

    def close(self) -> None:
        self.bar.close()


def warm_start(task: TuneTask, records: str | Path | Sequence[MeasureRecord] | None,
               result: TuneResult) -> dict[int, MeasureResult]:
    """The cache before the first proposal: this task's records (shown to the tuner, never
    re-measured or counted); records of other layers and configs go to the tuner's `transfer`."""
    if records is None:
        return {}
    recs = load_records(records) if isinstance(records, (str, Path)) else list(records)
    mine, result.warm_skipped = _as_results(recs, task.layer, task.hw, task.space)
    cache = {int(r.config.index): r for r in mine}
    if cache:
        task.tuner.warm_start(list(cache.values()))
    lname, hname = task.layer.name, task.hw.name
    family = task.view.family
    other = [r for r in recs if r.layer != lname or r.hw != hname or r.family != family]
    if other:
        task.tuner.transfer(other)  # cross-task learning (the bandit); a no-op for most tuners
    for r in cache.values():
        result.offer(r)
    return cache


def filter_proposals(task: TuneTask, proposals: Sequence[Config], cache: dict[int, MeasureResult], room: int,
                     result: TuneResult) -> tuple[list[Config], list[MeasureResult]]:
    """(configs to measure, at most `room`; feedback for the tuner without measuring): duplicates
    are dropped, known configs replay their cached result, invalid ones are answered with the rule
    they break (and cached)."""
    to_run: list[Config] = []
    seen: set[int] = set()
    feedback: list[MeasureResult] = []
    for cfg in proposals:
        idx = int(cfg.index)
        if idx in seen:
            continue
        seen.add(idx)
        if idx in cache:  # never measure twice: replay the cached result
            feedback.append(cache[idx])
        elif not task.view.is_valid(idx):
            reason = task.space.why_invalid(cfg) or "not in valid_indices"
            cache[idx] = MeasureResult(cfg, None, None, f"{INVALID}: {reason}", measured=False)
            feedback.append(cache[idx])
            result.invalid_skipped += 1
        elif len(to_run) < room:
            to_run.append(cfg)
    return to_run, feedback


def measure_round(task: TuneTask, runner: Runner, to_run: Sequence[Config], cache: dict[int, MeasureResult],
                  result: TuneResult, since_best: int) -> tuple[list[MeasureResult], int]:
    """Measure `to_run`; (the results, measurements since the best improved)."""
    measured = runner.run([MeasureInput(task.layer, task.hw, c) for c in to_run])
    for res in measured:
        cache[int(res.config.index)] = res
        result.history.append(res)
        result.measurements += 1
        since_best = 0 if result.offer(res) else since_best + 1
    return measured, since_best


def _as_results(records: Iterable[MeasureRecord], layer: Layer, hw: HwConfig, space: ScheduleSpace
                ) -> tuple[list[MeasureResult], int]:
    """(this task's records as results, how many of its records were skipped): resolved by knob
    values, not the stored index (`resolve_config`: the vta family's index changes as it grows);
    a record whose knobs are no longer a valid schedule is skipped and counted."""
    out, skipped = [], 0
    lname, hname = layer.name, hw.name  # properties that format a string: once, not per record
    family = str(getattr(space, "family", "autotvm"))
    for r in records:
        if r.layer != lname or r.hw != hname or r.family != family:
            continue
        if family == DEFAULT_FAMILY:  # a stable index: template records replay even when invalid (no re-proposal)
            try:
                config = space.from_knobs(r.knobs)
            except Exception:  # noqa: BLE001 - knobs not candidates here
                config = None
        else:
            config = resolve_config(space, r.knobs)
        if config is None:
            skipped += 1
            continue
        out.append(MeasureResult(config, r.seconds, r.cycles, r.error, measured=False))
    return out, skipped


class TaskRun:
    """One task's tuning between rounds: `tune_task` steps one to its end; the task scheduler
    (`codesign.tune.scheduler`) steps the tasks of a network where measurements gain most.
    `budget` is the cap of this task (None: the tuner's plan)."""

    def __init__(self, task: TuneTask, *, budget: int | None = 50, seed: int = 0, runner: Runner,
                 warm_start_records: str | Path | Sequence[MeasureRecord] | None = None,
                 seeds: Sequence[Config] = (), patience: int | None = None,
                 callbacks: Sequence[TuneCallback] = ()) -> None:
        if budget is not None and budget < 0:
            raise ConfigError(f"budget={budget}: must be >= 0 measurements")
        self.task, self.runner, self.patience, self.callbacks = task, runner, patience, list(callbacks)
        task.tuner.set_task(task.layer, task.hw)
        self.budget = task.tuner.plan_budget(budget, runner)
        self.result = TuneResult(task.layer, task.hw, task.tuner.name, seed, None, None, None)
        self.cache = warm_start(task, warm_start_records, self.result)
        self.pending = list(seeds)
        self.since_best = self.empty_rounds = 0
        self.done = self.result.measurements >= self.budget

    def step(self, limit: int | None = None) -> int:
        """One round of at most the tuner's batch (and `limit`) measurements; the number made
        (0 on a round whose proposals were all known or invalid). Sets `done` at the end."""
        task, tuner, view, result = self.task, self.task.tuner, self.task.view, self.result
        if self.done:
            return 0
        if view.enumerable and sum(1 for i in self.cache if i in view.valid_set) >= len(view.valid):
            result.stopped, self.done = "exhausted", True  # every valid config is known
            return 0
        room = self.budget - result.measurements
        if limit is not None:
            room = min(room, max(1, limit))
        want = min(tuner.batch_size, room)
        if self.pending:
            proposals, self.pending = self.pending[:want], self.pending[want:]
        else:
            proposals = tuner.propose(want)
        to_run, feedback = filter_proposals(task, proposals, self.cache, room, result)
        if not to_run:
            if feedback:
                tuner.observe(feedback)
            self.empty_rounds += 1
            if self.empty_rounds >= 20 or len(self.cache) >= view.size or not proposals:
                result.stopped, self.done = "exhausted", True
            return 0
        self.empty_rounds = 0
        measured, self.since_best = measure_round(task, self.runner, to_run, self.cache, result, self.since_best)
        tuner.observe(feedback + measured)
        for callback in self.callbacks:
            callback(result, measured)
        if self.patience is not None and self.since_best >= self.patience:
            result.stopped, self.done = "patience", True
        elif result.measurements >= self.budget:
            self.done = True
        return len(measured)

    def close(self) -> None:
        for callback in self.callbacks:
            callback.close()


def tune_task(task: TuneTask, *, budget: int | None = 50, seed: int = 0, runner: Runner,
              warm_start_records: str | Path | Sequence[MeasureRecord] | None = None,
              seeds: Sequence[Config] = (), patience: int | None = None,
              callbacks: Sequence[TuneCallback] = ()) -> TuneResult:
    """Tune `task` with at most `budget` measurements on `runner` (None: as many as the tuner
    plans, `Tuner.plan_budget`: every valid config for `exhaustive`). `seeds` are measured before the
    tuner's own proposals (configs transferred from other hardware); `patience`: stop after that
    many measurements without improving the best."""
    try:
        run = TaskRun(task, budget=budget, seed=seed, runner=runner, warm_start_records=warm_start_records,
                      seeds=seeds, patience=patience, callbacks=callbacks)
    except BaseException:
        for callback in callbacks:
            callback.close()
        raise
    try:
        while not run.done:
            run.step()
    finally:
        run.close()
    return run.result


def tune_layer(layer: Layer, hw: HwConfig, *, tuner: str | Tuner = "xgb", budget: int | None = 50, seed: int = 0,
               records: str | Path | RecordWriter | None = None, agent: Any = None,
               warm_start: str | Path | Sequence[MeasureRecord] | None = None, progress: bool = False,
               runner: Runner | None = None, patience: int | None = None, space: ScheduleSpace | None = None,
               view: SpaceView | None = None, seeds: Sequence[Config] = (),
               callbacks: Sequence[TuneCallback] = (), **tuner_kwargs: Any) -> TuneResult:
    """Tune one layer on one hardware config with at most `budget` measurements (None: the
    tuner's plan, see `tune_task`) (`tune_task` on
    `make_task(layer, hw, tuner, ...)`).

    `records`: JSONL path (or open `RecordWriter`) every measurement is appended to.
    `warm_start`: records (path or list) — those of this layer/hw fill the cache and are shown to
    the tuner without being re-measured or counted; the tuner's `transfer` sees the records of
    other layers and configs (the bandit learns from them). `progress`: a tqdm bar. `runner`
    defaults to `SimulatorRunner(hw)` (closed at the end).
    """
    task = make_task(layer, hw, tuner, seed, agent=agent, space=space, view=view, **tuner_kwargs)
    cbs = list(callbacks)
    if records is not None:
        cbs.append(RecordCallback(records, layer, hw, task.tuner.name, seed))
    if progress:
        cbs.append(ProgressCallback(budget, f"{task.tuner.name} {layer.name}"))
    own_runner = runner is None
    runner = runner or SimulatorRunner(hw)
    try:
        return tune_task(task, budget=budget, seed=seed, runner=runner, warm_start_records=warm_start,
                         seeds=seeds, patience=patience, callbacks=cbs)
    finally:
        if own_runner:
            runner.close()


__all__ = ["ProgressCallback", "RecordCallback", "TaskRun", "TuneCallback", "TuneResult", "filter_proposals",
           "measure_round", "tune_layer", "tune_task", "warm_start"]
