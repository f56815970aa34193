"""A network deployed on a board (docs/board.md): the .vtanet bundle of the trained small CNN runs on
an emulated board behind a real board server on 127.0.0.1 with outputs identical to the simulator
path; per inference only the input, the output and a small header cross the wire; a flipped byte,
a wrong bitstream and a truncated file are each refused in one line; two networks loaded one after
the other both run; the board runtime imports and runs without torch."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from codesign.board import Network
from codesign.board import bundle as fmt
from codesign.board.client import BoardClient
from codesign.board.driver import PynqApi, VTADriver
from codesign.board.emulated import EmulatedPynq
from codesign.board.local import local_board
from codesign.board.protocol import RemoteError
from codesign.cli import main
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.netrun import bundle
from codesign.netrun import network as whole
from codesign.network.importer import load_model

HW = HwConfig.resolve("pynq_1x16")
BATCH = 16  # the exported graph's batch: enough rows for the residual block's convs to go to VTA
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def digits(trained_digits):
    """The trained small CNN (conftest `trained_digits`) placed on `HW`, calibrated on 256 training images."""
    d = trained_digits
    prep = whole.prepare(d["net"], (torch.from_numpy(d["x_test"][:BATCH]),), "digits", HW,
                         calibration=d["x_train"][:256])
    assert any(s.placement == "vta" for s in prep.plan.steps)
    return prep, d["x_test"]


@pytest.fixture(scope="module")
def plain():
    """A second network: conv + ReLU + linear (16x16 input, its conv on VTA)."""
    torch.manual_seed(1)
    module = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 16 * 16, 16))
    rng = np.random.default_rng(1)
    cal = rng.standard_normal((8, 16, 16, 16)).astype(np.float32)
    prep = whole.prepare(module, (torch.from_numpy(cal[:1]),), "plain", HW, calibration=cal)
    return prep, rng.standard_normal((1, 16, 16, 16)).astype(np.float32)


@pytest.fixture(scope="module")
def bit():
    """A small valid .bit for pynq_1x16 on PYNQ-Z1 and its sha256."""
    from codesign.bitstream.bitfile import make_header

    body = bytes(range(256)) * 8
    data = make_header("vta_wrapper", "7z020clg484", "2026/11/22", "13:00:00", len(body)) + body
    return data, hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def board_addr(bit):
    with local_board("pynq_1x16") as b:
        with BoardClient(b.addr) as client:  # the loaded bitstream outlives the session
            client.program(bit[0], bit[1], HW.name)
        yield b.addr


@pytest.fixture()
def board(board_addr):
    with BoardClient(board_addr) as client:  # a network lives as long as its session
        yield client


def simulated(prep, x) -> list[np.ndarray]:
    return whole.execute(prep, x, whole.simulator_executor()).outputs(prep.qnet)


def test_bundle_runs_in_process_bit_exact_and_profiles(digits, bit, capsys) -> None:
    prep, x = digits
    blob = bundle.to_bytes(prep, bit[1])
    net = Network(blob, driver=VTADriver(PynqApi(EmulatedPynq(HW))), bitstream=(HW.name, bit[1]))
    ys, times = net.run(x[:BATCH])
    assert all(np.array_equal(a, b) for a, b in zip(ys, simulated(prep, x[:BATCH])))
    ran = [s.name for s in prep.plan.steps if not s.host]
    assert list(times) == ran and all(t > 0 for t in times.values())
    vta = [s.name for s in prep.plan.steps if s.placement == "vta"]
    assert vta and set(net.last_device_ms) == set(vta)
    table = net.profile()
    assert table in capsys.readouterr().out and all(name[:28] in table for name in ran)
    with pytest.raises(ConfigError, match=r"input 'x': shape \(1, 1, 8, 8\), expected \(16, 1, 8, 8\)"):
        net.run(x[:1])
    net.close()


def test_bundle_over_rpc_equals_simulator_with_bounded_wire_bytes(digits, board, bit) -> None:
    prep, x = digits
    info = board.load_network(bundle.to_bytes(prep, bit[1]))
    assert info["resident_bytes"] > 0 and [s["name"] for s in info["steps"]] == [s.name for s in prep.plan.steps]
    for k in range(2):
        batch = x[k * BATCH:(k + 1) * BATCH]
        reply = board.infer(batch)
        assert all(np.array_equal(a, b) for a, b in zip(reply.outputs, simulated(prep, batch)))
        n_steps = sum(not s.host for s in prep.plan.steps)
        # the input (quantized to int8 on the host) + a header; the int8 output + two numbers per step
        assert reply.sent_bytes <= batch.size + 128
        assert reply.received_bytes <= sum(o.nbytes for o in reply.outputs) + 128 + 48 * n_steps
        assert set(reply.step_ms) == {s.name for s in prep.plan.steps if not s.host}
    with pytest.raises(RemoteError) as err:
        board.infer(x[:1])
    assert len(str(err.value).splitlines()) == 1 and "input shape [1, 1, 8, 8]" in str(err.value)


def test_two_networks_loaded_one_after_the_other(digits, plain, board, bit) -> None:
    for prep, x in (plain, (digits[0], digits[1][:BATCH])):
        board.load_network(bundle.to_bytes(prep, bit[1]))
        reply = board.infer(x)
        assert all(np.array_equal(a, b) for a, b in zip(reply.outputs, simulated(prep, x)))


def test_tampered_truncated_and_mismatched_bundles_refused_in_one_line(plain, board, bit, tmp_path) -> None:
    prep, _ = plain
    blob = bundle.to_bytes(prep, bit[1])
    flipped = bytearray(blob)
    flipped[len(blob) // 3] ^= 0x01
    cases = [(bytes(flipped), r"tampered or corrupt|corrupt"), (blob[:len(blob) // 2], "truncated"),
             (bundle.to_bytes(prep, "f" * 64), "compiled for the bitstream with sha256 ffffffffffffffff")]
    for data, why in cases:
        with pytest.raises(RemoteError, match=why) as err:
            board.load_network(data)
        assert len(str(err.value).splitlines()) == 1
    doc, arrays = bundle.build(prep, bit[1])
    other = fmt.to_bytes({**doc, "hw_name": "pynq_4x8_i8w8a32_15_15_18_17"}, arrays)
    with pytest.raises(RemoteError, match="compiled for hw config pynq_4x8"):
        board.load_network(other)
    # an unknown schema version, in process
    import io
    import zipfile
    src = zipfile.ZipFile(io.BytesIO(blob))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for i in src.infolist():
            data = src.read(i.filename)
            if i.filename == "manifest.json":
                data = json.dumps({**json.loads(data), "schema": 99}).encode()
            z.writestr(i.filename, data)
    with pytest.raises(ConfigError, match="schema version 99"):
        fmt.read(out.getvalue())
    # too big for the board's memory: refused before anything is loaded
    with pytest.raises(ConfigError, match="more than the 1000 bytes available; nothing was loaded"):
        Network(blob, driver=VTADriver(PynqApi(EmulatedPynq(HW))), memory_bytes=1000)


NET_PY = """
import torch
from torch import nn

