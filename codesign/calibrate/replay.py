"""Replay AutoTVM records on the timing model: rebuild layer, hardware and config from each
record, recompute the config index, check validity, predict seconds, compare with the board.

docs/vta.md §8 (log format), §7.2 (index), §4 (timing).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.autotvm import ERROR_NAMES, Record, layer_from_args, parse_log, resolve_hw
from codesign.calibrate.metrics import mape, spearman
from codesign.errors import CodesignError
from codesign.evaluate.run import measure_seconds
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace
from codesign.schedule.support import unsupported_reason
from codesign.vta.timing import TimingParams, default_params


@dataclass(frozen=True)
class Skip:
    """A line or record that replay/calibrate could not use, and why."""

    file: str
    line: int
    reason: str


@dataclass(frozen=True)
class Case:
    """A usable record: the rebuilt hardware, layer and schedule config."""

    file: str
    record: Record
    hw: HwConfig
    layer: Any
    config: Any
    index_computed: int
    why_invalid: str | None

    @property
    def valid(self) -> bool:
        return self.why_invalid is None

    @property
    def measured_s(self) -> float:
        return self.record.cost


@dataclass(frozen=True)
class ReplayRow:
    file: str
    line: int
    task: str
    model: str
    layer: str
    index_recorded: int
    index_computed: int
    valid: bool
    why_invalid: str | None
    measured_s: float
    predicted_s: float | None
    cycles: int | None
    rank: dict[str, Any] | None = None  # rank_recorded(), with replay(..., rank=True)

    @property
    def error_pct(self) -> float | None:
        if self.predicted_s is None:
            return None
        return (self.predicted_s - self.measured_s) / self.measured_s * 100.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["error_pct"] = self.error_pct
        return d


def build_case(record: Record, file: str = "", hw: HwConfig | None = None) -> Case:
    """Rebuild one record; raises a CodesignError whose message is the reason to skip it. `hw`
    (the `--hw` flag) is the config of records whose `-model=` names only a board or `sim`
    (v0.1 logs, `autotvm.resolve_hw`)."""
    if record.error_no != 0:
        raise CodesignError(f"measurement failed on the board (error_no={record.error_no} "
                            f"{ERROR_NAMES.get(record.error_no, '?')})")
    if any(c <= 0 for c in record.costs):
        raise CodesignError(f"non-positive cost {record.costs}")
    hw = resolve_hw(record, hw)
    layer = layer_from_args(record.task, record.args, hw)
    reason = unsupported_reason(layer, hw)
    if reason:
        raise CodesignError(f"layer {layer.name} cannot run on {hw.vta_model}: {reason}")
    space = ScheduleSpace(layer, hw)
    config = space.from_knobs(record.knobs)
    return Case(file=file, record=record, hw=hw, layer=layer, config=config,
                index_computed=int(config.index), why_invalid=space.why_invalid(config))


def load_cases(sources: Sequence[str | Path] | str | Path, hw: HwConfig | None = None,
               ) -> tuple[list[Case], list[Skip]]:
    """Parse log files into usable cases plus the skipped lines/records with reasons."""
    if isinstance(sources, (str, Path)):
        sources = [sources]
    cases: list[Case] = []
    skipped: list[Skip] = []
    for src in sources:
        name = str(src)
        records, bad = parse_log(src)
        skipped += [Skip(name, s.line, s.reason) for s in bad]
        for rec in records:
            try:
                cases.append(build_case(rec, name, hw))
            except CodesignError as exc:
                skipped.append(Skip(name, rec.line, str(exc)))
    return cases, skipped


def predict_case(case: Case, params: TimingParams) -> tuple[float, int]:
    """(seconds, cycles) of a case in timing mode, through `run.measure_seconds`."""
    seconds, cycles = measure_seconds(case.layer, case.config, case.hw, params=params)
    return float(seconds), int(cycles)


def rank_recorded(case: Case, params: TimingParams, predicted_s: float | None = None) -> dict[str, Any]:
    """Where the model ranks the record's config among every valid config of its layer: a
    board-tuned record (AutoTVM keeps the fastest measured config) should rank near the top if
    the model orders schedules as the board does."""
    space = ScheduleSpace(case.layer, case.hw)
    valid = space.valid_indices()
    times = []
    for idx in valid:
        try:
            times.append(predict_case(dataclasses.replace(case, config=space.get(int(idx))), params)[0])
        except CodesignError:
            continue
    t = np.array(times)
    mine = predict_case(case, params)[0] if predicted_s is None else predicted_s
    return {"n_valid": int(t.size), "faster_configs": int((t < mine).sum()),
            "rank_pct": float((t < mine).mean() * 100) if t.size else float("nan"),
            "best_predicted_s": float(t.min()) if t.size else float("nan"),
            "recorded_over_best": float(mine / t.min()) if t.size else float("nan")}


def summarize(rows: Sequence[ReplayRow], skipped: Sequence[Skip]) -> dict[str, Any]:
    used = [r for r in rows if r.predicted_s is not None]
    pred = [r.predicted_s for r in used]
    meas = [r.measured_s for r in used]
    per_model: dict[str, Any] = {}
    for model in sorted({r.model for r in used}):
        sub = [r for r in used if r.model == model]
        per_model[model] = {
            "records": len(sub),
            "mape": mape([r.predicted_s for r in sub], [r.measured_s for r in sub]),
            "spearman": spearman([r.predicted_s for r in sub], [r.measured_s for r in sub]),
        }
    reasons = Counter(s.reason for s in skipped)
    ranked = [r.rank for r in used if r.rank is not None]
    ranking = None
    if ranked:
        ranking = {
            "records": len(ranked),
            "ranked_first": sum(1 for k in ranked if k["faster_configs"] == 0),
            "median_rank_pct": float(np.median([k["rank_pct"] for k in ranked])),
            "max_rank_pct": float(max(k["rank_pct"] for k in ranked)),
            "median_recorded_over_best": float(np.median([k["recorded_over_best"] for k in ranked])),
        }
    return {
        "records": len(rows) + len(skipped),
        "replayed": len(used),
        "invalid": sum(1 for r in rows if not r.valid),
        "index_mismatch": sum(1 for r in rows if r.index_recorded != r.index_computed),
        "skipped": len(skipped),
        "skipped_reasons": dict(reasons.most_common()),
        "mape": mape(pred, meas),
        "spearman": spearman(pred, meas),
        "max_abs_error_pct": float(np.max(np.abs(np.array(pred) / np.array(meas) - 1)) * 100) if used else None,
        "per_model": per_model,
        "ranking": ranking,
    }


def replay(sources: Sequence[str | Path] | str | Path, params: TimingParams | None = None,
           on_case: Callable[[int, int], None] | None = None, rank: bool = False, hw: HwConfig | None = None,
           ) -> tuple[list[ReplayRow], list[Skip], dict[str, Any]]:
    """Replay every record of the given logs. Returns (rows, skipped, summary).
    `on_case(done, total)` is called after each record (progress bars). With `rank`, each valid
    record also gets `rank_recorded` (times every valid config of its layer: slower)."""
    params = default_params() if params is None else params
    cases, skipped = load_cases(sources, hw)
    rows: list[ReplayRow] = []
    for k, case in enumerate(cases):
        predicted: float | None = None
        cycles: int | None = None
        if case.valid:
            try:
                predicted, cycles = predict_case(case, params)
            except CodesignError as exc:
                skipped.append(Skip(case.file, case.record.line, f"simulation failed: {exc}"))
                if on_case is not None:
                    on_case(k + 1, len(cases))
                continue
        rec = case.record
        ranked = rank_recorded(case, params, predicted) if rank and predicted is not None else None
        rows.append(ReplayRow(
            file=case.file, line=rec.line, task=rec.task, model=rec.model or "", layer=case.layer.name,
            index_recorded=rec.index, index_computed=case.index_computed, valid=case.valid,
            why_invalid=case.why_invalid, measured_s=rec.cost, predicted_s=predicted, cycles=cycles,
            rank=ranked,
        ))
        if on_case is not None:
            on_case(k + 1, len(cases))
    skipped.sort(key=lambda s: (s.file, s.line))
    return rows, skipped, summarize(rows, skipped)


__all__ = ["Skip", "Case", "ReplayRow", "build_case", "load_cases", "predict_case", "rank_recorded", "summarize",
           "replay"]
