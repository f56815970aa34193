"""Matmuls of two activations on VTA (codesign.place.plan, codesign.netrun.network): each batch
entry a dense whose weight is the second operand loaded as WGT, the rounded shift as a bias of
2^(shift-1); a power-of-two scale folded into the shift (`attention.scale_factor`), any other
scale left on the CPU. Through `run_net` on pynq_1x16: bit-exact, both figures costed, the
cheaper placement taken."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch_cases import randn as _x
from torch_cases import seeded_weights  # noqa: F401 - autouse fixture: seeded module weights

from codesign.hw.config import HwConfig
from codesign.network.graph import Network, Op
from codesign.network.kernels import conv2d_int, linear_int
from codesign.network.kinds.attention import matmul_int, matmul_quant, scale_factor
from codesign.network.kinds.base import QuantContext
from codesign.network.layers import calls_of, layer_of
from codesign.network.quantized import QParams
from codesign.place.transforms import ENTRIES, TOKENS, entries_as_groups, matmul_entries, rewrites
from codesign.workloads.layers import Conv2D, Dense

SDPA = "scaled_dot_product_attention"


def _cheaper_won(step, entries: int) -> None:
    """The plan costed the step on the CPU and on VTA (as dense calls, as 1x1 convs over the
    tokens, and with several entries as one grouped conv), and placed it where it is cheaper."""
    alt = step.alternatives
    assert {"cpu", "vta", "vta:tokens_as_pixels"} <= set(alt), alt
    assert ("vta:entries_as_groups" in alt) == (entries > 1)
    vta = min(v for k, v in alt.items() if k.startswith("vta"))
    assert step.placement == ("vta" if vta <= alt["cpu"] else "cpu")


@pytest.mark.parametrize("scale, mul, bits", [(0.125, 1, 3), (1.0, 1, 0), (4.0, 1, -2),
                                              (1 / np.sqrt(32), round(2 ** 15 / np.sqrt(32)), 15)])
def test_a_power_of_two_scale_folds_into_the_shift(scale, mul, bits):
    """2^-k is mul 1 and k more bits of shift: the same integers as the multiply by 2^(15-k)."""
    assert scale_factor(scale) == (mul, bits)
    op = Op("mm", "matmul", ("a", "b"), (1, 4, 4), {"contract": 8, "transpose_b": True, "scale": scale})
    net = Network("n", (("a", (1, 4, 8)), ("b", (1, 4, 8))), (op,), ("mm",))
    ctx = QuantContext(net, {"mm": 3.0}, {"a": 5, "b": 4})
    fout, p = matmul_quant(ctx, op)
    assert p.mul == mul and p.shift == 5 + 4 + bits - fout
    if mul == 1 and bits >= 0:  # the old rule: mul round(scale·2^15) with 15 bits; equal integers
        rng = np.random.default_rng(1)
        xs = [rng.integers(-128, 128, (1, 4, 8)).astype(np.int8) for _ in range(2)]
        old = QParams(shift=5 + 4 + 15 - fout, mul=round(scale * 2 ** 15))
        np.testing.assert_array_equal(matmul_int(op, p, xs, fout), matmul_int(op, old, xs, fout))


def test_matmul_entries_and_layer():
    op = Op("mm", "matmul", ("a", "b"), (2, 3, 4, 5), {"contract": 6, "transpose_b": False, "scale": 1.0})
    rng = np.random.default_rng(0)
    a, b = rng.integers(-128, 128, (2, 3, 4, 6)), rng.integers(-128, 128, (1, 3, 6, 5))  # b broadcast
    xs, ws = matmul_entries(a, b, op.shape, False)
    assert calls_of(op) == 6 and xs.shape == (6, 4, 6) and ws.shape == (6, 5, 6)
    want = (a @ b).reshape(6, 4, 5)
    np.testing.assert_array_equal(np.stack([x @ w.T for x, w in zip(xs, ws)]), want)
    assert layer_of(None, op) == (Dense(4, 6, 5), None)


def test_tokens_as_pixels_computes_the_same_dense():
    """A dense of M rows as a 1x1 conv over M pixels (channels padded to BLOCK): same int8 output."""
    rw = next(r for r in rewrites(Dense(5, 20, 7), HwConfig.resolve("pynq_1x16")) if r.kind == TOKENS)
    assert rw.layer == Conv2D(1, 32, 5, 1, 16, 1, 1, 1, 0)
    rng = np.random.default_rng(2)
    x, w = rng.integers(-128, 128, (5, 20)).astype(np.int8), rng.integers(-128, 128, (7, 20)).astype(np.int8)
    bias = np.full(7, 1 << 7, np.int32)
    vx, vw, vb, _ = rw.vta_operands(x, w, bias)
    assert vx.shape == (1, 32, 5, 1) and vw.shape == (16, 32, 1, 1) and vb.shape == (16,)
    y = rw.vta_output(conv2d_int(vx, vw, vb, 8, (1, 1), (0, 0), (1, 1), 1))
    np.testing.assert_array_equal(y, linear_int(x, w, bias, 8))


def test_entries_as_groups_computes_every_entry_in_one_grouped_conv():
    """3 entries of a dense 5x20 -> 7 as one grouped 1x1 conv (per group 32 in, 16 out): same output."""
    rw = entries_as_groups(Dense(5, 20, 7), 3, HwConfig.resolve("pynq_1x16"))
    assert rw.kind == ENTRIES and rw.calls == 1 and rw.layer == Conv2D(1, 96, 5, 1, 48, 1, 1, 1, 0, 1, 3)
    rng = np.random.default_rng(3)
    xs, ws = rng.integers(-128, 128, (3, 5, 20)).astype(np.int8), rng.integers(-128, 128, (3, 7, 20)).astype(np.int8)
    bias = np.full(7, 1 << 6, np.int32)
    vx, vw, vb, _ = rw.vta_operands(xs, ws, bias)
    assert vx.shape == (1, 96, 5, 1) and vw.shape == (48, 32, 1, 1) and vb.shape == (48,)
    y = rw.vta_output(conv2d_int(vx, vw, vb, 7, (1, 1), (0, 0), (1, 1), 3))
    np.testing.assert_array_equal(y, np.stack([linear_int(x, w, bias, 7) for x, w in zip(xs, ws)]))
    assert entries_as_groups(Dense(5, 20, 7), 1, HwConfig.resolve("pynq_1x16")) is None


class Bmm(nn.Module):
    """bmm of two activations (1, T, C) x (1, C, C), each made by a linear."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(c, c), nn.Linear(c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bmm(self.a(x), self.b(x))


