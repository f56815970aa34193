"""The `vta` schedule family (codesign/schedule/vta_space.py): sampled valid schedules of several
layers x hardware configs are bit-exact against NumPy, race-free (`simulate(check=True)`), and
their block-form cycles equal the full program's; every valid AutoTVM template schedule is a
member (the same program) so the family's optimum is never worse; invalid configs are rejected
with the rule's name; `Config.family` keeps AutoTVM records unchanged."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import numpy as np
import pytest

from codesign.commands import space as space_cmd
from codesign.errors import ConfigError, InvalidSchedule
from codesign.evaluate.compiler import compile_insns
from codesign.evaluate.run import measure, run_layer
from codesign.hw.config import HwConfig
from codesign.mapping.batch import GEMM_LOOPS
from codesign.schedule import get_space
from codesign.schedule.families import mapping_for
from codesign.schedule.knobs import Config
from codesign.schedule.vta_space import FOLD_PAIRS, N_FEATURES, ORDERS, VTHREADS, VtaSpace
from codesign.tune import exhaustive_table
from codesign.vta import isa
from codesign.workloads import Conv2D, Conv2DTranspose, Dense

LAYERS = (Conv2D(4, 32, 8, 8, 64, 3, 3, 1, 1),   # padded 3x3
          Conv2D(4, 64, 8, 8, 32, 1, 1, 2, 0),   # strided 1x1
          Conv2D(4, 64, 6, 6, 32, 3, 3, 1, 1, groups=2),
          Conv2DTranspose(4, 16, 4, 4, 16, 4, 4, 2, 1),
          Dense(4, 64, 64))


def _sample(space: VtaSpace, n: int, seed: int) -> list[Config]:
    """n valid configs, the first ones chosen to cover what the template cannot do: a
    stationary weight tile, threads on w, INP loaded one block per LOAD, a chosen micro-op fold."""
    valid = space.valid_indices()
    # the first valid config of each kind, from the configs with its knob values (`valid_where`),
    # batched a chunk at a time up to the first hit (a batch of the whole listing cost seconds)
    kinds = (({"wgt_stationary": 1}, None), ({"vthread": VTHREADS.index("w")}, None),
             ({"order": range(1, len(ORDERS))}, lambda b: b.split), ({"uop_fold": range(1, len(FOLD_PAIRS) + 1)}, None))
    picks = []
    for fixed, want in kinds:
        among = space.valid_where(**fixed)
        for start in range(0, among.size if want else min(among.size, 1), 1 << 12):
            part = among[start:start + (1 << 12)]
            hits = np.flatnonzero(want(space.batch(part))) if want else np.arange(part.size)
            if hits.size:
                picks.append(int(part[hits[0]]))
                break
    rng = np.random.default_rng(seed)
    picks += rng.choice(valid, size=min(n, len(valid)), replace=False).tolist()
    return [space.get(int(i)) for i in dict.fromkeys(picks)]


@pytest.mark.parametrize("layer", LAYERS, ids=lambda ly: ly.name)
def test_sampled_schedules_are_bit_exact_race_free_and_block_timing_is_exact(layer, stock_hw, vta_case):
    case = vta_case(layer, stock_hw)
    assert case.space.n_valid >= get_space(case.layer, case.hw).n_valid
    for config in _sample(case.space, 4, seed=len(case.layer.name)):
        assert config.family == "vta"
        case.check(config, run_layer=True)  # bit-exact (run_layer too), race-free, exactly timed


def test_the_family_reaches_what_the_template_cannot(vta_case):
    """A padded 3x3 conv with all input channels in one tile: INP loaded one channel block per
    LOAD, each weight tile loaded once per co tile (the template loads it at every pair)."""
    case = vta_case(Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1))
    layer, hw = case.layer, case.hw
    config = case.config({"tile_b": [1, 1], "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [1, 2],
                          "tile_co": [2, 2], "order": ORDERS.index(("b", "co", "h", "w")),
                          "wgt_stationary": 1, "vthread": 0, "uop_fold": 0})
    assert get_space(layer, hw).why_invalid(
        {"tile_b": [1, 1], "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [1, 2], "tile_co": [2, 2],
         "oc_nthread": 1, "h_nthread": 1}).startswith("padding: a padded conv (pad=1) needs tile_ci[1]=1")
    insns = compile_insns(layer, config, hw).insns
    op, mem = insns[:, isa.COL["opcode"]], insns[:, isa.COL["memory_type"]]
    assert int(((op == isa.OP_LOAD) & (mem == isa.MEM_WGT)).sum()) == 2          # one per co tile
    assert int(((op == isa.OP_LOAD) & (mem == isa.MEM_INP)).sum()) == 2 * 2 * 2 + 1  # pairs x ci blocks + no-op
    assert np.array_equal(run_layer(layer, config, hw).output, case.ref)


@pytest.mark.parametrize("layer", LAYERS, ids=lambda ly: ly.name)
def test_template_schedules_are_members_with_the_same_program(layer, stock_hw, vta_case):
    case = vta_case(layer, stock_hw)
    layer, hw, vta = case.layer, case.hw, case.space
    auto = get_space(layer, hw)
    rng = np.random.default_rng(1)
    # every template point passes the family's validity mask (the listing equals the mask: the
    # two_pass_agrees tests); listing all vta schedules (613,714 for the 4x8
    # core's padded 3x3) only to look them up took ~15 s
    points = [vta.from_template(auto.get(int(i))) for i in auto.valid_indices()]
    member = vta.valid_mask(np.asarray([p.index for p in points], dtype=np.int64))
    for point, ok in zip(points, member, strict=True):
        assert ok, vta.why_invalid(point)
    for i in rng.choice(auto.valid_indices(), size=min(8, auto.n_valid), replace=False):
        config = auto.get(int(i))
        assert np.array_equal(compile_insns(layer, config, hw).insns,
                              compile_insns(layer, vta.from_template(config), hw).insns)


# exhaustive_table (`measure` of every valid config) is cached in-process: the group puts this test on
# the worker of the files that time every schedule of the same conv in both families (test_tune_vta_search,
# test_auto_vta_sampled, test_train_pool, test_tune_search), so its tables cost nothing there.
@pytest.mark.xdist_group("vta_table_conv2d_1x16x8x8")
@pytest.mark.parametrize("layer", [Conv2D(1, 16, 8, 8, 16, 3, 3, 1, 1), Dense(1, 64, 32)], ids=lambda ly: ly.name)
def test_best_vta_schedule_is_no_worse_than_the_best_template_schedule(layer):
    hw = HwConfig.resolve("pynq_1x16")
    auto, vta = exhaustive_table(layer, hw), exhaustive_table(layer, hw, family="vta")
    assert len(auto) == get_space(layer, hw).n_valid and len(vta) == get_space(layer, hw, "vta").n_valid  # all measured
    assert min(s for s, _ in vta.values()) <= min(s for s, _ in auto.values())


def test_invalid_configs_are_rejected_with_the_rule_name(vta_case):
    case = vta_case(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1))  # 2 ci blocks, 2 co blocks
    layer, hw, space = case.layer, case.hw, case.space
    base = {"tile_b": [1, 1], "tile_h": [1, 8], "tile_w": [1, 8], "tile_ci": [2, 1], "tile_co": [1, 2],
            "order": 0, "wgt_stationary": 0, "vthread": 0, "uop_fold": 0}
    assert space.why_invalid(base) is None
    cases = {
        "wgt_stationary_ci": {"wgt_stationary": 1},       # 2 reduction steps
        "vthread_div": {"vthread": VTHREADS.index("co")},  # one co tile
        "order_canonical": {"order": 1},                   # moves extent-1 loops only
    }
    for rule, change in cases.items():
        why = space.why_invalid({**base, **change})
        assert why is not None and why.startswith(f"{rule}: "), (rule, why)
    big = Conv2D(1, 32, 56, 56, 32, 3, 3, 1, 1)  # a 56x56 x 2-block ACC tile: 6272 > 2048 elements
    why = get_space(big, hw, "vta").why_invalid({**base, "tile_h": [1, 56], "tile_w": [1, 56]})
    assert why.startswith("sram_acc: SRAM capacity: acc tile 6272 elements")
    with pytest.raises(InvalidSchedule, match="^wgt_stationary_ci: "):
        mapping_for(layer, {**base, "wgt_stationary": 1}, hw)
    with pytest.raises(ConfigError, match="schedule family 'nope'"):
        get_space(layer, hw, "nope")


def test_config_family_and_features():
    hw = HwConfig.resolve("pynq_1x16")
    layer = Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1)
    auto, vta = get_space(layer, hw), get_space(layer, hw, "vta")
    c = auto.get(int(auto.valid_indices()[0]))
    assert c.family == "autotvm" and "family" not in c.to_dict()  # AutoTVM records unchanged
    v = vta.get(int(vta.valid_indices()[0]))
    assert v.family == "vta" and v.to_dict()["family"] == "vta"
    assert Config(v.index, dict(v.knobs)).family == "vta"  # rebuilt from (index, knobs), as SpaceView does
    feats = vta.features_batch(vta.valid_indices()[:50])
    assert feats.shape == (min(50, vta.n_valid), N_FEATURES) and np.isfinite(feats).all()


def test_space_cli_reports_the_vta_family(capsys):
    def run(argv):
        parser = argparse.ArgumentParser(prog="codesign")
        space_cmd.register(parser.add_subparsers(dest="command"), "space")
        args = parser.parse_args(["space", *argv])
        assert args.func(args) == 0
        return json.loads(capsys.readouterr().out)

    # 4x4 pixels (16,000 valid vta schedules, ~8 s): the 8x8 conv's 90,000 took 90 s; its best-vs-template
    # claim is test_best_vta_schedule_is_no_worse_than_the_best_template_schedule's.
    spec = "conv2d:1,32,4,4,32,3,3,1,1"
    vta = run(["--layer", spec, "--hw", "pynq_1x16", "--schedules", "vta", "--exhaustive", "--json"])
    auto = run(["--layer", spec, "--hw", "pynq_1x16", "--schedules", "autotvm", "--exhaustive", "--json"])
    space = get_space(Conv2D(1, 32, 4, 4, 32, 3, 3, 1, 1), HwConfig.resolve("pynq_1x16"), "vta")
    assert (vta["schedules"], vta["size"], vta["valid"]) == ("vta", space.size, space.n_valid)
    assert auto["schedules"] == "autotvm" and vta["valid"] > auto["valid"]
    assert vta["best"]["seconds"] <= auto["best"]["seconds"]
    assert space.why_invalid(vta["best"]["index"]) is None


def test_every_valid_uop_fold_of_a_tile_is_bit_exact_and_folds_the_chosen_loops(vta_case):
    case = vta_case(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1))
    layer, hw, space, ref = case.layer, case.hw, case.space, case.ref
    tiles = {"tile_b": [1, 1], "tile_h": [4, 2], "tile_w": [1, 8], "tile_ci": [1, 2], "tile_co": [1, 2],
             "order": 0, "wgt_stationary": 0, "vthread": 0}
    folds = [f for f in range(1, len(FOLD_PAIRS) + 1) if space.why_invalid({**tiles, "uop_fold": f}) is None]
    assert len(folds) >= 5
    cycles = set()
    for f in folds:
        config = space.from_knobs({**tiles, "uop_fold": f})
        m = mapping_for(layer, config, hw)
        out_loop, in_loop = (GEMM_LOOPS[j] for j in FOLD_PAIRS[f - 1])
        ext = {"k_o.inner": 2, "w": 8, "dj": 3, "di": 3, "co": 2, "h": 2}  # the tile's GEMM loops
        assert (m.gemm.iter_out, m.gemm.iter_in) == (ext[out_loop], ext[in_loop])
        assert m.gemm.size == np.prod(list(ext.values())) // (ext[out_loop] * ext[in_loop])  # the rest unrolled
        assert np.array_equal(run_layer(layer, config, hw).output, ref)
        cycles.add(measure(layer, config, hw).cycles)
    assert len(cycles) > 1  # the fold changes the timing
    why = space.why_invalid({**tiles, "uop_fold": FOLD_PAIRS.index((0, 1)) + 1})  # k_o.inner, w: the template's
    assert why.startswith("uop_fold_live: ")


@pytest.mark.parametrize("layer", [Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1), Conv2D(1, 64, 6, 6, 32, 3, 3, 1, 1, groups=2),
                                   Dense(1, 64, 64)], ids=lambda ly: ly.name)
def test_two_pass_valid_indices_equal_the_full_mask(layer, two_pass_agrees):
    space = VtaSpace(layer, HwConfig.resolve("pynq_1x16"))
    assert two_pass_agrees(space) > 0  # sampled core points x every order and residency (conftest)


def test_a_config_is_mapped_from_its_knobs_when_its_index_is_stale(vta_case):
    """The producer's fast path trusts a Config's index only when its knobs are that index's."""
    case = vta_case(Conv2D(1, 32, 8, 8, 32, 3, 3, 1, 1))
    layer, hw, space = case.layer, case.hw, case.space
    a, b = (space.get(int(i)) for i in space.valid_indices()[[0, -1]])
    stale = Config(a.index, dict(b.knobs))
    assert space.valid_index_of(a) == a.index and space.valid_index_of(stale) is None
    assert np.array_equal(compile_insns(layer, stale, hw).insns, compile_insns(layer, b, hw).insns)


