"""VTA instruction set: constants, field layouts, and encoders/decoders.

Instructions are 128-bit little-endian C bit-fields of `uint64_t` packed from the LSB in
declaration order; a field that would straddle bit 64 starts at bit 64 (docs/vta.md §2.1).
Widths of the uop/ACC/INP/WGT index fields follow the hardware config (docs/vta.md §2.3–§2.7); the
layouts are computed here from `HwConfig` and nowhere else.

In memory, a program's instructions are an **instruction matrix**: `np.ndarray` of shape
(n, len(FIELDS)), dtype int64, one row per instruction, column `COL[name]` per field, unused
columns 0. Micro-ops are an (m, 3) int64 array with columns [dst_idx, src_idx, wgt_idx].
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig

# -- constants (docs/vta.md §2.2) ------------------------------------------------------------
OP_LOAD, OP_STORE, OP_GEMM, OP_FINISH, OP_ALU = 0, 1, 2, 3, 4
OPCODE_NAMES = {OP_LOAD: "LOAD", OP_STORE: "STORE", OP_GEMM: "GEMM", OP_FINISH: "FINISH", OP_ALU: "ALU"}

MEM_UOP, MEM_WGT, MEM_INP, MEM_ACC, MEM_OUT, MEM_ACC_8BIT = 0, 1, 2, 3, 4, 5
MEM_NAMES = {MEM_UOP: "UOP", MEM_WGT: "WGT", MEM_INP: "INP", MEM_ACC: "ACC", MEM_OUT: "OUT",
             MEM_ACC_8BIT: "ACC_8BIT"}

ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR, ALU_MUL = 0, 1, 2, 3, 4
ALU_NAMES = {ALU_MIN: "MIN", ALU_MAX: "MAX", ALU_ADD: "ADD", ALU_SHR: "SHR", ALU_MUL: "MUL"}

# Fixed widths (docs/vta.md §2.2, §2.3).
OPCODE_BITS = 3
MEMOP_ID_BITS = 3
SRAM_ADDR_BITS = 16
DRAM_ADDR_BITS = 32
MEMOP_SIZE_BITS = 16
MEMOP_STRIDE_BITS = 16
MEMOP_PAD_BITS = 4
LOOP_ITER_BITS = 14
ALU_OPCODE_BITS = 3
ALU_IMM_BITS = 16
INSN_BYTES = 16
UOP_BYTES = 4

# Module queues by the fetch dispatch rule (docs/vta.md §2.9, §3.8).
Q_LOAD, Q_COMPUTE, Q_STORE = 0, 1, 2
QUEUE_NAMES = ("load", "compute", "store")

# Dependency-token queues (docs/vta.md §2.8), the one numbering the simulator and the timing model
# share: per module, the queue its pop_prev / pop_next flags read and its push_prev / push_next
# flags write (-1: the flag must be 0 in that module).
TOK_L2G, TOK_G2L, TOK_G2S, TOK_S2G = 0, 1, 2, 3
TOKEN_NAMES = ("l2g", "g2l", "g2s", "s2g")
POP_PREV = (-1, TOK_L2G, TOK_G2S)   # by module: load, compute, store
POP_NEXT = (TOK_G2L, TOK_S2G, -1)
PUSH_PREV = (-1, TOK_G2L, TOK_S2G)
PUSH_NEXT = (TOK_L2G, TOK_G2S, -1)
#: Tokens each dependency FIFO holds on the device (docs/vta.md §2.8: `hls::stream` depth in vivado.tcl).
TOKEN_FIFO_DEPTH = 1024

FIELDS: tuple[str, ...] = (
    "opcode", "pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep",
    "memory_type", "sram_base", "dram_base", "y_size", "x_size", "x_stride",
    "y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1",
    "reset_reg", "uop_bgn", "uop_end", "iter_out", "iter_in",
    "dst_factor_out", "dst_factor_in", "src_factor_out", "src_factor_in",
    "wgt_factor_out", "wgt_factor_in", "alu_opcode", "use_imm", "imm",
)
COL: dict[str, int] = {name: i for i, name in enumerate(FIELDS)}
N_FIELDS = len(FIELDS)
UOP_FIELDS: tuple[str, ...] = ("dst_idx", "src_idx", "wgt_idx")
SIGNED_FIELDS = frozenset({"imm"})  # `int64_t imm : 16` (docs/vta.md §2.5)


# -- layouts ---------------------------------------------------------------------------------
class Field:
    """One bit-field of an instruction: name, LSB position in the 128-bit word, width, signedness."""

    __slots__ = ("name", "offset", "width", "signed")

    def __init__(self, name: str, offset: int, width: int, signed: bool = False) -> None:
        self.name, self.offset, self.width, self.signed = name, offset, width, signed

    @property
    def lo(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    def __repr__(self) -> str:
        return f"Field({self.name!r}, bits {self.offset + self.width - 1}:{self.offset})"


def _pack(decl: list[tuple[str, int]]) -> tuple[Field, ...]:
    """C bit-field packing of uint64_t fields: a field never straddles a 64-bit word (docs/vta.md §2.1)."""
    out, pos = [], 0
    for name, width in decl:
        if pos // 64 != (pos + width - 1) // 64:
            pos = (pos // 64 + 1) * 64
        out.append(Field(name, pos, width, name in SIGNED_FIELDS))
        pos += width
    if pos > 128:
        raise ConfigError(f"instruction field {decl[-1][0]!r} ends at bit {pos}: the layout does "
                          "not fit 128 bits (reduce the LOG_*_BUFF_SIZE values)")
    return tuple(out)


_HEADER = [("opcode", OPCODE_BITS), ("pop_prev_dep", 1), ("pop_next_dep", 1),
           ("push_prev_dep", 1), ("push_next_dep", 1)]


@lru_cache(maxsize=64)
def _layouts_for(u: int, a: int, i: int, w: int) -> dict[int, tuple[Field, ...]]:
    mem = _HEADER + [
        ("memory_type", MEMOP_ID_BITS), ("sram_base", SRAM_ADDR_BITS), ("dram_base", DRAM_ADDR_BITS),
        ("y_size", MEMOP_SIZE_BITS), ("x_size", MEMOP_SIZE_BITS), ("x_stride", MEMOP_STRIDE_BITS),
        ("y_pad_0", MEMOP_PAD_BITS), ("y_pad_1", MEMOP_PAD_BITS),
        ("x_pad_0", MEMOP_PAD_BITS), ("x_pad_1", MEMOP_PAD_BITS),
    ]
    loop = _HEADER + [("reset_reg", 1), ("uop_bgn", u), ("uop_end", u + 1),
                      ("iter_out", LOOP_ITER_BITS), ("iter_in", LOOP_ITER_BITS)]
    gemm = loop + [("dst_factor_out", a), ("dst_factor_in", a), ("src_factor_out", i),
                   ("src_factor_in", i), ("wgt_factor_out", w), ("wgt_factor_in", w)]
    # ALU source factors index the ACC buffer, so they are ACC-width (docs/vta.md §2.5).
    alu = loop + [("dst_factor_out", a), ("dst_factor_in", a), ("src_factor_out", a),
                  ("src_factor_in", a), ("alu_opcode", ALU_OPCODE_BITS), ("use_imm", 1),
                  ("imm", ALU_IMM_BITS)]
    return {OP_LOAD: _pack(mem), OP_STORE: _pack(mem), OP_GEMM: _pack(gemm),
            OP_FINISH: _pack(_HEADER), OP_ALU: _pack(alu)}


def layouts(hw: HwConfig) -> dict[int, tuple[Field, ...]]:
    """opcode -> fields in declaration order with their bit positions for this config."""
    return _layouts_for(hw.log_uop_depth, hw.log_acc_depth, hw.log_inp_depth, hw.log_wgt_depth)


def layout(opcode: int, hw: HwConfig) -> tuple[Field, ...]:
    try:
        return layouts(hw)[int(opcode)]
    except KeyError:
        raise ValueError(f"opcode={opcode}: unknown; allowed 0 (LOAD), 1 (STORE), 2 (GEMM), "
                         "3 (FINISH), 4 (ALU)") from None


def uop_widths(hw: HwConfig) -> tuple[int, int, int]:
    """(dst, src, wgt) bit widths of a micro-op (docs/vta.md §2.7)."""
    return hw.uop_dst_bits, hw.uop_src_bits, hw.uop_wgt_bits


# -- single instructions -----------------------------------------------------------------------
def _check(name: str, value: int, f: Field, where: str = "") -> None:
    if not f.lo <= value <= f.hi:
        raise ValueError(f"{where}field {name}={value} does not fit its {f.width}-bit "
                         f"{'signed ' if f.signed else ''}field (allowed {f.lo}..{f.hi})")


def encode_insn(fields: dict[str, Any], hw: HwConfig) -> bytes:
    """One instruction dict (field name -> int) to 16 bytes, little-endian.

    Missing fields are 0. A field the opcode does not have must be absent or 0.
    """
    unknown = sorted(set(fields) - set(COL))
    if unknown:
        raise ValueError(f"unknown instruction field {unknown[0]!r}; allowed: {', '.join(FIELDS)}")
    lay = layout(int(fields.get("opcode", 0)), hw)
    names = {f.name for f in lay}
    for name, value in fields.items():
        if name not in names and int(value) != 0:
            raise ValueError(f"field {name}={value} does not exist in a "
                             f"{OPCODE_NAMES[int(fields.get('opcode', 0))]} instruction")
    word = 0
    for f in lay:
        value = int(fields.get(f.name, 0))
        _check(f.name, value, f)
        word |= (value & ((1 << f.width) - 1)) << f.offset
    return word.to_bytes(INSN_BYTES, "little")


def decode_insn(data: bytes, hw: HwConfig) -> dict[str, int]:
    """16 bytes to a dict holding exactly the fields of that instruction's opcode."""
    if len(data) != INSN_BYTES:
        raise ValueError(f"an instruction is {INSN_BYTES} bytes, got {len(data)}")
    word = int.from_bytes(bytes(data), "little")
    out: dict[str, int] = {}
    for f in layout(word & ((1 << OPCODE_BITS) - 1), hw):
        value = (word >> f.offset) & ((1 << f.width) - 1)
        if f.signed and value >> (f.width - 1):
            value -= 1 << f.width
        out[f.name] = value
    return out


