"""The valid configs of a `vta` space listed, in three staged passes, and the support they are
drawn from (`EnumerateMixin`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from codesign.errors import ConfigError
from codesign.mapping.batch import (
    FOLD_PAIRS,
    MappingBatch,
    take,
)
from codesign.schedule import edge_rules
from codesign.schedule.knobs import Config
from codesign.schedule.vta.batch import CANONICAL, VtaBatch
from codesign.schedule.vta.knobs import (
    KERNEL_KNOBS,
    NESTS,
    ORDERS,
    PAIR_AXES,
)
from codesign.schedule.vta.rules import KERNEL_RULES, ORDER_RULES


class EnumerateMixin:
    """Enumeration of `VtaSpace` configs (mixed into it)."""

    def valid_table(self) -> tuple[VtaBatch, dict[int, int]]:
        """The `batch` of every valid config, built once, and each valid index's row in it (the
        producer reads one config's geometry as a row lookup)."""
        if not hasattr(self, "_table"):
            valid = self.valid_indices()
            self._table = (self.batch(valid), {int(i): r for r, i in enumerate(valid.tolist())})
            pos = self.positions_of(valid)
            self._row_values = [tuple(int(self._values[j][p]) for j, p in enumerate(row)) for row in pos.tolist()]
        return self._table

    def listed_within(self, limit: int) -> bool:
        """Whether the valid configs are listed already (an exhaustive search did) and at most
        `limit` of them (or tabulated: `valid_table`)."""
        return hasattr(self, "_table") or (self._valid is not None and len(self._valid) <= limit)

    def valid_index_of(self, config: Config | dict | list | int) -> int | None:
        """`config.index` when `config` is a valid Config of this space (its knobs are those of
        the index), else None (then `as_config` + `why_invalid` decide). Tuners measure Configs
        the space built, so this skips rebuilding them."""
        index = getattr(config, "index", None)
        knobs = getattr(config, "knobs", None)
        if not isinstance(index, int) or not isinstance(knobs, dict):
            return None
        row = self.valid_table()[1].get(index)
        if row is None or len(knobs) != len(self.knob_names):
            return None
        try:
            values = tuple(int(v[-1]) if isinstance(v, (list, tuple)) else int(v)
                           for v in (knobs[n] for n in self.knob_names))
        except (KeyError, TypeError, ValueError, IndexError):
            return None
        return index if values == self._row_values[row] else None


    def valid_indices(self) -> np.ndarray:
        """Sorted valid indices (`_listed`), listed once."""
        if self._valid is None:
            self._valid = self._listed(self._allowed({}))
            self._valid.setflags(write=False)
        return self._valid

    def valid_where(self, **fixed: int | Sequence[int]) -> np.ndarray:
        """Sorted valid indices whose knobs take the given values (`tile_h=14`: a tile of 14 rows;
        `pad_skip=1`; a sequence: any of those values), listed without listing the others: the
        staged passes run only over the fixed knobs' values, so a test or a report that wants the
        configs of one residency or one kernel pays for those. The listing's own rows when the
        whole family is listed already."""
        allowed = self._allowed(fixed)
        if self._valid is not None:
            pos = self.positions_of(self._valid)
            keep = np.ones(len(pos), dtype=bool)
            for j, ok in enumerate(allowed):
                keep &= ok[pos[:, j]]
            return self._valid[keep]
        return self._listed(allowed)

    def _allowed(self, fixed: dict[str, int | Sequence[int]]) -> list[np.ndarray]:
        """Per knob, which of its positions a listing covers: those whose value is in `fixed[name]`,
        every position of a knob not named. Unknown names or values raise ConfigError."""
        names = self.knob_names
        bad = sorted(set(fixed) - set(names))
        if bad:
            raise ConfigError(f"valid_where: no knob {', '.join(bad)} in the vta family (knobs: {', '.join(names)})")
        out = []
        for j, name in enumerate(names):
            if name not in fixed:
                out.append(np.ones(self.dims[j], dtype=bool))
                continue
            want = np.atleast_1d(np.asarray(fixed[name], dtype=np.int64))
            ok = np.isin(self._values[j], want)
            if not ok.any():
                raise ConfigError(f"valid_where: {name}={fixed[name]} is no value of the knob "
                                  f"(values: {sorted(set(self._values[j].tolist()))})")
            out.append(ok)
        return out

    def _listed(self, allowed: list[np.ndarray]) -> np.ndarray:
        """Sorted valid indices among the positions `allowed` (per knob), in three passes: (A) the
        rules that depend neither on the kernel knobs (`KERNEL_KNOBS`, `KERNEL_RULES`) nor on the loop
        order and residency (`ORDER_RULES`) over the tile sizes x threads with those knobs at 0
        (1/64,512 of the space); (B) the rules that ignore order and residency over the survivors x
        the kernel-knob values their GEMM loops allow (`sample_support`: a fold of live loops, a lift
        `uop_lift_live` and `uop_lift_edge` allow, pad_skip where it applies; ~1/13 of every fold and
        lift), their geometry taken from A's batch; (C) every rule over B's survivors x the orders x
        `NESTS` (the residency combinations the other rules leave) that `_nest_candidates` leaves, the
        geometry and kernels taken from B's batch."""
        names = self.knob_names
        free = [names.index(k) for k in ("order", "wgt_stationary", "inp_stationary", "acc_resident")]
        kern = [names.index(k) for k in KERNEL_KNOBS]
        grid = np.array([(o, *nest) for o in range(self.dims[free[0]]) for nest in NESTS], dtype=np.int64)
        grid = grid[np.all([allowed[j][grid[:, c]] for c, j in enumerate(free)], axis=0)]
        pos_a, geo, fold_ok, lift_ok, ps_ok = self._support_where(allowed)  # pass A
        rows_b, kvals = self._kernels(fold_ok, lift_ok, ps_ok)
        keep_k = np.all([allowed[j][kvals[:, c]] for c, j in enumerate(kern)], axis=0)
        rows_b, kvals = rows_b[keep_k], kvals[keep_k]
        if len(grid) and (grid[:, 1] | grid[:, 2]).all():  # stationary nests only: one reduction step
            keep_s = geo.ci_steps[rows_b] == 1  # (wgt_stationary_ci, inp_stationary_ci)
            rows_b, kvals = rows_b[keep_s], kvals[keep_s]
        survivors = []
        chunk = 1 << 15  # configs per batch: memory stays ~0.5 GB
        for start in range(0, len(rows_b) if len(grid) else 0, chunk):
            rows = rows_b[start:start + chunk]
            pos_b = pos_a[rows]
            pos_b[:, kern] = kvals[start:start + chunk]
            b = self.batch(self.index_of(pos_b), take(geo, rows))
            ok = np.ones(len(pos_b), dtype=bool)
            for rule in self.rules(b, edges=False):
                if rule.name not in ORDER_RULES:
                    ok &= rule.ok
            for rule in edge_rules.rules(b, ok):  # the edge tiles' kernels, of the survivors only
                ok &= rule.ok
            keep = np.flatnonzero(ok)
            # pass C on these survivors x their candidate orders and residencies: their geometry is
            # taken from this batch, not rebuilt; the edge rules ignore order and residency
            part_n = max(1, chunk // len(grid))
            for part in range(0, len(keep), part_n):
                kp = keep[part:part + part_n]
                row, g = np.nonzero(self._nest_candidates(b, kp, grid))
                full = pos_b[kp[row]]
                full[:, free] = grid[g]
                bf = take(b, kp[row], b.t.n)
                bf.set_nest(*(full[:, j] for j in free))
                ok2 = np.ones(len(full), dtype=bool)
                for rule in self.rules(bf, edges=False):
                    ok2 &= rule.ok
                survivors.append(self.index_of(full[ok2]))
        return np.sort(np.concatenate(survivors)) if survivors else np.zeros(0, dtype=np.int64)

    @staticmethod
    def _nest_candidates(b: VtaBatch, rows: np.ndarray, grid: np.ndarray) -> np.ndarray:
        """(len(rows), len(grid)) bool: the (order, wgt_stationary, inp_stationary, acc_resident)
        rows of `grid` that configs `rows` of `b` can take by the three rules of pass C that read
        only the geometry and those knobs, computed as the rules compute them: `order_canonical`
        (an order moving only extent-1 loops is another's program: most of the 24 orders on small
        layers), `wgt_stationary_ci` and `inp_stationary_ci` (a stationary tile holds the whole
        reduction). Pass C then builds only these (its rules still check them: the listing is
        the same)."""
        live = sum((b.extent[a][rows] > 1).astype(np.int64) << k for k, a in enumerate(PAIR_AXES))
        ws, ins = grid[:, 1], grid[:, 2]
        bits = live[:, None] | (ws << PAIR_AXES.index("co"))[None, :]
        canonical = CANONICAL[bits, grid[None, :, 0]]
        whole = (b.t.ci_steps[rows] == 1)[:, None] | ((ws == 0) & (ins == 0))[None, :]
        return canonical & whole

    def valid_mask(self, indices: np.ndarray | None = None) -> np.ndarray:
        idx = np.arange(self.size, dtype=np.int64) if indices is None else np.asarray(indices, dtype=np.int64)
        return self._remembered(idx, self._mask(idx))

    #: masks of up to this many configs remember their valid ones (a search's candidates; not a listing)
    REMEMBER_MAX = 1 << 12

    def _remembered(self, idx: np.ndarray, ok: np.ndarray) -> np.ndarray:
        if idx.shape[0] <= self.REMEMBER_MAX:
            self.remember_valid(idx[ok].tolist())
        return ok

    def _mask(self, idx: np.ndarray, edges: bool = True) -> np.ndarray:
        mask = np.ones(idx.shape[0], dtype=bool)
        chunk = 1 << 15  # bounded memory: a batch holds a few KB per config
        for start in range(0, idx.shape[0], chunk):
            part = mask[start:start + chunk]
            for rule in self.rules(self.batch(idx[start:start + chunk]), edges):
                part &= rule.ok
        return mask

    def valid_mask_staged(self, indices: Sequence[int] | np.ndarray, *, exact: bool = True) -> np.ndarray:
        """`valid_mask(indices)`, with the edge tiles' rules (most of the mask's time where tile
        sizes do not divide: each config's edge variants are built) evaluated only on the configs
        every other rule accepts (the mask itself on those, so the result is the mask's).
        `exact=False`: every rule but the edge tiles' (a superset of the valid configs, for a
        search's intermediate steps; what it proposes is checked exactly)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        ok = self._mask(idx, edges=False)
        if not exact:
            return ok
        sel = np.flatnonzero(ok)
        if sel.size:
            ok[sel] = self._mask(idx[sel])
        return self._remembered(idx, ok)

    def sample_support(self) -> tuple[np.ndarray, MappingBatch, np.ndarray, np.ndarray, np.ndarray]:
        """The configs `sample_valid` draws from: a superset of the valid ones, built without
        enumerating them (pass A of `valid_indices`, ~1/64,512 of the space, then one bool per
        geometry and kernel-knob value). The geometries (tile sizes x threads, the other knobs at 0)
        that pass every rule free of the kernel knobs, order and residency; for each, the folds
        whose two GEMM loops are live (a lift only makes loops extent 1), the lifts `uop_lift_live`
        and `uop_lift_edge` allow (they read the geometry's own loops), pad_skip where
        `pad_skip_tile` allows it (it needs uop_fold = uop_lift = 0: `pad_skip_tile`,
        `pad_skip_lift`); x every order x `NESTS`. Returns (geometry positions (g, knobs), their
        geometry (a `MappingBatch`, row-aligned, the template's kernels), fold ok (g, folds), lift
        ok (g, lifts), pad_skip ok (g,)); computed once."""
        if not hasattr(self, "_support"):
            self._support = self._support_of(self._geometries(None))
            self._sampled = [0, 0]  # draws from the support, valid ones among them (`valid_estimate`)
        pos, geo, fold_ok, lift_ok, ps_ok = self._support
        return pos, geo, fold_ok, lift_ok, ps_ok

    def _support_where(self, allowed: list[np.ndarray]) -> tuple[np.ndarray, MappingBatch, np.ndarray, np.ndarray,
                                                                  np.ndarray]:
        """`sample_support`'s rows whose geometry knobs are at `allowed` positions: its own rows when
        it is built or nothing is fixed (then built, once), else pass A over those positions only."""
        geo_knobs = self._geometry_knobs()
        if hasattr(self, "_support") or all(allowed[j].all() for j in geo_knobs):
            pos, geo, fold_ok, lift_ok, ps_ok = self.sample_support()
            rows = np.flatnonzero(np.all([allowed[j][pos[:, j]] for j in geo_knobs], axis=0)) if geo_knobs \
                else np.arange(len(pos))
            if len(rows) == len(pos):
                return pos, geo, fold_ok, lift_ok, ps_ok
            return pos[rows], take(geo, rows), fold_ok[rows], lift_ok[rows], ps_ok[rows]
        return self._support_of(self._geometries(allowed))

    def _geometry_knobs(self) -> list[int]:
        """Positions of the knobs pass A enumerates (all but order, residency and the kernel knobs)."""
        names = self.knob_names
        zero = {names.index(k) for k in ("order", "wgt_stationary", "inp_stationary", "acc_resident", *KERNEL_KNOBS)}
        return [j for j in range(len(names)) if j not in zero]

    def _geometries(self, allowed: list[np.ndarray] | None) -> np.ndarray:
        """Pass A: the positions (g, knobs) of the geometries (the knobs of `_geometry_knobs` at
        their `allowed` positions, all when None; the others at 0) that pass every rule free of the
        kernel knobs, order and residency."""
        geo_knobs = self._geometry_knobs()
        choices = [np.flatnonzero(allowed[j]) if allowed is not None and j in geo_knobs
                   else np.arange(d) if j in geo_knobs else np.zeros(1, dtype=np.int64)
                   for j, d in enumerate(self.dims)]
        geo_dims = [len(c) for c in choices]
        n_geo = int(np.prod(geo_dims, dtype=np.int64))
        keep_pos = []
        for start in range(0, n_geo, 1 << 15):
            sel = np.unravel_index(np.arange(start, min(start + (1 << 15), n_geo)), geo_dims[::-1])[::-1]
            pos = np.stack([c[s] for c, s in zip(choices, sel)], axis=1)
            ba = self.batch(self.index_of(pos))
            ok = np.ones(len(pos), dtype=bool)
            for rule in self.rules(ba, edges=False):
                if rule.name not in ORDER_RULES and rule.name not in KERNEL_RULES:
                    ok &= rule.ok
            keep_pos.append(pos[ok])
        return np.concatenate(keep_pos) if keep_pos else np.zeros((0, len(self.dims)), dtype=np.int64)

    def _support_of(self, pos: np.ndarray) -> tuple[np.ndarray, MappingBatch, np.ndarray, np.ndarray, np.ndarray]:
        """(pos, geometry, fold ok, lift ok, pad_skip ok) of pass A's geometries `pos` (`sample_support`)."""
        names = self.knob_names
        geo = self.batch(self.index_of(pos)).t  # the template's kernels (kernel knobs at 0)
        n_fold, n_lift = self.dims[names.index("uop_fold")], self.dims[names.index("uop_lift")]
        transpose = self.tmpl.transposed
        live = geo.gemm["loops"][..., 0] > 1  # (g, GEMM loops) of the unlifted kernel
        pairs = np.array([(0, 1), *FOLD_PAIRS], dtype=np.int64)[:n_fold]
        fold_ok = live[:, pairs[:, 0]] & live[:, pairs[:, 1]]
        fold_ok[:, 0] = True
        if transpose:
            fold_ok[:, 1:] = False
        lift_ok = np.zeros((len(pos), n_lift), dtype=bool)
        ps_ok = np.zeros(len(pos), dtype=bool)
        if len(pos):
            for value in range(n_lift):
                p = pos.copy()
                p[:, names.index("uop_lift")] = value
                b = self.batch(self.index_of(p), take(geo, np.arange(len(pos))))
                rules = {r.name: r.ok for r in self.rules(b, edges=False)}
                lift_ok[:, value] = rules["uop_lift_live"] & rules["uop_lift_edge"]
            p = pos.copy()
            p[:, names.index("pad_skip")] = 1
            b = self.batch(self.index_of(p), take(geo, np.arange(len(pos))))
            ps_ok = {r.name: r.ok for r in self.rules(b, edges=False)}["pad_skip_tile"].copy()
        return pos, geo, fold_ok, lift_ok, ps_ok

    def support_size(self) -> int:
        """Configs in `sample_support` (every order and residency of `NESTS` counted)."""
        _pos, _geo, fold_ok, lift_ok, ps_ok = self.sample_support()
        per_geo = fold_ok.sum(axis=1) * lift_ok.sum(axis=1) + ps_ok
        return int(per_geo.sum()) * len(ORDERS) * len(NESTS)

    def support_kernels(self) -> tuple[np.ndarray, np.ndarray]:
        """The kernel-knob values of `sample_support`, listed: (rows into its geometries (m,),
        values (m, len(KERNEL_KNOBS))) — every allowed fold x allowed lift with pad_skip 0, then
        pad_skip 1 with neither where it applies (pass B of `valid_indices`)."""
        _pos, _geo, fold_ok, lift_ok, ps_ok = self.sample_support()
        return self._kernels(fold_ok, lift_ok, ps_ok)

    @staticmethod
    def _kernels(fold_ok: np.ndarray, lift_ok: np.ndarray, ps_ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`support_kernels` of the support rows given by their fold, lift and pad_skip oks."""
        g, f, lf = np.nonzero(fold_ok[:, :, None] & lift_ok[:, None, :])
        p = np.flatnonzero(ps_ok)
        col = {k: i for i, k in enumerate(KERNEL_KNOBS)}
        vals = np.zeros((g.size + p.size, len(KERNEL_KNOBS)), dtype=np.int64)
        vals[:g.size, col["uop_fold"]], vals[:g.size, col["uop_lift"]] = f, lf
        vals[g.size:, col["pad_skip"]] = 1
        return np.concatenate([g, p]).astype(np.int64), vals
