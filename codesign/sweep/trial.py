"""One sweep trial = one hardware config: feasibility, inner schedule tuning of every layer, and the
objectives (`codesign.pareto.objectives`: latency per request, area, power, throughput, energy)
plus resources and per-layer results.

`evaluate_hw` is plain Python (no Ray) so tests and benchmarks can call it directly; `sweep_trial`
is the Ray Tune function trainable around it.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from codesign.errors import CodesignError
from codesign.evaluate.fused import FUSED_CANDIDATES, Epilogue, demand, fused_invalid, measure_fused
from codesign.evaluate.run import Measurement, measure
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.hw.power import PowerModel, activity_from_busy
from codesign.hw.resources import ResourceCoefficients, Resources, estimate, infeasible_reason
from codesign.hw.space import HwSpace
from codesign.network.graph import Network
from codesign.pareto import design_point
from codesign.pareto.objectives import OBJECTIVES
from codesign.place import choose_layers, plan_network
from codesign.place.plan import layer_alternatives
from codesign.place.refine import Chosen, refine
from codesign.schedule.knobs import Config, plain_knobs
from codesign.schedule.space import ScheduleSpace
from codesign.schedule.support import partition
from codesign.sweep.network import cpu_gemms, step_rows, vta_layer_counts
from codesign.sweep.options import DEFAULT_BUDGET, DEFAULT_EXHAUSTIVE_S, DEFAULT_TUNER, default_schedules
from codesign.sweep.state import pack_records
from codesign.tune import RecordWriter
from codesign.tune.loop import RecordCallback, TaskRun, TuneResult
from codesign.tune.measure import MeasureResult, SimulatorRunner
from codesign.tune.records import MeasureRecord
from codesign.tune.search import Search
from codesign.tune.task import TuneTask
from codesign.vta.timing import TimingParams, default_params
from codesign.workloads.layers import Layer
from codesign.workloads.networks import Workload

# What an infeasible design reports to the searcher: worse than any feasible design on latency and
# power, so every searcher learns to avoid it. These points never enter the Pareto front.
INFEASIBLE_LATENCY_MS = 1.0e6
INFEASIBLE_POWER_W = 1.0e3
INFEASIBLE_AREA = 1.0e3
INFEASIBLE_THROUGHPUT_IPS = 0.0
INFEASIBLE_ENERGY_J = 1.0e3  # what the searcher sees when energy is an objective (the row keeps None)
# What `latency_ms` counts (`scope` of a result): the whole network from its graph (VTA and CPU
# steps of the network plan), or -- a workload known only as layers -- the layers VTA offloads.
SCOPE_NETWORK = "whole network"
SCOPE_LAYERS = "offloaded layers"
WARM_START_MAX = 8  # knob settings handed to the inner tuner from earlier trials' records
RECORDS_FILE = "records.jsonl"


@dataclass(frozen=True)
class InnerTuning:
    """How every layer of a trial is tuned (the inner loop): one value, made by the driver from the
    sweep's options and handed to every trial."""

    tuner: str = DEFAULT_TUNER
    budget: int = DEFAULT_BUDGET  # measurements per layer (learned tuners; `auto` when not exhaustive)
    seed: int = 0
    exhaustive_s: float = DEFAULT_EXHAUSTIVE_S  # `auto`: exhaustive when a layer fits this many seconds
    params: TimingParams | None = None  # of the sweep's calibration profile (None: shipped)
    hparams: dict[str, str] | None = field(default=None, hash=False)  # the tuner's `--hparam` overrides
    schedules: str | None = None  # schedule family (`--schedules`; None: `default_schedules(tuner)`)
    # How the learned layers share their measurements (`codesign.tune.scheduler.POLICIES`): "gain"
    # where the expected gain is largest, "even" each layer its own budget (benchmarks, tests).
    scheduler: str = "gain"

    def __post_init__(self) -> None:
        if self.schedules is None:
            object.__setattr__(self, "schedules", default_schedules(self.tuner))

    def search(self) -> Search:
        """The default search's value of this tuning (`codesign.tune.search`)."""
        return Search(tuner=self.tuner, family=self.schedules, budget=self.budget, seed=self.seed,
                      exhaustive_s=self.exhaustive_s, hparams=self.hparams, policy=self.scheduler)


