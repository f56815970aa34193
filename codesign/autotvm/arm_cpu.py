"""AutoTVM records of TVM's arm_cpu conv templates (tophub `arm_cpu_v0.08.log`): which records
they are and the conv each times, as a `codesign.cpu.ConvShape` (docs/cpu-model.md §1).

Task arguments (TVM topi, NCHW):
  conv2d_nchw_spatial_pack.arm_cpu, conv2d_nchw_winograd.arm_cpu:
      [data NCHW, kernel OIHW, strides, padding, dilation, out_dtype]
  depthwise_conv2d_nchw.arm_cpu: [data NCHW, kernel (C, multiplier, KH, KW), strides, padding, dilation, out_dtype]
  conv2d_transpose_nchw.arm_cpu: [data NCHW, kernel IOHW, strides, padding, out_dtype, output_padding]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from codesign.autotvm.log import LogFormatError, Record
from codesign.cpu import DEPTHWISE, SPATIAL_PACK, TRANSPOSE, WINOGRAD, ConvShape
from codesign.errors import ConfigError

ARM_CPU_TASKS = {
    "conv2d_nchw_spatial_pack.arm_cpu": SPATIAL_PACK,
    "conv2d_nchw_winograd.arm_cpu": WINOGRAD,
    "depthwise_conv2d_nchw.arm_cpu": DEPTHWISE,
    "conv2d_transpose_nchw.arm_cpu": TRANSPOSE,
}
_DTYPES = ("float32", "int8")


def is_arm_cpu(record: Record) -> bool:
    """A record timed on an ARM CPU (target `-device=arm_cpu`, or an `.arm_cpu` task)."""
    return "-device=arm_cpu" in record.target.split() or record.task.endswith(".arm_cpu")


@dataclass(frozen=True)
class ArmCpuOp:
    """The conv an arm_cpu record timed: its geometry, operand dtype and kernel kind."""

    shape: ConvShape
    dtype: str
    kind: str


def _tensor(arg: Any, what: str) -> tuple[list[int], str]:
    if not (isinstance(arg, list) and len(arg) == 3 and arg[0] == "TENSOR" and isinstance(arg[1], list)
            and isinstance(arg[2], str)):
        raise LogFormatError(f"{what} must be [\"TENSOR\", shape, dtype], got {arg!r}")
    shape = arg[1]
    if len(shape) != 4 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise LogFormatError(f"{what} shape {shape} must have 4 positive integer dims (NCHW)")
    return shape, arg[2]


def _ints(arg: Any, n: int, what: str) -> list[int]:
    if not (isinstance(arg, list) and len(arg) == n and all(isinstance(v, int) and not isinstance(v, bool)
                                                              for v in arg)):
        raise LogFormatError(f"{what} must be {n} integers, got {arg!r}")
    return arg


def _padding(arg: Any) -> tuple[int, int, int, int]:
    """TVM pads as [top, left, bottom, right] or [pad_h, pad_w]."""
    if isinstance(arg, list) and len(arg) == 2:
        h, w = _ints(arg, 2, "padding")
        return (h, w, h, w)
    t, left, b, r = _ints(arg, 4, "padding")
    return (t, left, b, r)


def arm_cpu_op(record: Record) -> ArmCpuOp:
    """The conv of an arm_cpu record; LogFormatError says what is wrong with it."""
    kind = ARM_CPU_TASKS.get(record.task)
    if kind is None:
        raise LogFormatError(f"arm_cpu template {record.task!r} is not modelled; modelled: "
                             + ", ".join(ARM_CPU_TASKS))
    args = record.args
    if len(args) != 6:
        raise LogFormatError(f"{record.task} expects 6 arguments, got {len(args)}")
    (n, c, h, w), dtype = _tensor(args[0], "data")
    kshape, kdtype = _tensor(args[1], "kernel")
    if dtype not in _DTYPES or kdtype != dtype:
        raise LogFormatError(f"data/kernel dtype {dtype}/{kdtype}: the CPU model knows {', '.join(_DTYPES)} "
                             "(data and kernel alike)")
    sh, sw = _ints(args[2], 2, "strides")
    pad = _padding(args[3])
    try:
        if kind == TRANSPOSE:
            ci, co, kh, kw = kshape
            if ci != c:
                raise LogFormatError(f"kernel input channels {ci} != data channels {c}")
            op = _ints(args[5], 2, "output_padding") if args[5] is not None else [0, 0]
            shape = ConvShape(n, c, h, w, co, kh, kw, sh, sw, pad, transpose=True, output_padding=(op[0], op[1]))
        else:
            dh, dw = _ints(args[4], 2, "dilation")
            if kind == DEPTHWISE:
                cc, mult, kh, kw = kshape
                if cc != c:
                    raise LogFormatError(f"depthwise kernel channels {cc} != data channels {c}")
                shape = ConvShape(n, c, h, w, c * mult, kh, kw, sh, sw, pad, dh, dw, groups=c)
            else:
                co, ci, kh, kw = kshape
                if ci != c:
                    raise LogFormatError(f"kernel input channels {ci} != data channels {c}")
                shape = ConvShape(n, c, h, w, co, kh, kw, sh, sw, pad, dh, dw)
    except LogFormatError:
        raise
    except ConfigError as exc:
        raise LogFormatError(str(exc)) from None
    if kind not in shape.kinds():
        raise LogFormatError(f"{record.task} on {shape.name}: the {kind} kernel does not apply to this conv")
    return ArmCpuOp(shape=shape, dtype=dtype, kind=kind)


__all__ = ["ARM_CPU_TASKS", "ArmCpuOp", "is_arm_cpu", "arm_cpu_op"]
