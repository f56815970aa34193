"""The whole-network IR (codesign.network): every op with its weights and edges, int8 quantization
with power-of-two scales through torchao's PT2E flow, the NumPy integer reference against the float
model, the integer conv against the VTA simulator (the contract lowering must keep), bad input."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch
from torch import nn

from codesign.cli import main
from codesign.evaluate.run import run_layer
from codesign.hw.config import HwConfig
from codesign.network import (
    agreement,
    gemm_layers,
    import_network,
    int_outputs,
    load_model,
    quantize,
    run_float,
    run_int,
)
from codesign.network.quantize import convert, prepare_and_calibrate
from codesign.network.quantized import QParams, frac_bits
from codesign.network.reference import _int_op, conv2d_int
from codesign.schedule import get_space
from codesign.workloads import Conv2D, get_workload


def _digits(rng: np.random.Generator, templates: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """8x8 glyphs: one of 10 fixed random templates, shifted by up to a pixel, plus noise."""
    y = rng.integers(0, 10, n)
    x = templates[y]
    for i, (dy, dx) in enumerate(rng.integers(-1, 2, (n, 2))):
        x[i] = np.roll(x[i], (dy, dx), axis=(0, 1))
    x = x + 0.3 * rng.standard_normal(x.shape)
    return x[:, None].astype(np.float32), y


@pytest.fixture(scope="module")
def trained(small_cnn):
    rng = np.random.default_rng(0)
    templates = (rng.random((10, 8, 8)) < 0.35).astype(np.float32)
    xtr, ytr = _digits(rng, templates, 1600)
    xte, yte = _digits(rng, templates, 400)  # held back: never seen in training or calibration
    torch.manual_seed(0)
    net = small_cnn()
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    net.train()
    for _ in range(3):
        for i in range(0, len(xtr), 64):
            loss = nn.functional.cross_entropy(net(torch.from_numpy(xtr[i:i + 64])), torch.from_numpy(ytr[i:i + 64]))
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        ref = net(torch.from_numpy(xte)).numpy()
    example = (torch.from_numpy(xte[:1]),)
    # 520 = 8 batches of 64 + 8: the last batch is filled up to the exported batch size
    prepared, q = prepare_and_calibrate(net, example, xtr[:520], "small")
    return {"net": net, "example": example, "xtr": xtr, "xte": xte, "yte": yte, "ref": ref, "q": q,
            "prepared": prepared}


def test_ir_keeps_every_op_with_the_module_weights_and_edges(trained):
    net, example = trained["net"], trained["example"]
    ir = import_network(net, example, "small")
    assert ir.counts() == {"conv2d": 3, "relu": 3, "add": 1, "max_pool2d": 1, "avg_pool2d": 1, "flatten": 1,
                           "linear": 1}
    stem, c1, c2 = (op for op in ir.ops if op.kind == "conv2d")
    # batch norm folded into the stem conv: w·γ/√(σ²+ε), bias (0-μ)·γ/√(σ²+ε)+β
    bn = net.bn
    scale = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach().numpy()
    np.testing.assert_allclose(stem.weight, net.stem.weight.detach().numpy() * scale[:, None, None, None], rtol=1e-5)
    np.testing.assert_allclose(stem.bias, (bn.bias - bn.running_mean * torch.from_numpy(scale)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert np.array_equal(c1.weight, net.c1.weight.detach().numpy()) and np.array_equal(c2.bias, net.c2.bias.detach().numpy())
    fc = next(op for op in ir.ops if op.kind == "linear")
    assert np.array_equal(fc.weight, net.fc.weight.detach().numpy()) and fc.source.startswith("fc")
    # edges: the residual add sums the block's second conv and the block input (the stem's ReLU)
    add = next(op for op in ir.ops if op.kind == "add")
    stem_relu = ir.consumers(stem.name)[0]
    assert add.inputs == (c2.name, stem_relu.name)
    assert {op.name for op in ir.consumers(stem_relu.name)} == {c1.name, add.name}
    # the float IR computes what the module computes
    out = run_float(ir, trained["xte"][:50])[ir.outputs[0]]
    np.testing.assert_allclose(out, trained["ref"][:50], atol=1e-4)
    # the user's module is untouched by export and PT2E's batch-norm folding
    assert net.bn.weight.requires_grad and np.array_equal(stem.bias, import_network(net, example, "again").ops[0].bias)


def test_integer_reference_is_within_two_points_of_the_float_model(trained):
    q = trained["q"]
    assert all(isinstance(f, int) for f in q.frac.values())
    out = int_outputs(q, trained["xte"])[0]
    a = agreement(trained["ref"], out, trained["yte"])
    assert a["accuracy_float"] > 0.9, a  # the model learned the task
    assert abs(a["accuracy_int"] - a["accuracy_float"]) <= 0.02, a
    assert a["top1_agreement"] >= 0.97 and a["max_abs_error"] < 0.1 * a["output_range"], a


def test_torchs_converted_pt2e_model_uses_the_same_scales(trained):
    """torchao's convert_pt2e of the same calibrated model (torch's Q/DQ arithmetic in float) agrees
    with the integer reference: same power-of-two scales, outputs within a few LSBs."""
    qdq = convert(trained["prepared"])
    scales = {float(n.args[1]) for n in qdq.graph.nodes if "quantize_per_tensor" in str(n.target)}
    assert scales and all(np.log2(s) == round(np.log2(s)) for s in scales)
    q, xte = trained["q"], trained["xte"]
    out_frac = q.frac[q.network.outputs[0]]
    assert 2.0 ** -out_frac in scales
    b = q.network.batch  # the prepared model runs at its exported batch: the example inputs'
    with torch.no_grad():
        torch_q = np.concatenate([qdq(torch.from_numpy(xte[i:i + b])).numpy() for i in range(0, 384, b)])
    ours = int_outputs(q, xte[:384])[0]
    assert np.max(np.abs(torch_q - ours)) <= 4 * 2.0 ** -out_frac
    assert agreement(torch_q, ours)["top1_agreement"] >= 0.98


def test_quantized_ops_follow_the_power_of_two_rules(trained):
    q = trained["q"]
    env = run_int(q, trained["xte"][:4])
    assert all(v.dtype == np.int8 for v in env.values())
    for op in q.network.ops:
        p = q.params.get(op.name, QParams())
        if op.kind in ("conv2d", "linear"):
            fin = q.frac[op.inputs[0]]
            assert p.shift == fin + p.weight_frac - q.frac[op.name] and 0 <= p.shift <= 15
            assert p.weight.dtype == np.int8 and p.bias.dtype == np.int32
            # bias at the accumulator's scale, with the half-LSB rounding offset of the shift
            want = np.rint(op.bias.astype(np.float64) * 2.0 ** (fin + p.weight_frac)) + (1 << (p.shift - 1) if p.shift else 0)
            assert np.array_equal(p.bias, want.astype(np.int32))
        if op.kind in ("relu", "max_pool2d", "flatten", "avg_pool2d"):
            assert q.frac[op.name] == q.frac[op.inputs[0]]
    # the weight exponent is the largest that keeps max |w| within int8
    c1 = q.network.ops[2]
    assert q.params[c1.name].weight_frac == frac_bits(np.abs(c1.weight).max())


def test_integer_semantics_by_hand():
    a, b = np.array([[100, -7]], np.int8), np.array([[-3, 5]], np.int8)
    from codesign.network.graph import Op

    add = Op("add", "add", ("a", "b"), (1, 2))
    # (100 + (-3 << 2) + 1) >> 1 = 44; (-7 + 20 + 1) >> 1 = 7: int32 align, round half up, shift
    got = _int_op(add, QParams(shift=1, in_shifts=(0, 2)), [a, b])
    assert got.tolist() == [[44, 7]]
    x = np.arange(-8, 8, dtype=np.int8).reshape(1, 1, 4, 4) * 9
    mp = Op("mp", "max_pool2d", ("x",), (1, 1, 3, 3), {"kernel": (2, 2), "stride": (2, 2), "padding": (1, 1),
                                                       "dilation": (1, 1), "ceil_mode": False})
    # padding (-128) never wins: the corner window is x[0, 0] alone
    assert _int_op(mp, QParams(), [x]).tolist() == [[[[-72, -54, -45], [0, 18, 27], [36, 54, 63]]]]
    gap = Op("gap", "adaptive_avg_pool2d", ("x",), (1, 1, 1, 1), {"output_size": (1, 1)})
    x3 = np.full((1, 1, 3, 3), 10, np.int8)  # 9-element window: (90·7282 + 2^15) >> 16 = 10
    assert _int_op(gap, QParams(shift=16, mul=round(2 ** 16 / 9)), [x3]).tolist() == [[[[10]]]]
    ap = Op("ap", "avg_pool2d", ("x",), (1, 1, 1, 1), {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0),
                                                       "divisor": 4})
    assert _int_op(ap, QParams(shift=2), [np.array([[[[1, 2], [3, -1]]]], np.int8)]).tolist() == [[[[1]]]]  # (5+2)>>2


def test_integer_conv_equals_the_vta_simulator_bit_for_bit(trained):
    """The quantized block conv (its int8 input activations and weights, without the bias VTA's
    conv template does not add yet) + ReLU through the existing VTA path: compiled program on the
    functional simulator. Lowering must keep this equality."""
    q = trained["q"]
    env = run_int(q, trained["xte"][:1])
    conv = next(op for op in q.network.ops if op.kind == "conv2d" and op.inputs[0] != q.network.inputs[0][0])
    p = q.params[conv.name]
    data = env[conv.inputs[0]]
    layer = Conv2D(1, 16, 8, 8, 16, 3, 3, 1, 1)
    hw = HwConfig()
    space = get_space(layer, hw)
    knobs = space.get(int(space.valid_indices()[0])).knobs
    sim = run_layer(layer, knobs, hw, data, p.weight, shift=p.shift).output
    ref = np.maximum(conv2d_int(data, p.weight, None, p.shift, (1, 1), (1, 1)), 0)
    assert np.count_nonzero(ref) > 100  # real activations, not all clipped away
    assert np.array_equal(sim, ref)


class Branchy(nn.Module):
    """concat of two branches, dropout, grouped conv, ReLU6, ceil-mode max pool, adaptive pool,
    mean and view: the rest of the IR's kinds."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 8, 1), nn.Conv2d(3, 8, 3, padding=1)
        self.drop, self.c = nn.Dropout(0.5), nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.pool, self.gap = nn.MaxPool2d(3, 2, ceil_mode=True), nn.AdaptiveAvgPool2d(3)
        self.fc = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.drop(torch.cat([self.a(x), nn.functional.relu(self.b(x))], dim=1))
        y = self.gap(self.pool(nn.functional.relu6(self.c(y)))).mean((2, 3))
        return self.fc(y.view(y.shape[0], -1))


