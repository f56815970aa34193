"""`codesign run` of a whole quantized network: every op placed, VTA steps through the fused path on
the functional simulator (and an emulated board), CPU steps with the integer reference, every op's
output bit-exact against `run_int`; a small CNN trained here on scikit-learn's 8x8 digits keeps its
float accuracy; ResNet-18 with seeded random weights runs with its stem on VTA; bad input is one
line."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch

from codesign.board.client import BoardClient
from codesign.board.local import local_board
from codesign.cli import main
from codesign.deploy import deploy, fused_board_executor
from codesign.hw.config import HwConfig
from codesign.netrun import network as whole
from codesign.network.importer import load_model
from codesign.network.quantized import dequantize

HW = HwConfig.resolve("pynq_1x16")
BATCH = 16  # images per run: the exported graph's batch (a VTA layer's batch is a multiple of BATCH=1)


@pytest.fixture(scope="module")
def digits(trained_digits):
    """The trained small CNN (conftest `trained_digits`) placed on `HW`, calibrated on 512 training images."""
    d = trained_digits
    example = (torch.from_numpy(d["x_test"][:BATCH]),)
    prep = whole.prepare(d["net"], example, "digits", HW, calibration=d["x_train"][:512])
    return {"net": d["net"], "prep": prep, "x": d["x_test"], "y": d["y_test"]}


def test_digits_cnn_end_to_end_on_the_simulator(digits):
    prep, x, y = digits["prep"], digits["x"], digits["y"]
    net = prep.network
    kinds = {op.kind for op in net.ops}
    assert {"conv2d", "add", "max_pool2d", "avg_pool2d", "linear"} <= kinds
    placed = [o for s in prep.plan.steps for o in s.ops]
    assert sorted(placed) == sorted(op.name for op in net.ops)  # every op placed, once
    assert any(s.placement == "vta" for s in prep.plan.steps)
    sim = whole.simulator_executor()
    n = (len(x) // BATCH) * BATCH
    logits = []
    for i in range(0, n, BATCH):
        exe = whole.execute(prep, x[i:i + BATCH], sim)
        # every op's output, on VTA or the CPU, equals the integer reference's bit for bit
        assert exe.bit_exact, [r.name for r in exe.rows if not r.bit_exact]
        assert {r.name for r in exe.rows if not r.host} == {op.name for op in net.ops}
        out = net.outputs[0]
        logits.append(dequantize(exe.env[out], prep.qnet.frac[out]))
    pred = np.concatenate(logits).argmax(1)
    with torch.no_grad():
        ref = digits["net"](torch.from_numpy(x[:n])).numpy().argmax(1)
    acc_int, acc_float = float(np.mean(pred == y[:n])), float(np.mean(ref == y[:n]))
    assert acc_float > 0.9  # a trained model, not chance
    assert abs(acc_int - acc_float) <= 0.02, (acc_int, acc_float)


def test_digits_cnn_on_an_emulated_board_equals_the_simulator(digits, make_bit_catalog, tmp_path, capsys):
    prep, x = digits["prep"], digits["x"][:BATCH]
    make_bit_catalog(HW.name)
    sim = whole.execute(prep, x, whole.simulator_executor())
    (tmp_path / "nets.py").write_text(NETS)
    with local_board("pynq_1x16") as board:
        with BoardClient(board.addr) as client:  # the board serves one session at a time
            assert deploy(client, HW)["ok"]
            exe = whole.execute(prep, x, fused_board_executor(client))
            summary = whole.summary(prep, exe, "emulated board")
        # the CLI's board path: measured device and call time per VTA step
        assert main(["run", "--workload", f"{tmp_path / 'nets.py'}:small", "--hw", "pynq_1x16", "--board", board.addr,
                     "--json"]) == 0
        res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] and res["executor"].startswith(f"board {board.addr}") and res["measured_vta_device_ms"] > 0
    assert exe.bit_exact and sim.bit_exact
    for name in sim.env:
        assert np.array_equal(exe.env[name], sim.env[name]), name
    vta = [r for r in summary["ops"] if r["placement"] == "vta" and r["predicted_ms"] > 0]
    assert vta and all(r["measured_device_ms"] > 0 and r["measured_call_ms"] >= r["measured_device_ms"] for r in vta)


@pytest.fixture(scope="module")
def resnet18():
    """The zoo's ResNet-18 at 224x224 with seeded random weights and seeded standard-normal input
    (a full functional run: about 35 s on this 2-core machine, most of it choosing schedules)."""
    module, inputs, name = load_model("resnet18")
    return whole.prepare(module, inputs, name, HW)


def test_resnet18_end_to_end_bit_exact_with_its_stem_on_vta(resnet18):
    prep = resnet18
    net = prep.network
    placed = [o for s in prep.plan.steps for o in s.ops]
    assert sorted(placed) == sorted(op.name for op in net.ops)
    stem = net.ops[0]
    assert stem.kind == "conv2d" and net.shape(stem.inputs[0])[1] == 3
    stem_step = next(s for s in prep.plan.steps if stem.name in s.ops)
    assert stem_step.placement == "vta" and stem_step.transform is not None
    res = whole.run(prep, whole.simulator_executor(), "functional simulator")
    assert res["bit_exact"] and not res["mismatched_ops"]
    ops = [r for r in res["ops"] if not r.get("host")]
    assert [r["name"] for r in ops] == [op.name for op in net.ops]  # one entry per op, in order
    assert {r["placement"] for r in res["ops"]} <= {"vta", "cpu"}
    assert res["latency_ms"] == pytest.approx(sum(r["predicted_ms"] for r in res["ops"]), rel=1e-9)
    assert res["throughput_ips"] == pytest.approx(1e3 / res["latency_ms"], rel=1e-9)


NETS = textwrap.dedent("""
    import torch
    from torch import nn

    def small():
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 16 * 16, 16)), \\
            (torch.randn(1, 16, 16, 16),)

    def pool3():  # a 3x3 average pool: a window of 9 needs a multiply VTA's ALU does not have
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(3), nn.Flatten(),
                             nn.Linear(16 * 2 * 2, 16)), (torch.randn(1, 16, 6, 6),)

    def gate():
        return nn.Sequential(nn.Conv2d(16, 16, 3), nn.Softplus()), (torch.randn(1, 16, 8, 8),)

    def no_inputs():
        return nn.Sequential(nn.Conv2d(16, 16, 3)), ()
