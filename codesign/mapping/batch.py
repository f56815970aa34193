"""Tile geometry of a schedule — the ONE definition the validity rules, the features and the
compiler share.

Everything is computed by `MappingBatch`, vectorized over many configs at once (NumPy int64
arrays); one config's geometry is a row of it: `MappingBatch.row(i)` (scalars and DMA patterns as
plain ints) and `MappingBatch.kernels(i)` (the folded micro-op kernels as `Kernel`s).

Geometry (docs/vta.md §7.3; dense_packed is treated as a 1x1 conv on a 1x1 image with
tile_h = tile_w = 1 and h_nthread = 1, which reproduces docs/vta.md §7.5):
- an output tile is tile_b batch blocks x tile_co channel blocks x tile_h rows x tile_w columns;
  the input tile is tile_b x tile_ci blocks x hin_t x win_t with
  hin_t = (tile_h - 1)·stride + KH, win_t = (tile_w - 1)·stride + KW (padded coordinates);
- the reduction runs in ci_steps = CI / tile_ci steps; at each step the INP and WGT tiles are
  loaded (LOAD at k_o.outer) and the GEMM kernel runs once per batch block of the tile (TVM keeps
  the batch loop outside the load point) — with the workloads' batch = BATCH that is once;
- SRAM elements per virtual thread (docs/vta.md §7.4.1; the ALU epilogue reuses the acc tile):
  acc = tile_b·tile_co·tile_h·tile_w, inp = tile_b·tile_ci·hin_t·win_t, wgt = tile_co·tile_ci·KH·KW;
  every allocation is replicated per virtual thread (nthreads = oc_nthread·h_nthread).
- SRAM layouts inside one thread's tile (docs/vta.md §7.3):
  acc[b][co][h][w], inp[b][ci][hin][win], wgt[co][ci][kh][kw]  (row-major, b outermost).

Fold plan (docs/vta.md §7.3 `fold_uop_loop`): the GEMM kernel's loops are, outer to inner,
(k_o.inner, w, dj, di, co, h) with extents (tile_ci, tile_w, KW, KH, tile_co, tile_h). Extent-1
loops are dropped; the two outermost remaining loops become iter_out and iter_in (only one: it is
iter_out and iter_in = 1); the rest are unrolled into the micro-op kernel, in that order. Index
factors (dst = acc, src = inp, wgt) of each loop:
  k_o.inner: (0, hin_t·win_t, KH·KW)   w: (1, stride, 0)     dj: (0, 1, 1)
  di:        (0, win_t, KW)            co: (tile_h·tile_w, 0, tile_ci·KH·KW)   h: (tile_w, stride·win_t, 0)
The reset GEMM (reduction init, `reset_reg=1`) folds the same way over (w, co, h) with dst factors
(1, tile_h·tile_w, tile_w). The ALU epilogue is 1 uop with iter_in = acc elements of the tile.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from codesign.hw.config import HwConfig
from codesign.mapping.lazy import lazy
from codesign.workloads.layers import Conv2D, Layer

KnobValue = list[int] | tuple[int, ...] | int  # a knob's value (schedule.knobs)

GEMM_LOOPS = ("k_o.inner", "w", "dj", "di", "co", "h")
#: pairs of GEMM loops a fold may put into iter_out / iter_in (`vta` family knob `uop_fold`)
FOLD_PAIRS: tuple[tuple[int, int], ...] = tuple(itertools.combinations(range(len(GEMM_LOOPS)), 2))
RESET_LOOPS = ("w", "co", "h")

# Instruction field limits (docs/vta.md §1.3, §2.3, §2.4, §7.4.6).
MAX_ITER = (1 << 14) - 1        # iter_out / iter_in: 14 bits
MAX_DMA_FIELD = (1 << 16) - 1   # y_size / x_size / x_stride: 16 bits


@dataclass(frozen=True)
class Geometry:
    """Layer constants in hardware units (blocks for b/ci/co), dense mapped to a 1x1 conv."""

    kind: str
    b: int          # batch blocks N / BATCH
    ci: int         # input channel blocks C / BLOCK_IN
    co: int         # output channel blocks O / BLOCK_OUT
    height: int
    width: int
    out_h: int
    out_w: int
    kh: int
    kw: int
    stride: int
    pad: int


@dataclass(frozen=True)
class Kernel:
    """A micro-op kernel: the unrolled loops it enumerates plus the folded loop of the
    instruction. `unrolled` is (u, 4) [extent, dst, src, wgt factor] outer to inner; the uops
    (m, 3) [dst, src, wgt] are the mixed-radix enumeration of those loops plus `offset` (the
    thread's SRAM slice), built only when asked for (the timing path needs only the size).
    `names` are the loops with extent > 1, outer to inner (GEMM_LOOPS / RESET_LOOPS names)."""

    unrolled: np.ndarray
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0
    offset: tuple[int, int, int] = (0, 0, 0)
    explicit: np.ndarray | None = None  # (m, 3) uops of a kernel that is no loop nest
    names: tuple[str, ...] = ()

    @classmethod
    def from_uops(cls, uops: np.ndarray) -> Kernel:
        return cls(np.zeros((0, 4), dtype=np.int64), explicit=np.ascontiguousarray(uops, dtype=np.int64))

    @classmethod
    def from_fold(cls, roles: np.ndarray, loops: np.ndarray, names: tuple[str, ...] = ()) -> Kernel:
        """A Kernel from `MappingBatch`' fold of one config: roles 1 = iter_out, 2 = iter_in,
        3 = unrolled (outer to inner), loops = [extent, dst, src, wgt] (docs/vta.md §7.3)."""
        # plain Python on the (6,) roles and (6, 4) loops as lists: this runs for each kernel of
        # every evaluated schedule's first evaluation (its tile and each edge tile variant)
        r, rows = roles.tolist(), loops.tolist()
        out = rows[r.index(1)] if 1 in r else (1, 0, 0, 0)
        inn = rows[r.index(2)] if 2 in r else (1, 0, 0, 0)
        kept = [x for x, role in zip(rows, r) if role == 3]
        unrolled = np.array(kept, dtype=loops.dtype).reshape(-1, 4)
        live = tuple(n for n, x in zip(names, r) if x) if names else ()
        k = cls(unrolled, out[0], inn[0], out[1], inn[1], out[2], inn[2], out[3], inn[3], names=live)
        size = 1
        for x in kept:
            size *= x[0]
        k.__dict__["size"] = size  # `size` (lazy) from the lists at hand
        return k

    @lazy  # frozen: the lowering asks for it many times per kernel
    def size(self) -> int:
        if self.explicit is not None:
            return int(self.explicit.shape[0])
        return math.prod(self.unrolled[:, 0].tolist())

    @lazy
    def uops(self) -> np.ndarray:
        u = self.unrolled
        if self.explicit is not None:
            base = self.explicit
        elif u.shape[0]:
            idx = np.indices(u[:, 0], dtype=np.int64).reshape(u.shape[0], -1).T
            base = idx @ u[:, 1:]
        else:
            base = np.zeros((1, 3), dtype=np.int64)
        return np.ascontiguousarray(base + np.array(self.offset, dtype=np.int64))

    def factors(self) -> dict[str, int]:
        """GEMM instruction factors: dst/src/wgt _factor_out/_factor_in (0 for a missing loop)."""
        return {f"{f}_factor_{s}": getattr(self, f"{f}_factor_{s}") for s in ("out", "in") for f in ("dst", "src", "wgt")}

    def shifted(self, dst: int, src: int, wgt: int) -> Kernel:
        """The same kernel for another virtual thread's SRAM slice."""
        o = self.offset
        return replace(self, offset=(o[0] + dst, o[1] + src, o[2] + wgt))


def geometry(layer: Layer, hw: HwConfig) -> Geometry:
    layer = layer.schedule_view()  # grouped / transposed convs tile as this conv (templates.py)
    if isinstance(layer, Conv2D):
        return Geometry("conv2d", layer.batch // hw.batch, layer.in_channels // hw.block_in,
                        layer.out_channels // hw.block_out, layer.height, layer.width,
                        layer.out_height, layer.out_width, layer.kernel_h, layer.kernel_w,
                        layer.stride, layer.padding)
    return Geometry("dense", layer.batch // hw.batch, layer.in_features // hw.block_in,
                    layer.out_features // hw.block_out, 1, 1, 1, 1, 1, 1, 1, 0)


def inner(value: KnobValue) -> int:
    """The inner factor of a split knob `[outer, inner]` (a thread count is itself)."""
    return int(value[-1]) if isinstance(value, (list, tuple)) else int(value)


def knob_arrays(knobs: dict[str, KnobValue], kind: str) -> dict[str, np.ndarray]:
    """Inner split factors / thread counts of one knob dict as length-1 arrays."""
    def get(name: str, default: int) -> np.ndarray:
        return np.array([inner(knobs[name]) if name in knobs else default], dtype=np.int64)

    out = {name: get(name, 1) for name in ("tile_b", "tile_ci", "tile_co", "oc_nthread")}
    if kind == "conv2d":
        for name in ("tile_h", "tile_w", "h_nthread"):
            out[name] = get(name, 1)
    return out


def dst_hazard(ext: np.ndarray, dst: np.ndarray, unrolled: np.ndarray) -> np.ndarray:
    """(n,) bool: in the mixed-radix stream over the `unrolled` loops (outer to inner) a dst
    index repeats one of the previous two (docs/vta.md §3.9, §7.4.4). Consecutive dst indices
    change by D_m = s_m when only the innermost loop m advances and by
    D_j = s_j - sum_{k>j}(e_k - 1) s_k when loop j carries. A carry step is always preceded and
    followed by a plain innermost step, so the rule is exactly: every D != 0 and D_j + D_m != 0."""
    L = ext.shape[1]
    span = np.where(unrolled, (ext - 1) * dst, 0)
    inner_span = np.cumsum(span[:, ::-1], axis=1)[:, ::-1] - span   # sum over k > j
    d = dst - inner_span
    last = np.where(unrolled.any(axis=1), L - 1 - np.argmax(unrolled[:, ::-1], axis=1), 0)
    d_m = np.take_along_axis(d, last[:, None], axis=1)[:, 0]
    bad = unrolled & ((d == 0) | ((d + d_m[:, None] == 0) & (np.arange(L) != last[:, None])))
    return bad.any(axis=1)


def _column(a: np.ndarray | int, n: int) -> np.ndarray:
    """`a` as an (n,) array: itself when it is one (`np.broadcast_to` costs ~5 us a call, and a
    batch's fields are (n,) arrays already), else broadcast."""
    return a if type(a) is np.ndarray and a.shape == (n,) else np.broadcast_to(a, (n,))


#: GEMM and reset kernels by their fold (`MappingBatch.kernels`), shared by every batch of the
#: process; a bound, not a working-set size (a kernel is ~1 KB with its lazy fields)
KERNEL_CACHE_MAX = 1 << 14
_KERNELS: dict[tuple, Kernel] = {}


def _kernel(roles: np.ndarray, loops: np.ndarray, names: tuple[str, ...]) -> Kernel:
    """`Kernel.from_fold` of one fold, from the process' bounded cache (`_KERNELS`)."""
    key = (names, roles.tobytes(), loops.tobytes(), loops.dtype.char)
    k = _KERNELS.get(key)
    if k is None:
        if len(_KERNELS) >= KERNEL_CACHE_MAX:
            _KERNELS.clear()
        k = _KERNELS[key] = Kernel.from_fold(roles, loops, names)
    return k


class MappingBatch:
    """Tile geometry of n configs as int64 arrays of shape (n,) (see module docstring)."""

    def __init__(self, geo: Geometry, hw: HwConfig, k: dict[str, np.ndarray]) -> None:
        one = np.ones_like(k["tile_b"])
        self.geo = geo
        self.hw = hw
        self.n = len(one)
        self.tile_b = k["tile_b"]
        self.tile_h = k.get("tile_h", one)
        self.tile_w = k.get("tile_w", one)
        self.tile_ci = k["tile_ci"]
        self.tile_co = k["tile_co"]
        self.oc_nthread = k["oc_nthread"]
        self.h_nthread = k.get("h_nthread", one)
        self.nthreads = self.oc_nthread * self.h_nthread
        s = geo.stride
        self.hin_t = (self.tile_h - 1) * s + geo.kh
        self.win_t = (self.tile_w - 1) * s + geo.kw
        # tile counts round up: a tile size that does not divide its extent leaves a smaller last
        # (edge) tile (the `vta` family; the templates' splits divide, where this is n // f)
        self.b_tiles = -(-geo.b // self.tile_b)
        self.h_tiles = -(-geo.out_h // self.tile_h)
        self.w_tiles = -(-geo.out_w // self.tile_w)
        self.co_tiles = -(-geo.co // self.tile_co)
        self.ci_steps = -(-geo.ci // self.tile_ci)
        self.n_tiles = self.b_tiles * self.h_tiles * self.w_tiles * self.co_tiles
        # SRAM elements per virtual thread (docs/vta.md §7.4.1)
        self.acc_sram = self.tile_b * self.tile_co * self.tile_h * self.tile_w
        self.inp_sram = self.tile_b * self.tile_ci * self.hin_t * self.win_t
        self.wgt_sram = self.tile_co * self.tile_ci * geo.kh * geo.kw
        self.gemm = self._fold(self._gemm_loops())
        self.reset = self._fold(self._reset_loops())
        self._patterns: dict[str, dict[str, np.ndarray]] = {}

    # -- loops of the micro-op kernels ------------------------------------------------------
    def _gemm_loops(self) -> np.ndarray:
        """(n, 6, 4) array: per loop of GEMM_LOOPS [extent, dst, src, wgt factor]."""
        g, z = self.geo, np.zeros_like(self.tile_b)
        kk = g.kh * g.kw
        rows = [
            (self.tile_ci, z, self.hin_t * self.win_t, z + kk),          # k_o.inner
            (self.tile_w, z + 1, z + g.stride, z),                       # w
            (z + g.kw, z, z + 1, z + 1),                                 # dj
            (z + g.kh, z, self.win_t, z + g.kw),                         # di
            (self.tile_co, self.tile_h * self.tile_w, z, self.tile_ci * kk),  # co
            (self.tile_h, self.tile_w, g.stride * self.win_t, z),        # h
        ]
        return np.stack([np.stack(r, axis=-1) for r in rows], axis=1)

    def _reset_loops(self) -> np.ndarray:
        z = np.zeros_like(self.tile_b)
        rows = [
            (self.tile_w, z + 1, z, z),
            (self.tile_co, self.tile_h * self.tile_w, z, z),
            (self.tile_h, self.tile_w, z, z),
        ]
        return np.stack([np.stack(r, axis=-1) for r in rows], axis=1)

    @staticmethod
    def _fold(loops: np.ndarray) -> dict[str, np.ndarray]:
        """fold_uop_loop over (n, L, 4) loop tables: roles, iter counts, uops, dst hazard."""
        ext, dst = loops[..., 0], loops[..., 1]
        live = ext > 1
        rank = np.cumsum(live, axis=1)                      # 1-based rank among live loops
        folded_out = live & (rank == 1)
        folded_in = live & (rank == 2)
        unrolled = live & (rank > 2)
        iter_out = np.where(folded_out, ext, 1).prod(axis=1)
        iter_in = np.where(folded_in, ext, 1).prod(axis=1)
        n_uops = np.where(unrolled, ext, 1).prod(axis=1)
        # dst hazard within the unrolled kernel (`dst_hazard`)
        return {"loops": loops, "iter_out": iter_out, "iter_in": iter_in, "n_uops": n_uops,
                "hazard": dst_hazard(ext, dst, unrolled),
                "roles": np.where(folded_out, 1, np.where(folded_in, 2, np.where(unrolled, 3, 0)))}

    @staticmethod
    def fold_pair(loops: np.ndarray, out: np.ndarray, inn: np.ndarray) -> dict[str, np.ndarray]:
        """A chosen fold over (n, L, 4) loop tables: loop `out[i]` is iter_out, `inn[i]` iter_in
        (indices into the L loops, out < inn), the other live loops unrolled in table order. The
        dst hazard is that of the whole GEMM stream (iter_out, iter_in, then the kernel), since a
        folded loop with dst factor 0 may now sit right outside a short kernel."""
        ext, dst = loops[..., 0], loops[..., 1]
        n, L = ext.shape
        idx = np.broadcast_to(np.arange(L), (n, L))
        live = ext > 1
        is_out, is_in = idx == out[:, None], idx == inn[:, None]
        unrolled = live & ~is_out & ~is_in
        take = lambda sel: np.where(sel, ext, 1).prod(axis=1)  # noqa: E731 - three uses below
        stream = np.argsort(np.where(is_out, -2, np.where(is_in, -1, idx)), axis=1, kind="stable")
        s_ext, s_dst = np.take_along_axis(ext, stream, axis=1), np.take_along_axis(dst, stream, axis=1)
        return {"loops": loops, "iter_out": take(is_out), "iter_in": take(is_in), "n_uops": take(unrolled),
                "hazard": dst_hazard(s_ext, s_dst, s_ext > 1),
                "roles": np.where(is_out, 1, np.where(is_in, 2, np.where(unrolled, 3, 0)))}

    # -- one config's geometry as plain ints (the compile hot path of the tuners) ----------------
    ROW_SCALARS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread", "nthreads",
                   "hin_t", "win_t", "b_tiles", "h_tiles", "w_tiles", "ci_steps", "co_tiles", "n_tiles",
                   "inp_sram", "wgt_sram", "acc_sram")
    ROW_PATTERNS = ("inp", "wgt", "store")

    @lazy
    def _table(self) -> tuple[tuple[str, ...], np.ndarray]:
        """Every scalar and DMA-pattern field flattened into one int64 row per config, built once,
        so that one config's geometry is a single row lookup."""
        n = (self.n,)
        self.patterns(self.ROW_PATTERNS)
        # every field is an (n,) array already (broadcast only what is not: ~5 us a call)
        cols = [a if a.shape == n else np.broadcast_to(a, n) for a in map(self.__getattribute__, self.ROW_SCALARS)]
        for kind in self.ROW_PATTERNS:
            pat = getattr(self, f"{kind}_pattern")()
            cols += [a if a.shape == n else np.broadcast_to(a, n)
                     for a in (np.asarray(pat[key]) for key in ("ok", "y_size", "x_size", "x_stride"))]
        names = self.ROW_SCALARS + tuple(f"{k}_{f}" for k in self.ROW_PATTERNS
                                         for f in ("ok", "y_size", "x_size", "x_stride"))
        return names, np.stack(cols, axis=1).astype(np.int64)

    def row(self, i: int) -> dict[str, int]:
        """Config `i`'s tile sizes, counts, SRAM elements and `<inp|wgt|store>_<ok|y_size|x_size|
        x_stride>` DMA patterns as plain ints."""
        names, rows = self._table
        return dict(zip(names, rows[i].tolist()))

    def kernels(self, i: int) -> tuple[Kernel, Kernel]:
        """Config `i`'s (accumulate GEMM, reset GEMM) micro-op kernels after `fold_uop_loop`.
        Configs with the same fold share one (frozen) `Kernel`: most of a space's configs repeat a
        few folds, and a kernel's lazily computed fields (size, loop fields) are then computed once."""
        g, r = self.gemm, self.reset
        gl, rl = g["loops"][i], r["loops"][i]
        # the fold alone determines each kernel: shared across batches (a search's sample, the batch
        # of its edge tile variants, other layers and spaces), bounded; GEMM and reset kernels apart
        # (many tiles of a sample share a reset kernel, few a GEMM kernel)
        gemm = _kernel(g["roles"][i], gl, GEMM_LOOPS)
        reset = _kernel(r["roles"][i], rl, RESET_LOOPS)
        return gemm, reset

    # -- DMA 2-D patterns (docs/vta.md §7.4.2, derived from ir_pass._fold_buffer_dim) -----------
    @staticmethod
    def dma_pattern(dims: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
        """Fold a DRAM region (dims outer -> inner as (extent, stride in elements)) into VTA's
        (y_size, x_size, x_stride) pattern: extent-1 dims vanish, a dim merges into the group
        inside it when its stride equals the group's extent x stride, a non-contiguous innermost
        group gets a dummy x of size 1; ok when at most 2 groups remain."""
        n = len(dims[0][0])
        groups = np.zeros(n, dtype=np.int64)
        g1_size, g1_stride = np.ones(n, dtype=np.int64), np.ones(n, dtype=np.int64)
        g2_size, g2_stride = np.ones(n, dtype=np.int64), np.ones(n, dtype=np.int64)
        cur_size, cur_stride = np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        for extent, stride in reversed(dims):
            extent, stride = _column(extent, n), _column(stride, n)
            live = extent > 1
            merge = live & (groups > 0) & (stride == cur_size * cur_stride)
            new = live & ~merge
            groups = groups + new
            cur_size = np.where(new, extent, np.where(merge, cur_size * extent, cur_size))
            cur_stride = np.where(new, stride, cur_stride)
            g1_size = np.where(groups == 1, np.where(live, cur_size, g1_size), g1_size)
            g1_stride = np.where(new & (groups == 1), stride, g1_stride)
            g2_size = np.where((groups == 2) & live, cur_size, g2_size)
            g2_stride = np.where(new & (groups == 2), stride, g2_stride)
        dummy = (groups >= 1) & (g1_stride != 1)
        # With a dummy x the first real group becomes y.
        x_size = np.where(groups == 0, 1, np.where(dummy, 1, g1_size))
        y_size = np.where(dummy, g1_size, np.where(groups >= 2, g2_size, 1))
        x_stride = np.where(dummy, g1_stride, np.where(groups >= 2, g2_stride, x_size))
        return {"ok": groups + dummy <= 2, "x_size": x_size, "y_size": y_size, "x_stride": x_stride}

    def _pattern_dims(self, kind: str) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """The DRAM region (`dma_pattern`'s dims) of a tile's transfer of `kind` ("inp", "wgt",
        "store"); None for a padded INP load (never folded: `inp_pattern`)."""
        g = self.geo
        if kind == "store":
            plane = g.out_h * g.out_w
            return [(self.tile_b, g.co * plane), (self.tile_co, plane), (self.tile_h, g.out_w), (self.tile_w, 1)]
        if kind == "wgt":
            kk = g.kh * g.kw
            z = np.zeros(self.n, dtype=np.int64)
            return [(self.tile_co, z + g.ci * kk), (self.tile_ci, z + kk), (z + g.kh, z + g.kw), (z + g.kw, z + 1)]
        if g.pad > 0:
            return None
        plane = g.height * g.width
        return [(self.tile_b, g.ci * plane), (self.tile_ci, plane), (self.hin_t, g.width), (self.win_t, 1)]

    def patterns(self, kinds: tuple[str, ...] = ROW_PATTERNS) -> None:
        """Compute the DMA patterns of `kinds` not computed yet in one `dma_pattern` pass over all
        of them (its cost is NumPy calls per dimension, not per config: a batch of a search's sample
        pays it once, not once per kind); each row is folded alone, as by its own call."""
        need = [(k, d) for k in kinds if k not in self._patterns and (d := self._pattern_dims(k)) is not None]
        if len(need) == 1:
            self._patterns[need[0][0]] = self.dma_pattern(need[0][1])
        elif need:
            n = self.n
            dims = [tuple(np.concatenate([_column(d[j][f], n) for _, d in need]) for f in (0, 1))
                    for j in range(len(need[0][1]))]
            pat = self.dma_pattern(dims)  # type: ignore[arg-type]
            for i, (k, _) in enumerate(need):
                self._patterns[k] = {f: v[i * n:(i + 1) * n] for f, v in pat.items()}
        if "inp" in kinds and "inp" not in self._patterns:
            self.inp_pattern()

    def store_pattern(self) -> dict[str, np.ndarray]:
        if "store" not in self._patterns:
            self._patterns["store"] = self.dma_pattern(self._pattern_dims("store"))  # type: ignore[arg-type]
        return self._patterns["store"]

    def inp_pattern(self) -> dict[str, np.ndarray]:
        """Unpadded INP load; a padded load is never folded: y = hin_t rows of win_t, stride W."""
        if "inp" not in self._patterns:
            g = self.geo
            dims = self._pattern_dims("inp")
            if dims is None:
                self._patterns["inp"] = {"ok": np.ones(self.n, dtype=bool), "x_size": self.win_t,
                                         "y_size": self.hin_t, "x_stride": np.full(self.n, g.width, dtype=np.int64)}
            else:
                self._patterns["inp"] = self.dma_pattern(dims)
        return self._patterns["inp"]

    def wgt_pattern(self) -> dict[str, np.ndarray]:
        if "wgt" not in self._patterns:
            self._patterns["wgt"] = self.dma_pattern(self._pattern_dims("wgt"))  # type: ignore[arg-type]
        return self._patterns["wgt"]


def pad_taps(n_out: int, k: int, stride: int, pad: int, n_in: int) -> np.ndarray:
    """(n_out, k) bool: output position o with kernel tap d reads input o·stride - pad + d inside
    the image (False: the tap reads the zero padding)."""
    o, d = np.arange(n_out)[:, None], np.arange(k)[None, :]
    pos = o * stride - pad + d
    return (pos >= 0) & (pos < n_in)


@lru_cache(maxsize=256)
def pad_skip_kernel(geo: Geometry, tile_ci: int, tile_co: int) -> tuple[Kernel, bool]:
    """(GEMM kernel, dst hazard) of a tile covering the whole output plane (tile_h = OH, tile_w =
    OW) that skips every multiply-accumulate whose input tap is zero padding (`vta` family knob
    `pad_skip`): the micro-ops enumerate, tap (di, dj) outer and pixel (h, w) inner, only the
    (pixel, tap) pairs inside the image, and the instruction's iter_out / iter_in walk the input /
    output channel blocks of the tile. No micro-op reads padding, so the INP tile is the unpadded
    image, inp[b][ci][H][W] (`compact_inp`): its channel blocks are contiguous in DRAM, one DMA
    row instead of one per image row, and no pad cycles. Adding zero products is
    all the skipped uops did, so the accumulators are bit-identical. Hazard (docs/vta.md §3.9): a
    micro-op writes the ACC row of one of the previous two in the stream (incl. the iteration wraps)."""
    g = geo
    uops = _pad_skip_uops(g)
    kk, plane = g.kh * g.kw, g.out_h * g.out_w
    kernel = Kernel(np.zeros((0, 4), dtype=np.int64), iter_out=tile_ci, iter_in=tile_co,
                    src_factor_out=g.height * g.width, wgt_factor_out=kk, dst_factor_in=plane,
                    wgt_factor_in=tile_ci * kk, explicit=uops)
    # the dst stream over two iterations of each loop (a wrap adds the loop's dst factor)
    d = uops[:, 0]
    streams = [np.concatenate([d, d + plane])] if tile_co > 1 else [d]
    if tile_ci > 1:  # iter_out advances: from the last co block back to the first
        streams.append(np.concatenate([d + (tile_co - 1) * plane, d]))
    hazard = len(d) < 3 or any((s[1:] == s[:-1]).any() or (s[2:] == s[:-2]).any() for s in streams)
    return kernel, bool(hazard)


@lru_cache(maxsize=64)
def _pad_skip_uops(g: Geometry) -> np.ndarray:
    """(m, 3) [dst, src, wgt] micro-ops of `pad_skip_kernel` (they depend on the layer alone, not
    on the tile's channel blocks): tap (di, dj) outer, pixel (h, w) inner, only taps inside the
    image. A 56x56 3x3 plane has ~28k of them: built with NumPy per tap, not per micro-op."""
    vh = pad_taps(g.out_h, g.kh, g.stride, g.pad, g.height)
    vw = pad_taps(g.out_w, g.kw, g.stride, g.pad, g.width)
    parts = [np.zeros((0, 3), dtype=np.int64)]
    for di in range(g.kh):
        for dj in range(g.kw):
            h, w = (a.ravel() for a in np.meshgrid(np.flatnonzero(vh[:, di]), np.flatnonzero(vw[:, dj]),
                                                   indexing="ij"))
            parts.append(np.stack([h * g.out_w + w, (h * g.stride + di - g.pad) * g.width + w * g.stride + dj - g.pad,
                                   np.full(h.shape, di * g.kw + dj)], axis=1).astype(np.int64))
    uops = np.concatenate(parts)
    uops.setflags(write=False)  # cached and shared
    return uops


def pad_skip_uops(geo: Geometry) -> int:
    """Micro-ops of `pad_skip_kernel` (the (pixel, tap) pairs inside the image): separable in h, w."""
    g = geo
    return int(pad_taps(g.out_h, g.kh, g.stride, g.pad, g.height).sum()
               * pad_taps(g.out_w, g.kw, g.stride, g.pad, g.width).sum())


@dataclass(frozen=True)
class PadRows:
    """The padding-skipping kernel of a tile that does not cover the whole output plane
    (`pad_rows_kernel`): one kernel for every tile position, its micro-ops ordered so that the
    taps reading the top padding (first row tile) come first and those reading the bottom padding
    (last row tile) last; a GEMM of the first / last row tile runs the kernel without its first
    `top` / last `bottom` micro-ops (uop_bgn / uop_end, `lower.emit`)."""

    kernel: Kernel
    top: int      # micro-ops the first row tile skips (it reads the top padding)
    bottom: int   # micro-ops the last row tile skips (the bottom padding)
    hazard: bool  # a tile position's micro-op range writes an ACC row one of the previous two wrote
    ok: bool      # only the first and last row tiles read row padding, each only its own border


def _dst_hazard_runs(d: np.ndarray, plane: int, tile_ci: int, tile_co: int) -> bool:
    """The dst stream `d` of one GEMM instruction's kernel repeats an ACC row within two micro-ops,
    over two iterations of each loop (iter_in over co: + plane; iter_out over ci: back from the last
    co block) — docs/vta.md §3.9."""
    streams = [np.concatenate([d, d + plane])] if tile_co > 1 else [d]
    if tile_ci > 1:
        streams.append(np.concatenate([d + (tile_co - 1) * plane, d]))
    return len(d) < 3 or any(bool((s[1:] == s[:-1]).any() or (s[2:] == s[:-2]).any()) for s in streams)


@lru_cache(maxsize=1024)
def pad_rows_kernel(geo: Geometry, tile_h: int, tile_w: int, tile_ci: int, tile_co: int) -> PadRows:
    """The `pad_skip` GEMM kernel of a tile of a padded conv that does not cover the whole output
    plane. The INP tile keeps the padded layout inp[b][ci][hin][win] and the padded load (rows and
    columns outside the image are the DMA's zero pads, never read from DRAM). The kernel holds the
    (pixel, tap) pairs of the tile, tap (di, dj) outer and pixel (h, w) inner, without
    - the taps reading column padding when the tile is the whole width (every tile then sits at both
      column borders; narrower tiles keep them: the left and right tiles read the zero pads), and
    - the taps reading row padding, by position: group T (the first row tile's taps above the
      image) first, then the taps every tile runs, then group B (the last row tile's taps below
      it); the first row tile's GEMM starts after T, the last's ends before B (both when one row
      tile covers the height). Needs the middle row tiles to read no row padding (`ok`).
    iter_out / iter_in walk the input / output channel blocks of the tile, as `pad_skip_kernel`."""
    g = geo
    s, p = g.stride, g.pad
    win = (tile_w - 1) * s + g.kw
    n_h = -(-g.out_h // tile_h)
    h, di = np.arange(tile_h)[:, None], np.arange(g.kh)[None, :]

    def rows(i: int) -> np.ndarray:  # input row of pixel h, tap di in row tile i, (tile_h, kh)
        return (i * tile_h + h) * s - p + di

    top, bot = rows(0) < 0, rows(n_h - 1) >= g.height
    ok = not (top & bot).any()
    if n_h > 1:
        ok = ok and not (rows(0) >= g.height).any() and not (rows(n_h - 1) < 0).any()
        ok = ok and all(((rows(i) >= 0) & (rows(i) < g.height)).all() for i in range(1, n_h - 1))
    cols = (pad_taps(g.out_w, g.kw, s, p, g.width) if tile_w == g.out_w
            else np.ones((tile_w, g.kw), dtype=bool))
    parts = []
    for grp in (top, ~top & ~bot, bot):  # (kh, kw, tile_h, tile_w) masks: tap outer, pixel inner
        di_, dj_, hh, ww = np.nonzero(grp.T[:, None, :, None] & cols.T[None, :, None, :])
        parts.append(np.stack([hh * tile_w + ww, (hh * s + di_) * win + ww * s + dj_, di_ * g.kw + dj_], axis=1))
    uops = np.concatenate(parts).astype(np.int64)
    uops.setflags(write=False)  # cached and shared
    n, a, b = len(uops), len(parts[0]), len(parts[2])
    kk, plane, hin = g.kh * g.kw, tile_h * tile_w, (tile_h - 1) * s + g.kh
    kernel = Kernel(np.zeros((0, 4), dtype=np.int64), iter_out=tile_ci, iter_in=tile_co,
                    src_factor_out=hin * win, wgt_factor_out=kk, dst_factor_in=plane,
                    wgt_factor_in=tile_ci * kk, explicit=uops)
    ranges = {(a, n - b)} if n_h == 1 else {(a, n), (0, n - b)} | ({(0, n)} if n_h > 2 else set())
    d = uops[:, 0]
    hazard = any(_dst_hazard_runs(d[lo:hi], plane, tile_ci, min(tile_co, 2)) for lo, hi in ranges)
    return PadRows(kernel, a, b, hazard, bool(ok))


def take(obj: object, rows: np.ndarray, n: int | None = None) -> object:
    """A copy of a batch object (`MappingBatch`, or one holding one) with only the configs `rows`:
    every array of length n (directly, in dicts, in nested batches) indexed, the rest shared;
    cached tables are dropped. Cheaper than rebuilding the geometry of repeated configs."""
    n = getattr(obj, "n", n)

    def pick(v: object) -> object:
        if isinstance(v, np.ndarray) and v.ndim and v.shape[0] == n:
            return v[rows]
        if isinstance(v, dict):
            return {k: pick(x) for k, x in v.items()}
        if isinstance(v, MappingBatch):
            return take(v, rows)
        return v

    new = object.__new__(type(obj))
    new.__dict__.update({k: pick(v) for k, v in vars(obj).items() if k != "_table"})
    if hasattr(obj, "n"):
        new.__dict__["n"] = len(rows)
    return new


# The zero-skipping kernel of conv2d_transpose_packed.vta (docs/vta.md §7.6).
TRANSPOSE_SPLIT_H = 4  # s[conv2d_stage].split(x_i, 4)  (docs/vta.md §7.6)
TRANSPOSE_SPLIT_W = 2  # s[conv2d_stage].split(x_j, 2)


def transpose_uops(layer: Layer, tile_h: int, tile_w: int, tile_ci: int, tile_co: int) -> np.ndarray:
    """(m, 3) int64 [dst, src, wgt] micro-ops of the transposed-conv GEMM kernel of one tile, in
    push order (codesign.schedule.templates docstring: the conv2d_transpose_packed.vta loops), inserted-zero multiplications skipped. Indices are
    those of the tile's SRAM layouts (module docstring) with stride 1 over the dilated,
    padded input."""
    kh, kw, s, bpad = layer.kernel_h, layer.kernel_w, layer.stride, layer.back_padding
    hin, win = tile_h + kh - 1, tile_w + kw - 1
    xi_n, xj_n = -(-tile_h // TRANSPOSE_SPLIT_H), -(-tile_w // TRANSPOSE_SPLIT_W)
    ci, xj, co, xi, xjj, dj, di, xii = (a.reshape(-1) for a in np.meshgrid(
        np.arange(tile_ci), np.arange(xj_n), np.arange(tile_co), np.arange(xi_n),
        np.arange(TRANSPOSE_SPLIT_W), np.arange(kw), np.arange(kh), np.arange(TRANSPOSE_SPLIT_H),
        indexing="ij"))
    h = xi * TRANSPOSE_SPLIT_H + xii
    w = xj * TRANSPOSE_SPLIT_W + xjj
    keep = (h < tile_h) & (w < tile_w) & ((h + di - bpad) % s == 0) & ((w + dj - bpad) % s == 0)
    h, w, ci, co, di, dj = h[keep], w[keep], ci[keep], co[keep], di[keep], dj[keep]
    dst = co * tile_h * tile_w + h * tile_w + w
    src = ci * hin * win + (h + di) * win + (w + dj)
    wgt = (co * tile_ci + ci) * kh * kw + di * kw + dj
    return np.stack([dst, src, wgt], axis=1).astype(np.int64)
