"""Co-design sweep on Ray Tune: experiment files, Pareto consistency, infeasible configs never
simulated, resume after an interrupt, user errors. Tiny space (6 points, 2 infeasible), one small
layer, budget 4, one shared Ray session for the module."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest
from ray import tune

from codesign.errors import ConfigError
from codesign.sweep.options import SweepOptions

# Starts Ray: one Ray module at a time (xdist_group, pyproject addopts) so two local clusters never
# compete for the ports, /tmp/ray and ~/.ray/auth_token of the machine.
pytestmark = pytest.mark.xdist_group("ray")

SPACE = """\
board: pynq-z1
description: tiny test space
params:
  LOG_BLOCK: [3, 4, 5]       # 1x32 needs ~100k LUT: infeasible on the Zynq-7020
  clock_mhz: [100, 200]
fixed:
  LOG_INP_BUFF_SIZE: 14
  LOG_WGT_BUFF_SIZE: 16
  LOG_ACC_BUFF_SIZE: 16
"""
BUDGET = 4


@pytest.fixture(scope="module")
def space_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("space") / "tiny.yaml"
    path.write_text(SPACE)
    return path


@pytest.fixture(scope="module")
def workload():
    from codesign.workloads import Workload

    return Workload("tiny", (("conv2d:1,32,8,8,32,3,3,1,1", 2),))


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _dominates(a, b) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


@pytest.fixture(scope="module")
def grid_sweep(ray_session, space_file, workload, tmp_path_factory):
    from codesign.sweep import run_sweep

    out = tmp_path_factory.mktemp("grid") / "sweep"
    result = run_sweep(space_file, workload, out,
                       SweepOptions(trials=None, budget=BUDGET, tuner="random", search="grid", seed=3),
                       progress=False)
    return out, result


def test_grid_sweep_writes_one_line_per_trial(grid_sweep):
    from codesign.hw.space import HwSpace

    out, result = grid_sweep
    rows = _lines(out / "trials.jsonl")
    space = HwSpace.load(out / "space.yaml")
    expected = {space.to_hw(p).name for p in ({"LOG_BLOCK": b, "clock_mhz": c} for b in (3, 4, 5) for c in (100, 200))}
    assert len(rows) == 6 and len({r["trial_id"] for r in rows}) == 6
    assert {r["config"] for r in rows} == expected
    assert result.complete and result.planned == 6
    infeasible = [r for r in rows if not r["feasible"]]
    assert {r["hw"]["LOG_BLOCK"] for r in infeasible} == {5}
    assert all("LUT" in r["reason"] for r in infeasible)
    assert all(r["latency_ms"] >= 1e6 for r in infeasible)  # what the searcher sees: very bad


def test_infeasible_configs_are_never_simulated(grid_sweep):
    out, _ = grid_sweep
    rows = _lines(out / "trials.jsonl")
    records = _lines(out / "records.jsonl")
    feasible = {r["config"] for r in rows if r["feasible"]}
    per_hw: dict[str, list[int]] = {}
    for rec in records:
        per_hw.setdefault(rec["hw"], []).append(rec["index"])
    assert set(per_hw) == feasible  # no record of an infeasible config
    for indices in per_hw.values():
        assert len(indices) == BUDGET  # one layer, the budget, never a config twice
        assert len(set(indices)) == BUDGET


def test_latency_energy_and_pareto_are_consistent(grid_sweep):
    from codesign.pareto import hypervolume

    out, result = grid_sweep
    rows = [r for r in _lines(out / "trials.jsonl") if r["feasible"]]
    records = _lines(out / "records.jsonl")
    for r in rows:
        (layer,) = r["layers"]
        assert layer["count"] == 2
        assert r["latency_ms"] == pytest.approx(layer["seconds"] * 2 * 1e3, rel=1e-12)
        assert r["energy_j"] == pytest.approx(r["power_w"] * r["latency_ms"] * 1e-3, rel=1e-12)
        # The reported layer time is the best measured schedule of that layer on that config.
        measured = [x["seconds"] for x in records if x["hw"] == r["config"] and x["seconds"] is not None]
        assert layer["seconds"] == pytest.approx(min(measured), rel=1e-9)
    pareto = json.loads((out / "pareto.json").read_text())
    objs = {r["config"]: (r["latency_ms"], r["area"], r["power_w"]) for r in rows}
    brute = {c for c, o in objs.items() if not any(_dominates(p, o) for p in objs.values())}
    assert {p["config"] for p in pareto["points"]} == brute
    ref = pareto["reference_point"]
    assert pareto["hypervolume"] == pytest.approx(hypervolume([objs[c] for c in brute], ref), rel=1e-12)
    assert pareto == result.pareto.to_json()
    # One hypervolume per finished trial, non-decreasing, ending at the front's.
    hist = pareto["hypervolume_history"]
    assert len(hist) == 6 and all(a <= b for a, b in zip(hist, hist[1:]))
    assert hist[-1] == pytest.approx(pareto["hypervolume"], rel=1e-12)
    assert {p.name for p in result.plots} == {"pareto_front.png", "hypervolume.png", "layers.png"}
    assert all(p.stat().st_size > 0 for p in result.plots)


class Interrupt(tune.Callback):
    """Sends the driver SIGINT (like Ctrl-C) after `after` trials complete, once per sentinel file."""

    def __init__(self, sentinel: str, after: int) -> None:
        self.sentinel, self.after, self.seen = sentinel, after, 0

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self.seen += 1
        if self.seen == self.after and not os.path.exists(self.sentinel):
            Path(self.sentinel).write_text("fired")
            os.kill(os.getpid(), signal.SIGINT)


def test_resume_after_interrupt_finishes_without_duplicates(ray_session, space_file, workload, tmp_path):
    from codesign.sweep import run_sweep

    out = tmp_path / "sweep"
    first = run_sweep(space_file, workload, out,
                      SweepOptions(trials=4, budget=BUDGET, tuner="random", search="nsga2", seed=1, max_concurrent=1),
                      progress=False, callbacks=[Interrupt(str(tmp_path / "fired"), 1)])
    before = _lines(out / "trials.jsonl")
    assert (tmp_path / "fired").exists()
    # Ray handles SIGINT between trials; firing after the first leaves slack for a loaded machine.
    assert not first.complete and 1 <= len(before) < 4
    resumed = run_sweep(None, None, out, resume=True, progress=False)  # every option from sweep.json
    rows = _lines(out / "trials.jsonl")
    assert resumed.complete and len(rows) == 4
    assert len({r["trial_id"] for r in rows}) == 4  # nothing repeated
    assert rows[: len(before)] == before  # nothing lost or rewritten
    # The searcher's infeasible or repeated suggestions never became trials: the 4 trials are the
    # 4 usable configs of the space, each once; the infeasible ones are logged with the reason.
    assert all(r["feasible"] and not r["cached"] for r in rows)
    assert len({r["config"] for r in rows}) == 4
    skipped = _lines(out / "skipped.jsonl") if (out / "skipped.jsonl").exists() else []
    assert len({s["config"] for s in skipped}) == len(skipped)
    assert all(s["params"]["LOG_BLOCK"] == 5 and "LUT" in s["reason"] for s in skipped)
    records = _lines(out / "records.jsonl")
    for hw in {rec["hw"] for rec in records}:
        indices = [rec["index"] for rec in records if rec["hw"] == hw]
        assert len(indices) == len(set(indices))  # no schedule measured twice on one config


def test_searcher_stops_when_every_feasible_config_is_evaluated(ray_session, space_file, workload, tmp_path):
    from codesign.sweep import run_sweep

    result = run_sweep(space_file, workload, tmp_path / "s",
                       SweepOptions(trials=9, budget=2, tuner="random", search="random", seed=0),
                       progress=False)
    rows = _lines(tmp_path / "s" / "trials.jsonl")
    assert len(rows) == 4 and len({r["config"] for r in rows}) == 4  # the 4 usable configs
    assert result.exhausted and result.complete


def test_bad_space_file_is_one_clear_error(tmp_path):
    from codesign.sweep import run_sweep

    bad = tmp_path / "bad.yaml"
    bad.write_text(SPACE.replace("LOG_BLOCK:", "LOG_BLOK:"))
    with pytest.raises(ConfigError, match="LOG_BLOK"):
        run_sweep(bad, "resnet18", tmp_path / "out", SweepOptions(trials=2))
    assert not (tmp_path / "out").exists()


def test_cli_bad_space_prints_one_line(tmp_path, capsys):
    from codesign.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text(SPACE + "colour: blue\n")
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "colour" in err[0] and err[0].startswith("codesign sweep: error:")


def test_resume_of_a_directory_without_sweep_is_an_error(tmp_path):
    from codesign.sweep import run_sweep

    with pytest.raises(ConfigError, match="not a sweep directory"):
        run_sweep(None, None, tmp_path, resume=True)


def test_options_round_trip_and_validation(tmp_path):
    from codesign.sweep import SweepOptions

    opts = SweepOptions(space="space.yaml", workload="tiny", trials=7, budget=5, tuner="ga", search="motpe",
                        seed=2, layers=(("conv2d:1,32,8,8,32,3,3,1,1", 2),))
    opts.save(tmp_path)
    assert SweepOptions.load(tmp_path) == opts
    with pytest.raises(ConfigError, match="nsga2"):
        SweepOptions(space="s", workload="w", search="bayes")
    with pytest.raises(ConfigError, match="--budget"):
        SweepOptions(space="s", workload="w", budget=0)


def test_exhaustive_refuses_a_large_space(space_file):
    from codesign.hw.space import HwSpace
    from codesign.sweep import search

    space = HwSpace.load(space_file)
    assert len(space.enumerate_points()) == 4
    old = search.EXHAUSTIVE_MAX
    search.EXHAUSTIVE_MAX = 3
    try:
        with pytest.raises(ConfigError, match="exhaustive"):
            search.build_search("exhaustive", space, trials=None, seed=0)
    finally:
        search.EXHAUSTIVE_MAX = old


def test_help_teaches_with_examples(capsys):
    from codesign.cli import main

    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    text = capsys.readouterr().out
    assert "--resume" in text and "examples:" in text and "codesign sweep --search" in text


@pytest.mark.parametrize("flags, word", [(["--workload", "resnet19"], "resnet19"), (["--tuner", "foo"], "foo"),
                                         (["--search", "bayes"], "bayes")])
def test_cli_bad_options_are_one_line_and_create_nothing(tmp_path, capsys, flags, word):
    from codesign.cli import main

    with pytest.raises(SystemExit) if flags[0] == "--search" else contextlib.nullcontext():  # argparse choices
        assert main(["sweep", *flags, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert word in err[-1] and len([e for e in err if "error" in e]) == 1
    assert not (tmp_path / "o").exists()



def test_clock_flag_reaches_pareto_json_report_and_plots(grid_sweep, capsys):
    """Issue 9: 200 MHz designs on PYNQ-Z1 (verified: 100 MHz) must be marked `unverified`
    everywhere a user sees the front, not only in trials.jsonl."""
    from codesign.cli import main
    from codesign.commands.report import format_table
    from codesign.pareto.plots import front_figure

    out, result = grid_sweep
    pareto = json.loads((out / "pareto.json").read_text())
    assert pareto["points"]
    for p in pareto["points"]:
        assert p["clock_verified"] is (p["hw"]["clock_mhz"] == 100), p["config"]
    assert any(p["clock_verified"] is False for p in pareto["points"])  # the 200 MHz designs are fastest
    assert pareto["board"]["name"] == "pynq-z1" and pareto["board"]["verified_clock_mhz"] == 100
    table = format_table(pareto).splitlines()
    for p in pareto["points"]:
        (line,) = [row for row in table if row.startswith(("* ", "  ")) and f" {p['config']} " in row]
        assert line.split()[-1] == ("unverified" if p["hw"]["clock_mhz"] == 200 else "verified")
    assert "pynq-z1: verified up to 100 MHz" in "\n".join(table)
    assert main(["report", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["clock_verified"] for p in doc["points"]] == [p["clock_verified"] for p in pareto["points"]]
    fig = front_figure(pareto["points"], stock_points=pareto["stock"])
    labels = {t.get_text() for t in fig.legends[0].get_texts()}  # one legend below the panels
    assert {"Pareto front, verified clock", "Pareto front, unverified clock (latency optimistic)"} <= labels
    assert {f"stock {s['config'].replace('_i8w8a32', '')}" for s in pareto["stock"]} <= labels


def test_verified_clocks_only_sweep(ray_session, space_file, workload, tmp_path):
    from codesign.sweep import run_sweep

    out = tmp_path / "verified"
    result = run_sweep(space_file, workload, out,
                       SweepOptions(trials=None, budget=2, tuner="random", search="grid", seed=0, verified_clocks_only=True),
                       progress=False)
    rows = _lines(out / "trials.jsonl")
    assert len(rows) == 3 and {r["hw"]["clock_mhz"] for r in rows} == {100}
    assert all(p.clock_verified for p in result.pareto.points)
    assert json.loads((out / "sweep.json").read_text())["verified_clocks_only"] is True


def test_verified_clocks_only_on_a_board_without_one_is_one_line(tmp_path, capsys):
    from codesign.cli import main

    assert main(["sweep", "zcu104", "--verified-clocks-only", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "board zcu104 has no verified clock" in err[-1]
    assert not (tmp_path / "o").exists()


def test_default_inner_search_front_equals_exhaustive_front(ray_session, space_file, tmp_path):
    """On a small hardware space the sweep's default inner search (`auto`: exhaustive where the
    simulator makes it cheap) gives the front that exhaustive inner search gives: the same
    designs with the same objectives, every valid schedule of every layer measured."""
    from codesign.hw.config import HwConfig
    from codesign.schedule import get_space
    from codesign.sweep import run_sweep
    from codesign.sweep.options import DEFAULT_TUNER
    from codesign.workloads import Workload

    assert DEFAULT_TUNER == "auto"
    wl = Workload("tiny2", (("conv2d:1,32,8,8,32,3,3,1,1", 2), ("conv2d:1,32,8,8,64,1,1,1,0", 1)))
    fronts, measured = [], []
    # on the template family (the tuner's default family is vta: there auto is template+local,
    # never worse than this front, tests/test_vta_default.py)
    for name, kw in (("default", {"schedules": "autotvm"}), ("exhaustive", {"tuner": "exhaustive"})):
        result = run_sweep(space_file, wl, tmp_path / name, SweepOptions(trials=None, search="grid", seed=0, **kw),
                           progress=False)
        fronts.append(sorted((p.config, p.latency_ms, p.area, p.power_w) for p in result.pareto.points))
        measured.append({t.config: (t.measurements, t.hw) for t in result.trials if t.feasible})
    assert fronts[0] == fronts[1] and fronts[0]
    assert measured[0] == measured[1]
    for n, hw_dict in measured[0].values():  # every valid schedule of every layer, once
        hw = HwConfig.from_dict(hw_dict)
        assert n == sum(get_space(layer, hw).n_valid for layer, _ in wl.entries)


def test_ray_writes_no_second_copy_of_the_trials(grid_sweep):
    # Tune's per-trial CSV/JSON/TensorBoard loggers are off: trials.jsonl is the record, and
    # Tune keeps only its experiment state (what --resume needs).
    out, result = grid_sweep
    assert len(result.trials) >= 2
    names = [p.name for p in (out / "ray").rglob("*") if p.is_file()]
    assert any(n.startswith("experiment_state") for n in names)
    assert not [n for n in names if n in ("progress.csv", "result.json", "params.json") or "tfevents" in n]


def test_sweep_help_and_mistakes_do_not_import_ray():
    import subprocess
    import sys

    code = ("import sys, codesign.cli\n"
            "try:\n    codesign.cli.main(['sweep', '--help'])\nexcept SystemExit:\n    pass\n"
            "assert codesign.cli.main(['sweep', 'no-such-space.yaml']) == 2\n"
            "print(sorted(m for m in ('ray', 'torch', 'optuna') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
