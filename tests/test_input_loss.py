"""Input that used to be lost without a word (issue 9): skipped lines are counted and reported,
files with nothing usable are refused, a directory where a file is expected is one line, impossible
values are refused, shipped spaces are accepted by the names the errors list, and output files get
the user's umask."""

from __future__ import annotations

import json
import os
import stat

import pytest

from codesign.cli import main
from codesign.fileio import atomic_write_text
from codesign.hw.config import HwConfig
from codesign.hw.space import HwSpace, resolve_space_path
from codesign.paths import SIM_DATA, SPACES
from codesign.schedule import ScheduleSpace
from codesign.tune import MeasureRecord, RecordWriter
from codesign.workloads import parse_layer

HW = HwConfig()
CONV = parse_layer("conv2d:1,32,8,8,32,3,3,1,1")
LOG = SIM_DATA / "calibration" / "pynq_resnet18.log"


def _records(path, n=3):
    valid = ScheduleSpace(CONV, HW).valid_configs()
    rows = [MeasureRecord.make(CONV, HW, cfg, 0.01 / (k + 1), 5, None, "xgb", 0, timestamp=1.0 + k)
            for k, cfg in enumerate(valid[:n])]
    with RecordWriter(path) as w:
        w.write_all(rows)
    return rows


def _one_line_error(capsys, code):
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- warm start -------------------------------------------------------------------------------------
def _tune(tmp_path, *extra):
    return main(["tune", "--layer", CONV.spec, "--trials", "2", "--tuner", "random", *extra])


