"""Tuner benchmark: how many measurements each tuner needs on ResNet-18.

For every offloaded ResNet-18 layer on the default 1x16 config and on the 4x8 config (batch 4):
the exhaustive optimum (every valid config timed once, cached in OUT/tables), then each tuner
with several seeds replaying measurements from that table (identical numbers to the simulator,
without re-simulating): measurements to reach 95% / 99% of the optimum's speed, and the best
latency (relative to the optimum) after 25/50/100/200 measurements. Medians and IQR over
layers x seeds -> OUT/tuners.md, OUT/tuners.json, OUT/curves.png.

Transfer: layers are split into folds; for each evaluation config and fold, an agent is
pretrained on the *other* layers on the *other* hardware configs (the other evaluation config
plus a few extra configs), saved, and then tunes each held-back layer on the held-back config
(a fresh copy of the checkpoint per seed). XGBoost with transfer is the baseline for that: its
"pretraining" is the same number of measurements per training task (random search records),
from which its base model is trained (`XGBTuner.transfer`, AutoTVM's transfer learning). Per
algorithm: measurements to 95%/99% (pretrained vs cold), board time to 95% at `--board-cost-s`
seconds per measurement (a parameter until the board runtime reports its own), pre-training
measurements, and the break-even: tuned layers after which pre-training has paid for itself
(pre-training measurements / measurements saved per layer; pre-training runs on the simulator,
so on a board it costs no board time at all).

Schedule families (`--schedules autotvm|vta`): the tables, tuners and transfer use that family's
spaces. `--schedules vta` is the issue's target run: held-out layers (`VTA_EVAL_LAYERS`) x held-out
configs (`EVAL_HWS`), the pretrained agent (`--agent`, default the shipped one, its provenance
checked for overlap) against XGBoost / evo with transfer (random-search records of the agent's own
training tasks, as many per task) and cold searches, each run on the whole family (`--budget`
measurements, default 1,000). Ground truth per task: exhaustive where timing every valid schedule
fits an hour (estimated from the measured cost of one evaluation); else the best known schedule,
the best of a 20,000-measurement reference search (`--reference`: XGBoost, 128 proposals per
model fit, seed 0, on the simulator; cached in OUT/tables, and its measurements shared with the
runs) or of any benchmarked run. The family holds 10^5-10^6 valid schedules per ResNet-18 conv
(~100 timed per CPU-second), so most tasks take the reference; the table says which. `--sample N`
reduces each task to N valid schedules drawn uniformly instead, timed exhaustively, every search running on that sub-space (minutes, not an
hour). XGBoost and the evolutionary search (`evo`) transfer through the same base model.

    python benchmarks/tuners.py --quick            # a few layers, 3 seeds, ~ minutes
    python benchmarks/tuners.py --schedules vta --jobs 2   # 8 held-out tasks x 7 searches x 5 seeds, ~1-2 h
    python benchmarks/tuners.py --schedules vta --sample 5000   # reduced ground truth, ~15 min
    python benchmarks/tuners.py --out runs/bench   # full: 10 layers x 2 configs x 7 tuners x 5 seeds
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from codesign.fileio import atomic_write_text

EVAL_HWS = ("pynq_1x16_i8w8a32_15_15_18_17", "pynq_4x8_i8w8a32_15_16_16_18")
# Extra configs only used to pretrain transfer agents (bigger/smaller cores and buffers).
TRAIN_HWS = ("pynq_2x16_i8w8a32_15_16_18_18", "pynq_1x32_i8w8a32_15_16_19_17",
             "pynq_1x16_i8w8a32_15_14_17_16", "pynq_1x8_i8w8a32_15_14_16_16")
#: ResNet-18 convs the `--schedules vta` benchmark evaluates (3x3 at 56x56 and 14x14, the strided
#: 1x1, the 512-channel 7x7): the shipped vta agent is trained on the others (train_agent.py).
VTA_EVAL_LAYERS = (0, 3, 5, 8)
TUNERS = ("random", "grid", "ga", "xgb", "bandit", "ppo", "dqn")
RL = ("bandit", "ppo", "dqn")
TRANSFER = ("xgb", *RL)
MODEL_TRANSFER = ("xgb", "evo")  # transfer through the XGBoost base model (records of random search)
BOARD_COST_S = 2.0  # seconds per measurement on a board (upload + run + read back), a parameter
CHECKPOINTS = (25, 50, 100, 200)


def resnet_layers(hw_name: str) -> list[Any]:
    from codesign.hw.config import HwConfig
    from codesign.schedule import partition
    from codesign.workloads import Conv2D, get_workload

    hw = HwConfig.resolve(hw_name)
    # the 10 offloaded ResNet-18 convs (from_torch also yields the CPU stem and the classifier)
    offloaded, _ = partition(get_workload("resnet18").for_hw(hw), hw)
    return [layer for layer, _ in offloaded if isinstance(layer, Conv2D)]


def table_for(layer: Any, hw: Any, cache_dir: Path, family: str = "autotvm") -> dict[int, tuple[float, int]]:
    """Exhaustive {index: (seconds, cycles)} of a schedule family, cached as JSON (written atomically)."""
    from codesign.tune import exhaustive_table

    path = cache_dir / family / hw.name / f"{layer.name}.json"
    if path.exists():
        return {int(k): (v[0], v[1]) for k, v in json.loads(path.read_text()).items()}
    t0 = time.perf_counter()
    table = exhaustive_table(layer, hw, family=family)
    atomic_write_text(path, json.dumps({str(k): list(v) for k, v in table.items()}))
    print(f"  exhaustive {hw.name} {layer.name}: {len(table)} configs in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr, flush=True)
    return table


def run_metrics(curve: np.ndarray, opt: float, budget: int) -> dict[str, Any]:
    """n95/n99 (None = not reached) and best/opt latency ratio at the checkpoints."""
    speed = opt / curve  # fraction of the optimum's speed reached so far
    out: dict[str, Any] = {}
    for q, key in ((0.95, "n95"), (0.99, "n99")):
        hit = np.flatnonzero(speed >= q - 1e-12)
        out[key] = int(hit[0]) + 1 if hit.size else None
    for c in CHECKPOINTS:
        if c > budget:
            continue
        # a tuner that exhausted the space before c keeps its final best
        out[f"ratio@{c}"] = float(curve[min(c, curve.size) - 1] / opt) if curve.size else None
    return out


def _init_worker() -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)


def bench_task(hw_name: str, layer_spec: str, tuners: tuple[str, ...], seeds: int, budget: int,
               cache_dir: str, family: str = "autotvm") -> dict[str, Any]:
    """All tuners x seeds on one (layer, hw) against its exhaustive table."""
    from codesign.hw.config import HwConfig
    from codesign.schedule import get_space
    from codesign.tune import SpaceView, TableRunner, tune_layer
    from codesign.workloads import parse_layer

    hw = HwConfig.resolve(hw_name)
    layer = parse_layer(layer_spec)
    table = table_for(layer, hw, Path(cache_dir), family)
    opt = min(v[0] for v in table.values())
    space = get_space(layer, hw, family)
    view = SpaceView(space)
    out: dict[str, Any] = {"hw": hw.name, "layer": layer.name, "valid": len(view.valid), "opt_s": opt,
                           "runs": {}}
    for name in tuners:
        runs = []
        for seed in range(seeds):
            t0 = time.perf_counter()
            res = tune_layer(layer, hw, tuner=name, budget=budget, seed=seed, runner=TableRunner(table),
                             space=space, view=view)
            m = run_metrics(res.curve(), opt, budget)
            m.update(seed=seed, wall_s=time.perf_counter() - t0, measurements=res.measurements,
                     curve=[float(x) / opt for x in res.curve()])
            runs.append(m)
        out["runs"][name] = runs
        print(f"  {hw.name[:9]} {layer.name:<34} {name:<7} n95 {[r['n95'] for r in runs]}",
              file=sys.stderr, flush=True)
    return out


def pretrain_and_eval(algo: str, hw_name: str, train: list[tuple[str, str]], held: list[str], seeds: int,
                      budget: int, pre_budget: int, cache_dir: str, agent_dir: str,
                      family: str = "autotvm") -> dict[str, Any]:
    """Pretrain `algo` on `train` [(hw, layer spec)], then tune each held-back layer on hw_name."""
    from codesign.hw.config import HwConfig
    from codesign.tune import MeasureRecord, TableRunner, tune_layer
    from codesign.tune.env import pretrain
    from codesign.workloads import parse_layer

    cache = Path(cache_dir)

    def runner_factory(layer: Any, hw: Any) -> TableRunner:
        return TableRunner(table_for(layer, hw, cache, family))

    tasks = [(parse_layer(spec), HwConfig.resolve(h)) for h, spec in train]
    t0 = time.perf_counter()
    hw = HwConfig.resolve(hw_name)
    records: list[Any] = []
    path: Path | None = None
    if algo in MODEL_TRANSFER:  # model transfer: the base model learns from records of the training tasks
        for layer, thw in tasks:
            res = tune_layer(layer, thw, tuner="random", budget=pre_budget, seed=0, runner=runner_factory(layer, thw),
                             family=family)
            records += [MeasureRecord.make(layer, thw, h.config, h.seconds, h.cycles, h.error, "random", 0, 0.0)
                        for h in res.history]
    else:
        agent = pretrain(algo, tasks, budget=pre_budget, seed=0, runner_factory=runner_factory, family=family)
        tag = hashlib.sha1("|".join(held).encode()).hexdigest()[:8]  # one file per held-back fold
        path = Path(agent_dir) / f"{algo}_{family}_{hw.name}_{tag}.pt"
        agent.save(path)
    pre_s = time.perf_counter() - t0
    out: dict[str, Any] = {"algo": algo, "hw": hw.name, "train_tasks": len(tasks), "pretrain_s": pre_s,
                           "pretrain_measurements": len(tasks) * pre_budget, "agent": str(path), "layers": {}}
    for spec in held:
        layer = parse_layer(spec)
        table = table_for(layer, hw, cache, family)
        opt = min(v[0] for v in table.values())
        runs = []
        for seed in range(seeds):
            if algo in MODEL_TRANSFER:
                res = tune_layer(layer, hw, tuner=algo, budget=budget, seed=seed, runner=TableRunner(table),
                                 warm_start=records, family=family)
            else:
                res = tune_layer(layer, hw, tuner=algo, agent=str(path), budget=budget, seed=seed,
                                 runner=TableRunner(table), family=family)
            runs.append(run_metrics(res.curve(), opt, budget))
        out["layers"][layer.name] = runs
        print(f"  transfer {algo:<6} {hw.name[:9]} {layer.name:<34} n95 {[r['n95'] for r in runs]}",
              file=sys.stderr, flush=True)
    return out


# -- the vta-family target: held-out layers x held-out configs, ground truth per task ------------
#: Searches of the target run (`--schedules vta`): name -> (tuner, what it starts from).
VTA_VARIANTS = {
    "random": ("random", None), "xgb": ("xgb", None), "evo": ("evo", None), "bandit": ("bandit", None),
    "xgb+transfer": ("xgb", "records"), "evo+transfer": ("evo", "records"), "bandit+pretrained": ("bandit", "agent"),
}
EXHAUSTIVE_MAX_S = 3600.0  # ground truth is exhaustive when timing every valid schedule fits this
#: Measurements of the reference search of a task whose exhaustive timing would not fit
#: `EXHAUSTIVE_MAX_S`: its best, and anything better a benchmark run finds, is the best known schedule.
VTA_REFERENCE = 20000
#: The reference search: XGBoost + annealing starting over the residency strata, 128 proposals per
#: model fit (AutoTVM's plan size is 64; the benchmarked xgb refits every 8): 156 fits, not 2,500.
REFERENCE_TUNER = ("xgb", {"batch_size": 128, "sa_keep": 128})
VTA_BUDGET = 1000  # measurements per benchmarked run (a twentieth of the reference search's)


class CachedRunner:
    """The simulator, each config measured once per task (runs of several tuners and seeds share
    it): the runner of a task whose exhaustive table would take too long."""

    def __init__(self, hw: Any) -> None:
        from codesign.tune import SimulatorRunner

        self.inner, self.memo = SimulatorRunner(hw), {}

    def remember(self, space: Any, table: dict[int, tuple[float, int]]) -> None:
        """Take {index: (seconds, cycles)} measured earlier (a cached reference search) as measured."""
        from codesign.tune.measure import MeasureResult

        for i, (s, c) in table.items():
            self.memo.setdefault(int(i), MeasureResult(space.get(int(i)), s, c))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def run(self, inputs: list[Any]) -> list[Any]:
        todo = [i for i in inputs if int(i.config.index) not in self.memo]
        for inp, res in zip(todo, self.inner.run(todo) if todo else []):
            self.memo[int(inp.config.index)] = res
        from dataclasses import replace

        return [replace(self.memo[int(i.config.index)], config=i.config) for i in inputs]


def sample_table(layer: Any, hw: Any, space: Any, n: int, cache_dir: Path) -> tuple[np.ndarray, dict, float]:
    """(the sub-space: `n` valid schedules of the family drawn uniformly, seed 0, sorted; their
    {index: (seconds, cycles)} timed on the simulator, cached as JSON; evaluations per CPU-second)."""
    from codesign.tune.env import sample_valid_pool
    from codesign.tune.measure import MeasureInput, SimulatorRunner

    path = cache_dir / f"vta_sample{n}" / hw.name / f"{layer.name}.json"
    if path.exists():
        data = json.loads(path.read_text())
        return (np.asarray(data["sample"], dtype=np.int64), {int(k): tuple(v) for k, v in data["table"].items()},
                data["evals_per_cpu_s"])
    pool = sample_valid_pool(space, n, np.random.default_rng(0))
    configs = [space.get(int(i)) for i in pool]
    c0 = time.process_time()
    results = SimulatorRunner(hw).run([MeasureInput(layer, hw, c) for c in configs])
    rate = len(configs) / max(time.process_time() - c0, 1e-9)
    table = {int(r.config.index): (r.seconds, r.cycles) for r in results if r.ok}
    atomic_write_text(path, json.dumps({"sample": pool.tolist(), "table": {str(k): list(v) for k, v in table.items()},
                                        "evals_per_cpu_s": rate}))
    print(f"  sample {hw.name} {layer.name}: {len(pool)} valid schedules timed, {rate:.0f}/CPU-s",
          file=sys.stderr, flush=True)
    return pool, table, rate


def reference_search(layer: Any, hw: Any, space: Any, view: Any, runner: CachedRunner, n: int,
                     cache_dir: Path) -> dict[str, Any]:
    """One `n`-measurement run of `REFERENCE_TUNER` (seed 0) on the simulator through `runner`,
    whose memo keeps every measurement for the benchmarked runs. Cached as JSON (atomically) with
    the {index: (seconds, cycles)} it measured; a cached search refills the memo instead."""
    from codesign.tune.loop import TaskRun
    from codesign.tune.task import make_task

    path = cache_dir / f"vta_reference{n}" / hw.name / f"{layer.name}.json"
    if path.exists():
        data = json.loads(path.read_text())
        runner.remember(space, {int(k): tuple(v) for k, v in data.pop("table").items()})
        return data
    name, hp = REFERENCE_TUNER
    run = TaskRun(make_task(layer, hw, name, 0, space=space, view=view, hparams=hp), budget=n, seed=0, runner=runner)
    t0, c0, shown = time.perf_counter(), time.process_time(), time.perf_counter()
    while not run.done:
        run.step()
        if time.perf_counter() - shown > 60:  # a progress line a minute: the search takes minutes
            shown = time.perf_counter()
            print(f"  reference {hw.name[:9]} {layer.name}: {run.result.measurements}/{n} measurements, best "
                  f"{run.result.best_seconds * 1e3:.4f} ms", file=sys.stderr, flush=True)
    res = run.result
    data = {"tuner": name, "hparams": hp, "seed": 0, "budget": n, "measurements": res.measurements,
            "stopped": res.stopped or "budget", "best_s": res.best_seconds, "best_cycles": res.best_cycles,
            "best_knobs": dict(res.best.knobs), "cpu_s": round(time.process_time() - c0, 1),
            "wall_s": round(time.perf_counter() - t0, 1), "curve_s": res.curve().tolist()}
    table = {str(h.config.index): [h.seconds, h.cycles] for h in res.history if h.ok}
    atomic_write_text(path, json.dumps({**data, "table": table}))
    print(f"  reference {hw.name[:9]} {layer.name}: best {res.best_seconds * 1e3:.4f} ms after {data['measurements']} "
          f"measurements ({data['cpu_s']:.0f} CPU-s)", file=sys.stderr, flush=True)
    return data


def vta_task(hw_name: str, layer_spec: str, variants: tuple[str, ...], seeds: int, budget: int, cache_dir: str,
             stop: float, max_run_s: float, agent: str | None, records_path: str | None,
             sample: int = 0, reference: int = VTA_REFERENCE) -> dict[str, Any]:
    """Every variant x seed on one held-out (layer, hw). Ground truth: with `sample`, the family
    reduced to `sample` valid schedules drawn uniformly (`sample_table`), every search running on
    that sub-space (`SampledView`) against its exhaustive optimum; else the whole family,
    exhaustive when it fits `EXHAUSTIVE_MAX_S` (estimated from the measured cost of one
    evaluation), else the best known schedule: the best of a `reference`-measurement search
    (`reference_search`) or of any benchmarked run, whichever is faster (`reference=0`: of the
    runs alone). Runs stop at `stop` of the best known speed (nothing is learned past it), at
    `budget` measurements or after `max_run_s` seconds; a run that beats the reference moves
    the best known schedule, and every run is scored against the final one."""
    from codesign.hw.config import HwConfig
    from codesign.schedule import get_space
    from codesign.tune import SpaceView, TableRunner, load_records
    from codesign.tune.env import SampledView
    from codesign.tune.loop import TaskRun
    from codesign.tune.measure import MeasureInput, SimulatorRunner
    from codesign.tune.task import make_task
    from codesign.workloads import parse_layer

    hw, layer = HwConfig.resolve(hw_name), parse_layer(layer_spec)
    space = get_space(layer, hw, "vta")
    view = SpaceView(space)
    table = None
    if sample:
        t0 = time.perf_counter()
        pool, table, rate = sample_table(layer, hw, space, sample, Path(cache_dir))
        n_valid = family_valid(space, view)
        truth = {"kind": f"exhaustive over {len(pool)} valid schedules drawn uniformly"
                         if len(pool) >= sample else "exhaustive (the whole family)",
                 "sample": len(pool), "evals_per_cpu_s": round(rate), "seconds_to_compute": round(time.perf_counter() - t0, 1)}
        view = SampledView(space, np.fromiter(table, dtype=np.int64))  # a config that failed is no candidate
        truth["failed"] = len(pool) - len(table)
        estimate = None
    else:
        n_valid = view.n_valid()
        probe = [MeasureInput(layer, hw, view.config(i)) for i in view.sample_valid(8, np.random.default_rng(0))]
        estimate = n_valid * SimulatorRunner(hw).seconds_per_measurement(probe)
    if estimate is not None and estimate <= EXHAUSTIVE_MAX_S:
        t0 = time.perf_counter()
        table = table_for(layer, hw, Path(cache_dir), "vta")
        truth = {"kind": "exhaustive", "seconds_to_compute": round(time.perf_counter() - t0, 1),
                 "exhaustive_estimate_s": round(estimate)}
    elif estimate is not None:
        truth = {"kind": "best found by any run", "exhaustive_estimate_s": round(estimate)}
    opt = min(v[0] for v in table.values()) if table else None
    shared = None if table else CachedRunner(hw)
    ref = None
    if shared is not None and reference:
        ref = reference_search(layer, hw, space, view, shared, reference, Path(cache_dir))
        opt = ref["best_s"]
        truth.update(kind=f"best known: a {reference}-measurement {ref['tuner']} search, or a benchmarked run",
                     reference={k: v for k, v in ref.items() if k != "curve_s"})
    records = load_records(records_path) if records_path else None
    out: dict[str, Any] = {"hw": hw.name, "layer": layer.name, "valid": int(round(n_valid)), "truth": truth, "runs": {}}
    for name in variants:
        tuner, start = VTA_VARIANTS[name]
        runs = []
        for seed in range(seeds):
            t0 = time.perf_counter()
            task = make_task(layer, hw, tuner, seed, space=space, view=view,
                             agent=agent if start == "agent" else None)
            run = TaskRun(task, budget=budget, seed=seed, runner=TableRunner(table) if table else shared,
                          warm_start_records=records if start == "records" else None)
            stopped = "budget"
            while not run.done:
                run.step()
                best = run.result.best_seconds
                if opt is not None and best is not None and opt / best >= stop - 1e-12:
                    stopped = f"reached {stop:g}"
                    break
                if time.perf_counter() - t0 > max_run_s:
                    stopped = "time"
                    break
            run.close()
            runs.append({"seed": seed, "curve_s": run.result.curve().tolist(), "stopped": stopped,
                         "measurements": run.result.measurements, "wall_s": time.perf_counter() - t0})
        out["runs"][name] = runs
        print(f"  {hw.name[:9]} {layer.name:<34} {name:<17} meas {[r['measurements'] for r in runs]} "
              f"{[r['stopped'] for r in runs]}", file=sys.stderr, flush=True)
    if table is None:  # the best known schedule: the reference's, unless a run beat it
        found = [min(r["curve_s"]) for rs in out["runs"].values() for r in rs if r["curve_s"]]
        opt = min([*found, *([opt] if opt is not None else [])])
        if ref is not None:
            truth["runs_beat_reference"] = opt < ref["best_s"]
            truth["reference_over_best"] = ref["best_s"] / opt
            truth["reference_n99"] = run_metrics(np.asarray(ref["curve_s"]), opt, reference)["n99"]
    out["opt_s"] = opt
    for rs in out["runs"].values():
        for r in rs:
            curve = np.asarray(r.pop("curve_s"), dtype=float)
            r.update(run_metrics(curve, opt, budget))
            r["curve"] = (curve / opt).tolist()
    return out


def saved_task(path: Path, *args: Any) -> dict[str, Any]:
    """`vta_task(*args)`, its result written to `path` (atomically) as it ends, or read back."""
    if path.exists():
        print(f"  {path}: done earlier, reused", file=sys.stderr, flush=True)
        return json.loads(path.read_text())
    out = vta_task(*args)
    atomic_write_text(path, json.dumps(out))
    return out


def family_valid(space: Any, view: Any) -> float:
    """Valid schedules of the whole family: counted when the space has listed them (the pool's
    fallback does), else the space's estimate (`valid_estimate`) or the view's."""
    if getattr(space, "_valid", None) is not None:
        return float(len(space._valid))
    est = getattr(space, "valid_estimate", None)
    return float(est()) if est is not None else view.n_valid()


def vta_training_tasks(agent: str | None, layer_ids: list[int], eval_hws: tuple[str, ...]) -> tuple[list, dict]:
    """[(hw, layer spec)] the pretrained agent was trained on (its provenance), and whether the
    evaluation tasks are held out of it (layers and configs)."""
    prov_path = Path(str(agent) + ".json") if agent else None
    if prov_path is None or not prov_path.exists():
        raise SystemExit(f"tuners.py: {prov_path}: no provenance beside the agent; train it with "
                         "python benchmarks/train_agent.py --schedules vta")
    prov = json.loads(prov_path.read_text())
    train = [tuple(t) for t in prov.get("task_list", [])]
    overlap_hw = sorted(set(prov.get("hw", [])) & set(eval_hws))
    overlap_layers = sorted(set(prov.get("layers", [])) & set(layer_ids))
    return train, {"agent": str(agent), "agent_commit": prov.get("commit"), "train_tasks": len(train),
                   "train_measurements": prov.get("measurements"), "budget_per_task": prov.get("budget_per_task"),
                   "held_out": not overlap_hw and not overlap_layers, "overlap_hw": overlap_hw,
                   "overlap_layers": overlap_layers, "agent_obs_dim": prov.get("obs_dim")}


def main_vta(args: argparse.Namespace) -> int:
    """`--schedules vta`: the issue's target run (module docstring)."""
    from codesign.hw.config import HwConfig
    from codesign.paths import SHIPPED_VTA_AGENT
    from codesign.tune import MeasureRecord, SimulatorRunner, tune_layer
    from codesign.workloads import parse_layer

    seeds = args.seeds or 5
    budget = args.budget or VTA_BUDGET
    variants = tuple(v for v in (args.tuners or ",".join(VTA_VARIANTS)).split(",") if v)
    bad = [v for v in variants if v not in VTA_VARIANTS]
    if bad:
        raise SystemExit(f"tuners.py: --tuners {bad[0]!r}: allowed with --schedules vta: {', '.join(VTA_VARIANTS)}")
    hws = tuple(_canon(h) for h in args.hw.split(",") if h)
    layer_ids = [int(x) for x in args.layers.split(",")] if args.layers is not None else list(VTA_EVAL_LAYERS)
    agent = str(args.agent or SHIPPED_VTA_AGENT)
    train, held = vta_training_tasks(agent, layer_ids, hws)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    # XGBoost's transfer data: random-search records of the agent's own training tasks, as many per task
    pre_budget = args.pretrain_budget or int(held["budget_per_task"] or 40)
    records_path: Path | None = out / "transfer_records.jsonl"
    if not any(VTA_VARIANTS[v][1] == "records" for v in variants):
        records_path = None
    else:
        recs = []
        for h, spec in train:
            layer, thw = parse_layer(spec), HwConfig.resolve(h)
            res = tune_layer(layer, thw, tuner="random", budget=pre_budget, seed=0, runner=SimulatorRunner(thw),
                             family="vta")
            recs += [MeasureRecord.make(layer, thw, r.config, r.seconds, r.cycles, r.error, "random", 0, 0.0)
                     for r in res.history]
        atomic_write_text(records_path, "".join(r.to_json() + "\n" for r in recs))
    layers_by_hw = {h: resnet_layers(h) for h in hws}
    jobs = [(h, layers_by_hw[h][i].spec) for h in hws for i in layer_ids]
    print(f"tuners benchmark (vta): {len(jobs)} held-out tasks x {len(variants)} searches x {seeds} seeds, budget "
          f"{budget}, stop at {args.stop:g}", file=sys.stderr)
    params = (variants, seeds, budget, str(out / "tables"), args.stop, args.max_run_s, agent,
              records_path and str(records_path), args.sample, args.reference)
    # each finished task is saved as it ends: a rerun with the same parameters (the output folder,
    # params[3], aside) skips it
    key = hashlib.sha1(json.dumps(params[:3] + params[4:]).encode()).hexdigest()[:10]
    with ProcessPoolExecutor(args.jobs, initializer=_init_worker) as pool:
        futs = [pool.submit(saved_task, out / "tasks" / key / h / f"{spec.replace(':', '_')}.json", h, spec, *params)
                for h, spec in jobs]
        tasks = [f.result() for f in futs]
    wall = time.perf_counter() - t_start
    summary = {}
    for name in variants:
        runs = [r for t in tasks for r in t["runs"][name]]
        summary[name] = {"n95": _stats([r["n95"] for r in runs], budget), "n99": _stats([r["n99"] for r in runs], budget),
                         "stopped_on_time": sum(r["stopped"] == "time" for r in runs),
                         "wall_s_per_run": float(np.mean([r["wall_s"] for r in runs]))}
    target = None
    if "bandit+pretrained" in summary and "xgb+transfer" in summary:
        a, b = summary["bandit+pretrained"]["n99"]["median"], summary["xgb+transfer"]["n99"]["median"]
        # xgb's median not reached: its n99 exceeds what its unreached runs measured (a lower bound)
        unreached = [r["measurements"] for t in tasks for r in t["runs"]["xgb+transfer"] if r["n99"] is None]
        bound = b if b is not None else (min(unreached) + 1 if unreached else None)
        target = {"pretrained_n99": a, "xgb_transfer_n99": b, "xgb_transfer_n99_at_least": bound,
                  "met": a is not None and bound is not None and a <= bound / 2}
    result = {"config": {"schedules": "vta", "seeds": seeds, "budget": budget, "stop": args.stop, "sample": args.sample,
                         "reference": args.reference,
                         "max_run_s": args.max_run_s, "layers": layer_ids, "hws": hws, "variants": variants,
                         "jobs": args.jobs, "transfer_records_per_task": pre_budget},
              "held_out": held, "tasks": [{k: v for k, v in t.items() if k != "runs"} for t in tasks],
              "summary": summary, "target": target, "wall_s": wall}
    atomic_write_text(out / "tuners_vta.json", json.dumps({**result, "runs": tasks}, indent=1))
    md = [f"# Tuner benchmark, vta family: {len(jobs)} held-out tasks x {seeds} seeds (wall {wall:.0f} s)", "",
          "| search | meas. to 95% | meas. to 99% | reached 99% |", "|---|---|---|---|"]
    md += [f"| {n} | {_fmt(s['n95'])} | {_fmt(s['n99'])} | {s['n99']['reached'] * 100:.0f}% |" for n, s in summary.items()]
    md += ["", "| task | valid | ground truth | optimum (ms) | reference / best known |", "|---|---|---|---|---|"]
    for t in tasks:  # an exhaustive task has no reference
        ratio = t["truth"].get("reference_over_best")
        md.append(f"| {t['hw']} {t['layer']} | {t['valid']} | {t['truth']['kind']} | {t['opt_s'] * 1e3:.4f} | "
                  f"{'-' if ratio is None else f'{ratio:.4f}'} |")
    atomic_write_text(out / "tuners_vta.md", "\n".join(md) + "\n")
    print("\n".join(md), file=sys.stderr)
    print(json.dumps({"summary": {n: {"n95": s["n95"]["median"], "n99": s["n99"]["median"],
                                      "reached99": s["n99"]["reached"]} for n, s in summary.items()},
                      "target": target, "held_out": held["held_out"],
                      "tasks": [{"task": f"{t['hw']}/{t['layer']}", "valid": t["valid"], "truth": t["truth"]["kind"]}
                                for t in tasks],
                      "out": str(out), "wall_s": round(wall, 1)}))
    return 0


