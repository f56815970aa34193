"""Program container, blob format, `simulate()` entry point and the `codesign simulate` CLI."""

from __future__ import annotations

import argparse
import hashlib
import json

import numpy as np
import pytest

from codesign.commands import simulate as simulate_cmd
from codesign.errors import CodesignError, SimulationError
from codesign.hw.config import HwConfig
from codesign.vta import isa
from codesign.vta.program import DramAllocator, DramRegion, Program, ProgramBuilder
from codesign.vta.simulator import simulate

HW = HwConfig()
HW48 = HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18")


def small_program(hw: HwConfig = HW, seed: int = 0):
    """INP x WGT -> ACC, SHR 4, clip to [0, 127], STORE; with tokens. Returns (program, expected)."""
    rng = np.random.default_rng(seed)
    n = 6
    inp = rng.integers(-128, 128, (n, hw.batch * hw.block_in), dtype=np.int8)
    wgt = rng.integers(-128, 128, (1, hw.block_out * hw.block_in), dtype=np.int8)
    b = ProgramBuilder(hw)
    ri, rw = b.input("data", inp, hw.inp_elem_bytes), b.input("weight", wgt, hw.wgt_elem_bytes)
    ro = b.output("out", n * hw.out_elem_bytes, hw.out_elem_bytes)
    b.load(isa.MEM_INP, 0, ri.addr // hw.inp_elem_bytes, 1, n)
    b.load(isa.MEM_WGT, 0, rw.addr // hw.wgt_elem_bytes, 1, 1, push_next_dep=1)
    b.load_uops([[0, 0, 0]], sram_base=0, pop_prev_dep=1)
    b.gemm(0, 1, iter_out=n, dst=(1, 0), reset=True)
    b.gemm(0, 1, iter_out=n, dst=(1, 0), src=(1, 0))
    b.alu(isa.ALU_SHR, 0, 1, iter_out=n, dst=(1, 0), src=(1, 0), imm=4)
    b.alu(isa.ALU_MIN, 0, 1, iter_out=n, dst=(1, 0), src=(1, 0), imm=127)
    b.alu(isa.ALU_MAX, 0, 1, iter_out=n, dst=(1, 0), src=(1, 0), imm=0, push_next_dep=1)
    b.store(0, ro.addr // hw.out_elem_bytes, 1, n, pop_prev_dep=1, push_prev_dep=1)
    b.load(isa.MEM_UOP, 0, 0, 0, 0, pop_next_dep=1)
    b.finish()
    x = inp.reshape(n, hw.batch, hw.block_in).astype(np.int32)
    w = wgt.reshape(hw.block_out, hw.block_in).astype(np.int32)
    expect = np.clip((x @ w.T) >> 4, 0, 127).astype(np.uint8).reshape(-1)
    return b.build({"what": "small", "n": np.int64(n)}), expect


def test_allocator_aligns_and_never_uses_address_zero():
    a = DramAllocator()
    r1 = a.alloc("a", 10, 16, "input", np.zeros(10, np.uint8))
    r2 = a.alloc("b", 300, 256, "output")
    r3 = a.alloc_uops(np.array([[1, 2, 3]]), HW)
    assert (r1.addr, r2.addr, r3.addr) == (4096, 4352, 4652) and r3.data.size == 4
    assert r2.elem_base(256) == 17 and r3.role == "uop"
    with pytest.raises(CodesignError, match="address 0"):
        DramAllocator(0)
    with pytest.raises(CodesignError, match="allocated twice"):
        a.alloc("a", 1, 1, "input")
    with pytest.raises(CodesignError, match="role"):
        DramRegion("x", 4096, 1, "scratch")
    with pytest.raises(CodesignError, match="has 3 bytes"):
        DramRegion("x", 4096, 4, "input", np.zeros(3, np.uint8))
    with pytest.raises(CodesignError, match="overlap"):
        Program(HW, isa.insn_from_fields(opcode=3), regions=[DramRegion("a", 4096, 8, "input"),
                                                             DramRegion("b", 4100, 8, "output")])


@pytest.mark.parametrize("hw", [HW, HW48], ids=["1x16", "4x8"])
def test_blob_round_trip_is_exact(hw, tmp_path):
    prog, _ = small_program(hw)
    blob = prog.to_bytes()
    again = Program.from_bytes(blob)
    assert again.hw == hw and np.array_equal(again.insns, prog.insns) and np.array_equal(again.uops, prog.uops)
    assert again.meta == {"what": "small", "n": 6}
    assert [(r.name, r.addr, r.nbytes, r.role) for r in again.regions] == \
        [(r.name, r.addr, r.nbytes, r.role) for r in prog.regions]
    for r0, r1 in zip(prog.regions, again.regions):
        assert (r0.data is None and r1.data is None) or np.array_equal(r0.data, r1.data)
    assert again.to_bytes() == blob
    path = prog.save(tmp_path / "p.vtaprog")
    assert Program.load(path).to_bytes() == blob
    assert again.region("uop").data.tobytes() == isa.encode_uops(prog.uops, hw)


def test_corrupt_blobs_are_one_clear_error(tmp_path):
    blob = small_program()[0].to_bytes()
    for bad, match in [(blob[:-7], "checksum"), (b"junk" + blob, "magic"),
                       (blob[:30] + bytes([blob[30] ^ 1]) + blob[31:], "checksum"), (b"", "magic")]:
        with pytest.raises(CodesignError, match=match):
            Program.from_bytes(bad)
    with pytest.raises(CodesignError, match="no such file"):
        Program.load(tmp_path / "missing.vtaprog")


@pytest.mark.parametrize("hw", [HW, HW48], ids=["1x16", "4x8"])
def test_simulate_functional_and_timing_only(hw):
    prog, expect = small_program(hw)
    fun = simulate(prog)
    assert np.array_equal(fun.outputs["out"], expect)
    tim = simulate(prog, functional=False)
    assert tim.outputs == {} and tim.counters == fun.counters and tim.cycles == fun.cycles > 0
    assert fun.counters == {"inp_load_nbytes": 6 * hw.inp_elem_bytes, "wgt_load_nbytes": hw.wgt_elem_bytes,
                            "acc_load_nbytes": 0, "uop_load_nbytes": 4, "out_store_nbytes": 6 * hw.out_elem_bytes,
                            "gemm_counter": 6, "alu_counter": 18}
    assert fun.n_insns == prog.n_insns == 11 and fun.tokens_left == {}
    assert set(fun.busy) == {"load", "compute", "store"}
    assert fun.seconds_device == pytest.approx(fun.cycles / hw.clock_hz)


def test_simulate_inputs_override_and_missing_data():
    prog, expect = small_program()
    zeros = np.zeros(6 * 16, np.int8)
    res = simulate(prog, inputs={"data": zeros})
    assert not res.outputs["out"].any()
    with pytest.raises(CodesignError, match="data has 5 bytes"):
        simulate(prog, inputs={"data": np.zeros(5, np.uint8)})
    with pytest.raises(SimulationError, match="unknown DRAM region 'nope'"):
        simulate(prog, inputs={"nope": zeros})
    prog.region("uop").data = None  # the micro-op region's content is the program's uop table
    assert np.array_equal(simulate(prog).outputs["out"], expect)
    prog.region("data").data = None
    with pytest.raises(SimulationError, match="'data' \\(input\\) has no data"):
        simulate(prog)
    assert simulate(prog, functional=False).cycles > 0  # timing-only never needs data


def _cli(argv):
    parser = argparse.ArgumentParser(prog="codesign")
    sub = parser.add_subparsers(dest="command")
    simulate_cmd.register(sub, "run a program")
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_prints_cycles_seconds_and_counters(tmp_path, capsys):
    prog, expect = small_program()
    path = prog.save(tmp_path / "p.vtaprog")
    assert _cli(["simulate", str(path), "--json", "--save-outputs", str(tmp_path / "out")]) == 0
    out = json.loads(capsys.readouterr().out)
    res = simulate(prog)
    assert out["cycles"] == res.cycles and out["counters"] == res.counters and out["busy"] == res.busy
    assert out["mode"] == "functional" and out["n_insns"] == 11 and out["seconds"] > out["seconds_device"] > 0
    assert (tmp_path / "out" / "out.bin").read_bytes() == expect.tobytes()
    assert _cli(["simulate", str(path), "--timing-only"]) == 0
    text = capsys.readouterr().out
    assert f"cycles    {res.cycles}" in text and "gemm_counter       6" in text and "timing-only" in text
    (tmp_path / "zeros.bin").write_bytes(bytes(6 * 16))
    assert _cli(["simulate", str(path), "--json", "--input", f"data={tmp_path / 'zeros.bin'}"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"]["out"]["sha256"] == \
        hashlib.sha256(bytes(6 * 16)).hexdigest()
    prog.region("data").data = None
    prog.save(tmp_path / "nodata.vtaprog")
    with pytest.raises(CodesignError, match="input region 'data' has no data.*--timing-only"):
        _cli(["simulate", str(tmp_path / "nodata.vtaprog")])
    (tmp_path / "bad.vtaprog").write_bytes(b"VTAPROG\x01garbage")
    with pytest.raises(CodesignError, match="bad.vtaprog: not a valid VTA program blob"):
        _cli(["simulate", str(tmp_path / "bad.vtaprog")])
