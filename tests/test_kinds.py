"""The op-kind registry (codesign.network.kinds): every kind declares what the flow needs, and a
kind added as one entry goes through import, quantization, placement and execution untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from codesign.errors import ConfigError
from codesign.network import REGISTRY, import_network
from codesign.network.kinds import BUILDERS, OpKind, base, get, register
from codesign.network.kinds.base import VTA_FORMS
from codesign.network.reference import run_float


def test_every_kind_declares_what_the_flow_needs():
    for name, kind in REGISTRY.items():
        assert kind.name == name and kind.doc and kind.label, name
        assert callable(kind.int_ref) and callable(kind.float_ref) and callable(kind.quant) and callable(kind.cpu), name
        assert kind.vta is None or kind.vta in VTA_FORMS, name
        assert all(BUILDERS.get(a) is kind.build for a in kind.aten) or kind.build is None, name


def test_unknown_kind_is_one_line():
    with pytest.raises(ConfigError, match="unknown op kind 'softplus'; allowed: .*conv2d"):
        get("softplus", "node 'x'")


class Neg(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(16, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.neg(self.c(x))


def test_one_entry_adds_a_kind_end_to_end(run_net):
    """`neg` is not a kind of the project: one `register` makes a network using it import,
    quantize, place (on the CPU, by its declared pass) and run bit-exact on the simulator."""
    x = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ConfigError, match=r"op aten\.neg\.default at node 'neg' \(module <root>: Neg\) cannot be "
                                          r"represented: the network IR has no kind for it"):
        import_network(Neg(), (x,))

    def build(w, node, op):
        w.add(node, "neg", (w.tensor(node.args[0], node),))

    register(OpKind("neg", "-x (saturating at 127)", ("neg",), build,
                    int_ref=lambda op, p, xs, f: np.clip(-xs[0].astype(np.int16), -128, 127).astype(np.int8),
                    float_ref=lambda op, xs: -xs[0], label="negation"))
    try:
        prep, exe = run_net(Neg(), (x,))
        step = prep.plan.step_of("neg")
        assert step.placement == "cpu" and "negation, bytes-bound pass" in step.reason
        assert "VTA has no lowering for neg" in step.reason
        assert prep.qnet.frac["neg"] == prep.qnet.frac[prep.network.op("neg").inputs[0]]  # keeps its input's scale
        env = run_float(prep.network, x.numpy())
        np.testing.assert_array_equal(env["neg"], -env[prep.network.op("neg").inputs[0]])
    finally:
        del base.REGISTRY["neg"], base.BUILDERS["neg"]


def test_small_cnn_through_the_shared_checks(run_net, small_cnn):
    torch.manual_seed(0)
    prep, _ = run_net(small_cnn(), (torch.randn(2, 1, 8, 8),))
    assert {op.kind for op in prep.network.ops} >= {"conv2d", "add", "relu", "linear", "max_pool2d"}


def test_sqnr_and_agreement_say_what_they_cover():
    from codesign.network.reference import agreement, sqnr_db

    ref = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert sqnr_db(ref, ref) == float("inf")
    assert sqnr_db(ref, ref * 1.1) == pytest.approx(20.0)  # noise 1/10 of the signal's amplitude
    one_class = agreement(np.array([[0.0, 1.0], [0.1, 0.9]]), np.array([[0.0, 1.0], [0.2, 0.8]]))
    assert one_class["top1_agreement"] == 1.0 and one_class["distinct_classes"] == 1


class Asym(nn.Module):
    """Inception's 1x7 / 7x1 convs: padding on one axis only."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(32, 32, (1, 7), padding=(0, 3))
        self.b = nn.Conv2d(32, 32, (7, 1), padding=(3, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def test_one_axis_padding_becomes_a_pad_op_and_the_conv_goes_to_vta(run_net):
    torch.manual_seed(0)
    prep, _ = run_net(Asym(), torch.randn(1, 32, 17, 17, generator=torch.Generator().manual_seed(0)))
    convs = [op for op in prep.network.ops if op.kind == "conv2d"]
    assert [op.attrs["padding"] for op in convs] == [(0, 0), (0, 0)]
    assert [prep.network.op(op.inputs[0]).kind for op in convs] == ["pad", "pad"]
    assert all(prep.plan.step_of(op.name).placement == "vta" for op in convs), \
        [prep.plan.step_of(op.name).reason for op in convs]


def test_docs_list_every_kind():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "op-kinds.md").read_text()
    assert [name for name in REGISTRY if f"| `{name}` |" not in doc] == []