# -- summaries ------------------------------------------------------------------------------------
def _stats(values: list[float | None], cap: float) -> dict[str, Any]:
    """Median and IQR; None (not reached) counts as +inf so it can only push the median up."""
    arr = np.array([math.inf if v is None else v for v in values], dtype=float)
    if arr.size == 0:
        return {"median": None, "q1": None, "q3": None, "reached": 0.0, "n": 0}
    q1, med, q3 = np.percentile(arr, [25, 50, 75], method="lower" if np.isinf(arr).any() else "linear")

    def fix(x: float) -> float | None:
        return float(x) if math.isfinite(x) else None

    return {"median": fix(med), "q1": fix(q1), "q3": fix(q3), "reached": float(np.isfinite(arr).mean()),
            "n": int(arr.size), "cap": cap}


def summarize(tasks: list[dict], tuners: tuple[str, ...], budget: int, hws: tuple[str, ...] | None = None) -> dict:
    summary: dict[str, Any] = {}
    for name in tuners:
        runs = [r for t in tasks if hws is None or t["hw"] in hws for r in t["runs"].get(name, [])]
        if not runs:
            continue
        s = {key: _stats([r[key] for r in runs], budget) for key in ("n95", "n99")}
        for c in CHECKPOINTS:
            if c <= budget:
                s[f"ratio@{c}"] = _stats([r.get(f"ratio@{c}") for r in runs], math.inf)
        s["wall_s_per_run"] = float(np.mean([r["wall_s"] for r in runs]))
        summary[name] = s
    return summary


