"""ISA encoding: bit positions (docs/vta.md §2.3–§2.7), round trips on several configs, range checks."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.hw.config import HwConfig
from codesign.vta import isa

DEFAULT = HwConfig()
CONFIGS = [
    DEFAULT,
    HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18"),
    HwConfig().with_(LOG_UOP_BUFF_SIZE=13, LOG_INP_BUFF_SIZE=14),
]

# (field, msb, lsb) straight from the reference tables for the default config.
MEM_TABLE = [("pop_prev_dep", 3, 3), ("pop_next_dep", 4, 4), ("push_prev_dep", 5, 5),
             ("push_next_dep", 6, 6), ("memory_type", 9, 7), ("sram_base", 25, 10),
             ("dram_base", 57, 26), ("y_size", 79, 64), ("x_size", 95, 80), ("x_stride", 111, 96),
             ("y_pad_0", 115, 112), ("y_pad_1", 119, 116), ("x_pad_0", 123, 120), ("x_pad_1", 127, 124)]
LOOP_TABLE = [("pop_prev_dep", 3, 3), ("pop_next_dep", 4, 4), ("push_prev_dep", 5, 5),
              ("push_next_dep", 6, 6), ("reset_reg", 7, 7), ("uop_bgn", 20, 8), ("uop_end", 34, 21),
              ("iter_out", 48, 35), ("iter_in", 62, 49), ("dst_factor_out", 74, 64),
              ("dst_factor_in", 85, 75), ("src_factor_out", 96, 86), ("src_factor_in", 107, 97)]
GEMM_TABLE = LOOP_TABLE + [("wgt_factor_out", 117, 108), ("wgt_factor_in", 127, 118)]
ALU_TABLE = LOOP_TABLE + [("alu_opcode", 110, 108), ("use_imm", 111, 111), ("imm", 127, 112)]
FINISH_TABLE = [("pop_prev_dep", 3, 3), ("pop_next_dep", 4, 4), ("push_prev_dep", 5, 5),
                ("push_next_dep", 6, 6)]
UOP_TABLE = [("dst_idx", 10, 0), ("src_idx", 21, 11), ("wgt_idx", 31, 22)]


def as_int(data: bytes) -> int:
    return int.from_bytes(data, "little")


@pytest.mark.parametrize("opcode,table", [(isa.OP_LOAD, MEM_TABLE), (isa.OP_STORE, MEM_TABLE),
                                          (isa.OP_GEMM, GEMM_TABLE), (isa.OP_ALU, ALU_TABLE),
                                          (isa.OP_FINISH, FINISH_TABLE)])
def test_each_field_occupies_the_reference_bits(opcode, table):
    assert [(f.name, f.offset + f.width - 1, f.offset) for f in isa.layout(opcode, DEFAULT)] == \
        [("opcode", 2, 0)] + table
    for name, msb, lsb in table:
        width = msb - lsb + 1
        ones = -1 if name == "imm" else (1 << width) - 1
        word = as_int(isa.encode_insn({"opcode": opcode, name: ones}, DEFAULT))
        assert word == opcode | (((1 << width) - 1) << lsb), name


def test_mem_instruction_hand_encoded():
    fields = dict(opcode=isa.OP_LOAD, pop_next_dep=1, push_next_dep=1, memory_type=isa.MEM_INP,
                  sram_base=5, dram_base=0x100, y_size=3, x_size=4, x_stride=7,
                  y_pad_0=1, y_pad_1=2, x_pad_0=3, x_pad_1=4)
    data = isa.encode_insn(fields, DEFAULT)
    assert data == (0x0000000400001550).to_bytes(8, "little") + (0x4321000700040003).to_bytes(8, "little")
    assert isa.decode_insn(data, DEFAULT) == {**dict.fromkeys(f.name for f in isa.layout(0, DEFAULT)),
                                               "pop_prev_dep": 0, "push_prev_dep": 0, **fields}


def test_gemm_and_alu_hand_encoded():
    gemm = dict(opcode=2, pop_prev_dep=1, uop_bgn=1, uop_end=3, iter_out=2, iter_in=5, dst_factor_out=1,
                dst_factor_in=2, src_factor_out=3, src_factor_in=4, wgt_factor_out=5, wgt_factor_in=6)
    assert as_int(isa.encode_insn(gemm, DEFAULT)) == (
        2 | 1 << 3 | 1 << 8 | 3 << 21 | 2 << 35 | 5 << 49
        | 1 << 64 | 2 << 75 | 3 << 86 | 4 << 97 | 5 << 108 | 6 << 118)
    assert as_int(isa.encode_insn(gemm, DEFAULT)) == 0x0180500800C01001 << 64 | 0x000A00100060010A
    alu = dict(opcode=4, push_next_dep=1, uop_bgn=7, uop_end=8, iter_out=1, iter_in=784, dst_factor_in=1,
               src_factor_in=1, alu_opcode=isa.ALU_SHR, use_imm=1, imm=-3)
    assert as_int(isa.encode_insn(alu, DEFAULT)) == (
        4 | 1 << 6 | 7 << 8 | 8 << 21 | 1 << 35 | 784 << 49
        | 1 << 75 | 1 << 97 | 3 << 108 | 1 << 111 | (0x10000 - 3) << 112)
    dec = isa.decode_insn(isa.encode_insn(alu, DEFAULT), DEFAULT)
    assert dec["imm"] == -3 and "wgt_factor_in" not in dec and "memory_type" not in dec


def test_finish_uses_only_the_generic_header():
    data = isa.encode_insn({"opcode": isa.OP_FINISH, "pop_next_dep": 1}, DEFAULT)
    assert as_int(data) == 3 | 1 << 4
    assert isa.decode_insn(data, DEFAULT) == {"opcode": 3, "pop_prev_dep": 0, "pop_next_dep": 1,
                                              "push_prev_dep": 0, "push_next_dep": 0}


def test_uop_bits():
    assert as_int(isa.encode_uop({"dst_idx": 1, "src_idx": 2, "wgt_idx": 3}, DEFAULT)) == 1 | 2 << 11 | 3 << 22
    for name, msb, lsb in UOP_TABLE:
        ones = (1 << (msb - lsb + 1)) - 1
        assert as_int(isa.encode_uop({name: ones}, DEFAULT)) == ones << lsb
    hw48 = CONFIGS[1]  # acc 11, inp 11, wgt 10 as well (docs/vta.md §2.7)
    assert isa.uop_widths(hw48) == (11, 11, 10)


def test_field_straddling_bit_64_moves_to_the_next_word():
    lay = isa._pack([("a", 60), ("b", 8), ("c", 52)])  # noqa: SLF001 - the packing rule itself
    assert [(f.offset, f.width) for f in lay] == [(0, 60), (64, 8), (72, 52)]
    with pytest.raises(Exception, match="128 bits"):
        isa._pack([("a", 60), ("b", 8), ("c", 60)])  # noqa: SLF001


def test_small_uop_buffer_shifts_loop_fields():
    small = CONFIGS[2]  # uop depth log 11 -> uop_bgn 11 bits, uop_end 12 bits, inp depth log 10
    lay = {f.name: (f.offset, f.width) for f in isa.layout(isa.OP_GEMM, small)}
    assert lay["uop_bgn"] == (8, 11) and lay["uop_end"] == (19, 12)
    assert lay["iter_out"] == (31, 14) and lay["iter_in"] == (45, 14)
    assert lay["src_factor_out"] == (86, 10) and lay["src_factor_in"] == (96, 10)
    assert lay["wgt_factor_out"] == (106, 10) and lay["wgt_factor_in"] == (116, 10)


def _random_fields(rng: np.random.Generator, opcode: int, hw: HwConfig) -> dict[str, int]:
    out = {}
    for f in isa.layout(opcode, hw):
        out[f.name] = opcode if f.name == "opcode" else int(rng.integers(f.lo, f.hi, endpoint=True))
    return out


@pytest.mark.parametrize("hw", CONFIGS, ids=lambda h: h.name)
def test_random_round_trips(hw):
    rng = np.random.default_rng(hash(hw.name) % 2**32)
    rows = []
    for _ in range(300):
        opcode = int(rng.choice([0, 1, 2, 3, 4]))
        fields = _random_fields(rng, opcode, hw)
        data = isa.encode_insn(fields, hw)
        assert len(data) == 16
        assert isa.decode_insn(data, hw) == fields
        rows.append((fields, data))
    matrix = np.concatenate([isa.insn_from_fields(**f) for f, _ in rows])
    blob = isa.encode_insns(matrix, hw)
    assert blob == b"".join(d for _, d in rows)  # vectorized == scalar, exactly
    assert np.array_equal(isa.decode_insns(blob, hw), matrix)
    assert isa.insns_to_dicts(matrix, hw) == [f for f, _ in rows]
    widths = isa.uop_widths(hw)
    uops = np.stack([rng.integers(0, 1 << w, 500) for w in widths], axis=1)
    ublob = isa.encode_uops(uops, hw)
    assert ublob == b"".join(isa.encode_uop(dict(zip(isa.UOP_FIELDS, map(int, u))), hw) for u in uops)
    assert np.array_equal(isa.decode_uops(ublob, hw), uops)
    assert isa.decode_uop(ublob[:4], hw) == dict(zip(isa.UOP_FIELDS, map(int, uops[0])))


@pytest.mark.parametrize("fields,name", [
    ({"opcode": 0, "sram_base": 1 << 16}, "sram_base"),
    ({"opcode": 0, "dram_base": -1}, "dram_base"),
    ({"opcode": 0, "x_pad_1": 16}, "x_pad_1"),
    ({"opcode": 2, "uop_bgn": 1 << 13}, "uop_bgn"),
    ({"opcode": 2, "iter_in": 1 << 14}, "iter_in"),
    ({"opcode": 2, "src_factor_in": 1 << 11}, "src_factor_in"),
    ({"opcode": 2, "wgt_factor_out": 1 << 10}, "wgt_factor_out"),
    ({"opcode": 4, "imm": 1 << 15}, "imm"),
    ({"opcode": 4, "imm": -(1 << 15) - 1}, "imm"),
    ({"opcode": 4, "alu_opcode": 8}, "alu_opcode"),
    ({"opcode": 4, "wgt_factor_in": 1}, "wgt_factor_in"),   # not an ALU field
    ({"opcode": 3, "iter_out": 2}, "iter_out"),             # not a FINISH field
    ({"opcode": 0, "bogus": 1}, "bogus"),
])
def test_out_of_range_rejected(fields, name):
    with pytest.raises(ValueError, match=name):
        isa.encode_insn(fields, DEFAULT)
    if "bogus" not in fields:
        with pytest.raises(ValueError, match=rf"instruction 1 .*{name}"):
            isa.encode_insns(np.concatenate([isa.insn_from_fields(opcode=3), isa.insn_from_fields(**fields)]),
                             DEFAULT)


def test_imm_extremes_and_uop_range():
    for imm in (-(1 << 15), (1 << 15) - 1):
        assert isa.decode_insn(isa.encode_insn({"opcode": 4, "imm": imm}, DEFAULT), DEFAULT)["imm"] == imm
    with pytest.raises(ValueError, match="dst_idx"):
        isa.encode_uop({"dst_idx": 2048}, DEFAULT)
    with pytest.raises(ValueError, match="wgt_idx"):
        isa.encode_uops(np.array([[0, 0, 1024]]), DEFAULT)
    with pytest.raises(ValueError, match="opcode"):
        isa.decode_insn(bytes([7]) + bytes(15), DEFAULT)


def test_dispatch_rule():
    m = np.concatenate([isa.insn_from_fields(opcode=0, memory_type=t) for t in range(6)]
                       + [isa.insn_from_fields(opcode=o) for o in (1, 2, 3, 4)])
    assert isa.queue_of(m).tolist() == [1, 0, 0, 1, 1, 1, 2, 1, 1, 1]
