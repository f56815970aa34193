"""The default `codesign sweep` front with the `vta` schedule family beside the template-only front
at the same trials (issue 19 targets). Prints one JSON summary on stdout.

Runs the sweep twice with the defaults of `codesign sweep` (space, workload, trials, search, seed,
inner tuner; only `--schedules` differs: autotvm, then vta), each into its own directory under
`--out` (a finished sweep there is reused, an interrupted one resumed; `--fresh` starts over;
`--no-run` only compares what is there), and compares them after the same number of finished
trials (`--at`, default the fewer either finished):
- per family: the front (configs with latency/area/power), the best latency at the stock area
  (the lowest latency of a feasible design whose area is <= the stock `pynq_1x16` config's; the
  stock is evaluated first in every sweep) and the stock's own latency, inner measurements per
  trial, the sweep's wall time on this machine (`--max-concurrent`, default one trial per CPU);
- which designs are on one front only;
- designs evaluated by both sweeps: latency vta / autotvm (the same hardware, only the schedule
  family differs);
- `--trial-cpu`: CPU seconds of one trial (the stock config) per family in this process — what
  the sweep's wall time is made of, independent of the machine's load.

    python benchmarks/sweep_families.py                      # the default sweep, both families
    python benchmarks/sweep_families.py --no-run --at 10 --trial-cpu --out runs/bench_sweep_families
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from codesign.hw.config import HwConfig
from codesign.sweep.options import DEFAULT_TRIALS, DEFAULT_WORKLOAD, SweepOptions

STOCK = HwConfig.from_name("pynq_1x16_i8w8a32_15_15_18_17").name
FAMILIES = ("autotvm", "vta")


def _log(msg: str) -> None:
    print(f"[bench sweep_families] {msg}", file=sys.stderr, flush=True)


def run_family(out: Path, family: str, *, trials: int, max_concurrent: int | None, fresh: bool) -> dict:
    """The sweep of one family in `out/<family>` (reused when complete) and its wall time."""
    from codesign.commands.sweep import DEFAULT_SPACE
    from codesign.sweep import run_sweep

    d = out / family
    if fresh and d.exists():
        shutil.rmtree(d)
    if (d / "wall.json").exists():  # finished by an earlier run of this benchmark
        from codesign.pareto.io import read_pareto_json
        from codesign.sweep.rows import read_trials

        trials, wall = read_trials(d), json.loads((d / "wall.json").read_text())["wall_s"]
        _log(f"{family}: reusing {d} ({len(trials)} trials, {wall:.0f} s)")
        return {"dir": str(d), "wall_s": round(wall, 1), "complete": True, "reused": True,
                "pareto": read_pareto_json(d)}
    t0 = time.perf_counter()
    resumed = (d / "sweep.json").exists()
    if resumed:  # an interrupted run: its wall time is the resumed part only
        result = run_sweep(None, None, d, SweepOptions(trials=trials, max_concurrent=max_concurrent), resume=True,
                           progress=False)
    else:
        opts = SweepOptions(trials=trials, schedules=family, max_concurrent=max_concurrent)
        result = run_sweep(DEFAULT_SPACE, DEFAULT_WORKLOAD, d, opts, progress=False)
    wall = time.perf_counter() - t0
    if result.complete and not resumed:
        (d / "wall.json").write_text(json.dumps({"wall_s": wall}))
    _log(f"{family}: {len(result.trials)} trials in {wall:.0f} s")
    return {"dir": str(d), "wall_s": round(wall, 1), "complete": result.complete, "resumed": resumed,
            "pareto": result.pareto.to_json()}


def trial_cpu(family: str, hw_name: str = STOCK) -> dict:
    """CPU seconds of one sweep trial (one process, no Ray): `hw_name` with the default workload's
    whole network and the default inner search on `family` (load-independent, unlike wall time)."""
    from codesign.hw.board import Board
    from codesign.sweep.network import timing_network
    from codesign.sweep.trial import evaluate_hw
    from codesign.workloads import get_workload

    net, _why = timing_network(DEFAULT_WORKLOAD)
    hw = HwConfig.from_name(hw_name)
    t0, w0 = time.process_time(), time.perf_counter()
    r = evaluate_hw(hw, Board.for_target(hw.TARGET), get_workload(DEFAULT_WORKLOAD), network=net,
                    schedules=family)
    return {"config": hw_name, "cpu_s": round(time.process_time() - t0, 1), "wall_s": round(time.perf_counter() - w0, 1),
            "measurements": r["measurements"], "latency_ms": round(r["latency_ms"], 3)}


def _front(rows: list, objectives: tuple[str, ...]) -> dict:
    from codesign.pareto import ParetoFront
    from codesign.sweep.results import design_points

    return {p.config: p for p in ParetoFront(objectives, design_points(rows)).points}


def summarize(runs: dict[str, dict], at: int | None = None) -> dict:
    """Both families' sweeps after the same number of finished trials (`at`; default: the fewer
    either finished), in the order they finished."""
    from codesign.sweep.rows import read_trials

    rows = {f: [t for t in read_trials(r["dir"]) if t.ok] for f, r in runs.items()}
    k = min(len(v) for v in rows.values()) if at is None else at
    rows = {f: v[:k] for f, v in rows.items()}
    objectives = tuple(runs["autotvm"]["pareto"].get("objectives") or ("latency_ms", "area", "power_w"))
    fronts = {f: _front(v, objectives) for f, v in rows.items()}
    designs = {f: {t.config: t for t in v if t.design} for f, v in rows.items()}
    out: dict = {"stock": STOCK, "at_trials": k, "objectives": list(objectives), "families": {}}
    for f in FAMILIES:
        stock = designs[f].get(STOCK)
        at_area = [t for t in designs[f].values() if stock is not None and t.area <= stock.area]
        best = min(at_area, key=lambda t: t.latency_ms) if at_area else None
        trial_s = sorted(t.wall_s or 0.0 for t in designs[f].values() if not t.cached)
        out["families"][f] = {
            "sweep_wall_s": runs[f]["wall_s"], "sweep_complete": runs[f]["complete"],
            "trials_finished": len([t for t in read_trials(runs[f]["dir"]) if t.ok]),
            "feasible_designs": len(designs[f]),
            "measurements_per_trial_median": statistics.median(t.measurements for t in designs[f].values())
            if designs[f] else None,
            "trial_wall_s_median": round(statistics.median(trial_s), 1) if trial_s else None,
            "front": [{"config": c, "latency_ms": round(p.latency_ms, 3), "area": round(p.area, 4),
                       "power_w": round(p.power_w, 3)} for c, p in sorted(fronts[f].items(),
                                                                          key=lambda kv: kv[1].latency_ms)],
            "stock_latency_ms": None if stock is None else round(stock.latency_ms, 3),
            "stock_area": None if stock is None else round(stock.area, 4),
            "best_at_stock_area": None if best is None else {"config": best.config, "latency_ms": round(best.latency_ms, 3),
                                                             "area": round(best.area, 4)},
        }
    a, v = out["families"]["autotvm"], out["families"]["vta"]
    out["front_only_autotvm"] = sorted(set(fronts["autotvm"]) - set(fronts["vta"]))
    out["front_only_vta"] = sorted(set(fronts["vta"]) - set(fronts["autotvm"]))
    out["front_both"] = sorted(set(fronts["vta"]) & set(fronts["autotvm"]))
    if a["best_at_stock_area"] and v["best_at_stock_area"]:
        la, lv = a["best_at_stock_area"]["latency_ms"], v["best_at_stock_area"]["latency_ms"]
        out["best_at_stock_area_ms"] = {"autotvm": la, "vta": lv, "moved_ms": round(lv - la, 3),
                                        "ratio_vta_over_autotvm": round(lv / la, 4)}
    common = sorted(set(designs["autotvm"]) & set(designs["vta"]))
    ratios = [designs["vta"][c].latency_ms / designs["autotvm"][c].latency_ms for c in common]
    if ratios:
        out["same_design_latency_vta_over_autotvm"] = {
            "designs": len(common), "min": round(min(ratios), 4), "median": round(statistics.median(ratios), 4),
            "max": round(max(ratios), 4), "worse": [c for c, r in zip(common, ratios) if r > 1 + 1e-9]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/bench_sweep_families", help="directory of the two sweeps")
    ap.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help=f"hardware trials (default {DEFAULT_TRIALS})")
    ap.add_argument("--max-concurrent", type=int, default=None, help="trials at once (default: one per CPU)")
    ap.add_argument("--fresh", action="store_true", help="start both sweeps over")
    ap.add_argument("--no-run", action="store_true",
                    help="compare the sweeps already in --out (finished or interrupted) without running any")
    ap.add_argument("--at", type=int, default=None,
                    help="compare after this many finished trials (default: the fewer either sweep finished)")
    ap.add_argument("--trial-cpu", action="store_true",
                    help="also time one trial (the stock config) per family in this process: CPU seconds")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.no_run:
        from codesign.pareto.io import read_pareto_json

        runs = {f: {"dir": str(out / f), "pareto": read_pareto_json(out / f) if (out / f / "pareto.json").exists()
                    else {}, "complete": (out / f / "wall.json").exists(),
                    "wall_s": json.loads((out / f / "wall.json").read_text())["wall_s"]
                    if (out / f / "wall.json").exists() else None} for f in FAMILIES}
    else:
        runs = {f: run_family(out, f, trials=args.trials, max_concurrent=args.max_concurrent, fresh=args.fresh)
                for f in FAMILIES}
    summary = {"command": "python benchmarks/sweep_families.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               "trials": args.trials, "workload": DEFAULT_WORKLOAD, **summarize(runs, args.at)}
    if args.trial_cpu:
        summary["trial_cpu"] = {f: trial_cpu(f) for f in FAMILIES}
        a, v = summary["trial_cpu"]["autotvm"], summary["trial_cpu"]["vta"]
        summary["trial_cpu"]["ratio_vta_over_autotvm"] = round(v["cpu_s"] / a["cpu_s"], 2) if a["cpu_s"] else None
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
