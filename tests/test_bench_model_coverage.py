"""benchmarks/model_coverage.py: a model's row is measured end to end (placed, run bit-exact on
the simulator, VTA MAC share, per-op SQNR), and a model with an op the IR has no kind for yields a
row with the one-line reason instead of ending the benchmark."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn


class Tiny(nn.Module):
    """conv (VTA-sized: 16 channels) + ReLU + residual add, average pool, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x)) + x
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class Unsupported(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)  # no kind in the IR (and none planned)


def _tiny():
    torch.manual_seed(0)
    return Tiny().eval(), (torch.randn(1, 16, 8, 8),)


@pytest.fixture(scope="module")
def mc(bench_module):
    return bench_module("model_coverage")


def test_row_of_a_model_that_runs(mc):
    row = mc.measure("tiny", _tiny, [mc.TARGETS["pynq"]])
    assert "error" not in row, row
    t = row["targets"]["pynq"]
    assert t["bit_exact"] is True and t["mismatched_ops"] == []
    assert 0.0 <= t["vta_mac_share"] <= 1.0
    assert t["latency_ms"] > 0 and t["vta_steps"] + t["cpu_ops"] > 0
    assert row["ops"] == 6 and row["gmacs"] >= 0 and row["params"] == 16 * 16 * 9 + 16 + 16 * 16 + 16
    assert math.isfinite(row["lowest_op_sqnr_db"]) and row["lowest_sqnr_op"]
    line = mc.progress(row)
    assert "pynq" in line and "bit-exact yes" in line
    assert "| tiny |" in mc.markdown([row], ["pynq"])


def test_lowest_sqnr_reuses_the_run_reference_exactly(mc):
    from codesign.network import quantize
    from codesign.network.reference import run_int

    module, inputs = _tiny()
    q = quantize(module, inputs, None, "tiny")
    x = inputs[0].numpy().astype(np.float32)
    assert mc.lowest_sqnr(q, x, run_int(q, x)) == mc.lowest_sqnr(q, x, None)


def test_unsupported_op_is_a_one_line_row(mc):
    row = mc.measure("bad", lambda: (Unsupported().eval(), (torch.randn(1, 16, 4, 4),)), [mc.TARGETS["pynq"]])
    assert row["stage"] == "import" and row["error_type"] == "ConfigError"
    assert "no kind for it" in row["error"] and "cumsum" in row["error"] and "\n" not in row["error"]
    assert "targets" not in row and row["wall_s"] >= 0
    assert "import: " in mc.markdown([row], ["pynq"]) and "failed at import" in mc.progress(row)


def test_a_failing_factory_is_a_row(mc):
    def broken():
        raise RuntimeError("weights missing\nsecond line")

    row = mc.measure("broken", broken, [mc.TARGETS["pynq"]])
    assert (row["stage"], row["error"], row["error_type"]) == ("build", "weights missing", "RuntimeError")
