"""The sweep on any network, without Ray workers: a trial tunes grouped and transposed convs, a
file.py:factory workload is stored as its layer list (workers never trace torch), and the
per-layer plot of a network with many unique layers groups the smallest ones with a note."""

from __future__ import annotations

import json

import pytest

from codesign.hw import Board, HwConfig
from codesign.sweep.options import SweepOptions
from codesign.sweep.plots import layer_bars, plot_layers
from codesign.sweep.runner import prepare, workload_from_options
from codesign.sweep.trial import evaluate_hw
from codesign.workloads import Workload, get_workload

SPACE = """\
board: pynq-z1
description: tiny test space
params:
  clock_mhz: [100]
fixed:
  LOG_BLOCK: 4
"""


def test_trial_tunes_group_and_transpose_layers(tmp_path):
    wl = Workload("mixed", (("conv2d:1,64,8,8,64,3,3,1,1,1,2", 2), ("conv2d_transpose:1,32,4,4,16,4,4,2,1", 1)))
    r = evaluate_hw(HwConfig(), Board.named("pynq-z1"), wl, tuner="random", budget=3, seed=0,
                    records_path=tmp_path / "rec.jsonl")
    assert r["feasible"] and not r["unsupported"]
    names = [x["layer"] for x in r["layers"]]
    assert names == ["conv2d_1x64x8x8_64_3x3_s1_p1_d1_g2", "conv2d_transpose_1x32x4x4_16_4x4_s2_p1"]
    total = sum(x["seconds"] * x["count"] for x in r["layers"])
    assert r["latency_ms"] == pytest.approx(total * 1e3, rel=1e-12)
    recs = [json.loads(x) for x in (tmp_path / "rec.jsonl").read_text().splitlines()]
    assert {x["layer_spec"].split(":")[0] for x in recs} == {"conv2d", "conv2d_transpose"}


def test_file_workload_is_stored_as_layers(tmp_path):
    net = tmp_path / "net.py"
    net.write_text("import torch\ndef f():\n    m = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, 1, 1), "
                   "torch.nn.ConvTranspose2d(32, 16, 4, 2, 1))\n    return m, (torch.zeros(1, 16, 8, 8),)\n")
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    opts, _space = prepare(space, f"{net}:f", tmp_path / "sweep",
                   SweepOptions(trials=1, budget=2, tuner="random", search="random", seed=0))
    saved = SweepOptions.load(tmp_path / "sweep")
    assert saved.workload == opts.workload == "net_f"
    assert [tuple(x) for x in saved.layers] == [("conv2d:1,16,8,8,32,3,3,1,1", 1),
                                               ("conv2d_transpose:1,32,8,8,16,4,4,2,1", 1)]
    assert workload_from_options(saved).entries == get_workload(f"{net}:f").entries


def test_layer_plot_groups_many_layers(tmp_path):
    layers = [{"layer": f"conv2d_1x{16 * (i + 1)}x8x8_16_3x3_s1_p1", "seconds": (i + 1) * 1e-3, "count": 1}
              for i in range(40)]
    points = [{"config": "a", "latency_ms": 5.0, "batch": 1, "layers": layers},
              {"config": "b", "latency_ms": 6.0, "batch": 1, "layers": layers[:30]}]
    pts, names, per_design, note = layer_bars(points, max_layers=16)
    assert len(names) == 16 and names[-1] == "other (25 layers)"
    assert "the 25 smallest of 40 VTA layers summed as 'other'" in note
    # nothing is lost: every design's bars still add up to its per-layer total
    for p, ms in zip(pts, per_design):
        assert sum(ms.values()) == pytest.approx(sum(x.seconds * 1e3 for x in p.layers))
    assert per_design[0][names[0]] == pytest.approx(26.0)  # the 15 slowest layers keep their bars
    assert plot_layers(points, tmp_path / "layers.png").stat().st_size > 0
    _, few, _, none = layer_bars(points[:1], max_layers=64)
    assert len(few) == 40 and none == ""