def small():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 16 * 16, 16)), \\
        (torch.randn(1, 16, 16, 16),)
"""


def test_deploy_cli_writes_a_bundle_and_refuses_one_line(bit, tmp_path, capsys) -> None:
    (tmp_path / "vta.bit").write_bytes(bit[0])
    (tmp_path / "nets.py").write_text(NET_PY)
    spec = f"{tmp_path / 'nets.py'}:small"
    out = tmp_path / "net.vtanet"
    assert main(["deploy", "--workload", spec, "--hw", "pynq_1x16", "--bitstream", str(tmp_path / "vta.bit"),
                 "-o", str(out), "--json"]) == 0
    b = fmt.read(out)
    assert b.doc["bitstream_sha256"] == bit[1] and b.doc["hw_name"] == HW.name
    capsys.readouterr()
    assert main(["deploy", "--workload", spec, "--hw", "pynq_1x16", "-o", str(tmp_path / "x.zip")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ".vtanet" in err


def test_board_runtime_imports_and_runs_without_torch(plain, bit, tmp_path) -> None:
    prep, x = plain
    path = tmp_path / "plain.vtanet"
    bundle.write(prep, path, bit[1])
    np.save(tmp_path / "x.npy", x)
    want = simulated(prep, x)[0]
    np.save(tmp_path / "want.npy", want)
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np\n"
        "from codesign.board import Network\n"
        "from codesign.board.driver import PynqApi, VTADriver\n"
        "from codesign.board.emulated import EmulatedPynq\n"
        f"net = Network({str(path)!r}, driver=VTADriver(PynqApi(EmulatedPynq('pynq_1x16'))))\n"
        f"ys, _ = net.run(np.load({str(tmp_path / 'x.npy')!r}))\n"
        f"assert np.array_equal(ys[0], np.load({str(tmp_path / 'want.npy')!r}))\n"
        "print('ran without torch')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0 and "ran without torch" in res.stdout, res.stderr[-800:]


def test_run_board_uses_the_deployed_bundle_and_reports_measured_ms(board_addr, tmp_path, capsys) -> None:
    (tmp_path / "nets.py").write_text(NET_PY)
    args = ["run", "--workload", f"{tmp_path / 'nets.py'}:small", "--hw", "pynq_1x16"]
    assert main([*args, "--board", board_addr, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["bit_exact"] and "deployed bundle" in res["executor"] and res["measured_ms"] > 0
    ran = [r for r in res["ops"] if not r.get("host") and r["name"] == r["step"]]
    assert ran and all(r["measured_ms"] > 0 for r in ran)
    assert res["measured_ms"] == pytest.approx(sum(r["measured_ms"] for r in ran))
    assert all("measured_device_ms" in r for r in ran if r["placement"] == "vta")
    assert main([*args, "--simulate", "--json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["latency_ms"] == pytest.approx(res["latency_ms"])  # the same plan, predicted alike


CPU_NET_PY = """
import torch
from torch import nn