def encode_uop(fields: dict[str, Any], hw: HwConfig) -> bytes:
    """One micro-op {dst_idx, src_idx, wgt_idx} to 4 bytes, little-endian (docs/vta.md §2.7)."""
    unknown = sorted(set(fields) - set(UOP_FIELDS))
    if unknown:
        raise ValueError(f"unknown micro-op field {unknown[0]!r}; allowed: {', '.join(UOP_FIELDS)}")
    word, pos = 0, 0
    for name, width in zip(UOP_FIELDS, uop_widths(hw)):
        value = int(fields.get(name, 0))
        _check(name, value, Field(name, pos, width))
        word |= value << pos
        pos += width
    return word.to_bytes(UOP_BYTES, "little")


def decode_uop(data: bytes, hw: HwConfig) -> dict[str, int]:
    if len(data) != UOP_BYTES:
        raise ValueError(f"a micro-op is {UOP_BYTES} bytes, got {len(data)}")
    word, pos, out = int.from_bytes(bytes(data), "little"), 0, {}
    for name, width in zip(UOP_FIELDS, uop_widths(hw)):
        out[name] = (word >> pos) & ((1 << width) - 1)
        pos += width
    return out


# -- the instruction matrix ----------------------------------------------------------------------
def elem_bytes(hw: HwConfig) -> dict[int, int]:
    """DRAM bytes per element moved by a LOAD/STORE of each memory type (docs/vta.md §1.2, §3.2): a
    `dram_base` field is a byte address divided by this (docs/vta.md §5.1)."""
    return {MEM_UOP: UOP_BYTES, MEM_WGT: hw.wgt_elem_bytes, MEM_INP: hw.inp_elem_bytes,
            MEM_ACC: hw.acc_elem_bytes, MEM_OUT: hw.out_elem_bytes,
            # int8 DRAM data widened to int32 lanes: one byte per ACC lane moves (docs/vta.md §3.2).
            MEM_ACC_8BIT: hw.batch * hw.block_out}