def test_warm_start_empty_file_is_refused(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    line = _one_line_error(capsys, _tune(tmp_path, "--warm-start", str(empty)))
    assert f"--warm-start {empty}: empty" in line


def test_warm_start_wrong_format_is_refused(tmp_path, capsys):
    wrong = tmp_path / "space.yaml"
    wrong.write_text((SPACES / "pynq-z1.yaml").read_text())
    line = _one_line_error(capsys, _tune(tmp_path, "--warm-start", str(wrong)))
    assert "nothing usable" in line and "neither tuning records JSONL" in line and "AutoTVM" in line


def test_warm_start_truncated_file_says_what_it_skipped(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    _records(path)
    with open(path, "a") as f:
        f.write('{"layer": "conv2d_1x32')  # a crash-truncated last line
    assert _tune(tmp_path, "--warm-start", str(path), "--json") == 0
    captured = capsys.readouterr()
    assert f"warm start: {path}: skipped 1 of 4 lines (line 4: not JSON" in captured.err
    assert "using 3 records" in captured.err
    assert json.loads(captured.out)["measurements"] >= 1


def test_warm_start_autotvm_log_reports_unusable_records(tmp_path, capsys):
    log = tmp_path / "mixed.log"
    lines = LOG.read_text().splitlines()
    good = [line for line in lines if line.strip() and not line.startswith("#")][:3]
    other = json.loads(good[0])
    other["input"][1] = "conv2d_nchw.x86"  # another template: parsed, but not one we can use
    log.write_text("\n".join([*good, json.dumps(other), '{"input": ["ext_dev']) + "\n")
    assert _tune(tmp_path, "--warm-start", str(log), "--json") == 0
    err = capsys.readouterr().err
    assert f"warm start: {log}: skipped 2 of 5 lines (line 4:" in err and "line 5:" in err
    assert "using 3 records" in err


# -- export -------------------------------------------------------------------------------------------
def test_export_counts_broken_lines(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    _records(path)
    with open(path, "a") as f:
        f.write("not json at all\n[1, 2]\n")
    out = tmp_path / "vta.log"
    assert main(["export", "autotvm", str(path), "-o", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert f"{path}: skipped 2 of 5 lines (line 4: not JSON" in captured.err
    assert json.loads(captured.out)["skipped"] == [captured.err.strip().removeprefix("codesign export: ")]
    assert len(out.read_text().splitlines()) == 1


def test_export_refuses_a_file_with_nothing_usable(tmp_path, capsys):
    good = tmp_path / "r.jsonl"
    _records(good)
    line = _one_line_error(capsys, main(["export", "autotvm", str(good), str(LOG), "-o", str(tmp_path / "o.log")]))
    assert f"{LOG}: no tuning records: 20 lines, none a tuning record (line " in line
    assert not (tmp_path / "o.log").exists()


# -- a directory where a file is expected ---------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["replay", "{d}"],
    ["calibrate", "{d}", "-o", "{t}/p.json"],
    ["tune", "--layer", CONV.spec, "--trials", "1", "--warm-start", "{d}"],
    ["tune", "--layer", CONV.spec, "--trials", "1", "--records", "{d}"],
    ["export", "autotvm", "{d}"],
    ["export", "autotvm", "{r}", "-o", "{d}"],
    ["export", "vta-config", "pynq_1x16", "-o", "{d}"],
], ids=["replay", "calibrate", "tune-warm-start", "tune-records", "export", "export-o", "vta-config-o"])
def test_a_directory_instead_of_a_file_is_one_line(tmp_path, capsys, argv):
    d = tmp_path / "adir"
    d.mkdir()
    _records(tmp_path / "r.jsonl")
    argv = [a.format(d=d, t=tmp_path, r=tmp_path / "r.jsonl") for a in argv]
    line = _one_line_error(capsys, main(argv))
    assert f"{d}: is a directory" in line


# -- values ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_tune_timeout_must_be_positive(capsys, value):
    line = _one_line_error(capsys, main(["tune", "--layer", CONV.spec, "--trials", "1", f"--timeout={value}"]))
    assert "--timeout" in line and "must be a positive number of seconds" in line


@pytest.mark.parametrize("command", ["space", "tune"])
def test_empty_layer_is_a_bad_layer_not_a_missing_workload(capsys, command):
    line = _one_line_error(capsys, main([command, "--layer", ""]))
    assert "layer ''" in line and "conv2d:" in line and "None" not in line


def test_shipped_spaces_are_accepted_by_the_names_the_error_lists(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for listed in sorted(p.name for p in SPACES.glob("*.yaml")):
        assert resolve_space_path(listed) == SPACES / listed
        assert resolve_space_path(listed.removesuffix(".yaml")) == SPACES / listed
        assert HwSpace.load(listed).board is not None
    (tmp_path / "pynq-z1.yaml").write_text("board: pynq-z1\n")  # a file in the cwd wins
    assert resolve_space_path("pynq-z1.yaml") == tmp_path.joinpath("pynq-z1.yaml").relative_to(tmp_path)
    line = _one_line_error(capsys, main(["sweep", "nope.yaml", "--out", str(tmp_path / "o")]))
    assert "nope.yaml: no such space file" in line


# -- permissions ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_output_files_follow_the_umask(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        path = atomic_write_text(tmp_path / "f.json", "{}\n")
        assert stat.S_IMODE(path.stat().st_mode) == mode
        assert main(["export", "vta-config", "pynq_1x16", "-o", str(tmp_path / "vta_config.json")]) == 0
        assert stat.S_IMODE((tmp_path / "vta_config.json").stat().st_mode) == mode
    finally:
        os.umask(old)


def test_rewriting_a_file_keeps_its_mode(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("{}")
    path.chmod(0o640)
    atomic_write_text(path, "[]")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_text() == "[]"


def test_documented_repository_paths_work_from_any_directory(tmp_path, monkeypatch, capsys):
    # README/--help examples name shipped files by their repository path; from another directory
    # (or an installed wheel) they used to be "no such file".
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "sim/calibration/pynq_resnet18.log", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["replayed"] == 20
    assert main(["export", "vta-config", "hw_configs/pynq_1x16.yaml"]) == 0
    assert json.loads(capsys.readouterr().out)["LOG_BLOCK"] == 4
    assert resolve_space_path("hw_configs/spaces/pynq-z1-small.yaml") == SPACES / "pynq-z1-small.yaml"
    # a user's own file of the same relative name wins over the shipped one
    mine = tmp_path / "sim" / "calibration" / "pynq_resnet18.log"
    mine.parent.mkdir(parents=True)
    mine.write_text("not a log line\n")
    assert "no record could be replayed" in _one_line_error(capsys, main(["replay", str(mine.relative_to(tmp_path))]))


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_replay_of_a_log_with_nothing_usable_fails(tmp_path, capsys, extra):
    bad = tmp_path / "bad.log"
    bad.write_text("not a log line\n")
    line = _one_line_error(capsys, main(["replay", str(bad), *extra]))
    assert f"{bad}: no record could be replayed" in line and "1 skipped" in line and "not valid JSON" in line


def test_plot_into_a_directory_is_refused_before_tuning(tmp_path, capsys):
    line = _one_line_error(capsys, _tune(tmp_path, "--plot", str(tmp_path)))
    assert f"{tmp_path}: is a directory; name the PNG file to write" in line
    assert not list(tmp_path.parent.glob(f"{tmp_path.name}.png"))  # matplotlib used to write DIR.png


def test_plot_is_written_where_it_says(tmp_path, capsys):
    path = tmp_path / "curve"  # no suffix: matplotlib used to write curve.png and we said `curve`
    assert _tune(tmp_path, "--plot", str(path)) == 0
    assert f"tuning curve written to {path}" in capsys.readouterr().out
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_out_naming_a_file_is_one_line(tmp_path, capsys):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine\n")
    line = _one_line_error(capsys, main(["sweep", "--out", str(afile), "--trials", "1"]))
    assert f"{afile}: is a file; --out names the sweep directory" in line
    assert afile.read_text() == "mine\n"


def test_replay_of_a_log_with_nothing_usable_prints_no_empty_table(tmp_path, capsys):
    from codesign.cli import main

    log = tmp_path / "empty.log"
    log.write_text("not a record\n")
    assert main(["replay", str(log)]) == 2
    captured = capsys.readouterr()
    assert "idx_rec" not in captured.out  # no table header without rows
    assert "skipped" in captured.out and len(captured.err.strip().splitlines()) == 1
