"""CPU cases from a board run (`codesign run --board --json > RUN.json`; `codesign calibrate cpu
RUN.json -o FILE`): each CPU GEMM step the deployed network ran on the board, its work as the CPU
model counts it (`cpu_work` of the op's row) and its measured wall ms, so the fit learns the rates
of the board runtime's own kernels (docs/board.md, "The CPU model meets the board")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesign.calibrate.replay import Skip
from codesign.cpu import CpuWork
from codesign.errors import CodesignError, ConfigError
from codesign.hw.board import Board


@dataclass(frozen=True)
class _Measured:
    line: int       # the op's position in the run's rows
    cost: float     # measured seconds


@dataclass(frozen=True)
class _Shape:
    name: str


@dataclass(frozen=True)
class _Op:
    kind: str
    dtype: str
    shape: _Shape


@dataclass(frozen=True)
class BoardCase:
    """What `cpu_fit` reads of a case (as `CpuCase`): file, record (line, cost), op (kind,
    dtype, shape name), board, cpu, work, measured_s."""

    file: str
    record: _Measured
    op: _Op
    board: str
    cpu: str
    work: CpuWork

    @property
    def measured_s(self) -> float:
        return self.record.cost


def is_board_run(path: str | Path) -> bool:
    return str(path).endswith(".json")


def load_board_cases(path: str | Path) -> tuple[list[BoardCase], list[Skip]]:
    name = str(path)
    try:
        run: Any = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise ConfigError(f"{name}: not JSON ({exc})") from None
    if not isinstance(run, dict) or not isinstance(run.get("ops"), list) or "measured_ms" not in run:
        raise ConfigError(f"{name}: not the JSON of `codesign run --board --json` with a deployed network "
                          "(no ops with measured_ms)")
    board = str(run.get("board"))
    try:
        Board.named(board)
    except CodesignError:
        raise ConfigError(f"{name}: board {board!r} is not a known board") from None
    cpu = str(run.get("cpu") or board)
    cases, skipped = [], []
    for k, row in enumerate(run["ops"]):
        w = row.get("cpu_work")
        if not isinstance(w, dict):
            continue
        ms = row.get("measured_ms")
        if not isinstance(ms, (int, float)) or ms <= 0:
            skipped.append(Skip(name, k, f"op {row.get('name')}: no positive measured_ms"))
            continue
        try:
            work = CpuWork(str(w["name"]), str(w["kind"]), str(w["dtype"]), int(w["macs"]), int(w["bytes"]))
        except (KeyError, TypeError, ValueError, CodesignError) as exc:
            skipped.append(Skip(name, k, f"op {row.get('name')}: cpu_work {exc}"))
            continue
        cases.append(BoardCase(name, _Measured(k, float(ms) / 1e3), _Op(work.kind, work.dtype, _Shape(work.name)),
                               board, cpu, work))
    return cases, skipped


__all__ = ["BoardCase", "is_board_run", "load_board_cases"]