def empty_insns(n: int) -> np.ndarray:
    return np.zeros((n, N_FIELDS), dtype=np.int64)


def insn_from_fields(**kw: int) -> np.ndarray:
    """A 1-row instruction matrix from field keywords (unnamed fields 0)."""
    row = empty_insns(1)
    for name, value in kw.items():
        if name not in COL:
            raise ValueError(f"unknown instruction field {name!r}; allowed: {', '.join(FIELDS)}")
        row[0, COL[name]] = int(value)
    return row


def insns_to_dicts(matrix: np.ndarray, hw: HwConfig) -> list[dict[str, int]]:
    """Rows as dicts holding only the fields of each row's opcode (for printing and tests)."""
    m = np.asarray(matrix, dtype=np.int64)
    return [{f.name: int(row[COL[f.name]]) for f in layout(row[COL["opcode"]], hw)} for row in m]


def _check_opcodes(ops: np.ndarray) -> None:
    bad = np.flatnonzero(~np.isin(ops, list(OPCODE_NAMES)))
    if bad.size:
        raise ValueError(f"instruction {bad[0]}: opcode={ops[bad[0]]} unknown; allowed 0..4")


def check_insns(matrix: np.ndarray, hw: HwConfig) -> None:
    """ValueError naming the first field and instruction index whose value does not fit, or a
    non-zero value in a column that the row's opcode does not have."""
    m = np.asarray(matrix)
    if m.ndim != 2 or m.shape[1] != N_FIELDS:
        raise ValueError(f"instruction matrix must have shape (n, {N_FIELDS}), got {m.shape}")
    ops = m[:, COL["opcode"]]
    _check_opcodes(ops)
    for op, lay in layouts(hw).items():
        rows = np.flatnonzero(ops == op)
        if not rows.size:
            continue
        sub = m[rows]
        present = {f.name for f in lay}
        for f in lay:
            col = sub[:, COL[f.name]]
            out = np.flatnonzero((col < f.lo) | (col > f.hi))
            if out.size:
                _check(f.name, int(col[out[0]]), f, f"instruction {rows[out[0]]} ({OPCODE_NAMES[op]}): ")
        for name in FIELDS:
            if name in present:
                continue
            nz = np.flatnonzero(sub[:, COL[name]])
            if nz.size:
                raise ValueError(f"instruction {rows[nz[0]]} ({OPCODE_NAMES[op]}): field {name}="
                                 f"{sub[nz[0], COL[name]]} does not exist in this opcode (must be 0)")


