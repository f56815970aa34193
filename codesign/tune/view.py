"""What every tuner needs from a `ScheduleSpace`, computed once (`SpaceView`); the mixed-radix
helpers between config indices and knob positions are `codesign.schedule.space`'s."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from codesign.schedule.knobs import Config
from codesign.schedule.space import ScheduleSpace, index_of, positions_of

__all__ = ["SpaceView", "index_of", "positions_of", "squash"]

FULL_FEATURES = 1 << 17  # featurize whole spaces up to this size (VTA spaces are a few thousand)


def squash(x: np.ndarray) -> np.ndarray:
    """Signed log1p: keeps small features (log2 sizes, fractions) and tames large counts."""
    return np.sign(x) * np.log1p(np.abs(x))


class SpaceView:
    """What every tuner needs from a `ScheduleSpace`, computed once: dims, valid indices and
    their knob positions, and fast validity lookup by index."""

    def __init__(self, space: ScheduleSpace) -> None:
        self.space = space
        self.dims = tuple(int(d) for d in space.dims)
        self.size = int(space.size)
        self.valid = np.sort(np.asarray(space.valid_indices(), dtype=np.int64))
        self.valid_set = set(self.valid.tolist())
        self.valid_pos = positions_of(self.valid, self.dims)
        self._valid_feats: np.ndarray | None = None
        self._all_feats: np.ndarray | None = None
        self._row: dict[int, int] = {}

    # -- features (fixed length, `codesign.schedule`); squashed so counts and sizes share a scale --
    def valid_features(self) -> np.ndarray:
        """(n_valid, F) float32 features of `self.valid`, row-aligned; computed once."""
        if self._valid_feats is None:
            self._valid_feats = self._features(self.valid)
            self._row = {int(i): r for r, i in enumerate(self.valid)}
        return self._valid_feats

    def features(self, indices: Sequence[int]) -> np.ndarray:
        """Features of any configs (valid or not) by index. For spaces up to `FULL_FEATURES`
        configs the whole grid is featurized once (RL agents walk through invalid configs too)."""
        idx = np.asarray(indices, dtype=np.int64)
        if self.size <= FULL_FEATURES:
            if self._all_feats is None:
                self._all_feats = self._features(np.arange(self.size, dtype=np.int64))
            return self._all_feats[idx]
        feats = self.valid_features()
        rows = [self._row.get(int(i)) for i in idx]
        if all(r is not None for r in rows):
            return feats[np.asarray(rows, dtype=np.int64)] if rows else feats[:0]
        return self._features(idx)

    def _features(self, indices: np.ndarray) -> np.ndarray:
        raw = np.asarray(self.space.features_batch(np.asarray(indices, dtype=np.int64)), dtype=np.float64)
        if raw.size == 0:
            return np.zeros((0, self.n_features), dtype=np.float32)
        return squash(raw).astype(np.float32)

    @property
    def n_features(self) -> int:
        return int(self.valid_features().shape[1])

    def is_valid(self, index: int) -> bool:
        return int(index) in self.valid_set

    def config(self, index: int) -> Config:
        return self.space.get(int(index))

    def configs(self, indices: Sequence[int] | np.ndarray) -> list[Config]:
        """`config(i)` for many indices at once: the knob positions of all in one array step, the
        candidate values looked up per knob (an exhaustive round builds every valid config, and
        `ScheduleSpace.get` one by one was an eighth of its time). Each Config owns its lists."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.size):
            return [self.config(int(i)) for i in idx]  # out of range: ScheduleSpace.get says so
        pos = positions_of(idx, self.dims).T.tolist()
        names = [k.name for k in self.space.knobs]
        columns = [[list(k.candidates[p]) for p in col] if k.kind == "sp" else [k.candidates[p] for p in col]
                   for k, col in zip(self.space.knobs, pos)]
        return [Config(i, dict(zip(names, row))) for i, row in zip(idx.tolist(), zip(*columns))]


__all__ = ["FULL_FEATURES", "SpaceView", "index_of", "positions_of", "squash"]
