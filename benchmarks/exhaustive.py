"""The exhaustive path users run: evaluations per CPU-second of `codesign space --exhaustive` and
`codesign tune --tuner exhaustive`, everything included.

`benchmarks/compiler.py` times `measure_seconds` alone and reports the MEDIAN evaluation; a user
pays the MEAN, plus enumerating the schedule space and its validity rules, building every
`Config`, the runner and the tuning loop's bookkeeping (and records, with --records). This
benchmark times those paths on every offloaded ResNet-18 conv of each `--hw` (default pynq_1x16
and pynq_4x8), in one process after JIT warm-up, with every cache the paths keep cleared before
each run (every `functools` cache of codesign: schedule spaces, geometry tables, exhaustive tables):

* `space`: `codesign.tune.exhaustive_table` per layer (what `codesign space --exhaustive` and the
  sweep's `auto` search call);
* `tune`: `tune_layer(..., tuner="exhaustive", budget=None)` per layer (`codesign tune --tuner
  exhaustive`), and `tune_records` the same appending every measurement to a records file.

CPU seconds are `time.process_time` (one core's work, unaffected by other processes on a shared
machine), best of `--repeats` runs. The breakdown times each stage of the `space` path separately
(same configs): space enumeration + validity, Config construction, compile (`compile_blocks`),
the cycle model (`time_blocks`), and the rest (runner, result objects, table) as the difference.
Target: >= 5,000 evaluations per CPU-second on the user path; `meets_target` says whether it
does, and `cost_us_per_eval` what each stage costs. What it costs (issue 21 §4): the gap to
compiler.py's figure is mostly mean vs median (large layers' configs take longer) plus space
enumeration (~5%); the path itself adds little once Configs are built in one step
(`SpaceView.configs`) and records lines skip `asdict`'s deep copy. Most of every evaluation
(`cost_us_per_eval`: ~150-180 of ~220-240 us on a shared 2-core machine) is the compile to
instruction blocks (`codesign.evaluate.blocks`), most of the rest the cycle model's kernel; reaching the
target needs a faster compile, not less bookkeeping.

`--schedules vta` times the `vta` family's spaces instead (10^4-10^5 valid schedules per layer:
run it with `--repeats 1`, and `--paths space` for the table path alone).

Both families are reported (issue 35 §4): besides the paths of `--schedules`, `vta_fast_path`
times the `vta` family's timing fast path (`measure_seconds`: compile to blocks + cycle model) on
`--vta-sample` valid schedules drawn uniformly per layer (seed 0), each the best of `--repeats`
evaluations (`first_evaluation`: the first alone, what a search that evaluates each schedule once
pays: the mapping's lazy tables, micro-op ring and edge plans built for it; the later runs each get a
fresh mapping built off the clock, so what lowering keeps on a mapping, `lower._spec` and the micro-op
plan, is not reused: each run lowers and times the schedule in full), with
its stage costs, each timed again after it: the mapping (`schedule.vta.producer`, its row rebuilt,
the space's shared caches warm), the lowering to blocks, the cycle model; what the mean has beyond
their sum is what a first evaluation builds once and keeps (the sample's batch, edge tile variants,
kernel orders) and `measure`'s glue); target
>= 6,000 evaluations per CPU-second (`VTA_TARGET`). `block_rows` says where its mean goes: the rows
of each schedule's block program (`lower_blocks`), the share of schedules above `LONG_BLOCKS` rows,
their share of the CPU time and the rate without them (the emitter and the cycle model work row by
row within a written step: a pair's repeated reduction steps are written and timed once, the step
form of `lower.PairBlocks`; long ones are a step of many ACC slots, whose GEMMs use kernels of their
own). `--vta-sample 0`
leaves it out.

Prints one JSON object. Usage: `python benchmarks/exhaustive.py [--hw pynq_1x16 pynq_4x8]
[--repeats 3] [--schedules autotvm|vta] [--paths space tune tune_records] [--layers 0,3,5,8]
[--vta-sample 200]` (`--layers`: ResNet-18 convs 0-9, default all).
"""

