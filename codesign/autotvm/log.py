"""AutoTVM v0.2 log records (docs/vta.md §8): parse, rebuild layers and hardware, write.
TVM's 2018 v0.1 records are read too (`_parse_v01`, docs/vta.md §8.1) and normalized to v0.2.

A record is one JSON line:
  {"input": [target, task_name, task_args, {}],
   "config": {"index": int, "code_hash": null, "entity": [[knob, type, value], ...]},
   "result": [costs, error_no, all_cost, timestamp], "version": 0.2, "tvm_version": "0.7.dev0"}
`format_record` writes exactly what TVM 0.7's `autotvm.record.encode` writes (`json.dumps`
with the default separators and this key order), so our logs load in the TVM VTA flow.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError
from codesign.fileio import read_text
from codesign.hw.config import HwConfig
from codesign.paths import HW_CONFIGS
from codesign.schedule import ScheduleSpace
from codesign.workloads import Conv2D, Conv2DTranspose, Dense

CONV2D_TASK = "conv2d_packed.vta"
GROUP_CONV2D_TASK = "group_conv2d_packed.vta"
CONV2D_TRANSPOSE_TASK = "conv2d_transpose_packed.vta"
DENSE_TASK = "dense_packed.vta"
SUPPORTED_TASKS = (CONV2D_TASK, GROUP_CONV2D_TASK, CONV2D_TRANSPOSE_TASK, DENSE_TASK)
TVM_VERSION = "0.7.dev0"  # what tophub's VTA records carry (docs/vta.md §9)
LOG_VERSION = 0.2
LOG_VERSION_01 = 0.1  # TVM 2018: {"i": [target, task, args, kwargs, workload, config], "r": result, "v": 0.1}
ERROR_COST = 1e9  # costs written as (1e9,) when error_no != 0 (docs/vta.md §8)
# MeasureErrorNo (docs/vta.md §8).
ERROR_NAMES = {0: "NO_ERROR", 1: "INSTANTIATION_ERROR", 2: "COMPILE_HOST", 3: "COMPILE_DEVICE",
               4: "RUNTIME_DEVICE", 5: "WRONG_ANSWER", 6: "BUILD_TIMEOUT", 7: "RUN_TIMEOUT",
               8: "UNKNOWN_ERROR"}
ERROR_NAMES_TO_NO = {v: k for k, v in ERROR_NAMES.items()}

_MODEL_RE = re.compile(r"(?:^|\s)-model=(\S+)")


class LogFormatError(ConfigError):
    """A log line that is not a usable AutoTVM record; the message is the reason."""


@dataclass(frozen=True)
class Record:
    """One parsed v0.2 record. `line` is the 1-based line number in its file (0 if none)."""

    target: str
    model: str | None
    task: str
    args: list[Any]
    entity: list[list[Any]]
    index: int
    costs: list[float]
    error_no: int
    all_cost: float
    timestamp: float
    line: int = 0
    kwargs: dict[str, Any] = field(default_factory=dict)
    code_hash: str | None = None
    tvm_version: str = TVM_VERSION
    version: float = LOG_VERSION  # 0.1 for a 2018 record (normalized: v0.2 task names and args)
    template_key: str = ""        # v0.1 config "t" ("direct", "winograd"); "" in v0.2

    @property
    def cost(self) -> float:
        """Mean of the costs, as AutoTVM's `load_from_file` computes it."""
        return float(sum(self.costs) / len(self.costs))

    @property
    def knobs(self) -> dict[str, Any]:
        """The entity as a knob dict, e.g. {"tile_b": [1, 1], ..., "oc_nthread": 2}."""
        return {name: value for name, _kind, value in self.entity}

    @property
    def ok(self) -> bool:
        return self.error_no == 0


@dataclass(frozen=True)
class Skipped:
    """A line `parse_log` could not use, with the reason."""

    line: int
    reason: str


