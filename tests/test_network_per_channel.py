"""Per-output-channel power-of-two weight exponents (`quantize(..., per_channel=True)`): each
channel of a conv / linear / transposed conv is requantized by its own shift, bit-exact against
the per-channel arithmetic written out channel by channel; every output exponent is the per-tensor
one, so per tensor stays the default and `per_tensor` swaps any op back (what a VTA step needs:
the lowering has one shift per layer)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch_cases import randn

from codesign.network import quantize, run_int
from codesign.network.kernels import conv2d_int, linear_int
from codesign.network.kinds.conv import transpose_int
from codesign.network.quantized import QParams, frac_bits
from codesign.network.reference import op_sqnr, sqnr_db


class Spread(nn.Module):
    """A conv whose output channels span 2^6 in weight range (as batch norm folding makes them),
    a ReLU, a transposed conv and a linear over the last axis; channel 3 of the conv is all zero."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 6, 2, stride=2)
        self.fc = nn.Linear(12, 5)
        with torch.no_grad():
            self.conv.weight.mul_((2.0 ** -torch.arange(8.0) * 0.9 ** torch.arange(8.0)).view(8, 1, 1, 1))
            self.conv.weight[3] = 0
            self.up.weight.mul_(torch.tensor([1.0, 0.05, 0.3, 0.01, 0.5, 0.1]).view(1, 6, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.up(torch.relu(self.conv(x))))


def _quantized(per_channel: bool):
    """The same seeded `Spread` quantized per tensor or per channel, and its input."""
    torch.manual_seed(0)
    x = randn(16, 4, 6, 6, seed=1)
    return quantize(Spread().eval(), (x,), None, "spread", per_channel=per_channel), x.numpy()


def test_default_is_per_tensor_and_per_channel_keeps_every_exponent():
    tensor, _ = _quantized(False)
    channel, _ = _quantized(True)
    assert not tensor.fallback and all(p.shifts is None for p in tensor.params.values())
    assert dict(channel.frac) == dict(tensor.frac)  # no other op changes
    gemms = [op.name for op in channel.network.ops if op.kind in ("conv2d", "conv_transpose2d", "linear")]
    assert set(channel.fallback) == set(gemms) == {n for n, p in channel.params.items() if p.shifts is not None}
    for name in gemms:  # the fallback is the per-tensor quantization itself
        a, b = channel.fallback[name], tensor.params[name]
        assert (a.shift, a.weight_frac) == (b.shift, b.weight_frac)
        np.testing.assert_array_equal(a.weight, b.weight)
        np.testing.assert_array_equal(a.bias, b.bias)


def test_per_channel_is_each_channel_at_its_own_shift():
    q, x = _quantized(True)
    net, env = q.network, run_int(q, x)
    conv, up, fc = (net.ops[i] for i in (0, 2, 3))
    assert [conv.kind, up.kind, fc.kind] == ["conv2d", "conv_transpose2d", "linear"]
    p = q.params[conv.name]
    w = conv.weight.reshape(8, -1)
    assert p.weight_fracs[3] == p.weight_frac  # an all-zero channel keeps the tensor's exponent
    for c in (0, 1, 2, 4, 5, 6, 7):
        want = min(frac_bits(float(np.abs(w[c]).max())), q.frac[conv.name] + 15 - q.frac[conv.inputs[0]])
        assert p.weight_fracs[c] == want and p.shifts[c] == q.frac[conv.inputs[0]] + want - q.frac[conv.name]
        one = conv2d_int(env[conv.inputs[0]], p.weight[c:c + 1], p.bias[c:c + 1], int(p.shifts[c]), (1, 1), (1, 1))
        np.testing.assert_array_equal(env[conv.name][:, c:c + 1], one)
    assert len(set(p.shifts.tolist())) > 4
    pu = q.params[up.name]  # IOHW: the output channels are axis 1
    for c in range(6):
        one = transpose_int(up, QParams(pu.weight[:, c:c + 1], bias=pu.bias[c:c + 1], shift=int(pu.shifts[c])),
                            [env[up.inputs[0]]], 0)
        np.testing.assert_array_equal(env[up.name][:, c:c + 1], one)
    pf = q.params[fc.name]  # (out, in): channels on the last axis of the output
    for c in range(5):
        one = linear_int(env[fc.inputs[0]], pf.weight[c:c + 1], pf.bias[c:c + 1], int(pf.shifts[c]))
        np.testing.assert_array_equal(env[fc.name][..., c:c + 1], one)


def test_per_channel_refines_small_channels_and_swaps_back():
    """The small channels' weights keep far more of their signal; the op's output gains less (its
    int8 output keeps the per-tensor exponent, whose rounding then dominates)."""
    tensor, x = _quantized(False)
    channel, _ = _quantized(True)
    conv = channel.network.ops[0]
    pt, pc = tensor.params[conv.name], channel.params[conv.name]
    for c in (5, 6, 7):
        w = conv.weight[c]
        fine = sqnr_db(w, pc.weight[c] * 2.0 ** -int(pc.weight_fracs[c]))
        assert fine > sqnr_db(w, pt.weight[c] * 2.0 ** -pt.weight_frac) + 20
    sq_t, sq_c = op_sqnr(tensor, x), op_sqnr(channel, x)
    assert sq_t[conv.name] < sq_c[conv.name] < sq_t[conv.name] + 3
    back = channel.per_tensor(channel.fallback)
    assert not back.fallback and back.per_tensor([conv.name]) is back
    a, b = run_int(back, x), run_int(tensor, x)
    assert all(np.array_equal(a[k], b[k]) for k in b)  # all swapped back: the default network, bit for bit
    one = channel.per_tensor([conv.name])  # one op back: it runs as per tensor, the others stay
    np.testing.assert_array_equal(run_int(one, x)[conv.name], b[conv.name])
    assert set(one.fallback) == set(channel.fallback) - {conv.name}


def test_after_relu_compares_a_conv_as_the_relu_consumes_it():
    q, x = _quantized(False)
    conv = q.network.ops[0].name
    plain, consumed = op_sqnr(q, x), op_sqnr(q, x, after_relu=True)
    assert consumed[conv] > plain[conv]  # its negative half, clipped in int8, is what the ReLU drops
    assert {k: v for k, v in consumed.items() if k != conv} == {k: v for k, v in plain.items() if k != conv}
