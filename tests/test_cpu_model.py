"""The CPU cost model (docs/cpu-model.md): arm_cpu records parsed, parameters recovered from
synthetic measurements, the shipped fit replayed with computed error figures, costs of layers."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stderr, redirect_stdout
from types import SimpleNamespace

import numpy as np
import pytest

from codesign.autotvm import arm_cpu_op, parse_line, parse_log
from codesign.calibrate.cpu_fit import calibrate_cpu
from codesign.calibrate.cpu_replay import replay_cpu
from codesign.cli import main
from codesign.cpu import (
    DEPTHWISE,
    SPATIAL_PACK,
    TRANSPOSE,
    WINOGRAD,
    ConvShape,
    CpuModel,
    CpuParams,
    conv_work,
    layer_cost,
    pass_work,
    tensor_pass,
)
from codesign.errors import ConfigError
from codesign.hw.board import Board
from codesign.paths import ROOT
from codesign.workloads import Conv2D, Dense

LOG = ROOT / "sim" / "calibration" / "arm_cpu_pynq_ultra96.log"
A9_TARGET = "llvm -device=arm_cpu -model=pynq -mtriple=armv7a-linux-eabi -mattr=+neon"


def _line(n: int) -> str:
    return LOG.read_text().splitlines()[n - 1]


def test_arm_cpu_records_parse_to_their_convs():
    sp = arm_cpu_op(parse_line(_line(1), 1))
    assert (sp.kind, sp.dtype) == (SPATIAL_PACK, "float32")
    assert sp.shape == ConvShape(1, 992, 7, 7, 128, 1, 1)
    assert sp.shape.macs == 992 * 128 * 49
    # Winograd F(4x4,3x3) on a 7x7 output: 2x2 tiles, 36 points each, 128 in x 32 out channels.
    wg = arm_cpu_op(parse_line(_line(16), 16))
    assert wg.kind == WINOGRAD and (wg.shape.out_height, wg.shape.out_width) == (7, 7)
    assert conv_work(wg.shape, "float32", WINOGRAD).macs == 36 * 4 * 128 * 32
    # Inception's 3x1 kernel with padding [1, 0, 1, 0] keeps 8x8.
    asym = arm_cpu_op(parse_line(_line(71), 71)).shape
    assert (asym.kernel_h, asym.kernel_w, asym.pad, asym.out_height, asym.out_width) == (3, 1, (1, 0, 1, 0), 8, 8)
    dw = arm_cpu_op(parse_line(_line(111), 111))
    assert dw.kind == DEPTHWISE and dw.shape.groups == 960 and dw.shape.out_channels == 960
    assert dw.shape.macs == 960 * 49 * 9
    # conv2d_transpose, int8, IOHW kernel [128, 3, 4, 4], stride 2, pad 1: 32x32 -> 64x64, the full
    # 4x4 window of every output over the dilated input.
    tr = arm_cpu_op(parse_line(_line(210), 210))
    assert (tr.kind, tr.dtype) == (TRANSPOSE, "int8")
    assert (tr.shape.out_channels, tr.shape.out_height, tr.shape.out_width) == (3, 64, 64)
    assert tr.shape.macs == 3 * 64 * 64 * 128 * 16
    records, skipped = parse_log(LOG)
    assert (len(records), skipped) == (233, [])
    models = [r.model for r in records]
    assert (models.count("pynq"), models.count("ultra96")) == (209, 24)


def test_boards_name_their_cpu():
    assert Board.named("pynq-z1").cpu == "cortex-a9"
    for name in ("ultra96", "kv260", "zcu104"):
        assert Board.named(name).cpu == "cortex-a53"
    assert Board.for_target("pynq").name == "pynq-z1"
    with pytest.raises(ConfigError, match="known targets"):
        Board.for_target("de10nano")


def _synthetic_log(tmp_path, truth: CpuParams, noise: float = 0.0, seed: int = 0):
    """A log of spatial-pack and depthwise records on the PYNQ-Z1 timed by `truth`."""
    rng = np.random.default_rng(seed)
    lines = []
    shapes = [(1, c, hw, k, ks) for c, hw, k, ks in
              [(3, 224, 64, 7), (64, 56, 64, 3), (64, 56, 256, 1), (256, 14, 512, 1), (512, 7, 512, 3),
               (16, 112, 16, 1), (32, 112, 16, 1), (8, 224, 8, 1), (1024, 1, 1000, 1), (2048, 1, 1000, 1),
               (128, 28, 128, 3), (4, 4, 4, 1), (8, 2, 8, 1), (96, 35, 96, 3)]]
    from codesign.cpu import predict  # noqa: PLC0415
    for n, c, hw, k, ks in shapes:
        pad = ks // 2
        args = [["TENSOR", [n, c, hw, hw], "float32"], ["TENSOR", [k, c, ks, ks], "float32"], [1, 1],
                [pad] * 4, [1, 1], "float32"]
        shape = ConvShape(n, c, hw, hw, k, ks, ks, pad=(pad,) * 4)
        t = predict(conv_work(shape, "float32", SPATIAL_PACK), truth).seconds * math.exp(noise * rng.standard_normal())
        lines.append({"input": [A9_TARGET, "conv2d_nchw_spatial_pack.arm_cpu", args, {}],
                      "config": {"index": 0, "code_hash": None, "entity": []},
                      "result": [[t], 0, 1.0, 1.5e9], "version": 0.2, "tvm_version": "0.7.dev0"})
    for c, hw, s in [(32, 112, 1), (64, 112, 2), (128, 56, 1), (256, 28, 2), (512, 14, 1), (1024, 7, 1), (8, 4, 1)]:
        args = [["TENSOR", [1, c, hw, hw], "float32"], ["TENSOR", [c, 1, 3, 3], "float32"], [s, s], [1, 1, 1, 1],
                [1, 1], "float32"]
        shape = ConvShape(1, c, hw, hw, c, 3, 3, s, s, (1, 1, 1, 1), groups=c)
        t = predict(conv_work(shape, "float32", DEPTHWISE), truth).seconds * math.exp(noise * rng.standard_normal())
        lines.append({"input": [A9_TARGET, "depthwise_conv2d_nchw.arm_cpu", args, {}],
                      "config": {"index": 0, "code_hash": None, "entity": []},
                      "result": [[t], 0, 1.0, 1.5e9], "version": 0.2, "tvm_version": "0.7.dev0"})
    path = tmp_path / "synthetic_arm_cpu.log"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_fit_recovers_injected_parameters(tmp_path):
    truth = CpuParams("cortex-a9", call_overhead_s=50e-6, bytes_per_s=1.2e9,
                      gmacs={"spatial_pack/float32": 1.5, "depthwise/float32": 0.4})
    path = _synthetic_log(tmp_path, truth)
    model, fits, prov = calibrate_cpu([path])
    got = model.params("cortex-a9")
    assert got.call_overhead_s == pytest.approx(50e-6, rel=0.02)
    assert got.bytes_per_s == pytest.approx(1.2e9, rel=0.02)
    assert got.gmacs["spatial_pack/float32"] == pytest.approx(1.5, rel=0.02)
    assert got.gmacs["depthwise/float32"] == pytest.approx(0.4, rel=0.02)
    assert prov["after"]["mape"] < 0.5 and prov["leave_one_out"]["mape"] < 1.0
    assert fits["cortex-a9"]["at_bound"] == []
    # With 5% log-normal noise the parameters stay within 10% and LOO error is of the noise's size.
    noisy = _synthetic_log(tmp_path, truth, noise=0.05, seed=3)
    model, _, prov = calibrate_cpu([noisy])
    got = model.params("cortex-a9")
    assert got.gmacs["spatial_pack/float32"] == pytest.approx(1.5, rel=0.1)
    assert got.bytes_per_s == pytest.approx(1.2e9, rel=0.1)
    assert 1.0 < prov["leave_one_out"]["mape"] < 10.0


def test_shipped_fit_replays_with_computed_errors():
    model = CpuModel.load()
    rows, skipped, summary = replay_cpu(LOG, model)
    assert (len(rows), skipped) == (233, [])
    errs = np.array([abs(r.predicted_s / r.measured_s - 1) * 100 for r in rows])
    assert summary["mape"] == pytest.approx(errs.mean())
    assert summary["per_cpu"]["cortex-a9"]["records"] == 209
    assert rows[0].line == 1 and rows[-1].line == 233
    # The shipped file's provenance is this very fit: same MAPE from replay and from calibration.
    assert model.provenance["after"]["mape"] == pytest.approx(summary["mape"], rel=1e-9)
    assert summary["mape"] < 20 and summary["spearman"] > 0.95
    # docs state the leave-one-out error the shipped file records.
    loo = model.provenance["leave_one_out"]["mape"]
    assert f"{loo:.1f}%" in (ROOT / "docs" / "cpu-model.md").read_text()


def test_layer_costs_on_board_cpus():
    model = CpuModel.load()
    a9 = model.params("cortex-a9")
    stem = Conv2D(1, 3, 224, 224, 64, 7, 7, 2, 3)
    cost = layer_cost(stem, "pynq-z1")
    work = conv_work(ConvShape(1, 3, 224, 224, 64, 7, 7, 2, 2, (3, 3, 3, 3)), "float32", SPATIAL_PACK)
    want = a9.call_overhead_s + stem.macs / (a9.gmacs["spatial_pack/float32"] * 1e9) + work.bytes / a9.bytes_per_s
    assert (cost.kind, cost.basis) == (SPATIAL_PACK, "measured")
    assert cost.seconds == pytest.approx(want)
    assert 0.05 < cost.seconds < 0.2  # 118 M MACs at ~1 GMAC/s
    # A 3x3 stride-1 conv: the faster of spatial pack and Winograd, as TVM keeps the faster.
    c3 = Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1)
    both = [layer_cost(ConvShape(1, 64, 56, 56, 64, 3, 3, pad=(1, 1, 1, 1)), "pynq-z1").seconds]
    assert both[0] == layer_cost(c3, "pynq-z1").seconds
    # The A53 has no float32 spatial-pack record: derived from int8 by the transpose dtype ratio.
    a53 = layer_cost(c3, "kv260")
    assert a53.basis.startswith("derived") and a53.cpu == "cortex-a53"
    dense = layer_cost(Dense(1, 512, 1000), "pynq-z1")
    assert dense.basis.startswith("spatial_pack rate")
    p = layer_cost(pass_work("relu", 2 * 4 * 64 * 56 * 56), "pynq-z1")
    assert p.seconds == pytest.approx(a9.call_overhead_s + 2 * 4 * 64 * 56 * 56 / a9.bytes_per_s)
    q = tensor_pass("quantize", 3 * 224 * 224, 3 * 224 * 224, "float32", "int8")
    assert (q.bytes, q.macs, q.kind) == (5 * 3 * 224 * 224, 0, "pass")
    with pytest.raises(ConfigError, match="no winograd/int8 rate|no transpose"):
        from codesign.cpu import predict
        predict(conv_work(ConvShape(1, 8, 8, 8, 8, 3, 3, 2, 2, (1, 1, 1, 1), transpose=True), "int8", TRANSPOSE),
                CpuParams("x", 1e-5, 1e9, {"spatial_pack/float32": 1.0}))


def _cli(*args: str) -> SimpleNamespace:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def test_calibrate_cpu_and_replay_cli(tmp_path):
    truth = CpuParams("cortex-a9", 20e-6, 0.9e9, {"spatial_pack/float32": 2.0, "depthwise/float32": 0.5})
    log = _synthetic_log(tmp_path, truth)
    out = tmp_path / "cpu.json"
    r = _cli("calibrate", "cpu", str(log), "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["cpus"]["cortex-a9"]["gmacs"]["spatial_pack/float32"] == pytest.approx(2.0, rel=0.02)
    fitted = CpuModel.load(out)
    assert fitted.params("cortex-a9").bytes_per_s == pytest.approx(0.9e9, rel=0.02)
    r = _cli("replay", str(log), "--cpu-params", str(out), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["summary"]["replayed"] == 21 and rep["summary"]["mape"] < 0.5
    assert [x["line"] for x in rep["records"]] == list(range(1, 22))
    r = _cli("calibrate", "cpu", str(log), "-o", str(ROOT / "sim" / "cpu_params.json"))
    assert r.returncode == 2 and "never overwritten" in r.stderr and "Traceback" not in r.stderr
    mixed = tmp_path / "mixed.log"
    mixed.write_text(log.read_text() + (ROOT / "sim" / "calibration" / "pynq_resnet18.log").read_text())
    r = _cli("replay", str(mixed))
    assert r.returncode == 2 and "mixes arm_cpu records" in r.stderr and "Traceback" not in r.stderr
