"""Is the `vta` schedule family at least as good as `autotvm` on every layer of the zoo networks?
(issue 19 §1: `vta` becomes the default of tune, sweep and run once it is.) Prints one JSON
summary on stdout; exit status 0 when it holds on every layer, 1 when not.

For every zoo network (`codesign workloads`), every shipped hardware config (`hw_configs/*.yaml`)
and every unique layer VTA offloads there (`schedule.partition`, at the config's BATCH):
- `autotvm`: the best template schedule, every valid config timed (the default `auto` search is
  exhaustive on every template space on the simulator);
- `vta`, `--search auto` (default): what the default sweep/tune finds on the vta family —
  `auto` there is template+local (`codesign.tune.template_local`: the template's schedules by
  `auto` with the sweep's `--exhaustive-budget`, then `local` from the template optimum with
  `--budget` measurements); `--search exhaustive`: every valid vta config timed;
- containment: the template optimum's point of the vta family (`VtaSpace.from_template`) is valid
  there and times the same (so an exhaustive vta search can never lose).
A layer holds when best vta <= best autotvm (relative tolerance 1e-9).

    python benchmarks/family_check.py                          # every zoo network, both configs
    python benchmarks/family_check.py --nets resnet18 --search exhaustive
    python benchmarks/family_check.py --budget 16 --exhaustive-budget 10 --learned auto   # template+learned
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.paths import HW_CONFIGS
from codesign.schedule import get_space, partition
from codesign.sweep.options import DEFAULT_BUDGET, DEFAULT_EXHAUSTIVE_S
from codesign.tune.exhaustive import exhaustive_table
from codesign.workloads import ZOO, get_workload

TOL = 1e-9


def _log(msg: str) -> None:
    print(f"[bench family_check] {msg}", file=sys.stderr, flush=True)


def shipped_configs() -> list[HwConfig]:
    return [HwConfig.resolve(p.stem) for p in sorted(Path(HW_CONFIGS).glob("*.yaml"))]


def best_of(table: dict[int, tuple[float, int]]) -> tuple[int, float] | None:
    if not table:
        return None
    i = min(table, key=lambda k: (table[k][0], k))
    return i, table[i][0]


def vta_auto(layer, hw: HwConfig, *, budget: int, exhaustive_s: float, seed: int,
             learned: str | None = None) -> tuple[float | None, dict]:
    """The default search on the vta family, as a sweep trial and `codesign tune` run it (`auto`
    on vta = template+local: the template's schedules by `auto`, then `local` from the template
    optimum with `budget` measurements; no transfer). `learned`: the family stage's search is
    that learned search instead (`template_local.tune_template_then_local(learned=...)`)."""
    from codesign.tune.loop import TaskRun
    from codesign.tune.measure import SimulatorRunner
    from codesign.tune.task import make_task
    from codesign.tune.template_local import search_name, tune_template_then_local

    with SimulatorRunner(hw) as runner:
        def make_run(lay, k, family, tuner, b, first):
            extra = {"time_budget_s": exhaustive_s, "learned_budget": budget} if tuner == "auto" else {}
            task = make_task(lay, hw, tuner, seed + k, family=family, **extra)
            return TaskRun(task, budget=b, seed=seed + k, runner=runner, seeds=first)

        res = tune_template_then_local([(layer, 1)], hw, make_run, budget=budget, seed=seed, learned=learned)[0]
    return res.best_seconds, {"search": search_name(learned), "measurements": int(res.measurements),
                              "best_family": getattr(res.best, "family", None)}


def check_layer(layer, hw: HwConfig, *, search: str, budget: int, exhaustive_s: float, seed: int,
                learned: str | None = None) -> dict:
    t0 = time.perf_counter()
    a = best_of(exhaustive_table(layer, hw, family="autotvm"))
    row: dict = {"layer": layer.name, "hw": hw.name}
    if a is None:
        return {**row, "holds": None, "why": "no valid template schedule"}
    a_idx, a_s = a
    tspace, vspace = get_space(layer, hw, "autotvm"), get_space(layer, hw, "vta")
    point = vspace.from_template(tspace.get(a_idx))
    why = vspace.why_invalid(point)
    contained = why is None and abs(measure(layer, point, hw).seconds - a_s) <= TOL * a_s
    if search == "exhaustive":
        v = best_of(exhaustive_table(layer, hw, family="vta"))
        v_s, info = (None if v is None else v[1]), {"search": "exhaustive", "valid": len(vspace.valid_indices())}
    else:
        v_s, info = vta_auto(layer, hw, budget=budget, exhaustive_s=exhaustive_s, seed=seed, learned=learned)
    holds = v_s is not None and v_s <= a_s * (1 + TOL)
    return {**row, "autotvm_us": round(a_s * 1e6, 3), "vta_us": None if v_s is None else round(v_s * 1e6, 3),
            "speedup": None if v_s is None else round(a_s / v_s, 4), "holds": holds,
            "template_point_contained": contained, "template_point_why_invalid": why, **info,
            "wall_s": round(time.perf_counter() - t0, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nets", default=",".join(ZOO), help="zoo networks (default: all)")
    ap.add_argument("--hw", default=None, help="hardware configs (default: the shipped ones, hw_configs/*.yaml)")
    ap.add_argument("--search", default="auto", choices=("auto", "exhaustive"), help="the vta family's search")
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="auto's learned budget (the sweep's default)")
    ap.add_argument("--exhaustive-budget", type=float, default=DEFAULT_EXHAUSTIVE_S,
                    help="auto: exhaustive when a layer fits this many seconds (the sweep's default)")
    ap.add_argument("--learned", default=None,
                    help="--search auto: the family stage's search, a learned tuner (auto: the shipped agent where it "
                         "matches, else xgb; or xgb, evo, bandit, random) instead of local")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also append one JSON line per layer to this file")
    args = ap.parse_args(argv)
    configs = [HwConfig.resolve(h) for h in args.hw.split(",")] if args.hw else shipped_configs()
    t0, c0 = time.perf_counter(), time.process_time()
    rows, seen = [], {}
    for net in args.nets.split(","):
        for hw in configs:
            offloaded, _cpu = partition(get_workload(net).for_hw(hw), hw)
            for layer, _count in offloaded:
                key = (layer, hw.name)
                if key not in seen:
                    seen[key] = check_layer(layer, hw, search=args.search, budget=args.budget,
                                            exhaustive_s=args.exhaustive_budget, seed=args.seed, learned=args.learned)
                    r = seen[key]
                    _log(f"{net} {hw.name} {layer.name}: autotvm {r.get('autotvm_us')} us, vta {r.get('vta_us')} us "
                         f"({r.get('search')}) {'ok' if r['holds'] else 'WORSE'}")
                    if args.out:
                        with open(args.out, "a") as f:
                            f.write(json.dumps({"net": net, **r}) + "\n")
                rows.append({"net": net, **seen[key]})
    unique = list(seen.values())
    failing = [r for r in unique if not r["holds"]]
    summary = {
        "command": "python benchmarks/family_check.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "search": args.search, "nets": args.nets.split(","), "hw": [h.name for h in configs],
        "layers": len(rows), "unique_layers": len(unique), "holds": not failing,
        "failing": [{k: r.get(k) for k in ("layer", "hw", "autotvm_us", "vta_us", "speedup", "search", "valid",
                                           "measurements", "template_point_contained")} for r in failing],
        "not_contained": [(r["layer"], r["hw"], r.get("template_point_why_invalid")) for r in unique
                          if r.get("template_point_contained") is False],
        "speedup_min": min((r["speedup"] for r in unique if r.get("speedup")), default=None),
        "speedup_median": sorted(r["speedup"] for r in unique if r.get("speedup"))[len(unique) // 2] if unique else None,
        "searches": {s: sum(1 for r in unique if r.get("search") == s) for s in {r.get("search") for r in unique}},
        "wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(time.process_time() - c0, 1),
        "budget": args.budget, "exhaustive_budget_s": args.exhaustive_budget,
        "rows": rows,
    }
    print(json.dumps(summary, indent=1))
    return 0 if not failing else 1


if __name__ == "__main__":
    sys.exit(main())
