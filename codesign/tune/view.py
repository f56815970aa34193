"""The space protocol every tuner goes through (`SpaceView`): index, validity, features, knob
positions, `neighbours`, `mutate` and sampling of valid configs — generic over knob spaces (the
AutoTVM `ScheduleSpace` and the `vta` family's space share the public interface: size, dims,
get, valid_mask, valid_indices, features_batch). Tuners never decode knob positions themselves.

Small spaces (up to `ENUMERATE_LIMIT` configs) are enumerated once: `valid` holds every valid
index and sampling draws from it. Larger ones are never enumerated by the view: a space with its
own sampler (the `vta` family, 10^9-10^10 configs per ResNet-18 layer at ~10^-4 valid:
`VtaSpace.sample_valid`, uniform over the valid configs, from a superset built without
enumerating them) samples with it and estimates its valid count with it (`valid_estimate`);
others draw indices and keep those the vectorized mask accepts. Validity of single indices is the
mask's (cached).

The mixed-radix helpers between config indices and knob positions are `codesign.schedule.space`'s."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from codesign.schedule.knobs import Config
from codesign.schedule.space import index_of, positions_of
from codesign.schedule.vta_space import VtaSpace

FULL_FEATURES = 1 << 17  # featurize whole spaces up to this size (VTA template spaces are a few thousand)
# Enumerate valid configs of spaces up to this size (one vectorized mask pass, ~1 s per 10^6 configs);
# sample larger ones. Enumerating a vta family space of ResNet-18 (10^5 valid of 10^10) takes 5-10 CPU-s
# (`VtaSpace.valid_indices`), its sampler ~1 ms per valid config: the learned searches sample.
ENUMERATE_LIMIT = 1 << 21
SAMPLE_CHUNK = 4096  # indices drawn per mask call when sampling a large space
MAX_SAMPLE_DRAWS = 1 << 22  # give up sampling after this many draws (a space with ~no valid configs)
# Validity of up to this many indices per mask call is remembered (`is_valid` then needs no mask call):
# a local search's neighbours (~50-300), proposed next and checked one by one by the tuning loop.
REMEMBER_MAX = 1024


def squash(x: np.ndarray) -> np.ndarray:
    """Signed log1p: keeps small features (log2 sizes, fractions) and tames large counts."""
    return np.sign(x) * np.log1p(np.abs(x))


class SpaceView:
    """What every tuner needs from a schedule space (see the module doc). `enumerate_limit`:
    spaces up to that many configs are enumerated (default `ENUMERATE_LIMIT`)."""

    def __init__(self, space: Any, *, enumerate_limit: int = ENUMERATE_LIMIT) -> None:
        self.space = space
        self.family: str = str(getattr(space, "family", "autotvm"))
        self.dims = tuple(int(d) for d in space.dims)
        self.size = int(space.size)
        self.enumerable = self.size <= int(enumerate_limit)
        #: the space's own sampler of valid configs (`VtaSpace.sample_valid`), for a large space
        self._sampler = getattr(space, "sample_valid", None) if isinstance(space, VtaSpace) else None
        self._valid: np.ndarray | None = None
        self._valid_set: set[int] | None = None
        self._valid_pos: np.ndarray | None = None
        self._valid_feats: np.ndarray | None = None
        self._all_feats: np.ndarray | None = None
        self._row: dict[int, int] = {}
        self._known: dict[int, bool] = {}  # validity of single indices of a large space
        self._n_valid_est: float | None = None
        self._movable = np.flatnonzero(np.asarray(self.dims) > 1)
        # knob -> the other knobs of its coupled group (`VtaSpace.coupled_knobs`): a move of one may
        # also reset the others to position 0 (today's program), a joint move one-knob steps never make
        self._partners: dict[int, np.ndarray] = {
            k: np.asarray([j for j in g if j != k], dtype=np.int64)
            for g in getattr(space, "coupled_knobs", ()) for k in g if self.dims[k] > 1}

    # -- index <-> knob positions (the space's own mixed radix when it has one) --------------
    def positions(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """(n, n_knobs) knob positions of config indices."""
        fn = getattr(self.space, "positions_of", None)
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        return np.asarray(fn(idx), dtype=np.int64) if fn is not None else positions_of(idx, self.dims)

    def index(self, positions: np.ndarray) -> np.ndarray:
        """(n,) config indices of (n, n_knobs) knob positions."""
        fn = getattr(self.space, "index_of", None)
        pos = np.asarray(positions, dtype=np.int64).reshape(-1, len(self.dims))
        return np.asarray(fn(pos), dtype=np.int64) if fn is not None else index_of(pos, self.dims)

    # -- validity ----------------------------------------------------------------------------
    @property
    def valid(self) -> np.ndarray:
        """Sorted indices of every valid config. Enumerates the space (once): tuners that may
        meet a large space use `sample_valid` / `candidates` instead."""
        if self._valid is None:
            self._valid = np.sort(np.asarray(self.space.valid_indices(), dtype=np.int64))
        return self._valid

    @property
    def valid_set(self) -> set[int]:
        if self._valid_set is None:
            self._valid_set = set(self.valid.tolist())
        return self._valid_set

    @property
    def valid_pos(self) -> np.ndarray:
        if self._valid_pos is None:
            self._valid_pos = self.positions(self.valid)
        return self._valid_pos

    def valid_mask(self, indices: Sequence[int] | np.ndarray, *, exact: bool = True) -> np.ndarray:
        """Boolean validity of `indices` (in range), vectorized. `exact=False` may accept some
        invalid configs where that is much cheaper (the `vta` family's edge-tile rules,
        `VtaSpace.valid_mask_staged`): for a search's intermediate states, never for proposals."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size == 0:
            return np.zeros(0, dtype=bool)
        if self._valid is not None:  # enumerated already: a binary search, not the mask
            v = self._valid
            if v.size == 0:
                return np.zeros(idx.size, dtype=bool)
            return v[np.minimum(np.searchsorted(v, idx), v.size - 1)] == idx
        staged = getattr(self.space, "valid_mask_staged", None)  # the same mask, the costly rules last
        if staged is not None:
            ok = np.asarray(staged(idx, exact=exact), dtype=bool)
        else:
            ok = np.asarray(self.space.valid_mask(idx), dtype=bool)
        if exact and idx.size <= REMEMBER_MAX:  # a search's neighbours: proposed next, then checked one by one
            self._known.update(zip(idx.tolist(), ok.tolist()))
        return ok

    def is_valid(self, index: int) -> bool:
        index = int(index)
        if not 0 <= index < self.size:
            return False
        if self.enumerable:
            return index in self.valid_set
        known = self._known.get(index)
        if known is None:
            known = self._known[index] = bool(self.valid_mask([index])[0])
        return known

    def n_valid(self) -> float:
        """Valid configs: exact for an enumerable space, else estimated: by the space's sampler
        (`VtaSpace.valid_estimate`), or from a uniform sample (the mask's acceptance rate x size)."""
        if self.enumerable or self._valid is not None:
            return float(len(self.valid))
        if self._n_valid_est is None and self._sampler is not None:
            self._n_valid_est = float(self.space.valid_estimate())
        if self._n_valid_est is None:
            draws = np.random.default_rng(0).integers(0, self.size, size=1 << 14)
            self._n_valid_est = float(self.valid_mask(draws).mean()) * self.size
        return self._n_valid_est

    # -- sampling and local moves ------------------------------------------------------------
    def sample_valid(self, n: int, rng: np.random.Generator, exclude: Iterable[int] = (), *,
                     strata: bool = False) -> list[int]:
        """Up to `n` distinct valid indices not in `exclude`, uniformly at random. Enumerable
        spaces draw from `valid` without replacement; large ones draw indices and keep those the
        mask accepts (or the space's own sampler draws them, `VtaSpace.sample_valid`). `strata`:
        a large space with residency strata (`VtaSpace.sample_strata`) draws an equal share from
        each (a search's starting points), else uniformly."""
        ex = exclude if isinstance(exclude, (set, dict)) else set(exclude)
        if n <= 0:
            return []
        if strata and not self.enumerable and self._sampler is not None and hasattr(self.space, "sample_strata"):
            out = [int(i) for i in self.space.sample_strata(n, rng, ex)]
            self._known.update(dict.fromkeys(out, True))
            return out
        if self.enumerable:
            pool = self.valid
            if ex:
                pool = pool[~np.isin(pool, np.fromiter(ex, dtype=np.int64, count=len(ex)))]
            if pool.size == 0:
                return []
            return [int(i) for i in rng.choice(pool, size=min(n, pool.size), replace=False)]
        if self._sampler is not None:
            out = [int(i) for i in self._sampler(n, rng, ex)]
            self._known.update(dict.fromkeys(out, True))
            return out
        out: list[int] = []
        seen: set[int] = set()
        draws = 0
        while len(out) < n and draws < MAX_SAMPLE_DRAWS:
            idx = rng.integers(0, self.size, size=SAMPLE_CHUNK)
            draws += SAMPLE_CHUNK
            for i in idx[self.valid_mask(idx)].tolist():
                if i not in ex and i not in seen:
                    seen.add(i)
                    self._known[i] = True
                    out.append(i)
                    if len(out) >= n:
                        break
        return out

    def neighbours(self, index: int) -> np.ndarray:
        """Every valid config that differs from `index` in exactly one knob, or in one knob of a
        coupled group with the group's other knobs reset to position 0 (sorted)."""
        pos = self.positions([index])[0]
        rows = []
        for k in self._movable.tolist():
            cand = np.repeat(pos[None, :], self.dims[k], axis=0)
            cand[:, k] = np.arange(self.dims[k])
            rows.append(np.delete(cand, pos[k], axis=0))
            partners = self._partners.get(k)
            if partners is not None and pos[partners].any():  # the move with its partners reset
                reset = rows[-1].copy()
                reset[:, partners] = 0
                rows.append(reset)
        if not rows:
            return np.zeros(0, dtype=np.int64)
        idx = np.unique(self.index(np.vstack(rows)))
        idx = idx[idx != index]
        return idx[self.valid_mask(idx)]

    def mutate_positions(self, pos: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One random knob of each row set to a random candidate (AutoTVM's SA move: the knob may
        keep its value); the result may be invalid."""
        new = np.array(pos, dtype=np.int64, copy=True)
        if self._movable.size == 0 or len(new) == 0:
            return new
        dims = np.asarray(self.dims)
        knob = rng.choice(self._movable, size=len(new))
        new[np.arange(len(new)), knob] = rng.integers(dims[knob])
        self._reset_partners(new, knob, rng)
        return new

    def _reset_partners(self, pos: np.ndarray, knob: np.ndarray, rng: np.random.Generator) -> None:
        """In place: each row whose moved knob has coupled partners gets them reset to position 0
        with probability 1/2 (no random draws for a space without coupled knobs)."""
        if not self._partners:
            return
        coin = rng.random(len(pos)) < 0.5
        for r in np.flatnonzero(coin).tolist():
            partners = self._partners.get(int(knob[r]))
            if partners is not None:
                pos[r, partners] = 0

    def mutate(self, indices: Sequence[int] | np.ndarray, rng: np.random.Generator, *, tries: int = 8) -> np.ndarray:
        """Each index with one knob changed to another candidate, valid: up to `tries` draws per
        index; an index with no valid draw is returned unchanged."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        out = idx.copy()
        todo = np.arange(idx.size)
        pos = self.positions(idx)
        for _ in range(max(1, tries)):
            if todo.size == 0 or self._movable.size == 0:
                break
            cand = pos[todo].copy()
            knob = rng.choice(self._movable, size=todo.size)
            dims = np.asarray(self.dims)[knob]
            # another candidate of that knob: shift by 1..dims-1 (never the same value)
            cand[np.arange(todo.size), knob] = (cand[np.arange(todo.size), knob] + rng.integers(1, dims)) % dims
            self._reset_partners(cand, knob, rng)
            ci = self.index(cand)
            ok = self.valid_mask(ci)
            out[todo[ok]] = ci[ok]
            todo = todo[~ok]
        return out

    def candidates(self, rng: np.random.Generator, size: int, around: Sequence[int] = ()) -> np.ndarray:
        """Valid indices a model can rank: every valid config of an enumerable space; for a large
        one `size` samples (an equal share per residency stratum where the space has them) plus the
        neighbours of the configs `around` (the incumbents)."""
        if self.enumerable:
            return self.valid
        parts = [np.asarray(self.sample_valid(size, rng, strata=True), dtype=np.int64)]
        parts += [self.neighbours(int(i)) for i in around]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    # -- features (fixed length, `codesign.schedule`); squashed so counts and sizes share a scale --
    def valid_features(self) -> np.ndarray:
        """(n_valid, F) float32 features of `self.valid`, row-aligned; computed once."""
        if self._valid_feats is None:
            self._valid_feats = self._features(self.valid)
            self._row = {int(i): r for r, i in enumerate(self.valid)}
        return self._valid_feats

    def features(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Features of any configs (valid or not) by index. For spaces up to `FULL_FEATURES`
        configs the whole grid is featurized once (RL agents walk through invalid configs too)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if self.size <= FULL_FEATURES:
            if self._all_feats is None:
                self._all_feats = self._features(np.arange(self.size, dtype=np.int64))
            return self._all_feats[idx]
        if self._valid_feats is not None:
            rows = [self._row.get(int(i)) for i in idx]
            if all(r is not None for r in rows):
                return self._valid_feats[np.asarray(rows, dtype=np.int64)] if rows else self._valid_feats[:0]
        return self._features(idx)

    def _features(self, indices: np.ndarray) -> np.ndarray:
        raw = np.asarray(self.space.features_batch(np.asarray(indices, dtype=np.int64)), dtype=np.float64)
        if raw.size == 0:
            return np.zeros((0, self.n_features), dtype=np.float32)
        return squash(raw).astype(np.float32)

    @property
    def n_features(self) -> int:
        return int(self._features(np.zeros(1, dtype=np.int64)).shape[1])

    def config(self, index: int) -> Config:
        return self.space.get(int(index))

    def configs(self, indices: Sequence[int] | np.ndarray) -> list[Config]:
        """`config(i)` for many indices at once: the knob positions of all in one array step, the
        candidate values looked up per knob (an exhaustive round builds every valid config, and
        `ScheduleSpace.get` one by one was an eighth of its time). Each Config owns its lists.
        Spaces whose configs carry more than AutoTVM knobs (another family) build them one by one."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if self.family != "autotvm" or (idx.size and (idx.min() < 0 or idx.max() >= self.size)):
            return [self.config(int(i)) for i in idx]  # out of range: the space's get says so
        pos = self.positions(idx).T.tolist()
        names = [k.name for k in self.space.knobs]
        columns = [[list(k.candidates[p]) for p in col] if k.kind == "sp" else [k.candidates[p] for p in col]
                   for k, col in zip(self.space.knobs, pos)]
        return [Config(i, dict(zip(names, row))) for i, row in zip(idx.tolist(), zip(*columns))]


__all__ = ["ENUMERATE_LIMIT", "FULL_FEATURES", "SpaceView", "index_of", "positions_of", "squash"]
