"""Networks from PyTorch: `from_torch(module, example_inputs)` and the `--workload` forms.

`from_torch` traces the module with `torch.export` (falling back to `torch.fx` symbolic tracing
with shape propagation when export cannot trace it) and turns every compute op into a layer:

- conv2d (stride, padding, dilation, groups) -> `Conv2D`; conv_transpose2d -> `Conv2DTranspose`;
  linear, and mm/matmul with a weight operand -> `Dense` (batch = all leading dims);
  lstm_cell -> its two gate GEMMs (x -> 4H and h -> 4H) as `Dense`;
- matmuls of two activations (attention scores / context), convs with non-square stride,
  padding or kernel dilation pairs, 1-D/3-D convs -> `CpuOp` with the reason.

Whether a layer is offloaded on a given hardware is decided later by the same rules the
schedule spaces use (`Workload.partition`). Layers carry the example input's batch; identical
layers are merged with a count.

`--workload` accepts a built-in zoo name, `path/to/file.py:factory` (a function returning
`(module, example_inputs)`), a `torch.export` `.pt2` file or an `.onnx` file (converted by
onnx2torch: `codesign.workloads.onnx_import`) (`get_workload`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import math
import sys
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError
from codesign.workloads import cache as workload_cache
from codesign.workloads.layers import Conv2D, Conv2DTranspose, Dense, Layer
from codesign.workloads.networks import CpuOp, Workload
from codesign.workloads.onnx_import import load_onnx
from codesign.workloads.zoo import ZOO

TWO_ACTIVATIONS = "matmul of two activations: dense_packed.vta needs a weight operand"


class _Collector:
    """Accumulates layers and CPU ops in graph order, merging repeats."""

    def __init__(self) -> None:
        self.layers: dict[Layer, int] = {}
        self.cpu: dict[CpuOp, int] = {}

    def layer(self, layer: Layer) -> None:
        self.layers[layer] = self.layers.get(layer, 0) + 1

    def cpu_op(self, name: str, macs: int, reason: str) -> None:
        op = CpuOp(name, int(macs), reason)
        self.cpu[op] = self.cpu.get(op, 0) + 1


def _shape(node: Any) -> tuple[int, ...] | None:
    val = getattr(node, "meta", {}).get("val")
    if val is None:
        val = getattr(node, "meta", {}).get("tensor_meta")
    shape = getattr(val, "shape", None)
    return None if shape is None else tuple(int(d) for d in shape)


def _pair(value: Any, default: int) -> tuple[int, int]:
    if value is None:
        return default, default
    if isinstance(value, int):
        return value, value
    vals = [int(v) for v in value]
    return (vals[0], vals[0]) if len(vals) == 1 else (vals[0], vals[1])


def _arg(node: Any, i: int, name: str, default: Any) -> Any:
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _conv(c: _Collector, node: Any, transposed: bool, args: dict[str, Any]) -> None:
    x, w = _shape(node.args[0]), _shape(node.args[1])
    if x is None or w is None:
        raise ConfigError(f"op {node.name}: no shape information (trace the module with example inputs)")
    if len(x) != 4:
        n_out = _shape(node)
        macs = math.prod(n_out or ()) * math.prod(w[1:]) if n_out else 0
        c.cpu_op(f"conv{len(x) - 2}d_{'x'.join(map(str, x))}", macs, f"{len(x) - 2}-D convolution: VTA templates are 2-D")
        return
    (sh, sw), (ph, pw), (dh, dw) = _pair(args["stride"], 1), _pair(args["padding"], 0), _pair(args["dilation"], 1)
    groups, opad = int(args.get("groups") or 1), _pair(args.get("output_padding"), 0)
    out = _shape(node) or ()
    name = f"{'conv2d_transpose' if transposed else 'conv2d'}_{'x'.join(map(str, x))}_{'x'.join(map(str, w))}"
    macs = math.prod(out) * (w[0] if transposed else w[1]) * w[2] * w[3]
    if sh != sw or ph != pw or dh != dw or opad[0] != opad[1]:
        c.cpu_op(name, macs, f"non-square stride {sh}x{sw} / padding {ph}x{pw} / dilation {dh}x{dw}: "
                 "the VTA conv templates take one value for both axes")
        return
    n, cin, h, wd = x
    if transposed:
        if groups != 1 or dh != 1:
            c.cpu_op(name, macs, f"transposed conv with groups={groups}, dilation={dh}: "
                     "conv2d_transpose_packed.vta handles groups 1, dilation 1")
            return
        c.layer(Conv2DTranspose(n, cin, h, wd, w[1], w[2], w[3], sh, ph, opad[0]))
    else:
        c.layer(Conv2D(n, cin, h, wd, w[0], w[2], w[3], sh, ph, dh, groups))


def _dense(c: _Collector, x: tuple[int, ...], out_features: int, in_features: int) -> None:
    c.layer(Dense(math.prod(x[:-1]) if len(x) > 1 else 1, in_features, out_features))


def _is_param(node: Any, params: set[str]) -> bool:
    return getattr(node, "op", None) == "get_attr" or getattr(node, "name", None) in params


def _visit(c: _Collector, node: Any, params: set[str]) -> None:
    target = str(node.target)
    op = target.split(".")[1] if target.startswith("aten.") else target
    if op in ("conv2d", "conv1d", "conv3d"):
        args = {"stride": _arg(node, 3, "stride", 1), "padding": _arg(node, 4, "padding", 0),
                "dilation": _arg(node, 5, "dilation", 1), "groups": _arg(node, 6, "groups", 1)}
        if isinstance(args["padding"], str):
            out, x = _shape(node), _shape(node.args[0])
            k = _shape(node.args[1])
            c.cpu_op(f"conv_{'x'.join(map(str, x or ()))}", math.prod(out or ()) * math.prod((k or (1,))[1:]),
                     f"padding={args['padding']!r}: give explicit integer padding")
            return
        _conv(c, node, False, args)
    elif op in ("conv_transpose2d", "conv_transpose1d", "conv_transpose3d"):
        args = {"stride": _arg(node, 3, "stride", 1), "padding": _arg(node, 4, "padding", 0),
                "output_padding": _arg(node, 5, "output_padding", 0), "groups": _arg(node, 6, "groups", 1),
                "dilation": _arg(node, 7, "dilation", 1)}
        _conv(c, node, True, args)
    elif op == "convolution":
        transposed = bool(_arg(node, 6, "transposed", False))
        args = {"stride": _arg(node, 3, "stride", 1), "padding": _arg(node, 4, "padding", 0),
                "dilation": _arg(node, 5, "dilation", 1), "output_padding": _arg(node, 7, "output_padding", 0),
                "groups": _arg(node, 8, "groups", 1)}
        _conv(c, node, transposed, args)
    elif op == "linear":
        x, w = _shape(node.args[0]), _shape(node.args[1])
        _dense(c, x or (1, w[1]), w[0], w[1])
    elif op in ("mm", "matmul", "bmm", "addmm", "baddbmm"):
        a_node, b_node = (node.args[1], node.args[2]) if op in ("addmm", "baddbmm") else node.args[:2]
        a, b = _shape(a_node), _shape(b_node)
        if a is None or b is None:
            return
        if len(b) == 2 and _is_param(b_node, params):  # x @ W: a weight GEMM
            _dense(c, a, b[1], b[0])
            return
        out = _shape(node) or ()
        c.cpu_op(f"matmul_{'x'.join(map(str, a))}_{'x'.join(map(str, b))}", math.prod(out) * a[-1], TWO_ACTIVATIONS)
    elif op == "lstm_cell":
        x = _shape(node.args[0])
        w_ih, w_hh = _shape(node.args[2]), _shape(node.args[3])
        _dense(c, x, w_ih[0], w_ih[1])
        _dense(c, x, w_hh[0], w_hh[1])
    elif op in ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention"):
        q, k = _shape(node.args[0]), _shape(node.args[1])
        macs = 2 * math.prod(q) * k[-2]
        c.cpu_op(f"attention_{'x'.join(map(str, q))}", macs, TWO_ACTIVATIONS)


def _graph(module: Any, example_inputs: tuple[Any, ...], what: str) -> tuple[Any, set[str]]:
    """(fx graph with shapes, names of parameter placeholders) via torch.export, else torch.fx."""
    import torch  # heavy; only importing a network needs it

    # torch logs tracing failures (graph dumps, guard warnings) on its own: the user gets our line.
    torch_log = logging.getLogger("torch")
    level = torch_log.level
    torch_log.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return _trace(torch, module, example_inputs, what)
    finally:
        torch_log.setLevel(level)


def _trace(torch: Any, module: Any, example_inputs: tuple[Any, ...], what: str) -> tuple[Any, set[str]]:
    """torch.export first; then torch.fx symbolic tracing with shape propagation; then (for
    modules neither can trace, e.g. data-dependent control flow or custom output types) one eager
    run with forward hooks on the conv / linear / LSTM-cell submodules, which sees the path the
    example inputs take (functional calls such as F.conv2d are not seen there)."""
    errors = []
    try:
        with torch.no_grad():
            ep = torch.export.export(module, tuple(example_inputs))
        params = set(ep.graph_signature.inputs_to_parameters) | set(ep.graph_signature.inputs_to_buffers)
        return ep.graph, params
    except Exception as exc:  # noqa: BLE001 - any export failure falls back to fx
        errors.append(exc)
    try:
        from torch.fx.passes.shape_prop import ShapeProp  # heavy; part of torch

        gm = torch.fx.symbolic_trace(module)
        with torch.no_grad():
            ShapeProp(gm).propagate(*example_inputs)
        mods = dict(gm.named_modules())
        calls = [(n.name, mods[n.target], _shape(n.args[0]), _shape(n)) for n in gm.graph.nodes
                 if n.op == "call_module" and n.args and hasattr(n.args[0], "meta")]
        return _module_graph(torch, calls), set()
    except Exception as exc:  # noqa: BLE001 - fall back to an eager run
        errors.append(exc)
    try:
        return _module_graph(torch, _eager_calls(torch, module, example_inputs)), set()
    except Exception as exc:  # noqa: BLE001 - the module does not run on its example inputs
        errors.append(exc)
    text = str(errors[-1]).strip() or type(errors[-1]).__name__
    raise ConfigError(f"{what}: the module does not trace (torch.export, torch.fx) nor run on its example inputs: "
                      f"{text.splitlines()[0][:200]}") from None


def _eager_calls(torch: Any, module: Any, example_inputs: tuple[Any, ...]) -> list[tuple]:
    calls: list[tuple] = []
    kinds = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose2d, torch.nn.Linear,
             torch.nn.LSTMCell)

    def hook(name: str) -> Any:
        def record(mod: Any, inputs: tuple, output: Any) -> None:
            out = output[0] if isinstance(output, tuple) else output
            calls.append((name, mod, tuple(inputs[0].shape), tuple(out.shape)))
        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in module.named_modules() if isinstance(m, kinds)]
    try:
        with torch.no_grad():
            module(*example_inputs)
    finally:
        for h in handles:
            h.remove()
    return calls


def _module_graph(torch: Any, calls: list[tuple]) -> Any:
    """aten-like nodes (what `_visit` reads) for submodule calls (name, module, in, out shape)."""

    class Shaped:
        def __init__(self, shape: tuple[int, ...] | None, op: str = "placeholder") -> None:
            self.meta = {"val": None if shape is None else torch.empty(shape, device="meta")}
            self.op, self.name = op, "param" if op == "get_attr" else "x"

    class Node:
        def __init__(self, name: str, target: str, args: tuple, out: tuple[int, ...] | None) -> None:
            self.name, self.target, self.args, self.kwargs = name, target, args, {}
            self.meta = {"val": None if out is None else torch.empty(out, device="meta")}
            self.op = "call_function"

    nodes = []
    for name, m, x, out in calls:
        if x is None:
            continue
        if isinstance(m, torch.nn.ConvTranspose2d):
            nodes.append(Node(name, "aten.conv_transpose2d.input", (
                Shaped(x), Shaped(tuple(m.weight.shape), "get_attr"), None, m.stride, m.padding,
                m.output_padding, m.groups, m.dilation), out))
        elif isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)):
            nodes.append(Node(name, "aten.conv2d.default", (
                Shaped(x), Shaped(tuple(m.weight.shape), "get_attr"), None, m.stride, m.padding, m.dilation,
                m.groups), out))
        elif isinstance(m, torch.nn.Linear):
            nodes.append(Node(name, "aten.linear.default", (Shaped(x), Shaped(tuple(m.weight.shape), "get_attr")), out))
        elif isinstance(m, torch.nn.LSTMCell):
            nodes.append(Node(name, "aten.lstm_cell.default", (
                Shaped(x), None, Shaped(tuple(m.weight_ih.shape), "get_attr"),
                Shaped(tuple(m.weight_hh.shape), "get_attr")), out))

    class Graph:
        pass

    g = Graph()
    g.nodes = nodes  # type: ignore[attr-defined]
    return g


def from_torch(module: Any, example_inputs: Any, name: str = "network", description: str = "") -> Workload:
    """The `Workload` of a torch module traced on `example_inputs` (a tensor or a tuple).

    Every conv2d, conv_transpose2d and linear becomes a layer with its multiplicity and the batch
    of the example input; compute ops VTA cannot express are kept as `CpuOp`s with the reason."""
    import torch  # heavy; only importing a network needs it

    what = f"workload {name!r}"
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"{what}: expected a torch.nn.Module, got {type(module).__name__}")
    inputs = example_inputs if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise ConfigError(f"{what}: example inputs must be a tensor or a tuple of tensors")
    graph, params = _graph(module.eval(), tuple(inputs), what)
    return _workload(graph, params, name, description, int(inputs[0].shape[0]) if inputs[0].dim() else 1)


def _workload(graph: Any, params: set[str], name: str, description: str, batch: int) -> Workload:
    c = _Collector()
    for node in graph.nodes:
        if getattr(node, "op", None) == "call_function":
            _visit(c, node, params)
    if not c.layers:
        what = f"{len(c.cpu)} CPU-only op(s)" if c.cpu else "no conv2d, conv_transpose2d or linear"
        raise ConfigError(f"workload {name!r}: nothing VTA could offload ({what})")
    if any(layer.batch % batch for layer in c.layers):
        batch = 1
    return Workload(name, tuple(c.layers.items()), batch, description, tuple(c.cpu.items()))


def load_exported(path: str | Path) -> Any:
    """The `ExportedProgram` of a `torch.export.save`d `.pt2` file, or a one-line error."""
    import torch  # heavy; only importing a network needs it

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"workload file {str(p)!r} does not exist")
    if not zipfile.is_zipfile(p):  # torch.export.load would log its own traceback before raising
        raise ConfigError(f"workload file {str(p)!r} is not a torch.export .pt2 archive (not a zip file)")
    try:
        ep = torch.export.load(str(p))
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad archive
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"workload file {str(p)!r} is not a torch.export .pt2 archive: {first[:200]}") from None
    return ep


def from_exported(path: str | Path, name: str | None = None) -> Workload:
    """The workload of a `torch.export.save`d `.pt2` file."""
    p = Path(path)
    ep = load_exported(p)
    params = set(ep.graph_signature.inputs_to_parameters) | set(ep.graph_signature.inputs_to_buffers)
    user = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name not in params]
    batch = (_shape(user[0]) or (1,))[0] if user else 1
    return _workload(ep.graph, params, name or p.stem, f"torch.export program {p.name}", max(1, int(batch)))


def from_onnx(path: str | Path) -> Workload:
    """The workload of an `.onnx` file (its static input shapes; `codesign.workloads.onnx_import`)."""
    module, inputs, name = load_onnx(path)
    return from_torch(module, inputs, name=name, description=f"ONNX model {Path(path).name}")


def from_factory(spec: str) -> Workload:
    """The workload of `path/to/file.py:factory`, a function returning (module, example_inputs)."""
    module, inputs, name = load_factory(spec)
    return from_torch(module, inputs, name=name, description=f"{spec}")


def load_factory(spec: str) -> tuple[Any, Any, str]:
    """(module, example_inputs, name) from `path/to/file.py:factory`, or a one-line error."""
    path_text, sep, fn_name = spec.rpartition(":")
    if not sep or not path_text.endswith(".py") or not fn_name.isidentifier():
        raise ConfigError(f"workload {spec!r}: expected path/to/file.py:factory")
    path = Path(path_text)
    if not path.is_file():
        raise ConfigError(f"workload file {path_text!r} does not exist")
    mod_name = f"_codesign_workload_{abs(hash(str(path.resolve())))}"
    try:
        loader = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(loader)  # type: ignore[arg-type]
        sys.modules[mod_name] = module
        loader.loader.exec_module(module)  # type: ignore[union-attr]
    except Exception as exc:  # noqa: BLE001 - user code may raise anything
        raise ConfigError(f"workload file {path_text!r} fails to import: {type(exc).__name__}: {exc}"[:300]) from None
    factory = getattr(module, fn_name, None)
    if not callable(factory):
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ConfigError(f"workload file {path_text!r} has no function {fn_name!r}; functions: {', '.join(names) or 'none'}")
    try:
        result = factory()
    except Exception as exc:  # noqa: BLE001 - user code may raise anything
        raise ConfigError(f"workload factory {spec!r} raised {type(exc).__name__}: {exc}"[:300]) from None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise ConfigError(f"workload factory {spec!r} must return (module, example_inputs), got {type(result).__name__}")
    return result[0], result[1], f"{path.stem}_{fn_name}"


@cache
def zoo_workload(name: str) -> Workload:
    """A zoo network as a Workload (traced once per process, and once per source version and
    torch version on this machine: `codesign.workloads.cache`)."""
    cached = workload_cache.load(name)
    if cached is not None:
        return cached
    import torch  # heavy; only importing a network needs it

    factory, description = ZOO[name]
    # Shapes are all that matter: build on the meta device, so no weight memory is allocated
    # (VGG-16's 138M parameters would take 0.5 GB).
    with torch.device("meta"):
        module, inputs = factory()
    workload = from_torch(module, inputs, name=name, description=description)
    workload_cache.store(workload)
    return workload


def zoo_key(text: str) -> str | None:
    key = text.strip().lower().replace("-", "").replace("_", "")
    aliases = {"mobilenetv1": "mobilenet", "mobilenetg": "mobilenet", "vgg": "vgg16"}
    key = aliases.get(key, key)
    return next((n for n in ZOO if n.replace("_", "") == key), None)


def get_workload(spec: str) -> Workload:
    """A workload from a built-in zoo name (case-insensitive), `path/file.py:factory`, a `.pt2` or an `.onnx`."""
    text = str(spec).strip()
    name = zoo_key(text)
    if name is not None:
        return zoo_workload(name)
    if text.endswith(".pt2"):
        return from_exported(text)
    if text.lower().endswith(".onnx"):
        return from_onnx(text)
    if ".py:" in text or text.endswith(".py"):
        return from_factory(text)
    raise ConfigError(f"unknown workload {spec!r}; allowed: a zoo name ({', '.join(ZOO)}), "
                      "path/to/file.py:factory, a torch.export .pt2 file or an .onnx file")
