"""The experiment directory's results: `trials.jsonl` (one line per finished trial) and
`records.jsonl` (its schedule records, sent with the trial's result), both appended by the driver,
the running Pareto front written to `pareto.json` after every trial, and the Ray Tune callback that
does all of it on the driver's main thread (trials write nothing: on a cluster they may run on a
machine without the experiment directory)."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from ray import tune
from tqdm import tqdm

from codesign.fileio import append_jsonl
from codesign.hw.space import HwSpace
from codesign.pareto import ParetoFront, reference_point, write_pareto_json
from codesign.pareto.io import PARETO_FILE, ParetoDoc
from codesign.pareto.objectives import OBJECTIVES, describe
from codesign.pareto.point import DesignPoint
from codesign.sweep.filtering import SKIPPED_FILE
from codesign.sweep.options import OPTIONS_FILE, SPACE_COPY, SweepOptions
from codesign.sweep.rows import TRIALS_FILE, TrialRow, read_trials
from codesign.sweep.state import RecordsLog, unpack_lines
from codesign.sweep.trial import RECORDS_FILE

__all__ = ["SweepCallback", "design_points", "pareto_state", "read_trials", "write_pareto"]


def design_points(rows: list[TrialRow]) -> list[DesignPoint]:
    """The feasible finished trials as pareto points, first evaluation of each config only."""
    out, seen = [], set()
    for row in rows:
        if not row.design or row.config in seen:
            continue
        seen.add(row.config)
        out.append(row.point())
    return out


def pareto_state(rows: list[TrialRow], *, stock_names: tuple[str, ...], power_bound: float,
                 objectives: tuple[str, ...] = OBJECTIVES
                 ) -> tuple[ParetoFront, dict[str, float], list[DesignPoint], list[float]]:
    """(front, reference point, stock points, hypervolume after each trial) of the finished trials.

    Reference point: `codesign.pareto.reference_point`'s rule. The space's power bound is computed
    once by the caller and passed as a pseudo stock point carrying only `power_w`, which is exactly
    the candidate `reference_point(space=...)` would add (without re-enumerating the space per trial).
    """
    points = design_points(rows)
    stock = [p for p in points if p.config in stock_names]
    ref = reference_point([*stock, {"config": "space power bound", "power_w": power_bound}], points=points,
                          objectives=objectives)
    front = ParetoFront(objectives)
    history: list[float] = []
    by_trial = {p.trial_id: p for p in points}
    for row in rows:
        if not row.ok:
            continue
        point = by_trial.get(row.trial_id)
        if point is not None:
            front.add(point)
        history.append(front.hypervolume(ref) if len(front) else 0.0)
    return front, ref, stock, history


def write_pareto(out_dir: str | Path, rows: list[TrialRow], *, stock_names: tuple[str, ...],
                 power_bound: float, objectives: tuple[str, ...] = OBJECTIVES) -> ParetoDoc:
    """Rewrite `out_dir/pareto.json` atomically from the finished trials; returns the document.
    `scopes`: what the designs' latency counts (`codesign.sweep.trial` SCOPE_*)."""
    front, ref, stock, history = pareto_state(rows, stock_names=stock_names, power_bound=power_bound,
                                              objectives=objectives)
    ok = [r for r in rows if r.ok]
    extra = {"trials": len(ok), "feasible_trials": sum(1 for r in ok if r.feasible),
             "configs": len({r.config for r in ok}),
             "scopes": sorted({str(r.scope) for r in ok if r.feasible and r.scope})}
    space_copy = Path(out_dir) / SPACE_COPY
    if (Path(out_dir) / OPTIONS_FILE).exists():
        # Which resource model scored the sweep and which clocks it verifies, for `codesign report`.
        opts = SweepOptions.load(Path(out_dir))
        extra["board"] = opts.load_space(Path(out_dir)).board.clock_json()
        extra["resource_model"] = opts.resource_model().summary()
    elif space_copy.exists():  # which clocks are verified on the sweep's board, for `codesign report`
        extra["board"] = HwSpace.load(space_copy).board.clock_json()
    return write_pareto_json(Path(out_dir) / PARETO_FILE, front, reference_point=ref, stock_points=stock,
                             hypervolume_history=history, extra=extra)


