"""records.jsonl keeps what its readers use (`codesign.sweep.state.kept_records`): a sweep's
pruned records give resume/warm starts, `export autotvm`, `run --records` and `--confirm` exactly
what the full records give."""

from __future__ import annotations

import json

import pytest

from codesign.cli import main
from codesign.hw import Board, HwConfig
from codesign.sweep.confirm import _ranked
from codesign.sweep.state import KEEP_BEST, SAMPLE_EVERY, RecordsLog, SweepState, kept_records, record_line
from codesign.sweep.trial import evaluate_hw
from codesign.tune.records import best_any_family, best_records, load_records
from codesign.workloads import Workload

HW = HwConfig.resolve("pynq_1x16")
SPEC = "conv2d:1,64,56,56,64,3,3,1,1"  # ~400 template schedules


@pytest.fixture(scope="module")
def full_and_pruned(tmp_path_factory):
    """One vta trial's records (the template's exhaustive search, then local search) written in
    full and through the sweep's RecordsLog."""
    tmp = tmp_path_factory.mktemp("prune")
    full = tmp / "full.jsonl"
    evaluate_hw(HW, Board.named("pynq-z1"), Workload("one", ((SPEC, 1),)), schedules="vta", budget=8,
                records_path=full)
    lines = [line for line in full.read_text().splitlines() if line]
    pruned = tmp / "records.jsonl"
    log = RecordsLog(pruned)
    log.append_lines(lines)
    return full, pruned, lines


def test_the_fastest_per_family_and_a_sample_are_kept_and_the_file_is_smaller(full_and_pruned):
    full, pruned, lines = full_and_pruned
    records, kept = load_records(full), load_records(pruned)
    assert len(records) > 4 * len(kept)  # the template's exhaustive search is most of the file
    by_family: dict[str, list] = {}
    for r in records:
        by_family.setdefault(r.family, []).append(r)
    kept_keys = {(r.family, r.index) for r in kept}
    for family, rs in by_family.items():
        fastest = sorted((r for r in rs if r.ok), key=lambda r: (r.seconds, r.index))[:KEEP_BEST]
        assert {(family, r.index) for r in fastest} <= kept_keys
    others = {(r.family, r.index) for r in records if r.index % SAMPLE_EVERY == 0}
    assert others <= kept_keys
    assert kept_keys <= {(r.family, r.index) for r in records}
    assert pruned.stat().st_size < full.stat().st_size / 4


def test_a_small_group_is_kept_whole_and_the_choice_is_deterministic(monkeypatch):
    import codesign.sweep.state as state

    monkeypatch.setattr(state, "_fitting_prefix", lambda ranked: 0)  # the fastest record fits every epilogue
    recs = [{"hw": "h", "layer": "l", "index": i, "seconds": None if i == 2 else 1.0 / (i + 1), "error": None}
            for i in range(KEEP_BEST)]
    assert kept_records(recs) == [True] * KEEP_BEST
    big = [{"hw": "h", "layer": "l", "index": i, "seconds": float(i % 7), "error": None} for i in range(1, 100)]
    keep = kept_records(big)
    assert keep == kept_records(list(big))
    fastest = sorted(range(1, 100), key=lambda i: (i % 7, i))[:KEEP_BEST]  # 7, 14, ..., 56 (0 s)
    sample = [i for i in range(1, 100) if i % SAMPLE_EVERY == 0]
    assert {d["index"] for d, k in zip(big, keep) if k} == set(fastest) | set(sample)


def test_resume_warm_start_export_run_and_confirm_read_the_same_from_pruned_records(full_and_pruned, tmp_path,
                                                                                    capsys):
    full, pruned, lines = full_and_pruned
    records, kept = load_records(full), load_records(pruned)
    # resume: the warm start a trial gets from the driver's SweepState
    assert best_records(records) == best_records(kept)
    assert SweepState(records=records).lookup("x") == SweepState(records=kept).lookup("x")
    # run --records: the fastest valid record of any family and its config
    a, b = best_any_family(records), best_any_family(kept)
    assert {k: (r, c.index) for k, (r, c) in a.items()} == {k: (r, c.index) for k, (r, c) in b.items()}
    # run (whole network): the fastest record that fits each fused epilogue the layer's ops need
    from codesign.evaluate.fused import DEMANDS
    from codesign.netrun.schedules import ScheduleChooser
    from codesign.workloads import parse_layer

    layer = parse_layer(SPEC)
    for epi in DEMANDS:
        got = [ScheduleChooser(HW, recs).for_epilogue(layer, epi) for recs in (records, kept)]
        assert got[0].config.index == got[1].config.index and got[0].source == got[1].source == "records"
    # --confirm: the retune fastest simulated schedules of each layer
    for n in (1, 4, KEEP_BEST):
        assert _ranked(records, HW.name, records[0].layer, None, n) == _ranked(kept, HW.name, records[0].layer, None, n)
    # export autotvm: the same AutoTVM lines and the same comparison with the best of any family
    outs = []
    for src in (full, pruned):
        assert main(["export", "autotvm", str(src), "-o", str(tmp_path / f"{src.stem}.log"), "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0]["entries"] == outs[1]["entries"] and outs[0]["missing"] == outs[1]["missing"]
    assert (tmp_path / "full.log").read_text() == (tmp_path / "records.log").read_text()


def test_a_trial_run_again_after_a_resume_writes_nothing_twice(full_and_pruned, tmp_path):
    _full, pruned, lines = full_and_pruned
    copy = tmp_path / "records.jsonl"
    copy.write_bytes(pruned.read_bytes())
    # A fresh log (a resumed driver) reads the file's keys: same family and index, nothing appended.
    written, fastest = RecordsLog(copy).append_lines(lines)
    assert written == 0 and copy.read_bytes() == pruned.read_bytes()
    assert {(r.layer, r.hw): r for r in fastest} == best_records(load_records(pruned))
    # records that only differ in family are distinct schedules
    records = load_records(pruned)
    assert len({(r.family, r.index) for r in records}) == len(records)
    assert all(record_line(r) in pruned.read_text() for r in records)
