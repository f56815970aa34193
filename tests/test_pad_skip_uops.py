"""`pad_skip_kernel`'s micro-ops, built per tap with NumPy, equal the per-micro-op enumeration
they replaced (tap (di, dj) outer, pixel (h, w) inner, only taps inside the image), row for row."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.mapping.batch import Geometry, _pad_skip_uops, pad_skip_uops, pad_taps


def _reference(g: Geometry) -> np.ndarray:
    vh = pad_taps(g.out_h, g.kh, g.stride, g.pad, g.height)
    vw = pad_taps(g.out_w, g.kw, g.stride, g.pad, g.width)
    rows = [(h * g.out_w + w, (h * g.stride + di - g.pad) * g.width + w * g.stride + dj - g.pad, di * g.kw + dj)
            for di in range(g.kh) for dj in range(g.kw)
            for h in np.flatnonzero(vh[:, di]).tolist() for w in np.flatnonzero(vw[:, dj]).tolist()]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


@pytest.mark.parametrize("h,w,k,s,p", [(56, 56, 3, 1, 1), (56, 56, 3, 2, 1), (7, 7, 3, 1, 1), (10, 9, 5, 1, 2),
                                       (14, 14, 1, 2, 0), (5, 5, 7, 2, 3), (3, 4, 3, 1, 1)])
def test_pad_skip_uops_equal_the_enumeration(h, w, k, s, p):
    g = Geometry("conv2d", 1, 4, 4, h, w, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1, k, k, s, p)
    got, want = _pad_skip_uops(g), _reference(g)
    assert got.dtype == want.dtype and got.shape == want.shape and (got == want).all()
    assert got.shape[0] == pad_skip_uops(g)
