"""The rules a schedule space and `mapping.legality` share are written once (`mapping.table`): random
valid and invalid configs of every schedule family go through both paths, the space's table row
(vectorized, from the knobs) and the one-row table of the mapping its producer builds, and the two
agree field by field and rule by rule."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.hw.config import HwConfig
from codesign.mapping import table as shared
from codesign.mapping.legality import violations
from codesign.schedule import validity
from codesign.schedule.families import mapping_for
from codesign.schedule.space import get_space
from codesign.schedule.templates import clip_epilogue
from codesign.schedule.vta.producer import row_mapping
from codesign.workloads.layers import parse_layer

HW = HwConfig.resolve("pynq_1x16")
#: a padded conv with edge tiles, a strided 1x1, a grouped conv, a transposed conv, a dense layer
LAYERS = ("conv2d:1,32,15,15,48,3,3,1,1", "conv2d:1,64,14,14,64,1,1,2,0", "conv2d:1,64,14,14,64,3,3,1,1,1,4",
          "conv2d_transpose:1,32,8,8,16,4,4,2,1", "dense:1,256,128")
FIELDS = [f.name for f in dataclasses.fields(shared.MappingTable)]
#: rules on knob values the producer does not model (it builds what the knobs say, e.g. a
#: padding-skipping kernel where it does not apply, or an input-stationary tile of several
#: reduction steps, which legality refuses as `residency_reuse`): configs breaking them are not compared
UNMODELLED = frozenset({"inp_stationary_ci", "pad_skip_tile", "pad_skip_lift", "uop_fold_live", "uop_lift_live", "uop_lift_edge",
                        "vthread_div", "vthread_count", "uop_flat_reset_edge"})
SHARED = ("sram_acc", "sram_inp", "sram_wgt", "acc_spill", "nest_edge", "stationary_both", "uop_preload_fit")


def _row(tab: shared.MappingTable, i: int) -> dict[str, int]:
    return {f: int(getattr(tab, f)[i]) for f in FIELDS}


def _space_ok(space: object, b: object) -> dict[str, bool]:
    """The shared rules' verdicts on row 0 of the space's batch `b` (its INP rule is staged in two:
    the bound any residency could share, then the residency's own sharing)."""
    ok = {r.name: bool(r.ok[0]) for r in space.rules(b)}  # type: ignore[attr-defined]
    ok["sram_inp"] = ok["sram_inp"] and ok["sram_inp_shared"]
    return {name: ok[name] for name in SHARED}


@pytest.mark.parametrize("text", LAYERS)
def test_vta_space_and_legality_agree(text: str) -> None:
    layer = parse_layer(text)
    space = get_space(layer, HW, "vta")
    rng = np.random.default_rng(7)
    valid = space.sample_valid(30, rng)
    assert len(valid) > 0
    # invalid configs near valid ones: one knob of a valid config moved to a random value
    pos = space.positions_of(np.repeat(valid, 6))
    knob = rng.integers(0, len(space.dims), size=len(pos))
    pos[np.arange(len(pos)), knob] = rng.integers(0, np.asarray(space.dims)[knob])
    # and uniform draws that break a shared rule (and none the producer does not model)
    draws = rng.integers(0, space.size, size=20000)
    rules = space.rules(space.batch(draws))
    modelled = np.logical_and.reduce([r.ok for r in rules if r.name in UNMODELLED])
    hit = np.logical_or.reduce([~r.ok for r in rules if r.name in SHARED + ("sram_inp_shared",)])
    targeted = draws[np.flatnonzero(modelled & hit)[:25]]
    checked = {"valid": 0, "invalid": 0}
    broken: set[str] = set()
    for idx in np.concatenate([valid, space.index_of(pos), targeted]).tolist():
        b = space.batch(np.array([idx], dtype=np.int64))
        if any(r.name in UNMODELLED and not r.ok[0] for r in space.rules(b)):
            continue
        m = row_mapping.__wrapped__(space, idx, 8)  # the producer, without the space's validity check
        assert _row(space.table(b), 0) == _row(shared.of_mapping(m), 0), idx
        mine = {name for name, _ in violations(m, HW)}
        verdict = _space_ok(space, b)
        assert {n for n, ok in verdict.items() if not ok} == mine & set(SHARED), idx
        is_valid = space.why_invalid(idx) is None
        if is_valid:
            assert mine == set(), (idx, mine)  # a valid schedule is a legal mapping
        checked["valid" if is_valid else "invalid"] += 1
        broken |= mine
    assert checked["valid"] >= len(valid) and checked["invalid"] > 0, checked
    if text.startswith("conv2d:"):  # the small transposed and dense spaces break none in these draws
        assert broken & set(SHARED), broken  # some shared rule was broken and compared


@pytest.mark.parametrize("text", [t for t in LAYERS if t.startswith(("conv2d:", "dense"))][:2] + ["dense:1,256,128"])
def test_template_space_and_legality_agree(text: str) -> None:
    """The AutoTVM family: its SRAM rules are the shared ones on the template's table."""
    layer = parse_layer(text)
    space = get_space(layer, HW)
    names = tuple(r.name for r in validity.check(space.mapping_batch(np.zeros(1, dtype=np.int64))))
    rng = np.random.default_rng(3)
    for idx in rng.integers(0, space.size, size=60).tolist():
        t = space.mapping_batch(np.array([idx], dtype=np.int64))
        m = space.mapping(idx, skip=names)  # built whatever the rules say
        row = _row(validity.table(t, len(clip_epilogue(0))), 0)
        assert row == _row(shared.of_mapping(m), 0), idx
        ok = {r.name: bool(r.ok[0]) for r in validity.check(t)}
        mine = {name for name, _ in violations(m, HW)}
        for buf in ("acc", "inp", "wgt"):
            assert ok[f"sram_{buf}"] == (f"sram_{buf}" not in mine), (idx, buf)
        if space.is_valid(idx):
            assert violations(mapping_for(layer, space.get(idx), HW), HW) == []


def test_rule_refused_with_the_same_message() -> None:
    """One rule, one message: a mapping breaking the preload rule is refused by legality with the
    text the space gives the same config."""
    layer = parse_layer("conv2d:1,64,14,14,64,3,3,1,1")
    hw = HwConfig.resolve("pynq_1x16_i8w8a32_10_15_18_17")  # a 1,024-entry micro-op buffer
    space = get_space(layer, hw, "vta")
    rng = np.random.default_rng(11)
    pos = space.positions_of(rng.integers(0, space.size, size=20000))
    pos[:, space.knob_names.index("uop_preload")] = 1
    draws = space.index_of(pos)
    b = space.batch(draws)
    rules = space.rules(b)
    modelled = np.logical_and.reduce([r.ok for r in rules if r.name in UNMODELLED])
    rule = shared.uop_preload_fit(space.table(b), hw)
    at = np.flatnonzero(modelled & ~rule.ok)
    assert at.size, "no config breaking uop_preload_fit drawn"
    m = row_mapping.__wrapped__(space, int(draws[at[0]]), 8)
    assert ("uop_preload_fit", rule.message(int(at[0]))) in violations(m, hw)