from __future__ import annotations

import os

# Per-core figures: one BLAS thread (as benchmarks/compiler.py). Set before numpy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from codesign.evaluate.blocks import compile_blocks  # noqa: E402
from codesign.evaluate.run import measure_seconds  # noqa: E402
from codesign.hw.config import HwConfig  # noqa: E402
from codesign.schedule import get_space, partition  # noqa: E402
from codesign.tune.loop import tune_layer  # noqa: E402
from codesign.tune.view import SpaceView  # noqa: E402
from codesign.vta import timing  # noqa: E402
from codesign.workloads import Conv2D, get_workload  # noqa: E402

TARGET = 5000  # evaluations per CPU-second, issue 21 §4
VTA_TARGET = 6000  # the vta family's timing fast path, evaluations per CPU-second (issue 35 §4)
LONG_BLOCKS = 5000  # block-program rows above which a vta schedule counts as long (`block_rows`)
# `codesign.tune.exhaustive` the module (the package re-exports a function of that name)
_exhaustive = importlib.import_module("codesign.tune.exhaustive")
_space_mod = importlib.import_module("codesign.schedule.space")


def _clear_caches() -> None:
    """What a fresh `codesign space`/`tune` process starts without (JIT caches aside): every
    `functools` cache of a loaded codesign module (schedule spaces, the compiler's per-layer
    geometry tables, exhaustive tables; the timing parameters, re-read from their file)."""
    for name, module in list(sys.modules.items()):
        if name == "codesign" or name.startswith("codesign."):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)) and hasattr(value, "cache_info"):
                    value.cache_clear()


def _jobs(names: list[str], layer_ids: list[int] | None = None) -> list[tuple[Conv2D, HwConfig]]:
    jobs = []
    for name in names:
        hw = HwConfig.resolve(name)
        wl = get_workload("resnet18").for_hw(hw)
        convs = [ly for ly, _ in partition(wl, hw)[0] if isinstance(ly, Conv2D)]
        jobs += [(ly, hw) for i, ly in enumerate(convs) if layer_ids is None or i in layer_ids]
    return jobs


def _path_space(jobs, family: str = "autotvm") -> int:
    return sum(len(_exhaustive.exhaustive_table(layer, hw, family=family)) for layer, hw in jobs)


def _path_tune(jobs, records: Path | None = None, family: str = "autotvm") -> int:
    n = 0
    for layer, hw in jobs:
        res = tune_layer(layer, hw, tuner="exhaustive", budget=None, records=records, family=family)
        n += res.measurements
    return n


def _best_cpu(fn, repeats: int) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(repeats):
        _clear_caches()
        c0 = time.process_time()
        n = fn()
        best = min(best, time.process_time() - c0)
    return best, n


def _stages(jobs, repeats: int, family: str = "autotvm") -> dict[str, float]:
    """CPU seconds of each stage of the `space` path, each the best of `repeats`."""
    params = timing.default_params()
    out: dict[str, float] = {}

    def stage(name, fn):
        best = float("inf")
        for _ in range(repeats):
            c0 = time.process_time()
            result = fn()
            best = min(best, time.process_time() - c0)
        out[name] = out.get(name, 0.0) + best
        return result

    for layer, hw in jobs:
        def enumerate_space(layer=layer, hw=hw):
            _space_mod.get_space.cache_clear()
            return SpaceView(get_space(layer, hw, family))

        view = stage("space_and_validity", enumerate_space)
        configs = stage("configs", lambda view=view: view.configs(view.valid))
        blocks = stage("compile", lambda layer=layer, hw=hw, configs=configs:
                       [compile_blocks(layer, c, hw) for c in configs])
        stage("cycle_model", lambda hw=hw, blocks=blocks:
              [timing.time_blocks(b.rows, b.block_start, b.pair_class, b.periods, hw, params) for b in blocks])
    return out


