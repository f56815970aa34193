"""The `vta` family's knobs and their values (`VtaSpace.make_knobs`)."""

from __future__ import annotations

import itertools

import numpy as np

from codesign.mapping.batch import (
    GEMM_LOOPS,
)
from codesign.schedule.features import N_CONFIG_FEATURES

PAIR_AXES = ("b", "h", "co", "w")
ORDERS: tuple[tuple[str, ...], ...] = tuple(itertools.permutations(PAIR_AXES))  # [0]: the template's
VTHREADS: tuple[str | None, ...] = (None, "h", "co", "w", "b")
N_THREADS = 2  # the templates' thread count ("VTA only supports 2 virtual threads" is TVM's lowering)
#: `n_threads` values: threads on the `vthread` axis ([0] = the templates' 2; docs/vta.md §7.3).
THREAD_COUNTS = (2, 3, 4, 8)
TILE_KNOBS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co")
#: The family's first knobs; every knob appended after them takes today's program at position 0,
#: so a knob dict (a record) without them means that value (`VtaSpace._knob_dict`).
BASE_KNOBS = TILE_KNOBS + ("order", "wgt_stationary", "vthread", "uop_fold")
#: The knobs that change only the GEMM micro-op kernel, and the rules that depend on them (with the
#: edge rules, `edge_rules`): the first pass of `valid_indices` leaves them out. `uop_preload` is not
#: one: no pass-A rule reads it, so it is part of each geometry (and of `sample_support`'s draws).
KERNEL_KNOBS = ("uop_fold", "uop_lift", "pad_skip")
#: `uop_lift` values: the GEMM_LOOPS indices lifted out of the micro-op kernel, outer to inner
#: (0: none; 1..6 one loop, as before pairs were added; then every pair).
LIFTS: tuple[tuple[int, ...], ...] = (((),) + tuple((i,) for i in range(len(GEMM_LOOPS)))
                                      + tuple(itertools.combinations(range(len(GEMM_LOOPS)), 2)))
_LIFT_COLS = np.array([list(c) + [-1] * (2 - len(c)) for c in LIFTS], dtype=np.int64)  # (22, 2), -1: none
#: `uop_preload` values: 0 the ring, 1 every kernel loaded once at the start, 2 = 1 with flat resets.
PRELOADS = (0, 1, 2)
#: (wgt_stationary, inp_stationary, acc_resident) combinations the second pass of `valid_indices`
#: tries (the others break `stationary_both` / `acc_resident_stationary`).
NESTS: tuple[tuple[int, int, int], ...] = ((0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 0, 2))
ACC_RESIDENT_MAX = 2

EXTRA_FEATURE_NAMES: tuple[str, ...] = (
    "pos_b", "pos_h", "pos_co", "pos_w",  # position of each pair loop, 0 outermost .. 1 innermost
    "wgt_stationary", "vt_h", "vt_co", "vt_w", "vt_b",
    "log2_wgt_bytes_loaded",  # WGT bytes over the layer with residency
    "log2_inp_loads",         # INP LOAD instructions over the layer
    "uop_fold_chosen",        # 1: the GEMM fold is a chosen pair, 0: the template's
    "edge_tile_frac",         # fraction of the output tiles that are edge tiles (smaller, own kernels)
    "edge_fill",              # output elements / (tiles x full tile elements): 1 when every size divides
    "inp_stationary",
    "log2_acc_slots",         # output tiles resident in ACC per thread (acc_resident)
    "pad_skip",               # the GEMM kernel skips the taps that read zero padding
    "log2_threads",           # log2 of the virtual threads (0: none)
    "log2_lift_insns",        # GEMM instructions per batch block and step (uop_lift: product of the lifted extents)
)
N_FEATURES = N_CONFIG_FEATURES + len(EXTRA_FEATURE_NAMES)
