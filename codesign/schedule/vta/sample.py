"""Valid `vta` configs sampled uniformly without enumerating them (`SampleMixin`)."""

from __future__ import annotations

import numpy as np

from codesign.mapping.batch import (
    take,
)
from codesign.schedule.vta.batch import VtaBatch
from codesign.schedule.vta.knobs import (
    KERNEL_KNOBS,
    NESTS,
    ORDERS,
)


class SampleMixin:
    """Sampling of `VtaSpace` configs (mixed into it)."""

    def sample_valid(self, n: int, rng: np.random.Generator, exclude: object = (), *,
                     max_draws: int = 1 << 22, nest: int | None = None) -> np.ndarray:
        """Up to `n` distinct valid indices not in `exclude`, uniformly at random over the valid
        configs, without enumerating them: configs are drawn uniformly from `sample_support` (a
        superset of the valid ones) and kept when every rule holds (the mask's own rules, so a
        kept config is exactly valid, and every valid config is as likely). Gives up after
        `max_draws` draws (a space with almost no valid configs). `nest`: uniformly over the valid
        configs of residency `NESTS[nest]` only (`sample_strata`)."""
        pos, geo, fold_ok, lift_ok, ps_ok = self.sample_support()
        ex = exclude if isinstance(exclude, (set, dict, frozenset)) else set(exclude)  # type: ignore[arg-type]
        out: list[int] = []
        if n <= 0 or not len(pos):
            return np.zeros(0, dtype=np.int64)
        names = self.knob_names
        n_f, n_l = fold_ok.sum(axis=1), lift_ok.sum(axis=1)
        weight = (n_f * n_l + ps_ok).astype(np.float64)  # kernel-knob values of each geometry
        if nest is not None and (NESTS[nest][0] or NESTS[nest][1]):  # a stationary tile holds the whole reduction
            weight = np.where(geo.ci_steps == 1, weight, 0.0)
        if weight.sum() == 0:
            return np.zeros(0, dtype=np.int64)
        cum = np.cumsum(weight)
        folds = np.argsort(~fold_ok, axis=1, kind="stable")  # row g: its allowed folds first
        lifts = np.argsort(~lift_ok, axis=1, kind="stable")
        free = [names.index(k) for k in ("order", "wgt_stationary", "inp_stationary", "acc_resident")]
        grid = np.array([(o, *r) for o in range(len(ORDERS)) for r in (NESTS if nest is None else NESTS[nest:nest + 1])],
                        dtype=np.int64)
        col = {k: names.index(k) for k in KERNEL_KNOBS}
        seen: set[int] = set()
        draws, chunk = 0, 2048
        while len(out) < n and draws < max_draws:
            g = np.minimum(np.searchsorted(cum, rng.random(chunk) * cum[-1], side="right"), len(pos) - 1)
            u = rng.integers(0, weight[g].astype(np.int64))
            ps = u >= n_f[g] * n_l[g]
            p = pos[g].copy()
            p[:, col["uop_fold"]] = np.where(ps, 0, folds[g, np.minimum(u // n_l[g], n_f[g] - 1)])
            p[:, col["uop_lift"]] = np.where(ps, 0, lifts[g, u % n_l[g]])
            p[:, col["pad_skip"]] = ps
            p[:, free] = grid[rng.integers(0, len(grid), size=chunk)]
            idx = self.index_of(p)
            b = self.batch(idx, take(geo, g))
            ok = np.ones(chunk, dtype=bool)
            for rule in self.rules(b, edges=False):  # every rule but the edge tiles', on the cheap geometry
                ok &= rule.ok
            cand = np.flatnonzero(ok)
            if cand.size:  # the edge tiles' rules: the mask itself (exact)
                cand = cand[self._mask(idx[cand])]
            draws += chunk
            if nest is None:  # `valid_estimate`'s acceptance counts uniform draws only
                self._sampled[0] += chunk
                self._sampled[1] += int(cand.size)
            for i in idx[cand].tolist():
                if i not in ex and i not in seen:
                    seen.add(i)
                    out.append(i)
                    if len(out) >= n:
                        break
        self.remember_valid(out)
        return np.asarray(out, dtype=np.int64)

    #: valid indices a space remembers having proven (`remember_valid`); a bound on memory (~100 B
    #: each), not a working set: a search measures 10^2-10^4 of them
    PROVEN_MAX = 1 << 20

    def remember_valid(self, indices: list[int]) -> None:
        """Remember `indices` as valid: every rule was checked on them (the sampler's own mask), so
        `why_invalid` need not check them again when a search measures them (most of a `vta`
        evaluation's time was that second check)."""
        proven: set[int] = self.__dict__.setdefault("_proven", set())
        pending: list[int] = self.__dict__.setdefault("_pending", [])
        if len(proven) + len(indices) > self.PROVEN_MAX:
            proven.clear()
            pending.clear()
            self.__dict__.pop("_proven_table", None)
        fresh = [i for i in indices if i not in proven]
        proven.update(fresh)
        pending += fresh

    #: rows of one batch of proven configs (`proven_rows`): a search's sample, not a listing
    PROVEN_BATCH = 1 << 12

    def proven_rows(self, index: int) -> tuple[VtaBatch, int] | None:
        """(batch, row) of a proven-valid `index` from one batch of the proven configs not yet in a
        batch (a search's sample is built at once: a one-row batch costs about as much as one of a
        hundred), or None when `index` was not proven."""
        table = self.__dict__.get("_proven_table")
        if table is not None and index in table[1]:
            return table[0], table[1][index]
        pending: list[int] = self.__dict__.get("_pending", [])
        if index not in self.__dict__.get("_proven", ()):
            return None
        group = pending[-self.PROVEN_BATCH:] if index in pending[-self.PROVEN_BATCH:] else [index]
        idx = np.asarray(group, dtype=np.int64)
        table = (self.batch(idx), {i: r for r, i in enumerate(group)})
        self.__dict__["_proven_table"] = table
        taken = set(group)
        pending[:] = [i for i in pending if i not in taken]
        return table[0], table[1][index]

    def proven_valid(self, index: int) -> bool:
        """Whether `index` is known valid without checking a rule: sampled as valid, or listed."""
        if index in self.__dict__.get("_proven", ()):
            return True
        return self._valid is not None and self._valid_row(index) is not None

    def sample_strata(self, n: int, rng: np.random.Generator, exclude: object = (), *,
                      max_draws: int = 1 << 18) -> np.ndarray:
        """Up to `n` distinct valid indices not in `exclude`, an equal share from each residency
        of `NESTS` (uniform within it; what a residency cannot give, uniform draws fill): a search's
        starting points see every loop-nest structure, as Ansor samples its sketches evenly,
        instead of in proportion to their valid configs (on ResNet-18's 7x7 conv 285 of 495,622
        valid schedules are input-stationary, 6 of them the shared-input streams that win it)."""
        ex = set(exclude) if not isinstance(exclude, (set, dict, frozenset)) else set(exclude)  # type: ignore[arg-type]
        out: list[int] = []
        for k in range(len(NESTS)):
            share = (n - len(out)) // (len(NESTS) - k)
            got = self.sample_valid(share, rng, ex, max_draws=max_draws, nest=k).tolist() if share > 0 else []
            ex.update(got)
            out += got
        if len(out) < n:
            out += self.sample_valid(n - len(out), rng, ex).tolist()
        return np.asarray(out, dtype=np.int64)

    def valid_estimate(self, draws: int = 1 << 16) -> float:
        """Valid configs, estimated as `support_size` x the fraction of `draws` uniform draws from
        the support that are valid (seeded: the same estimate every time; at ~1% acceptance,
        +-4% one sigma); computed once."""
        if not hasattr(self, "_valid_est"):
            size = self.support_size()
            before = list(self._sampled)
            if size:
                self.sample_valid(1 << 62, np.random.default_rng(0), max_draws=draws)
            drawn, valid = self._sampled[0] - before[0], self._sampled[1] - before[1]
            self._valid_est = size * valid / drawn if drawn else 0.0
        return self._valid_est