def test_concat_clamp_pools_and_reshapes():
    torch.manual_seed(0)
    net = Branchy().eval()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3, 12, 12)).astype(np.float32)
    ir = import_network(net, (torch.from_numpy(x[:1]),), "branchy")
    assert ir.counts() == {"conv2d": 3, "relu": 1, "concat": 1, "clamp": 1, "max_pool2d": 1,
                           "adaptive_avg_pool2d": 2, "flatten": 1, "linear": 1}  # dropout passes through
    assert next(op for op in ir.ops if op.kind == "clamp").attrs == {"min": 0.0, "max": 6.0}
    with torch.no_grad():
        ref = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(run_float(ir, x)[ir.outputs[0]], ref, atol=1e-5)
    cal = rng.standard_normal((70, 3, 12, 12)).astype(np.float32)  # 64 + 6: the last batch filled up
    q = quantize(net, (torch.from_numpy(x[:1]),), cal, "branchy")
    cat = next(op for op in ir.ops if op.kind == "concat")
    assert q.frac[cat.name] == min(q.frac[t] for t in cat.inputs)
    gap = next(op for op in ir.ops if op.name == "mean")
    assert (q.params[gap.name].mul, q.params[gap.name].shift) == (round(2 ** 16 / 9), 16)  # 3x3: not a power of 2
    a = agreement(ref, int_outputs(q, x)[0])
    assert a["max_abs_error"] < 0.05 * a["output_range"] and a["top1_agreement"] >= 7 / 8, a


