"""`.onnx` files as a `--workload` form: the ONNX graph converted to a torch `fx.GraphModule` by
onnx2torch (the optional extra `vta-codesign[onnx]`), with example inputs from the graph's input
shapes, so the module goes through the same flow as a torch one (`torch.export`).

- size: the file and any external-data files it names together at most `MAX_BYTES`;
- example inputs: one float32 tensor per graph input (initializers listed as inputs excluded),
  of its static shape (a dynamic or unknown dim is a one-line error naming the input and the
  dim), seeded standard-normal;
- every failure (missing file, not ONNX, invalid model, a conversion onnx2torch does not have,
  a missing optional package) is one line naming the file.

onnx2torch imports torchvision at import time for two converters (NonMaxSuppression,
RoiAlign). Where torchvision is absent or does not load (the CUDA torchvision wheel next to the
CPU torch build raises at import), onnx2torch is imported with a stand-in whose ops say so: the
rest of onnx2torch needs nothing of torchvision; the stand-in is not left in `sys.modules`.
"""

from __future__ import annotations

import sys
import types
import warnings
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError

MAX_BYTES = 1 << 30  # 1 GiB: ONNX's protobuf limit is 2 GiB; the zoo's largest (VGG-16) is ~0.55 GB
INSTALL = "pip install 'vta-codesign[onnx]' (or: pip install 'onnx>=1.16' 'onnx2torch>=1.5')"
FLOAT = 1  # onnx.TensorProto.FLOAT


def _first(exc: BaseException) -> str:
    return ((str(exc).strip().splitlines() or [type(exc).__name__])[0])[:200]


def _onnx() -> Any:
    try:
        import onnx  # optional: the [onnx] extra
    except ImportError:
        raise ConfigError(f"reading .onnx files needs the onnx package: {INSTALL}") from None
    return onnx


def _torchvision_stand_in() -> dict[str, types.ModuleType]:
    def missing(*args: Any, **kwargs: Any) -> Any:
        raise ConfigError("this ONNX op's onnx2torch converter needs torchvision, which does not load here")

    root, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")
    ops.nms = ops.roi_align = ops.box_convert = missing  # type: ignore[attr-defined]
    root.ops = ops  # type: ignore[attr-defined]
    return {"torchvision": root, "torchvision.ops": ops}


def _onnx2torch() -> Any:
    """onnx2torch, imported with a torchvision stand-in where torchvision does not load (module doc)."""
    if "onnx2torch" in sys.modules and sys.modules["onnx2torch"] is not None:
        return sys.modules["onnx2torch"]
    try:
        with warnings.catch_warnings():  # a torchvision without its C++ ops warns before it raises
            warnings.simplefilter("ignore")
            import torchvision  # noqa: F401 - only to learn whether onnx2torch's import of it works
        stand_in: dict[str, types.ModuleType] = {}
    except Exception:  # noqa: BLE001 - ImportError, or a wheel built for another torch (RuntimeError)
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]  # what a failed import left half-loaded
        stand_in = _torchvision_stand_in()
    sys.modules.update(stand_in)
    try:
        import onnx2torch  # optional: the [onnx] extra
    except ImportError as exc:
        raise ConfigError(f"reading .onnx files needs onnx2torch ({_first(exc)}): {INSTALL}") from None
    finally:
        for name in stand_in:
            sys.modules.pop(name, None)
    return onnx2torch


def _external_files(model: Any, base: Path) -> set[Path]:
    files = set()
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                files.add(base / entry.value)
    return files


def read_model(path: str | Path) -> Any:
    """The checked `onnx.ModelProto` of `path` (external data loaded), or a one-line error."""
    onnx = _onnx()
    p = Path(path)
    what = f"ONNX file {str(p)!r}"
    if not p.is_file():
        raise ConfigError(f"{what} does not exist")
    if p.stat().st_size > MAX_BYTES:
        raise ConfigError(f"{what} is {p.stat().st_size:,} bytes; at most {MAX_BYTES:,} are read")
    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError and others
        raise ConfigError(f"{what} is not an ONNX model: {_first(exc)}") from None
    if not model.opset_import or not model.graph.node:
        raise ConfigError(f"{what} is not an ONNX model (no opset, no graph nodes)")
    extern = _external_files(model, p.parent)
    missing = sorted(str(f) for f in extern if not f.is_file())
    if missing:
        raise ConfigError(f"{what}: external data file {missing[0]!r} does not exist")
    total = p.stat().st_size + sum(f.stat().st_size for f in extern)
    if total > MAX_BYTES:
        raise ConfigError(f"{what} with its external data is {total:,} bytes; at most {MAX_BYTES:,} are read")
    try:
        if extern:
            onnx.load_external_data_for_model(model, str(p.parent))
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001 - onnx raises ValidationError and others
        raise ConfigError(f"{what} is not a valid ONNX model: {_first(exc)}") from None
    return model


def input_shapes(model: Any, what: str) -> list[tuple[str, tuple[int, ...]]]:
    """(name, static shape) of every graph input that is not an initializer, or a one-line error."""
    constants = {t.name for t in model.graph.initializer}
    shapes = []
    for value in model.graph.input:
        if value.name in constants:
            continue
        tensor = value.type.tensor_type
        if tensor.elem_type != FLOAT:
            raise ConfigError(f"{what}: input {value.name!r} has ONNX element type {tensor.elem_type}; "
                              "the network flow takes float32 inputs")
        if not tensor.HasField("shape"):
            raise ConfigError(f"{what}: input {value.name!r} has no shape; export it with a static shape")
        dims = []
        for i, d in enumerate(tensor.shape.dim):
            if not d.HasField("dim_value") or d.dim_value < 1:
                sym = f" ({d.dim_param!r})" if d.dim_param else ""
                raise ConfigError(f"{what}: input {value.name!r} dim {i}{sym} is dynamic; the network flow "
                                  "takes static shapes (export the ONNX model with fixed input sizes)")
            dims.append(int(d.dim_value))
        shapes.append((value.name, tuple(dims)))
    if not shapes:
        raise ConfigError(f"{what} has no graph inputs")
    return shapes


def load_onnx(path: str | Path, seed: int = 0) -> tuple[Any, tuple[Any, ...], str]:
    """(fx.GraphModule, seeded standard-normal example inputs, name) of an `.onnx` file."""
    import torch  # heavy; only importing a network needs it

    p = Path(path)
    what = f"ONNX file {str(p)!r}"
    model = read_model(p)
    shapes = input_shapes(model, what)
    convert = _onnx2torch().convert
    try:
        module = convert(model)
    except Exception as exc:  # noqa: BLE001 - onnx2torch raises NotImplementedError and others
        raise ConfigError(f"{what}: onnx2torch cannot convert it: {_first(exc)}") from None
    gen = torch.Generator().manual_seed(seed)
    inputs = tuple(torch.randn(shape, generator=gen) for _, shape in shapes)
    return module.eval(), inputs, p.stem


__all__ = ["INSTALL", "MAX_BYTES", "input_shapes", "load_onnx", "read_model"]
