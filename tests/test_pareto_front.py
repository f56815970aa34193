"""Pareto front vs brute force, exact hypervolume, reference point, pareto.json, `codesign report`."""

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.cli import main
from codesign.errors import ConfigError
from codesign.hw import Board, HwConfig
from codesign.hw.space import HwSpace
from codesign.pareto import (
    ParetoFront,
    design_point,
    dominates,
    hypervolume,
    read_pareto_json,
    reference_point,
    stock_comparison,
    write_pareto_json,
)

vec3 = st.tuples(*[st.integers(0, 6)] * 3)


def as_points(vecs):
    return [{"config": f"c{i}", "latency_ms": v[0], "area": v[1], "power_w": v[2]} for i, v in enumerate(vecs)]


@settings(max_examples=150, deadline=None)
@given(st.lists(vec3, max_size=25))
def test_incremental_front_equals_brute_force(vecs):
    front = ParetoFront()
    added = [front.add(p) for p in as_points(vecs)]
    brute = {v for v in vecs if not any(dominates(u, v) for u in vecs)}
    assert set(front.values()) == brute
    assert len(front) == len(brute)  # duplicates are kept once
    assert sum(added) >= len(brute)
    for p in as_points(vecs):  # dominated_by agrees with the definition
        v = (p["latency_ms"], p["area"], p["power_w"])
        assert bool(front.dominated_by(p)) == any(dominates(u, v) for u in brute)


def grid_volume(vecs, ref):
    """Count unit cells [c, c+1)^d dominated by some point (exact for integer points)."""
    cells = itertools.product(*[range(r) for r in ref])
    return sum(any(all(p[i] <= c[i] for i in range(len(ref))) for p in vecs) for c in cells)


@settings(max_examples=150, deadline=None)
@given(st.lists(vec3, max_size=12))
def test_hypervolume_3d_exact_vs_grid(vecs):
    ref = (7, 7, 7)
    assert hypervolume(vecs, ref) == grid_volume(vecs, ref)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(*[st.integers(0, 3)] * 4), max_size=8))
def test_hypervolume_4d_exact_vs_grid(vecs):
    ref = (4, 4, 4, 4)
    assert hypervolume(vecs, ref, objectives=("a", "b", "c", "d")) == grid_volume(vecs, ref)


def test_hypervolume_by_hand():
    # 2-D: staircase of (1,3), (2,2), (3,1) under (4,4): 3*1 + 2*1 + 1*1 ... = 6
    assert hypervolume([(1, 3), (2, 2), (3, 1)], (4, 4), objectives=("x", "y")) == 6.0
    assert hypervolume([(1, 1)], (4, 4), objectives=("x", "y")) == 9.0
    # points on or beyond the reference contribute nothing
    assert hypervolume([(4, 1), (1, 5)], (4, 4), objectives=("x", "y")) == 0.0
    # 3-D: one box
    assert hypervolume([(0.5, 0.5, 0.5)], (1, 1, 1)) == pytest.approx(0.125)
    # union of boxes [0,2]x[1,2]x[0,1] and [1,2]x[0,2]x[0,1]: 2 + 2 - overlap 1 = 3
    assert hypervolume([(0, 1, 0), (1, 0, 0)], (2, 2, 1)) == 3.0
    assert hypervolume([], (1, 1, 1)) == 0.0
    pts = as_points([(1, 0.5, 2), (2, 0.25, 1)])
    ref = {"latency_ms": 3, "area": 1, "power_w": 3}
    assert hypervolume(pts, ref) == ParetoFront(points=pts).hypervolume(ref) == pytest.approx(
        # z in [1, 2): only B, (3-2)(1-0.25); z in [2, 3): A (3-1)(1-0.5) + B (3-2)(0.5-0.25)
        0.75 * 1 + (1.0 + 0.25) * 1)


def test_front_rejects_bad_points_and_round_trips():
    front = ParetoFront(points=as_points([(1, 2, 3), (3, 2, 1), (2, 2, 2), (3, 3, 3)]))
    assert len(front) == 3 and front.n_seen == 4
    back = ParetoFront.from_json(json.loads(json.dumps(front.to_json())))
    assert back.values() == sorted(front.values()) and back.n_seen == 4
    with pytest.raises(ConfigError, match="objective 'power_w' must be a finite number"):
        front.add({"config": "x", "latency_ms": 1, "area": 1, "power_w": float("nan")})
    with pytest.raises(ConfigError, match="objective 'area'"):
        front.add({"config": "x", "latency_ms": 1})