@pytest.mark.parametrize("c", [16, 64])
def test_bmm_of_two_activations(run_net, c):
    prep, exe = run_net(Bmm(c), (_x(1, c, c),), min_sqnr_db=25.0)
    step = prep.plan.step_of("bmm")
    _cheaper_won(step, 1)
    if c == 64:
        assert step.placement == "vta" and step.rewrite.original == Dense(64, 64, 64) and step.rewrite.calls == 1
        assert step.epilogue.bias == (prep.qnet.params["bmm"].shift > 0) and not step.epilogue.relu
    row = next(r for r in exe.rows if r.name == "bmm")
    assert row.placement == step.placement and row.bit_exact


class SelfAttention(nn.Module):
    """nn.MultiheadAttention(c, heads, batch_first=True)'s arithmetic with the batch kept on axis
    0 (torch's module transposes tokens to axis 0, which the IR does not take): q, k, v linears,
    heads split to (N, H, T, D), attention, heads merged, out projection."""

    def __init__(self, c: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.out = (nn.Linear(c, c) for _ in range(4))

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        n, s, c = t.shape
        return t.reshape(n, s, self.heads, c // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, s, c = x.shape
        a = F.scaled_dot_product_attention(self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x)))
        return self.out(a.transpose(1, 2).reshape(n, s, c))


@pytest.mark.parametrize("c, heads, tokens", [(64, 1, 32), (64, 4, 32), (64, 1, 128), (64, 4, 128)])
def test_self_attention_matmuls(run_net, c, heads, tokens):
    """Head dim 64 (scale 1/8) or 16 (1/4): both matmuls costed on VTA (H calls of the entry's
    dense or 1x1 conv, or one grouped conv of all heads), placed where cheaper, bit-exact. At 128
    tokens both go to VTA."""
    prep, exe = run_net(SelfAttention(c, heads), (_x(1, tokens, c),), min_sqnr_db=20.0)
    net, plan = prep.network, prep.plan
    scores, av = net.op(f"{SDPA}_scores"), net.op(SDPA)
    d = c // heads
    assert prep.qnet.params[scores.name].mul == 1 and scores.attrs["scale"] == 1 / np.sqrt(d)
    for op, layer in ((scores, Dense(tokens, d, tokens)), (av, Dense(tokens, tokens, d))):
        step = plan.step_of(op.name)
        _cheaper_won(step, heads)
        assert layer_of(net, op)[0] == layer and calls_of(op) == heads
        if step.placement == "vta" and step.transform != ENTRIES:
            assert step.rewrite.calls == heads and f"{heads} call{'s' if heads > 1 else ''} of" in step.reason
    if tokens == 128:  # one head: a 1x1 conv over the tokens; four: one grouped conv of them all
        for op in (scores, av):
            step = plan.step_of(op.name)
            assert step.placement == "vta" and step.transform == (ENTRIES if heads > 1 else TOKENS)
            assert step.rewrite.calls == 1 and (heads == 1 or step.layer.groups == heads)
            # the softmax reads the scores where VTA left them, the head merge after A·V is a view:
            # no unpack after either (their layouts: tests/test_place_layouts.py)
            assert "unpack after" not in step.reason
    assert plan.step_of(f"{SDPA}_attn").placement == "cpu"
    assert all(r.bit_exact for r in exe.rows)