def _fmt(st: dict, digits: int = 0) -> str:
    if st["median"] is None:
        return f">{st.get('cap', '')} ({st['reached'] * 100:.0f}% reach)"
    q1 = "inf" if st["q1"] is None else f"{st['q1']:.{digits}f}"
    q3 = "inf" if st["q3"] is None else f"{st['q3']:.{digits}f}"
    return f"{st['median']:.{digits}f} [{q1}–{q3}]"


def markdown(summary: dict, budget: int, title: str) -> str:
    cks = [c for c in CHECKPOINTS if c <= budget]
    head = "| tuner | meas. to 95% | meas. to 99% | reached 95% | " + " | ".join(
        f"best/opt @{c}" for c in cks) + " | s/run |"
    lines = [f"### {title}", "", "median [IQR] over layers × seeds; unreached runs count as ∞", "", head,
             "|" + "---|" * (5 + len(cks))]
    for name, s in summary.items():
        ratios = " | ".join(_fmt(s[f"ratio@{c}"], 3) for c in cks)
        lines.append(f"| {name} | {_fmt(s['n95'])} | {_fmt(s['n99'])} | {s['n95']['reached'] * 100:.0f}% | "
                     f"{ratios} | {s['wall_s_per_run']:.2f} |")
    return "\n".join(lines) + "\n"


