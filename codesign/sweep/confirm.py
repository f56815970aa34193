"""Multi-fidelity sweep: the simulator screens, boards confirm (`codesign sweep --confirm ...`).

After a simulated sweep, each front design (fastest simulated first, `top` of them) that has a
catalog bitstream for the sweep's board is fetched (sha256 checked), programmed on the boards
through `RPCRunner` (a board address, or a tracker and key: measurements spread over its boards),
and every offloaded layer is re-tuned on the board with a small budget seeded by the simulator's
ranking: the `retune` best schedules of that layer and config in `records.jsonl` are measured on
the board (checked bit for bit against NumPy) and the one with the lowest device time counts.

Measured latency is the board's per-call time (device plus the real host driver), the counterpart
of the simulated latency (device model plus the modelled host terms); device time is kept beside
it, next to the model's (cycles / clock). On an emulated board the call time is the emulator's own
wall time, so there only the device time is meaningful (it equals the model's by construction).

Files in the sweep directory:
    confirm.jsonl          one line per confirmed design (appended as each finishes: a rerun reuses
                           them, so an interrupted confirmation continues where it stopped)
    confirm_records.jsonl  every board measurement (`codesign.tune` records with source/device_s)
    pareto.json            gains `confirm`: simulated and measured latency per front design, the
                           front recomputed on measured latency, designs without a bitstream with
                           the `codesign bitstream build` command that makes one
    front_confirmed.png    latency vs area, simulated and measured side by side

Area and power stay the models' values (a board run measures time, not resources or watts).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from codesign.bitstream import catalog, fetch
from codesign.errors import ConfigError
from codesign.fileio import append_jsonl, atomic_write_json
from codesign.hw.config import HwConfig
from codesign.hw.space import HwSpace
from codesign.pareto import ParetoFront
from codesign.pareto.io import PARETO_FILE, ParetoDoc, read_pareto
from codesign.pareto.point import DesignPoint
from codesign.plotting import pyplot, save_figure
from codesign.schedule import ScheduleSpace
from codesign.schedule.support import partition
from codesign.sweep.options import SweepOptions
from codesign.sweep.rows import TrialRow, read_trials
from codesign.sweep.trial import RECORDS_FILE
from codesign.tune import RecordWriter, load_records
from codesign.tune.measure import MeasureInput
from codesign.tune.records import MeasureRecord
from codesign.tune.rpc_runner import RPCRunner
from codesign.workloads import Workload, get_workload

CONFIRM_FILE = "confirm.jsonl"
CONFIRM_RECORDS = "confirm_records.jsonl"
CONFIRM_PLOT = "front_confirmed.png"
DEFAULT_RETUNE = 4  # board measurements per layer: the simulator's best schedules


def _workload(opts: SweepOptions) -> Workload:
    if opts.layers:
        return Workload(opts.workload, tuple((s, int(c)) for s, c in opts.layers))
    return get_workload(opts.workload)


def _ranked(records: list[MeasureRecord], hw: str, layer: str, first: int | None, n: int) -> list[int]:
    """The simulator's ranking of `layer`'s schedules on `hw`: the sweep's best first, then the
    fastest other simulated ones, `n` schedule indices in all."""
    ok = sorted((r for r in records if r.hw == hw and r.layer == layer and r.ok and r.source == "simulator"),
                key=lambda r: r.seconds)
    out: list[int] = [] if first is None else [int(first)]
    for r in ok:
        if len(out) >= n:
            break
        if r.index not in out:
            out.append(int(r.index))
    return out[:max(n, 1)]


def confirm_design(runner: RPCRunner, point: DesignPoint, row: TrialRow, workload: Workload,
                   records: list[MeasureRecord], retune: int, writer: RecordWriter | None) -> dict[str, Any]:
    """Re-measure one design's layers on the board(s): the `retune` best simulated schedules each."""
    hw = HwConfig.from_dict(row.hw) if isinstance(row.hw, dict) else HwConfig.from_name(str(row.config))
    wl = workload.for_hw(hw)
    offloaded, _cpu = partition(wl, hw)
    sim = {lay.layer: lay for lay in row.layers}
    layers, sources = [], set()
    totals = {"sim_dev": 0.0, "dev": 0.0, "call": 0.0}
    for layer, count in offloaded:
        if layer.name not in sim:  # no schedule ran in the simulator: left out there too
            continue
        space = ScheduleSpace(layer, hw)
        indices = _ranked(records, hw.name, layer.name, sim[layer.name].index, retune)
        inputs = [MeasureInput(layer, hw, space.get(i)) for i in indices]
        results = runner.run(inputs)
        if writer is not None:
            writer.write_all(MeasureRecord.make(layer, hw, r.config, r.seconds, r.cycles, r.error, "confirm", 0,
                                                source=r.source, device_s=r.device_s, call_s=r.call_s)
                             for r in results)
        ok = [r for r in results if r.ok]
        if not ok:
            errors = "; ".join(sorted({str(r.error) for r in results}))[:300]
            raise ConfigError(f"{row.config}: no schedule of {layer.name} ran on the board ({errors})")
        # Chosen by device time (start to done, timed on the board): the call time adds the host's
        # jitter, which would pick noise among near-equal schedules.
        best = min(ok, key=lambda r: r.seconds)
        sources.update(r.source for r in ok)
        sim_dev = float(sim[layer.name].cycles or 0) / hw.clock_hz  # the model's device time
        call = float(best.call_s if best.call_s is not None else best.seconds)
        totals["sim_dev"] += sim_dev * count
        totals["dev"] += float(best.seconds) * count
        totals["call"] += call * count
        layers.append({"layer": layer.name, "count": count, "simulated_s": float(sim[layer.name].seconds),
                       "simulated_device_s": sim_dev, "measured_device_s": float(best.seconds),
                       "measured_call_s": call, "index": int(best.config.index),
                       "simulated_index": sim[layer.name].index, "measured": len(results),
                       "failed": len(results) - len(ok)})
    ms = 1e3 / wl.batch  # per image
    return {"config": row.config, "simulated_latency_ms": float(point.latency_ms or 0.0),
            "simulated_device_ms": totals["sim_dev"] * ms, "measured_device_ms": totals["dev"] * ms,
            "measured_latency_ms": totals["call"] * ms, "layers": layers, "sources": sorted(sources),
            "retune": retune, "timestamp": time.time()}


