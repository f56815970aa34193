"""A schedule's first evaluation (issue 35 §4): the micro-op kernels of a fold are shared by every
`MappingBatch` of the process (a search's sample, its edge tile variants, other layers) within a
bound, `Kernel.from_fold` gives what its array form gave, and a batch's row table is unchanged."""

from __future__ import annotations

import numpy as np

from codesign.hw.config import HwConfig
from codesign.mapping import batch as batch_mod
from codesign.mapping.batch import GEMM_LOOPS, Kernel, MappingBatch, geometry
from codesign.workloads import Conv2D

HW = HwConfig()
LAYER = Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1)


def _reference(roles: np.ndarray, loops: np.ndarray, names: tuple[str, ...]) -> Kernel:
    """`Kernel.from_fold` as it was (array indexing, keyword fields)."""
    r = roles.tolist()
    kw: dict[str, int] = {}
    for role, slot in ((1, "out"), (2, "in")):
        if role in r:
            kw[f"iter_{slot}"], kw[f"dst_factor_{slot}"], kw[f"src_factor_{slot}"], kw[f"wgt_factor_{slot}"] = (
                loops[r.index(role)].tolist())
    live = tuple(n for n, x in zip(names, r) if x)
    return Kernel(loops[[i for i, x in enumerate(r) if x == 3]], names=live, **kw)


def _same(a: Kernel, b: Kernel) -> bool:
    return (a.unrolled.dtype == b.unrolled.dtype and np.array_equal(a.unrolled, b.unrolled)
            and a.factors() == b.factors() and (a.iter_out, a.iter_in, a.names) == (b.iter_out, b.iter_in, b.names)
            and a.size == b.size and np.array_equal(a.uops, b.uops))


def _batch(tiles: list[tuple[int, int, int, int]]) -> MappingBatch:
    """A batch of (tile_h, tile_w, tile_ci, tile_co) configs, one thread."""
    a = np.array(tiles, dtype=np.int64).T
    one = np.ones(len(tiles), dtype=np.int64)
    return MappingBatch(geometry(LAYER, HW), HW, dict(tile_b=one, tile_h=a[0], tile_w=a[1], tile_ci=a[2],
                                                      tile_co=a[3], oc_nthread=one, h_nthread=one))


def test_from_fold_matches_its_array_form():
    rng = np.random.default_rng(0)
    for _ in range(300):  # every role pattern a fold gives: none, out only, out and in, unrolled
        roles = rng.integers(0, 4, size=6)
        loops = rng.integers(0, 9, size=(6, 4)).astype(np.int64)
        assert _same(Kernel.from_fold(roles, loops, GEMM_LOOPS), _reference(roles, loops, GEMM_LOOPS))


def test_batches_share_the_kernels_of_one_fold_and_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(batch_mod, "_KERNELS", {})
    a, b = _batch([(7, 14, 2, 4), (8, 8, 4, 4)]), _batch([(2, 2, 1, 1), (7, 14, 2, 4)])
    shared = a.kernels(0)
    assert b.kernels(1)[0] is shared[0] and b.kernels(1)[1] is shared[1]  # another batch, same fold
    for k, ref in zip(a.kernels(1), (_reference(a.gemm["roles"][1], a.gemm["loops"][1], GEMM_LOOPS),
                                     _reference(a.reset["roles"][1], a.reset["loops"][1], batch_mod.RESET_LOOPS))):
        assert _same(k, ref)
    monkeypatch.setattr(batch_mod, "KERNEL_CACHE_MAX", 2)
    c = _batch([(h, 1, 1, 1) for h in range(1, 9)])
    for i in range(c.n):
        c.kernels(i)
        assert len(batch_mod._KERNELS) <= 2


def test_row_table_is_the_broadcast_fields():
    t = _batch([(7, 14, 2, 4), (8, 8, 4, 4), (3, 5, 1, 2)])
    for i in range(t.n):
        row = t.row(i)
        for name in MappingBatch.ROW_SCALARS:
            assert row[name] == int(np.broadcast_to(getattr(t, name), (t.n,))[i])
        for kind in MappingBatch.ROW_PATTERNS:
            pat = getattr(t, f"{kind}_pattern")()
            for f in ("ok", "y_size", "x_size", "x_stride"):
                assert row[f"{kind}_{f}"] == int(np.broadcast_to(pat[f], (t.n,))[i])
                assert type(row[f"{kind}_{f}"]) is int