def plot_curves(tasks: list[dict], tuners: tuple[str, ...], budget: int, path: Path) -> None:
    from codesign.plotting import pyplot, save_figure

    plt = pyplot()

    hws = sorted({t["hw"] for t in tasks})
    fig, axes = plt.subplots(1, len(hws), figsize=(6 * len(hws), 4.2), squeeze=False)
    for ax, hw in zip(axes[0], hws):
        for name in tuners:
            curves = []
            for t in tasks:
                if t["hw"] != hw:
                    continue
                for r in t["runs"].get(name, []):
                    c = np.asarray(r["curve"], dtype=float)
                    if c.size == 0:
                        continue
                    c = np.concatenate([c, np.full(budget - c.size, c[-1])])  # exhausted: stays
                    curves.append(1.0 / c)  # fraction of the optimum's speed
            if not curves:
                continue
            arr = np.vstack(curves)
            x = np.arange(1, budget + 1)
            med = np.median(arr, axis=0)
            ax.plot(x, med, label=name)
            ax.fill_between(x, np.percentile(arr, 25, axis=0), np.percentile(arr, 75, axis=0), alpha=0.15)
        ax.axhline(0.95, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_ylim(0.3, 1.01)
        ax.set_xlabel("measurements")
        ax.set_ylabel("best so far: optimum latency / latency (median, IQR)")
        ax.set_title(hw)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    save_figure(fig, path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="4 layers, 3 seeds, budget 100, 1 transfer fold set")
    ap.add_argument("--out", default="runs/bench_tuners", help="output directory")
    ap.add_argument("--tuners", default=None, help=f"default {','.join(TUNERS)}; vta: {','.join(VTA_VARIANTS)}")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per tuner (default 5; quick 3)")
    ap.add_argument("--budget", type=int, default=None, help=f"measurements per run (default 200; quick 100; vta {VTA_BUDGET})")
    ap.add_argument("--layers", default=None, help="comma-separated ResNet-18 layer numbers 0-9")
    ap.add_argument("--hw", default=",".join(EVAL_HWS), help="evaluation configs")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--no-transfer", action="store_true")
    ap.add_argument("--transfer-algos", default=",".join(TRANSFER))
    ap.add_argument("--board-cost-s", type=float, default=BOARD_COST_S,
                    help=f"seconds one board measurement costs, for board time to 95%% (default {BOARD_COST_S:g})")
    ap.add_argument("--transfer-budget", type=int, default=50, help="measurements per held-back layer")
    ap.add_argument("--pretrain-budget", type=int, default=None, help="measurements per pretraining task")
    ap.add_argument("--folds", type=int, default=2, help="layer folds for the transfer case")
    ap.add_argument("--schedules", default="autotvm", choices=("autotvm", "vta"),
                    help="schedule family (default autotvm); vta: the held-out target run (docstring)")
    ap.add_argument("--agent", default=None, help="vta: the pretrained agent (default the shipped one)")
    ap.add_argument("--stop", type=float, default=0.99, help="vta: a run stops at this fraction of the optimum")
    ap.add_argument("--max-run-s", type=float, default=300.0, help="vta: seconds one run may take (default 300)")
    ap.add_argument("--sample", type=int, default=0,
                    help="vta: each task's family reduced to this many valid schedules drawn uniformly, timed "
                         "exhaustively: the ground truth and what every search runs on (default 0: the whole family)")
    ap.add_argument("--reference", type=int, default=VTA_REFERENCE,
                    help=f"vta, whole family: where timing every valid schedule would take over an hour, the best known "
                         f"schedule is the best of a search with this many measurements ({REFERENCE_TUNER[0]}, seed 0) "
                         f"or of any benchmarked run (default {VTA_REFERENCE}; 0: of the runs alone)")
    args = ap.parse_args(argv)
    if args.schedules == "vta":
        return main_vta(args)

    seeds = args.seeds or (3 if args.quick else 5)
    budget = args.budget or (100 if args.quick else 200)
    pre_budget = args.pretrain_budget or (40 if args.quick else 60)
    tuners = tuple(t for t in (args.tuners or ",".join(TUNERS)).split(",") if t)
    hws = tuple(_canon(h) for h in args.hw.split(",") if h)
    if args.layers is not None:
        layer_ids = [int(x) for x in args.layers.split(",")]
    else:
        layer_ids = [0, 2, 5, 7] if args.quick else list(range(10))
    train_hws = TRAIN_HWS[:2] if args.quick else TRAIN_HWS
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "tables"
    t_start = time.perf_counter()

    layers_by_hw = {h: resnet_layers(h) for h in set(hws) | set(train_hws)}
    jobs = [(h, layers_by_hw[h][i].spec) for h in hws for i in layer_ids]
    print(f"tuners benchmark: {len(jobs)} tasks x {len(tuners)} tuners x {seeds} seeds, budget {budget}",
          file=sys.stderr)
    with ProcessPoolExecutor(args.jobs, initializer=_init_worker) as pool:
        futs = [pool.submit(bench_task, h, spec, tuners, seeds, budget, str(cache), args.schedules) for h, spec in jobs]
        tasks = [f.result() for f in futs]
    main_s = time.perf_counter() - t_start

    result: dict[str, Any] = {
        "config": {"quick": args.quick, "seeds": seeds, "budget": budget, "layers": layer_ids, "hws": hws,
                   "tuners": tuners, "jobs": args.jobs, "schedules": args.schedules,
                   "ground_truth": "exhaustive (every valid schedule of the family timed)"},
        "tasks": [{k: v for k, v in t.items() if k != "runs"} for t in tasks],
        "summary": {"all": summarize(tasks, tuners, budget)},
        "main_wall_s": main_s,
    }
    for h in hws:
        result["summary"][h] = summarize(tasks, tuners, budget, (h,))
    md = [f"# Tuner benchmark (ResNet-18, {args.schedules} schedules, exhaustive ground truth)", "",
          f"{len(jobs)} (layer, config) tasks, {seeds} seeds, budget {budget}; wall {main_s:.0f} s on "
          f"{args.jobs} processes", ""]
    md.append(markdown(result["summary"]["all"], budget, "all tasks"))
    for h in hws:
        md.append(markdown(result["summary"][h], budget, h))
    md.append("| task | valid configs | optimum (ms) |\n|---|---|---|")
    md += [f"| {t['hw']} {t['layer']} | {t['valid']} | {t['opt_s'] * 1e3:.4f} |" for t in tasks]
    md.append("")
    plot_curves(tasks, tuners, budget, out / "curves.png")
    atomic_write_text(out / "runs.json", json.dumps(tasks))

    if not args.no_transfer:
        t0 = time.perf_counter()
        algos = tuple(a for a in args.transfer_algos.split(",") if a)
        folds = [layer_ids[f::args.folds] for f in range(args.folds)]
        tjobs = []
        for h in hws:
            other_hws = [x for x in (*hws, *train_hws) if x != h]
            for fold in folds:
                train = [(x, layers_by_hw[x][i].spec) for x in other_hws for i in layer_ids if i not in fold]
                held = [layers_by_hw[h][i].spec for i in fold]
                if not train or not held:
                    continue  # e.g. a single layer: nothing to pretrain on
                for algo in algos:
                    tjobs.append((algo, h, train, held))
        (out / "agents").mkdir(exist_ok=True)
        with ProcessPoolExecutor(args.jobs, initializer=_init_worker) as pool:
            futs = [pool.submit(pretrain_and_eval, a, h, tr, he, seeds, args.transfer_budget, pre_budget, str(cache),
                                str(out / "agents"), args.schedules) for a, h, tr, he in tjobs]
            tres = [f.result() for f in futs]
        transfer: dict[str, Any] = {"budget": args.transfer_budget, "pretrain_budget": pre_budget,
                                    "board_cost_s": args.board_cost_s,
                                    "train_hws": train_hws, "results": tres, "summary": {}}
        cold = {t["hw"] + "/" + t["layer"]: t["runs"] for t in tasks}
        md += ["### transfer: pretrained on other layers and other configs, tuning held-back layers", "",
               f"pretraining: {pre_budget} measurements per (layer, config) task (xgb: records of random "
               f"search, its base model learns from them); evaluation budget {args.transfer_budget}; cold = "
               f"the same held-back tasks from the table above; board time at {args.board_cost_s:g} s per "
               "measurement; break-even = pre-training measurements / measurements saved per tuned layer", "",
               "| algorithm | pretrained: meas. to 95% | to 99% | reached 95% | cold: meas. to 95% | "
               "board time to 95% pretrained / cold (s) | pre-training meas. | break-even (layers) | pretrain s |",
               "|---|---|---|---|---|---|---|---|---|"]
        for algo in algos:
            rs = [r for t in tres if t["algo"] == algo for runs in t["layers"].values() for r in runs]
            cold_runs = [r for t in tres if t["algo"] == algo for lname in t["layers"]
                         for r in cold.get(t["hw"] + "/" + lname, {}).get(algo, [])]
            st = _stats([r["n95"] for r in rs], args.transfer_budget)
            st99 = _stats([r["n99"] for r in rs], args.transfer_budget)
            st25 = _stats([r.get("ratio@25") for r in rs], math.inf)
            cst = _stats([r["n95"] for r in cold_runs], budget)
            pre_s = float(np.sum([t["pretrain_s"] for t in tres if t["algo"] == algo]))
            pre_n = [t["pretrain_measurements"] for t in tres if t["algo"] == algo]
            pre_meas = float(np.mean(pre_n)) if pre_n else 0.0  # per pretrained model (one per fold)
            saved = None if st["median"] is None or cst["median"] is None else cst["median"] - st["median"]
            even = pre_meas / saved if saved and saved > 0 else None
            board = (None if st["median"] is None else st["median"] * args.board_cost_s,
                     None if cst["median"] is None else cst["median"] * args.board_cost_s)
            transfer["summary"][algo] = {"pretrained_n95": st, "pretrained_n99": st99, "pretrained_ratio@25": st25,
                                         "cold_n95": cst, "board_s_to_95": {"pretrained": board[0], "cold": board[1]},
                                         "pretrain_measurements": pre_meas, "break_even_layers": even,
                                         "pretrain_s_total": pre_s}
            fmt_b = " / ".join("-" if b is None else f"{b:.0f}" for b in board)
            md.append(f"| {algo} | {_fmt(st)} | {_fmt(st99)} | {st['reached'] * 100:.0f}% | "
                      f"{_fmt(cst) if cst['n'] else '-'} | {fmt_b} | {pre_meas:.0f} | "
                      f"{'never' if even is None else f'{even:.1f}'} | {pre_s:.0f} |")
        md.append("")
        transfer["wall_s"] = time.perf_counter() - t0
        result["transfer"] = transfer
    result["total_wall_s"] = time.perf_counter() - t_start
    md.append(f"total wall time {result['total_wall_s']:.0f} s")
    atomic_write_text(out / "tuners.json", json.dumps(result, indent=1))
    atomic_write_text(out / "tuners.md", "\n".join(md) + "\n")
    print("\n".join(md))
    # The JSON summary on stdout (benchmarks print one): medians only.
    brief = {name: {"n95": s["n95"]["median"], "n99": s["n99"]["median"]}
             for name, s in result["summary"]["all"].items()}
    if "transfer" in result:
        brief["transfer"] = {a: s["pretrained_n95"]["median"] for a, s in result["transfer"]["summary"].items()}
    print(json.dumps({"summary": brief, "out": str(out), "wall_s": result["total_wall_s"]}))
    return 0


def _canon(name: str) -> str:
    """Canonical config name of a name or alias."""
    from codesign.hw.config import HwConfig

    return HwConfig.resolve(name).name


if __name__ == "__main__":
    sys.exit(main())