def cpu_only():  # 8x8 digits-sized, batch 1: every op stays on the CPU
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 8, 3, padding=1), nn.Flatten(), nn.Linear(8 * 8 * 8, 10)), \\
        (torch.randn(1, 1, 8, 8),)
"""


def test_board_run_json_feeds_calibrate_cpu(board_addr, tmp_path, capsys) -> None:
    (tmp_path / "nets.py").write_text(CPU_NET_PY)
    runs = []
    for k in range(2):  # two runs: 8 measured CPU GEMMs for 4 parameters
        assert main(["run", "--workload", f"{tmp_path / 'nets.py'}:cpu_only", "--hw", "pynq_1x16", "--board",
                     board_addr, "--json"]) == 0
        runs.append(tmp_path / f"run{k}.json")
        runs[-1].write_text(capsys.readouterr().out)
    res = json.loads(runs[0].read_text())
    works = [r for r in res["ops"] if "cpu_work" in r]
    assert {r["cpu_work"]["kind"] for r in works} == {"spatial_pack", "dense"} and len(works) == 4
    assert all(r["measured_ms"] > 0 for r in works)
    out = tmp_path / "cpu.json"
    assert main(["calibrate", "cpu", *map(str, runs), "-o", str(out), "--no-loo", "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    params = fit["cpus"][res["cpu"]]
    assert set(params["gmacs"]) == {"spatial_pack/int8", "dense/int8"} and all(v > 0 for v in params["gmacs"].values())


def test_serve_network_bytes_limits_what_a_board_server_loads(plain, bit) -> None:
    """`codesign board serve --network-bytes N`: a bundle needing more is refused in one line that
    names the flag, before anything loads; the server says its limit in `info`."""
    prep, _x = plain
    doc, arrays = bundle.build(prep, bit[1])
    blob = fmt.to_bytes(doc, arrays)
    with local_board("pynq_1x16", extra=["--network-bytes", "1000"]) as b, BoardClient(b.addr) as client:
        assert client.info()["network_bytes"] == 1000
        client.program(bit[0], bit[1], HW.name)
        with pytest.raises(RemoteError, match="more than the 1000 bytes available; nothing was loaded .*--network-bytes"):
            client.load_network(blob)


def test_resnet18_bundle_over_rpc_equals_simulator(board, bit) -> None:
    """The issue's second network: ResNet-18 (the zoo's, seeded weights, 224x224) deployed as one
    bundle runs on the emulated board bit-exact with `codesign run --simulate`'s executor; only
    the int8 input and the output cross the wire."""
    module, inputs, name = load_model("resnet18")
    prep = whole.prepare(module, inputs, name, HW)
    x = inputs[0].numpy()
    board.load_network(bundle.to_bytes(prep, bit[1]))
    reply = board.infer(x)
    assert all(np.array_equal(a, b) for a, b in zip(reply.outputs, simulated(prep, x)))
    assert reply.sent_bytes <= x.size + 128  # the int8 input and a header
    assert sum(s.placement == "vta" for s in prep.plan.steps) >= 20


@pytest.mark.parametrize("heads", [1, 4])
def test_attention_bundle_takes_its_weights_from_an_activation(bit, heads) -> None:
    """Both attention matmuls on VTA (one head of 64: one call; four heads of 16: one grouped
    conv): the second operand fills the program's weight region per inference (`weight_map`),
    and the bundle runs bit-exact with the simulator."""
    from test_place_matmul import SDPA, SelfAttention

    module = SelfAttention(64, heads).eval()
    x = torch.randn(1, 128, 64, generator=torch.Generator().manual_seed(heads))
    prep = whole.prepare(module, (x,), "attn", HW)
    assert prep.plan.step_of(SDPA).placement == "vta" and prep.plan.step_of(f"{SDPA}_scores").placement == "vta"
    doc, _arrays = bundle.build(prep, bit[1])
    assert sum(1 for s in doc["steps"] if (s.get("vta") or {}).get("weight")) == 2
    net = Network(fmt.to_bytes(doc, _arrays), driver=VTADriver(PynqApi(EmulatedPynq(HW))), bitstream=(HW.name, bit[1]))
    for seed in (0, 1):
        xi = torch.randn(1, 128, 64, generator=torch.Generator().manual_seed(10 + seed)).numpy()
        ys, _ = net.run(xi)
        assert all(np.array_equal(a, b) for a, b in zip(ys, simulated(prep, xi)))
    net.close()
