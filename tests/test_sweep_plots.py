"""The sweep's and tune's plots answer their question at a glance: verified-clock designs first
and unverified ones marked, readable step names, no ~0 ms bar groups, the stock configs in the
legend, a hypervolume axis from 0 with its unit and reference point, tuning curves in ms."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from codesign.pareto.plots import front_figure, hypervolume_figure, hypervolume_unit
from codesign.sweep.plots import _shape, layer_bars, plot_layers


def _point(config, ms, verified, stem_ms=5.0):
    steps = [{"name": "conv2d", "kind": "conv2d+relu", "placement": "vta", "ms": stem_ms,
              "layer": "conv2d_1x16x115x115_64_4x4_s1_p0", "transform": "space_to_depth"},
             {"name": "c1", "kind": "conv2d", "placement": "vta", "ms": ms - stem_ms - 3.05,
              "layer": "conv2d_1x64x56x56_128_3x3_s2_p1"},
             {"name": "pool", "kind": "max_pool2d", "placement": "cpu", "ms": 3.0},
             {"name": "flat", "kind": "flatten", "placement": "cpu", "ms": 0.03},
             {"name": "deq", "kind": "dequantize", "placement": "cpu", "ms": 0.02}]
    return {"config": config, "latency_ms": ms, "clock_verified": verified, "steps": steps, "layers": []}


def test_step_names_are_readable():
    assert _shape("conv2d_1x64x56x56_128_3x3_s2_p1") == "conv 3x3/2 64->128 @56x56"
    assert _shape("conv2d_4x16x115x115_64_4x4_s1_p0", "space_to_depth") == "conv 4x4 16->64 @115x115 (space-to-depth)"
    assert _shape("dense_1x512_1000") == "dense 512_1000"


def test_layer_bars_put_verified_designs_first_and_sum_the_tiny_cpu_steps(tmp_path):
    points = [_point("fast_200MHz", 50.0, False), _point("slow", 80.0, True), _point("mid_167MHz", 60.0, False)]
    pts, names, per_design, note = layer_bars(points)
    assert [p.config for p in pts] == ["slow", "fast_200MHz", "mid_167MHz"]
    assert names == ["VTA conv 4x4 16->64 @115x115 (space-to-depth)", "VTA conv 3x3/2 64->128 @56x56",
                     "CPU max_pool2d", "CPU other (2 kinds)"]
    assert "2 CPU step kinds under 2% of the largest bar summed as 'CPU other (2 kinds)'" in note
    for p, ms in zip(pts, per_design):  # nothing lost
        assert sum(ms.values()) == pytest.approx(p.latency_ms)
    assert plot_layers(points, tmp_path / "layers.png").read_bytes()[:4] == b"\x89PNG"


def test_layers_plot_marks_unverified_designs(monkeypatch, tmp_path):
    import codesign.sweep.plots as plots

    figs = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: figs.append(fig) or path)
    plot_layers([_point("fast_200MHz", 50.0, False), _point("slow", 80.0, True)], tmp_path / "l.png")
    (ax,) = figs[0].axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["slow: 80.0 ms/request, verified clock",
                      "fast_200MHz: 50.0 ms/request, unverified clock (optimistic)"]
    hatches = [c.patches[0].get_hatch() for c in ax.containers]
    assert hatches == [None, "///"]
    assert "1 at a verified clock first" in ax.get_title()


def test_front_legend_names_the_stock_configs():
    pts = [{"config": "a", "latency_ms": 1.0, "area": 0.5, "power_w": 2.0, "clock_verified": True}]
    stock = [{"config": "pynq_1x16_i8w8a32_15_15_18_17", "latency_ms": 2.0, "area": 0.6, "power_w": 2.5},
             {"config": "pynq_4x8_i8w8a32_15_16_16_18", "latency_ms": 3.0, "area": 0.7, "power_w": 2.6}]
    fig = front_figure(pts, all_points=pts, stock_points=stock)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "stock pynq_1x16_15_15_18_17" in labels and "stock pynq_4x8_15_16_16_18" in labels
    assert all(not ax.texts for ax in fig.axes)  # no labels beside the stars to overlap


def test_hypervolume_axis_starts_at_zero_with_unit_and_reference_point():
    ref = {"latency_ms": 369.3, "area": 1.1, "power_w": 4.677}
    fig = hypervolume_figure([190.0, 200.0, 305.0], reference_point=ref, objectives=tuple(ref))
    (ax,) = fig.axes
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 305.0
    assert ax.get_ylabel() == f"hypervolume ({hypervolume_unit(tuple(ref))})" == "hypervolume (ms x W)"
    (text,) = ax.texts
    assert "latency 369.3 ms" in text.get_text() and "power 4.677 W" in text.get_text()


def test_tune_plot_shows_absolute_ms(monkeypatch, tmp_path):
    import codesign.commands.tune as tune

    figs = []
    monkeypatch.setattr(tune, "save_figure", lambda fig, path, dpi=0: figs.append(fig))
    curves = {"a": np.array([3e-3, 2e-3, 2e-3]), "b": np.array([9e-3, 8e-3, 7.5e-3])}
    results = [(SimpleNamespace(name=n), 1, SimpleNamespace(curve=lambda c=c: c)) for n, c in curves.items()]
    tune._plot(results, str(tmp_path / "c.png"), SimpleNamespace(name="hw"), "random")
    (ax,) = figs[0].axes
    ends = [line.get_ydata()[-1] for line in ax.get_lines()]
    assert ends == pytest.approx([2.0, 7.5])  # each curve's own final best, in ms (not 1.0)
    assert "ms" in ax.get_ylabel()
