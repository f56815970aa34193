"""The timing fast path: a layer's program as blocks of identical pairs (`lower.lower_blocks`).

`timing.time_blocks` times a program given as one block of instruction rows per class of
identical pairs (pairs that differ only in DRAM offsets: same INP padding, same operands loaded,
same micro-op loads) plus the sequence of classes; with its periodic fast-forward the cost no
longer grows with the number of tiles. The blocks are rows of the one emitter
(`codesign.lower.emit`), so they are row for row the full program's (tests/test_timing_fast.py).
"""

from __future__ import annotations

from codesign.evaluate.compiler import _check_shift
from codesign.hw.config import HwConfig
from codesign.lower import PairBlocks, lower_blocks
from codesign.schedule.families import mapping_for
from codesign.schedule.knobs import Config, KnobValue
from codesign.workloads.layers import Layer


def compile_blocks(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, *, shift: int = 8,
                   borrow: bool = False) -> PairBlocks:
    """The program `compiler.compile_insns` builds, as `PairBlocks` (`borrow`: `lower_blocks`')."""
    return lower_blocks(mapping_for(layer, config, hw, _check_shift(shift)), hw, borrow=borrow)


__all__ = ["PairBlocks", "compile_blocks"]
