"""Transformer kinds (codesign.network.kinds.norm, .attention): layer norm, softmax, matmul of two
activations, scaled dot-product attention decomposed into them, and linears over tokens on VTA,
each through import, PT2E quantization, placement and bit-exact execution (`run_net`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch_cases import randn as _x
from torch_cases import seeded_weights  # noqa: F401 - autouse fixture: seeded module weights

from codesign.errors import ConfigError
from codesign.network import import_network
from codesign.network.graph import Op
from codesign.network.importer import walk
from codesign.network.kinds.norm import EXP_BITS, exp_table, ln_float, softmax_float, softmax_int
from codesign.network.qplan import plan
from codesign.network.quantized import QParams, frac_bits, quantize_array
from codesign.network.reference import run_float
from codesign.workloads.layers import Dense


class Norm(nn.Module):
    def __init__(self, affine: bool) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(32, elementwise_affine=affine)
        if affine:  # not the identity affine of a fresh module
            with torch.no_grad():
                self.ln.weight.copy_(1.0 + 0.5 * _x(32, seed=1))
                self.ln.bias.copy_(0.3 * _x(32, seed=2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_over_the_last_dim(run_net, affine):
    prep, exe = run_net(Norm(affine), (2.0 * _x(2, 8, 32) + 1.0,), min_sqnr_db=30.0)
    op = prep.network.op("layer_norm")
    assert op.kind == "layer_norm" and op.attrs["normalized_shape"] == (32,)
    assert (op.weight is not None) == affine and (op.bias is not None) == affine
    assert prep.plan.step_of("layer_norm").placement == "cpu"
    # the integer reference is the float layer norm of its dequantized int8 input, rounded
    x = prep.example
    q = exe.env[op.inputs[0]] * 2.0 ** -prep.qnet.frac[op.inputs[0]]
    want = quantize_array(ln_float(op, [q]), prep.qnet.frac["layer_norm"]).astype(int)
    diff = np.abs(exe.env["layer_norm"].astype(int) - want)
    assert x.shape == (2, 8, 32) and diff.max() <= 1 and np.mean(diff == 0) >= 0.99


def test_native_layer_norm_of_a_decomposed_export():
    """A core-aten export has native_layer_norm -> (out, mean, rstd): getitem 0 is the op. PT2E
    observes no tuple item: without a range the exponent holds the bound sqrt(D-1)·max|γ| + max|β|."""
    x = _x(2, 8, 32)
    gm = torch.export.export(Norm(True).eval(), (x,)).run_decompositions().module()
    net = walk(gm, "network 'ln'")
    (op,) = net.ops
    assert op.kind == "layer_norm" and op.name == "getitem" and op.attrs["eps"] == 1e-5
    np.testing.assert_allclose(run_float(net, x.numpy())["getitem"], Norm(True)(x).detach().numpy(), atol=1e-5)
    qnet = plan(net, {"x": float(x.abs().max())})
    assert qnet.frac["getitem"] == frac_bits(np.sqrt(31) * np.abs(op.weight).max() + np.abs(op.bias).max())


class Soft(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(x), dim=-1)


def test_softmax_over_the_last_dim(run_net):
    prep, _ = run_net(Soft(), (_x(1, 16, 32),), min_sqnr_db=25.0)
    assert prep.qnet.frac["softmax"] > 7 and prep.network.op("softmax").attrs["dim"] == 2


@pytest.mark.parametrize("frac_in", [2, 4, 6])
def test_softmax_integer_semantics_over_all_int8_inputs(frac_in):
    """One row holding all 256 int8 values: the exp table is round(exp(-d·2^-f)·2^16) of every
    distance d = max - q, and each output is within one step (1/128) of 128·softmax."""
    table = exp_table(frac_in)
    d = np.arange(256)
    assert table[0] == 2 ** EXP_BITS and np.all(np.diff(table) <= 0)
    np.testing.assert_array_equal(table, np.rint(np.exp(-d * 2.0 ** -frac_in) * 2 ** EXP_BITS))
    op = Op("s", "softmax", ("x",), (1, 256), {"dim": 1, "causal": False})
    q = np.arange(-128, 128, dtype=np.int8)[None]
    got = softmax_int(op, QParams(table=table), [q], 7).astype(int)
    p = softmax_float(op, [q * 2.0 ** -frac_in])
    e = table[127 - q.astype(int)]
    np.testing.assert_array_equal(got, np.minimum((256 * e + e.sum()) // (2 * e.sum()), 127))  # the definition
    assert np.max(np.abs(got - np.minimum(p * 128, 127))) <= 1.0
    assert got.dtype == int and got[0, -1] == np.clip(np.rint(128 * table[0] / table.sum()), 0, 127)


class TwoHeads(nn.Module):
    """bmm of two activations (N, T, K) x (N, K, P) made by two linears."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(32, 16), nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bmm(self.a(x), self.b(x))


def test_bmm_of_two_activations(run_net):
    prep, _ = run_net(TwoHeads(), (_x(2, 16, 32),), min_sqnr_db=25.0)
    op = prep.network.op("bmm")
    assert op.kind == "matmul" and op.attrs["contract"] == 16 and not op.attrs["transpose_b"]
    assert op.macs == 2 * 16 * 16 * 16
    step = prep.plan.step_of("bmm")
    assert step.placement == "cpu" and "matrix product, int8 dense" in step.reason


