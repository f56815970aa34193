"""Can VTA run this layer on this hardware? A layer is offloaded when its shape fits the template
(`Layer.structural_reason`) and at least one schedule of its space passes every validity rule;
otherwise it stays on the CPU, with the reason."""

from __future__ import annotations

from codesign.hw.config import HwConfig
from codesign.schedule.space import get_space
from codesign.workloads.layers import Layer
from codesign.workloads.networks import Workload


def unsupported_reason(layer: Layer, hw: HwConfig) -> str | None:
    """Why VTA cannot run `layer` on `hw` (it then runs on the CPU), or None."""
    reason = layer.structural_reason(hw)
    if reason is not None:
        return reason
    space = get_space(layer, hw)
    if len(space.valid_indices()):
        return None
    return f"no schedule fits {hw.name}: even the smallest tiling fails ({space.why_invalid(space.get(0))})"


def partition(workload: Workload, hw: HwConfig) -> tuple[list[tuple[Layer, int]], list[tuple[Layer, int, str]]]:
    """(offloaded (layer, count), cpu (layer, count, reason)) of `workload` on `hw`, over unique layers."""
    vta, cpu = [], []
    for layer, count in workload.unique_layers():
        reason = unsupported_reason(layer, hw)
        if reason is None:
            vta.append((layer, count))
        else:
            cpu.append((layer, count, reason))
    return vta, cpu


__all__ = ["partition", "unsupported_reason"]
