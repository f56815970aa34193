"""Fixed-size numeric features of a schedule config, a layer and a hardware config (float32),
for learned tuners and cost models. Counts and sizes enter as log2 (values >= 1), so they share
a scale across layers and configs; utilizations are fractions of the buffer depth.
"""

from __future__ import annotations

import numpy as np

from codesign.hw.config import HwConfig
from codesign.mapping.batch import MappingBatch
from codesign.workloads.layers import Conv2D, Layer

CONFIG_FEATURE_NAMES: tuple[str, ...] = (
    "log2_tile_b",          # batch blocks per tile
    "log2_tile_h",          # output rows per tile
    "log2_tile_w",          # output columns per tile
    "log2_tile_ci",         # input-channel blocks per load step
    "log2_tile_co",         # output-channel blocks per tile
    "oc_nthread",           # virtual threads over output channels (1 or 2)
    "h_nthread",            # virtual threads over rows (1 or 2)
    "log2_n_tiles",         # output tiles in the layer
    "log2_ci_steps",        # reduction steps per tile
    "acc_util",             # acc elements x threads / ACC depth
    "inp_util",             # inp elements x threads / INP depth
    "wgt_util",             # wgt elements x threads / WGT depth
    "log2_uops",            # unrolled micro-ops of the GEMM kernel
    "log2_iter_out",        # GEMM iter_out
    "log2_iter_in",         # GEMM iter_in
    "log2_gemm_insns",      # accumulate GEMM instructions in the layer
    "log2_inp_bytes",       # INP bytes loaded over the layer (halo reloads included)
    "log2_wgt_bytes",       # WGT bytes loaded over the layer (reloaded per tile)
    "log2_out_bytes",       # OUT bytes stored
    "log2_intensity",       # MACs / DMA bytes of the layer under this tiling
    "log2_halo",            # input elements loaded per tile / output positions per tile
    "log2_dma_insns",       # LOAD INP/WGT + STORE instructions
    "log2_macs_per_gemm",   # BATCH*BLOCK_IN*BLOCK_OUT MACs x uops x iters per GEMM instruction
    "log2_compute_per_load",  # GEMM cycles per step / bus cycles of that step's loads
)
N_CONFIG_FEATURES = len(CONFIG_FEATURE_NAMES)

LAYER_FEATURE_NAMES: tuple[str, ...] = (
    "is_conv2d", "log2_batch", "log2_in_channels", "log2_height", "log2_width", "log2_out_channels",
    "kernel_h", "kernel_w", "stride", "padding", "log2_out_height", "log2_out_width", "log2_macs",
)
N_LAYER_FEATURES = len(LAYER_FEATURE_NAMES)

HW_FEATURE_NAMES: tuple[str, ...] = (
    "log2_batch", "log2_block_in", "log2_block_out", "log2_uop_depth", "log2_inp_depth",
    "log2_wgt_depth", "log2_acc_depth", "log2_clock_mhz", "log2_bus_bytes",
)
N_HW_FEATURES = len(HW_FEATURE_NAMES)


def _lg(x: np.ndarray | float) -> np.ndarray:
    return np.log2(np.maximum(np.asarray(x, dtype=np.float64), 1.0))


def config_features(t: MappingBatch) -> np.ndarray:
    """(n, N_CONFIG_FEATURES) float32 for the configs in `t`."""
    hw = t.hw
    steps = t.n_tiles * t.ci_steps
    inp_bytes = steps * t.inp_sram * hw.inp_elem_bytes
    wgt_bytes = steps * t.wgt_sram * hw.wgt_elem_bytes
    out_bytes = t.n_tiles * t.acc_sram * hw.out_elem_bytes
    g = t.geo
    macs = float(g.b * g.co * g.out_h * g.out_w * g.ci * g.kh * g.kw) * hw.macs_per_cycle
    gemm_uops = t.gemm["n_uops"] * t.gemm["iter_out"] * t.gemm["iter_in"]
    step_bus = (t.inp_sram * hw.inp_elem_bytes + t.wgt_sram * hw.wgt_elem_bytes) / hw.bus_bytes
    cols = [
        _lg(t.tile_b), _lg(t.tile_h), _lg(t.tile_w), _lg(t.tile_ci), _lg(t.tile_co),
        t.oc_nthread, t.h_nthread, _lg(t.n_tiles), _lg(t.ci_steps),
        t.acc_sram * t.nthreads / hw.acc_depth, t.inp_sram * t.nthreads / hw.inp_depth,
        t.wgt_sram * t.nthreads / hw.wgt_depth,
        _lg(t.gemm["n_uops"]), _lg(t.gemm["iter_out"]), _lg(t.gemm["iter_in"]),
        _lg(steps * t.tile_b), _lg(inp_bytes), _lg(wgt_bytes), _lg(out_bytes),
        np.log2(macs / (inp_bytes + wgt_bytes + out_bytes)),
        _lg(t.hin_t * t.win_t / (t.tile_h * t.tile_w)),
        _lg(2 * steps + t.n_tiles),
        _lg(gemm_uops * hw.macs_per_cycle),
        np.log2(gemm_uops * t.tile_b / step_bus),
    ]
    return np.stack([np.broadcast_to(np.asarray(c, dtype=np.float64), (t.n,)) for c in cols],
                    axis=1).astype(np.float32)


def layer_features(layer: Layer) -> np.ndarray:
    """float32 vector of length N_LAYER_FEATURES (dense: H = W = KH = KW = stride = 1, pad 0)."""
    layer = layer.schedule_view()  # grouped / transposed convs: the conv their template tiles
    if isinstance(layer, Conv2D):
        vals = [1.0, _lg(layer.batch), _lg(layer.in_channels), _lg(layer.height), _lg(layer.width),
                _lg(layer.out_channels), layer.kernel_h, layer.kernel_w, layer.stride, layer.padding,
                _lg(layer.out_height), _lg(layer.out_width), _lg(layer.macs)]
    else:
        vals = [0.0, _lg(layer.batch), _lg(layer.in_features), 0.0, 0.0, _lg(layer.out_features),
                1, 1, 1, 0, 0.0, 0.0, _lg(layer.macs)]
    return np.array([float(v) for v in vals], dtype=np.float32)


def hw_features(hw: HwConfig) -> np.ndarray:
    """float32 vector of length N_HW_FEATURES."""
    vals = [hw.LOG_BATCH, hw.LOG_BLOCK_IN, hw.LOG_BLOCK_OUT, hw.log_uop_depth, hw.log_inp_depth,
            hw.log_wgt_depth, hw.log_acc_depth, float(np.log2(float(hw.clock_mhz))), float(np.log2(hw.bus_bytes))]
    return np.array([float(v) for v in vals], dtype=np.float32)
