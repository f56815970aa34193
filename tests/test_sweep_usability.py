"""Concurrent, interrupted and remote sweeps (issue 9): one sweep per directory (stale locks
reported), resume neither duplicates nor loses (a half-written last line included), --resume with
new flags applies or refuses them, Ctrl-C exits 130 (sweep and tune), --address fails in bounded
time without a cluster and works with a real `ray start --head`, and two trials run at once by
default."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codesign.errors import ConfigError
from codesign.fileio import append_jsonl
from codesign.sweep.lock import SweepLock
from codesign.sweep.options import SweepOptions
from codesign.sweep.results import read_trials

# Starts Ray: one Ray module at a time (xdist_group, pyproject addopts) so two local clusters never
# compete for the ports, /tmp/ray and ~/.ray/auth_token of the machine.
pytestmark = pytest.mark.xdist_group("ray")

REPO = Path(__file__).resolve().parent.parent
SPACE = """\
board: pynq-z1
description: tiny test space (4 usable configs)
params:
  LOG_BLOCK: [3, 4, 5]       # 1x32 is infeasible on the Zynq-7020
  clock_mhz: [100, 200]
fixed:
  LOG_INP_BUFF_SIZE: 14
  LOG_WGT_BUFF_SIZE: 16
  LOG_ACC_BUFF_SIZE: 16
"""
LAYER = "conv2d:1,32,8,8,32,3,3,1,1"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}


def _cli(*argv: str) -> list[str]:
    return [sys.executable, "-c", "import sys, codesign.cli; sys.exit(codesign.cli.main())", *argv]


def _default_sigint() -> None:
    # A child of a shell without job control inherits SIGINT ignored; Ctrl-C must reach it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_for(pred, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _stop(proc: subprocess.Popen) -> None:
    """End a process group this test started (and only that group)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.fixture
def space_file(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SPACE)
    return path


@pytest.fixture(scope="module")
def workload():
    from codesign.workloads import Workload

    return Workload("tiny", ((LAYER, 2),))


# -- the lock -------------------------------------------------------------------------------------------
def _hold_lock(out: Path) -> subprocess.Popen:
    code = ("import sys, time; from codesign.sweep.lock import SweepLock; SweepLock(sys.argv[1]).acquire(); "
            "print('locked', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], env=_env(), stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_sweep_and_resume_are_refused_while_one_runs(tmp_path, space_file, workload):
    from codesign.sweep import run_sweep

    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"space": "space.yaml", "workload": "tiny", "layers": [[LAYER, 2]]}))
    holder = _hold_lock(out)
    try:
        with pytest.raises(ConfigError, match=rf"is in use by another sweep \(pid {holder.pid} on "):
            run_sweep(space_file, workload, out, SweepOptions(trials=2, budget=2, tuner="random", search="random"))
        with pytest.raises(ConfigError, match=rf"in use by another sweep \(pid {holder.pid} "):
            run_sweep(None, None, out, resume=True)
    finally:
        _stop(holder)


def test_a_dead_holders_lock_is_taken_and_reported(tmp_path):
    out = tmp_path / "sweep"
    holder = _hold_lock(out)
    _stop(holder)  # SIGKILL: no clean release
    with SweepLock(out) as lock:
        assert lock.stale is not None
        assert f"pid {holder.pid}" in lock.stale and "process gone" in lock.stale
    with SweepLock(out) as lock:  # a clean release leaves nothing stale
        assert lock.stale is None


# -- resume: nothing duplicated, nothing lost ------------------------------------------------------------
def test_a_half_written_last_line_does_not_swallow_the_next_trial(tmp_path):
    path = tmp_path / "trials.jsonl"
    append_jsonl(path, {"trial_id": "a", "status": "ok"})
    with open(path, "a") as f:
        f.write('{"trial_id": "b", "sta')  # the driver died mid-write
    append_jsonl(path, {"trial_id": "c", "status": "ok"})
    assert [r.trial_id for r in read_trials(tmp_path)] == ["a", "c"]


