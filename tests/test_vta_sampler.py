"""Valid `vta` schedules sampled without enumerating the family (issue 19 §2: the learned searches see
the space through `SpaceView`): `VtaSpace.sample_support` contains every valid config, `sample_valid`
keeps exactly the valid ones, uniformly, and the learned tuners run on a vta space without ever
listing it."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.hw.config import HwConfig
from codesign.schedule.vta_space import NESTS, ORDERS, VtaSpace
from codesign.tune import tune_layer
from codesign.tune.view import ENUMERATE_LIMIT, SpaceView
from codesign.workloads import parse_layer

HW = HwConfig()
LAYER = parse_layer("conv2d:1,16,8,8,16,3,3,1,1")  # 1e8 configs, ~1,900 valid vta schedules


@pytest.fixture(scope="module")
def space():
    return VtaSpace(LAYER, HW)


@pytest.fixture(scope="module")
def valid(space):
    return np.asarray(space.valid_indices())


def _support(space: VtaSpace) -> np.ndarray:
    """Every index of `sample_support`, listed (small spaces only)."""
    pos, _geo, fold_ok, lift_ok, ps_ok = space.sample_support()
    names = space.knob_names
    rows = []
    for g in range(len(pos)):
        kern = [(f, lf, 0) for f in np.flatnonzero(fold_ok[g]) for lf in np.flatnonzero(lift_ok[g])]
        kern += [(0, 0, 1)] if ps_ok[g] else []
        for f, lf, ps in kern:
            for o in range(len(ORDERS)):
                for ws, ins, acc in NESTS:
                    p = pos[g].copy()
                    for k, v in (("uop_fold", f), ("uop_lift", lf), ("pad_skip", ps), ("order", o),
                                 ("wgt_stationary", ws), ("inp_stationary", ins), ("acc_resident", acc)):
                        p[names.index(k)] = v
                    rows.append(p)
    return space.index_of(np.asarray(rows))


def test_the_support_holds_every_valid_config_and_is_far_smaller_than_the_space(space, valid):
    support = _support(space)
    assert len(support) == space.support_size()
    assert np.isin(valid, support).all()
    assert len(support) < space.size / 100


def test_samples_are_distinct_valid_uniform_and_respect_exclude(space, valid):
    rng = np.random.default_rng(3)
    exclude = set(valid[::2].tolist())
    got = space.sample_valid(300, rng, exclude)
    assert len(got) == 300 and len(set(got.tolist())) == 300
    assert np.isin(got, valid).all() and not exclude & set(got.tolist())
    # uniform: the share of order 0 among the samples matches the valid set's (5 sigma)
    draws = space.sample_valid(600, np.random.default_rng(4))
    order = space.knob_names.index("order")
    p = float(np.mean(space.positions_of(valid)[:, order] == 0))
    q = float(np.mean(space.positions_of(draws)[:, order] == 0))
    assert abs(q - p) <= 5 * np.sqrt(p * (1 - p) / len(draws))


def test_the_valid_count_estimate_is_close_and_the_same_each_time(space, valid):
    est = space.valid_estimate()
    assert abs(est - len(valid)) <= 0.1 * len(valid)
    assert VtaSpace(LAYER, HW).valid_estimate() == est


def test_the_staged_mask_is_the_mask(space, valid):
    idx = np.concatenate([valid[:200], np.random.default_rng(0).integers(0, space.size, 2000)])
    assert (space.valid_mask_staged(idx) == space.valid_mask(idx)).all()
    assert space.valid_mask_staged(idx, exact=False)[space.valid_mask(idx)].all()  # a superset


@pytest.mark.parametrize("tuner", ["random", "xgb", "evo", "bandit"])
def test_learned_tuners_search_a_vta_space_without_listing_it(tuner, monkeypatch, valid):
    space = VtaSpace(LAYER, HW)  # its own: nothing listed by another test
    assert space.size > ENUMERATE_LIMIT

    listed = VtaSpace.valid_indices

    def refuse(self):  # noqa: ANN001, ANN202 - only this space (the producer's cached one may be listed)
        if self is space:
            raise AssertionError("the vta family was enumerated")
        return listed(self)

    monkeypatch.setattr(VtaSpace, "valid_indices", refuse)
    view = SpaceView(space)
    res = tune_layer(LAYER, HW, tuner=tuner, budget=24, seed=0, space=space, view=view)
    assert res.measurements == 24 and res.best_seconds is not None
    assert np.isin([h.config.index for h in res.history], valid).all()
    assert not view.enumerable and abs(view.n_valid() - len(valid)) <= 0.1 * len(valid)


def test_listing_and_sampler_cover_every_knob_value_the_mask_accepts() -> None:
    """The two-pass listing and the sampler hold knobs at 0 only where no rule of the first pass
    reads them: valid configs drawn at random from the whole space are all listed, and every
    value a valid config takes of each knob is listed and sampled (uop_preload was held at 0)."""
    space = VtaSpace(parse_layer("conv2d:1,16,8,8,16,3,3,1,1"), HwConfig())
    listed = space.valid_indices()
    rng = np.random.default_rng(1)
    draws = rng.integers(0, space.size, size=1 << 21)
    valid = draws[space.valid_mask(draws)]
    assert valid.size > 10 and np.isin(valid, listed).all()
    sampled = np.asarray(space.sample_valid(2000, rng))
    assert space.valid_mask(sampled).all()
    pos_l, pos_s = space.positions_of(listed), space.positions_of(sampled)
    for j, knob in enumerate(space.knobs):
        values = set(pos_l[:, j].tolist())
        assert set(space.positions_of(valid)[:, j].tolist()) <= values, knob.name
        assert set(pos_s[:, j].tolist()) == values, knob.name
    assert abs(space.valid_estimate() - listed.size) <= 0.15 * listed.size