class MHA(nn.Module):
    def __init__(self, c: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(c, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=False)[0]


@pytest.mark.parametrize("tokens", [32, 128])
def test_multihead_attention_module(run_net, tokens):
    """nn.MultiheadAttention(64, 4, batch_first=True): torch.export keeps its SDPA (sequence-first
    inside: imported at its fixed batch), whose two matmuls of 4 heads each are costed on VTA and
    placed where cheaper; at 128 tokens both run there as one grouped conv of the 4 heads."""
    prep, exe = run_net(MHA(64, 4), (_x(1, tokens, 64),), min_sqnr_db=20.0)
    for name in (f"{SDPA}_scores", SDPA):
        op, step = prep.network.op(name), prep.plan.step_of(name)
        assert op.kind == "matmul" and calls_of(op) == 4 and prep.qnet.params[name].mul == 1
        _cheaper_won(step, 4)
        if tokens == 128:
            assert step.placement == "vta" and step.transform == ENTRIES and step.layer.groups == 4
    assert all(r.bit_exact for r in exe.rows)


def test_a_scale_that_is_not_a_power_of_two_stays_on_the_cpu(run_net):
    """Head dim 32: 1/√32 needs a multiply, which VTA's ALU lacks; A·V (scale 1) is costed on VTA."""
    prep, _ = run_net(SelfAttention(32, 1), (_x(1, 32, 32),), min_sqnr_db=20.0)
    step = prep.plan.step_of(f"{SDPA}_scores")
    assert step.placement == "cpu" and "vta" not in step.alternatives
    assert "is not a power of two" in step.reason and "VTA's ALU has none" in step.reason
    assert "vta" in prep.plan.step_of(SDPA).alternatives


def test_bmm_with_a_relu_fuses_it_and_an_add_stays_apart(run_net):
    """relu(a·b) runs the ReLU in the matmul's epilogue; an add after a matmul is a CPU op (the
    matmul's epilogue takes no residual), with that reason."""

    class M(Bmm):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(super().forward(x)) + torch.bmm(self.b(x), self.a(x))

    prep, exe = run_net(M(64), (_x(1, 64, 64),), min_sqnr_db=25.0)
    step = prep.plan.step_of("bmm")
    assert step.placement == "vta" and step.ops == ("bmm", "relu") and step.epilogue.relu
    add = prep.plan.step_of("add")
    assert add.ops == ("add",) and "its epilogue takes no residual add" in add.reason
    assert all(r.bit_exact for r in exe.rows)


def test_attention_matmuls_on_an_emulated_board_equal_the_simulator(make_bit_catalog):
    """Both attention matmuls on VTA (128 tokens, one head of 64 as 1x1 convs; four heads of 16 as
    grouped convs), run through the board executor: every tensor equals the simulator's, device
    time measured."""
    from codesign.board.client import BoardClient
    from codesign.board.local import local_board
    from codesign.deploy import deploy, fused_board_executor
    from codesign.hw.config import HwConfig
    from codesign.netrun import network as whole

    hw = HwConfig.resolve("pynq_1x16")
    preps = [whole.prepare(SelfAttention(64, h).eval(), (_x(1, 128, 64),), "attn", hw) for h in (1, 4)]
    for prep in preps:
        assert prep.plan.step_of(SDPA).placement == "vta" and prep.plan.step_of(f"{SDPA}_scores").placement == "vta"
    make_bit_catalog(hw.name)
    with local_board("pynq_1x16") as board, BoardClient(board.addr) as client:
        assert deploy(client, hw)["ok"]
        for prep in preps:
            sim = whole.execute(prep, prep.example, whole.simulator_executor())
            exe = whole.execute(prep, prep.example, fused_board_executor(client))
            assert exe.bit_exact and sim.bit_exact
            for name in sim.env:
                assert np.array_equal(exe.env[name], sim.env[name]), name
            row = next(r for r in exe.rows if r.name == SDPA)
            assert row.placement == "vta" and row.measured_device_ms > 0