def model_from_target(target: str) -> str | None:
    m = _MODEL_RE.search(target)
    return m.group(1) if m else None


def hw_from_target(target: str) -> HwConfig:
    """The HwConfig named by a target's `-model=` (e.g. `ext_dev -device=vta -keys=cpu
    -model=pynq_1x16_i8w8a32_15_15_18_17`)."""
    model = model_from_target(target)
    if model is None:
        raise ConfigError(f"target {target!r} has no -model=<VTA config name> "
                          "(e.g. -model=pynq_1x16_i8w8a32_15_15_18_17)")
    try:
        return HwConfig.from_name(model)
    except ConfigError as exc:
        raise ConfigError(f"target -model={model}: {exc}") from None


def _packing(task: str, args: list[Any]) -> tuple[int, int, int] | None:
    """(BATCH, BLOCK_IN, BLOCK_OUT) the packed tensor shapes of a VTA record use, if readable."""
    try:
        if task == DENSE_TASK:
            data, weight = args[0][1], args[1][1]
            return int(data[2]), int(data[3]), int(weight[2])
        data, kernel = args[0][1], args[1][1]
        if len(data) == 6 and len(kernel) == 6:
            return int(data[4]), int(data[5]), int(kernel[4])
    except (IndexError, TypeError, ValueError):
        pass
    return None


def shipped_configs() -> list[HwConfig]:
    """The hardware configs shipped in hw_configs/*.yaml."""
    return [HwConfig.load(p) for p in sorted(HW_CONFIGS.glob("*.yaml"))]


def resolve_hw(record: Record, hw: HwConfig | None = None) -> HwConfig:
    """The hardware config of a VTA record: the one its `-model=` names (v0.2 logs); where the
    model names only a board or the simulator (v0.1 logs: `-model=pynq`, `ultra96`, `sim`),
    `hw` (the `--hw` flag) — else the one shipped config (hw_configs/) whose BATCH, BLOCK_IN and
    BLOCK_OUT the record's tensor shapes use, on that board's target. The shapes are checked
    against the config when the layer is rebuilt (`layer_from_args`)."""
    model = record.model
    if model is None:
        raise ConfigError(f"target {record.target!r} has no -model= (e.g. -model=pynq_1x16_i8w8a32_15_15_18_17)")
    try:
        return HwConfig.from_name(model)
    except ConfigError:
        pass
    if hw is not None:
        return hw
    packing = _packing(record.task, record.args)
    if packing is None:
        raise ConfigError(f"target -model={model} names no VTA config and the record's tensor shapes do not say "
                          "BATCH/BLOCK: pass --hw NAME")
    cands = [c for c in shipped_configs() if (c.batch, c.block_in, c.block_out) == packing
             and (model == "sim" or c.TARGET == model)]
    if len(cands) != 1:
        b, bi, bo = packing
        found = ", ".join(c.name for c in cands) or "none"
        raise ConfigError(f"target -model={model} names no VTA config; the tensor shapes use BATCH={b} "
                          f"BLOCK_IN={bi} BLOCK_OUT={bo}, matching shipped configs: {found}. Pass --hw NAME")
    return cands[0]


def target_string(hw: HwConfig) -> str:
    """`tvm.target.vta(model)` as TVM <= 0.7 writes it (docs/vta.md §8)."""
    return f"ext_dev -device=vta -keys=cpu -model={hw.vta_model}"


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LogFormatError(f"{what} must be a number, got {value!r}")
    return float(value)


