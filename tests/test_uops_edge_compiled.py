"""The compiled edge-tile micro-op plan (`uops._edge_kernels`, `uops._edge_first`) is the NumPy
statement it replaced, on random shapes; `mapping.lazy` caches per instance like cached_property."""

from __future__ import annotations

import numpy as np

from codesign.lower.uops import _edge_first, _edge_kernels
from codesign.mapping.edges import CI_BIT, PAIR_BITS
from codesign.mapping.lazy import lazy


def _kernels_ref(sizes, T, S, GC, bias, edged, vsize):
    kvar = np.repeat(np.arange(len(sizes), dtype=np.int64)[:, None], len(vsize), axis=1)
    size_list = sizes.tolist()
    origin = [(t, s, 0) for t in range(T) for s in range(S)]
    for t in range(T):
        for v in range(1, len(vsize)):
            if v & ~edged:
                continue
            for slot in (*range(2 * GC), bias):
                gemm = GC <= slot < 2 * GC
                key = v if gemm else v & PAIR_BITS
                if slot >= S or key == 0:
                    continue
                if key != v:
                    kvar[t * S + slot, v] = kvar[t * S + slot, key]
                    continue
                kvar[t * S + slot, v] = len(size_list)
                size_list.append(int(vsize[key, 0 if gemm else 1 if slot < GC else 2]))
                origin.append((t, slot, key))
    return kvar, np.array(size_list, dtype=np.int64), np.array(origin, dtype=np.int64)


def _first_ref(uses, S, GC, G, T, ci_last, pv, kvar, n_kernels):
    P = pv.shape[1]
    C = pv.shape[2]
    slot_of, thread_of = uses % S, uses // S
    is_gemm = (slot_of >= GC) & (slot_of < 2 * GC)
    step = np.where(is_gemm, (np.cumsum(is_gemm) - 1) // (T * GC), -1)
    ci = np.where(is_gemm & (step == ci_last) & (ci_last >= 0), CI_BIT, 0)
    sub = np.where(slot_of < GC, slot_of // G, np.where(slot_of < 2 * GC, (slot_of - GC) // G, 0))
    codes = (np.arange(T * C, dtype=np.int64).reshape(T, C, 1) * 8 + pv.transpose(0, 2, 1)).ravel()
    sp = np.array(sorted(set((np.unique(codes, return_index=True)[1] % P).tolist())), dtype=np.int64)
    kids = kvar[uses[None, :], pv[thread_of[None, :], sp[:, None], sub[None, :]] | ci[None, :]].ravel()
    at = np.sort(np.unique(kids, return_index=True)[1])
    first_pair = np.full(n_kernels, -1, dtype=np.int64)
    first_pair[kids[at]] = sp[at // len(uses)]
    return kids[at], first_pair


def test_compiled_edge_plan_is_the_numpy_statement():
    rng = np.random.default_rng(0)
    for _ in range(200):
        T, G, C, K = (int(x) for x in rng.integers(1, (4, 3, 5, 4)))
        GC, E = G * C, int(rng.integers(0, 3))
        S = 2 * GC + E
        bias = 2 * GC + (int(rng.integers(0, E)) if E and rng.random() < 0.5 else S)
        edged = int(rng.integers(0, 16))
        vsize = rng.integers(1, 50, size=(16, 3)).astype(np.int64)
        sizes = rng.integers(1, 50, size=T * S).astype(np.int64)
        got, want = _edge_kernels(sizes, T, S, GC, bias, edged, vsize), _kernels_ref(sizes, T, S, GC, bias, edged, vsize)
        for g, w in zip(got, want):
            assert np.array_equal(g, w)
        kvar, n_k = want[0], len(want[1])
        # uses: for k: for c: for t: resets (k = 0), GEMMs; then the epilogue per thread
        uses = np.array([t * S + s for k in range(K) for c in range(C) for t in range(T)
                         for s in ([c * G + b for b in range(G)] if k == 0 else []) + [GC + c * G + b for b in range(G)]]
                        + [t * S + 2 * GC + e for t in range(T) for e in range(E)], dtype=np.int64)
        P = int(rng.integers(1, 9))
        pv = (rng.integers(0, 8, size=(T, P, C)) & (edged & PAIR_BITS)).astype(np.int64)
        ci_last = int(rng.integers(-1, K))
        got_first = _edge_first(uses, S, GC, G, T, ci_last, pv, kvar, n_k)
        want_first = _first_ref(uses, S, GC, G, T, ci_last, pv, kvar, n_k)
        assert np.array_equal(got_first[0], want_first[0]) and np.array_equal(got_first[1], want_first[1])


def test_lazy_computes_once_per_instance():
    calls = []

    class A:
        def __init__(self, x):
            self.x = x

        @lazy
        def y(self):
            calls.append(self.x)
            return self.x * 2

    a, b = A(1), A(2)
    assert (a.y, a.y, b.y) == (2, 2, 4) and calls == [1, 2]
