"""`codesign sweep --resources FILE`: a calibrated resource model (`codesign calibrate resources -o`)
scores feasibility, area and the board's verified clock of every trial, of the driver's filtering
and of the reference point; its numbers are kept in sweep.json and fixed on resume; bad files are
one line and create nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from codesign.cli import main
from codesign.commands.sweep import _resources_change
from codesign.errors import ConfigError
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.hw.power import default_model
from codesign.hw.resource_model import SHIPPED, coefficients_to_json, load_resource_model
from codesign.hw.resources import COEFFICIENTS, ResourceCoefficients, estimate, infeasible_reason
from codesign.hw.space import HwSpace
from codesign.pareto import space_power_bound
from codesign.sweep.filtering import SKIPPED_FILE, FeasibleSearch
from codesign.sweep.options import SweepOptions, resources_json
from codesign.sweep.runner import prepare, run_sweep
from codesign.sweep.trial import InnerTuning, TrialContext, run_trial
from codesign.workloads import Workload

# Starts Ray: one Ray module at a time (xdist_group, pyproject addopts) so two local clusters never
# compete for the ports, /tmp/ray and ~/.ray/auth_token of the machine.
pytestmark = pytest.mark.xdist_group("ray")

# The tiny space's 1x8 and 1x16 cores at 142 MHz on the PYNQ-Z1 (verified only up to 100 MHz in the
# board file).
CLOCK_142 = "  clock_mhz: 142\n"
LAYER = "conv2d:1,32,8,8,32,3,3,1,1"
# One DSP per int8 product instead of HLS's two (the DSP-per-MAC term doubled), and a PYNQ-Z1 build
# that met timing at 142 MHz.
K = replace(COEFFICIENTS, hls_products_per_dsp=1)
CLOCK = 142.0


def _calibrated(tmp_path: Path, calibrate_out: Path) -> Path:
    """A real `calibrate resources -o` file, edited the way another set of builds would fit it."""
    doc = json.loads(calibrate_out.read_text())
    doc["coefficients"] = coefficients_to_json(K)
    doc["verified_clock"] = {"pynq-z1": {"board_file_mhz": 100, "met_mhz": [CLOCK], "failed_mhz": [],
                                         "fitted_mhz": CLOCK}}
    path = tmp_path / "calibrated.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def calibrate_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cal") / "resources.json"
    assert main(["calibrate", "resources", "-o", str(path)]) == 0
    return path


@pytest.fixture()
def files(tmp_path: Path, calibrate_out: Path, tiny_space) -> tuple[Path, Path]:
    return tiny_space(CLOCK_142), _calibrated(tmp_path, calibrate_out)


def _hw(log_block: int) -> HwConfig:
    return HwConfig(TARGET="pynq", LOG_BLOCK_IN=log_block, LOG_BLOCK_OUT=log_block, LOG_INP_BUFF_SIZE=14,
                    LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16, clock_mhz=142)


def test_calibrate_writes_a_self_describing_file_that_rebuilds_the_model(calibrate_out: Path) -> None:
    doc = json.loads(calibrate_out.read_text())
    assert doc["kind"] == "vta-codesign resource calibration" and doc["version"] == 1
    assert doc["date"].endswith("+00:00") and doc["catalog"] and "rms_error_pct_after" in doc
    model = load_resource_model(calibrate_out)
    assert model.coefficients.fixed_lut == doc["fixed_after"]["lut"]
    assert model.coefficients.cmd_fifos == COEFFICIENTS.cmd_fifos  # lists back to tuples
    hw = HwConfig()
    assert estimate(hw, Board.named("pynq-z1"), model.coefficients).as_dict() == \
        estimate(hw, Board.named("pynq-z1")).as_dict()  # shipped catalog: the anchor build only


def test_the_space_filters_and_bounds_with_the_file_numbers(files: tuple[Path, Path], tmp_path: Path) -> None:
    space_file, cal = files
    board = Board.named("pynq-z1")
    shipped, calibrated = HwSpace.load(space_file), HwSpace.load(space_file).with_resource_model(
        load_resource_model(cal))
    small, big = _hw(3), _hw(4)
    # What estimate() says: the 1x16 core fits the shipped model (220 of 220 DSP) but not K.
    assert infeasible_reason(big, board) is None
    need = estimate(big, board, K).dsp
    assert need == 256 + 21 and infeasible_reason(big, board, estimate(big, board, K)) is not None
    assert shipped.enumerate() == [small, big] and calibrated.enumerate() == [small]
    assert calibrated.excluded_reason(big) == f"{big.name} needs {need} DSP but pynq-z1 has 220 (126%)"
    assert calibrated.board.verified_clock_mhz == CLOCK and shipped.board.verified_clock_mhz == 100
    full = {"load": 1.0, "compute": 1.0, "store": 1.0}
    assert space_power_bound(calibrated) == default_model().power_w(
        small, calibrated.board, estimate(small, board, K), full)
    # The driver's filter answers the 1x16 proposal as infeasible, with K's resources.
    searcher = FeasibleSearch.__new__(FeasibleSearch)
    searcher.space, searcher.out_dir, searcher.known, searcher.logged = calibrated, str(tmp_path), {}, set()
    name, objectives = searcher._answer({"LOG_BLOCK": 4})
    assert name == big.name and objectives["area"] == pytest.approx(need / 220)
    skipped = json.loads((tmp_path / SKIPPED_FILE).read_text())
    assert "needs 277 DSP" in skipped["reason"]


def test_a_trial_scores_area_and_clock_with_the_file(files: tuple[Path, Path], tmp_path: Path) -> None:
    space_file, cal = files
    board = Board.named("pynq-z1")
    out = tmp_path / "sweep"
    opts, space = prepare(space_file, Workload("tiny", ((LAYER, 1),)), out,
                          SweepOptions(trials=None, budget=2, tuner="random", exhaustive_s=10.0, search="grid", seed=0,
                                       resources=load_resource_model(cal).to_json()))
    saved = json.loads((out / "sweep.json").read_text())["resources"]
    assert saved["coefficients"]["hls_products_per_dsp"] == 1 and saved["verified_clock_mhz"] == {"pynq-z1": CLOCK}
    assert saved["sha256"] == load_resource_model(cal).sha256
    ctx = TrialContext(space=space, workload=Workload("tiny", ((LAYER, 1),)),
                       tuning=InnerTuning(tuner="random", budget=2, seed=0), checked=False)
    small, _ = run_trial({"LOG_BLOCK": 3}, ctx)
    expected = estimate(_hw(3), board, K)
    assert expected.as_dict() != estimate(_hw(3), board).as_dict()  # the file changes the numbers
    assert small["feasible"] and small["resources"] == expected.to_json(board)
    assert small["area"] == expected.area(board) and small["clock_verified"] is True
    big, _ = run_trial({"LOG_BLOCK": 4}, ctx)
    assert not big["feasible"] and big["resources"] == estimate(_hw(4), board, K).to_json(board)
    assert big["reason"] == space.excluded_reason(_hw(4))
    # The same trial with the shipped model: feasible 1x16, unverified 142 MHz.
    plain = TrialContext(space=HwSpace.load(space_file), workload=ctx.workload, tuning=ctx.tuning, checked=False)
    assert run_trial({"LOG_BLOCK": 3}, plain)[0]["clock_verified"] is False


def test_resume_keeps_the_numbers_and_refuses_another_file(files: tuple[Path, Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    space_file, cal = files
    out = tmp_path / "sweep"
    prepare(space_file, Workload("tiny", ((LAYER, 1),)), out,
            SweepOptions(trials=1, budget=2, tuner="random", exhaustive_s=10.0, search="random", seed=0,
                 max_concurrent=None, verified_clocks_only=False, profile=None, hparams=None,
                 resources=load_resource_model(cal).to_json()))
    same = tmp_path / "copy.json"
    same.write_bytes(cal.read_bytes())
    assert _resources_change(str(same), SweepOptions.load(out).resource_model()) == []  # same numbers: accepted
    cal.unlink()  # the sweep keeps the numbers, not the path
    assert SweepOptions.load(out).resource_model().coefficients == K
    other = tmp_path / "other.json"  # same coefficients, another verified clock
    other.write_text(json.dumps(_doc_with(K, 167.0)))
    code = main(["sweep", "--resume", str(out), "--resources", str(other)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert f"cannot change --resources {other} (sha256 " in err and f"started with calibrated file {cal}" in err


def _doc_with(k: ResourceCoefficients, mhz: float) -> dict:
    return {"kind": "vta-codesign resource calibration", "version": 1, "coefficients": coefficients_to_json(k),
            "verified_clock": {"pynq-z1": {"fitted_mhz": mhz}}}


GOOD = _doc_with(COEFFICIENTS, 100.0)


@pytest.mark.parametrize(("content", "expected"), [
    (None, "no such resource calibration file"),
    ("dir", "is a directory, expected a resource calibration file"),
    ("{nope", "not valid JSON"),
    (json.dumps({"builds": [], "fixed_after": {}}), "kind: expected 'vta-codesign resource calibration'"),
    (json.dumps({**GOOD, "coefficients": {k: v for k, v in GOOD["coefficients"].items() if k != "fixed_dsp"}}),
     "coefficients.fixed_dsp: missing"),
    (json.dumps({**GOOD, "coefficients": {**GOOD["coefficients"], "fixed_lut": "many"}}),
     "coefficients.fixed_lut: 'many' has the wrong type"),
    (json.dumps({**GOOD, "coefficients": {**GOOD["coefficients"], "lut_per_magic": 1.0}}),
     "coefficients.lut_per_magic: unknown field"),
    (json.dumps({**GOOD, "verified_clock": {"pynq-z1": {"fitted_mhz": -5}}}),
     "verified_clock.pynq-z1: -5 is not a clock in MHz"),
    (json.dumps({**GOOD, "verified_clock": {"pynq-z9": {"fitted_mhz": 100}}}),
     "verified_clock.pynq-z9: unknown board 'pynq-z9'"),
])
def test_a_bad_resources_file_is_one_line_and_creates_nothing(content: str | None, expected: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str], tiny_space) -> None:
    space = tiny_space(CLOCK_142)
    bad = tmp_path / "res.json"
    if content == "dir":
        bad.mkdir()
    elif content is not None:
        bad.write_text(content)
    out = tmp_path / "sweep"
    code = main(["sweep", str(space), "--out", str(out), "--trials", "1", "--resources", str(bad)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert str(bad) in err and expected in err
    assert not out.exists()


def test_shipped_model_is_the_default() -> None:
    assert SHIPPED.shipped and SHIPPED.coefficients is COEFFICIENTS
    with pytest.raises(ConfigError, match="sweep.json resources: expected an object"):
        SweepOptions(space="s", workload="w", resources={"nope": 1}).resource_model()


def test_a_real_sweep_with_the_file(files: tuple[Path, Path], tmp_path: Path, ray_session,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """End to end through Ray: the grid proposes both cores; trials.jsonl holds the
    file's numbers, pareto.json and `codesign report` name the file and its sha256."""
    space_file, cal = files
    board = Board.named("pynq-z1")
    out = tmp_path / "sweep"
    run_sweep(space_file, Workload("tiny", ((LAYER, 1),)), out,
              SweepOptions(trials=None, budget=2, tuner="random", search="grid", resources=resources_json(cal)),
              progress=False)
    rows = {json.loads(line)["config"]: json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()}
    small, big = rows[_hw(3).name], rows[_hw(4).name]
    assert small["resources"] == estimate(_hw(3), board, K).to_json(board) and small["clock_verified"] is True
    assert not big["feasible"] and "needs 277 DSP" in big["reason"]
    doc = json.loads((out / "pareto.json").read_text())
    sha = load_resource_model(cal).sha256
    assert doc["resource_model"]["source"] == str(cal) and doc["resource_model"]["sha256"] == sha
    assert doc["board"]["verified_clock_mhz"] == CLOCK
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert f"resources: calibrated file {cal} (sha256 {sha})" in capsys.readouterr().out
