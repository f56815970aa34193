"""Non-linear unary kinds (codesign.network.kinds.unary): exact int8 tables, end to end through the
run_net checks (placed once, bit-exact, float reference == torch, SQNR), in the blocks that use them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from codesign.network.kinds.unary import FUNCTIONS, INT8_VALUES
from codesign.network.quantized import dequantize, frac_bits

TORCH_FNS = {  # (kind, attrs) -> torch's function
    ("sigmoid", "none"): torch.sigmoid,
    ("silu", "none"): F.silu,
    ("hardswish", "none"): F.hardswish,
    ("hardsigmoid", "none"): F.hardsigmoid,
    ("gelu", "none"): F.gelu,
    ("gelu", "tanh"): lambda t: F.gelu(t, approximate="tanh"),
    ("tanh", "none"): torch.tanh,
}


class Op:  # the attributes FUNCTIONS read
    def __init__(self, approximate: str) -> None:
        self.attrs = {"approximate": approximate}


def test_float_functions_are_torchs():
    x = torch.linspace(-10, 10, 2001, dtype=torch.float64)
    for (kind, form), fn in TORCH_FNS.items():
        np.testing.assert_allclose(FUNCTIONS[kind](Op(form), x.numpy()), fn(x).numpy(), rtol=1e-12, atol=1e-12,
                                   err_msg=f"{kind} {form}")


class AllTables(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([fn(x) for fn in TORCH_FNS.values()], dim=1)


def test_every_table_is_the_nearest_int8_of_the_function(run_net):
    """Each table op on the graph input: the output exponent is the observed one, and all 256
    entries are the int8 nearest to torch's function (within half an LSB, or saturated)."""
    x = 3 * torch.randn(2, 16, 4, 4, generator=torch.Generator().manual_seed(0))
    prep, exe = run_net(AllTables(), (x,), min_sqnr_db=25)
    ops = [op for op in prep.network.ops if op.kind != "concat"]
    assert [(op.kind, op.attrs.get("approximate", "none")) for op in ops] == list(TORCH_FNS)
    fin = prep.qnet.frac[ops[0].inputs[0]]
    xs = torch.from_numpy(dequantize(INT8_VALUES, fin))
    for op, fn in zip(ops, TORCH_FNS.values()):
        fout = prep.qnet.frac[op.name]
        assert fout == frac_bits(float(fn(x).abs().max())), op.name  # observed by PT2E
        table = prep.qnet.params[op.name].table
        assert table.dtype == np.int8 and table.shape == (256,)
        want = fn(xs).numpy() * 2.0 ** fout
        inside = np.abs(want) <= 127
        assert np.all(np.abs(table[inside] - want[inside]) <= 0.5 + 1e-9), op.name
        assert np.all(table[~inside] == np.where(want[~inside] > 0, 127, -128)), op.name
        q = exe.env[op.inputs[0]]
        np.testing.assert_array_equal(exe.env[op.name], table[q.astype(np.int16) + 128])


class SEBlock(nn.Module):
    """A 3x3 stem (conv, BN, act) and an inverted residual: 1x1 expand + act, 3x3 depthwise + act,
    squeeze-excite (its own act, a `gate` activation), 1x1 project, residual. EfficientNet's MBConv
    with SiLU and a sigmoid gate; MobileNetV3's bneck with hardswish, ReLU and a hardsigmoid gate."""

    def __init__(self, bn, act: type[nn.Module], se_act: type[nn.Module], gate: type[nn.Module], c: int = 16,
                 squeeze: int = 4) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), bn(c, c), act())
        self.expand = nn.Sequential(nn.Conv2d(c, c, 1, bias=False), bn(c, c), act())
        self.dw = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False), bn(c, c), act())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, squeeze, 1), se_act(),
                                nn.Conv2d(squeeze, c, 1), gate())
        self.project = nn.Sequential(nn.Conv2d(c, c, 1, bias=False), bn(c, c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        y = self.dw(self.expand(x))
        return x + self.project(y * self.se(y))


def _se_gate_mul(prep, exe, gate_kind: str) -> None:
    """The squeeze-excite multiply: a `binary` mul of the map and the (N, C, 1, 1) gate, on VTA's
    packed blocks if its inputs are; its output the rounded product at the observed exponent."""
    net, q = prep.network, prep.qnet
    mul = next(op for op in net.ops if op.kind == "binary")
    gate = net.op(mul.inputs[1])
    assert mul.attrs == {"op": "mul", "const": None, "const_shape": None} and gate.kind == gate_kind
    assert net.shape(mul.inputs[0])[2:] == (8, 8) and net.shape(gate.name)[2:] == (1, 1)
    a, b = (exe.env[t].astype(np.int64) for t in mul.inputs)
    shift = q.frac[mul.inputs[0]] + q.frac[gate.name] - q.frac[mul.name]
    want = np.clip(np.floor(a * b / 2.0 ** shift + 0.5), -128, 127)  # round half up
    np.testing.assert_array_equal(exe.env[mul.name], want)


def test_mbconv_squeeze_excite_silu(run_net, seeded_bn):
    torch.manual_seed(0)
    prep, exe = run_net(SEBlock(seeded_bn, nn.SiLU, nn.SiLU, nn.Sigmoid), (torch.randn(2, 16, 8, 8),))
    counts = prep.network.counts()
    assert counts["silu"] == 4 and counts["sigmoid"] == 1 and counts["binary"] == 1 and counts["add"] == 1
    assert "channel_affine" not in counts  # every batch norm follows its conv: folded
    _se_gate_mul(prep, exe, "sigmoid")
    _stem_on_vta(prep, "silu")


def _stem_on_vta(prep, act: str) -> None:
    """The dense 3x3 stem conv runs on VTA; its activation, a table, reads VTA's packed blocks."""
    plan = prep.plan
    assert plan.step_of("conv2d").placement == "vta"
    step = plan.step_of(act)
    assert step.placement == "cpu" and "int8 table" in step.reason and "over the vta layout" in step.reason


def test_mobilenetv3_block_hardswish_hardsigmoid(run_net, seeded_bn):
    torch.manual_seed(1)
    prep, exe = run_net(SEBlock(seeded_bn, nn.Hardswish, nn.ReLU, nn.Hardsigmoid, squeeze=8),
                        (torch.randn(2, 16, 8, 8),))
    counts = prep.network.counts()
    assert counts["hardswish"] == 3 and counts["hardsigmoid"] == 1 and counts["binary"] == 1
    _se_gate_mul(prep, exe, "hardsigmoid")
    _stem_on_vta(prep, "hardswish")
    # hardsigmoid's table saturates at exactly 1.0 and 0: x >= 3 -> 2^f_out (clipped to 127), x <= -3 -> 0
    gate = next(op for op in prep.network.ops if op.kind == "hardsigmoid")
    table, fin = prep.qnet.params[gate.name].table, prep.qnet.frac[gate.inputs[0]]
    xs = dequantize(INT8_VALUES, fin)
    assert np.all(table[xs <= -3] == 0)
    assert np.all(table[xs >= 3] == min(127, 2 ** prep.qnet.frac[gate.name]))


@pytest.mark.parametrize("form", ["none", "tanh"])
def test_gelu_forms_are_one_kind_with_an_attr(run_net, form):
    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(F.gelu(self.fc1(x), approximate=form))

    torch.manual_seed(2)
    prep, _ = run_net(Mlp(), (torch.randn(4, 16),))
    gelu = next(op for op in prep.network.ops if op.kind == "gelu")
    assert gelu.attrs == {"approximate": form}
