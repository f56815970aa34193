"""A clamp after a conv (ReLU6, hardtanh) rides in the conv's epilogue: the last MIN/MAX of the
fused program takes the clamp's bounds at the tensor's scale, bit-exact with the integer reference."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from codesign.evaluate.fused import Epilogue, epilogue_steps, reference_fused
from codesign.place.fusion import groups
from codesign.workloads import Conv2D


class ConvClamp(nn.Module):
    def __init__(self, act: nn.Module, residual: bool = False) -> None:
        super().__init__()
        self.c1, self.bn, self.act = nn.Conv2d(32, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), act
        self.c2, self.residual = nn.Conv2d(32, 32, 1), residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.bn(self.c1(x)))
        return self.act(self.c2(y) + x) if self.residual else self.c2(y)


def _example() -> torch.Tensor:
    return 2 * torch.randn(1, 32, 16, 16, generator=torch.Generator().manual_seed(1))


def test_relu6_and_hardtanh_fuse_into_the_conv_on_vta(run_net):
    for act in (nn.ReLU6(), nn.Hardtanh(-0.5, 0.75)):
        torch.manual_seed(0)
        prep, exe = run_net(ConvClamp(act), _example())
        clamp = next(op for op in prep.network.ops if op.kind == "clamp")
        step = prep.plan.step_of(clamp.name)
        assert step.placement == "vta" and step.ops[-1] == clamp.name, step.reason
        lo, hi = step.epilogue.clip
        assert hi < 127 and (lo == 0) == isinstance(act, nn.ReLU6)  # the clamp's bounds, not int8's
        assert exe.rows[[r.name for r in exe.rows].index(clamp.name)].bit_exact


def test_relu6_after_a_residual_add_joins_the_group(run_net):
    """conv -> add -> relu6 is one fusion group (the planner may still split the add off when the
    plain GEMM plus CPU passes is cheaper: it is here, and the network stays bit-exact)."""
    torch.manual_seed(0)
    prep, _ = run_net(ConvClamp(nn.ReLU6(), residual=True), _example())
    kinds = [[op.kind for op in g.ops] for g in groups(prep.network)[0]]
    assert ["conv2d", "add", "clamp"] in kinds


def test_clip_bounds_are_the_last_min_max():
    epi = Epilogue(shift=3, bias=True, relu=True, clip=(0, 48))
    steps = epilogue_steps(epi)
    assert [(s.op, s.imm) for s in steps[-2:]] == [("min", 48), ("max", 0)]
    layer = Conv2D(1, 16, 4, 4, 16, 1, 1, 1, 0)
    rng = np.random.default_rng(0)
    x, w = rng.integers(-128, 128, (1, 16, 4, 4), dtype=np.int8), rng.integers(-128, 128, (16, 16, 1, 1), dtype=np.int8)
    y = reference_fused(layer, epi, x, w, np.zeros(16, np.int32))
    assert y.min() >= 0 and y.max() <= 48 and (y == 48).any()
