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
from codesign.workloads.networks import WORKLOADS, Workload, get_workload, lstm, resnet18, transformer

__all__ = [
    "CONV_FORM", "DENSE_FORM", "MAX_PAD", "TRANSPOSE_FORM", "Conv2D", "Conv2DTranspose", "Dense", "Layer", "parse_layer",
    "WORKLOADS", "Workload", "get_workload", "lstm", "resnet18", "transformer",
]