def test_an_interrupted_trial_measures_only_what_is_missing(tmp_path):
    from codesign.hw.resources import estimate
    from codesign.hw.space import HwSpace
    from codesign.sweep.trial import RECORDS_FILE, InnerTuning, evaluate_usable
    from codesign.tune import RecordWriter, load_records
    from codesign.workloads import Workload

    space = HwSpace.from_dict(__import__("yaml").safe_load(SPACE))
    hw = space.to_hw({"LOG_BLOCK": 4, "clock_mhz": 100})
    wl = Workload("tiny", ((LAYER, 2),))
    records = tmp_path / RECORDS_FILE
    # The first run is killed after 3 of its 8 measurements: simulate it with a budget of 3.
    with RecordWriter(records) as w:
        evaluate_usable(hw, space.board, wl, estimate(hw, space.board), InnerTuning(tuner="random", budget=3),
                        records=w, warm_records=[])
    with open(records, "a") as f:
        f.write('{"layer": "conv2d_1x32x8x')  # and the kill cut a line in half
    with RecordWriter(records) as w:
        result = evaluate_usable(hw, space.board, wl, estimate(hw, space.board), InnerTuning(tuner="random", budget=8),
                                 records=w, warm_records=load_records(records))
    recs = load_records(records)
    assert len(recs) == 8 and len({r.index for r in recs}) == 8  # 3 + 5 new, none twice
    assert result["layers"][0]["measurements"] == 8
    assert result["layers"][0]["seconds"] == min(r.seconds for r in recs if r.ok)


