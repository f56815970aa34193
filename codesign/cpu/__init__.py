"""The CPU cost model (docs/cpu-model.md): what a layer or pass costs on a board's ARM CPU.

`work` counts MACs and bytes per kernel kind; `model` turns them into seconds with the few
parameters fitted to real measurements (`sim/cpu_params.json`). Imports hw and workloads only.
"""

from codesign.cpu.model import (
    SHIPPED_PARAMS,
    CpuCost,
    CpuModel,
    CpuParams,
    best_conv_cost,
    cpu_of,
    layer_cost,
    predict,
    rate_key,
    shipped_model,
)
from codesign.cpu.work import (
    DENSE,
    DEPTHWISE,
    DTYPES,
    KINDS,
    PASS,
    SPATIAL_PACK,
    TRANSPOSE,
    WINOGRAD,
    ConvShape,
    CpuWork,
    conv_work,
    dense_work,
    pass_work,
    shape_of,
    tensor_pass,
)

__all__ = ["SHIPPED_PARAMS", "CpuCost", "CpuModel", "CpuParams", "best_conv_cost", "cpu_of", "layer_cost",
           "predict", "rate_key", "shipped_model", "DENSE", "DEPTHWISE", "DTYPES", "KINDS", "PASS", "SPATIAL_PACK", "TRANSPOSE",
           "WINOGRAD", "ConvShape", "CpuWork", "conv_work", "dense_work", "pass_work", "shape_of", "tensor_pass"]
