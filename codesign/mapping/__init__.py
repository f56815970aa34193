"""Mappings: a layer's loop nest on VTA as data (`mapping.py`) and its producers (`autotvm.py`)."""

from codesign.mapping.autotvm import FAMILIES, mapping_for
from codesign.mapping.mapping import AluOp, Dma, Loop, Mapping, Tile

__all__ = ["AluOp", "Dma", "FAMILIES", "Loop", "Mapping", "Tile", "mapping_for"]
