"""Element-wise binary kinds with broadcasting and constants, and batch norm after no conv
(codesign.network.kinds.binary), end to end through the run_net checks (placed once, bit-exact,
float reference == torch, SQNR); each op's int8 output is also checked against its rounding rule
written independently in float64 (exact here: int8 products and power-of-two scales)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from codesign.errors import ConfigError
from codesign.network import import_network
from codesign.network.kinds.binary import packed_broadcast
from codesign.network.quantized import frac_bits
from codesign.network.reference import run_float


def half_up(v: np.ndarray) -> np.ndarray:
    """Round half up, clip to int8: what `(acc + 2^(s-1)) >> s` computes."""
    return np.clip(np.floor(v + 0.5), -128, 127)


def operands(exe, q, op) -> list[tuple[np.ndarray, int]]:
    """(int8 values, exponent) of a binary op's two operands in order (the constant at attr `const`)."""
    vals = [(exe.env[t].astype(np.float64), q.frac[t]) for t in op.inputs]
    if op.attrs["const"] is not None:
        p = q.params[op.name]
        vals.insert(op.attrs["const"], (p.weight.astype(np.float64), p.weight_frac))
    return vals


def expect_binary(exe, q, op) -> np.ndarray:
    """mul/div: the product at f_a + f_b rounded to f_out; add/sub: the exact sum rounded to f_out."""
    (a, fa), (b, fb) = operands(exe, q, op)
    fout = q.frac[op.name]
    if op.attrs["op"] in ("mul", "div"):
        return half_up(a * b * 2.0 ** (fout - fa - fb))
    sign = 1.0 if op.attrs["op"] == "add" else -1.0
    return half_up((a * 2.0 ** -fa + sign * b * 2.0 ** -fb) * 2.0 ** fout)


class DenseBlock(nn.Module):
    """DenseNet: two pre-activation dense layers (BN -> ReLU -> 1x1 conv -> BN -> ReLU -> 3x3 conv,
    concatenated to the input), then the final norm on the concatenation."""

    def __init__(self, seeded_bn, c: int = 16, growth: int = 16) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Sequential(seeded_bn(c + i * growth, 10 * i), nn.ReLU(), nn.Conv2d(c + i * growth, 16, 1, bias=False),
                          seeded_bn(16, 10 * i + 1), nn.ReLU(), nn.Conv2d(16, growth, 3, padding=1, bias=False))
            for i in range(2))
        self.norm = seeded_bn(c + 2 * growth, 99)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.cat([x, layer(x)], 1)
        return self.norm(x)


def test_densenet_preactivation_batch_norm_is_a_channel_affine(run_net, seeded_bn):
    torch.manual_seed(0)
    module = DenseBlock(seeded_bn)
    x = torch.randn(2, 16, 8, 8)
    prep, exe = run_net(module, (x,))
    net, q = prep.network, prep.qnet
    affine = [op for op in net.ops if op.kind == "channel_affine"]
    # the BN on the input, on the first concat and after the last: affine ops; the BN after each 1x1 conv folds
    assert [net.op(op.inputs[0]).kind if op.inputs[0] in {o.name for o in net.ops} else "input" for op in affine] == \
        ["input", "concat", "concat"]
    assert net.counts()["conv2d"] == 4 and net.outputs == (affine[-1].name,)
    for op, m in zip(affine, [module.layers[0][0], module.layers[1][0], module.norm]):
        scale = (m.weight / torch.sqrt(m.running_var + m.eps)).detach().numpy()
        np.testing.assert_allclose(op.weight, scale, rtol=1e-6)
        np.testing.assert_allclose(op.bias, m.bias.detach().numpy() - m.running_mean.numpy() * scale, rtol=1e-5,
                                   atol=1e-6)
        p, fx = q.params[op.name], q.frac[op.inputs[0]]
        acc = (exe.env[op.inputs[0]].astype(np.float64) * p.weight.astype(np.float64)[None, :, None, None]
               + np.rint(op.bias.astype(np.float64) * 2.0 ** (fx + p.weight_frac))[None, :, None, None])
        np.testing.assert_array_equal(exe.env[op.name], half_up(acc * 2.0 ** (q.frac[op.name] - fx - p.weight_frac)))
    # the last norm has no ReLU after it: its exponent is the one PT2E observed at its own output
    with torch.no_grad():
        assert q.frac[affine[-1].name] == frac_bits(float(module(x).abs().max()))
    assert prep.plan.step_of(affine[0].name).placement == "cpu"
    assert any(s.placement == "vta" for s in prep.plan.steps if s.kind.startswith("conv2d"))