def parse_record(obj: Any, line: int = 0) -> Record:
    """A decoded JSON object to a Record; LogFormatError says what is wrong."""
    if not isinstance(obj, dict):
        raise LogFormatError("not a JSON object")
    if {"i", "r", "v"} & set(obj) and "input" not in obj:
        return _parse_v01(obj, line)
    for key in ("input", "config", "result"):
        if key not in obj:
            raise LogFormatError(f"missing key {key!r}")
    version = obj.get("version")
    if version != LOG_VERSION:
        raise LogFormatError(f"version {version!r} is not supported (only 0.2)")
    inp, cfg, res = obj["input"], obj["config"], obj["result"]
    if not (isinstance(inp, list) and len(inp) == 4 and isinstance(inp[0], str) and isinstance(inp[1], str)
            and isinstance(inp[2], list) and isinstance(inp[3], dict)):
        raise LogFormatError("'input' must be [target, task_name, args, kwargs]")
    if not (isinstance(cfg, dict) and isinstance(cfg.get("index"), int) and isinstance(cfg.get("entity"), list)):
        raise LogFormatError("'config' must have an integer 'index' and an 'entity' list")
    entity = cfg["entity"]
    for item in entity:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
            raise LogFormatError(f"entity item {item!r} is not [knob, type, value]")
    if not (isinstance(res, list) and len(res) == 4 and isinstance(res[0], list) and res[0]):
        raise LogFormatError("'result' must be [costs, error_no, all_cost, timestamp] with costs non-empty")
    costs = [_num(c, "cost") for c in res[0]]
    if not isinstance(res[1], int) or isinstance(res[1], bool):
        raise LogFormatError(f"error_no must be an integer, got {res[1]!r}")
    return Record(
        target=inp[0], model=model_from_target(inp[0]), task=inp[1], args=inp[2], entity=entity,
        index=cfg["index"], costs=costs, error_no=res[1], all_cost=_num(res[2], "all_cost"),
        timestamp=_num(res[3], "timestamp"), line=line, kwargs=inp[3], code_hash=cfg.get("code_hash"),
        tvm_version=str(obj.get("tvm_version", "")),
    )


# v0.1 task names (TVM 2018 topi registrations) -> the v0.2 template names. On an arm_cpu target
# the conv's template key ("direct" / "winograd") picks the kernel (docs/vta.md §8.1).
_V01_VTA_TASKS = {"topi_nn_conv2d": CONV2D_TASK, "topi_nn_dense": DENSE_TASK,
                  "topi_nn_group_conv2d_nchw": GROUP_CONV2D_TASK,
                  "topi_nn_conv2d_transpose_nchw": CONV2D_TRANSPOSE_TASK}
_V01_ARM_CPU_TASKS = {("topi_nn_conv2d", "direct"): "conv2d_nchw_spatial_pack.arm_cpu",
                      ("topi_nn_conv2d", "winograd"): "conv2d_nchw_winograd.arm_cpu",
                      ("topi_nn_depthwise_conv2d_nchw", "direct"): "depthwise_conv2d_nchw.arm_cpu",
                      ("topi_nn_conv2d_transpose_nchw", "direct"): "conv2d_transpose_nchw.arm_cpu"}


def _normalize_v01(target: str, task: str, args: list[Any], template: str) -> tuple[str, list[Any]]:
    """(v0.2 task name, v0.2 args) of a v0.1 task: v0.1 pads as [pad_h, pad_w] where v0.2 writes
    [top, left, bottom, right], and its arm_cpu conv args carry the layout ("NCHW") v0.2 drops."""
    args = list(args)
    if "-device=arm_cpu" in target.split():
        name = _V01_ARM_CPU_TASKS.get((task, template))
        if name is None:
            return task, args
        if task == "topi_nn_conv2d" and len(args) == 7 and isinstance(args[5], str):
            args = args[:5] + args[6:]
        return name, args
    name = _V01_VTA_TASKS.get(task, task)
    if name in (CONV2D_TASK, GROUP_CONV2D_TASK, CONV2D_TRANSPOSE_TASK) and len(args) > 3:
        pad = args[3]
        if isinstance(pad, list) and len(pad) == 2:
            args[3] = [pad[0], pad[1], pad[0], pad[1]]
    return name, args


