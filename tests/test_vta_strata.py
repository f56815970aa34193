"""A search's starting points on the vta family are drawn evenly over the residency strata (`NESTS`,
`VtaSpace.sample_strata`, `SpaceView.sample_valid(strata=True)`: XGBoost's annealing starts, the
candidates a model ranks), as Ansor samples its sketches evenly: uniform draws over the valid
schedules almost never start in a rare stratum (285 of ResNet-18's 495,622 valid 7x7 schedules are
input-stationary; the shared-input ones that win the layer are 6), and the searches did not find them."""

from __future__ import annotations

import collections

import numpy as np

from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.vta_space import NESTS
from codesign.tune.view import SpaceView
from codesign.workloads import Conv2D

HW = HwConfig.resolve("pynq_1x16")
LAYER = Conv2D(1, 512, 7, 7, 128, 3, 3, 1, 1)


def _nest(space, idx) -> list[tuple[int, int, int]]:
    pos = space.positions_of(np.asarray(idx, dtype=np.int64))
    cols = [space.knob_names.index(k) for k in ("wgt_stationary", "inp_stationary", "acc_resident")]
    return [tuple(int(v) for v in row) for row in pos[:, cols]]


def test_strata_give_every_residency_an_equal_share_of_valid_draws() -> None:
    space = get_space(LAYER, HW, "vta")
    valid = space.valid_indices()
    have = collections.Counter(_nest(space, valid))
    assert set(have) == set(NESTS) and min(have.values()) < len(valid) // 100  # some strata are rare
    rng = np.random.default_rng(0)
    got = space.sample_strata(5 * len(NESTS), rng)
    assert len(set(got.tolist())) == len(got) == 5 * len(NESTS)
    assert np.isin(got, valid).all()
    assert collections.Counter(_nest(space, got)) == {nest: 5 for nest in NESTS}
    view = SpaceView(space, enumerate_limit=0)
    drawn = view.sample_valid(10, rng, strata=True)
    assert len(collections.Counter(_nest(space, drawn))) == len(NESTS)  # every stratum
    uniform = space.sample_valid(10, np.random.default_rng(0))
    assert np.isin(uniform, valid).all()  # the uniform sampler is unchanged