@dataclass(frozen=True)
class TrialContext:
    """What every trial needs besides its sampled parameters (picklable; Ray ships it to the
    workers once, through the object store: a trial reads nothing from the driver's disk).
    `checked`: the search only sends usable points (nsga2/motpe/random through `FeasibleSearch`,
    exhaustive from the enumeration), so the trial does not check them again; grid points are
    checked here, once. `state`: the finished trials (`codesign.sweep.state.SweepState`, or the
    driver's Ray actor holding one), asked once when a trial starts; None: no earlier trials."""

    space: HwSpace  # parsed once by the driver, scored with the sweep's resource model
    workload: Workload  # at batch 1
    tuning: InnerTuning
    checked: bool = False
    state: Any = None
    objectives: tuple[str, ...] = OBJECTIVES  # point keys the searcher optimizes (`--objectives`)
    # The workload's graph (shapes only; `codesign.sweep.network`): a trial costs the whole network.
    # None: the workload is costed as its offloaded layers, `scope_note` says why.
    network: Network | None = None
    scope_note: str | None = None


def searcher_metrics(result: dict[str, Any], objectives: tuple[str, ...] = OBJECTIVES) -> dict[str, float]:
    """The objectives the searcher is told (an infeasible design's energy is None in its row: the
    searcher gets a penalty instead)."""
    return {k: float(INFEASIBLE_ENERGY_J if k == "energy_j" and result.get(k) is None else result[k])
            for k in objectives}


def infeasible_result(hw: HwConfig | None, reason: str, board: Any = None, name: str | None = None, *,
                      resources: Resources | None = None) -> dict[str, Any]:
    """The result of a design that cannot be built, clocked or run: never simulated, very bad
    for the searcher, the reason kept for the user. `resources`: the design's estimate under the
    sweep's resource model (`HwSpace.estimate`); the shipped coefficients' estimate if not given."""
    out: dict[str, Any] = {
        "config": name or (hw.name if hw is not None else "invalid"),
        "hw": hw.to_dict() if hw is not None else None, "feasible": False, "reason": reason,
        "latency_ms": INFEASIBLE_LATENCY_MS, "area": INFEASIBLE_AREA, "power_w": INFEASIBLE_POWER_W,
        "throughput_ips": INFEASIBLE_THROUGHPUT_IPS, "energy_j": None, "layers": [], "unsupported": [], "measurements": 0,
    }
    if hw is not None and board is not None:
        res = resources or estimate(hw, board)
        out["resources"] = res.to_json(board)
        # The scarcest resource's utilization when it is over budget (> 1): the searcher sees
        # which way is feasible (the mean-utilization area of a feasible design is <= 1).
        out["area"] = max(float(res.max_utilization(board)), 1.0)
    return out


def transfer_configs(layer: Layer, hw: HwConfig, space: ScheduleSpace, records: Sequence[MeasureRecord],
                     limit: int = WARM_START_MAX) -> list[Config]:
    """Schedule configs for `layer` that were fast on other hardware of this sweep and are valid on
    `hw`: the best record of each earlier config, most similar hardware (GEMM shape first, then
    buffer sizes) first. The inner tuner measures these before its own proposals."""
    best: dict[str, MeasureRecord] = {}
    lname, hname = layer.name, hw.name  # properties that format a string: once, not per record
    for r in records:
        if r.layer != lname or r.hw == hname or not r.ok:
            continue
        if r.hw not in best or r.seconds < best[r.hw].seconds:
            best[r.hw] = r
    if not best:
        return []

    def distance(name: str) -> tuple[float, float]:
        try:
            other = HwConfig.from_name(name)
        except Exception:  # noqa: BLE001 - a foreign hw name in the records: least similar
            return (math.inf, 0.0)
        keys = ("LOG_BATCH", "LOG_BLOCK_IN", "LOG_BLOCK_OUT", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE",
                "LOG_ACC_BUFF_SIZE", "LOG_UOP_BUFF_SIZE")
        weights = (8, 8, 8, 1, 1, 1, 1)  # the GEMM shape changes the tiling far more than a buffer
        d = sum(w * abs(getattr(other, k) - getattr(hw, k)) for k, w in zip(keys, weights))
        return (d, best[name].seconds)

    out: list[Config] = []
    seen: set[int] = set()
    for name in sorted(best, key=distance):
        try:
            config = space.from_knobs(best[name].knobs)
        except Exception:  # noqa: BLE001 - knobs not among this hardware's candidates
            continue
        if config.index in seen or space.why_invalid(config) is not None:
            continue
        seen.add(config.index)
        out.append(config)
        if len(out) >= limit:
            break
    return out


