"""How fast do the learned searches run on each schedule family (`vta`, then the AutoTVM templates;
issue 19 §2, issue 35 §4)? For each family and tuner, on one layer and hardware config: CPU seconds
until its first proposal (building the task, `plan_budget`,
the first `propose`), then a tuning run of `--budget` measurements on the simulator: measurements
per CPU-second of the whole run (search + measuring) and of the tuner alone (the measuring
subtracted), and the best latency found. Prints one JSON summary on stdout. `--sample N`: the
searches run on N valid schedules drawn uniformly (`SampledView`, the tuner benchmark's reduced
ground truth), a fresh view per tuner so each pays its own set-up.

    python benchmarks/search_speed.py                                  # ResNet-18's 14x14 3x3 conv, pynq_1x16
    python benchmarks/search_speed.py --layer conv2d:1,64,56,56,64,3,3,1,1 --tuners xgb,evo --budget 128
    python benchmarks/search_speed.py --sample 5000 --tuners xgb,evo    # on tuners.py's sampled sub-space
    python benchmarks/search_speed.py --family autotvm                  # one family (default: vta, then autotvm)
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from codesign.hw.config import HwConfig
from codesign.tune.loop import TaskRun
from codesign.tune.measure import SimulatorRunner
from codesign.tune.task import make_task
from codesign.workloads import parse_layer

DEFAULT_LAYER = "conv2d:1,256,14,14,256,3,3,1,1"  # ResNet-18's 3x3 14x14 conv (x3), 2.3e5 valid vta schedules


class TimedRunner(SimulatorRunner):
    """The simulator runner, counting the CPU seconds spent measuring."""

    measure_cpu = 0.0

    def run(self, inputs):  # noqa: ANN001, ANN201 - the Runner signature
        c0 = time.process_time()
        try:
            return super().run(inputs)
        finally:
            self.measure_cpu += time.process_time() - c0


def run_one(layer, hw: HwConfig, tuner: str, *, family: str, budget: int, seed: int, pool=None) -> dict:  # noqa: ANN001
    """One tuning run; `pool` (valid indices): on that sample of the family (`SampledView`)."""
    runner = TimedRunner(hw)
    c0, w0 = time.process_time(), time.perf_counter()
    if pool is None:
        task = make_task(layer, hw, tuner, seed, family=family)
    else:
        from codesign.schedule import get_space
        from codesign.tune.env import SampledView

        space = get_space(layer, hw, family)
        task = make_task(layer, hw, tuner, seed, space=space, view=SampledView(space, pool))
    run = TaskRun(task, budget=budget, seed=seed, runner=runner)
    run.step()  # the first round: its proposal, then its measurements
    first_cpu = time.process_time() - c0 - runner.measure_cpu
    while not run.done:
        run.step()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    runner.close()
    res = run.result
    return {"tuner": tuner, "first_proposal_cpu_s": round(first_cpu, 3), "measurements": res.measurements,
            "cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "measure_cpu_s": round(runner.measure_cpu, 2),
            "evals_per_cpu_s": round(res.measurements / cpu, 2) if cpu else None,
            "tuner_cpu_s_per_eval": round((cpu - runner.measure_cpu) / max(res.measurements, 1), 4),
            "best_us": None if res.best_seconds is None else round(res.best_seconds * 1e6, 3),
            "n_valid": round(task.view.n_valid()), "enumerable": task.view.enumerable}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layer", default=DEFAULT_LAYER, help=f"layer spec (default {DEFAULT_LAYER})")
    ap.add_argument("--hw", default="pynq_1x16")
    ap.add_argument("--family", default="vta,autotvm",
                    help="comma-separated schedule families, each run in turn (default both: vta,autotvm)")
    ap.add_argument("--tuners", default="random,xgb,evo,bandit")
    ap.add_argument("--budget", type=int, default=64, help="measurements per tuner")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample", type=int, default=0,
                    help="run on this many valid schedules drawn uniformly (seed 0), as tuners.py --sample (default 0: "
                         "the whole family)")
    args = ap.parse_args(argv)
    layer, hw = parse_layer(args.layer), HwConfig.resolve(args.hw)
    families = {}
    for family in args.family.split(","):
        if family not in ("vta", "autotvm"):
            ap.error(f"--family {family}: allowed vta, autotvm")
        pool = None
        if args.sample:
            import numpy as np

            from codesign.schedule import get_space
            from codesign.tune.env import sample_valid_pool

            pool = sample_valid_pool(get_space(layer, hw, family), args.sample, np.random.default_rng(0))
        rows = []
        for name in args.tuners.split(","):
            rows.append(run_one(layer, hw, name, family=family, budget=args.budget, seed=args.seed, pool=pool))
            print(f"[bench search_speed] {family} {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
        families[family] = {"sample": None if pool is None else int(pool.size), "rows": rows}
    print(json.dumps({"command": "python benchmarks/search_speed.py " + " ".join(argv or sys.argv[1:]),
                      "layer": layer.name, "hw": hw.name, "budget": args.budget, "families": families}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
