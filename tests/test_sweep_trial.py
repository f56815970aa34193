"""Sweep pieces without Ray workers: one trial's evaluation (per-request latency at BATCH > 1,
infeasible configs never simulated, schedule transfer between configs) and the searcher filter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ray.tune.search import Searcher

from codesign.hw import Board, HwConfig
from codesign.hw.space import HwSpace
from codesign.sweep.trial import INFEASIBLE_LATENCY_MS, OBJECTIVES, evaluate_hw, transfer_configs
from codesign.workloads import Workload

LAYER = "conv2d:1,32,8,8,32,3,3,1,1"


@pytest.fixture(scope="module")
def board() -> Board:
    return Board.named("pynq-z1")


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_batch_config_serves_a_request_in_its_padded_batch_time(board, tmp_path):
    hw = HwConfig.from_name("pynq_2x8_i8w8a32_15_15_16_17")  # BATCH 2: the network runs 2 images
    wl = Workload("tiny", ((LAYER, 3),))
    r = evaluate_hw(hw, board, wl, tuner="random", budget=3, seed=0, records_path=tmp_path / "rec.jsonl")
    assert r["feasible"] and r["batch"] == 2
    (layer,) = r["layers"]
    assert layer["layer"].startswith("conv2d_2x32x8x8")  # the layer was tuned at batch 2
    # One request waits for the whole padded batch (before: the batch's time / 2, per image of a full batch).
    batch_ms = layer["seconds"] * 3 * 1e3
    assert r["latency_ms"] == pytest.approx(batch_ms, rel=1e-12)
    assert r["throughput_ips"] == pytest.approx(2 / (batch_ms * 1e-3), rel=1e-12)
    assert r["scope"] == "offloaded layers" and r["cpu_ms"] is None
    assert r["energy_j"] == pytest.approx(r["power_w"] * r["latency_ms"] * 1e-3, rel=1e-12)
    recs = _lines(tmp_path / "rec.jsonl")
    assert len(recs) == 3 and {x["hw"] for x in recs} == {hw.name}
    assert layer["seconds"] == pytest.approx(min(x["seconds"] for x in recs if x["seconds"] is not None))


def test_infeasible_config_is_not_simulated(board, tmp_path):
    hw = HwConfig.from_name("pynq_1x32_i8w8a32_15_15_18_17")  # ~100k LUT on a 53k-LUT board
    r = evaluate_hw(hw, board, Workload("tiny", ((LAYER, 1),)), tuner="random", budget=3,
                    records_path=tmp_path / "rec.jsonl")
    assert not r["feasible"] and "LUT" in r["reason"]
    assert r["latency_ms"] == INFEASIBLE_LATENCY_MS and r["area"] > 1.0
    assert r["layers"] == [] and r["measurements"] == 0
    assert not (tmp_path / "rec.jsonl").exists()


def test_unsupported_layers_are_listed_and_excluded(board, tmp_path):
    hw = HwConfig.from_name("pynq_1x16_i8w8a32_15_15_18_17")
    # 24 channels are not a multiple of BLOCK 16: VTA cannot run this layer on the config.
    wl = Workload("mixed", ((LAYER, 1), ("conv2d:1,24,8,8,24,3,3,1,1", 2)))
    r = evaluate_hw(hw, board, wl, tuner="random", budget=2, records_path=tmp_path / "rec.jsonl")
    assert [x["layer"] for x in r["layers"]] == ["conv2d_1x32x8x8_32_3x3_s1_p1"]
    (u,) = r["unsupported"]
    assert u["layer"].startswith("conv2d_1x24x8x8") and u["count"] == 2 and u["reason"]
    assert r["latency_ms"] == pytest.approx(r["layers"][0]["seconds"] * 1e3, rel=1e-12)


def test_transfer_takes_the_best_valid_schedules_of_other_configs(board, tmp_path):
    from codesign.schedule import ScheduleSpace
    from codesign.tune import load_records
    from codesign.workloads import parse_layer

    a = HwConfig.from_name("pynq_1x16_i8w8a32_15_15_18_17")
    b = HwConfig.from_name("pynq_1x16_i8w8a32_15_14_17_16")
    wl = Workload("tiny", ((LAYER, 1),))
    evaluate_hw(a, board, wl, tuner="random", budget=6, seed=1, records_path=tmp_path / "rec.jsonl")
    records = load_records(tmp_path / "rec.jsonl")
    layer = parse_layer(LAYER)
    space_b = ScheduleSpace(layer, b)
    seeds = transfer_configs(layer, b, space_b, records)
    best_a = min((r for r in records if r.ok), key=lambda r: r.seconds)
    # One config per earlier hardware config: its best schedule, if valid on the new one.
    if space_b.why_invalid(space_b.from_knobs(best_a.knobs)) is None:
        assert [c.knobs for c in seeds] == [space_b.from_knobs(best_a.knobs).knobs]
    else:
        assert seeds == []
    assert transfer_configs(layer, a, ScheduleSpace(layer, a), records) == []  # never its own records


class Scripted(Searcher):
    """A fake inner searcher proposing a fixed sequence; remembers what it was told."""

    def __init__(self, proposals: list[dict]) -> None:
        super().__init__(metric=list(OBJECTIVES), mode=["min"] * 3)
        self.proposals = list(proposals)
        self.told: dict[str, dict | None] = {}

    def suggest(self, trial_id: str):
        return self.proposals.pop(0) if self.proposals else Searcher.FINISHED

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.told[trial_id] = result


SPACE = """\
board: pynq-z1
params:
  LOG_BLOCK: [3, 4, 5]
  clock_mhz: [100, 200]