def small_sweep():
    """Design points for the small space with a synthetic latency (roofline-like), and stock points."""
    space = HwSpace.load("pynq-z1-small")
    pts = []
    for hw in space.enumerate():
        lat = 100.0 * 256 / hw.macs_per_cycle * 100 / hw.clock_mhz * (1 + 2 ** (15 - hw.LOG_INP_BUFF_SIZE) / 10)
        pts.append(design_point(hw, space.board, lat, {"load": 0.4, "compute": 0.7, "store": 0.1}))
    stock = [p for p in pts if p["config"] in ("pynq_1x16_i8w8a32_15_15_18_17", "pynq_4x8_i8w8a32_15_16_16_18")]
    return space, pts, stock


def test_design_point_fields():
    board = Board.named("pynq-z1")
    p = design_point(HwConfig(), board, 88.3, {"compute": 0.75})
    assert p["config"] == "pynq_1x16_i8w8a32_15_15_18_17"
    util = p["resources"]["utilization"]
    assert p["area"] == pytest.approx(sum(util.values()) / 4) and p["resources"]["bram18"] == 263
    assert p["resources"]["max_utilization"] == 1.0 == util["dsp"]
    assert p["energy_j"] == pytest.approx(p["power_w"] * 0.0883)
    # VTA's PYNQ build is only known to close timing at 100 MHz: faster clocks are flagged
    assert p["clock_verified"] is True
    assert design_point(HwConfig(clock_mhz=167), board, 60.0)["clock_verified"] is False


def test_reference_point_rule_and_stock_comparison():
    space, pts, stock = small_sweep()
    ref = reference_point(stock, space=space)
    assert ref["latency_ms"] == pytest.approx(1.1 * max(s["latency_ms"] for s in stock))
    assert ref["area"] == pytest.approx(1.1)
    full = {"load": 1, "compute": 1, "store": 1}
    bound = max(design_point(hw, space.board, 1.0, full)["power_w"] for hw in space.enumerate())
    assert ref["power_w"] == pytest.approx(1.1 * bound)
    assert reference_point(stock, space=space) == ref  # stable
    front = ParetoFront(points=pts)
    cmp = stock_comparison(front, stock, verified_only=False)
    default = stock_comparison(front, stock)  # at verified clocks (100 MHz on the PYNQ-Z1)
    for s in stock:
        sv = (s["latency_ms"], s["area"], s["power_w"])
        expect = [p.config for p in front.points
                  if dominates((p.latency_ms, p.area, p.power_w), sv)]
        assert expect  # the synthetic front beats both stock configs
        assert sorted(cmp[s["config"]].dominated_by) == sorted(expect)
        d = default[s["config"]]
        assert sorted(d.dominated_by + d.dominated_by_unverified) == sorted(expect)
        assert all("167MHz" in c for c in d.dominated_by_unverified)
        assert not any("167MHz" in c for c in d.dominated_by)


