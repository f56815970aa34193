"""The board path: driver over the emulated PYNQ (relocation, buffers, caches, registers), the
tvm.rpc board server (only its own functions, refusals), and `codesign board run` bit-exact with
`codesign simulate`. Servers listen on 127.0.0.1 and every process started here is stopped."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codesign.bitstream.bitfile import make_header
from codesign.board import protocol
from codesign.board.client import BoardClient
from codesign.board.driver import PynqApi, VTADriver, relocate
from codesign.board.emulated import EmulatedPynq
from codesign.board.local import local_board
from codesign.board.server import ServeOptions, check_bind
from codesign.errors import BoardError
from codesign.evaluate.compiler import compile_layer
from codesign.hw.config import HwConfig
from codesign.schedule.space import ScheduleSpace
from codesign.vta.simulator import simulate
from codesign.workloads import parse_layer

ROOT = Path(__file__).resolve().parents[1]
# (hw config, layer, knob filter): 1x16, 4x8 (BATCH 4) and BLOCK_IN != BLOCK_OUT, each with a
# virtual-thread schedule (oc_nthread or h_nthread = 2)
CASES = [
    ("pynq_1x16", "conv2d:1,32,14,14,32,3,3,1,1"),
    ("pynq_4x8", "conv2d:4,16,8,8,16,3,3,1,1"),
    ("pynq_1x16x32_i8w8a32_15_15_18_17", "conv2d:1,32,14,14,64,3,3,1,1"),
]


def _threaded_program(hw_name: str, spec: str, seed: int = 0):
    hw, layer = HwConfig.resolve(hw_name), parse_layer(spec)
    space = ScheduleSpace(layer, hw)
    valid = [space.get(int(i)) for i in space.valid_indices()]
    threaded = [c for c in valid if c.knobs["oc_nthread"] * c.knobs.get("h_nthread", 1) > 1]
    assert threaded, f"no virtual-thread schedule for {spec} on {hw_name}"
    rng = np.random.default_rng(seed)
    data = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
    weight = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
    return compile_layer(layer, threaded[-1], hw, data=data, weight=weight)


def _bit(part: str, payload: bytes = b"\xff" * 64) -> bytes:
    return make_header("vta_wrapper", part, "2026/01/01", "00:00:00", len(payload)) + payload


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codesign.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


# -- driver + emulated PYNQ, no RPC -----------------------------------------------------------------
@pytest.mark.parametrize("hw_name,spec", CASES)
def test_driver_on_emulated_pynq_is_bit_exact_with_the_simulator(hw_name, spec):
    program = _threaded_program(hw_name, spec)
    ref = simulate(program)
    pynq = EmulatedPynq(program.hw)
    res = VTADriver(PynqApi(pynq)).run(program, number=2, repeat=2)
    for name, data in ref.outputs.items():
        assert np.array_equal(res.outputs[name], data), name
    assert res.device_s == [ref.cycles / program.hw.clock_hz] * 2
    assert pynq.device.runs == 4
    # every buffer was relocated away from the program's own addresses
    assert all(res.buffers[r.name] != r.addr for r in program.regions)


class _NoFlush(PynqApi):
    @staticmethod
    def coherent(buf):  # claims coherence the emulated buffers do not have
        return True


def test_a_missing_cache_flush_fails_on_the_emulated_board():
    program = _threaded_program(*CASES[0])
    with pytest.raises(BoardError, match="did not signal done"):
        VTADriver(_NoFlush(EmulatedPynq(program.hw))).run(program, timeout_s=0.2)


def test_relocation_checks_alignment_and_bounds():
    program = _threaded_program(*CASES[0])
    phys = {r.name: 0x2000_0000 + k * 0x10_0000 for k, r in enumerate(program.regions)}
    moved = relocate(program.insns, program, phys)
    assert not np.array_equal(moved, program.insns)
    phys[program.regions[0].name] += 1
    with pytest.raises(BoardError, match="not aligned"):
        relocate(program.insns, program, phys)


def test_pynq_versions_and_missing_api():
    class Buf2:
        physical_address = 0x1000  # PYNQ 2.x

    class Buf3:
        device_address = 0x2000  # PYNQ 3.x

    assert PynqApi.phys_addr(Buf2()) == 0x1000 and PynqApi.phys_addr(Buf3()) == 0x2000
    with pytest.raises(BoardError, match="neither .device_address"):
        PynqApi.phys_addr(object())

    class OldPynq:
        __version__ = "2.1"
        MMIO = object

    with pytest.raises(BoardError, match=r"pynq 2\.1 lacks pynq\.allocate, pynq\.Bitstream"):
        PynqApi(OldPynq())


def test_board_side_imports_without_host_only_libraries():
    code = ("import sys\n"
            "for m in ('ray', 'torch', 'xgboost', 'optuna', 'matplotlib'):\n"
            "    sys.modules[m] = None  # importing them now raises ImportError\n"
            "import codesign.board.server, codesign.board.driver, codesign.board.client, codesign.board.emulated\n"
            "import codesign.commands.board\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    # a real board's server does not need the numba simulator
    code = "import sys, codesign.board.server, codesign.board.driver\nprint('numba' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "False", out.stderr[-2000:]


# -- over tvm.rpc ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def board():
    with local_board("pynq_1x16", max_payload=1 << 20) as proc:
        yield proc


def test_info_and_only_own_functions(board):
    with BoardClient(board.addr) as client:
        info = client.info()
        assert info["emulated"] is True and info["emulated_config"] == HwConfig.resolve("pynq_1x16").name
        assert info["functions"] == list(protocol.FUNCTIONS)
        for name in ("tvm.rpc.server.upload", "tvm.rpc.server.load_module", "runtime.ModuleLoadFromFile",
                     "ffi.ModuleLoadFromFile", "rpc.PopenSession", "no.such.function"):
            with pytest.raises(BoardError, match=f"does not serve '{name}'; it serves only"):
                client.call(name)
        with pytest.raises(AttributeError, match="has no function 'tvm.rpc.server.upload'"):
            client.session.upload(bytearray(b"\x7fELF"), "evil.so")  # tvm's own client API
        assert client.info()["board"] == "pynq-z1"  # the session survives refusals


def test_program_refusals_then_success(board):
    hw = HwConfig.resolve("pynq_1x16")
    good = _bit("7z020clg484", payload=b"\x01" * 256)
    with BoardClient(board.addr) as client:
        with pytest.raises(BoardError, match="checksum mismatch") as exc:
            client.program(good, "0" * 64, hw.name)
        assert "\n" not in str(exc.value)
        with pytest.raises(BoardError, match="is for part xczu3eg.*this board .pynq-z1. is a xc7z020"):
            client.program(_bit("xczu3eg-sbva484-1-e"), None, hw.name)
        with pytest.raises(BoardError, match="implements only pynq_1x16.*pynq_4x8"):
            client.program(good, None, "pynq_4x8")
        with pytest.raises(BoardError, match="not a Xilinx .bit file"):
            client.program(b"hello", None, hw.name)
        with pytest.raises(BoardError, match=r"exceeds this board's payload limit of 1048576 bytes"):
            client.program(_bit("7z020clg484", payload=b"\0" * (2 << 20)), None, hw.name)
        state = client.program(good, None, hw.name)["bitstream"]
        assert state["sha256"] == hashlib.sha256(good).hexdigest() and state["config"] == hw.name
    with BoardClient(board.addr) as client:  # a new session remembers the loaded bitstream
        assert client.info()["bitstream"]["sha256"] == hashlib.sha256(good).hexdigest()


def test_bitstream_path_mistakes_are_named(board, tmp_path):
    hw = HwConfig.resolve("pynq_1x16")
    with BoardClient(board.addr) as client:
        with pytest.raises(BoardError, match=r"--bitstream .*nosuch.bit: no such file$"):
            client.ensure_bitstream(hw.name, tmp_path / "nosuch.bit")
        # a directory was reported as "no such file"
        with pytest.raises(BoardError, match=r"--bitstream .*: is a directory, expected a \.bit file$"):
            client.ensure_bitstream(hw.name, tmp_path)


def test_run_refusals(board):
    with BoardClient(board.addr) as client:
        other = _threaded_program(*CASES[1])
        with pytest.raises(BoardError, match="compiled for pynq_4x8.*board runs pynq_1x16"):
            client.run(other.to_bytes())
        blob = bytearray(_threaded_program(*CASES[0]).to_bytes())
        blob[100] ^= 0xFF
        with pytest.raises(BoardError, match="checksum mismatch"):
            client.run(bytes(blob))
        with pytest.raises(BoardError, match="number=0"):
            client.run(bytes(blob), number=0)


def test_non_localhost_bind_needs_host():
    with pytest.raises(BoardError, match="binds 127.0.0.1 unless --host"):
        check_bind(ServeOptions(host="0.0.0.0"), host_given=False)
    check_bind(ServeOptions(host="0.0.0.0"), host_given=True)
    out = _cli("board", "serve", "--emulate", "pynq_1x16", "--tracker", "10.9.8.7:9190", "--key", "pynq")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "pass --host 0.0.0.0" in lines[0], out.stderr


@pytest.mark.parametrize("args, says", [
    (["--emulate", "nosuch"], "hardware name 'nosuch'"),
    (["--emulate", "pynq_1x16", "--board", "nosuch"], "unknown board 'nosuch'"),
])
def test_serve_refuses_bad_options_in_one_line(args, says):
    # These used to fail inside tvm's server process and print its whole traceback.
    out = _cli("board", "serve", "--port", "9391", *args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in out.stderr, out.stderr


def test_board_run_is_bit_exact_with_simulate(board, tmp_path):
    boards = {CASES[0][0]: board}
    extra = [local_board(hw) for hw, _ in CASES[1:]]
    try:
        boards.update({hw: b for (hw, _), b in zip(CASES[1:], extra)})
        for hw, spec in CASES:
            path = _threaded_program(hw, spec, seed=3).save(tmp_path / f"{hw}.vtaprog")
            sim = _cli("simulate", str(path), "--json", "--save-outputs", str(tmp_path / f"sim_{hw}"))
            run = _cli("board", "run", str(path), "--board", boards[hw].addr, "--repeat", "2", "--json",
                       "--save-outputs", str(tmp_path / f"board_{hw}"))
            assert sim.returncode == 0 and run.returncode == 0, sim.stderr + run.stderr
            s, r = json.loads(sim.stdout), json.loads(run.stdout)
            assert r["outputs"].keys() == s["outputs"].keys()
            for name in s["outputs"]:
                assert r["outputs"][name]["sha256"] == s["outputs"][name]["sha256"]
                assert (tmp_path / f"board_{hw}" / f"{name}.bin").read_bytes() == \
                    (tmp_path / f"sim_{hw}" / f"{name}.bin").read_bytes()
            assert r["device_s"] == pytest.approx(s["seconds_device"], rel=1e-12)
            assert r["emulated"] is True and r["call_s"] > 0 and r["rpc_s"] >= r["call_s"]
    finally:
        for b in extra:
            b.stop()


def test_tune_cli_on_a_board(board, tmp_path):
    records = tmp_path / "r.jsonl"
    out = _cli("tune", "--layer", "conv2d:1,32,14,14,32,3,3,1,1", "--hw", "pynq_1x16", "--tuner", "grid",
               "--trials", "4", "--board", board.addr, "--repeat", "2", "--check-correctness",
               "--records", str(records), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["measurements"] == 4
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(lines) == 4 and all(r["error"] is None for r in lines)
    assert all(r["source"].startswith(f"emulated-board:pynq-z1@{board.addr}") for r in lines)
    assert all(r["device_s"] == r["seconds"] and r["call_s"] > 0 for r in lines)
