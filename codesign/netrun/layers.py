"""Run a network's offloaded layers on one hardware config, in network order, with their best
schedules, checking every output against the NumPy reference (`codesign run`).

Schedules, per layer: the fastest record of `--records` for (layer, hw), of any schedule family; otherwise the tophub
record VTA itself would apply (AutoTVM's tophub context, shipped here as
`sim/calibration/pynq_resnet18.log` for the two published PYNQ configs); otherwise AutoTVM's
fallback, the first valid config of the space (every split at its smallest inner tile).

Data: fixed-seed int8 weights (no trained weights ship with the project); the input of a layer is
the previous layer's output when the shapes match (the main path of the network), else fixed-seed
int8 data. A layer repeated `count` times in the network runs once and counts `count` times in the
total (the same program on the same shapes takes the same time).

Each layer gets predicted seconds from the timing model (timing only, with the chosen parameters
or profile): device time (cycles / clock) and the whole call (device + host terms). An executor
runs it: the functional simulator (`--simulate`: device time from the same model) or a board
(device time measured start-to-done by the driver, and the board's whole driver call). Measured
and predicted are compared on device time; the call times are shown beside them. The record's own
seconds are shown too (a board measurement of the whole call for tophub records).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.evaluate.run import measure_seconds, run_layer
from codesign.hw.config import HwConfig
from codesign.paths import SIM_DATA
from codesign.plotting import pyplot, save_figure
from codesign.schedule.space import get_space
from codesign.schedule.support import partition
from codesign.tune.records import (
    MeasureRecord,
    best_any_family,
    best_records,
    import_autotvm_log,
    load_records,
    resolve_config,
)
from codesign.vta import timing
from codesign.workloads import get_workload
from codesign.workloads.networks import Workload

TOPHUB_LOG = SIM_DATA / "calibration" / "pynq_resnet18.log"
SEED = 0


@dataclass(frozen=True)
class LayerResult:
    position: int
    layer: str
    count: int
    index: int
    schedule_source: str  # records | tophub | fallback
    input_source: str  # chained | random
    predicted_s: float  # model: device + host terms (a whole operator call)
    predicted_device_s: float  # model: cycles / clock
    measured_device_s: float
    measured_call_s: float | None  # a board's whole driver call; None on the simulator
    record_s: float | None
    bit_exact: bool
    mismatches: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# executor(layer, config, hw, data, weight) -> (int8 output, device seconds, call seconds or None)
Executor = Callable[[Any, Any, HwConfig, np.ndarray, np.ndarray], tuple[np.ndarray, float, float | None]]


def simulator_executor(params: timing.TimingParams) -> Executor:
    def run(layer: Any, config: Any, hw: HwConfig, data: np.ndarray, weight: np.ndarray):
        res = run_layer(layer, config, hw, data=data, weight=weight, params=params)
        return res.output, res.cycles / hw.clock_hz, None

    return run


def load_schedule_records(paths: Sequence[str | Path]) -> list[MeasureRecord]:
    out: list[MeasureRecord] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            raise ConfigError(f"{path}: is a directory; expected a records.jsonl or an AutoTVM log")
        recs = load_records(path)
        if not recs:
            recs = import_autotvm_log(path)
        if not recs:
            raise ConfigError(f"{path}: no usable records (neither our records JSONL nor AutoTVM v0.2 lines)")
        out += recs
    return out


def record_family(rec: MeasureRecord) -> str:
    # Records written before schedule families existed are AutoTVM template schedules.
    return str(getattr(rec, "family", "autotvm"))


def choose_schedules(workload: Workload, hw: HwConfig, records: Sequence[MeasureRecord],
                     skipped: list[MeasureRecord] | None = None) -> list[tuple[Any, int, Any, str, float | None]]:
    """(layer, count, config, source, record seconds) for every offloaded layer, in network order.
    Records are resolved by their knobs (`best_any_family`); faster records whose knobs are no
    longer a valid schedule are passed over and appended to `skipped`."""
    offloaded, _cpu = partition(workload, hw)
    mine = best_any_family(records, skipped)  # the fastest valid record of any family
    tophub = best_records(import_autotvm_log(TOPHUB_LOG))
    out = []
    for layer, count in offloaded:
        space = get_space(layer, hw)
        got = mine.get((layer.name, hw.name))
        if got is not None:
            out.append((layer, count, got[1], "records", got[0].seconds))
            continue
        rec = tophub.get((layer.name, hw.name))
        config = None if rec is None else resolve_config(get_space(layer, hw, record_family(rec)), rec.knobs)
        if config is not None:
            out.append((layer, count, config, "tophub", rec.seconds))  # type: ignore[union-attr]
        else:
            out.append((layer, count, space.get(int(space.valid_indices()[0])), "fallback", None))
    return out


def run_network(workload_name: str | Workload, hw: HwConfig, records: Sequence[MeasureRecord] = (),
                params: timing.TimingParams | None = None, executor: Executor | None = None,
                on_layer: Callable[[LayerResult], None] | None = None) -> dict[str, Any]:
    params = timing.default_params() if params is None else params
    executor = executor or simulator_executor(params)
    workload = (workload_name if isinstance(workload_name, Workload) else get_workload(workload_name)).for_hw(hw)
    _offloaded, cpu = partition(workload, hw)
    rng = np.random.default_rng(SEED)
    prev: np.ndarray | None = None
    rows: list[LayerResult] = []
    stale: list[MeasureRecord] = []
    for k, (layer, count, config, source, record_s) in enumerate(choose_schedules(workload, hw, records, stale)):
        weight = rng.integers(-128, 128, size=layer.weight_shape(), dtype=np.int8)
        if prev is not None and prev.shape == tuple(layer.data_shape()):
            data, input_source = prev, "chained"
        else:
            data = rng.integers(-128, 128, size=layer.data_shape(), dtype=np.int8)
            input_source = "random"
        predicted, cycles = measure_seconds(layer, config, hw, params)
        output, device, call = executor(layer, config, hw, data, weight)
        reference = layer.reference(data, weight)
        mismatches = int(np.count_nonzero(np.asarray(output) != reference))
        row = LayerResult(k, layer.name, count, int(config.index), source, input_source, float(predicted),
                          cycles / hw.clock_hz, float(device), None if call is None else float(call),
                          None if record_s is None else float(record_s), mismatches == 0, mismatches)
        rows.append(row)
        prev = np.asarray(output, dtype=np.int8)
        if on_layer is not None:
            on_layer(row)
    total_pred = sum(r.predicted_device_s * r.count for r in rows)
    total_meas = sum(r.measured_device_s * r.count for r in rows)
    calls = [r.measured_call_s for r in rows]
    return {
        "workload": workload.name, "batch": workload.batch, "hw": hw.name,
        "layers": [r.to_dict() for r in rows], "records_skipped": len(stale),
        "cpu_layers": [{"layer": layer.name, "count": c, "reason": why} for layer, c, why in cpu],
        # Device time, model vs executor; then whole calls: model (device + host) and board.
        "total_predicted_device_s": total_pred, "total_measured_device_s": total_meas,
        "total_predicted_call_s": sum(r.predicted_s * r.count for r in rows),
        "total_measured_call_s": (sum(c * r.count for c, r in zip(calls, rows))  # type: ignore[operator]
                                  if rows and all(c is not None for c in calls) else None),
        # Sum of the records' own seconds when every layer has one (tophub: 2019 board measurements).
        "total_record_s": (sum(r.record_s * r.count for r in rows)  # type: ignore[operator]
                           if rows and all(r.record_s is not None for r in rows) else None),
        "all_bit_exact": all(r.bit_exact for r in rows),
    }


def plot(result: dict[str, Any], path: str | Path, measured_label: str) -> Path:
    plt = pyplot()
    rows = result["layers"]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(rows) + 2), 4.2))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["predicted_device_s"] * 1e3 * r["count"] for r in rows], 0.4, label="predicted (model)")
    ax.bar(x + 0.2, [r["measured_device_s"] * 1e3 * r["count"] for r in rows], 0.4, label=measured_label)
    ax.set_xticks(x, [f"{r['position']}: {r['layer'].replace('conv2d_', '')} x{r['count']}" for r in rows],
                  rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("device ms per network run (layer x count)")
    ax.set_title(f"{result['workload']} on {result['hw']}: device time predicted "
                 f"{result['total_predicted_device_s'] * 1e3:.1f} ms, {measured_label} "
                 f"{result['total_measured_device_s'] * 1e3:.1f} ms", fontsize=9)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


__all__ = ["record_family", "LayerResult", "run_network", "choose_schedules", "load_schedule_records", "simulator_executor", "plot",
           "TOPHUB_LOG"]