def test_pareto_json_round_trip_and_report(tmp_path, capsys):
    space, pts, stock = small_sweep()
    front = ParetoFront(points=pts)
    ref = reference_point(stock, space=space)
    doc = write_pareto_json(tmp_path, front, reference_point=ref, stock_points=stock, hypervolume_history=[0.5, 1.0])
    assert (tmp_path / "pareto.json").exists() and not list(tmp_path.glob("*.tmp"))
    back = read_pareto_json(tmp_path)
    assert back == json.loads(json.dumps(doc.to_json()))
    assert back["hypervolume"] == pytest.approx(hypervolume(pts, ref))
    assert [p["latency_ms"] for p in back["points"]] == sorted(p.latency_ms for p in front.points)
    assert main(["report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for p in front.points:
        assert p.config in out
    assert f"{back['hypervolume']:.6g}" in out
    assert "stock pynq_1x16_i8w8a32_15_15_18_17" in out
    rows = {line.split()[0 if not line.startswith("*") else 1]: line for line in out.splitlines()
            if line.lstrip("* ").startswith("pynq_")}
    for p in front.points:  # the 167 MHz designs of the small space are marked, 100 MHz ones are not
        assert rows[p.config].split()[-1] == ("unverified" if p.hw["clock_mhz"] > 100 else "verified")
    assert any(p.hw["clock_mhz"] > 100 for p in front.points) and "clock 'unverified'" in out
    assert main(["report", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == back


def test_report_errors_are_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no such sweep directory" in err
    assert main(["report", str(tmp_path)]) == 2
    assert "no pareto.json" in capsys.readouterr().err
    (tmp_path / "pareto.json").write_text("{not json")
    assert main(["report", str(tmp_path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    (tmp_path / "pareto.json").write_text(json.dumps({"points": [{"config": "a"}], "reference_point": {},
                                                      "hypervolume": 0}))
    assert main(["report", str(tmp_path)]) == 2
    assert "points[0]: a: objective 'latency_ms'" in capsys.readouterr().err


def test_plots_write_pngs(tmp_path):
    from codesign.pareto.plots import plot_front, plot_hypervolume

    _, pts, stock = small_sweep()
    front = ParetoFront(points=pts)
    a = plot_front(front.points, tmp_path / "front.png", all_points=pts, stock_points=stock)
    b = plot_hypervolume([0.1, 0.3, 0.4], tmp_path / "hv.png", reference_hv=0.5)
    for path in (a, b):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_hypervolume_history():
    from codesign.pareto import hypervolume_history

    # [1,4]^3 = 27; then (0.5,2,2) adds 3.5*2*2 - overlap 3*2*2 = 2
    assert hypervolume_history([(3, 3, 3), (1, 1, 1), (2, 2, 2), (0.5, 2, 2)], (4, 4, 4)) == [1.0, 27.0, 27.0, 29.0]


def test_stock_comparison_counts_verified_clocks_by_default():
    """A stock design beaten only at an unverified clock is not reported as dominated by default."""
    from codesign.pareto.io import stock_comparison

    stock = {"config": "stock", "latency_ms": 10.0, "area": 0.5, "power_w": 2.0, "clock_verified": True}
    fast = {"config": "fast_200MHz", "latency_ms": 5.0, "area": 0.5, "power_w": 1.9, "clock_verified": False}
    slow = {"config": "ok_100MHz", "latency_ms": 9.0, "area": 0.5, "power_w": 2.0, "clock_verified": True}
    only_fast = stock_comparison([fast], [stock])["stock"]
    assert only_fast.dominated_by == [] and only_fast.dominated_by_unverified == ["fast_200MHz"]
    both = stock_comparison([fast, slow], [stock])["stock"]
    assert both.dominated_by == ["ok_100MHz"] and both.dominated_by_unverified == ["fast_200MHz"]
    every = stock_comparison([fast, slow], [stock], verified_only=False)["stock"]
    assert every.dominated_by == ["fast_200MHz", "ok_100MHz"]


def test_area_keeps_growing_past_the_dsp_limit():
    """Issue 9: with area = scarcest-resource utilization every design using all DSPs tied at
    1.000. The area objective must keep ranking them; feasibility stays per resource."""
    from codesign.hw.resources import estimate

    board = Board.named("pynq-z1")
    space = HwSpace.load("pynq-z1")
    full_dsp = [(hw, estimate(hw, board)) for hw in space.enumerate() if estimate(hw, board).dsp == board.dsp]
    assert len(full_dsp) > 100
    areas = [r.area(board) for _, r in full_dsp]
    assert all(r.max_utilization(board) == 1.0 for _, r in full_dsp)
    assert len({round(a, 6) for a in areas}) > 20 and max(areas) < 1.0
    # same core, larger buffers -> more BRAM -> larger area
    a = estimate(HwConfig.from_name("pynq_1x16_i8w8a32_15_14_16_16"), board)
    b = estimate(HwConfig.from_name("pynq_1x16_i8w8a32_15_15_18_17"), board)
    assert a.dsp == b.dsp == board.dsp and a.bram18 < b.bram18 and a.area(board) < b.area(board)