""")


@pytest.fixture()
def nets(tmp_path):
    path = tmp_path / "nets.py"
    path.write_text(NETS)
    return path


def test_cli_json_and_table(nets, tmp_path, capsys):
    calib = tmp_path / "calib.npy"
    np.save(calib, np.random.default_rng(0).standard_normal((4, 16, 16, 16)).astype(np.float32))
    assert main(["run", "--workload", f"{nets}:small", "--hw", "pynq_1x16", "--simulate", "--calibration", str(calib),
                 "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] and res["latency_ms"] > 0 and res["throughput_ips"] == pytest.approx(1e3 / res["latency_ms"])
    assert [r["name"] for r in res["ops"] if not r.get("host")] == ["conv2d", "relu", "flatten", "linear"]
    for r in res["ops"]:
        assert set(r) >= {"name", "kind", "placement", "predicted_ms", "bit_exact"} and r["bit_exact"]
    assert next(r for r in res["ops"] if r["name"] == "conv2d")["placement"] == "vta"
    png = tmp_path / "steps.png"
    assert main(["run", "--workload", f"{nets}:small", "--hw", "pynq_1x16", "--simulate", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "total per image" in out and "bit-exact" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_op_vta_cannot_run_is_a_placement_note(nets, capsys):
    assert main(["run", "--workload", f"{nets}:pool3", "--hw", "pynq_1x16", "--simulate"]) == 0
    out = capsys.readouterr().out
    note = [line for line in out.splitlines() if line.startswith("note:") and "avg_pool2d" in line]
    assert len(note) == 1 and "runs on the CPU" in note[0], out


@pytest.mark.parametrize("case,expect", [
    ("gate", "op aten.softplus.default at node 'softplus' (module 1: Softplus) cannot be represented"),
    ("no_inputs", "has no example inputs"),
    ("calib", "calibration data has shape (5, 3, 8, 8), expected (N, 16, 16, 16)"),
])
def test_bad_input_is_one_line(nets, tmp_path, capsys, case, expect):
    argv = ["run", "--hw", "pynq_1x16", "--simulate", "--workload", f"{nets}:{case}"]
    if case == "calib":
        bad = tmp_path / "wrong.npy"
        np.save(bad, np.zeros((5, 3, 8, 8), np.float32))
        argv[-1] = f"{nets}:small"
        argv += ["--calibration", str(bad)]
        expect = f"{bad}: {expect}"
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expect in err, err




def _fast(space, layer, epi, skip=0, first=300):
    """Among the first `first` valid configs of `space` whose mapping takes the fused epilogue
    `epi`, the `skip`-th fastest (so the planner keeps the layer on VTA)."""
    from codesign.evaluate.fused import fused_invalid, measure_fused

    fits = [space.get(int(i)) for i in space.valid_indices()[:first]]
    fits = [c for c in fits if fused_invalid(layer, c, HW, epi) is None]
    return sorted(fits, key=lambda c: measure_fused(layer, c, HW, epi).seconds)[skip]


def test_run_uses_the_fastest_record_of_any_family(nets, tmp_path, capsys):
    from codesign.netrun.schedules import ScheduleChooser
    from codesign.schedule import get_space
    from codesign.tune.records import MeasureRecord
    from codesign.workloads import Conv2D

    layer = Conv2D(1, 16, 16, 16, 32, 3, 3, 1, 1)  # the conv of `small`
    epi = ScheduleChooser(HW).demand(layer)
    auto, vta = _fast(get_space(layer, HW), layer, epi, 1), _fast(get_space(layer, HW, "vta"), layer, epi)
    assert vta.family == "vta" and auto.family == "autotvm"
    recs = tmp_path / "records.jsonl"
    recs.write_text(MeasureRecord.make(layer, HW, auto, 2e-3, 1, None, "test", 0).to_json() + "\n"
                    + MeasureRecord.make(layer, HW, vta, 1e-3, 1, None, "test", 0).to_json() + "\n")
    argv = ["run", "--workload", f"{nets}:small", "--hw", "pynq_1x16", "--simulate", "--records", str(recs), "--json"]
    for extra, want in (([], vta), (["--schedules", "autotvm"], auto)):
        assert main(argv + extra) == 0
        res = json.loads(capsys.readouterr().out)
        conv = next(r for r in res["ops"] if r["name"] == "conv2d")
        assert res["bit_exact"] and conv["placement"] == "vta", conv["reason"]
        assert conv["schedule"] == {"source": "records", "family": want.family, "index": int(want.index),
                                    "layer": layer.name}
