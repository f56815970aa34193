"""Tile plans of the grouped and transposed conv templates (docs/vta.md §7.6), built from the
conv2d plan of their `schedule_view()` conv (`layout.tile_plan`) with what differs:

- `group_conv2d_packed.vta`: the plan of one group's conv (CI/groups input channels against all
  output channels: weights, GEMM kernels, STORE are exactly that conv's). Only the INP load moves:
  the tile of output blocks [co0, co0 + tile_co) reads input channel blocks from
  `group * CI_per_group`, group = co0 // (CO/groups) (a co tile lies in one group,
  `schedule.templates`), and the data tensor has all CI blocks per image.
- `conv2d_transpose_packed.vta`: the plan of the stride-1 conv over the dilated, padded input
  (the packed data region holds the dilated input, `Conv2DTranspose.pack_data`) with the GEMM
  kernel replaced by the unfolded, zero-skipping one (`schedule.templates.transpose_uops`).

Validity is the layer's own space's (`ScheduleSpace.why_invalid`: the conv2d rules on the
template-adjusted geometry, then the template's rules in `schedule.templates`); nothing here
restates a rule.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from codesign.errors import InvalidSchedule
from codesign.hw.config import HwConfig
from codesign.schedule.knobs import Config, KnobValue
from codesign.schedule.space import get_space
from codesign.schedule.templates import GROUP_TEMPLATE, TRANSPOSE_TEMPLATE, transpose_uops
from codesign.vta.layout import Dma2D, Kernel, TilePlan, knob_dict, tile_plan
from codesign.workloads.layers import Conv2D, Conv2DTranspose, Layer


def _inner(value: KnobValue) -> int:
    return int(value[-1]) if isinstance(value, (list, tuple)) else int(value)


def _group_plan(layer: Conv2D, knobs: dict[str, KnobValue], hw: HwConfig) -> TilePlan:
    view = layer.schedule_view()
    plan = tile_plan(view, knobs, hw)
    co_pg = layer.out_channels // hw.block_out // layer.groups
    ci_pg = view.in_channels // hw.block_in
    ci_all = layer.in_channels // hw.block_in
    # Recover each tile's first output block from its STORE offset (b0, co0 * tco, h, w) and
    # shift the INP offset from the one-group layout to the all-groups layout.
    OH, OW, cob = layer.out_height, layer.out_width, layer.out_channels // hw.block_out
    plane_out = OH * OW
    co_first = (plan.store.dram // plane_out) % cob          # (P, T)
    b0 = plan.store.dram // (plane_out * cob)
    group = co_first // co_pg
    plane_in = layer.height * layer.width
    shift = (b0 * (ci_all - ci_pg) + group * ci_pg) * plane_in  # (P, T)
    inp = plan.inp
    inp = Dma2D(inp.dram + shift[:, None, :], inp.y_size, inp.x_size, inp.x_stride, inp.y_pad_0,
                inp.y_pad_1, inp.x_pad_0, inp.x_pad_1)
    return replace(plan, inp=inp, inp_elems=plan.inp_elems // ci_pg * ci_all)


def _transpose_plan(layer: Conv2DTranspose, knobs: dict[str, KnobValue], hw: HwConfig) -> TilePlan:
    # The micro-op rules of the view conv's kernel do not apply: its GEMM kernel is replaced
    # (the layer's own space checked the replacement, `schedule.templates.adapt`).
    plan = tile_plan(layer.schedule_view(), knobs, hw, check_hazard=False)
    th, tw, tci, tco = (_inner(knobs[k]) for k in ("tile_h", "tile_w", "tile_ci", "tile_co"))
    uops = transpose_uops(layer, th, tw, tci, tco)
    if uops.shape[0] == 0:
        uops = np.zeros((1, 3), dtype=np.int64)  # pragma: no cover - every tile has a real pixel
    return replace(plan, gemm=Kernel.from_uops(uops))


def plan_for(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig) -> TilePlan:
    """The `TilePlan` of any template: conv2d/dense via `layout.tile_plan`, group and transpose here
    (after their own space's validity rules: InvalidSchedule names the first one broken)."""
    template = getattr(layer, "template", None)
    if template not in (GROUP_TEMPLATE, TRANSPOSE_TEMPLATE):
        return tile_plan(layer, config, hw)
    knobs = knob_dict(config)
    why = get_space(layer, hw).why_invalid(knobs)
    if why is not None:
        raise InvalidSchedule(why)
    return _group_plan(layer, knobs, hw) if template == GROUP_TEMPLATE else _transpose_plan(layer, knobs, hw)
