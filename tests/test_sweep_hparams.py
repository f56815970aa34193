"""`codesign sweep --hparam key=value`: the inner tuner's hyper-parameters, checked before anything
is created, kept in sweep.json, fixed on resume, and reaching the tuner in every trial."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import codesign.tune.search as search_mod
from codesign.cli import main
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.sweep.options import SweepOptions
from codesign.sweep.runner import prepare
from codesign.sweep.trial import evaluate_hw
from codesign.workloads import Workload

LAYER = "conv2d:1,32,8,8,32,3,3,1,1"


@pytest.fixture()
def space_file(tiny_space) -> Path:
    return tiny_space()


@pytest.mark.parametrize(("flags", "expected"), [
    (["--tuner", "xgb", "--hparam", "nope=1"], "--hparam nope: tuner xgb has no such hyper-parameter; allowed: batch_size"),
    (["--tuner", "xgb", "--hparam", "batch_size=many"], "--hparam batch_size='many': must be an int (default 8)"),
    (["--tuner", "xgb", "--hparam", "batch_size"], "--hparam 'batch_size': expected KEY=VALUE"),
    (["--hparam", "batch_size=4"], "--hparam needs the tuner named: --tuner auto has none of its own"),
    # out of range: was a Ray traceback from inside the first trial (negative dimensions), exit 1
    (["--tuner", "xgb", "--hparam", "batch_size=-1"], "--hparam batch_size=-1: must be >= 1 (default 8)"),
    (["--tuner", "ga", "--hparam", "mutation=1.5"], "--hparam mutation=1.5: must be between 0 and 1 (default 0.25)"),
    (["--tuner", "ppo", "--hparam", "lr=nan"], "--hparam lr=nan: must be a finite number >= 0 (default 0.001)"),
])
def test_a_bad_hparam_is_one_line_and_creates_nothing(flags: list[str], expected: str, space_file: Path,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    code = main(["sweep", str(space_file), "--out", str(out), "--trials", "1", *flags])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert expected in err
    assert not out.exists()


def test_hparams_are_kept_in_sweep_json_and_fixed_on_resume(space_file: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    opts, _ = prepare(space_file, Workload("tiny", ((LAYER, 1),)), out,
                      SweepOptions(trials=2, budget=2, tuner="xgb", exhaustive_s=10.0, search="random", seed=0,
                           max_concurrent=None, verified_clocks_only=False, profile=None,
                           hparams={"batch_size": "2"}))
    assert json.loads((out / "sweep.json").read_text())["hparams"] == {"batch_size": "2"}
    assert SweepOptions.load(out).hparams == {"batch_size": "2"}
    code = main(["sweep", "--resume", str(out), "--hparam", "batch_size=4"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot change --hparam {'batch_size': '4'} (started with {'batch_size': '2'})" in err


def test_hparams_reach_the_inner_tuner_of_a_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    make_task = search_mod.make_task  # the default search builds every task (codesign.tune.search)

    def spy(*args, **kwargs):
        task = make_task(*args, **kwargs)
        seen.append(dict(task.tuner.hp))
        return task

    monkeypatch.setattr(search_mod, "make_task", spy)
    wl = Workload("tiny", ((LAYER, 1),))
    r = evaluate_hw(HwConfig(), Board.named("pynq-z1"), wl, tuner="xgb", budget=4, seed=0,
                    hparams={"batch_size": "2", "epsilon": "0.5"})
    assert r["feasible"] and seen
    assert all(hp["batch_size"] == 2 and hp["epsilon"] == 0.5 for hp in seen)  # converted to the defaults' types


def test_resume_refusals_read_plainly(space_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    prepare(space_file, Workload("tiny", ((LAYER, 1),)), out,
            SweepOptions(trials=2, budget=2, tuner="xgb", exhaustive_s=10.0, search="random", seed=0,
                 max_concurrent=None, verified_clocks_only=False, profile=None, hparams=None))
    # was "(started with None)": a Python repr, not the user's words
    assert main(["sweep", "--resume", str(out), "--hparam", "batch_size=4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(started without it)" in err and "None" not in err
    # was two lines: "resume applies --trials 0 (was 2)", then the error
    for flag in ("--trials", "--max-concurrent"):
        assert main(["sweep", "--resume", str(out), flag, "0"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{flag} 0: must be a positive integer" in err, err


def test_a_repeated_hparam_is_one_line(space_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    code = main(["sweep", str(space_file), "--out", str(out), "--tuner", "xgb",
                 "--hparam", "batch_size=2", "--hparam", "batch_size=4"])
    err = capsys.readouterr().err
    assert code == 2 and "--hparam batch_size: given twice ('2' and '4')" in err and not out.exists()