class SweepCallback(tune.Callback):
    """Driver-side: appends each finished trial's records to `records.jsonl` and then the trial to
    `trials.jsonl` (deduplicated by trial id), tells the driver's `SweepState` actor (`hub`) so
    later trials warm-start from it, rewrites `pareto.json`, and shows the progress bar. A trial
    Ray Tune retries (its worker or node was lost) is counted in its row (`retries`). Ray pickles
    callbacks into its experiment state, so only plain settings are kept across pickling."""

    def __init__(self, out_dir: str, total: int, *, stock_names: tuple[str, ...], power_bound: float,
                 progress: bool = True, hub: Any = None, objectives: tuple[str, ...] = OBJECTIVES) -> None:
        self.out_dir = str(out_dir)
        self.objectives = tuple(objectives)
        self.stock_names = tuple(stock_names)
        self.power_bound = float(power_bound)
        self.total = int(total)
        self.progress = progress
        self._hub = hub
        self._rows: list[TrialRow] | None = None
        self._bar: Any = None
        self._log: RecordsLog | None = None
        self._lines = False  # progress as one stderr line per finished trial (stderr is not a terminal)
        self._start = 0.0  # when this run's first trial could start (monotonic)
        self._done_at_start = 0  # trials finished by earlier runs of this sweep (a resume)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_rows"] = None
        state["_bar"] = None
        state["_hub"] = None
        state["_log"] = None
        state["_lines"] = False
        return state

    # -- lifecycle ---------------------------------------------------------------------------
    def setup(self, **info: Any) -> None:
        self._rows = read_trials(self.out_dir)
        self._start = time.monotonic()
        self._done_at_start = sum(1 for r in self._rows if r.ok)
        if not self.progress:
            return
        if sys.stderr.isatty():
            self._bar = tqdm(total=self.total, initial=min(len(self._rows), self.total), desc="sweep",
                             unit="trial", file=sys.stderr, dynamic_ncols=True)
            self._refresh_bar(None)
        else:
            # A log or a pipe: a line per finished trial (a bar's carriage returns would pile up).
            self._lines = True
            print(f"codesign sweep: {self._done_at_start}/{self.total} trials done; Ray Tune is starting the "
                  "trials, one line per finished trial follows", file=sys.stderr, flush=True)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        result = trial.last_result or {}
        if "payload" not in result:
            return  # stopped before it reported (interrupt): Ray runs it again on resume
        row = json.loads(result["payload"])
        if self._log is None:
            self._log = RecordsLog(Path(self.out_dir) / RECORDS_FILE)
        # Records first: a driver killed between the two writes re-runs the trial on resume, and
        # the log skips the records it already holds.
        _written, fastest = self._log.append_lines(unpack_lines(result.get("records")))
        result["records"] = ""  # written; Tune keeps last_result in its experiment state
        recorded = self._record(trial, row, "ok")
        if recorded is not None and self._hub is not None:
            self._hub.add.remote([recorded], fastest)  # all the warm start reads of them

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        print(f"codesign sweep: note: trial {trial.trial_id} failed (its worker or node was lost, or it "
              f"raised); Ray Tune runs it again (failure {trial.num_failures})", file=sys.stderr)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        message = ""
        error_file = getattr(trial, "error_file", None) or getattr(trial, "local_error_file", None)
        try:
            if error_file:
                message = Path(error_file).read_text().strip().splitlines()[-1]
        except OSError:
            pass
        self._record(trial, {"config": None, "feasible": False, "error": message or "trial failed"}, "error")

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    # -- helpers -----------------------------------------------------------------------------
    def _record(self, trial: Any, result: dict[str, Any], status: str) -> TrialRow | None:
        """Append the trial's row unless this trial id has one; returns the row appended."""
        if self._rows is None:
            self._rows = read_trials(self.out_dir)
        tid = str(trial.trial_id)
        if any(r.trial_id == tid and (r.ok or status == "error") for r in self._rows):
            return None  # already recorded (a trial re-run after an interrupt)
        data = {"trial_id": tid, "number": len(self._rows), "status": status, "timestamp": time.time(), **result}
        data.setdefault("params", dict(trial.config))
        data["objective_info"] = describe(self.objectives)  # what the sweep optimizes, on every line
        # Failures Ray Tune retried (a lost worker or node); an error row's last failure was not retried.
        data["retries"] = max(0, int(getattr(trial, "num_failures", 0) or 0) - (status == "error"))
        row = TrialRow.from_json(data).built()  # the fields' order, as trials.jsonl has always had it
        append_jsonl(Path(self.out_dir) / TRIALS_FILE, row.to_json())
        self._rows = [r for r in self._rows if r.trial_id != tid] + [row]
        # No feasible design yet (the first trials were infeasible): no front, no reference point.
        summary = (write_pareto(self.out_dir, self._rows, stock_names=self.stock_names, power_bound=self.power_bound,
                                objectives=self.objectives)
                   if design_points(self._rows) else None)
        if self._bar is not None:
            self._bar.update(1)
            self._refresh_bar(summary)
        if self._lines:
            print(progress_line(row, self._rows, self.total, summary, time.monotonic() - self._start,
                                self._done_at_start, skipped_count(self.out_dir)), file=sys.stderr, flush=True)
        return row

    def _refresh_bar(self, summary: ParetoDoc | None) -> None:
        if self._bar is None:
            return
        if summary is None:
            if not self._rows or not design_points(self._rows):
                return
            summary = write_pareto(self.out_dir, self._rows, stock_names=self.stock_names,
                                   power_bound=self.power_bound, objectives=self.objectives)
        text = _best_text(summary)
        skipped = skipped_count(self.out_dir)
        if skipped:
            text += f", {skipped} infeasible proposal{'s' if skipped != 1 else ''} skipped"
        self._bar.set_postfix_str(text)


