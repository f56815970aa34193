"""Layers VTA offloads (`Conv2D`, `Dense`), their packing and reference, and built-in workloads."""

from codesign.workloads.layers import (
    CONV_FORM,
    DENSE_FORM,
    MAX_PAD,
    TRANSPOSE_FORM,
    Conv2D,
    Conv2DTranspose,
    Dense,
    Layer,
    parse_layer,
)
from codesign.workloads.networks import CpuOp, Workload
from codesign.workloads.torch_import import from_torch, get_workload
from codesign.workloads.zoo import ZOO

WORKLOADS = tuple(ZOO)  # the built-in (zoo) workload names

__all__ = [
    "CONV_FORM", "DENSE_FORM", "MAX_PAD", "TRANSPOSE_FORM", "Conv2D", "Conv2DTranspose", "Dense", "Layer", "parse_layer",
    "WORKLOADS", "ZOO", "CpuOp", "Workload", "from_torch", "get_workload",
]
