"""Mappings: a layer's loop nest on VTA as data (`mapping.py`), its vectorized tile geometry over
many configs (`batch.py`, `MappingBatch`) and the rules any nest must pass (`legality.py`). The
AutoTVM templates produce mappings in `codesign.schedule.families`."""

from codesign.mapping.batch import MappingBatch
from codesign.mapping.mapping import AluOp, Dma, Loop, Mapping, Tile

__all__ = ["AluOp", "Dma", "Loop", "Mapping", "MappingBatch", "Tile"]
