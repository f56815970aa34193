"""`VtaSpace`: the `vta` family's space of one layer on one hardware config: its knobs, each
config's batch and features; rules, enumeration and sampling are mixed in."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from codesign.errors import ConfigError
from codesign.mapping.batch import (
    FOLD_PAIRS,
    MappingBatch,
    dst_hazard,
)
from codesign.mapping.mapping import Mapping
from codesign.schedule import edge_rules, templates
from codesign.schedule.features import CONFIG_FEATURE_NAMES, config_features
from codesign.schedule.indexed import KnobSpace
from codesign.schedule.knobs import Config, Knob, KnobValue, make_knobs
from codesign.schedule.vta.batch import _POS, VtaBatch
from codesign.schedule.vta.enumerate import EnumerateMixin
from codesign.schedule.vta.kernels import apply_flat_reset, apply_fold, apply_pad_skip
from codesign.schedule.vta.knobs import (
    _LIFT_COLS,
    ACC_RESIDENT_MAX,
    BASE_KNOBS,
    KERNEL_KNOBS,
    LIFTS,
    N_THREADS,
    ORDERS,
    PAIR_AXES,
    PRELOADS,
    THREAD_COUNTS,
    TILE_KNOBS,
    VTHREADS,
)
from codesign.schedule.vta.producer import produce
from codesign.schedule.vta.rules import RulesMixin
from codesign.schedule.vta.sample import SampleMixin


class VtaSpace(RulesMixin, EnumerateMixin, SampleMixin, KnobSpace):
    """All `vta`-family schedules of `layer` on `hw` (module docstring)."""

    family = "vta"

    @property
    def coupled_knobs(self) -> tuple[tuple[int, ...], ...]:
        """Knob positions a search should move together: the GEMM kernel's knobs (`KERNEL_KNOBS`)
        exclude each other (pad_skip wants uop_fold = uop_lift = 0), so a best point with a chosen
        fold is two or three one-knob moves, all invalid, away from its pad_skip twin."""
        names = [k.name for k in self.knobs]
        return (tuple(names.index(k) for k in KERNEL_KNOBS),)

    def _knob_dict(self, config: object) -> dict[str, KnobValue]:
        """The knobs of `config`; appended knobs it lacks (records written before they existed)
        take their position-0 value, the program it was recorded with."""
        knobs = getattr(config, "knobs", config)
        if isinstance(knobs, dict):
            missing = {k.name: k.candidates[0] for k in self.knobs if k.name not in knobs and k.name not in BASE_KNOBS}
            if missing:
                config = {**knobs, **missing}
        return super()._knob_dict(config)

    def make_knobs(self) -> tuple[Knob, ...]:
        tiles = tuple(edge_rules.with_edges(k, self.layer) for k in make_knobs(self.layer, self.hw)
                      if k.name in TILE_KNOBS)
        return tiles + (
            Knob("order", "ot", tuple(range(len(ORDERS)))),
            Knob("wgt_stationary", "ot", (0, 1)),
            Knob("vthread", "ot", tuple(range(len(VTHREADS)))),
            Knob("uop_fold", "ot", tuple(range(len(FOLD_PAIRS) + 1))),
            Knob("inp_stationary", "ot", (0, 1)),
            Knob("acc_resident", "ot", tuple(range(ACC_RESIDENT_MAX + 1))),
            Knob("pad_skip", "ot", (0, 1)),
            Knob("n_threads", "ot", THREAD_COUNTS),
            Knob("uop_lift", "ot", tuple(range(len(LIFTS)))),
            Knob("uop_preload", "ot", PRELOADS),
            Knob("early_epilogue", "ot", (0, 1)))

    # -- geometry and validity -----------------------------------------------------------------
    def batch(self, indices: np.ndarray, geometry: MappingBatch | None = None) -> VtaBatch:
        """Knob values and tile geometry of the configs `indices` (the one place they are built);
        `geometry`: their tile geometry already built, with the template's kernels (a `take` of
        configs with the same tiles and threads, `valid_indices`)."""
        pos = self.positions_of(indices)
        v = {k.name: self._values[j][pos[:, j]] for j, k in enumerate(self.knobs)}
        vt = v["vthread"]
        nt = np.where(vt > 0, v["n_threads"], 1)
        if geometry is None:
            geo = {name: v[name] for name in TILE_KNOBS if name in v}
            geo["oc_nthread"] = nt
            t = templates.adapt(self.layer, MappingBatch(self._geo, self.hw, geo))
            t.patterns()  # every DMA pattern in one pass (the rules and the producer's rows read all three)
        else:
            t = geometry
        lift, lift_loop, lift_ok = self._lift(t, v["uop_lift"])
        fold = v["uop_fold"]
        transpose = self.tmpl.transposed
        fold_ok = apply_fold(t, fold) if not transpose else fold == 0
        ps = v["pad_skip"]
        ps_ok = (ps == 0) | apply_pad_skip(t, ps, fold, transpose)
        pre = v["uop_preload"]
        apply_flat_reset(t, pre == 2)
        return VtaBatch(t, v["order"], v["wgt_stationary"], vt, fold, fold_ok, v["inp_stationary"], v["acc_resident"],
                        ps, ps_ok, nt, pos[:, self.knob_names.index("n_threads")], lift, lift_loop, lift_ok, pre,
                        v["early_epilogue"])

    def _lift(self, t: MappingBatch, lift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Lift the loops `LIFTS[lift]` out of each config's GEMM kernel (in place on `t.gemm`:
        the kernel without them, folded as the template folds; the dst hazard of a lifted config is
        that of its instruction's whole stream). Returns (lift, lifted loop rows, lift_ok)."""
        loops = t.gemm["loops"]
        lift_loop = np.zeros((t.n, 2, 4), dtype=np.int64)
        lift_loop[..., 0] = 1
        lifted = lift > 0
        lift_ok = ~lifted
        if not lifted.any() or self.tmpl.transposed:  # its kernel is no loop nest
            return lift, lift_loop, lift_ok
        loops = loops.copy()
        live = lifted.copy()
        for slot in range(2):
            col = _LIFT_COLS[lift, slot]
            rows = np.flatnonzero(col >= 0)
            lift_loop[rows, slot] = loops[rows, col[rows]]
            live[rows] &= lift_loop[rows, slot, 0] > 1
            loops[rows, col[rows], 0] = 1
        lift_ok = lift_ok | live
        fold = MappingBatch._fold(loops)
        roles = fold["roles"]
        stream = np.argsort(np.where(roles == 1, -2, np.where(roles == 2, -1, np.arange(loops.shape[1]))),
                            axis=1, kind="stable")
        s_ext = np.take_along_axis(loops[..., 0], stream, axis=1)
        s_dst = np.take_along_axis(loops[..., 1], stream, axis=1)
        fold["hazard"] = np.where(lifted, dst_hazard(s_ext, s_dst, s_ext > 1), fold["hazard"])
        t.gemm = {k: (np.where(lifted[:, None] if fold[k].ndim == 2 else (lifted[:, None, None] if fold[k].ndim == 3
                                                                         else lifted), fold[k], t.gemm[k]))
                  for k in t.gemm}
        return lift, lift_loop, lift_ok


    def mapping_batch(self, indices: np.ndarray) -> MappingBatch:
        return self.batch(indices).t

    def mapping(self, config: Config | dict[str, KnobValue] | int, shift: int = 8) -> Mapping:
        """The `Mapping` of `config` (a Config, knob dict or index; `schedule.vta.producer`): the
        template's tile geometry with the config's loop order, INP/WGT residency, loops inside the
        reduction (ACC slots), thread axis and INP loads per tile. Invalid configs raise
        InvalidSchedule naming the rule."""
        if isinstance(config, (int, np.integer)) and not isinstance(config, bool):
            config = self.get(int(config))
        return produce(self, config, shift)

    def violations(self, config: Config | dict | list | int) -> list[tuple[str, str]]:
        """(rule name, message) of every rule `config` breaks."""
        cfg = self.as_config(config)
        return [(r.name, r.message(0)) for r in self.rules(self.batch(np.array([cfg.index]))) if not r.ok[0]]

    def why_invalid(self, config: Config | dict | list | int) -> str | None:
        """'<rule>: <message>' of the first rule `config` breaks, or None if it is valid."""
        cfg = self.as_config(config)
        if self.proven_valid(cfg.index):
            return None
        bad = self.violations(cfg)
        return f"{bad[0][0]}: {bad[0][1]}" if bad else None

    # -- the template's configs -------------------------------------------------------------------
    def from_template(self, knobs: Config | dict[str, KnobValue]) -> Config:
        """The point of this space whose mapping is the AutoTVM template's for `knobs` (same
        tiles, order 0, WGT loaded every step, the template's thread axis)."""
        k = dict(getattr(knobs, "knobs", knobs))
        ont, hnt = int(k.get("oc_nthread", 1)), int(k.get("h_nthread", 1))
        if ont * hnt > N_THREADS:
            raise ConfigError(f"oc_nthread={ont} x h_nthread={hnt}: the template allows at most {N_THREADS} threads")
        vt = VTHREADS.index("co") if ont > 1 else VTHREADS.index("h") if hnt > 1 else 0
        return self.from_knobs({**{n: k[n] for n in TILE_KNOBS if n in self.knob_names},
                                "order": 0, "wgt_stationary": 0, "vthread": vt, "uop_fold": 0,
                                "inp_stationary": 0, "acc_resident": 0, "pad_skip": 0, "n_threads": THREAD_COUNTS[0],
                                "uop_lift": 0, "uop_preload": 0, "early_epilogue": 0})

    # -- features ---------------------------------------------------------------------------------
    def features_batch(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """(n, N_FEATURES) float32: the template features of the tiles (`schedule.features`)
        and `EXTRA_FEATURE_NAMES`."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        b = self.batch(idx)
        t, hw = b.t, self.hw
        pos = _POS[b.order] / (len(PAIR_AXES) - 1)
        log2_lift = np.log2(b.lift_loop[..., 0]).sum(axis=1)
        vt = np.stack([b.vt == VTHREADS.index(a) for a in ("h", "co", "w", "b")], axis=1)
        per_step = t.ci_steps * t.n_tiles // b.slots  # (pair, thread, reduction step) triples
        wgt_loads = np.where(b.ws == 1, self._loads_per_co(b) * t.nthreads, per_step * b.inner_loads(("co",)))
        inp_loads = np.where(b.ins == 1, self._loads_per_inp(b) * t.nthreads, per_step * b.inner_loads(("b", "h", "w")))
        shareable, once = self._inp_shared(b)
        inp_loads = np.where(shareable & once, 1, inp_loads)  # one tile for every thread (`Mapping.inp_shared`)
        inp_loads = inp_loads * np.where(b.split, t.tile_b * t.tile_ci, 1)
        extra = np.concatenate([pos, b.ws[:, None], vt,
                                np.log2(np.maximum(wgt_loads * t.wgt_sram * hw.wgt_elem_bytes, 1))[:, None],
                                np.log2(np.maximum(inp_loads, 1))[:, None], (b.fold > 0)[:, None],
                                *edge_rules.features(t), b.ins[:, None], np.log2(b.slots)[:, None],
                                b.ps[:, None], np.log2(b.nt)[:, None], log2_lift[:, None]], axis=1)
        base = config_features(t)
        for name in ("log2_gemm_insns", "log2_compute_per_load"):  # per step: every lifted instruction
            base[:, CONFIG_FEATURE_NAMES.index(name)] += log2_lift.astype(np.float32)
        return np.concatenate([base, extra.astype(np.float32)], axis=1).astype(np.float32)

