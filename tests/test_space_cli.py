"""`codesign space`: text and JSON output, --workload, --exhaustive (through codesign.tune),
--save-program."""

from __future__ import annotations

import argparse
import json

import pytest

from codesign.commands import space as space_cmd
from codesign.errors import ConfigError
from codesign.schedule import ScheduleSpace


def run(argv, capsys):
    parser = argparse.ArgumentParser(prog="codesign")
    sub = parser.add_subparsers(dest="command")
    space_cmd.register(sub, "space summary")
    # these tests read the template's space (the default family is vta: tests/test_vta_default.py)
    args = parser.parse_args(["space", *argv, *(() if "--schedules" in argv else ("--schedules", "autotvm"))])
    code = args.func(args)
    return code, capsys.readouterr().out


def test_json_layer(capsys):
    code, out = run(["--layer", "conv2d:1,256,14,14,512,3,3,2,1", "--hw", "pynq_1x16", "--json"], capsys)
    info = json.loads(out)
    assert code == 0
    sp = ScheduleSpace("conv2d:1,256,14,14,512,3,3,2,1", "pynq_1x16")
    assert info["size"] == sp.size == 480
    assert info["valid"] == len(sp.valid_indices())
    assert info["knobs"]["tile_co"][4] == [2, 16]
    assert "best" not in info


def test_text_layer(capsys):
    code, out = run(["--layer", "dense:16,512,2048", "--hw", "pynq_1x16_i8w8a32_15_15_18_17"], capsys)
    sp = ScheduleSpace("dense:16,512,2048", "pynq_1x16")
    assert code == 0
    assert f"size      {sp.size}   valid {sp.n_valid}" in out
    assert "tile_ci" in out and "dense_packed.vta" in out


def test_unsupported_layer(capsys):
    code, out = run(["--layer", "conv2d:1,3,224,224,64,7,7,2,3", "--json"], capsys)
    info = json.loads(out)
    assert (info["size"], info["valid"]) == (0, 0)
    assert "BLOCK_IN=16" in info["unsupported"]


def test_workload_listing(capsys):
    code, out = run(["--workload", "resnet18", "--hw", "pynq_4x8", "--json"], capsys)
    info = json.loads(out)
    # from_torch(ResNet-18): the 3-channel stem stays on the CPU; 10 offloaded convs and the
    # 512 -> 1000 classifier (1000 is a multiple of BLOCK_OUT=8 on pynq_4x8)
    assert info["batch"] == 4 and len(info["layers"]) == 12
    assert "BLOCK_IN=8" in info["layers"][0]["unsupported"]
    convs = [r for r in info["layers"] if r["layer"].startswith("conv2d") and not r["unsupported"]]
    assert [r["count"] for r in convs] == [4, 1, 3, 1, 1, 3, 1, 1, 3, 1]
    assert info["layers"][-1]["layer"] == "dense_4x512_1000" and info["layers"][-1]["unsupported"] is None
    first = convs[0]
    assert first["layer"] == "conv2d_4x64x56x56_64_3x3_s1_p1"
    assert first["valid"] == ScheduleSpace(first["spec"], "pynq_4x8").n_valid


def test_bad_layer_raises_config_error(capsys):
    with pytest.raises(ConfigError, match="expected conv2d:N,C,H,W,O"):
        run(["--layer", "conv2d:1,2,3"], capsys)


SPEC = "conv2d:1,32,8,8,32,3,3,1,1"


def fake_seconds(index: int) -> float:
    return 1.0 + ((index * 7919) % 101) / 1000.0


