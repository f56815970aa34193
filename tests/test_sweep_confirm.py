"""Multi-fidelity sweep: a simulated sweep, then `codesign sweep --resume DIR
--confirm-tracker ...` re-measures the front designs that have a catalog bitstream on two emulated
PYNQ boards behind a real tvm RPC tracker (127.0.0.1). The emulated board's device time is the
timing model's, so measured latency must equal the simulated one; the design without a bitstream
is listed with its build command; a second run reuses confirm.jsonl. Every process started here
is stopped."""

from __future__ import annotations

import json

import pytest

from codesign.board.local import local_board, local_tracker
from codesign.cli import main
from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace
from codesign.sweep.options import SweepOptions
from codesign.workloads import Workload

# Starts Ray: one Ray module at a time (xdist_group, pyproject addopts) so two local clusters never
# compete for the ports, /tmp/ray and ~/.ray/auth_token of the machine.
pytestmark = pytest.mark.xdist_group("ray")

HW = HwConfig.from_name("pynq_1x16_i8w8a32_15_14_16_15")  # the faster design of the space
SPACE = """\
board: pynq-z1
description: confirm test space (1x8 and 1x16)
params:
  LOG_BLOCK: [3, 4]
fixed:
  LOG_UOP_BUFF_SIZE: 15
  LOG_INP_BUFF_SIZE: 14
  LOG_WGT_BUFF_SIZE: 16
  LOG_ACC_BUFF_SIZE: 15
  clock_mhz: 100
"""
NET = Workload("tiny", (("conv2d:1,32,8,8,32,3,3,1,1", 2), ("dense:1,64,32", 1)))


@pytest.fixture(scope="module")
def boards():
    with local_tracker() as trk, local_board(HW.name, tracker=trk.addr, key="pynq"), \
            local_board(HW.name, tracker=trk.addr, key="pynq"):
        yield trk.addr


@pytest.fixture()
def bit_catalog(make_bit_catalog):
    return make_bit_catalog(HW.name)[1]


def test_sweep_confirm_on_emulated_boards_via_tracker(ray_session, boards, bit_catalog, tmp_path, capsys) -> None:
    from codesign.sweep import run_sweep

    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    out = tmp_path / "sweep"
    run_sweep(space, NET, out,
              SweepOptions(trials=None, budget=6, tuner="random", search="grid", seed=1), progress=False)
    sim = json.loads((out / "pareto.json").read_text())
    front = {p["config"]: p for p in sim["points"]}
    assert HW.name in front and len(front) == 2  # 1x8: smaller, 1x16: faster
    other = next(c for c in front if c != HW.name)

    argv = ["sweep", "--resume", str(out), "--confirm-tracker", boards, "--confirm-key", "pynq", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    conf = doc["confirm"]
    assert [d["config"] for d in conf["designs"]] == [HW.name]
    design = conf["designs"][0]
    assert design["sha256"] == bit_catalog["sha256"]
    assert all(s.startswith("emulated-board:pynq-z1") and bit_catalog["sha256"] in s for s in design["sources"])
    # Emulated boards time programs with the timing model: measured device time = the model's,
    # layer by layer; the call time adds the (emulating) host.
    assert design["simulated_latency_ms"] == front[HW.name]["latency_ms"]
    assert design["measured_device_ms"] <= design["simulated_device_ms"] * (1 + 1e-9)  # re-tune: never worse
    assert design["measured_latency_ms"] >= design["measured_device_ms"] > 0
    layers = {layer.name: layer for layer, _ in NET.for_hw(HW).entries}
    for lay in design["layers"]:
        assert lay["failed"] == 0 and lay["measured"] >= 2  # every output bit-exact (check_correctness)
        # the schedule the board chose: its device time is the timing model's cycles at the clock
        layer = layers[lay["layer"]]
        model = measure(layer, ScheduleSpace(layer, HW).get(lay["index"]), HW)
        assert lay["measured_device_s"] == pytest.approx(model.cycles / HW.clock_hz, rel=1e-9)
        assert lay["measured_device_s"] <= lay["simulated_device_s"] * (1 + 1e-9)
    points = {p["config"]: p for p in doc["points"]}
    assert points[HW.name]["measured_latency_ms"] == design["measured_latency_ms"]
    assert points[HW.name]["latency_ms"] == design["simulated_latency_ms"]  # simulated kept beside it
    assert "measured_latency_ms" not in points[other]
    assert conf["measured_front"] == [HW.name]
    assert [m["config"] for m in conf["missing_bitstream"]] == [other]
    assert f"codesign bitstream build {other} --board pynq-z1" in conf["missing_bitstream"][0]["build"]
    assert (out / "front_confirmed.png").stat().st_size > 0
    n_records = len((out / "confirm_records.jsonl").read_text().splitlines())
    assert n_records == sum(lay["measured"] for lay in design["layers"])

    # Resumable: a second confirmation reuses confirm.jsonl and measures nothing again.
    from codesign.sweep.confirm import run_confirm

    again = run_confirm(out, tracker=boards, key="pynq")
    assert again["designs"] == conf["designs"]
    assert len((out / "confirm_records.jsonl").read_text().splitlines()) == n_records

    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "measured_ms" in text and "front on measured latency" in text and f"no bitstream for {other}" in text


def test_confirm_flags_refused_with_one_line(tmp_path, capsys) -> None:
    assert main(["sweep", "--out", str(tmp_path / "x"), "--confirm-tracker", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--confirm-key" in err
    assert main(["sweep", "--out", str(tmp_path / "x"), "--confirm", "127.0.0.1:1",
                 "--confirm-tracker", "127.0.0.1:2", "--confirm-key", "pynq"]) == 2
    assert "give one of them" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # refused before the sweep started
