"""Parameters used as activations and values computed from parameters alone: folded once at import
(Swin's relative position bias gathered by an index buffer, ViT's class token expanded to the
batch) and, where an activation needs them, a `constant` op; torch.roll (Swin's shifted windows)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from codesign.errors import ConfigError
from codesign.network import import_network


class Tokens(nn.Module):
    """ViT's prologue without the conv: a class token cat to the tokens, a positional embedding added,
    a bias gathered from a table by an index buffer (Swin), a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, 32))
        self.pos = nn.Parameter(torch.randn(1, 17, 32) * 0.1)
        self.table = nn.Parameter(torch.randn(9, 32) * 0.1)
        self.register_buffer("index", torch.tensor([0, 3, 8, 1, 4, 2, 7, 5, 6, 0, 1, 2, 3, 4, 5, 6, 7]))
        self.fc = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = x + self.table[self.index].unsqueeze(0)
        return self.fc(torch.roll(x, shifts=3, dims=1))


def test_constants_fold_and_roll_runs_bit_exact(run_net):
    torch.manual_seed(0)
    prep, _ = run_net(Tokens(), torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(1)))
    kinds = [op.kind for op in prep.network.ops]
    assert kinds.count("constant") == 1 and "roll" in kinds  # the expanded class token; the gather folded
    assert "index" not in " ".join(kinds)


class RollBatch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.roll(x, 1, 0)


def test_rolling_the_batch_is_one_line():
    with pytest.raises(ConfigError, match=r"op aten\.roll\.default at node 'roll' .*a roll of the batch axis"):
        import_network(RollBatch(), (torch.randn(2, 4),))