def test_exhaustive_uses_tune(monkeypatch, capsys):
    import codesign.tune as tune

    sp = ScheduleSpace(SPEC, "pynq_1x16")

    def fake_exhaustive(layer, hw, **kwargs):
        best = min(sp.valid_indices().tolist(), key=fake_seconds)
        return sp.get(best), fake_seconds(best)

    monkeypatch.setattr(tune, "exhaustive", fake_exhaustive, raising=False)
    code, out = run(["--layer", SPEC, "--json", "--exhaustive"], capsys)
    best = json.loads(out)["best"]
    want = min(sp.valid_indices().tolist(), key=fake_seconds)
    from codesign.analysis.roofline import roofline

    bound = roofline(sp.layer, sp.hw).bound_call_seconds
    assert best == {"knobs": sp.get(want).knobs, "index": want, "seconds": fake_seconds(want),
                    "roofline_fraction": bound / fake_seconds(want)}


def test_roofline_and_the_optimum_fraction_of_it_in_json_and_text(capsys):
    """The strided 1x1 conv whose optimum (2.772 ms) was below the old "bound" (2.868 ms)."""
    from codesign.analysis.roofline import roofline
    from codesign.hw.config import HwConfig
    from codesign.tune import exhaustive
    from codesign.workloads import parse_layer

    spec, hw = "conv2d:4,64,56,56,128,1,1,2,0", HwConfig.resolve("pynq_4x8")
    code, out = run(["--layer", spec, "--hw", "pynq_4x8", "--exhaustive", "--json"], capsys)
    info = json.loads(out)
    r = roofline(parse_layer(spec), hw)
    assert info["roofline"] == json.loads(json.dumps(r.to_dict()))
    _, best_s = exhaustive(parse_layer(spec), hw)
    assert info["best"]["seconds"] == best_s
    assert info["best"]["roofline_fraction"] == pytest.approx(r.bound_call_seconds / best_s)
    assert 0 < info["best"]["roofline_fraction"] <= 1
    code, out = run(["--layer", spec, "--hw", "pynq_4x8", "--exhaustive"], capsys)
    assert f"roofline  {r.bound_call_seconds * 1e3:.4f} ms  (memory-bound" in out
    assert f"({100 * r.bound_call_seconds / best_s:.1f}% of the roofline;" in out


def test_save_program_runs_bit_exact_in_simulate(tmp_path, capsys):
    import numpy as np

    from codesign.cli import main
    from codesign.evaluate.run import random_inputs
    from codesign.schedule import get_space
    from codesign.vta.program import Program
    from codesign.vta.simulator import simulate
    from codesign.workloads import parse_layer

    spec = "conv2d:1,32,8,8,32,3,3,1,1"
    path = tmp_path / "p.vtaprog"
    assert main(["space", "--layer", spec, "--save-program", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    layer = parse_layer(spec)
    program = Program.load(path)
    assert program.meta["index"] == info["program"]["index"] == int(get_space(layer, program.hw).valid_indices()[0])
    out = simulate(program).outputs["output"]
    got = layer.unpack_output(np.frombuffer(out.tobytes(), dtype=np.int8), program.hw)
    data, weight = random_inputs(layer)
    assert np.array_equal(got, layer.reference(data, weight))
    assert main(["space", "--layer", spec, "--save-program", str(path), "--index", "-1"]) == 2
    assert "--index -1" in capsys.readouterr().err


def test_save_program_of_unsupported_layer_names_the_batch_and_suggests_one(tmp_path, capsys):
    """--save-program on a batch BATCH does not divide said only "no valid schedule to compile"."""
    from codesign.cli import main

    path = tmp_path / "f.vtaprog"
    argv = ["space", "--layer", "conv2d:1,64,28,28,64,3,3,1,1", "--hw", "pynq_2x16_i8w8a32_15_14_17_16"]
    assert main([*argv, "--save-program", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "batch=1 is not a multiple of BATCH=2" in err
    assert "--layer conv2d:2,64,28,28,64,3,3,1,1" in err and not path.exists()
    assert main([*argv, "--json"]) == 0  # the listing carries the same hint
    assert json.loads(capsys.readouterr().out)["hint"].endswith("--layer conv2d:2,64,28,28,64,3,3,1,1")