def test_resnet18_imports_whole_and_runs_on_the_integer_reference():
    module, inputs, name = load_model("resnet18", seed=3)
    again, _, _ = load_model("resnet18", seed=3)
    assert torch.equal(module[0].weight, again[0].weight)  # seeded random weights
    ir = import_network(module, inputs, name)
    assert ir.counts() == {"conv2d": 20, "relu": 17, "max_pool2d": 1, "add": 8, "adaptive_avg_pool2d": 1,
                           "flatten": 1, "linear": 1}
    assert ir.has_weights and ir.macs == 1_814_073_344
    # its GEMM ops are exactly the layers of the timing-only workload (same shapes, same counts)
    assert gemm_layers(ir) == dict(get_workload("resnet18").entries)
    q = quantize(module, inputs, None, name)  # calibrated on the seeded random example input
    x = np.random.default_rng(5).standard_normal((1, 3, 224, 224)).astype(np.float32)  # another input
    out = int_outputs(q, x)
    with torch.no_grad():
        ref = module(torch.from_numpy(x)).numpy()
    assert out[0].shape == (1, 1000)
    assert np.max(np.abs(out[0] - ref)) < 0.2 * np.max(np.abs(ref))


NETS = textwrap.dedent("""
    import torch
    from torch import nn

    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Softplus())

        def forward(self, x):
            return self.body(x)

    def good():
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(144, 3)).eval(), \\
            (torch.zeros(1, 1, 8, 8),)

    def no_inputs():
        return nn.Sequential(nn.Conv2d(1, 4, 3)), ()

    def gate():
        return Gate(), (torch.zeros(1, 1, 8, 8),)

    def training_mode():  # left in training mode: dropout would be active
        return nn.Sequential(nn.Conv2d(1, 4, 3), nn.Dropout(0.9), nn.Flatten(), nn.Linear(144, 3)), \
            (torch.zeros(1, 1, 8, 8),)
""")