def encode_insns(matrix: np.ndarray, hw: HwConfig) -> bytes:
    """Instruction matrix to n*16 bytes (vectorized; exact uint64 arithmetic per word)."""
    m = np.asarray(matrix, dtype=np.int64)
    check_insns(m, hw)
    words = np.zeros((m.shape[0], 2), dtype="<u8")
    ops = m[:, COL["opcode"]]
    for op, lay in layouts(hw).items():
        rows = np.flatnonzero(ops == op)
        if not rows.size:
            continue
        lo = np.zeros(rows.size, dtype=np.uint64)
        hi = np.zeros(rows.size, dtype=np.uint64)
        for f in lay:
            v = (m[rows, COL[f.name]] & ((1 << f.width) - 1)).astype(np.uint64)
            if f.offset < 64:
                lo |= v << np.uint64(f.offset)
            else:
                hi |= v << np.uint64(f.offset - 64)
        words[rows, 0] = lo
        words[rows, 1] = hi
    return words.tobytes()


def decode_insns(data: bytes, hw: HwConfig) -> np.ndarray:
    """n*16 bytes to the instruction matrix (fields an opcode lacks are 0)."""
    if len(data) % INSN_BYTES:
        raise ValueError(f"instruction data length {len(data)} is not a multiple of {INSN_BYTES}")
    words = np.frombuffer(bytes(data), dtype="<u8").reshape(-1, 2)
    out = empty_insns(words.shape[0])
    ops = (words[:, 0] & np.uint64(7)).astype(np.int64)
    _check_opcodes(ops)
    for op, lay in layouts(hw).items():
        rows = np.flatnonzero(ops == op)
        if not rows.size:
            continue
        for f in lay:
            word = words[rows, 0 if f.offset < 64 else 1]
            v = ((word >> np.uint64(f.offset % 64)) & np.uint64((1 << f.width) - 1)).astype(np.int64)
            if f.signed:
                v = np.where(v >= (1 << (f.width - 1)), v - (1 << f.width), v)
            out[rows, COL[f.name]] = v
    return out