def _parse_v01(obj: dict[str, Any], line: int) -> Record:
    """A v0.1 record: {"i": [target, task, args, kwargs, workload, {"e": entity, "c": code_hash,
    "i": index, "t": template}], "r": [costs, error_no, all_cost, timestamp], "v": 0.1}."""
    for key in ("i", "r", "v"):
        if key not in obj:
            raise LogFormatError(f"AutoTVM v0.1 record (keys i/r/v): missing key {key!r}")
    if obj["v"] != LOG_VERSION_01:
        raise LogFormatError(f"AutoTVM v0.1 record: version {obj['v']!r} is not supported (0.1 or 0.2)")
    inp = obj["i"]
    if not (isinstance(inp, list) and len(inp) == 6 and isinstance(inp[0], str) and isinstance(inp[1], str)
            and isinstance(inp[2], list) and isinstance(inp[3], dict) and isinstance(inp[5], dict)):
        raise LogFormatError("AutoTVM v0.1 record: 'i' must be [target, task_name, args, kwargs, workload, "
                             "{\"e\": entity, \"i\": index, \"t\": template}]")
    cfg = inp[5]
    if not (isinstance(cfg.get("i"), int) and isinstance(cfg.get("e"), list)):
        raise LogFormatError("AutoTVM v0.1 record: config must have an integer 'i' (index) and an 'e' (entity) list")
    template = cfg.get("t", "")
    task, args = _normalize_v01(inp[0], inp[1], inp[2], template if isinstance(template, str) else "")
    try:
        rec = parse_record({"input": [inp[0], task, args, inp[3]],
                            "config": {"index": cfg["i"], "code_hash": cfg.get("c"), "entity": cfg["e"]},
                            "result": obj["r"], "version": LOG_VERSION, "tvm_version": ""}, line)
    except LogFormatError as exc:
        raise LogFormatError(f"AutoTVM v0.1 record: {exc}") from None
    return replace(rec, version=LOG_VERSION_01, template_key=str(template or ""))


def parse_line(text: str, line: int = 0) -> Record:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogFormatError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    return parse_record(obj, line)


def parse_log(source: str | Path | Iterable[str]) -> tuple[list[Record], list[Skipped]]:
    """All records of a log file (or of an iterable of lines). `#` comment lines and blank lines
    are skipped silently (as `load_from_file` does); malformed lines are returned as Skipped."""
    if isinstance(source, (str, Path)):
        lines: Iterable[str] = read_text(source, "log file").splitlines()
    else:
        lines = source
    records: list[Record] = []
    skipped: list[Skipped] = []
    for n, text in enumerate(lines, start=1):
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            records.append(parse_line(stripped, n))
        except LogFormatError as exc:
            skipped.append(Skipped(n, str(exc)))
    return records, skipped


# -- layers <-> task arguments ------------------------------------------------------------------
def _tensor(arg: Any, what: str, ndim: int) -> list[int]:
    if not (isinstance(arg, list) and len(arg) == 3 and arg[0] == "TENSOR" and isinstance(arg[1], list)):
        raise LogFormatError(f"{what} must be [\"TENSOR\", shape, dtype], got {arg!r}")
    shape = arg[1]
    if len(shape) != ndim or not all(isinstance(d, int) and d > 0 for d in shape):
        raise LogFormatError(f"{what} shape {shape} must have {ndim} positive integer dims")
    return shape


def _pair(arg: Any, what: str) -> int:
    if not (isinstance(arg, list) and len(arg) == 2 and all(isinstance(v, int) for v in arg)):
        raise LogFormatError(f"{what} must be [h, w], got {arg!r}")
    if arg[0] != arg[1]:
        raise LogFormatError(f"{what} {arg} is not square; conv2d_packed layers here need equal h and w")
    return arg[0]


def layout_string(hw: HwConfig) -> str:
    """The packed data layout name, `NCHW{BATCH}n{BLOCK_IN}c` (docs/vta.md §7.1)."""
    return f"NCHW{hw.batch}n{hw.block_in}c"


