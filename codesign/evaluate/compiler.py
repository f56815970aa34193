"""Compile a layer + schedule into the VTA program the TVM VTA flow would run (docs/vta.md §7.3).

The layer's template family produces a `Mapping` (`codesign.schedule.families.mapping_for`), the
lowering turns it into the instruction matrix (`codesign.lower`: the stream, its dependency
tokens and the micro-op ring are described there); this module places it and the packed tensors
in DRAM as a `Program`.
"""

from __future__ import annotations

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.lower import Lowered, dram_bases, lower_program, regions
from codesign.schedule.families import mapping_for
from codesign.schedule.knobs import Config, KnobValue
from codesign.vta import isa
from codesign.vta.program import DramAllocator, DramRegion, Program
from codesign.workloads.layers import Layer


def _check_shift(shift: int) -> int:
    # HLS reads the shift as a signed 5-bit value, so >= 16 becomes a left shift (docs/vta.md §3.4).
    if not isinstance(shift, (int, np.integer)) or not 0 <= int(shift) <= 15:
        raise ConfigError(f"shift={shift!r}: allowed integers 0..15 (the HLS ALU reads a signed "
                          "5-bit shift amount)")
    return int(shift)


def compile_insns(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, *, shift: int = 8) -> Lowered:
    """Timing-path compile: the final instruction matrix without building DRAM data."""
    return lower_program(mapping_for(layer, config, hw, _check_shift(shift)), hw)


def place_regions(comp: Lowered, hw: HwConfig, arrays: dict[str, np.ndarray], functional: bool = True) -> list[DramRegion]:
    """The DRAM regions of a lowered program in order (`lower.regions`), filled with the packed
    `arrays` given by region name, then the micro-ops (functional) or their size only."""
    alloc = DramAllocator()
    for name, nbytes, align, role in regions(comp.mapping, hw):
        arr = arrays.get(name)
        alloc.alloc(name, nbytes, align, role, None if arr is None else np.ascontiguousarray(arr).view(np.uint8))
    if functional:
        uop_region = alloc.alloc_uops(comp.uops, hw)
    else:
        uop_region = alloc.alloc("uop", comp.uops.shape[0] * isa.UOP_BYTES, isa.UOP_BYTES, "uop")
    # LOAD UOP dram_base was computed by the lowering's allocator; this one must agree.
    assert uop_region.addr == dram_bases(comp.mapping, hw)[1] * isa.UOP_BYTES, "DRAM layout mismatch"
    return alloc.regions


def compile_layer(layer: Layer, config: Config | dict[str, KnobValue], hw: HwConfig, *,
                  data: np.ndarray | None = None, weight: np.ndarray | None = None, shift: int = 8,
                  functional: bool = True) -> Program:
    """The VTA program of `layer` under `config` (a `Config` or an AutoTVM knob dict).

    `data` (int8 NCHW / (N, IN)) and `weight` (int8 OIHW / (OUT, IN)) are packed into the DRAM
    regions "data" and "weight" (docs/vta.md §7.1) when given; "output" receives the int8 result
    in packed layout and "uop" holds the micro-ops. Invalid schedules raise `InvalidSchedule`.
    """
    comp = compile_insns(layer, config, hw, shift=shift)
    m = comp.mapping
    packed = {"data": (data, layer.pack_data), "weight": (weight, layer.pack_weight)}
    arrays = {name: pack(np.asarray(arr), hw) for name, (arr, pack) in packed.items()
              if functional and arr is not None}
    placed = place_regions(comp, hw, arrays, functional)
    meta = {"layer": getattr(layer, "name", str(layer)), "template": layer.template,
            "knobs": dict(getattr(config, "knobs", config)), "shift": int(shift),
            "index": getattr(config, "index", None), "n_pairs": m.n_pairs,
            "n_steps": m.n_steps, "n_threads": m.n_threads, **dict(m.info)}
    return Program(hw, comp.insns, comp.uops, placed, meta)


__all__ = ["compile_layer", "compile_insns", "place_regions"]
