"""What `group_conv2d_packed.vta` and `conv2d_transpose_packed.vta` add to the conv2d tile
geometry (docs/vta.md §7.6; the inferences are written up in docs/vta.md "Grouped and transposed
convolutions").

Both templates define the same 7 knobs as conv2d_packed over the axes of their
`layer.schedule_view()` conv (`knobs.split_extents`), and their tiles follow that conv's geometry
(`codesign.mapping.batch.MappingBatch`). On top of it:

- group conv: the input channel-block index of output block c_o is
  `c_o // (CO/groups) * CI_per_group + k_o` (docs/vta.md §7.6). A co tile must therefore lie inside one group
  (`tile_co[1]` divides the output blocks per group), so one INP load serves the whole tile; and
  `tile_b[1] = 1` (every tophub group-conv record has it; the unpadded INP fold of a batch tile
  would stride over all groups' channels).
- conv2d transpose: the conv stage is split h by 4 and w by 2 and its micro-op loops are, outer
  to inner, (k_o.inner, x_j, x_co, x_i, x_jj, d_j, d_i, x_ii); `inject_conv2d_transpose_skip`
  wraps each micro-op in the condition that its input is not an inserted zero, so
  `fold_uop_loop` folds nothing: the kernel is every non-skipped micro-op, iter_out = iter_in = 1.
  The skip condition depends on the tile origin modulo the stride; the runtime records one
  kernel per call site, so every tile must start on a stride multiple: `tile_h % stride == 0`
  unless there is one row tile, the same for w.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codesign.errors import ConfigError
from codesign.mapping.batch import GEMM_LOOPS, MappingBatch, transpose_uops
from codesign.mapping.mapping import AluOp
from codesign.schedule.validity import Rule
from codesign.workloads.layers import Layer

CLIP_MAX = 127  # int8 clip of the tuning template (docs/vta.md §7.3 "ALU epilogue")


def clip_epilogue(shift: int) -> tuple[AluOp, ...]:
    """The template's requantization: shift right, clip to [0, 127] (docs/vta.md §7.3)."""
    return AluOp("shr", shift), AluOp("min", CLIP_MAX), AluOp("max", 0)


@dataclass(frozen=True)
class Template:
    """One AutoTVM VTA template (docs/vta.md §7.5-7.6): its name as logs and records spell it, and
    what the schedule code decides by it (instead of comparing names)."""

    name: str
    grouped: bool = False  # one group's conv: a co tile lies in one group, no co edge tiles
    transposed: bool = False  # a stride-1 conv over the dilated input, the zero-skipping kernel
    agent_trained: bool = False  # the shipped tuning agents were trained on its layers

    @property
    def edge_axes(self) -> tuple[str, ...]:
        """Axes whose tile sizes may leave edge tiles (`edge_rules.with_edges`)."""
        if self.transposed:
            return ()
        return ("h", "w", "ci") if self.grouped else ("h", "w", "co", "ci")


CONV2D = Template("conv2d_packed.vta", agent_trained=True)
DENSE = Template("dense_packed.vta", agent_trained=True)
GROUP_CONV2D = Template("group_conv2d_packed.vta", grouped=True)
CONV2D_TRANSPOSE = Template("conv2d_transpose_packed.vta", transposed=True)
TEMPLATES: dict[str, Template] = {t.name: t for t in (CONV2D, DENSE, GROUP_CONV2D, CONV2D_TRANSPOSE)}
GROUP_TEMPLATE = GROUP_CONV2D.name
TRANSPOSE_TEMPLATE = CONV2D_TRANSPOSE.name


def template_of(layer: Layer | str | None) -> Template:
    """The `Template` of a layer (or of a template name); an unknown one is a ConfigError naming
    the templates there are."""
    name = layer if isinstance(layer, str) or layer is None else getattr(layer, "template", None)
    t = TEMPLATES.get(name)  # type: ignore[arg-type]
    if t is None:
        raise ConfigError(f"template {name!r} is not supported (allowed: {', '.join(TEMPLATES)})")
    return t


def _hazard(uops: np.ndarray) -> bool:
    d = uops[:, 0]
    return bool(d.size > 1 and (np.any(d[1:] == d[:-1]) or (d.size > 2 and np.any(d[2:] == d[:-2]))))


def adapt(layer: Layer, t: MappingBatch) -> MappingBatch:
    """Replace the GEMM fold of a transposed conv by its unfolded, zero-skipping kernel (uop
    count and dst hazard per config); other templates are returned unchanged."""
    if not template_of(layer).transposed:
        return t
    keys = np.stack([t.tile_h, t.tile_w, t.tile_ci, t.tile_co], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    counts = np.empty(len(uniq), dtype=np.int64)
    hazards = np.empty(len(uniq), dtype=bool)
    for i, (th, tw, tci, tco) in enumerate(uniq.tolist()):
        uops = transpose_uops(layer, th, tw, tci, tco)
        counts[i] = max(1, uops.shape[0])
        hazards[i] = _hazard(uops)
    inverse = inverse.reshape(-1)
    one = np.ones(t.n, dtype=np.int64)
    t.gemm = {"loops": np.zeros((t.n, len(GEMM_LOOPS), 4), dtype=np.int64),
              "roles": np.zeros((t.n, len(GEMM_LOOPS)), dtype=np.int64),
              "iter_out": one, "iter_in": one, "n_uops": counts[inverse], "hazard": hazards[inverse]}
    return t


def rules(layer: Layer, t: MappingBatch) -> list[Rule]:
    """The template's own validity rules (after the conv2d rules of `validity.check`)."""
    out: list[Rule] = []
    n = t.n
    tmpl = template_of(layer)
    if tmpl.grouped:
        co_per_group = t.geo.co // layer.groups
        out.append(Rule("group_tile_co", np.broadcast_to(co_per_group % t.tile_co == 0, (n,)), lambda i: (
            f"group conv: a co tile of {t.tile_co[i]} blocks crosses a group boundary ({co_per_group} "
            f"output blocks per group; tile_co[1] must divide it)")))
        out.append(Rule("group_tile_b", np.broadcast_to(t.tile_b == 1, (n,)), lambda i: (
            f"group conv: tile_b[1]={t.tile_b[i]}, must be 1")))
    elif tmpl.transposed:
        s = layer.stride
        for axis, tile, tiles in (("h", t.tile_h, t.h_tiles), ("w", t.tile_w, t.w_tiles)):
            ok = np.broadcast_to((tile % s == 0) | (tiles == 1), (n,))
            out.append(Rule(f"transpose_phase_{axis}", ok, lambda i, axis=axis, tile=tile, tiles=tiles: (
                f"conv2d transpose: tile_{axis}={tile[i]} is not a multiple of the stride {s} and there are "
                f"{tiles[i]} {axis} tiles, so the zero-skip pattern would differ between tiles")))
    return out


def mask(layer: Layer, t: MappingBatch) -> np.ndarray:
    ok = np.ones(t.n, dtype=bool)
    for rule in rules(layer, t):
        ok &= rule.ok
    return ok


def first_failure(layer: Layer, t: MappingBatch, i: int = 0) -> str | None:
    for rule in rules(layer, t):
        if not rule.ok[i]:
            return rule.message(i)
    return None