def test_resume_with_more_trials_applies_them_and_refuses_fixed_flags(ray_session, space_file, workload, tmp_path,
                                                                       capsys):
    from codesign.cli import main
    from codesign.sweep import run_sweep

    out = tmp_path / "sweep"
    # one trial, resumed to two: as much as 2 -> 4 proved, two Ray Tune trials fewer
    first = run_sweep(space_file, workload, out,
                      SweepOptions(trials=1, budget=2, tuner="random", search="random", seed=0), progress=False)
    assert first.complete and len(first.trials) == 1
    capsys.readouterr()  # the first sweep's notes (skipped proposals)
    code = main(["sweep", "--resume", str(out), "--trials", "2", "--budget", "3", "--tuner", "xgb"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "cannot change --budget 3 (started with 2); --tuner xgb (started with random)" in err
    assert "may change --trials and --max-concurrent" in err
    resumed = run_sweep(None, None, out, SweepOptions(trials=2), resume=True, progress=False)
    rows = _lines(out / "trials.jsonl")
    assert resumed.complete and resumed.planned == 2 and len(rows) == 2
    assert rows[:1] == [t.to_json() for t in first.trials]  # nothing lost or rewritten
    assert len({r["config"] for r in rows}) == 2 and not any(r.get("cached") for r in rows)
    assert json.loads((out / "sweep.json").read_text())["trials"] == 2
    records = _lines(out / "records.jsonl")
    assert len(records) == 2 * 2 and len({(r["hw"], r["index"]) for r in records}) == 4


# -- Ctrl-C ---------------------------------------------------------------------------------------------
def _interrupt(argv: list[str], started, what: str, start_s: float, stop_s: float) -> tuple[int, str, str]:
    """Run the CLI, press Ctrl-C once `started()` holds (within `start_s`), wait `stop_s` for the
    exit: (exit code, stdout, stderr). The process group is stopped whatever happens."""
    proc = subprocess.Popen(_cli(*argv), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    try:
        _wait_for(lambda: started() or proc.poll() is not None, start_s, what)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=stop_s)
    finally:
        _stop(proc)
    return proc.returncode, stdout, stderr


def test_ctrl_c_exits_130_in_sweep(tmp_path, space_file):
    out = tmp_path / "sweep"
    code, stdout, stderr = _interrupt(["sweep", str(space_file), "--workload", "resnet18", "--trials", "4",
                                       "--budget", "4", "--search", "random", "--tuner", "random", "--out", str(out),
                                       "--max-concurrent", "1"],
                                      lambda: (out / "trials.jsonl").exists(), "the first trial", 240, 120)
    assert code == 130, stderr[-2000:]
    assert "continue it with `codesign sweep --resume" in stdout


def test_ctrl_c_exits_130_in_tune(tmp_path):
    records = tmp_path / "r.jsonl"
    # PPO over every ResNet-18 layer runs for tens of seconds: the interrupt lands mid-tuning
    code, _stdout, stderr = _interrupt(["tune", "--workload", "resnet18", "--trials", "100000", "--tuner", "ppo",
                                        "--records", str(records)],
                                       lambda: records.exists() and records.stat().st_size > 0,
                                       "the first measurement", 120, 60)
    assert code == 130, stderr[-2000:]
    assert "interrupted" in stderr and "Traceback" not in stderr


# -- --address ------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_address_without_a_cluster_fails_fast_in_one_line(tmp_path, space_file):
    port = _free_port()
    start = time.monotonic()
    done = subprocess.run(_cli("sweep", str(space_file), "--address", f"127.0.0.1:{port}", "--out", str(tmp_path / "o"),
                               "--trials", "1"), env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and time.monotonic() - start < 60
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--address 127.0.0.1:{port}: no Ray cluster answers there" in lines[0], done.stderr


def test_address_joins_a_real_local_cluster(tmp_path, space_file):
    import shutil
    import tempfile

    from test_sweep_cluster import _write_net

    port = _free_port()
    ray_tmp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # Ray's socket paths must stay < 108 bytes
    head = subprocess.Popen(["ray", "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
                             "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats",
                             f"--temp-dir={ray_tmp}"],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        def up() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return head.poll() is not None

        _wait_for(up, 120, "ray start --head")
        assert head.poll() is None, head.stdout.read()
        out = tmp_path / "sweep"
        # joining the cluster is the point, not tuning ResNet-18's layers: test_sweep_cluster's one-layer
        # network and its first grid point, on which VTA beats the CPU (the trial is ok)
        done = subprocess.run(_cli("sweep", str(space_file), "--workload", _write_net(tmp_path),
                                   "--address", f"127.0.0.1:{port}", "--out", str(out), "--trials", "1",
                                   "--search", "grid", "--schedules", "autotvm", "--tuner", "exhaustive", "--json"),
                              env=_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(_lines(out / "trials.jsonl")) == 1
    finally:
        if head.poll() is None:
            os.killpg(head.pid, signal.SIGTERM)  # --block: the head stops its own processes
            try:
                head.wait(timeout=60)
            except subprocess.TimeoutExpired:
                _stop(head)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    # the cluster is gone: the same address now fails in bounded time, by the check `--address` makes
    # first (the CLI's one line for it: test_address_without_a_cluster_fails_fast_in_one_line)
    from codesign.sweep.runner import _probe_address

    start = time.monotonic()
    with pytest.raises(ConfigError, match=rf"--address 127.0.0.1:{port}: no Ray cluster answers there"):
        _probe_address(f"127.0.0.1:{port}")
    assert time.monotonic() - start < 60


# -- concurrency ----------------------------------------------------------------------------------------
def test_default_max_concurrent_runs_two_trials_at_once(ray_session, space_file, tmp_path):
    from test_sweep_cluster import _NodeChaos  # its gate: the driver waits until both trial actors are up

    from codesign.sweep import run_sweep
    from codesign.workloads import Workload

    # ~seconds per trial so the overlap is not an accident of timing; the gate keeps the warm
    # first worker from finishing every trial while the second one is still starting (a loaded machine)
    wl = Workload("small", (("conv2d:1,64,14,14,64,3,3,1,1", 1), (LAYER, 1)))
    result = run_sweep(space_file, wl, tmp_path / "s",
                       SweepOptions(trials=4, budget=40, tuner="random", search="random", seed=0),
                       progress=False, callbacks=[_NodeChaos(head="")])
    rows = [r for r in result.trials if r.ok]
    assert len(rows) == 4
    spans = sorted((r.timestamp - r.wall_s, r.timestamp) for r in rows)
    overlaps = sum(1 for (s1, e1), (s2, _e2) in zip(spans, spans[1:]) if s2 < e1)
    assert overlaps >= 1, spans


def test_finish_says_how_many_trial_lines_it_could_not_read(tmp_path, space_file, workload, capsys):
    from codesign.fileio import count_unreadable
    from codesign.sweep.runner import finish, prepare

    out = tmp_path / "sweep"
    opts, hw_space = prepare(space_file, workload, out, SweepOptions(trials=2, budget=2, tuner="random", exhaustive_s=10.0,
                                                             search="random", seed=0, max_concurrent=None,
                                                             verified_clocks_only=False, profile=None))
    from codesign.sweep.trial import evaluate_hw

    hw = hw_space.enumerate()[0]
    row = evaluate_hw(hw, hw_space.board, workload, tuner="random", budget=2, seed=0)
    append_jsonl(out / "trials.jsonl", {"trial_id": "a", "status": "ok", **row})
    with open(out / "trials.jsonl", "a") as f:
        f.write('{"trial_id": "b", "sta\n[1, 2]\n\n')  # a cut line and a non-object line; blank lines do not count
    assert count_unreadable(out / "trials.jsonl") == 2
    finish(out, opts, 2, 0.0, stock_names=(), power_bound=5.0, space=hw_space)
    err = capsys.readouterr().err
    assert "skipped 2 unreadable line(s)" in err and "the 1 readable trial(s)" in err