def test_the_shared_schedule_check_fails_on_a_wrong_output_a_race_or_a_timing_gap(vta_case, monkeypatch):
    """conftest's `VtaCase.check`, which every bit-exact test of the family shares, is not vacuous:
    it passes on a correct schedule and fails on an output one bit off, on a program with one
    dependency wait dropped (the race check) and on a block-form time one cycle off."""
    from codesign.evaluate import compiler, run
    from codesign.vta.simulator import SimulationError

    case = vta_case(Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1))
    config = case.config({"tile_b": [1, 1], "tile_h": [2, 4], "tile_w": [1, 8], "tile_ci": [2, 1], "tile_co": [4, 1],
                          "order": 0, "wgt_stationary": 0, "vthread": VTHREADS.index("co"), "uop_fold": 0,
                          "n_threads": 4, "uop_lift": 0})
    prog, timed = case.check(config)
    assert timed.cycles > 0
    c = isa.COL
    ref = case.ref
    wrong = ref.copy()
    wrong.flat[0] ^= 1
    case.ref = wrong
    with pytest.raises(AssertionError):
        case.check(config)
    case.ref = ref
    waits = np.flatnonzero((prog.insns[:, c["opcode"]] == isa.OP_LOAD) & (prog.insns[:, c["memory_type"]] == isa.MEM_INP)
                           & (prog.insns[:, c["pop_next_dep"]] == 1))
    racy = prog.insns.copy()
    racy[waits[0], c["pop_next_dep"]] = 0  # an INP load no longer waits for the GEMM reading its slot
    real_compile = compiler.compile_layer
    monkeypatch.setattr(compiler, "compile_layer", lambda *a, **k: replace(real_compile(*a, **k), insns=racy))
    with pytest.raises(SimulationError, match="unsynchronized"):
        case.check(config)
    monkeypatch.setattr(compiler, "compile_layer", real_compile)
    real_measure = run.measure
    monkeypatch.setattr(run, "measure", lambda *a, **k: replace(real_measure(*a, **k), cycles=timed.cycles + 1))
    with pytest.raises(AssertionError):
        case.check(config)
