"""Replay AutoTVM arm_cpu records on the CPU cost model (`codesign replay` of an arm_cpu log):
rebuild each record's conv, board and CPU, predict its seconds, compare with the measurement.
docs/cpu-model.md."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from codesign.autotvm import ERROR_NAMES, ArmCpuOp, Record, arm_cpu_op, is_arm_cpu, parse_log
from codesign.calibrate.cpu_board import is_board_run, load_board_cases
from codesign.calibrate.metrics import mape, spearman
from codesign.calibrate.replay import Skip
from codesign.cpu import CpuModel, CpuWork, conv_work, predict
from codesign.errors import CodesignError
from codesign.hw.board import Board


@dataclass(frozen=True)
class CpuCase:
    """A usable arm_cpu record: its conv, the board of its `-model=` and that board's CPU."""

    file: str
    record: Record
    op: ArmCpuOp
    board: str
    cpu: str

    @property
    def work(self) -> CpuWork:
        return conv_work(self.op.shape, self.op.dtype, self.op.kind)

    @property
    def measured_s(self) -> float:
        return self.record.cost


@dataclass(frozen=True)
class CpuReplayRow:
    file: str
    line: int
    task: str
    model: str
    cpu: str
    layer: str
    kind: str
    dtype: str
    macs: int
    bytes: int
    measured_s: float
    predicted_s: float
    basis: str

    @property
    def error_pct(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s * 100.0

    @property
    def measured_gmacs(self) -> float:
        return self.macs / self.measured_s / 1e9

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["error_pct"] = self.error_pct
        d["measured_gmacs"] = self.measured_gmacs
        return d


def build_cpu_case(record: Record, file: str = "") -> CpuCase:
    """Rebuild one arm_cpu record; a CodesignError's message is the reason to skip it."""
    if not is_arm_cpu(record):
        raise CodesignError("not an arm_cpu record (VTA records are replayed on the VTA model: replay that log "
                            "on its own)")
    if record.error_no != 0:
        raise CodesignError(f"measurement failed on the board (error_no={record.error_no} "
                            f"{ERROR_NAMES.get(record.error_no, '?')})")
    if any(c <= 0 for c in record.costs):
        raise CodesignError(f"non-positive cost {record.costs}")
    if record.model is None:
        raise CodesignError("target has no -model=<board> (e.g. -model=pynq, -model=ultra96)")
    board = Board.for_target(record.model)
    if not board.cpu:
        raise CodesignError(f"board {board.name} names no CPU (hw_configs/boards/{board.name}.yaml `cpu:`)")
    return CpuCase(file=file, record=record, op=arm_cpu_op(record), board=board.name, cpu=board.cpu)


def load_cpu_cases(sources: Sequence[str | Path] | str | Path) -> tuple[list[CpuCase], list[Skip]]:
    if isinstance(sources, (str, Path)):
        sources = [sources]
    cases: list[CpuCase] = []
    skipped: list[Skip] = []
    for src in sources:
        name = str(src)
        if is_board_run(src):  # `codesign run --board --json` of a deployed network
            got, bad_rows = load_board_cases(src)
            cases += got  # type: ignore[arg-type] - BoardCase reads as a CpuCase
            skipped += bad_rows
            continue
        records, bad = parse_log(src)
        skipped += [Skip(name, s.line, s.reason) for s in bad]
        for rec in records:
            try:
                cases.append(build_cpu_case(rec, name))
            except CodesignError as exc:
                skipped.append(Skip(name, rec.line, str(exc)))
    return cases, skipped


def _metrics(rows: Sequence[CpuReplayRow]) -> dict[str, Any]:
    pred = [r.predicted_s for r in rows]
    meas = [r.measured_s for r in rows]
    return {"records": len(rows), "mape": mape(pred, meas), "spearman": spearman(pred, meas),
            "max_abs_error_pct": float(max(abs(r.error_pct) for r in rows)) if rows else float("nan")}


def summarize_cpu(rows: Sequence[CpuReplayRow], skipped: Sequence[Skip]) -> dict[str, Any]:
    groups: dict[str, list[CpuReplayRow]] = {}
    for r in rows:
        groups.setdefault(f"{r.cpu} {r.kind}/{r.dtype}", []).append(r)
    return {
        "records": len(rows) + len(skipped),
        "replayed": len(rows),
        "skipped": len(skipped),
        "skipped_reasons": dict(Counter(s.reason for s in skipped).most_common()),
        **{k: v for k, v in _metrics(rows).items() if k != "records"},
        "per_cpu": {cpu: _metrics([r for r in rows if r.cpu == cpu]) for cpu in sorted({r.cpu for r in rows})},
        "per_kind": {k: _metrics(v) for k, v in sorted(groups.items())},
    }


def replay_cpu(sources: Sequence[str | Path] | str | Path, model: CpuModel | None = None,
               ) -> tuple[list[CpuReplayRow], list[Skip], dict[str, Any]]:
    """Predict every usable arm_cpu record of the logs with `model` (default: the shipped
    sim/cpu_params.json). Returns (rows, skipped, summary)."""
    model = model or CpuModel.load()
    cases, skipped = load_cpu_cases(sources)
    rows: list[CpuReplayRow] = []
    for case in cases:
        try:
            cost = predict(case.work, model.params(case.cpu))
        except CodesignError as exc:
            skipped.append(Skip(case.file, case.record.line, str(exc)))
            continue
        w = case.work
        rows.append(CpuReplayRow(
            file=case.file, line=case.record.line, task=case.record.task, model=case.record.model or "",
            cpu=case.cpu, layer=case.op.shape.name, kind=w.kind, dtype=w.dtype, macs=w.macs, bytes=w.bytes,
            measured_s=case.measured_s, predicted_s=cost.seconds, basis=cost.basis))
    skipped.sort(key=lambda s: (s.file, s.line))
    return rows, skipped, summarize_cpu(rows, skipped)


def is_arm_cpu_log(sources: Sequence[str | Path]) -> bool | None:
    """True if every record of the logs is an arm_cpu record, False if none is, None if mixed
    (or no record at all: False)."""
    flags = set()
    for src in sources:
        records, _ = parse_log(src)
        flags |= {is_arm_cpu(r) for r in records}
    if flags == {True, False}:
        return None
    return flags == {True}


__all__ = ["CpuCase", "CpuReplayRow", "build_cpu_case", "load_cpu_cases", "summarize_cpu", "replay_cpu",
           "is_arm_cpu_log"]
