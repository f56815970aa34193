"""Tuner interface and the tuning driver (AutoTVM's task / space / tuner / measure split).

A `Tuner` proposes configs (`propose(n)`) and learns from results (`observe(results)`). The driver
`tune_layer` owns everything tuners must not have to get right: the measurement budget, the cache
(a config is never measured twice), validity (invalid configs are never sent to the runner; the
tuner sees them as `MeasureResult(error="invalid: <rule>", measured=False)`), early stopping,
warm start from records, the records file and the progress bar.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.tune.measure import INVALID, MeasureInput, MeasureResult, Runner, SimulatorRunner
from codesign.tune.records import MeasureRecord, RecordWriter, load_records

TUNERS = ("random", "grid", "ga", "xgb", "bandit", "ppo", "dqn")
FULL_FEATURES = 1 << 17  # featurize whole spaces up to this size (VTA spaces are a few thousand)


# -- mixed-radix helpers (reference §8: the first-defined knob is the least-significant digit) --
def positions_of(indices: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """(n,) config indices -> (n, n_knobs) knob positions."""
    idx = np.asarray(indices, dtype=np.int64).copy()
    out = np.empty((idx.shape[0], len(dims)), dtype=np.int64)
    for k, d in enumerate(dims):
        out[:, k] = idx % d
        idx //= d
    return out


def index_of(positions: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """(n, n_knobs) knob positions -> (n,) config indices."""
    pos = np.asarray(positions, dtype=np.int64)
    strides = np.cumprod([1, *dims[:-1]]).astype(np.int64)
    return pos @ strides


def squash(x: np.ndarray) -> np.ndarray:
    """Signed log1p: keeps small features (log2 sizes, fractions) and tames large counts."""
    return np.sign(x) * np.log1p(np.abs(x))


class SpaceView:
    """What every tuner needs from a `ScheduleSpace`, computed once: dims, valid indices and
    their knob positions, and fast validity lookup by index."""

    def __init__(self, space: Any) -> None:
        self.space = space
        self.dims = tuple(int(d) for d in space.dims)
        self.size = int(space.size)
        self.valid = np.sort(np.asarray(space.valid_indices(), dtype=np.int64))
        self.valid_set = set(self.valid.tolist())
        self.valid_pos = positions_of(self.valid, self.dims)
        self._valid_feats: np.ndarray | None = None
        self._all_feats: np.ndarray | None = None
        self._row: dict[int, int] = {}

    # -- features (fixed length, `codesign.schedule`); squashed so counts and sizes share a scale --
    def valid_features(self) -> np.ndarray:
        """(n_valid, F) float32 features of `self.valid`, row-aligned; computed once."""
        if self._valid_feats is None:
            self._valid_feats = self._features(self.valid)
            self._row = {int(i): r for r, i in enumerate(self.valid)}
        return self._valid_feats

    def features(self, indices: Sequence[int]) -> np.ndarray:
        """Features of any configs (valid or not) by index. For spaces up to `FULL_FEATURES`
        configs the whole grid is featurized once (RL agents walk through invalid configs too)."""
        idx = np.asarray(indices, dtype=np.int64)
        if self.size <= FULL_FEATURES:
            if self._all_feats is None:
                self._all_feats = self._features(np.arange(self.size, dtype=np.int64))
            return self._all_feats[idx]
        feats = self.valid_features()
        rows = [self._row.get(int(i)) for i in idx]
        if all(r is not None for r in rows):
            return feats[np.asarray(rows, dtype=np.int64)] if rows else feats[:0]
        return self._features(idx)

    def _features(self, indices: np.ndarray) -> np.ndarray:
        raw = np.asarray(self.space.features_batch(np.asarray(indices, dtype=np.int64)), dtype=np.float64)
        if raw.size == 0:
            return np.zeros((0, self.n_features), dtype=np.float32)
        return squash(raw).astype(np.float32)

    @property
    def n_features(self) -> int:
        return int(self.valid_features().shape[1])

    def is_valid(self, index: int) -> bool:
        return int(index) in self.valid_set

    def config(self, index: int) -> Any:
        return self.space.get(int(index))


class Tuner:
    """Base tuner. Subclasses implement `propose`; `observe` keeps `self.results` (index ->
    MeasureResult, including unmeasured invalid ones) which most tuners consult."""

    name = "base"
    batch_size = 8  # configs the driver asks for per round

    def __init__(self, space: Any, seed: int = 0, view: SpaceView | None = None) -> None:
        self.space = space
        self.view = view or SpaceView(space)
        self.seed = int(seed)
        self.rng = np.random.default_rng(seed)
        self.results: dict[int, MeasureResult] = {}

    @property
    def measured(self) -> set[int]:
        return set(self.results)

    def propose(self, n: int) -> list[Any]:
        raise NotImplementedError

    def observe(self, results: Sequence[MeasureResult]) -> None:
        for r in results:
            self.results[int(r.config.index)] = r

    def warm_start(self, results: Sequence[MeasureResult]) -> None:
        """Results from earlier runs of the same layer/hw (records). Default: plain observations."""
        self.observe(results)

    # helpers ------------------------------------------------------------------------------
    def unmeasured_valid(self) -> np.ndarray:
        if not self.results:
            return self.view.valid
        mask = ~np.isin(self.view.valid, np.fromiter(self.results, dtype=np.int64))
        return self.view.valid[mask]

    def random_unmeasured(self, n: int, exclude: Iterable[int] = ()) -> list[int]:
        pool = self.unmeasured_valid()
        ex = set(exclude)
        if ex:
            pool = pool[~np.isin(pool, np.fromiter(ex, dtype=np.int64))]
        if pool.size == 0:
            return []
        return [int(i) for i in self.rng.choice(pool, size=min(n, pool.size), replace=False)]

    def best(self) -> MeasureResult | None:
        ok = [r for r in self.results.values() if r.ok]
        return min(ok, key=lambda r: r.seconds) if ok else None


@dataclass
class TuneResult:
    """Outcome of `tune_layer`. `history` holds every measured result in measurement order
    (warm-start records and unmeasured invalid configs are not in it)."""

    layer: Any
    hw: Any
    tuner: str
    seed: int
    best: Any | None
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
            from codesign.tune.records import _plain

            best = {"knobs": _plain(self.best.knobs), "index": int(self.best.index),
                    "seconds": self.best_seconds, "cycles": self.best_cycles}
        per_image = None
        batch = getattr(self.layer, "batch", 1) or 1
        if self.best_seconds is not None:
            per_image = self.best_seconds / batch
        return {"layer": self.layer.name, "hw": self.hw.name, "tuner": self.tuner, "seed": self.seed,
                "best": best, "seconds_per_image": per_image, "measurements": self.measurements,
                "invalid_skipped": self.invalid_skipped, "stopped": self.stopped}


def make_tuner(name: str, space: Any, seed: int = 0, *, agent: Any = None, view: SpaceView | None = None,
               **kwargs: Any) -> Tuner:
    """Build a tuner by name (`TUNERS`). `agent` (path or object) warm-starts RL tuners."""
    name = name.lower()
    if name == "random":
        from codesign.tune.random_tuner import RandomTuner as cls
    elif name == "grid":
        from codesign.tune.grid import GridTuner as cls
    elif name == "ga":
        from codesign.tune.ga import GATuner as cls
    elif name == "xgb":
        from codesign.tune.xgb import XGBTuner as cls
    elif name == "bandit":
        from codesign.tune.bandit import BanditTuner as cls
    elif name == "ppo":
        from codesign.tune.ppo import PPOTuner as cls
    elif name == "dqn":
        from codesign.tune.dqn import DQNTuner as cls
    else:
        raise ConfigError(f"tuner {name!r} is unknown; allowed: {', '.join(TUNERS)}")
    if agent is not None:
        kwargs["agent"] = agent
    elif name not in ("bandit", "ppo", "dqn"):
        kwargs.pop("agent", None)
    return cls(space, seed=seed, view=view, **kwargs)


def _as_results(records: Iterable[MeasureRecord], layer: Any, hw: Any, space: Any) -> list[MeasureResult]:
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


def tune_layer(layer: Any, hw: Any, *, tuner: str | Tuner = "xgb", budget: int = 50, seed: int = 0,
               records: str | Path | RecordWriter | None = None, agent: Any = None,
               warm_start: str | Path | Sequence[MeasureRecord] | None = None, progress: bool = False,
               runner: Runner | None = None, patience: int | None = None, space: Any = None,
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
        from codesign.schedule import ScheduleSpace

        space = ScheduleSpace(layer, hw)
    view = view or SpaceView(space)
    tuner_name = tuner if isinstance(tuner, str) else tuner.name
    tuner_obj = make_tuner(tuner, space, seed, agent=agent, view=view, **tuner_kwargs) \
        if isinstance(tuner, str) else tuner
    if hasattr(tuner_obj, "set_task"):
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
        if other and hasattr(tuner_obj, "transfer"):
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
        from tqdm import tqdm

        bar = tqdm(total=budget, desc=f"{tuner_name} {layer.name}", unit="meas", leave=False)
    try:
        while result.measurements < budget:
            if sum(1 for i in cache if i in view.valid_set) >= len(view.valid):
                result.stopped = "exhausted"  # every valid config is known
                break
            want = min(getattr(tuner_obj, "batch_size", 8), budget - result.measurements)
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
