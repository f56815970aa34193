"""`export autotvm`'s total is per request of the network: each layer of the network's plan counted
once per occurrence (one form per layer), never a sum of the exported layers; none without a network."""

from __future__ import annotations

import json

from codesign.cli import main
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace
from codesign.sweep.network import network_to_json, timing_network
from codesign.tune import MeasureRecord, RecordWriter
from codesign.workloads import parse_layer

HW = HwConfig()
TWICE = parse_layer("conv2d:1,32,8,8,32,3,3,1,1")   # conv a and conv b: the same layer, twice per request
ONCE = parse_layer("conv2d:1,32,8,8,64,1,1,1,0")    # conv c
ELSEWHERE = parse_layer("dense:1,256,128")          # recorded, exported, not in the network

NET = '''
import torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(32, 32, 3, padding=1)
        self.b = torch.nn.Conv2d(32, 32, 3, padding=1)
        self.c = torch.nn.Conv2d(32, 64, 1)
    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))
def net():
    return Net().eval(), (torch.zeros(1, 32, 8, 8),)
'''
# template seconds per layer (fast enough that the plan puts every conv on VTA)
TEMPLATE = {TWICE.name: 3e-6, ONCE.name: 2e-6, ELSEWHERE.name: 5e-6}
VTA_BEST = 1e-6  # a faster `vta`-family record of TWICE: the best of any family there


def _setup(tmp_path):
    (tmp_path / "net3.py").write_text(NET)
    rows = []
    for layer in (TWICE, ONCE, ELSEWHERE):
        space = ScheduleSpace(layer, HW)
        for k, cfg in enumerate(space.valid_configs()[:2]):  # the second is the template's best
            rows.append(MeasureRecord.make(layer, HW, cfg, TEMPLATE[layer.name] * (2 - k), 5, None, "xgb", 0))
    rows.append(MeasureRecord(**{**rows[1].__dict__, "family": "vta", "index": 99999, "seconds": VTA_BEST,
                                 "knobs": {"not": "a template knob"}}))
    path = tmp_path / "records.jsonl"
    with RecordWriter(path) as w:
        w.write_all(rows)
    return path, f"{tmp_path / 'net3.py'}:net"


def test_the_total_is_per_request_each_layer_times_its_count(tmp_path, capsys):
    path, workload = _setup(tmp_path)
    assert main(["export", "autotvm", str(path), "--workload", workload, "-o", str(tmp_path / "v.log"),
                 "--json"]) == 0
    (req,) = json.loads(capsys.readouterr().out)["per_request"]
    template = 2 * TEMPLATE[TWICE.name] + TEMPLATE[ONCE.name]
    best = 2 * VTA_BEST + TEMPLATE[ONCE.name]
    assert {x["layer"]: x["count"] for x in req["layers"]} == {TWICE.name: 2, ONCE.name: 1}
    assert req["template_seconds"] == template and req["best_seconds"] == best
    assert req["slowdown"] == template / best and req["unrecorded"] == []
    assert main(["export", "autotvm", str(path), "--workload", workload, "-o", str(tmp_path / "v.log")]) == 0
    text = capsys.readouterr().out
    assert f"template {template * 1e3:.4f} ms vs best {best * 1e3:.4f} ms" in text
    assert "total of the exported layers" not in text


def test_a_sweeps_records_take_its_network_and_others_print_no_total(tmp_path, capsys):
    path, workload = _setup(tmp_path)
    assert main(["export", "autotvm", str(path), "-o", str(tmp_path / "v.log")]) == 0
    text = capsys.readouterr().out
    assert "no per-request total" in text and "--workload" in text and " vs best " not in text
    net, _ = timing_network(workload)
    (tmp_path / "sweep.json").write_text(json.dumps({"workload": workload, "network": network_to_json(net)}))
    assert main(["export", "autotvm", str(path), "-o", str(tmp_path / "v.log"), "--json"]) == 0
    (req,) = json.loads(capsys.readouterr().out)["per_request"]
    assert req["template_seconds"] == 2 * TEMPLATE[TWICE.name] + TEMPLATE[ONCE.name]
