"""One registry of op kinds (`REGISTRY`: name -> `OpKind`); each module of this package registers
the kinds of one family. Importer, quantizer, references, CPU costing and placement read it; adding
a kind is one entry in one module plus its tests."""

from codesign.network.kinds import (  # noqa: F401 - each registers its kinds
    attention,
    binary,
    conv,
    elementwise,
    gemm,
    layout,
    norm,
    pool,
    shape,
    unary,
)
from codesign.network.kinds.base import (
    BUILDERS,
    EPILOGUE,
    GEMM,
    POOL,
    REGISTRY,
    VTA_FORMS,
    OpKind,
    QuantContext,
    get,
    register,
    register_builder,
)

__all__ = ["BUILDERS", "EPILOGUE", "GEMM", "POOL", "REGISTRY", "VTA_FORMS", "OpKind", "QuantContext", "get", "register",
           "register_builder"]
