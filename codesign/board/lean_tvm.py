"""Import tvm's RPC for the board side (the board server and the tracker) without what only a
compiling host uses.

`import tvm` loads its compiler library and relax and, through tvm_ffi, torch whenever torch is
installed (tvm_ffi imports it eagerly to dodge a symbol clash on one Windows set-up): 4-7 s on a
2-core host, for code the RPC server and tracker never call. A PYNQ board has neither torch nor
the compiler library; this makes a host's board-side process look the same: tvm's runtime library
only (`TVM_USE_RUNTIME_LIB`, tvm's own switch) and torch reported absent, so tvm_ffi skips it
(~1 s). Call it before anything imports tvm, in processes that serve boards or track them only.
"""

from __future__ import annotations

import os
import sys


def lean_tvm() -> None:
    """Make the next `import tvm` in this process the runtime-only one without torch. A no-op
    where tvm (or torch) is already imported: this never hides a module that is loaded."""
    if "tvm" in sys.modules or "tvm_ffi" in sys.modules:
        return
    os.environ.setdefault("TVM_USE_RUNTIME_LIB", "1")
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]  # None: `import torch` raises ImportError


__all__ = ["lean_tvm"]
