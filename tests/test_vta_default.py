"""`vta` is the default schedule family of `codesign tune|sweep|space` (issue 19 §1, §3), with
`auto` there = template+local (`codesign.tune.template_local`): never worse than the template
optimum, the template's measurements plus `--budget` per layer, template records kept for
`codesign export autotvm`, and the family's producer no longer enumerates the space to map one
config (what made a vta trial cost minutes)."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from codesign.cli import main
from codesign.evaluate.run import measure, random_inputs, run_layer
from codesign.hw import Board, HwConfig
from codesign.schedule import get_space
from codesign.sweep.options import DEFAULT_SCHEDULES, SweepOptions, default_schedules
from codesign.sweep.trial import evaluate_hw
from codesign.tune.records import best_any_family, load_records
from codesign.workloads import Conv2D, Workload

HW = HwConfig.resolve("pynq_1x16")
BOARD = Board.named("pynq-z1")
SPEC = "conv2d:1,32,14,14,64,3,3,1,1"
BUDGET = 8


def _parser() -> argparse.ArgumentParser:
    from codesign.cli import build_parser

    return build_parser()


def test_vta_is_the_default_family_of_tune_sweep_and_space_and_run_takes_any_family():
    p = _parser()
    assert DEFAULT_SCHEDULES == "vta" and SweepOptions().schedules == "vta"
    assert default_schedules("auto") == default_schedules(None) == "vta"
    # the other tuners would enumerate the family (or, ppo/dqn, cannot act on its knobs): templates
    assert {default_schedules(t) for t in ("ppo", "dqn", "random", "xgb", "exhaustive")} == {"autotvm"}
    assert SweepOptions(tuner="xgb").schedules == "autotvm" and SweepOptions(tuner="xgb", schedules="vta").schedules == "vta"
    assert p.parse_args(["space", "--layer", SPEC]).schedules == "vta"
    assert p.parse_args(["run", "--hw", "pynq_1x16", "--simulate"]).schedules is None  # the fastest of any family
    # a sweep.json saved before the field keeps the templates' family on resume
    legacy = {k: v for k, v in SweepOptions().to_json().items() if k != "schedules"}
    assert SweepOptions.from_json(legacy).schedules == "autotvm"


def test_tune_and_sweep_without_schedules_search_the_vta_family(capsys, tmp_path):
    assert main(["tune", "--layer", SPEC, "--budget", str(BUDGET), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "order" in out["best"]["knobs"]  # a vta-family schedule
    assert main(["tune", "--layer", SPEC, "--budget", "4", "--schedules", "autotvm", "--json"]) == 0
    assert "order" not in json.loads(capsys.readouterr().out)["best"]["knobs"]
    from codesign.commands.sweep import _options

    args = _parser().parse_args(["sweep"])
    assert _options(args, resume=False).schedules == "vta"
    assert _options(_parser().parse_args(["sweep", "--tuner", "ppo"]), resume=False).schedules == "autotvm"
    from codesign.sweep.trial import InnerTuning

    assert InnerTuning().schedules == "vta" and InnerTuning(tuner="exhaustive").schedules == "autotvm"


def test_a_vta_trial_is_never_worse_than_the_template_and_costs_its_measurements_plus_the_budget(tmp_path):
    wl = Workload("one", ((SPEC, 1),))
    rec = tmp_path / "records.jsonl"
    vta = evaluate_hw(HW, BOARD, wl, schedules="vta", budget=BUDGET, records_path=rec)
    tpl = evaluate_hw(HW, BOARD, wl, schedules="autotvm", budget=BUDGET)
    assert vta["latency_ms"] <= tpl["latency_ms"] * (1 + 1e-12)
    # the template's exhaustive search, then the budget on the family (the seed included)
    assert vta["measurements"] == tpl["measurements"] + BUDGET
    records = load_records(rec)
    families = {r.family for r in records}
    assert families == {"autotvm", "vta"}
    assert sum(r.family == "autotvm" for r in records) == tpl["measurements"]
    assert "order" in vta["layers"][0]["knobs"]


def test_export_autotvm_of_a_vta_trial_exports_the_template_best_and_says_how_much_slower(tmp_path, capsys):
    wl = Workload("one", ((SPEC, 1),))
    rec = tmp_path / "records.jsonl"
    evaluate_hw(HW, BOARD, wl, schedules="vta", budget=BUDGET, records_path=rec)
    records = load_records(rec)
    best_t = min(r.seconds for r in records if r.ok and r.family == "autotvm")
    best = min(r.seconds for r in records if r.ok)
    assert main(["export", "autotvm", str(rec), "-o", str(tmp_path / "vta.log"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lines"] == 1 and out["missing"] == []
    e = out["entries"][0]
    assert e["seconds"] == pytest.approx(best_t) and e["best_seconds"] == pytest.approx(best)
    assert e["slowdown"] == pytest.approx(best_t / best) and e["slowdown"] >= 1.0


def test_run_takes_the_vta_best_of_a_vta_trial_and_it_replays_bit_exact(tmp_path):
    wl = Workload("one", ((SPEC, 1),))
    rec = tmp_path / "records.jsonl"
    r = evaluate_hw(HW, BOARD, wl, schedules="vta", budget=BUDGET, records_path=rec)
    (record, config), = best_any_family(load_records(rec)).values()
    assert record.seconds == pytest.approx(r["layers"][0]["seconds"])
    layer = Conv2D(1, 32, 14, 14, 64, 3, 3, 1, 1)
    data, weight = random_inputs(layer)
    run = run_layer(layer, config, HW, data=data, weight=weight)
    assert np.array_equal(run.output, layer.reference(data, weight))
    assert measure(layer, config, HW).seconds == pytest.approx(record.seconds, rel=1e-12)


def test_measuring_one_vta_config_does_not_enumerate_the_family():
    layer = Conv2D(1, 48, 10, 10, 48, 3, 3, 1, 1)  # a shape no other test builds (spaces are cached)
    tspace, vspace = get_space(layer, HW), get_space(layer, HW, "vta")
    point = vspace.from_template(tspace.get(int(tspace.valid_indices()[0])))
    t = measure(layer, point, HW)
    assert t.seconds > 0
    assert getattr(vspace, "_valid", None) is None and not hasattr(vspace, "_table")


def test_auto_family_stage_is_the_learned_search_from_64_measurements_per_layer(capsys):
    """Below `LEARNED_MIN_BUDGET` measurements per layer auto's family stage is local search (a sweep
    trial's 16); from it on (`codesign tune`'s default 100) the learned search, seeded with the
    template's results: never worse than the template, the label says which search ran."""
    from codesign.tune.template_local import LEARNED_MIN_BUDGET, family_search

    assert family_search(16) is None and family_search(LEARNED_MIN_BUDGET) == "xgb"
    found = {}
    for budget in (BUDGET, LEARNED_MIN_BUDGET):
        assert main(["tune", "--layer", SPEC, "--budget", str(budget), "--json"]) == 0
        found[budget] = json.loads(capsys.readouterr().out)
    t = main(["tune", "--layer", SPEC, "--schedules", "autotvm", "--tuner", "exhaustive", "--json"])
    assert t == 0
    template = json.loads(capsys.readouterr().out)
    assert found[BUDGET]["tuner"] == "local" and found[LEARNED_MIN_BUDGET]["tuner"] == "xgb"
    assert found[LEARNED_MIN_BUDGET]["measurements"] == found[BUDGET]["measurements"] - BUDGET + LEARNED_MIN_BUDGET
    for out in found.values():
        assert out["best"]["seconds"] <= template["best"]["seconds"] * (1 + 1e-12)