@pytest.fixture()
def nets(tmp_path):
    path = tmp_path / "nets.py"
    path.write_text(NETS)
    return path


def test_bad_input_is_one_line(nets, tmp_path, capsys):
    np.save(tmp_path / "wrong.npy", np.zeros((5, 3, 8, 8), np.float32))
    cases = [
        (["--quantize", "--calibration", str(tmp_path / "wrong.npy")], "good",
         "calibration data has shape (5, 3, 8, 8), expected (N, 1, 8, 8)"),
        ([], "no_inputs", "has no example inputs"),
        ([], "gate", "op aten.softplus.default at node 'softplus' (module body.1: Softplus) cannot be represented"),
    ]
    for extra, fn, want in cases:
        assert main(["workloads", f"{nets}:{fn}", "--graph", *extra]) == 2
        err = capsys.readouterr().err
        assert want in err and len(err.strip().splitlines()) == 1, err


def test_cli_graph_and_quantize(nets, tmp_path, capsys):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "x.npy", rng.standard_normal((20, 1, 8, 8)).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.integers(0, 3, 20))
    assert main(["workloads", f"{nets}:good", "--graph", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["counts"] == {"conv2d": 1, "relu": 1, "flatten": 1, "linear": 1}  # batch norm folded
    assert [r["inputs"] for r in doc["ops"]][1:] == [["conv2d"], ["relu"], ["flatten"]]
    assert [r["layer"] for r in doc["ops"]] == ["conv2d:1,1,8,8,4,3,3,1,0", None, None, "dense:1,144,3"]
    assert main(["workloads", f"{nets}:good", "--quantize", "--calibration", str(tmp_path / "x.npy"),
                 "--labels", str(tmp_path / "y.npy")]) == 0
    out = capsys.readouterr().out
    assert "integer reference vs float model on 20 input(s)" in out and "accuracy float" in out


def test_a_factory_module_in_training_mode_is_imported_for_inference(nets, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.random.default_rng(2).standard_normal((16, 1, 8, 8)).astype(np.float32))
    assert main(["workloads", f"{nets}:training_mode", "--quantize", "--calibration", str(tmp_path / "x.npy"),
                 "--json"]) == 0
    a = json.loads(capsys.readouterr().out)["agreement"]
    assert a["max_abs_error"] < 0.1 * a["output_range"], a  # the float model without dropout noise


def test_pt2_archive_imports_with_its_weights(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                        nn.Linear(32, 4)).eval()
    path = tmp_path / "net.pt2"
    torch.export.save(torch.export.export(net, (torch.zeros(1, 3, 8, 8),)), str(path))
    module, inputs, name = load_model(str(path))
    ir = import_network(module, inputs, name)
    assert name == "net" and ir.counts()["adaptive_avg_pool2d"] == 1
    # a .pt2 quantizes too: its module refuses eval() and runs only at its exported batch (1)
    cal = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    q = quantize(module, inputs, cal, name)
    with torch.no_grad():
        ref = module(torch.from_numpy(cal[:1])).numpy()
    assert np.max(np.abs(int_outputs(q, cal[:1])[0] - ref)) < 0.1 * np.max(np.abs(ref))
    assert np.array_equal(ir.ops[0].weight, net[0].weight.detach().numpy())
