"""A sweep is never silent: a line per finished trial when stderr is not a terminal (done/total,
best so far, ETA), and why the search's proposals were skipped."""

from __future__ import annotations

import json

from codesign.hw.space import HwSpace
from codesign.pareto.io import ParetoDoc
from codesign.sweep.filtering import SKIPPED_FILE
from codesign.sweep.results import SweepCallback, progress_line
from codesign.sweep.rows import TrialRow
from codesign.sweep.runner import skipped_note


def _row(i, ms, feasible=True):
    return TrialRow.from_json({"trial_id": f"t{i}", "status": "ok", "config": f"c{i}", "feasible": feasible,
                               "latency_ms": ms, "reason": None if feasible else "needs 9 LUT"})


def test_progress_line_says_done_total_best_and_eta():
    rows = [_row(0, 10.0), _row(1, 8.0)]
    summary = ParetoDoc.from_json({"points": [{"latency_ms": 8.0}, {"latency_ms": 9.0}], "hypervolume": 12.5})
    line = progress_line(rows[1], rows, 10, summary, elapsed_s=40.0, done_before=0, skipped=3)
    assert line.startswith("sweep: 2/10 trials (c1: 8.00 ms/request); best 8.00 ms/request, front 2, hv 12.5")
    assert "3 infeasible proposals skipped" in line
    assert line.endswith("40 s elapsed, ETA 3 min")  # 20 s per trial of this run x 8 left = 160 s
    # a resume: the ETA counts only the trials this run finished
    assert progress_line(rows[1], rows, 3, None, 30.0, done_before=1).endswith("30 s elapsed, ETA 30 s")
    assert "no feasible design yet" in progress_line(_row(0, None, False), [_row(0, None, False)], 4, None, 1.0, 0)


def test_callback_prints_a_line_per_trial_when_stderr_is_not_a_terminal(tmp_path, capsys):
    cb = SweepCallback(str(tmp_path), 2, stock_names=(), power_bound=1.0, progress=True)
    cb.setup()
    trial = type("T", (), {"trial_id": "x1", "config": {}, "num_failures": 0})()
    cb._record(trial, {"config": "c", "feasible": False, "reason": "needs 9 LUT but b has 1"}, "ok")
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("codesign sweep: 0/2 trials done; Ray Tune is starting the trials, one line per finished "
                      "trial follows")
    assert err[1].startswith("sweep: 1/2 trials (c: infeasible (needs 9 LUT but b has 1)); no feasible design yet")
    assert "ETA" in err[1]


def test_skipped_note_counts_the_reasons(tmp_path):
    space = HwSpace.load("pynq-z1")
    lines = [{"config": f"c{i}", "reason": f"c{i} needs {70000 + i} LUT but pynq-z1 has 53200 (140%)"} for i in range(3)]
    lines.append({"config": "x", "reason": "constraint 'LOG_BATCH < 1' is false for x"})
    (tmp_path / SKIPPED_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"cut')
    note = skipped_note(tmp_path, space)
    assert note.startswith(f"the search proposed 4 configs outside the usable space of {space.source}")
    assert note.endswith("3 need more LUT than pynq-z1 has; 1 break the constraint 'LOG_BATCH < 1'")
    assert skipped_note(tmp_path / "none", space) is None