def _tune_all(layers: Sequence[tuple[Layer, int]], hw: HwConfig, tuning: InnerTuning, *, writer: Any,
              records: list[MeasureRecord], seen: _Measured | None = None,
              alternatives: Sequence[Mapping[Layer, int]] = ()) -> list[TuneResult]:
    """Inner tuning of the layers (with their counts) by the default search's one loop
    (`codesign.tune.search.Search.tune`: `auto` on the vta family is template+local, every other
    tuner one task per layer under the task scheduler); each layer's run gets the transfer from
    earlier trials' records and counts the measurements an interrupted run of this trial made."""
    done: dict[int, int] = {}

    def make_run(task: TuneTask, k: int, budget: int | None, first: Sequence[Config]) -> TaskRun:
        run, made = _task_run(task, tuning, writer=writer, records=records, budget=budget, first=first)
        if seen is not None:
            run.callbacks.append(seen)
        done[k] = done.get(k, 0) + made
        return run

    results = tuning.search().tune(layers, hw, make_run, alternatives=alternatives)
    for k, res in enumerate(results):
        res.measurements += done.get(k, 0)
    return results


def _task_run(task: TuneTask, tuning: InnerTuning, *, writer: Any, records: list[MeasureRecord],
              budget: int | None, first: Sequence[Config] = ()) -> tuple[TaskRun, int]:
    """(The run of one task with transfer from earlier trials' records, the measurements made by
    an interrupted run of this trial). `budget`: the run's cap (None: the tuner plans it);
    `first`: configs measured before the transferred ones."""
    layer, hw = task.layer, task.hw
    family = task.view.family
    lname, hname = layer.name, hw.name
    mine = [r for r in records if r.family == family]  # another family's knobs mean nothing here
    # A quarter of the budget at most goes to transferred configs: the tuner still explores.
    per_layer = tuning.budget if budget is None else budget
    seeds = list(first) + transfer_configs(layer, hw, task.space, mine,
                                           limit=min(WARM_START_MAX, max(1, per_layer // 4)))
    own = [r for r in mine if r.layer == lname and r.hw == hname]  # an interrupted run
    # Its measurements count toward the budget: a resumed trial measures only what is missing, so
    # records.jsonl holds `budget` measurements per (config, layer) however often it was interrupted.
    # auto and exhaustive plan their own budget (every valid config when exhaustive; the cache of
    # earlier records keeps them from measuring a config twice).
    made = len({r.index for r in own})
    runner = SimulatorRunner(hw, params=tuning.params)
    seed = int(task.tuner.seed)
    return TaskRun(task, budget=None if budget is None else max(0, budget - made), seed=seed,
                   runner=runner, warm_start_records=own or None, seeds=seeds,
                   callbacks=[RecordCallback(writer, layer, hw, task.tuner.name, seed), _Closing(runner)]
                   if writer is not None else [_Closing(runner)]), made


class _Measured:
    """Every successful measurement of a trial, per layer (a `TuneCallback` of all its tasks): the
    schedules `refine` picks each fused op's from, as `codesign run` picks from the trial's records."""

    def __init__(self) -> None:
        self.by_layer: dict[Layer, list[tuple[float, Config]]] = {}

    def __call__(self, result: TuneResult, measured: Sequence[MeasureResult]) -> None:
        got = self.by_layer.setdefault(result.layer, [])
        got.extend((float(m.seconds), m.config) for m in measured if m.ok and m.seconds is not None)

    def close(self) -> None:
        pass

    def fastest(self, layer: Layer) -> list[tuple[float, Config]]:
        """The distinct schedules measured for `layer`, fastest first, with their plain seconds."""
        out: dict[tuple[str, int], tuple[float, Config]] = {}
        for seconds, config in sorted(self.by_layer.get(layer, ()), key=lambda t: t[0]):
            out.setdefault((config.family, config.index), (seconds, config))
        return list(out.values())


class _TrialChooser:
    """`refine`'s chooser over a trial's own measurements: a layer's tuned best for any op, and for
    an op's epilogue the fastest fused op among the layer's `FUSED_CANDIDATES` fastest schedules
    that fit it (what `netrun.schedules.ScheduleChooser` does with the trial's records)."""

    def __init__(self, hw: HwConfig, tuner: LayerTuner, seen: _Measured) -> None:
        self.hw, self.tuner, self.seen = hw, tuner, seen
        self.params = tuner.tuning.params or default_params()
        self.cache: dict[tuple[Layer, Epilogue], Chosen] = {}

    def choose(self, layer: Layer) -> Chosen:
        res, best = self.tuner.tune(layer)
        assert res.best is not None and best is not None
        return Chosen(res.best, float(best.seconds), "trial", res.best.family, float(best.seconds))

    def for_epilogue(self, layer: Layer, epi: Epilogue) -> Chosen:
        key = (layer, epi)
        if key not in self.cache:
            fits = list(islice(((plain, c) for plain, c in self.seen.fastest(layer)
                                if fused_invalid(layer, c, self.hw, epi) is None), FUSED_CANDIDATES))
            timed = [(measure_fused(layer, c, self.hw, epi, self.params).seconds, k, plain, c)
                     for k, (plain, c) in enumerate(fits)]
            if not timed:
                self.cache[key] = self.choose(layer)
            else:
                _fused, _k, plain, config = min(timed, key=lambda t: t[:2])
                self.cache[key] = Chosen(config, plain, "trial", config.family, plain)
        return self.cache[key]


class _Closing:
    """Closes a layer's runner when its tuning ends (a `TuneCallback` that only closes)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner

    def __call__(self, result: TuneResult, measured: Any) -> None:
        pass

    def close(self) -> None:
        self.runner.close()


class RecordList:
    """A records sink in memory (what `RecordWriter` is for a file): a sweep trial's measurements
    go back to the driver with its result instead of to a file."""

    def __init__(self) -> None:
        self.records: list[MeasureRecord] = []

    def write(self, record: MeasureRecord) -> None:
        self.records.append(record)

    def write_all(self, records: Iterable[MeasureRecord]) -> None:
        self.records.extend(records)

    def close(self) -> None:
        pass


def _best_measurement(layer: Layer, hw: HwConfig, res: TuneResult, params: TimingParams | None = None) -> Measurement:
    """The winner's measurement with its module busy cycles (power activity): the one the tuning
    loop took, or — when the winner came from the records of an interrupted run of this trial —
    one timing-only measurement of it."""
    best = res.best_result
    assert best is not None and best.seconds is not None
    if best.busy and best.cycles is not None:
        return Measurement(best.seconds, best.cycles, best.busy)
    return measure(layer, best.config, hw, params)


def evaluate_hw(
    hw: HwConfig,
    board: Board,
    workload: Workload,
    *,
    tuner: str = DEFAULT_TUNER,
    budget: int = DEFAULT_BUDGET,
    seed: int = 0,
    records_path: str | Path | None = None,
    warm_records: list[MeasureRecord] | None = None,
    power_model: PowerModel | None = None,
    params: TimingParams | None = None,
    exhaustive_s: float = DEFAULT_EXHAUSTIVE_S,
    hparams: dict[str, str] | None = None,
    coefficients: ResourceCoefficients | None = None,
    network: Network | None = None,
    schedules: str | None = None,
) -> dict[str, Any]:
    """Evaluate one hardware config on a workload (see module docstring). Returns a JSON-able dict:
    `codesign.pareto.design_point` (config, latency_ms of one request, throughput_ips, area,
    power_w, energy_j, resources with utilization, activity, hw, scope: what latency counts, steps)
    plus feasible/reason, batch, `layers` (best schedule
    per unique layer), `unsupported` (layers left out, with the reason) and measurements. A config
    that does not fit `board` is never simulated. `coefficients`: of the resource model (None: shipped).
    `records_path`: a records file the measurements are appended to (tests, benchmarks; a sweep
    trial keeps them in memory for the driver). `network`: the workload's graph; given, the
    result is the whole network's plan (`scope` "whole network"), else its offloaded layers.
    `schedules`: the schedule family of the inner tuning (None: `default_schedules(tuner)`)."""
    start = time.perf_counter()
    resources = estimate(hw, board, coefficients)
    reason = infeasible_reason(hw, board, resources)
    if reason is not None:
        return {**infeasible_result(hw, reason, board, resources=resources), "wall_s": time.perf_counter() - start}
    tuning = InnerTuning(tuner=tuner, budget=budget, seed=seed, exhaustive_s=exhaustive_s, params=params,
                         hparams=hparams, schedules=schedules)
    writer = RecordWriter(records_path) if records_path is not None else None
    try:
        return evaluate_usable(hw, board, workload, resources, tuning, records=writer, warm_records=warm_records,
                               power_model=power_model, start=start, network=network)
    finally:
        if writer is not None:
            writer.close()


class LayerTuner:
    """The trial's inner tuning, once per layer (memoized): what the network plan's `choose` asks
    for, and what the per-layer rows of the result are made of."""

    def __init__(self, hw: HwConfig, tuning: InnerTuning, records: RecordWriter | RecordList | None,
                 warm_records: list[MeasureRecord] | None) -> None:
        self.hw, self.tuning, self.records = hw, tuning, records
        self.warm = warm_records or []
        self.results: dict[Layer, tuple[TuneResult, Measurement | None]] = {}
        self.measurements = 0
        self.seen = _Measured()  # every measured schedule, for refine

    def tune(self, layer: Layer) -> tuple[TuneResult, Measurement | None]:
        """(the tuning result, the winner's measurement; None when no schedule ran)."""
        if layer not in self.results:
            self.tune_all([(layer, 1)])
        return self.results[layer]

    def tune_all(self, layers: Sequence[tuple[Layer, int]], alternatives: Sequence[Mapping[Layer, int]] = ()) -> None:
        """Tune the layers not tuned yet together (with their counts per batch): the task
        scheduler spends their measurements where the expected gain is largest (`alternatives`:
        the plan groups' forms, `Search.tune`)."""
        todo = [(layer, count) for layer, count in layers if layer not in self.results]
        for (layer, _count), res in zip(todo, _tune_all(todo, self.hw, self.tuning, writer=self.records,
                                                         records=self.warm, seen=self.seen,
                                                         alternatives=alternatives)):
            self.measurements += int(res.measurements)
            best = _best_measurement(layer, self.hw, res, self.tuning.params) if res.best is not None else None
            self.results[layer] = (res, best)

    def row(self, layer: Layer, count: int) -> dict[str, Any]:
        """The result's per-layer row of a tuned layer run `count` times per batch."""
        res, best = self.results[layer]
        assert res.best is not None and best is not None
        seconds = float(best.seconds)
        return {"layer": layer.name, "count": count, "seconds": seconds, "cycles": int(best.cycles),
                "knobs": plain_knobs(res.best.knobs), "index": int(res.best.index),
                "measurements": int(res.measurements),
                "gops": 2.0 * layer.macs / seconds / 1e9 if seconds > 0 else 0.0}


def evaluate_usable(hw: HwConfig, board: Board, workload: Workload, resources: Resources, tuning: InnerTuning, *,
                    records: RecordWriter | RecordList | None = None, warm_records: list[MeasureRecord] | None = None,
                    power_model: PowerModel | None = None, start: float | None = None,
                    network: Network | None = None, scope_note: str | None = None) -> dict[str, Any]:
    """`evaluate_hw` of a config already known to fit the board (checked once, by the search).
    `records`: where each measurement goes (a file's `RecordWriter`, a `RecordList`, or nowhere).

    With the workload's `network` graph the result is its network plan (`evaluate_plan`). A
    workload given as layers only is costed as the layers VTA offloads (`scope` "offloaded
    layers", `scope_note` why): one request = one padded batch of them."""
    start = time.perf_counter() if start is None else start
    if network is not None:
        return evaluate_plan(hw, board, network, resources, LayerTuner(hw, tuning, records, warm_records),
                             power_model=power_model, start=start)
    wl = workload.for_hw(hw)  # BATCH > 1 runs the network on that many images at once
    offloaded, cpu = partition(wl, hw)
    # Layers this config cannot run are listed with the reason and left out of the latency.
    unsupported = [{"layer": layer.name, "count": count, "reason": why} for layer, count, why in cpu]
    tuner = LayerTuner(hw, tuning, records, warm_records)
    layers: list[dict[str, Any]] = []
    total_s = 0.0
    total_cycles = 0.0
    busy = {"load": 0.0, "compute": 0.0, "store": 0.0}
    tuner.tune_all(offloaded)  # the task scheduler spreads the measurements over the layers
    for layer, count in offloaded:
        res, best = tuner.tune(layer)
        if best is None:  # every measured schedule failed: the layer cannot run here
            unsupported.append({"layer": layer.name, "count": count,
                                "reason": f"no schedule ran in {res.measurements} measurements"})
            continue
        total_s += float(best.seconds) * count
        total_cycles += float(best.cycles) * count
        for k in busy:
            busy[k] += float(best.busy.get(k, 0)) * count
        layers.append(tuner.row(layer, count))

    if not layers:
        return _nothing_runs(hw, board, resources, f"no layer of {workload.name} runs on this config", unsupported,
                             tuner, start)

    activity = activity_from_busy(busy, total_cycles)  # time-weighted over layers (one clock)
    # One request waits for its padded batch: the batch's time, whoever else rides in it.
    latency_ms = total_s * 1e3
    point = design_point(hw, board, latency_ms, activity, power_model=power_model, resources=resources,
                         throughput_ips=wl.batch / total_s, vta_ms=total_s * 1e3, cpu_ms=None,
                         scope=SCOPE_LAYERS, steps=[])
    if scope_note:
        point["scope_note"] = scope_note
    return {
        **point, "feasible": True, "reason": None, "batch": wl.batch, "layers": layers,
        "unsupported": unsupported, "measurements": tuner.measurements, "wall_s": time.perf_counter() - start,
    }


def _nothing_runs(hw: HwConfig, board: Board, resources: Resources, what: str, unsupported: list[dict[str, Any]],
                  tuner: LayerTuner, start: float) -> dict[str, Any]:
    """The result of a usable design on which no layer runs: infeasible, `what` and the first
    reasons said, the layers left out and the measurements spent kept."""
    reasons = "; ".join(f"{u['layer']}: {u['reason']}" for u in unsupported[:3])
    result = infeasible_result(hw, f"{what} ({reasons})", board, resources=resources)
    return {**result, "unsupported": unsupported, "measurements": tuner.measurements,
            "wall_s": time.perf_counter() - start}


def evaluate_plan(hw: HwConfig, board: Board, network: Network, resources: Resources, tuner: LayerTuner, *,
                  power_model: PowerModel | None = None, start: float | None = None) -> dict[str, Any]:
    """One request through the whole network on `hw` + the board's CPU: the network plan
    (`codesign.place.plan_network`) with `choose` = this trial's inner tuning of each layer the
    plan asks about (the rewritten stem, the padded dense, ...), all tuned first as one task set
    (`codesign.place.choose_layers`, weighted by occurrences per request). `latency_ms` is the plan's
    latency, `throughput_ips` its images per second at full batches, `vta_ms`/`cpu_ms` its parts
    (host passes are CPU steps); `layers` the plan's VTA layers with their tuned schedules,
    `unsupported` the convs/denses it leaves on the CPU with the reason, `steps` every step."""
    start = time.perf_counter() if start is None else start

    chooser = _TrialChooser(hw, tuner, tuner.seen)

    def choose(layer: Layer) -> tuple[Config, float]:
        res, best = tuner.tune(layer)
        if best is None or res.best is None:
            raise CodesignError(f"no schedule of {layer.name} ran in {res.measurements} measurements")
        # as `codesign run --records` chooses from these records (`netrun.schedules`): a schedule that
        # fits the layer's most demanding epilogue, so the planner never scans the template space
        # for one that does (its fallback when the tuned best has no room for a residual tile)
        got = chooser.for_epilogue(layer, demand(layer, hw))
        return got.config, got.seconds

    # Every layer the plan will ask about, tuned as one task set: the scheduler spends the learned
    # layers' measurements where they save the most per request (weights: occurrences per request).
    # (a form its group's other form clearly beats at the template stage gets no family stage)
    tuner.tune_all(list(choose_layers(network, hw, board).items()), layer_alternatives(network, hw, board))
    # Each fused op on the fastest of the layer's measured schedules for its own epilogue: the plan
    # `codesign run --records` makes of this trial's records (place.refine).
    plan, _chosen = refine(plan_network(network, hw, board, choose), chooser)
    counts = vta_layer_counts(plan)
    unsupported = cpu_gemms(plan)
    if not counts:
        return _nothing_runs(hw, board, resources, f"no layer of {network.name} runs on VTA on this config",
                             unsupported, tuner, start)
    busy = {"load": 0.0, "compute": 0.0, "store": 0.0}
    for layer, count in counts.items():
        best = tuner.results[layer][1]
        assert best is not None
        for k in busy:
            busy[k] += float(best.busy.get(k, 0)) * count
    # Busy fractions over the whole request: VTA idles while the CPU steps run.
    activity = activity_from_busy(busy, plan.latency_s * hw.clock_hz)
    point = design_point(hw, board, plan.latency_s * 1e3, activity, power_model=power_model, resources=resources,
                         throughput_ips=plan.throughput_ips, vta_ms=plan.vta_s * 1e3, cpu_ms=plan.cpu_s * 1e3,
                         scope=SCOPE_NETWORK, steps=step_rows(plan))
    return {
        **point, "feasible": True, "reason": None, "batch": plan.batch,
        "layers": [tuner.row(layer, count) for layer, count in counts.items()],
        "unsupported": unsupported, "measurements": tuner.measurements, "wall_s": time.perf_counter() - start,
    }


# -- the Ray Tune trainable ------------------------------------------------------------------------
def _lookup(state: Any, config: str) -> tuple[dict[str, Any] | None, list[MeasureRecord]]:
    """The driver's `SweepState.lookup` (a Ray actor's, or a plain object's in tests)."""
    if state is None:
        return None, []
    remote = getattr(state.lookup, "remote", None)
    if remote is None:
        return state.lookup(config)
    import ray

    return ray.get(remote(config))


def run_trial(params: dict[str, Any], ctx: TrialContext) -> tuple[dict[str, Any], list[MeasureRecord]]:
    """Evaluate the config sampled as `params` (no Ray calls here but the state lookup): the result
    row and the schedule records it measured. Writes no file: the driver records both."""
    space = ctx.space
    if ctx.checked:
        hw, reason = space.to_hw(dict(params)), None
    else:
        hw, reason = space.check(dict(params))
    if hw is None:  # a combination HwConfig itself rejects (instruction fields overflow, ...)
        name = "invalid:" + ",".join(f"{k}={v}" for k, v in params.items())
        return {**infeasible_result(None, reason or "invalid point", name=name), "cached": False}, []
    # A searcher may propose a config an earlier trial evaluated: its result, not a second run.
    cached, warm = _lookup(ctx.state, hw.name)
    if cached is not None:
        keep = cached.result_json()
        keep["cached"] = True
        return keep, []
    # The space decides the resource numbers (its model: shipped or `--resources FILE`).
    sink = RecordList()
    if reason is not None:  # over the board's resources, wrong clock, or a space constraint
        result = infeasible_result(hw, reason, space.board, resources=space.estimate(hw))
    else:
        result = evaluate_usable(hw, space.board, ctx.workload, space.estimate(hw), ctx.tuning, records=sink,
                                 warm_records=warm, network=ctx.network, scope_note=ctx.scope_note)
    result["cached"] = False
    return result, sink.records


def sweep_trial(config: dict[str, Any], ctx: TrialContext) -> None:
    """Ray Tune function trainable: one report with the objectives, the full result and the
    records (packed; the driver's `SweepCallback` writes them)."""
    from ray import tune

    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one CPU per trial: no BLAS/torch thread pools
    import ray

    result, records = run_trial(config, ctx)
    result["params"] = dict(config)
    result["node"] = ray.get_runtime_context().get_node_id()  # which Ray node ran it
    # Ray flattens nested dicts in its own loggers; the full result also travels as one JSON string
    # so the driver callback writes exactly what the trial computed.
    metrics = searcher_metrics(result, ctx.objectives)
    metrics.update(feasible=bool(result["feasible"]), config=result["config"], payload=json.dumps(result),
                   records=pack_records(records))
    tune.report(metrics)