def _best_text(summary: ParetoDoc | None) -> str:
    if summary is None:
        return "no feasible design yet"
    best = min((p.latency_ms for p in summary.points if p.latency_ms is not None), default=math.inf)
    text = f"front {len(summary.points)}, hv {summary.hypervolume:.4g}"
    return f"best {best:.2f} ms/request, " + text if math.isfinite(best) else text


def skipped_count(out_dir: str | Path) -> int:
    """Lines of skipped.jsonl: infeasible configs the searcher proposed, answered without a trial."""
    path = Path(out_dir) / SKIPPED_FILE
    try:
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    except OSError:
        return 0


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def progress_line(row: TrialRow, rows: list[TrialRow], total: int, summary: ParetoDoc | None,
                  elapsed_s: float, done_before: int, skipped: int = 0) -> str:
    """'sweep: 3/48 trials (CONFIG: 12.34 ms/request), best 11.20 ms/request, front 2, hv ..; 40 s
    elapsed, ETA 10 min' — one finished trial, for a log. ETA: this run's mean time per trial."""
    done = sum(1 for r in rows if r.ok)
    if row.ok and row.feasible and row.latency_ms is not None:
        what = f"{row.config}: {row.latency_ms:.2f} ms/request"
    elif row.ok:
        what = f"{row.config}: infeasible ({row.reason})" if row.reason else f"{row.config}: infeasible"
    else:
        what = f"failed: {row.error}"
    text = f"sweep: {min(done, total)}/{total} trials ({what}); {_best_text(summary)}"
    if skipped:
        text += f"; {skipped} infeasible proposal{'s' if skipped != 1 else ''} skipped (skipped.jsonl)"
    text += f"; {_duration(elapsed_s)} elapsed"
    ran = done - done_before
    if 0 < ran and done < total:
        text += f", ETA {_duration(elapsed_s / ran * (total - done))}"
    return text
