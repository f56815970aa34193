"""Benchmark of the co-design sweep. Prints one JSON summary on stdout.

(a) search quality: on an enumerable space (default `pynq-z1-medium`, 184 usable configs, so 50
    evaluations see over a quarter of it; `--space-a` picks another), hypervolume of the NSGA-II / MOTPE
    (and random) fronts after 10, 25, 50 hardware evaluations divided by the hypervolume of the
    exhaustive front, median and quartiles over seeds. To make many seeds affordable, every usable
    config is evaluated ONCE with inner tuning (an exhaustive Ray sweep, modest budget `--budget-a`)
    and its objectives are cached in the output directory (reused on the next run); the searchers
    are then driven over the cached objectives through the very Ray Tune searcher the sweep builds
    (`codesign.sweep.search.build_search`: Ray's OptunaSearch with Optuna's NSGAIISampler /
    TPESampler / RandomSampler behind `FeasibleSearch`), sequentially via their suggest /
    on_trial_complete interface (one trial at a time, no Ray workers). As in the sweep, an
    evaluation is one trial on a new usable config (infeasible and repeated suggestions are answered
    without a trial). Random = Optuna's uniform choice per parameter, behind the same filter.
(b) wall time of a ResNet-18 sweep of N hardware configs (default 50) with inner tuning on this
    machine's cores, and its scaling with Ray workers (1 vs 2 concurrent trials, on a shorter sweep).
(c) the best feasible PYNQ-Z1 design of sweep (b) vs the stock 1x16 config evaluated with the same
    inner tuner and budget: ResNet-18 conv latency ratio among designs using <= the stock's
    resources (each of LUT, FF, BRAM18, DSP), and whether any design dominates the stock on
    latency, area and power.

    /work/venv/bin/python benchmarks/sweep.py            # full (long: two sweeps plus (a))
    /work/venv/bin/python benchmarks/sweep.py --quick    # minutes: fewer trials and seeds
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

from codesign.hw.config import HwConfig
from codesign.paths import SPACES
from codesign.sweep.options import SweepOptions
from codesign.sweep.trial import INFEASIBLE_AREA, INFEASIBLE_LATENCY_MS, INFEASIBLE_POWER_W, OBJECTIVES

CHECKPOINTS = (10, 25, 50)


def _log(msg: str) -> None:
    print(f"[bench sweep] {msg}", file=sys.stderr, flush=True)


def _front(points: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
    from codesign.pareto import ParetoFront

    front = ParetoFront(points=[dict(zip(OBJECTIVES, p)) for p in points])
    return front.values()


# -- (a) -------------------------------------------------------------------------------------------
def _space_path(name: str) -> Path:
    """A space name in hw_configs/spaces/ (e.g. pynq-z1-medium) or a path to a space YAML."""
    p = Path(name)
    if p.suffix and p.exists():
        return p.resolve()
    return SPACES / f"{p.stem if p.suffix else name}.yaml"


def exhaustive_objectives(out: Path, space_path: Path, *, budget: int, tuner: str) -> dict:
    """Objectives (latency_ms, area, power_w) of every usable config of the space, each evaluated
    once with inner tuning of every ResNet-18 layer by an exhaustive `codesign sweep` (Ray, one
    trial per config). Cached in `out/a_objectives_<space>_<tuner>_b<budget>.json` and reused if
    the space file is unchanged; an interrupted exhaustive sweep resumes from its directory."""
    from codesign.hw.space import HwSpace
    from codesign.pareto import read_pareto_json
    from codesign.sweep import run_sweep
    from codesign.sweep.results import read_trials

    tag = f"{space_path.stem}_{tuner}_b{budget}"
    cache = out / f"a_objectives_{tag}.json"
    digest = hashlib.sha256(space_path.read_bytes()).hexdigest()
    if cache.exists():
        doc = json.loads(cache.read_text())
        if doc.get("space_sha256") == digest:
            _log(f"(a) cached objectives of {len(doc['objectives'])} configs: {cache}")
            doc["from_cache"] = True
            return doc
        _log(f"(a) {cache} is for another version of {space_path.name}; re-evaluating")
    exh_dir = out / f"a_exhaustive_{tag}"
    usable = len(HwSpace.load(space_path).enumerate())
    _log(f"(a) exhaustive sweep of {space_path.name}: {usable} usable configs, {tuner} budget {budget} per layer")
    t0 = time.perf_counter()
    if (exh_dir / "sweep.json").exists():
        run_sweep(None, None, exh_dir, resume=True, progress=False)
    else:
        run_sweep(space_path, "resnet18", exh_dir,
                  SweepOptions(trials=None, budget=budget, tuner=tuner, search="exhaustive", seed=0), progress=False)
    wall = time.perf_counter() - t0
    objectives = {row.config: [float(getattr(row, k)) for k in OBJECTIVES] for row in read_trials(exh_dir)
                  if row.design}
    pareto = read_pareto_json(exh_dir)  # the sweep's reference point rule and exhaustive hypervolume
    doc = {"space": str(space_path), "space_sha256": digest, "workload": "resnet18", "tuner": tuner,
           "budget": budget, "usable": usable, "objectives": objectives,
           "reference_point": pareto["reference_point"], "hypervolume": pareto["hypervolume"],
           "exhaustive_sweep_dir": str(exh_dir), "exhaustive_sweep_wall_s": round(wall, 1)}
    cache.write_text(json.dumps(doc, indent=1))
    doc["from_cache"] = False
    return doc


def _stats(xs: list[float]) -> dict:
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else (xs[0],) * 3
    return {"median": statistics.median(xs), "q1": q1, "q3": q3, "iqr": q3 - q1, "min": min(xs), "max": max(xs)}


def search_quality(out: Path, *, space_name: str, seeds: int, budget: int, tuner: str) -> dict:
    from codesign.hw.space import HwSpace
    from codesign.pareto import hypervolume
    from codesign.sweep.search import build_search

    space_path = _space_path(space_name)
    space = HwSpace.load(space_path)
    usable = len(space.enumerate())
    evals = max(CHECKPOINTS)
    if usable <= evals:
        _log(f"(a) warning: {space_path.name} has only {usable} usable configs; {evals} evaluations enumerate it")
    cached = exhaustive_objectives(out, space_path, budget=budget, tuner=tuner)
    table = {name: tuple(v) for name, v in cached["objectives"].items()}
    if len(table) != usable:
        _log(f"(a) warning: {len(table)} of {usable} usable configs have objectives (failed trials count as "
             "infeasible)")
    penalty = (INFEASIBLE_LATENCY_MS, INFEASIBLE_AREA, INFEASIBLE_POWER_W)
    ref = cached["reference_point"]
    true_front = _front(list(table.values()))
    hv_true = hypervolume(true_front, ref)
    assert abs(hv_true - cached["hypervolume"]) <= 1e-9 * max(1.0, hv_true)

    def lookup(params: dict) -> tuple[float, ...]:
        hw, reason = space.check(params)
        if hw is None or reason is not None or hw.name not in table:
            return penalty
        return table[hw.name]

    def ratio(found: list[tuple[float, ...]]) -> float:
        return hypervolume(_front(found), ref) / hv_true if found else 0.0

    t0 = time.perf_counter()
    curves: dict[str, list[list[float]]] = {}
    suggestions: dict[str, list[int]] = {}
    for search in ("nsga2", "motpe", "random"):
        curves[search], suggestions[search] = [], []
        for seed in range(seeds):
            # Exactly the searcher `codesign sweep --search <search>` builds: Ray's OptunaSearch
            # behind FeasibleSearch, which answers infeasible and already-evaluated suggestions
            # without a trial, so every evaluation below is a new usable config.
            alg = build_search(search, space, trials=evals, seed=seed).search_alg
            found: list[tuple[float, ...]] = []
            ratios: list[float] = []
            for k in range(1, evals + 1):
                tid = f"t{k}"
                params = alg.suggest(tid)
                if params is None or params == "FINISHED":  # every usable config evaluated
                    ratios.extend([ratio(found)] * sum(1 for c in CHECKPOINTS if c >= k))
                    break
                obj = lookup(params)
                if obj != penalty:
                    found.append(obj)
                alg.on_trial_complete(tid, dict(zip(OBJECTIVES, obj)))
                if k in CHECKPOINTS:
                    ratios.append(ratio(found))
            curves[search].append(ratios)
            suggestions[search].append(alg.suggestions)
        _log(f"(a) {search}: median hv ratio at {CHECKPOINTS}: "
             f"{[round(statistics.median(c[i] for c in curves[search]), 4) for i in range(len(CHECKPOINTS))]}")
    summary = {
        search: {
            **{str(n): _stats([c[i] for c in runs]) for i, n in enumerate(CHECKPOINTS)},
            "per_seed": {str(n): [round(c[i], 4) for c in runs] for i, n in enumerate(CHECKPOINTS)},
            "median_suggestions_for_50": statistics.median(suggestions[search]),
        }
        for search, runs in curves.items()
    }
    try:
        space_rel = str(space_path.relative_to(SPACES.parent.parent))
    except ValueError:
        space_rel = str(space_path)
    return {
        "space": space_rel, "grid_points": space.size, "usable_configs": usable,
        "configs_with_objectives": len(table), "evaluations_as_fraction_of_usable": round(evals / usable, 3),
        "workload": "resnet18", "inner_tuner": tuner, "inner_budget_per_layer": budget,
        "exhaustive_front": len(true_front), "hypervolume_exhaustive": hv_true, "reference_point": ref,
        "objectives_from_cache": cached["from_cache"], "objectives_cache_dir": str(out),
        "exhaustive_sweep_wall_s": cached["exhaustive_sweep_wall_s"], "search_wall_s": round(time.perf_counter() - t0, 1),
        "seeds": seeds, "hv_ratio": summary,
        "target": "nsga2/motpe median >= 0.95 at 50 evaluations",
        "method": "Every usable config evaluated once with inner tuning (an exhaustive Ray sweep; objectives "
                  "cached); each searcher then driven sequentially over the cached objectives through the "
                  "Ray Tune searcher `codesign sweep` builds (codesign.sweep.search.build_search: OptunaSearch "
                  "with NSGAIISampler / multi-objective TPESampler / RandomSampler, wrapped in FeasibleSearch), "
                  "via suggest/on_trial_complete, stock configs first. An evaluation = one trial = one new "
                  "usable config, as in the sweep: infeasible or repeated suggestions are answered without a "
                  "trial (median_suggestions_for_50 counts every proposal). hv ratio = hypervolume of the "
                  "front found / hypervolume of the exhaustive front, same reference point; quartiles over seeds.",
    }


# -- (b) + (c) -------------------------------------------------------------------------------------
def timed_sweep(out: Path, name: str, *, trials: int, budget: int, tuner: str, max_concurrent: int,
                seed: int = 0) -> tuple[float, object]:
    from codesign.sweep import run_sweep

    d = out / name
    t0 = time.perf_counter()
    if (d / "sweep.json").exists():
        res = run_sweep(None, None, d, resume=True, progress=False)
    else:
        res = run_sweep(SPACES / "pynq-z1.yaml", "resnet18", d,
                        SweepOptions(trials=trials, budget=budget, tuner=tuner, search="nsga2", seed=seed,
                                     max_concurrent=max_concurrent), progress=False)
    return time.perf_counter() - t0, res


def versus_stock(result, *, budget: int, tuner: str, out: Path) -> dict:
    from codesign.hw.board import Board
    from codesign.sweep.trial import evaluate_hw
    from codesign.workloads import get_workload

    board = Board.named("pynq-z1")
    stock = HwConfig.resolve("pynq_1x16")
    wl = get_workload("resnet18")
    evals = {}
    for b in sorted({budget, 4 * budget}):
        evals[b] = evaluate_hw(stock, board, wl, tuner=tuner, budget=b, seed=0,
                               records_path=out / f"c_stock_records_b{b}.jsonl")
    base = evals[budget]
    so = tuple(base[k] for k in OBJECTIVES)
    rows = [r.to_json() for r in result.trials if r.design]
    keys = ("lut", "ff", "bram18", "dsp")
    within = [r for r in rows if all(r["resources"][k] <= base["resources"][k] for k in keys)]
    best = min(within, key=lambda r: r["latency_ms"]) if within else None
    best100 = min((r for r in within if r["hw"]["clock_mhz"] == 100), key=lambda r: r["latency_ms"], default=None)
    # The front's area objective (utilization of the scarcest resource) as the budget instead.
    by_area = min((r for r in rows if r["area"] <= base["area"]), key=lambda r: r["latency_ms"], default=None)
    dominating = [r["config"] for r in rows
                  if all(x <= y for x, y in zip((r[k] for k in OBJECTIVES), so))
                  and any(x < y for x, y in zip((r[k] for k in OBJECTIVES), so))]
    return {
        "stock": stock.name, "stock_latency_ms": base["latency_ms"], "stock_area": base["area"],
        "stock_power_w": base["power_w"], "stock_resources": {k: base["resources"][k] for k in keys},
        "stock_latency_ms_by_budget": {str(b): e["latency_ms"] for b, e in evals.items()},
        "designs_within_stock_resources": len(within),
        "best_within_stock_resources": None if best is None else {
            "config": best["config"], "latency_ms": best["latency_ms"], "area": best["area"],
            "power_w": best["power_w"], "resources": {k: best["resources"][k] for k in keys}},
        "latency_ratio": None if best is None else base["latency_ms"] / best["latency_ms"],
        "latency_ratio_vs_stock_tuned_4x": None if best is None else
        evals[max(evals)]["latency_ms"] / best["latency_ms"],
        "best_within_stock_resources_at_100mhz": None if best100 is None else {
            "config": best100["config"], "latency_ms": best100["latency_ms"],
            "ratio": base["latency_ms"] / best100["latency_ms"]},
        "best_within_stock_area": None if by_area is None else {
            "config": by_area["config"], "latency_ms": by_area["latency_ms"], "area": by_area["area"],
            "power_w": by_area["power_w"], "ratio": base["latency_ms"] / by_area["latency_ms"]},
        "dominating_stock": dominating,
        "target": "latency ratio >= 1.5 at <= stock resources, or domination on all three objectives",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer trials and seeds (a few minutes)")
    ap.add_argument("--out", default="runs/bench_sweep", help="working directory (reused: finished sweeps resume)")
    ap.add_argument("--parts", default="a,b,c", help="comma list of a, b, c")
    ap.add_argument("--tuner", default="xgb")
    ap.add_argument("--budget", type=int, default=None, help="measurements per layer (default 16, quick 8)")
    ap.add_argument("--trials", type=int, default=None, help="(b) hardware configs (default 50, quick 12)")
    ap.add_argument("--seeds", type=int, default=None, help="(a) seeds (default 10, quick 3)")
    ap.add_argument("--space-a", default="pynq-z1-medium",
                    help="(a) space name in hw_configs/spaces/ or a YAML path (default pynq-z1-medium)")
    ap.add_argument("--budget-a", type=int, default=None,
                    help="(a) measurements per layer of the exhaustive evaluation (default 12, quick 8)")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    budget = args.budget or (8 if args.quick else 16)
    trials = args.trials or (12 if args.quick else 50)
    seeds = args.seeds or (3 if args.quick else 10)
    budget_a = args.budget_a or (8 if args.quick else 12)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    summary: dict = {"quick": args.quick, "cpus": os.cpu_count(), "tuner": args.tuner, "budget": budget,
                     "loadavg_at_start": os.getloadavg()}
    try:
        if "a" in parts:
            summary["a_search_quality"] = search_quality(out, space_name=args.space_a, seeds=seeds,
                                                         budget=budget_a, tuner=args.tuner)
        if "b" in parts or "c" in parts:
            _log(f"(b) ResNet-18 sweep of {trials} configs, 2 concurrent trials")
            wall2, res2 = timed_sweep(out, f"b_sweep_{trials}_c2", trials=trials, budget=budget, tuner=args.tuner,
                                      max_concurrent=2)
            n_small = max(8, trials // 2)
            _log(f"(b) scaling: {n_small} configs with 1 and 2 concurrent trials")
            w1, _ = timed_sweep(out, f"b_scale_{n_small}_c1", trials=n_small, budget=budget, tuner=args.tuner,
                                max_concurrent=1, seed=7)
            w2, _ = timed_sweep(out, f"b_scale_{n_small}_c2", trials=n_small, budget=budget, tuner=args.tuner,
                                max_concurrent=2, seed=7)
            ok = [r.to_json() for r in res2.trials if r.ok]
            summary["b_wall_time"] = {
                "trials": trials, "wall_s": round(wall2, 1), "wall_min": round(wall2 / 60, 2),
                "s_per_trial": round(wall2 / max(1, len(ok)), 2),
                "feasible_trials": sum(1 for r in ok if r.get("feasible")),
                "distinct_configs": len({r["config"] for r in ok}),
                "measurements": sum(int(r.get("measurements", 0)) for r in ok if not r.get("cached")),
                "front_size": len(res2.pareto.points), "hypervolume": res2.pareto.hypervolume,
                "target": "<= 30 min for 50 configs on 2 cores",
                "loadavg_after": os.getloadavg(),
                "scaling": {"trials": n_small, "wall_s_1_worker": round(w1, 1), "wall_s_2_workers": round(w2, 1),
                            "speedup": round(w1 / w2, 2) if w2 > 0 else math.nan,
                            "note": "different seeds/configs than the main sweep; same seed for 1 vs 2"},
            }
            if "c" in parts:
                _log("(c) stock 1x16 with the same inner tuning")
                summary["c_vs_stock"] = versus_stock(res2, budget=budget, tuner=args.tuner, out=out)
    finally:
        ray.shutdown()
    print(json.dumps(summary, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