def _padding4(pad: Any) -> int:
    if not (isinstance(pad, list) and len(pad) == 4 and all(isinstance(v, int) for v in pad)):
        raise LogFormatError(f"padding must be [top, left, bottom, right], got {pad!r}")
    if len(set(pad)) != 1:
        raise LogFormatError(f"padding {pad} is not symmetric; the conv layers here take one padding for all sides")
    return pad[0]


def _group_layer(args: list[Any], hw: HwConfig) -> Conv2D:
    """group_conv2d_packed.vta: [data, kernel, strides, padding, dilation, groups, out_dtype]."""

    if len(args) != 7:
        raise LogFormatError(f"{GROUP_CONV2D_TASK} expects 7 arguments [data, kernel, strides, padding, dilation, "
                             f"groups, out_dtype], got {len(args)}")
    data, kernel = _tensor(args[0], "data", 6), _tensor(args[1], "kernel", 6)
    stride, pad, dilation = _pair(args[2], "strides"), _padding4(args[3]), _pair(args[4], "dilation")
    groups = args[5]
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise LogFormatError(f"groups must be a positive integer, got {groups!r}")
    _check_packing(data[4], data[5], kernel[4], kernel[5], hw, None)
    if kernel[1] * groups != data[1]:
        raise LogFormatError(f"kernel input blocks {kernel[1]} x groups {groups} != data channel blocks {data[1]}")
    return Conv2D(batch=data[0] * data[4], in_channels=data[1] * data[5], height=data[2], width=data[3],
                  out_channels=kernel[0] * kernel[4], kernel_h=kernel[2], kernel_w=kernel[3], stride=stride,
                  padding=pad, dilation=dilation, groups=groups)


def _transpose_layer(args: list[Any], hw: HwConfig) -> Conv2DTranspose:
    """conv2d_transpose_packed.vta: [data, kernel, strides, padding, out_dtype, output_padding];
    kernel packed as (O/BO, I/BI, KH, KW, BO, BI) (graphpack `_pack_weight_conv2d_transpose`)."""

    if len(args) != 6:
        raise LogFormatError(f"{CONV2D_TRANSPOSE_TASK} expects 6 arguments [data, kernel, strides, padding, "
                             f"out_dtype, output_padding], got {len(args)}")
    data, kernel = _tensor(args[0], "data", 6), _tensor(args[1], "kernel", 6)
    stride, pad = _pair(args[2], "strides"), _padding4(args[3])
    opad = _pair(args[5], "output_padding") if args[5] is not None else 0
    _check_packing(data[4], data[5], kernel[4], kernel[5], hw, None)
    if kernel[1] != data[1]:
        raise LogFormatError(f"kernel input blocks {kernel[1]} != data channel blocks {data[1]}")
    return Conv2DTranspose(batch=data[0] * data[4], in_channels=data[1] * data[5], height=data[2], width=data[3],
                           out_channels=kernel[0] * kernel[4], kernel_h=kernel[2], kernel_w=kernel[3],
                           stride=stride, padding=pad, output_padding=opad)


