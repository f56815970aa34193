"""The VTA model: ISA (`isa`), program container (`program`), functional simulator (`simulator`),
timing model (`timing`), compiler (`compiler`) and `run_layer` (`run`).

Submodules are imported explicitly (`from codesign.vta import isa`); this file stays empty of
imports so that importing one part never drags in the others (numba, torch...).
"""
