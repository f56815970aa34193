"""A CPU figure built on a bandwidth the calibration did not determine says so: the shipped
Cortex-A9 fit left `bytes_per_s` at its search bound (its records are compute-bound convs), so
the memory term of a weight-bound dense on PYNQ-Z1 is an assumption, named in the cost and in the
placement's reason; the Cortex-A53's fitted bandwidth stays "measured"."""

from __future__ import annotations

import pytest

from codesign.cpu import layer_cost
from codesign.cpu.model import CpuParams, shipped_model
from codesign.hw.config import HwConfig
from codesign.place import CPU, chooser, plan_network
from codesign.workloads import Dense

FC = Dense(1, 2048, 1000)


def test_the_a9_bandwidth_is_assumed_and_the_a53_one_measured():
    a9, a53 = shipped_model().params("cortex-a9"), shipped_model().params("cortex-a53")
    assert "bytes_per_s" in a9.at_bound and "bytes_per_s" not in a53.at_bound
    pynq, ultra = layer_cost(FC, "pynq-z1", "int8"), layer_cost(FC, "ultra96", "int8")
    assert pynq.memory_basis.startswith("assumed:") and f"{a9.bytes_per_s / 1e9:.2f} GB/s" in pynq.memory_basis
    assert ultra.memory_basis == "measured"
    # the figure itself is unchanged: call overhead + MACs at the rate + bytes at bytes_per_s
    assert pynq.seconds == pytest.approx(pynq.overhead_s + pynq.compute_s + pynq.memory_s)


def test_a_parameter_file_without_a_fit_record_is_measured():
    p = CpuParams.from_dict("cortex-a9", {"call_overhead_s": 1e-6, "bytes_per_s": 1e9, "gmacs": {}})
    assert p.at_bound == () and p.bandwidth_basis == "measured"


def test_the_placement_reason_of_a_cpu_dense_names_the_assumed_bandwidth():
    import torch
    from torch import nn

    from codesign.network import import_network

    torch.manual_seed(0)
    net = import_network(nn.Linear(2048, 1000),
                         (torch.randn(1, 2048),), "fc")
    hw = HwConfig.resolve("pynq_1x16")
    step = next(s for s in plan_network(net, hw, "pynq-z1", chooser(hw)).steps if s.kind.startswith("linear"))
    assert step.placement == CPU, step.reason  # weight-bound at batch 1: the A9 is predicted cheaper
    assert "memory traffic at a bandwidth assumed: 2.10 GB/s" in step.reason
