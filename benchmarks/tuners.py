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
spaces; the ground truth is the exhaustive optimum, which for both families finishes in minutes
on the simulator (the vta family's ResNet-18 layers hold up to a few thousand valid schedules).
XGBoost and the evolutionary search (`evo`) transfer through the same base model.

    python benchmarks/tuners.py --quick            # a few layers, 3 seeds, ~ minutes
    python benchmarks/tuners.py --schedules vta --tuners random,xgb,evo,bandit --transfer-algos xgb,evo,bandit
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
    ap.add_argument("--tuners", default=",".join(TUNERS))
    ap.add_argument("--seeds", type=int, default=None, help="seeds per tuner (default 5; quick 3)")
    ap.add_argument("--budget", type=int, default=None, help="measurements per run (default 200; quick 100)")
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
    ap.add_argument("--schedules", default="autotvm", choices=("autotvm", "vta"), help="schedule family (default autotvm)")
    args = ap.parse_args(argv)

    seeds = args.seeds or (3 if args.quick else 5)
    budget = args.budget or (100 if args.quick else 200)
    pre_budget = args.pretrain_budget or (40 if args.quick else 60)
    tuners = tuple(t for t in args.tuners.split(",") if t)
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
