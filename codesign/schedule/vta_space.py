"""The `vta` schedule family: moved to the package `codesign.schedule.vta` (one module per job); this
module keeps the import path of the names other code reads."""

from codesign.mapping.batch import FOLD_PAIRS, GEMM_LOOPS
from codesign.schedule.vta import *  # noqa: F403
from codesign.schedule.vta import __all__ as _vta_all

__all__ = ["FOLD_PAIRS", "GEMM_LOOPS", *_vta_all]