def encode_uops(uops: np.ndarray, hw: HwConfig) -> bytes:
    """(m, 3) micro-op array [dst_idx, src_idx, wgt_idx] to m*4 bytes (vectorized)."""
    u = np.asarray(uops, dtype=np.int64).reshape(-1, 3)
    word = np.zeros(u.shape[0], dtype=np.uint64)
    pos = 0
    for j, (name, width) in enumerate(zip(UOP_FIELDS, uop_widths(hw))):
        col = u[:, j]
        out = np.flatnonzero((col < 0) | (col >= (1 << width)))
        if out.size:
            raise ValueError(f"micro-op {out[0]}: field {name}={col[out[0]]} does not fit its "
                             f"{width}-bit field (allowed 0..{(1 << width) - 1})")
        word |= col.astype(np.uint64) << np.uint64(pos)
        pos += width
    return word.astype("<u4").tobytes()


def decode_uops(data: bytes, hw: HwConfig) -> np.ndarray:
    if len(data) % UOP_BYTES:
        raise ValueError(f"micro-op data length {len(data)} is not a multiple of {UOP_BYTES}")
    word = np.frombuffer(bytes(data), dtype="<u4").astype(np.int64)
    out = np.empty((word.size, 3), dtype=np.int64)
    pos = 0
    for j, width in enumerate(uop_widths(hw)):
        out[:, j] = (word >> pos) & ((1 << width) - 1)
        pos += width
    return out


def queue_of(matrix: np.ndarray) -> np.ndarray:
    """Module queue of each instruction by the fetch dispatch rule (docs/vta.md §2.9): STORE ->
    store; LOAD INP/WGT -> load; everything else (LOAD UOP/ACC/ACC_8BIT, GEMM, ALU, FINISH) ->
    compute. Returns an int64 array of Q_LOAD / Q_COMPUTE / Q_STORE."""
    m = np.asarray(matrix)
    op = m[:, COL["opcode"]]
    mem = m[:, COL["memory_type"]]
    q = np.full(m.shape[0], Q_COMPUTE, dtype=np.int64)
    q[(op == OP_LOAD) & ((mem == MEM_INP) | (mem == MEM_WGT))] = Q_LOAD
    q[op == OP_STORE] = Q_STORE
    return q


__all__ = [
    "OP_LOAD", "OP_STORE", "OP_GEMM", "OP_FINISH", "OP_ALU", "OPCODE_NAMES",
    "MEM_UOP", "MEM_WGT", "MEM_INP", "MEM_ACC", "MEM_OUT", "MEM_ACC_8BIT", "MEM_NAMES",
    "ALU_MIN", "ALU_MAX", "ALU_ADD", "ALU_SHR", "ALU_MUL", "ALU_NAMES",
    "Q_LOAD", "Q_COMPUTE", "Q_STORE", "QUEUE_NAMES", "TOK_L2G", "TOK_G2L", "TOK_G2S", "TOK_S2G", "TOKEN_NAMES",
    "POP_PREV", "POP_NEXT", "PUSH_PREV", "PUSH_NEXT", "TOKEN_FIFO_DEPTH",
    "FIELDS", "COL", "N_FIELDS", "UOP_FIELDS", "INSN_BYTES", "UOP_BYTES", "Field",
    "layouts", "layout", "uop_widths", "encode_insn", "decode_insn", "encode_uop", "decode_uop",
    "elem_bytes", "empty_insns", "insn_from_fields", "insns_to_dicts", "check_insns",
    "encode_insns", "decode_insns", "encode_uops", "decode_uops", "queue_of",
]
