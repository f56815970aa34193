"""`uops.use_order` is read from the emitter's blocks (`emit.pair_order`): it must list the kernels in
the order the program order of docs/vta.md §7.3 states, for every shape of pair."""

from __future__ import annotations

import numpy as np

from codesign.lower.uops import use_order


def _spelled_out(T, K, G, E, R, n_pre, C, L, early):
    """The order written out loop by loop: for k: for c: for t: (k = 0: G resets), G·L GEMMs
    (`early`: thread t's first n_pre epilogue ops after its last GEMMs); then for t: the first n_pre
    ops; for chunk c: for t: chunk c; for t: the rest."""
    n_post = E - n_pre - (1 if R else 0)
    GL = G * L
    S = G * C + GL * C + n_pre + R + n_post
    base = G * C + GL * C
    uses = [t * S + slot for k in range(K) for c in range(C) for t in range(T)
            for slot in ([c * G + b for b in range(G)] if k == 0 else []) + [G * C + c * GL + x for x in range(GL)]
            + ([base + e for e in range(n_pre)] if early and k == K - 1 and c == C - 1 else [])]
    if not early:
        uses += [t * S + base + e for t in range(T) for e in range(n_pre)]
    uses += [t * S + base + n_pre + c for c in range(R) for t in range(T)]
    uses += [t * S + base + n_pre + R + e for t in range(T) for e in range(n_post)]
    return uses, list(dict.fromkeys(uses))


def test_use_order_is_the_program_order_for_random_pairs():
    rng = np.random.default_rng(0)
    for _ in range(300):
        T, K, G, C, L = (int(x) for x in rng.integers(1, (5, 6, 3, 4, 3)))
        E = int(rng.integers(0, 5))
        R = int(rng.integers(1, 4)) if E and rng.random() < 0.4 else 0
        n_pre = int(rng.integers(0, E)) if R else E
        early = bool(rng.random() < 0.5)
        uses, first = use_order(T, K, G, E, R, n_pre, C, L, early)
        want_uses, want_first = _spelled_out(T, K, G, E, R, n_pre, C, L, early)
        assert uses.tolist() == want_uses, (T, K, G, E, R, n_pre, C, L, early)
        assert first.tolist() == want_first