class Scalars(nn.Module):
    """Layer scale (a (C,1,1) parameter and a (C,) buffer after a linear), scalar ops, a broadcast add."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3, padding=1)
        self.gamma = nn.Parameter(torch.linspace(0.05, 1.0, 16).reshape(16, 1, 1))
        self.fc = nn.Linear(16, 16)
        self.register_buffer("beta", torch.linspace(-1.0, 0.5, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x) * self.gamma
        y = (y * 0.5 + 3) / 6 - 1
        y = 2 - y + F.adaptive_avg_pool2d(y, 1)  # rsub, then (N,C,H,W) + (N,C,1,1)
        z = self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1)) * self.beta
        return z - 0.25


def test_layer_scale_and_scalar_ops(run_net):
    torch.manual_seed(3)
    prep, exe = run_net(Scalars(), (torch.randn(2, 16, 8, 8),))
    net, q = prep.network, prep.qnet
    ops = [op for op in net.ops if op.kind == "binary"]
    got = [(op.attrs["op"], op.attrs["const"], None if op.weight is None else op.weight.shape) for op in ops]
    assert got == [("mul", 1, (16, 1, 1)), ("mul", 1, ()), ("add", 1, ()), ("div", 1, ()), ("sub", 1, ()),
                   ("sub", 0, ()), ("add", None, None), ("mul", 1, (16,)), ("sub", 1, ())]
    for op in ops:
        np.testing.assert_array_equal(exe.env[op.name], expect_binary(exe, q, op), err_msg=op.name)
    div = next(op for op in ops if op.attrs["op"] == "div")
    p = q.params[div.name]  # x / 6 multiplies by rint(2^9 / 6) = 85 at exponent 9
    assert div.weight == 6 and p.weight_frac == 9 and p.weight == 85
    # per-channel and scalar constants keep VTA's packed blocks; the (C,) scale of a (N, C) dense output does not
    assert [packed_broadcast(net, op) for op in ops] == [True] * 7 + [False, True]


class Alpha(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.rsub(torch.sub(x, 1.5, alpha=2), 1.0)  # 1 - (x - 2·1.5)


def test_alpha_folds_into_the_constant():
    x = torch.randn(1, 16, 4, 4)
    net = import_network(Alpha(), (x,))
    assert [(op.attrs["op"], op.attrs["const"], float(op.weight)) for op in net.ops] == [("sub", 1, 3.0),
                                                                                         ("sub", 0, 1.0)]
    np.testing.assert_allclose(run_float(net, x.numpy())[net.outputs[0]], Alpha()(x).numpy(), rtol=1e-6)
    with pytest.raises(ConfigError, match=r"aten\.rsub\.Scalar .* sub with alpha=2 applied to a tensor"):
        import_network(Lambda(lambda t: torch.rsub(t, 1.0, alpha=2)), (x,))


class Lambda(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


class Div(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / (torch.sigmoid(x) + 1)


def test_division_by_a_tensor_is_one_line():
    x = torch.randn(1, 16, 4, 4)
    with pytest.raises(ConfigError) as err:
        import_network(Div(), (x,))
    msg = str(err.value)
    assert len(msg.splitlines()) == 1
    assert msg.startswith("network 'network': op aten.div.Tensor at node 'div' (module <root>: Div) cannot be "
                          "represented: division by a tensor"), msg