def _vta_fast_path(jobs, n: int, repeats: int) -> dict:
    """The `vta` family's timing fast path on `n` valid schedules per layer (uniform, seed 0): CPU us
    per evaluation (best of `repeats` per schedule), whole and by stage (mapping, lowering, cycle model)."""
    from codesign.lower import lower_blocks
    from codesign.schedule.families import mapping_for
    from codesign.schedule.vta import producer
    from codesign.tune.env import sample_valid_pool

    params = timing.default_params()
    whole, first, mapping, lowering, model, rows = [], [], [], [], [], []
    for layer, hw in jobs:
        space = get_space(layer, hw, "vta")
        view = SpaceView(space)
        configs = view.configs(sample_valid_pool(space, n, np.random.default_rng(0)))
        for config in configs:
            best = [float("inf")] * 4
            for rep in range(repeats):
                if rep:  # a fresh mapping, built off the clock: nothing kept on it from the last run
                    producer.row_mapping.cache_clear()
                    mapping_for(layer, config, hw)
                c0 = time.process_time_ns()
                measure_seconds(layer, config, hw)
                if rep == 0:  # what a search pays: each schedule evaluated once
                    first.append((time.process_time_ns() - c0) / 1e3)
                producer.row_mapping.cache_clear()  # the stages: the mapping as at a config's first evaluation
                c1 = time.process_time_ns()
                m = mapping_for(layer, config, hw)
                c2 = time.process_time_ns()
                b = lower_blocks(m, hw)
                c3 = time.process_time_ns()
                timing.time_blocks(b.rows, b.block_start, b.pair_class, b.periods, hw, params)
                c4 = time.process_time_ns()
                best = [min(x, y / 1e3) for x, y in zip(best, (c1 - c0, c2 - c1, c3 - c2, c4 - c3))]
            for out, x in zip((whole, mapping, lowering, model), best):
                out.append(x)
            rows.append(int(b.rows.shape[0]))
    a = np.asarray(whole)
    # where the mean goes: the schedules whose block program is long (a reduction step of many ACC
    # slots is emitted and timed row by row; repeated steps and pairs are skipped)
    r = np.asarray(rows)
    long = r > LONG_BLOCKS
    return {"schedules": int(a.size), "per_layer": n, "target_evals_per_cpu_s": VTA_TARGET,
            "median_us": float(np.median(a)), "mean_us": float(a.mean()),
            "evals_per_cpu_s_at_mean": 1e6 / float(a.mean()), "meets_target": bool(1e6 / float(a.mean()) >= VTA_TARGET),
            "first_evaluation": {"mean_us": float(np.mean(first)),
                                 "evals_per_cpu_s_at_mean": 1e6 / float(np.mean(first))},
            "cost_us_per_eval": {"mapping": float(np.mean(mapping)), "lowering": float(np.mean(lowering)),
                                 "cycle_model": float(np.mean(model))},
            "block_rows": {"median": float(np.median(r)), "mean": float(r.mean()),
                           f"share_over_{LONG_BLOCKS}": float(long.mean()),
                           f"cpu_share_over_{LONG_BLOCKS}": float(a[long].sum() / a.sum()),
                           "evals_per_cpu_s_without_them": 1e6 / float(a[~long].mean()) if (~long).any() else None}}


