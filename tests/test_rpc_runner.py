"""Tuning on emulated PYNQ boards over real tvm.rpc (tracker and direct): the RPC runner measures
what the simulator predicts for the same configs, spreads work over boards, survives a board
killed mid-tuning and quarantines a board that always fails. Every process is stopped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codesign.board.local import free_port, local_board, local_tracker
from codesign.hw.config import HwConfig
from codesign.tune.loop import TuneCallback, tune_layer
from codesign.tune.measure import MeasureInput, SimulatorRunner
from codesign.tune.records import read_records
from codesign.tune.rpc_runner import RPCRunner
from codesign.workloads import parse_layer

ROOT = Path(__file__).resolve().parents[1]
HW = HwConfig.resolve("pynq_1x16")
LAYER = parse_layer("conv2d:1,64,56,56,64,3,3,1,1")  # ResNet-18 conv2_x


def _sim_device_seconds(configs):
    sim = SimulatorRunner(HW).run([MeasureInput(LAYER, HW, c) for c in configs])
    return [r.cycles / HW.clock_hz for r in sim]


def test_tracker_two_boards_tune_like_the_simulator(tmp_path):
    records = tmp_path / "board.jsonl"
    with local_tracker() as trk, local_board("pynq_1x16", tracker=trk.addr, key="pynq") as a, \
            local_board("pynq_1x16", tracker=trk.addr, key="pynq") as b:
        runner = RPCRunner(tracker=trk.addr, key="pynq", n_sessions=2, check_correctness=True, repeat=2)
        try:
            res = tune_layer(LAYER, HW, tuner="grid", budget=10, runner=runner, records=records)
            status = runner.status()
        finally:
            runner.close()
        assert "run in=" in a.log() and "run in=" in b.log()  # both boards measured
    assert res.measurements == 10 and all(r.ok for r in res.history), [r.error for r in res.history]
    assert all(s["measured"] > 0 and not s["quarantined"] for s in status)
    # the board measures exactly the device time the simulator's timing model gives these configs
    board_s = [r.seconds for r in res.history]
    # (equal up to the float rounding of the device clock's start/done difference)
    assert board_s == pytest.approx(_sim_device_seconds([r.config for r in res.history]), rel=1e-12, abs=0)
    best = min(range(10), key=lambda i: board_s[i])
    assert res.best.index == res.history[best].config.index
    recs, skipped = read_records(records)
    assert len(recs) == 10 and not skipped
    assert all(r.source.startswith("emulated-board:pynq-z1@") and "bitstream:" in r.source for r in recs)
    assert all(r.device_s == r.seconds and r.call_s > 0 for r in recs)
    # board records export to AutoTVM logs like simulated ones
    out = subprocess.run([sys.executable, "-m", "codesign.cli", "export", "autotvm", str(records), "-o",
                          str(tmp_path / "vta.log")], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    lines = (tmp_path / "vta.log").read_text().splitlines()
    assert lines and json.loads(lines[0])["result"][1] == 0


class _KillAfterFirstRound(TuneCallback):
    def __init__(self, board) -> None:
        self.board, self.rounds = board, 0

    def __call__(self, result, measured) -> None:
        self.rounds += 1
        if self.rounds == 1:
            self.board.kill()  # listener and its sessions, at once


def test_killed_board_is_retried_elsewhere_and_a_dead_board_is_quarantined():
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there: always fails
    with local_board("pynq_1x16") as a, local_board("pynq_1x16") as b:
        runner = RPCRunner([a.addr, b.addr, dead], max_failures=2, connect_timeout_s=5)
        try:
            res = tune_layer(LAYER, HW, tuner="grid", budget=16, runner=runner,
                             callbacks=[_KillAfterFirstRound(a)])
            status = {s["board"]: s for s in runner.status()}
        finally:
            runner.close()
    # every measurement accounted for, all of them succeeded somewhere
    assert res.measurements == 16 and len(res.history) == 16
    assert all(r.ok for r in res.history), [r.error for r in res.history]
    assert status[dead]["quarantined"] and status[dead]["measured"] == 0
    assert status[a.addr]["quarantined"] and any("lost" in e for e in status[a.addr]["events"])
    assert not status[b.addr]["quarantined"]
    assert status[a.addr]["measured"] + status[b.addr]["measured"] == 16
    after = [r for r in res.history[8:]]
    assert all(r.source.startswith(f"emulated-board:pynq-z1@{b.addr}") for r in after)
    assert [r.seconds for r in res.history] == pytest.approx(
        _sim_device_seconds([r.config for r in res.history]), rel=1e-12, abs=0)


def test_runner_needs_a_board():
    from codesign.errors import ConfigError

    with pytest.raises(ConfigError, match="--board HOST:PORT"):
        RPCRunner()
    with pytest.raises(ConfigError, match="needs --key"):
        RPCRunner(tracker="127.0.0.1:9190")


def _tune_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "codesign.cli", "tune", "--layer", "conv2d:4,64,14,14,64,3,3,1,1",
                           "--tuner", "random", "--trials", "2", *args], capture_output=True, text=True,
                          timeout=180, cwd=ROOT, env=env)


def test_board_running_another_config_is_one_line_and_a_failure(tmp_path):
    """Before: every record said 'BOARD_LOST: every board is quarantined' and tune exited 0."""
    with local_board("pynq_1x16") as a:
        out = _tune_cli("--hw", "pynq_4x8", "--board", a.addr, "--records", str(tmp_path / "r.jsonl"))
    assert out.returncode == 2, out.stdout + out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "runs pynq_1x16" in err[0] and "--bitstream" in err[0], out.stderr
    assert "Traceback" not in out.stderr


def test_unreachable_board_says_why_and_fails():
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    out = _tune_cli("--hw", "pynq_1x16", "--board", dead, "--max-failures", "1")
    assert out.returncode == 2, out.stdout + out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "every board is quarantined" in err[0] and dead in err[0], out.stderr
    assert "cannot connect" in err[0] or "lost" in err[0], err[0]
