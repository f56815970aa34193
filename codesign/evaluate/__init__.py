"""A schedule of any family (the AutoTVM templates or `vta`) evaluated on the VTA model: `compiler` (`compile_layer`:
Config -> Mapping -> program placed in DRAM with packed tensors), `blocks` (the block form the
timing fast path times), `run` (`run_layer` / `measure_seconds`: compile + simulate + time).

Submodules are imported explicitly; this file stays empty of imports (the package root's
`codesign.run_layer` must not load numba).
"""
