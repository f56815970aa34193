"""The lowering's fixed cost per schedule (issue 35 §4): `access.spec` builds its scalars by
position and `uops` plans edge tiles in one compiled call; both are the by-name / NumPy statements
they replaced, on sampled `vta` mappings (edge tiles, inner loops, stationary operands, fused
epilogues)."""

from __future__ import annotations

import numpy as np

from codesign.hw.config import HwConfig
from codesign.lower import dram_bases
from codesign.lower.access import AXIS, SPEC, VARIANT, loop_table, spec
from codesign.lower.uops import pair_variants, uop_plan
from codesign.mapping.mapping import AluOp, fuse, fused_slots, inner_products
from codesign.schedule import get_space
from codesign.tune.env import sample_valid_pool
from codesign.workloads import Conv2D

HW = HwConfig.resolve("pynq_1x16")
LAYER = Conv2D(1, 64, 28, 28, 128, 3, 3, 2, 1)  # 14 x 14 output: tiles of 4, 8 leave edges


def _mappings(n: int = 60) -> list:
    space = get_space(LAYER, HW, "vta")
    ms = [space.mapping(int(i)) for i in sample_valid_pool(space, n, np.random.default_rng(3))]
    return ms + [fuse(m, (AluOp("add", src="bias"), AluOp("gemm", 1, src="residual")) + m.epilogue) for m in ms[:20]]


def _named(m, bases, ring_start, wgt_depth) -> np.ndarray:
    """The scalars by name, as `spec` stated them before it built them by position."""
    g, t, red, C = m.geo, m.tile, m.red, m.n_inner
    fs = fused_slots(m, wgt_depth)
    fused = (dict(bias_base=bases[3], res_base=bases[4], id_base=bases[5], bias_sram=fs.bias,
                  res_chunks=fs.chunks if m.has_residual else 0, res_pitch=fs.res_pitch, id_sram=fs.ident,
                  res_planes=fs.planes, id_each=int(fs.ident_each)) if m.has_bias or m.has_residual else {})
    pi, pw, po = m.pattern("inp"), m.pattern("wgt"), m.pattern("out")
    pl = inner_products(tuple(lp.extent for lp in m.pair_loops))
    il = inner_products(tuple(lp.extent for lp in m.inner_loops))
    places = {op: pl[m.level(op)] if m.level(op) < red else 0 for op in ("inp", "wgt")}
    iplaces = {op: 1 if m.level(op) < red else C if m.level(op) == red else il[m.level(op) - red - 1]
               for op in ("inp", "wgt")}
    last = m.edges.last if m.edges is not None else (-1,) * 4
    named = dict(H=g.height, W=g.width, OH=g.out_h, OW=g.out_w, CI=g.ci, CO=g.co, s=g.stride,
                 p=0 if m.inp_unpadded else g.pad, kk=g.kh * g.kw, tb=t.b, th=t.h, tw=t.w, tci=t.ci, tco=t.co,
                 hin=t.hin, win=t.win, c_img=m.inp_channels, co_pg=m.co_per_group,
                 inp_y=pi.y_size, inp_x=pi.x_size, inp_stride=pi.x_stride, wgt_y=pw.y_size, wgt_x=pw.x_size,
                 wgt_stride=pw.x_stride, out_y=po.y_size, out_x=po.x_size, out_stride=po.x_stride,
                 inp_place=places["inp"], wgt_place=places["wgt"], inp_base=bases[0], wgt_base=bases[1],
                 out_base=bases[2], P=m.n_pairs, K=m.n_steps, T=m.n_threads, inp_pt=t.inp_sram,
                 wgt_pt=t.wgt_sram, acc_pt=C * t.acc_sram, ring_start=ring_start, inp_split=m.inp_loads,
                 e_ci=t.ci, e_acc=C * t.acc_sram, h_last=last[0], w_last=last[1], co_last=last[2],
                 ci_last=last[3], n_inner=C, acc_sub=t.acc_sram, inp_iplace=iplaces["inp"],
                 wgt_iplace=iplaces["wgt"], e_co=t.co, e_pix=t.h * t.w, ps_top=m.gemm_trim[0],
                 ps_bot=m.gemm_trim[1], inp_shared=int(m.inp_shared), **fused)
    return np.array([named.get(k, 0) for k in SPEC], dtype=np.int64)


def test_spec_scalars_are_the_named_statement():
    kinds = set()
    for m in _mappings():
        bases = dram_bases(m, HW)[0]
        sc, loops, threads, scv, inner = spec(m, bases, 3, HW.wgt_depth)
        assert np.array_equal(sc, _named(m, bases, 3, HW.wgt_depth))
        assert loops is loop_table(m.pair_loops) and threads is loop_table(m.vthreads)
        assert inner is loop_table(m.inner_loops)
        rows = 1 if m.edges is None else len(m.edges.variants)
        other = [k for k in range(len(SPEC)) if k not in VARIANT]
        assert scv.shape == (rows, len(SPEC)) and (scv[:, other] == sc[other]).all()
        if m.edges is not None:  # each variant's own transfer sizes
            for v, e in enumerate(m.edges.variants):
                assert scv[v, [SPEC.index(k) for k in ("hin", "win", "e_ci", "e_co")]].tolist() == [
                    e.tile.hin, e.tile.win, e.tile.ci, e.tile.co]
        kinds.add((m.edges is not None, m.has_bias, m.n_inner > 1, m.level("inp") < m.red))
    assert len(kinds) >= 5  # edges, fused epilogues, inner loops and stationary INP were all covered