def _warm_vta(jobs) -> None:
    """Load the compiled kernels only `vta` schedules run (edge tiles' micro-op plans, the step
    form) before the clock: a process pays that once, not per evaluation. Schedules of another
    seed than the timed sample's, on a layer with edge tiles."""
    from codesign.schedule.families import mapping_for
    from codesign.tune.env import sample_valid_pool

    for layer, hw in jobs:
        space = get_space(layer, hw, "vta")
        configs = SpaceView(space).configs(sample_valid_pool(space, 16, np.random.default_rng(12345)))
        for config in configs:
            measure_seconds(layer, config, hw)
        if any(mapping_for(layer, config, hw).edges is not None for config in configs):
            return


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hw", nargs="+", default=["pynq_1x16", "pynq_4x8"])
    ap.add_argument("--repeats", type=int, default=3, help="runs per path; the fastest counts")
    ap.add_argument("--schedules", choices=("autotvm", "vta"), default="autotvm", help="schedule family")
    ap.add_argument("--layers", default=None, help="comma-separated ResNet-18 conv numbers 0-9 (default all)")
    ap.add_argument("--paths", nargs="+", choices=("space", "tune", "tune_records"),
                    default=["space", "tune", "tune_records"], help="paths to time (space is always timed)")
    ap.add_argument("--vta-sample", type=int, default=200,
                    help="vta schedules per layer for the vta family's timing fast path (0: skip)")
    args = ap.parse_args(argv)
    family = args.schedules
    jobs = _jobs(args.hw, None if args.layers is None else [int(x) for x in args.layers.split(",") if x])
    layer0, hw0 = jobs[-1]  # warm-up: numba kernels compile or load from cache outside the clock
    space0 = get_space(layer0, hw0)
    measure_seconds(layer0, space0.get(int(space0.valid_indices()[0])), hw0)
    if args.vta_sample:  # and the vta family's kernels (edge tiles' micro-op plans), on other schedules
        _warm_vta(jobs)

    paths: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="codesign-bench-") as tmp:
        records = Path(tmp) / "records.jsonl"

        def tune_with_records() -> int:
            records.unlink(missing_ok=True)
            return _path_tune(jobs, records, family)

        for name, fn in (("space", lambda: _path_space(jobs, family)), ("tune", lambda: _path_tune(jobs, None, family)),
                         ("tune_records", tune_with_records)):
            if name != "space" and name not in args.paths:
                continue
            cpu, n = _best_cpu(fn, args.repeats)
            paths[name] = {"evaluations": n, "cpu_s": cpu, "evals_per_cpu_s": n / cpu}
            print(f"{name}: {n} evaluations in {cpu:.3f} CPU-s = {n / cpu:.0f}/CPU-s", file=sys.stderr)

    stages = _stages(jobs, args.repeats, family)
    n = paths["space"]["evaluations"]
    cost = {k: 1e6 * v / n for k, v in stages.items()}
    cost["runner_and_bookkeeping"] = max(0.0, 1e6 * paths["space"]["cpu_s"] / n - sum(cost.values()))
    cost["total"] = 1e6 * paths["space"]["cpu_s"] / n
    # the per-evaluation distribution benchmarks/compiler.py summarizes by its median
    per_eval = []
    for layer, hw in jobs:
        view = SpaceView(get_space(layer, hw, family))
        for config in view.configs(view.valid):
            c0 = time.process_time_ns()
            measure_seconds(layer, config, hw)
            per_eval.append((time.process_time_ns() - c0) / 1e3)
    a = np.asarray(per_eval)
    worst = min(p["evals_per_cpu_s"] for p in paths.values())
    summary = {
        "hw": sorted({hw.name for _, hw in jobs}),
        "schedules": family,
        "layers": len(jobs),
        "repeats": args.repeats,
        "target_evals_per_cpu_s": TARGET,
        "paths": paths,
        "meets_target": bool(worst >= TARGET),
        "cost_us_per_eval": cost,
        "measure_seconds_us": {"median": float(np.median(a)), "mean": float(a.mean()),
                               "evals_per_cpu_s_at_median": 1e6 / float(np.median(a)),
                               "evals_per_cpu_s_at_mean": 1e6 / float(a.mean())},
    }
    if args.vta_sample:
        summary["vta_fast_path"] = _vta_fast_path(jobs, args.vta_sample, args.repeats)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
