"""The VTA model: ISA (`isa`), program container (`program`), functional simulator (`simulator`),
timing model (`timing`) and the race check (`races`). It knows instructions, not schedules: the
lowering (`codesign.lower`) and the compile/run entry points (`codesign.evaluate`) sit above it.

Submodules are imported explicitly (`from codesign.vta import isa`); this file stays empty of
imports so that importing one part never drags in the others (numba, torch...).
"""
