"""A kernel kind one CPU has no record of borrows its ratio to spatial_pack from a CPU that
measured both, and says so: the Cortex-A53 (Ultra96) has no depthwise record, the A9 has one."""

from __future__ import annotations

import pytest

from codesign.cpu import ConvShape, layer_cost, shipped_model

DW = ConvShape(1, 32, 56, 56, 32, 3, 3, 1, 1, (1, 1, 1, 1), groups=32)


def test_a53_depthwise_borrows_the_a9_ratio():
    a9, a53 = shipped_model().params("cortex-a9"), shipped_model().params("cortex-a53")
    ratio = a9.gmacs["depthwise/float32"] / a9.gmacs["spatial_pack/float32"]
    rate, basis = a53.rate("depthwise", "int8")
    assert rate == pytest.approx(a53.gmacs["spatial_pack/int8"] * ratio)
    assert basis.startswith("assumed:") and "measured on cortex-a9" in basis
    cost = layer_cost(DW, "ultra96", "int8")
    assert cost.seconds > 0 and cost.basis == basis


def test_a_measured_kind_is_not_borrowed():
    a9 = shipped_model().params("cortex-a9")
    assert a9.rate("depthwise", "float32") == (a9.gmacs["depthwise/float32"], "measured")
