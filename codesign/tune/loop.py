"""The tuning loop (AutoTVM's `tuner.tune`): `tune_layer` owns everything tuners must not have to
get right: the measurement budget, the cache (a config is never measured twice), validity (invalid
configs are never sent to the runner; the tuner sees them as `MeasureResult(error="invalid:
<rule>", measured=False)`), early stopping, warm start from records, the records file and the
progress bar."""

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
from codesign.schedule.knobs import Config
from codesign.schedule.space import ScheduleSpace
from codesign.tune.measure import INVALID, MeasureInput, MeasureResult, Runner, SimulatorRunner
from codesign.tune.records import MeasureRecord, RecordWriter, _plain, load_records
from codesign.tune.registry import make_tuner
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
    measurements: int = 0
    invalid_skipped: int = 0
    stopped: str = "budget"

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
            best = {"knobs": _plain(self.best.knobs), "index": int(self.best.index),
                    "seconds": self.best_seconds, "cycles": self.best_cycles}
        per_image = None
        batch = getattr(self.layer, "batch", 1) or 1
        if self.best_seconds is not None:
            per_image = self.best_seconds / batch
        return {"layer": self.layer.name, "hw": self.hw.name, "tuner": self.tuner, "seed": self.seed,
                "best": best, "seconds_per_image": per_image, "measurements": self.measurements,
                "invalid_skipped": self.invalid_skipped, "stopped": self.stopped}


def _as_results(records: Iterable[MeasureRecord], layer: Layer, hw: HwConfig, space: ScheduleSpace) -> list[MeasureResult]:
    out = []
    for r in records:
        if r.layer != layer.name or r.hw != hw.name:
            continue
        try:
            config = space.from_knobs(r.knobs)  # knobs, not the index: robust to space changes
        except Exception:  # noqa: BLE001 - a record that is not a candidate here: ignore it
            continue
        out.append(MeasureResult(config, r.seconds, r.cycles, r.error, measured=False))
    return out


def tune_layer(layer: Layer, hw: HwConfig, *, tuner: str | Tuner = "xgb", budget: int = 50, seed: int = 0,
               records: str | Path | RecordWriter | None = None, agent: Any = None,
               warm_start: str | Path | Sequence[MeasureRecord] | None = None, progress: bool = False,
               runner: Runner | None = None, patience: int | None = None, space: ScheduleSpace | None = None,
               view: SpaceView | None = None, callback: Any = None, **tuner_kwargs: Any) -> TuneResult:
    """Tune one layer on one hardware config with at most `budget` measurements.

    `records`: JSONL path (or open `RecordWriter`) every measurement is appended to.
    `warm_start`: records (path or list) — those of this layer/hw fill the cache and are shown to
    the tuner without being re-measured or counted; tuners with a `transfer(records)` method (the
    bandit) also learn from the records of other layers and configs. `patience`: stop after that many measurements
    without improving the best. `runner` defaults to `SimulatorRunner(hw)`.
    """
    if budget < 0:
        raise ConfigError(f"budget={budget}: must be >= 0 measurements")
    if space is None:
        space = ScheduleSpace(layer, hw)
    view = view or SpaceView(space)
    tuner_name = tuner if isinstance(tuner, str) else tuner.name
    tuner_obj = make_tuner(tuner, space, seed, agent=agent, view=view, **tuner_kwargs) \
        if isinstance(tuner, str) else tuner
    tuner_obj.set_task(layer, hw)
    own_runner = runner is None
    runner = runner or SimulatorRunner(hw)
    writer = RecordWriter(records) if isinstance(records, (str, Path)) else records

    cache: dict[int, MeasureResult] = {}
    if warm_start is not None:
        recs = load_records(warm_start) if isinstance(warm_start, (str, Path)) else list(warm_start)
        warm = _as_results(recs, layer, hw, space)
        for r in warm:
            cache[int(r.config.index)] = r
        if warm:
            tuner_obj.warm_start(list(cache.values()))
        other = [r for r in recs if r.layer != layer.name or r.hw != hw.name]
        if other:
            tuner_obj.transfer(other)  # records of other layers / configs (cross-task learning)

    result = TuneResult(layer, hw, tuner_name, seed, None, None, None)
    best: MeasureResult | None = None
    for r in cache.values():
        if r.ok and (best is None or r.seconds < best.seconds):  # type: ignore[operator]
            best = r
    since_best = 0
    empty_rounds = 0
    bar = None
    if progress:
        bar = tqdm(total=budget, desc=f"{tuner_name} {layer.name}", unit="meas", leave=False)
    try:
        while result.measurements < budget:
            if sum(1 for i in cache if i in view.valid_set) >= len(view.valid):
                result.stopped = "exhausted"  # every valid config is known
                break
            want = min(tuner_obj.batch_size, budget - result.measurements)
            proposals = tuner_obj.propose(want)
            to_run, seen, feedback = [], set(), []
            for cfg in proposals:
                idx = int(cfg.index)
                if idx in seen:
                    continue
                seen.add(idx)
                if idx in cache:  # never measure twice: replay the cached result
                    feedback.append(cache[idx])
                    continue
                if not view.is_valid(idx):
                    reason = space.why_invalid(cfg) or "not in valid_indices"
                    res = MeasureResult(cfg, None, None, f"{INVALID}: {reason}", measured=False)
                    cache[idx] = res
                    feedback.append(res)
                    result.invalid_skipped += 1
                    continue
                if len(to_run) < budget - result.measurements:
                    to_run.append(cfg)
            if not to_run:
                if feedback:
                    tuner_obj.observe(feedback)
                empty_rounds += 1
                if empty_rounds >= 20 or len(cache) >= view.size or not proposals:
                    result.stopped = "exhausted"
                    break
                continue
            empty_rounds = 0
            measured = runner.run([MeasureInput(layer, hw, c) for c in to_run])
            now = time.time()
            for res in measured:
                cache[int(res.config.index)] = res
                result.history.append(res)
                result.measurements += 1
                if writer is not None:
                    writer.write(MeasureRecord.make(layer, hw, res.config, res.seconds, res.cycles, res.error,
                                                    tuner_name, seed, now))
                if res.ok and (best is None or res.seconds < best.seconds):  # type: ignore[operator]
                    best, since_best = res, 0
                else:
                    since_best += 1
            tuner_obj.observe(feedback + measured)
            if bar is not None:
                bar.update(len(measured))
                if best is not None:
                    bar.set_postfix_str(f"best {best.seconds * 1e3:.4f} ms")
            if callback is not None:
                callback(result, best)
            if patience is not None and since_best >= patience:
                result.stopped = "patience"
                break
    finally:
        if bar is not None:
            bar.close()
        if own_runner:
            runner.close()
        if writer is not None and writer is not records:
            writer.close()
    if best is not None:
        result.best, result.best_seconds, result.best_cycles = best.config, best.seconds, best.cycles
    return result


__all__ = ["TuneResult", "tune_layer"]
