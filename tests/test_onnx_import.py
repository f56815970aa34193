""".onnx files as a `--workload` form (codesign.workloads.onnx_import): a small model built with
onnx.helper goes through load_model and the whole network flow bit-exact; `codesign workloads
FILE.onnx` lists its layers and ops; every bad input is one line naming the file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from codesign.cli import main
from codesign.errors import ConfigError
from codesign.network import load_model
from codesign.workloads import onnx_import
from codesign.workloads.torch_import import get_workload

RNG = np.random.default_rng(0)
CONV_W = (RNG.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32)
CONV_B = (RNG.standard_normal(16) * 0.1).astype(np.float32)
FC_W = (RNG.standard_normal((10, 64)) * 0.2).astype(np.float32)
FC_B = (RNG.standard_normal(10) * 0.1).astype(np.float32)


def _save(path: Path, batch: int | str = 1, extra: list | None = None) -> Path:
    """Conv(3 -> 16, 3x3, pad 1) -> Relu -> MaxPool 2x2 -> Flatten -> Gemm(64 -> 10, transB) on 3x4x4
    (GlobalAveragePool would become aten.mean, which the IR reads once the reductions kind lands)."""
    nodes = [helper.make_node("Conv", ["image", "cw", "cb"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1)] + (extra or [])
    out = nodes[-1].output[0]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 3, 4, 4])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [batch, 10])],
        [numpy_helper.from_array(a, n) for a, n in ((CONV_W, "cw"), (CONV_B, "cb"), (FC_W, "fw"), (FC_B, "fb"))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _reference(x: np.ndarray) -> np.ndarray:
    """The ONNX graph's arithmetic, independently of onnx2torch."""
    f = torch.nn.functional
    y = f.max_pool2d(f.relu(f.conv2d(torch.from_numpy(x), torch.from_numpy(CONV_W), torch.from_numpy(CONV_B),
                                     padding=1)), 2)
    return (y.flatten(1) @ torch.from_numpy(FC_W).T + torch.from_numpy(FC_B)).numpy()


def test_an_onnx_file_goes_through_the_network_flow(tmp_path, run_net):
    path = _save(tmp_path / "tiny.onnx", batch=2)
    module, inputs, name = load_model(str(path))
    again = load_model(str(path))[1]
    assert name == "tiny" and len(inputs) == 1 and inputs[0].shape == (2, 3, 4, 4)
    assert torch.equal(inputs[0], again[0]) and float(inputs[0].std()) > 0.5  # seeded standard-normal
    with torch.no_grad():
        np.testing.assert_allclose(module(inputs[0]).numpy(), _reference(inputs[0].numpy()), rtol=1e-5, atol=1e-5)
    prep, _ = run_net(module, inputs)
    assert [op.kind for op in prep.network.ops] == ["conv2d", "relu", "max_pool2d", "flatten", "linear"]
    np.testing.assert_array_equal(prep.network.op("conv2d").weight, CONV_W)


def test_cli_workloads_lists_an_onnx_files_layers_and_ops(tmp_path, capsys):
    path = _save(tmp_path / "tiny.onnx")
    assert [layer.spec for layer, _ in get_workload(str(path)).entries][0].startswith("conv2d")
    assert main(["workloads", str(path), "--graph"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tiny: 5 ops") and all(k in out for k in ("conv2d", "relu", "max_pool2d", "linear"))
    assert main(["workloads", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["workload"], doc["description"]) == ("tiny", "ONNX model tiny.onnx")
    assert [x["offloaded"] for x in doc["layers"]] == [False, False]  # 3 input channels, 10 outputs: not blocks of 16


def _one_line(spec: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        load_model(spec)
    assert "\n" not in str(err.value)


def test_bad_onnx_inputs_are_one_line(tmp_path, monkeypatch):
    _one_line(str(tmp_path / "gone.onnx"), r"ONNX file '.*gone\.onnx' does not exist")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\x01 this is not a protobuf \xff\xfe" * 8)
    _one_line(str(junk), r"ONNX file '.*junk\.onnx' is not an ONNX model")
    _one_line(str(_save(tmp_path / "dyn.onnx", batch="N")),
              r"ONNX file '.*dyn\.onnx': input 'image' dim 0 \('N'\) is dynamic; the network flow takes static shapes")
    hard = _save(tmp_path / "hard.onnx", extra=[helper.make_node("Hardmax", ["logits"], ["h"], axis=1)])
    _one_line(str(hard), r"ONNX file '.*hard\.onnx': onnx2torch cannot convert it: .*Hardmax")
    monkeypatch.setattr(onnx_import, "MAX_BYTES", 1000)
    _one_line(str(_save(tmp_path / "big.onnx")), r"ONNX file '.*big\.onnx' is [\d,]+ bytes; at most 1,000 are read")


def test_a_missing_optional_package_names_the_pip_command(tmp_path, monkeypatch):
    path = _save(tmp_path / "tiny.onnx")
    monkeypatch.setitem(sys.modules, "onnx2torch", None)  # import onnx2torch -> ImportError
    _one_line(str(path), r"reading \.onnx files needs onnx2torch .*pip install 'vta-codesign\[onnx\]'")
    monkeypatch.setitem(sys.modules, "onnx", None)
    _one_line(str(path), r"reading \.onnx files needs the onnx package: pip install 'vta-codesign\[onnx\]'")
