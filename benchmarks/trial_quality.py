"""How close one default sweep trial's inner search gets to the best known schedules of its design
(issue 35 §2: within 2% of the best known whole-network latency, at no more CPU per trial than
~2.2 s for ResNet-18 on pynq_1x16).

Per hardware design (`--hw`, default the stock pynq_1x16 and pynq_4x8) and the workload's whole
network (default ResNet-18):
- the default trial: `sweep.trial.evaluate_hw` with every default (the default search of
  `codesign.tune.search`, `SWEEP_BUDGET` measurements per layer), its whole-network latency, its
  measurements and its CPU seconds in a warm process (a sweep worker runs trial after trial; one
  1-measurement trial of the design warms the compiled paths first);
- the best known: per layer the network plan asks VTA about, the fastest of the default trial's
  best and the `--top` fastest records of that layer and design in `--best-records` files (of any
  schedule family; e.g. `codesign tune --workload resnet18 --hw X --budget 1000 --records F`, a
  1,000-measurement learned search per layer), re-timed with today's timing model; then the
  network plan with those schedules (`place.plan_network`, as a trial scores its own);
- gap % = default / best known - 1;
- besides, both as `codesign run --records` would plan them (`netrun.refine`: per VTA op the fastest
  fused op among a layer's fastest records; a sweep trial plans with each layer's fastest plain
  schedule): the trial from all its measurements, the best known from the records above; the best
  known is the faster of both plans.

The shipped references (`BEST_RECORDS`, the default of `--best-records`) are the `--top` fastest
records per layer and design of such searches, written by `--save-best` (provenance:
benchmarks/data/trial_quality_best.md). Prints one JSON object. Usage:
    python benchmarks/trial_quality.py [--hw pynq_1x16,pynq_4x8] [--best-records F ...] [--top 8] [--save-best F]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codesign.evaluate.run import measure
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.netrun.network import refine
from codesign.netrun.schedules import ScheduleChooser
from codesign.network.graph import Network
from codesign.place import plan_network
from codesign.schedule.knobs import Config
from codesign.sweep.network import timing_network
from codesign.sweep.trial import evaluate_hw
from codesign.tune.records import MeasureRecord, RecordWriter, family_space, load_records
from codesign.tune.search import SWEEP_BUDGET, network_layers
from codesign.workloads import get_workload
from codesign.workloads.layers import Layer

TARGET_GAP_PCT = 2.0  # issue 35 §2
BEST_RECORDS = Path(__file__).parent / "data" / "trial_quality_best.jsonl"


def _log(msg: str) -> None:
    print(f"[bench trial_quality] {msg}", file=sys.stderr, flush=True)


def default_trial(hw: HwConfig, board: Board, workload: str, net: Network) -> tuple[dict[str, Any], float,
                                                                                   list[MeasureRecord]]:
    """(the default trial's result, its CPU seconds in a warm process, its measurements: the same
    trial again, writing them, so that the first one's CPU seconds are a sweep trial's)."""
    wl = get_workload(workload)
    evaluate_hw(hw, board, wl, network=net, budget=1)  # warm the compiled paths of this design
    t0 = time.process_time()
    result = evaluate_hw(hw, board, wl, network=net)
    cpu_s = time.process_time() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trial.jsonl"
        again = evaluate_hw(hw, board, wl, network=net, records_path=path)
        assert again["latency_ms"] == result["latency_ms"], "the default trial is deterministic"
        return result, cpu_s, load_records(path)


def refined_ms(hw: HwConfig, board: Board, net: Network, records: Sequence[MeasureRecord]) -> float:
    """Whole-network ms of the plan `codesign run --records` makes from `records`."""
    chooser = ScheduleChooser(hw, records)
    plan, _chosen = refine(plan_network(net, hw, board, chooser), chooser)
    return plan.latency_s * 1e3


def record_config(layer: Layer, hw: HwConfig, r: MeasureRecord) -> Config | None:
    """A record's schedule in its family's space on `hw`, or None when it is no longer a valid one."""
    try:
        space = family_space(layer, hw, r.family)
        config = space.from_knobs(r.knobs)
    except Exception:  # noqa: BLE001 - knobs of an older space, or a family this layer lacks
        return None
    return config if space.why_invalid(config) is None else None


def fastest(records: Sequence[MeasureRecord], layer: Layer, hw: HwConfig, top: int) -> list[MeasureRecord]:
    """The `top` fastest records of `layer` on `hw`."""
    return sorted((r for r in records if r.ok and r.layer == layer.name and r.hw == hw.name), key=lambda r: r.seconds)[:top]


def best_known(hw: HwConfig, board: Board, net: Network, trial: dict[str, Any], records: Sequence[MeasureRecord],
               top: int) -> tuple[float, dict[str, float]]:
    """(whole-network ms with the best known schedule of every plan layer, per layer its best ms)."""
    rows = {row["layer"]: row for row in trial["layers"]}
    best: dict[Layer, tuple[Config, float]] = {}
    for layer, _count in network_layers(net, hw, board):
        cands: list[tuple[float, Config]] = []
        if layer.name in rows:
            space = family_space(layer, hw, "vta")
            cands.append((float(rows[layer.name]["seconds"]), space.from_knobs(rows[layer.name]["knobs"])))
        for r in fastest(records, layer, hw, top):
            config = record_config(layer, hw, r)
            if config is not None:
                cands.append((float(measure(layer, config, hw).seconds), config))
        if cands:
            s, config = min(cands, key=lambda c: c[0])
            best[layer] = (config, s)

    def choose(layer: Layer) -> tuple[Config, float]:
        if layer in best:
            return best[layer]
        raise KeyError(layer.name)

    plan = plan_network(net, hw, board, choose)
    return plan.latency_s * 1e3, {layer.name: s * 1e3 for layer, (_c, s) in best.items()}


def design_row(name: str, workload: str, net: Network, records: Sequence[MeasureRecord], top: int) -> dict[str, Any]:
    hw = HwConfig.resolve(name)
    board = Board.for_target(hw.TARGET)
    trial, cpu_s, measured = default_trial(hw, board, workload, net)
    known_ms, per_layer = best_known(hw, board, net, trial, records, top)
    trial_ms = float(trial["latency_ms"])
    trial_refined = refined_ms(hw, board, net, measured)
    best = [r for layer, _c in network_layers(net, hw, board) for r in fastest([*records, *measured], layer, hw, top)]
    # and from every record of the design: `codesign run --records` picks a fused op's schedule among a layer's
    # fastest records that fit its epilogue, which the `--top` plain ones may not hold
    mine = [r for r in [*records, *measured] if r.ok and r.hw == hw.name]
    known_refined = min(refined_ms(hw, board, net, best), refined_ms(hw, board, net, mine))
    known_ms = min(known_ms, known_refined, trial_ms, trial_refined)
    gap = (trial_ms / known_ms - 1.0) * 100.0
    layers = {row["layer"]: {"trial_ms": round(row["seconds"] * 1e3, 4), "best_known_ms": round(per_layer[row["layer"]], 4),
                             "count": row["count"]} for row in trial["layers"] if row["layer"] in per_layer}
    return {"hw": hw.name, "default_trial_ms": round(trial_ms, 3), "best_known_ms": round(known_ms, 3),
            "gap_pct": round(gap, 2), "default_trial_refined_ms": round(trial_refined, 3),
            "gap_refined_pct": round((trial_refined / known_ms - 1.0) * 100.0, 2), "cpu_s_per_trial": round(cpu_s, 2), "measurements": int(trial["measurements"]),
            "within_target": gap <= TARGET_GAP_PCT, "layers": layers}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hw", default="pynq_1x16,pynq_4x8")
    ap.add_argument("--workload", default="resnet18")
    ap.add_argument("--best-records", nargs="*", default=[str(BEST_RECORDS)] if BEST_RECORDS.exists() else [],
                    metavar="FILE", help="records of long searches (codesign tune --records) whose best schedules are "
                    f"re-timed (default {BEST_RECORDS.relative_to(Path(__file__).parent.parent)})")
    ap.add_argument("--top", type=int, default=8, help="fastest records per layer re-timed (default 8)")
    ap.add_argument("--save-best", metavar="FILE", help="append the --top fastest records per plan layer and design")
    args = ap.parse_args()
    net, why = timing_network(args.workload)
    if net is None:
        raise SystemExit(f"{args.workload}: no network graph ({why})")
    records = [r for f in args.best_records for r in load_records(f)]
    rows = []
    for name in args.hw.split(","):
        _log(f"{name}: default trial, then the best known of {len(records)} records")
        rows.append(design_row(name.strip(), args.workload, net, records, args.top))
        if args.save_best:
            hw = HwConfig.resolve(name.strip())
            with RecordWriter(args.save_best) as w:
                for layer, _count in network_layers(net, hw, Board.for_target(hw.TARGET)):
                    w.write_all(fastest(records, layer, hw, args.top))
    gaps = [r["gap_pct"] for r in rows]
    print(json.dumps({"workload": args.workload, "sweep_budget": SWEEP_BUDGET, "target_gap_pct": TARGET_GAP_PCT,
                      "best_records": args.best_records, "designs": rows,
                      "max_gap_pct": max(gaps) if gaps else math.nan}, indent=1))


if __name__ == "__main__":
    main()