def layer_from_args(task: str, args: list[Any], hw: HwConfig) -> Conv2D | Conv2DTranspose | Dense:
    """Rebuild the layer of a record's task arguments, unpacking the packed shapes
    (data (N/b, C/bi, H, W, b, bi), kernel (O/bo, I/bi, KH, KW, bo, bi); dense data
    (N/b, I/bi, b, bi), weight (O/bo, I/bi, bo, bi)) and checking them against `hw`."""
    if task == GROUP_CONV2D_TASK:
        return _group_layer(args, hw)
    if task == CONV2D_TRANSPOSE_TASK:
        return _transpose_layer(args, hw)
    if task == CONV2D_TASK:
        # 7 args: data, kernel, strides, padding, dilation, layout, out_dtype; some real logs
        # write the layout twice (8 args, docs/vta.md §9).
        if len(args) == 8:
            if args[5] != args[6]:
                raise LogFormatError(f"conv2d args repeat the layout but differ: {args[5]!r} vs {args[6]!r}")
            args = args[:6] + args[7:]
        if len(args) != 7:
            raise LogFormatError(f"{task} expects 7 arguments (or 8 with the layout twice), got {len(args)}")
        data = _tensor(args[0], "data", 6)
        kernel = _tensor(args[1], "kernel", 6)
        stride = _pair(args[2], "strides")
        pad = args[3]
        if not (isinstance(pad, list) and len(pad) == 4 and all(isinstance(v, int) for v in pad)):
            raise LogFormatError(f"padding must be [top, left, bottom, right], got {pad!r}")
        if len(set(pad)) != 1:
            raise LogFormatError(f"padding {pad} is not symmetric; Conv2D here takes one padding for all sides")
        dilation = _pair(args[4], "dilation")
        if not isinstance(args[5], str):
            raise LogFormatError(f"layout must be a string, got {args[5]!r}")
        _check_packing(data[4], data[5], kernel[4], kernel[5], hw, args[5])
        if kernel[1] != data[1]:
            raise LogFormatError(f"kernel input blocks {kernel[1]} != data channel blocks {data[1]} "
                                 "(grouped convolution is a different template)")
        return Conv2D(batch=data[0] * data[4], in_channels=data[1] * data[5], height=data[2],
                      width=data[3], out_channels=kernel[0] * kernel[4], kernel_h=kernel[2],
                      kernel_w=kernel[3], stride=stride, padding=pad[0], dilation=dilation)
    if task == DENSE_TASK:
        if len(args) != 4:
            raise LogFormatError(f"{task} expects 4 arguments [data, weight, bias, out_dtype], got {len(args)}")
        data = _tensor(args[0], "data", 4)
        weight = _tensor(args[1], "weight", 4)
        if args[2] is not None:
            raise LogFormatError("dense_packed bias argument must be null")
        _check_packing(data[2], data[3], weight[2], weight[3], hw, None)
        if weight[1] != data[1]:
            raise LogFormatError(f"weight input blocks {weight[1]} != data blocks {data[1]}")
        return Dense(batch=data[0] * data[2], in_features=data[1] * data[3],
                     out_features=weight[0] * weight[2])
    raise LogFormatError(f"template {task!r} is not supported; supported: {', '.join(SUPPORTED_TASKS)}")


def _check_packing(b: int, bi: int, bo: int, ki: int, hw: HwConfig, layout: str | None) -> None:
    if (b, bi, bo, ki) != (hw.batch, hw.block_in, hw.block_out, hw.block_in):
        raise LogFormatError(
            f"packed shapes use BATCH={b}, BLOCK_IN={bi}, BLOCK_OUT={bo} (weight BLOCK_IN={ki}) but "
            f"{hw.vta_model} has BATCH={hw.batch}, BLOCK_IN={hw.block_in}, BLOCK_OUT={hw.block_out}")
    if layout is not None and layout != layout_string(hw):
        raise LogFormatError(f"layout {layout!r} does not match {hw.vta_model} ({layout_string(hw)!r})")


def _tensor_arg(shape: Sequence[int]) -> list[Any]:
    return ["TENSOR", [int(d) for d in shape], "int8"]


