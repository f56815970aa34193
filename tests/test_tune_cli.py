"""`codesign tune` CLI: --json shapes, records, plot, agents, errors."""

from __future__ import annotations

import json
import re

import pytest

from codesign.cli import main
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule import partition
from codesign.sweep.network import timing_network
from codesign.tune import load_records
from codesign.tune.search import network_layers
from codesign.workloads import get_workload

SMALL = "conv2d:1,32,8,8,32,3,3,1,1"


def test_layer_json_shape_and_records(tmp_path, capsys):
    rec = tmp_path / "r.jsonl"
    png = tmp_path / "c.png"
    assert main(["tune", "--layer", SMALL, "--tuner", "ga", "--trials", "6", "--seed", "2", "--records", str(rec),
                 "--plot", str(png), "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert isinstance(obj, dict)
    assert set(obj["best"]) >= {"knobs", "index", "seconds"} and obj["measurements"] == 6
    recs = load_records(rec)
    assert len(recs) == 6 and all(r.tuner == "ga" and r.seed == 2 for r in recs)
    assert obj["best"]["seconds"] == min(r.seconds for r in recs)
    best = min(recs, key=lambda r: r.seconds)
    assert obj["best"]["index"] == best.index and obj["best"]["knobs"] == best.knobs
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_workload_on_batch4_config_is_a_list(capsys):
    assert main(["tune", "--workload", "resnet18", "--hw", "pynq_4x8", "--tuner", "random", "--trials", "2",
                 "--task-scheduler", "even", "--json"]) == 0
    objs = json.loads(capsys.readouterr().out)
    # exactly the layers the network plan asks VTA about, as a sweep trial tunes them: the stem in
    # its VTA forms (channels padded, space-to-depth, im2col) beside the plain offloaded layers
    hw = HwConfig.resolve("pynq_4x8")
    asked = network_layers(timing_network("resnet18")[0], hw)
    assert isinstance(objs, list) and [(o["layer"], o["count"]) for o in objs] == [(la.name, c) for la, c in asked]
    plain = {la.name for la, _c in partition(get_workload("resnet18").for_hw(hw), hw)[0]}
    assert plain < {o["layer"] for o in objs}  # the stem forms are tuned too
    assert all(o["measurements"] == 2 and o["layer"].startswith(("conv2d_4x", "dense_4x")) for o in objs)
    assert all(abs(o["seconds_per_image"] - o["best"]["seconds"] / 4) < 1e-15 for o in objs)
    # the default task scheduler shares the same total over the layers, every layer measured
    assert main(["tune", "--workload", "resnet18", "--hw", "pynq_4x8", "--tuner", "random", "--trials", "2",
                 "--json"]) == 0
    shared = json.loads(capsys.readouterr().out)
    assert sum(o["measurements"] for o in shared) == 2 * len(objs) and all(o["measurements"] >= 1 for o in shared)


def test_agent_save_then_reuse(tmp_path, capsys):
    agent = tmp_path / "a.pt"
    assert main(["tune", "--layer", SMALL, "--tuner", "bandit", "--trials", "10", "--save-agent", str(agent),
                 "--json"]) == 0
    capsys.readouterr()
    assert main(["tune", "--layer", "dense:1,256,128", "--tuner", "bandit", "--agent", str(agent), "--trials", "3",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["measurements"] == 3


def test_user_errors_are_one_line(tmp_path, capsys):
    assert main(["tune", "--layer", "conv2d:1,30,8,8,32,3,3,1,1", "--trials", "3"]) == 2
    assert main(["tune", "--layer", SMALL, "--tuner", "xgb", "--agent", str(tmp_path / "x.pt")]) == 2
    assert main(["tune", "--layer", SMALL, "--tuner", "ppo", "--agent", str(tmp_path / "x.pt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("codesign tune: error:") for line in err)
    assert "no such agent checkpoint" in err[2]


def test_hparam_overrides_the_tuner_dict_and_budget_replaces_trials(tmp_path, capsys):
    from codesign.schedule import ScheduleSpace
    from codesign.tune import make_tuner

    space = ScheduleSpace(SMALL, "pynq_1x16")
    assert make_tuner("ga", space, hparams={"pop_size": "4"}).batch_size == 4  # CLI strings converted
    assert make_tuner("ppo", space, hparams={"lr": "3e-4"}).hp["lr"] == 3e-4
    # the agent gets the converted values too: `tune --tuner ppo --hparam lr=3e-4` (the --help
    # example) was a TypeError traceback from torch's Adam (lr the string '3e-4')
    for name, key, text, value in (("ppo", "lr", "3e-4", 3e-4), ("dqn", "hidden", "32", 32),
                                   ("bandit", "heads", "3", 3)):
        tuner = make_tuner(name, space, hparams={key: text})
        tuner.set_task(space.layer, space.hw)  # builds the agent
        assert tuner.agent.hp[key] == value and type(tuner.agent.hp[key]) is type(value)
    with pytest.raises(ConfigError, match="allowed: elite, max_tries, mutation, pop_size, tournament"):
        make_tuner("ga", space, hparams={"popsize": 4})
    assert main(["tune", "--layer", SMALL, "--tuner", "ga", "--hparam", "mutation=x", "--budget", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--hparam mutation='x': must be a float" in err
    # a value the tuner cannot run with is refused before tuning (batch_size=0 tuned nothing, exit 0)
    for hp in ("batch_size=0", "epsilon=2", "sa_keep=-3"):
        assert main(["tune", "--layer", SMALL, "--tuner", "xgb", "--hparam", hp, "--budget", "2"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--hparam {hp}: must be" in err
    # --trials is the hidden old name of --budget: both give the same run
    runs = [main(["tune", "--layer", SMALL, "--tuner", "random", flag, "3", "--json"]) for flag in ("--budget", "--trials")]
    outs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert runs == [0, 0] and [o["measurements"] for o in outs] == [3, 3]


def test_workload_prints_the_whole_network_line(capsys):
    """`tune --workload` ends with the network plan's latency under the tuned schedules (what a sweep
    trial reports and `codesign run` runs), not the sum of the tuned layers."""
    assert main(["tune", "--workload", "resnet18", "--hw", "pynq_4x8", "--tuner", "random", "--trials", "2",
                 "--task-scheduler", "even"]) == 0
    out = capsys.readouterr().out
    assert "total offloaded latency" not in out
    m = re.search(_WHOLE + r"batch 4, pynq_4x8", out)
    assert m is not None, out
    total, vta, cpu = map(float, m.groups())
    assert vta > 0 and abs(total - (vta + cpu)) <= 0.002 + 1e-9 * total


_WHOLE = (r"whole network \(its plan with these schedules, as `codesign run --records` picks them\): ([\d.]+) ms "
          r"per request \(VTA ([\d.]+) ms \+ CPU ([\d.]+) ms; ")


def test_workload_line_is_what_run_then_predicts(tmp_path, capsys):
    """The whole-network line of `tune --workload` is the latency `codesign run --records` predicts
    with its records (run's chooser: per op the fastest fused op among a layer's best records), so
    the user's two commands agree; a residual block with a ReLU-fused conv and a fused add."""
    net = tmp_path / "block.py"
    net.write_text(
        "import torch\n\n\nclass Block(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        torch.manual_seed(0)\n"
        "        self.a = torch.nn.Conv2d(32, 32, 3, padding=1)\n        self.b = torch.nn.Conv2d(32, 32, 3, padding=1)\n\n"
        "    def forward(self, x):\n        return torch.relu(self.b(torch.relu(self.a(x))) + x)\n\n\n"
        "def build():\n    torch.manual_seed(1)\n    return Block(), (torch.randn(1, 32, 8, 8),)\n")
    rec = tmp_path / "r.jsonl"
    work = f"{net}:build"
    assert main(["tune", "--workload", work, "--hw", "pynq_1x16", "--budget", "8", "--records", str(rec)]) == 0
    m = re.search(_WHOLE, capsys.readouterr().out)
    assert m is not None
    assert main(["run", "--workload", work, "--hw", "pynq_1x16", "--simulate", "--records", str(rec), "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert abs(float(m.group(1)) - ran["latency_ms"]) <= 0.0015, (m.group(1), ran["latency_ms"])
