"""The AutoTVM v0.2 log format (docs/vta.md §8): the one place that reads and writes it.

Used by replay/calibrate (`codesign.calibrate`) and by the exporter (`codesign.tune`/export).
"""

from codesign.autotvm.arm_cpu import ARM_CPU_TASKS, ArmCpuOp, arm_cpu_op, is_arm_cpu
from codesign.autotvm.log import (
    CONV2D_TASK,
    CONV2D_TRANSPOSE_TASK,
    DENSE_TASK,
    ERROR_NAMES,
    GROUP_CONV2D_TASK,
    SUPPORTED_TASKS,
    TVM_VERSION,
    LogFormatError,
    Record,
    Skipped,
    format_record,
    hw_from_target,
    layer_from_args,
    layout_string,
    model_from_target,
    parse_line,
    parse_log,
    parse_record,
    resolve_hw,
    shipped_configs,
    target_string,
    task_args,
)

__all__ = [
    "ARM_CPU_TASKS", "ArmCpuOp", "arm_cpu_op", "is_arm_cpu",
    "CONV2D_TASK", "GROUP_CONV2D_TASK", "CONV2D_TRANSPOSE_TASK", "DENSE_TASK", "SUPPORTED_TASKS", "TVM_VERSION", "ERROR_NAMES", "LogFormatError",
    "Record", "Skipped", "model_from_target", "hw_from_target", "resolve_hw", "shipped_configs", "target_string",
    "parse_record",
    "parse_line", "parse_log", "layout_string", "layer_from_args", "task_args", "format_record",
]