def task_args(layer: Conv2D | Conv2DTranspose | Dense, hw: HwConfig) -> list[Any]:
    """The template call arguments exactly as the TVM VTA flow serializes them (docs/vta.md §8)."""
    b, bi, bo = hw.batch, hw.block_in, hw.block_out
    if isinstance(layer, Conv2DTranspose):
        data = (layer.batch // b, layer.in_channels // bi, layer.height, layer.width, b, bi)
        kernel = (layer.out_channels // bo, layer.in_channels // bi, layer.kernel_h, layer.kernel_w, bo, bi)
        s, p, op = layer.stride, layer.padding, layer.output_padding
        return [_tensor_arg(data), _tensor_arg(kernel), [s, s], [p, p, p, p], "int32", [op, op]]
    if isinstance(layer, Conv2D) and layer.groups > 1:
        data = (layer.batch // b, layer.in_channels // bi, layer.height, layer.width, b, bi)
        kernel = (layer.out_channels // bo, layer.in_channels // layer.groups // bi, layer.kernel_h,
                  layer.kernel_w, bo, bi)
        s, p, d = layer.stride, layer.padding, layer.dilation
        return [_tensor_arg(data), _tensor_arg(kernel), [s, s], [p, p, p, p], [d, d], layer.groups, "int32"]
    if isinstance(layer, Conv2D):
        data = (layer.batch // b, layer.in_channels // bi, layer.height, layer.width, b, bi)
        kernel = (layer.out_channels // bo, layer.in_channels // bi, layer.kernel_h, layer.kernel_w, bo, bi)
        s, p, d = layer.stride, layer.padding, layer.dilation
        return [_tensor_arg(data), _tensor_arg(kernel), [s, s], [p, p, p, p], [d, d], layout_string(hw), "int32"]
    if isinstance(layer, Dense):
        data = (layer.batch // b, layer.in_features // bi, b, bi)
        weight = (layer.out_features // bo, layer.in_features // bi, bo, bi)
        return [_tensor_arg(data), _tensor_arg(weight), None, "int32"]
    raise ConfigError(f"cannot write an AutoTVM record for {type(layer).__name__}; allowed: Conv2D, Dense")


def _config_index_entity(layer: Any, hw: HwConfig, config: Any) -> tuple[int, list[list[Any]]]:
    """(index, entity) of a schedule `Config`, or of a knob dict (resolved through ScheduleSpace)."""
    if isinstance(config, dict):
        config = ScheduleSpace(layer, hw).from_knobs(config)
    return int(config.index), [list(e) for e in config.entity()]


def format_record(layer: Conv2D | Dense, hw: HwConfig, config: Any, seconds: float | Sequence[float] | None, *,
                  error_no: int = 0, all_cost: float = 0.0, timestamp: float | None = None,
                  tvm_version: str = TVM_VERSION) -> str:
    """One AutoTVM v0.2 line (no trailing newline), byte-for-byte as TVM's `encode` writes it.
    `config` is a schedule Config or a knob dict; `seconds` one cost or a list of repeats
    (ignored and written as [1e9] when error_no != 0, as TVM does; `seconds=None` with
    error_no=0 is written as UNKNOWN_ERROR=8)."""
    index, entity = _config_index_entity(layer, hw, config)
    if error_no != 0 or seconds is None:
        costs = [ERROR_COST]
        if error_no == 0:
            error_no = ERROR_NAMES_TO_NO["UNKNOWN_ERROR"]
    elif isinstance(seconds, (int, float)):
        costs = [float(seconds)]
    else:
        costs = [float(s) for s in seconds]
    if any(not math.isfinite(c) for c in costs):
        raise ConfigError(f"record costs must be finite seconds, got {costs}")
    obj = {
        "input": [target_string(hw), layer.template, task_args(layer, hw), {}],
        "config": {"index": index, "code_hash": None, "entity": entity},
        "result": [costs, int(error_no), float(all_cost), float(time.time() if timestamp is None else timestamp)],
        "version": LOG_VERSION,
        "tvm_version": tvm_version,
    }
    return json.dumps(obj)


__all__ = [
    "CONV2D_TASK", "GROUP_CONV2D_TASK", "CONV2D_TRANSPOSE_TASK", "DENSE_TASK", "SUPPORTED_TASKS", "TVM_VERSION", "ERROR_NAMES", "LogFormatError",
    "Record", "Skipped", "model_from_target", "hw_from_target", "resolve_hw", "shipped_configs", "target_string",
    "parse_record",
    "parse_line", "parse_log", "layout_string", "layer_from_args", "task_args", "format_record",
]