fixed: {LOG_INP_BUFF_SIZE: 14, LOG_WGT_BUFF_SIZE: 16, LOG_ACC_BUFF_SIZE: 16}
"""


def test_filter_answers_infeasible_and_known_configs_without_trials(tmp_path):
    from codesign.sweep.filtering import SKIPPED_FILE, FeasibleSearch

    (tmp_path / "s.yaml").write_text(SPACE)
    p8, p16, p32 = ({"LOG_BLOCK": b, "clock_mhz": 100} for b in (3, 4, 5))
    inner = Scripted([p32, p8, p32, p8, p16, p8])
    f = FeasibleSearch(inner, HwSpace.load(tmp_path / "s.yaml"), str(tmp_path))
    assert f.suggest("A") == p8  # p32 (infeasible) answered at once, then p8 becomes trial A
    assert list(inner.told) == ["A"] and inner.told["A"]["latency_ms"] == INFEASIBLE_LATENCY_MS
    assert f.suggest("B") == p16  # p32 again: known penalty; p8: in flight, answered when A ends
    assert list(inner.told) == ["A", "B"]
    result = {"latency_ms": 5.0, "area": 0.5, "power_w": 2.0}
    f.on_trial_complete("A", result)  # Ray's trial id; the inner searcher knew it as "A_r1"
    assert inner.told["A_r1"] == result and inner.told["B_r1"] == result  # and the waiting duplicate
    assert f.suggest("C") == Searcher.FINISHED  # known p8 answered, then the inner searcher is done
    assert inner.told["C"] == result
    skipped = _lines(tmp_path / SKIPPED_FILE)
    assert len(skipped) == 1 and skipped[0]["params"] == p32 and "LUT" in skipped[0]["reason"]
    assert (f.suggestions, f.answered) == (6, 4)


def test_one_trial_parses_once_checks_once_compiles_each_schedule_once(tmp_path, monkeypatch):
    """One hardware point from the searcher to the simulator: the space file is parsed once (by
    the driver), the suggestion's feasibility is checked once (by the searcher), each (layer, hw)
    schedule space is built once and every measured schedule is compiled exactly once."""
    import codesign.evaluate.compiler as compiler_mod
    import codesign.evaluate.run as run_mod
    import codesign.hw.resources as resources_mod
    import codesign.hw.space as space_mod
    import codesign.schedule.space as schedule_space_mod
    import codesign.sweep.trial as trial_mod
    from codesign.sweep.filtering import FeasibleSearch
    from codesign.sweep.trial import InnerTuning, TrialContext, run_trial

    calls: dict[str, list] = {"parse": [], "check": [], "space": [], "compile": []}

    def spy(module, name, key, arg=lambda *a, **k: None):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[key].append(arg(*args, **kwargs))
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    spy(HwSpace, "from_dict", "parse")
    for module in (resources_mod, space_mod, trial_mod):  # every name infeasible_reason is bound to
        spy(module, "infeasible_reason", "check", lambda hw, board, *a: hw.name)
    compiled = lambda layer, config, hw, **k: (layer.name, int(config.index))  # noqa: E731
    spy(run_mod, "compile_insns", "compile", compiled)  # the timing path (other templates)
    spy(run_mod, "compile_blocks", "compile", compiled)  # the timing path (conv2d, dense)
    spy(compiler_mod, "compile_insns", "compile", compiled)  # behind compile_layer / run_layer
    real_init = schedule_space_mod.ScheduleSpace.__init__

    def init(self, layer, hw):
        real_init(self, layer, hw)
        calls["space"].append((self.layer.name, self.hw.name))

    monkeypatch.setattr(schedule_space_mod.ScheduleSpace, "__init__", init)
    schedule_space_mod.get_space.cache_clear()

    (tmp_path / "s.yaml").write_text(SPACE)
    space = HwSpace.load(tmp_path / "s.yaml")
    p16 = {"LOG_BLOCK": 4, "clock_mhz": 100}
    searcher = FeasibleSearch(Scripted([p16]), space, str(tmp_path))
    params = searcher.suggest("A")
    assert params == p16
    wl = Workload("tiny", ((LAYER, 2), ("dense:1,64,32", 1)))
    ctx = TrialContext(space=space, workload=wl, tuning=InnerTuning(tuner="random", budget=4, seed=0), checked=True)
    result, records = run_trial(params, ctx)

    assert result["feasible"] and result["measurements"] == 8
    assert len(calls["parse"]) == 1  # the driver's HwSpace.load; the trial parses nothing
    assert calls["check"] == [result["config"]]  # the searcher's check; the trial trusts it
    assert sorted(calls["space"]) == sorted(set(calls["space"])) and len(calls["space"]) == 2
    measured = sorted((r.layer, r.index) for r in records)
    assert sorted(calls["compile"]) == measured  # each measured schedule once, the winners not again