def _pair_variants_ref(m) -> np.ndarray:
    last = dict(zip(("h", "w", "co"), m.edges.last[:3]))
    T, P, C = m.n_threads, m.n_pairs, m.n_inner
    out = np.zeros((T, P, C), dtype=np.int64)
    walks = ((np.arange(P)[None, :, None], loop_table(m.pair_loops).tolist()),
             (np.arange(T)[:, None, None], loop_table(m.vthreads).tolist()),
             (np.arange(C)[None, None, :], loop_table(m.inner_loops).tolist()))
    for bit, a in enumerate(("h", "w", "co")):
        if last[a] < 0:
            continue
        idx = np.zeros((T, P, C), dtype=np.int64)
        for it, tab in walks:
            for ext, place, ax, scale in tab:
                if ax == AXIS[a]:
                    idx += (it // place) % ext * scale
        out |= (idx == last[a]).astype(np.int64) << bit
    return out


def test_compiled_edge_plan_is_the_numpy_statement():
    n_edges = 0
    for m in _mappings():
        u = uop_plan(m, HW.uop_depth)
        if m.edges is None:
            assert u.special.shape == (0,)
            continue
        n_edges += 1
        assert np.array_equal(pair_variants(m), _pair_variants_ref(m))
        if m.uop_preload:
            assert (u.first_pair == -1).all() and u.special.shape == (0,)
        else:
            assert np.array_equal(u.special, np.unique(u.first_pair[u.first]))
            never = np.setdiff1d(np.arange(len(u.sizes)), u.first)
            assert (u.first_pair[never] == np.iinfo(np.int64).max).all()
        first_sizes = u.sizes[u.first]
        assert np.array_equal(u.dram_off[u.first], np.cumsum(first_sizes) - first_sizes)
        assert u.n_uops == int(first_sizes.sum())
    assert n_edges >= 10


def _blocks(m) -> tuple:
    from codesign.lower import lower_blocks
    for kept in ("_uop_plan", "_spec"):  # the plan and spec kept on the mapping: planned afresh
        m.__dict__.pop(kept, None)
    b = lower_blocks(m, HW)
    return b.rows.tobytes(), b.block_start.tobytes(), b.pair_class.tobytes(), b.periods.tobytes(), b.n_insns


def test_shared_full_tile_plans_give_each_mapping_its_own_program():
    """Plans keyed by kernel sizes and use order (`_ring_plan`, `_preload_plan`, `kernel_sizes`):
    a mapping lowered after others of its key gets the program it gets built alone."""
    from codesign.lower import uops
    caches = (uops._ring_plan, uops._preload_plan, uops.kernel_sizes)
    templates = get_space(LAYER, HW)  # consecutive template configs share kernel sizes and use orders
    ms = [m for m in _mappings(400) if m.edges is None] + [templates.mapping(int(i)) for i in templates.valid_indices()[:80]]
    alone = []
    for m in ms:
        for c in caches:
            c.cache_clear()
        alone.append(_blocks(m))
    for c in caches:
        c.cache_clear()
    shared = [_blocks(m) for m in ms]
    assert shared == alone
    assert uops._ring_plan.cache_info().hits > 0 and uops._preload_plan.cache_info().hits > 0  # keys were shared
    for m in ms:
        u = uops.uop_plan(m, HW.uop_depth)
        assert u.n_uops == (int(u.sizes[u.first].sum()) if m.uop_preload else -1)
    assert not any(a.flags.writeable for a in (u.sizes, u.uses, u.dram_off, u.first, u.kvar, u.ring.load, u.ring.bgn))


def test_plan_and_spec_kept_on_the_mapping_are_the_fresh_ones():
    """`uop_plan` and `lower._spec` keep their result on the mapping for the last depth / hw: a
    second lowering reuses them and writes the same program; another depth plans afresh."""
    from codesign.lower import _spec, lower_blocks, uops
    for m in _mappings(20):
        first = _blocks(m)  # planned afresh
        u = uops.uop_plan(m, HW.uop_depth)
        assert uops.uop_plan(m, HW.uop_depth) is u and _spec(m, HW, u) is _spec(m, HW, u)
        b = lower_blocks(m, HW)
        assert (b.rows.tobytes(), b.block_start.tobytes(), b.pair_class.tobytes(), b.periods.tobytes(),
                b.n_insns) == first
        other = uops.uop_plan(m, HW.uop_depth * 2)
        assert other is not u and uops.uop_plan(m, HW.uop_depth * 2) is other
