"""vta-codesign: hardware/schedule co-design for VTA accelerators."""

import os

# The simulator does many tiny matmuls; a multi-threaded BLAS makes them ~20x slower on 2 cores.
# Must be set before NumPy loads OpenBLAS, hence here; a user's explicit setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from codesign.hw.config import HwConfig  # noqa: E402

__version__ = "0.1.0"


def run_layer(*args, **kwargs):  # noqa: D401 - thin re-export
    """Compile one layer with an AutoTVM knob dict and run it on the simulator; see
    `codesign.evaluate.run.run_layer`."""
    # The one codesign import inside a function (allow-listed in tests/test_structure.py): every
    # `import codesign.x` runs this file first, and `codesign.errors` must not load numba.
    from codesign.evaluate.run import run_layer as _run_layer

    return _run_layer(*args, **kwargs)


__all__ = ["HwConfig", "run_layer", "__version__"]