def read_confirmed(out: Path) -> dict[str, dict[str, Any]]:
    path = out / CONFIRM_FILE
    done: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash: that design is confirmed again
            done[(row["config"], row.get("sha256"), row.get("retune"))] = row
    return done


def run_confirm(out_dir: str | Path, *, board: str | None = None, tracker: str | None = None, key: str | None = None,
                top: int | None = None, retune: int = DEFAULT_RETUNE, user_catalog: Path | None = None,
                on_step: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Confirm the front of the finished sweep in `out_dir` on boards; returns pareto.json's
    `confirm` section (and writes it, confirm.jsonl and the plot)."""
    say = on_step or (lambda _s: None)
    if bool(board) == bool(tracker):
        raise ConfigError("--confirm HOST:PORT or --confirm-tracker HOST:PORT --confirm-key KEY (one of them)")
    if tracker and not key:
        raise ConfigError(f"--confirm-tracker {tracker} needs --confirm-key (the board type, e.g. pynq)")
    if top is not None and top < 1 or retune < 1:
        raise ConfigError(f"--confirm-top {top} / --confirm-retune {retune}: must be >= 1")
    out = Path(out_dir).resolve()
    opts = SweepOptions.load(out)
    board_name = HwSpace.load(out / opts.space).board.name
    doc = read_pareto(out / PARETO_FILE)
    rows: dict[str, TrialRow] = {}
    for r in read_trials(out):
        if r.design:
            rows.setdefault(str(r.config), r)
    front = sorted(doc.points, key=lambda p: p.latency_ms or 0.0)
    chosen = front[:top] if top else front
    entries = catalog.load(user_catalog)
    plan, missing = [], []
    for point in chosen:
        hw = HwConfig.from_dict(point.hw) if isinstance(point.hw, dict) else HwConfig.from_name(point.config)
        hits = catalog.find(entries, hw, board_name)
        if hits:
            plan.append((point, hits[0]))
        else:
            missing.append({"config": point.config, "simulated_latency_ms": point.latency_ms,
                            "build": f"codesign bitstream build {point.config} --board {board_name} "
                                     "--vta-hw PATH_TO_TVM_VTA"})
    done = read_confirmed(out)
    records = load_records(out / RECORDS_FILE) if (out / RECORDS_FILE).exists() else []
    workload = _workload(opts)
    confirmed: list[dict[str, Any]] = []
    for point, entry in plan:
        cached = done.get((point.config, entry.sha256, retune))
        if cached is not None:
            say(f"{point.config}: confirmed before ({CONFIRM_FILE}), reused")
            confirmed.append(cached)
            continue
        path, downloaded = fetch.fetch(entry)
        say(f"{point.config}: {'downloaded' if downloaded else 'cached'} bitstream {path} (sha256 verified)")
        runner = RPCRunner([board] if board else (), tracker=tracker, key=key or "", bitstream=str(path),
                           check_correctness=True)
        try:
            with RecordWriter(out / CONFIRM_RECORDS) as writer:
                res = confirm_design(runner, point, rows[point.config], workload, records, retune, writer)
        finally:
            runner.close()
        res["sha256"] = entry.sha256
        append_jsonl(out / CONFIRM_FILE, res)
        say(f"{point.config}: simulated {res['simulated_latency_ms']:.3f} ms, measured "
            f"{res['measured_latency_ms']:.3f} ms on {', '.join(res['sources'])}")
        confirmed.append(res)
    section = confirm_section(doc, confirmed, missing, front, chosen, board or f"{key}@{tracker}", retune)
    by_cfg = {c["config"]: c for c in confirmed}
    points = tuple(replace(p, measured_latency_ms=by_cfg[p.config]["measured_latency_ms"],
                           measured_device_ms=by_cfg[p.config]["measured_device_ms"]) if p.config in by_cfg else p
                   for p in doc.points)
    doc = replace(doc, points=points)
    section["plot"] = str(plot_confirmed(doc, out / CONFIRM_PLOT))
    atomic_write_json(out / PARETO_FILE, replace(doc, confirm=section).to_json())
    return section


def confirm_section(doc: ParetoDoc, confirmed: list[dict[str, Any]], missing: list[dict[str, Any]],
                    front: list[DesignPoint], chosen: list[DesignPoint], where: str,
                    retune: int) -> dict[str, Any]:
    by_cfg = {p.config: p for p in front}
    measured = ParetoFront(points=[replace(by_cfg[c["config"]], latency_ms=c["measured_latency_ms"])
                                   for c in confirmed])
    return {
        "boards": where, "retune": retune,
        "designs": [{k: c[k] for k in ("config", "simulated_latency_ms", "measured_latency_ms",
                                       "simulated_device_ms", "measured_device_ms", "layers", "sources",
                                       "sha256")} for c in confirmed],
        "measured_front": [p.config for p in sorted(measured.points, key=lambda p: p.latency_ms or 0.0)],
        "missing_bitstream": missing,
        "not_confirmed_top": [p.config for p in front if p not in chosen],
    }


def plot_confirmed(doc: ParetoDoc, path: Path) -> Path:
    """Latency vs area of the front: simulated (circles) and measured (crosses) side by side."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    pts = doc.points
    ax.scatter([p.latency_ms for p in pts], [p.area for p in pts], marker="o", facecolors="none",
               edgecolors="tab:blue", label="simulated")
    conf = [p for p in pts if p.measured_latency_ms is not None]
    for p in conf:
        ax.plot([p.latency_ms, p.measured_latency_ms], [p.area, p.area], color="0.6", lw=0.8)
    ax.scatter([p.measured_latency_ms for p in conf], [p.area for p in conf], marker="x",
               color="tab:red", label="measured on board")
    for p in pts:
        ax.annotate(p.config, (p.latency_ms, p.area), fontsize=6, alpha=0.7)
    ax.set_xlabel("latency per image (ms)")
    ax.set_ylabel("area (mean utilization)")
    ax.set_title("Pareto front: simulated vs measured latency")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


__all__ = ["run_confirm", "confirm_design", "DEFAULT_RETUNE", "CONFIRM_FILE", "CONFIRM_RECORDS"]