class Encoder(nn.Module):
    """A ViT encoder block, one head: LN -> q, k, v -> attention -> out -> +x -> LN -> MLP -> +."""

    def __init__(self, c: int = 32, hidden: int = 64, causal: bool = False) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.q, self.k, self.v, self.out = (nn.Linear(c, c) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(c, hidden), nn.Linear(hidden, c)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        a = F.scaled_dot_product_attention(self.q(h), self.k(h), self.v(h), is_causal=self.causal)
        x = x + self.out(a)
        return x + self.fc2(torch.relu(self.fc1(self.ln2(x))))


@pytest.mark.parametrize("causal", [False, True])
def test_encoder_block(run_net, causal):
    """(1, 16, 32) tokens: attention decomposed into scores matmul, softmax, A·V matmul; bit-exact."""
    prep, exe = run_net(Encoder(causal=causal), (_x(1, 16, 32),), min_sqnr_db=25.0)
    net = prep.network
    sdpa = "scaled_dot_product_attention"
    assert [net.op(n).kind for n in (f"{sdpa}_scores", f"{sdpa}_attn", sdpa)] == ["matmul", "softmax", "matmul"]
    scores = net.op(f"{sdpa}_scores")
    assert scores.attrs["transpose_b"] and scores.attrs["contract"] == 32 and scores.shape == (1, 16, 16)
    assert net.op(f"{sdpa}_attn").attrs["causal"] == causal
    assert prep.qnet.params[scores.name].mul == round(2 ** 15 / np.sqrt(32))
    if causal:  # row i attends to tokens 0..i only: the first token's output is its own value row
        np.testing.assert_array_equal(exe.env[f"{sdpa}_attn"][0, 0, 1:], 0)
    # every linear over the tokens was costed on VTA too (on pynq_1x16 the CPU wins at 32 channels)
    assert all("vta" in prep.plan.step_of(op.name).alternatives for op in net.ops if op.kind == "linear")


def test_encoder_block_linears_run_on_vta(run_net):
    """At 128 channels every linear over (1, 16, 128) tokens is cheaper on VTA: each runs as a
    1x1 conv over its 16 tokens as pixels (faster than the dense of 16 rows), bit-exact, with the ReLU and the first residual add (a (1, 16, 128) graph
    input read into ACC as 16 rows) fused; the second add is cheaper as a CPU pass (the plan's
    split_add)."""
    prep, exe = run_net(Encoder(128, 128), (_x(1, 16, 128),), min_sqnr_db=25.0)
    net = prep.network
    linears = [op.name for op in net.ops if op.kind == "linear"]
    assert len(linears) == 6 and all(prep.plan.step_of(n).placement == "vta" for n in linears)
    step = prep.plan.step_of("linear")
    assert step.transform == "tokens_as_pixels" and step.rewrite.original.spec == Dense(16, 128, 128).spec
    assert step.alternatives["vta:tokens_as_pixels"] < step.alternatives["vta"]
    assert prep.plan.step_of("add").ops == ("linear_3", "add") and prep.plan.step_of("add").residual == "x"
    assert prep.plan.step_of("relu").ops == ("linear_4", "relu")
    assert sum(r.placement == "vta" and r.bit_exact for r in exe.rows) == 8  # 6 linears, an add, a ReLU


def test_attention_intermediates_get_calibrated_ranges(run_net):
    """PT2E observes no scores or softmax inside the attention node: `quantize` takes their ranges
    from the float IR on the calibration data, the exponent an observer would give."""
    prep, exe = run_net(Encoder(), (_x(1, 16, 32),), min_sqnr_db=25.0)
    env = run_float(prep.network, prep.example)
    for name in ("scaled_dot_product_attention_scores", "scaled_dot_product_attention_attn"):
        assert prep.qnet.frac[name] == frac_bits(np.max(np.abs(env[name]))), name
    a = "scaled_dot_product_attention"
    err = exe.env[a] * 2.0 ** -prep.qnet.frac[a] - env[a]
    assert 10 * np.log10(np.sum(env[a] ** 2) / np.sum(err ** 2)) >= 27.0  # 21 dB with the worst-case scores


class Attn(nn.Module):
    def __init__(self, **kw) -> None:
        super().__init__()
        self.kw = kw
        self.register_buffer("mask", torch.ones(16, 16, dtype=torch.bool))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kw = dict(self.kw)
        if kw.pop("masked", False):
            kw["attn_mask"] = self.mask
        return F.scaled_dot_product_attention(x, x, x, **kw)


@pytest.mark.parametrize("kw, why", [({"masked": True}, "attention with attn_mask"),
                                     ({"dropout_p": 0.1}, r"attention with dropout_p=0\.1")])
def test_attention_it_cannot_represent_is_one_line(kw, why):
    with pytest.raises(ConfigError, match=rf"op aten\.scaled_dot_product_attention\.default at node "
                                          rf"'scaled_dot_product_attention' \(module <root>: Attn\) cannot be "
                                          rf"represented: {why}") as err:
        import_network(Attn(**kw), (_x(1, 16, 32),))
    assert "\n" not in str(err.value)


def test_matmul_of_a_2d_operand_is_one_line():
    class Outer(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ x

    with pytest.raises(ConfigError, match=r"op aten\.matmul\.default at node 'matmul' .*a product of 2-D and 2-D"):
        import_network(Outer(), (_x(4, 4),))
