"""Whole networks from PyTorch: `import_network(module, example_inputs)` -> `Network`.

The module is exported with `torch.export` and every call of the graph becomes an `Op` of the
IR (`codesign.network.graph.KINDS`), with the module's weights and the graph's edges. Batch
norm is folded into the conv before it (w' = w·γ/√(σ²+ε), b' = (b−μ)·γ/√(σ²+ε) + β); ops that
compute nothing in inference (dropout, clone, ...) pass their input through. An op the IR has no
kind for is a one-line error naming the op, the graph node and the module it came from.

The same walk reads the graph `torch.ao`/torchao's PT2E `prepare_pt2e` returns: observer modules
pass their input through and are reported per tensor (`walk(..., observers=...)`), which is how
`codesign.network.quantize` reads the calibrated ranges.

`load_model(spec)` takes the `--workload` forms: a zoo name (built with seeded random weights and
seeded standard-normal example inputs: the zoo defines architectures, not trained weights),
`path/to/file.py:factory` or a `.pt2`.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.network.graph import IDENTITY_OPS, KINDS, Network, Op
from codesign.workloads.torch_import import load_exported, load_factory, zoo_key
from codesign.workloads.zoo import ZOO

RESHAPES = ("flatten", "view", "reshape", "_unsafe_view", "squeeze", "unsqueeze")
OBSERVER_PREFIX = "activation_post_process"


def _shape(node: Any) -> tuple[int, ...]:
    val = getattr(node, "meta", {}).get("val")
    shape = getattr(val, "shape", None)
    if shape is None:
        raise ConfigError(f"node {node.name!r}: no shape information (export the module with example inputs)")
    return tuple(int(d) for d in shape)


def _ints(value: Any, n: int = 2, default: int | None = None) -> tuple[int, ...]:
    """An int or a list of ints (one value for every axis when given once) as an n-tuple."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return (default,) * n if default is not None else ()
    if isinstance(value, int):
        return (int(value),) * n
    vals = tuple(int(v) for v in value)
    return vals * n if len(vals) == 1 else vals


def _arg(node: Any, i: int, name: str, default: Any = None) -> Any:
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _source(node: Any) -> str:
    stack = getattr(node, "meta", {}).get("nn_module_stack") or {}
    if not stack:
        return ""
    path, kind = list(stack.values())[-1]
    name = getattr(kind, "__name__", None) or str(kind).rsplit(".", 1)[-1].strip("'>")
    return f"{path or '<root>'}: {name}"


def _numpy(t: Any) -> np.ndarray | None:
    if t is None or getattr(getattr(t, "device", None), "type", "") == "meta":
        return None
    return t.detach().to("cpu").float().numpy().copy()


def _fetch(gm: Any, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


class _Walk:
    """State of one walk over an fx graph (aliases, parameters, ops so far)."""

    def __init__(self, gm: Any, what: str) -> None:
        self.gm, self.what = gm, what
        self.alias: dict[str, str] = {}      # fx node name -> IR tensor name
        self.params: dict[str, Any] = {}     # fx node name -> torch tensor (get_attr, through observers)
        self.ops: list[Op] = []
        self.index: dict[str, int] = {}      # IR op name -> position in ops
        self.users: dict[str, int] = {}      # IR tensor -> number of fx users of its node
        self.inputs: list[tuple[str, tuple[int, ...]]] = []
        self.observers: dict[str, Any] = {}  # IR tensor or "<op>.weight" -> observer module
        self.weight_of: dict[str, str] = {}  # fx param node name -> name used for its observer

    def tensor(self, node: Any, at: Any) -> str:
        name = getattr(node, "name", None)
        if name not in self.alias:
            raise self.unsupported(at, f"an operand that is not a tensor of the graph ({node!r})")
        return self.alias[name]

    def param(self, node: Any) -> Any:
        if node is None:
            return None
        if getattr(node, "name", None) not in self.params:
            raise ConfigError(f"{self.what}: node {node.name!r} is used as a weight but is computed by the graph; "
                              "the network IR takes conv/linear weights that are module parameters")
        return self.params[node.name]

    def unsupported(self, node: Any, why: str) -> ConfigError:
        src = _source(node)
        return ConfigError(f"{self.what}: op {node.target} at node {node.name!r}"
                           f"{f' (module {src})' if src else ''} cannot be represented: {why}")

    def add(self, node: Any, kind: str, inputs: tuple[str, ...], attrs: dict[str, Any] | None = None,
            weight: Any = None, bias: Any = None) -> None:
        op = Op(node.name, kind, inputs, _shape(node), attrs or {}, _numpy(weight), _numpy(bias), _source(node))
        self.index[op.name] = len(self.ops)
        self.ops.append(op)
        self.alias[node.name] = node.name
        self.users[node.name] = len(node.users)


def _kinds_text() -> str:
    return ", ".join(KINDS) + " (batch norm after a conv folds into it)"


def _conv(w: _Walk, node: Any, op: str) -> None:
    x = node.args[0]
    if op == "convolution":
        if _arg(node, 6, "transposed", False):
            raise w.unsupported(node, "transposed convolution (the integer reference has no conv_transpose2d yet)")
        stride, padding, dilation, groups = (_arg(node, 3, "stride"), _arg(node, 4, "padding"),
                                             _arg(node, 5, "dilation"), _arg(node, 8, "groups", 1))
    else:
        stride, padding, dilation, groups = (_arg(node, 3, "stride"), _arg(node, 4, "padding"),
                                             _arg(node, 5, "dilation"), _arg(node, 6, "groups", 1))
    if len(_shape(x)) != 4:
        raise w.unsupported(node, f"{len(_shape(x)) - 2}-D convolution (the IR's conv2d is 2-D)")
    if isinstance(padding, str):
        raise w.unsupported(node, f"padding={padding!r}: give explicit integer padding")
    weight, bias = w.param(node.args[1]), w.param(_arg(node, 2, "bias"))
    wshape = tuple(int(d) for d in weight.shape)
    attrs = {"stride": _ints(stride, default=1), "padding": _ints(padding, default=0),
             "dilation": _ints(dilation, default=1), "groups": int(groups or 1), "weight_shape": wshape}
    if bias is None and weight.device.type != "meta":
        import torch  # heavy; the walk runs only when a network is imported

        bias = torch.zeros(wshape[0])
    w.add(node, "conv2d", (w.tensor(x, node),), attrs, weight, bias)
    w.weight_of[node.args[1].name] = node.name


def _batch_norm(w: _Walk, node: Any, op: str) -> None:
    """Fold an inference batch norm into the conv that produces its input (and only feeds it)."""
    x = node.args[0]
    conv = w.ops[w.index[w.alias[x.name]]] if w.alias.get(x.name) in w.index else None
    if conv is None or conv.kind != "conv2d" or w.users.get(conv.name, 0) != 1:
        raise w.unsupported(node, "batch norm that does not follow a conv it alone consumes "
                            "(the IR folds batch norm into the conv before it)")
    if op == "batch_norm":
        gamma, beta, mean, var, eps = (w.param(node.args[1]), w.param(node.args[2]), w.param(node.args[3]),
                                       w.param(node.args[4]), float(_arg(node, 7, "eps", 1e-5)))
    else:  # _native_batch_norm_legit_no_training(input, weight, bias, mean, var, momentum, eps)
        gamma, beta, mean, var, eps = (w.param(node.args[1]), w.param(node.args[2]), w.param(node.args[3]),
                                       w.param(node.args[4]), float(_arg(node, 6, "eps", 1e-5)))
    if conv.weight is not None:
        c = conv.weight.shape[0]
        g = np.ones(c) if gamma is None else _numpy(gamma).astype(np.float64)
        b = np.zeros(c) if beta is None else _numpy(beta).astype(np.float64)
        scale = g / np.sqrt(_numpy(var).astype(np.float64) + eps)
        weight = (conv.weight.astype(np.float64) * scale[:, None, None, None]).astype(np.float32)
        bias = ((conv.bias.astype(np.float64) - _numpy(mean)) * scale + b).astype(np.float32)
        w.ops[w.index[conv.name]] = replace(conv, weight=weight, bias=bias)
    w.alias[node.name] = conv.name
    w.users[conv.name] = len(node.users)


def _pool(w: _Walk, node: Any, op: str) -> None:
    x = w.tensor(node.args[0], node)
    if len(_shape(node.args[0])) != 4:
        raise w.unsupported(node, "pooling of a tensor that is not NCHW")
    kernel = _ints(_arg(node, 1, "kernel_size"))
    stride = _ints(_arg(node, 2, "stride"), default=None) or kernel
    padding = _ints(_arg(node, 3, "padding", 0), default=0)
    if op.startswith("max_pool2d"):
        dilation = _ints(_arg(node, 4, "dilation", 1), default=1)
        w.add(node, "max_pool2d", (x,), {"kernel": kernel, "stride": stride, "padding": padding,
                                         "dilation": dilation, "ceil_mode": bool(_arg(node, 5, "ceil_mode", False))})
        return
    ceil_mode, include_pad = bool(_arg(node, 4, "ceil_mode", False)), bool(_arg(node, 5, "count_include_pad", True))
    divisor = _arg(node, 6, "divisor_override")
    if ceil_mode:
        raise w.unsupported(node, "avg_pool2d with ceil_mode=True (edge windows would need their own divisor)")
    if not include_pad and any(padding):
        raise w.unsupported(node, "avg_pool2d with padding and count_include_pad=False (divisor varies per window)")
    w.add(node, "avg_pool2d", (x,), {"kernel": kernel, "stride": stride, "padding": padding,
                                     "divisor": int(divisor) if divisor else kernel[0] * kernel[1]})


def _adaptive(w: _Walk, node: Any, out_hw: tuple[int, int]) -> None:
    shape = _shape(node.args[0])
    if len(shape) != 4:
        raise w.unsupported(node, "average pooling of a tensor that is not NCHW")
    (h, wd), (oh, ow) = shape[2:], out_hw
    if h % oh or wd % ow:
        raise w.unsupported(node, f"adaptive average pool {h}x{wd} -> {oh}x{ow}: windows of unequal size "
                            "(output size must divide the input size)")
    w.add(node, "adaptive_avg_pool2d", (w.tensor(node.args[0], node),), {"output_size": (oh, ow)})


def _call(w: _Walk, node: Any) -> None:
    target = str(node.target)
    op = target.split(".")[1] if target.startswith("aten.") else target
    op = op[:-1] if op.endswith("_") and not op.startswith("_") else op  # in-place relu_, add_
    if target == "<built-in function getitem>" or op == "getitem":
        src, i = node.args
        if src.name in w.alias and i == 0:  # max_pool2d_with_indices, native batch norm: value 0
            w.alias[node.name] = w.alias[src.name]
            return
        raise w.unsupported(node, f"item {i} of a multi-output op")
    if op in ("_assert_tensor_metadata", "sym_size", "_assert_async"):
        return
    if op in ("conv2d", "convolution", "conv1d", "conv3d"):
        if op in ("conv1d", "conv3d"):
            raise w.unsupported(node, f"{op} (the IR's conv2d is 2-D)")
        _conv(w, node, op)
    elif op in ("batch_norm", "_native_batch_norm_legit_no_training"):
        _batch_norm(w, node, op)
    elif op == "linear":
        weight, bias = w.param(node.args[1]), w.param(_arg(node, 2, "bias"))
        if bias is None and weight.device.type != "meta":
            import torch  # heavy; the walk runs only when a network is imported

            bias = torch.zeros(weight.shape[0])
        w.add(node, "linear", (w.tensor(node.args[0], node),), {"weight_shape": tuple(int(d) for d in weight.shape)},
              weight, bias)
        w.weight_of[node.args[1].name] = node.name
    elif op == "relu":
        w.add(node, "relu", (w.tensor(node.args[0], node),))
    elif op in ("hardtanh", "relu6", "clamp"):
        lo, hi = {"hardtanh": (-1.0, 1.0), "relu6": (0.0, 6.0), "clamp": (None, None)}[op]
        if op != "relu6":
            lo, hi = _arg(node, 1, "min_val" if op == "hardtanh" else "min", lo), _arg(node, 2, "max_val" if op == "hardtanh" else "max", hi)
        if any(v is not None and not isinstance(v, (int, float)) for v in (lo, hi)):
            raise w.unsupported(node, "clamp to tensor bounds (the IR's clamp takes constants)")
        w.add(node, "clamp", (w.tensor(node.args[0], node),),
              {"min": None if lo is None else float(lo), "max": None if hi is None else float(hi)})
    elif op == "add":
        a, b = node.args[0], node.args[1]
        if not all(hasattr(t, "name") and t.name in w.alias for t in (a, b)):
            raise w.unsupported(node, "add of a constant (the IR's add sums two tensors)")
        if float(node.kwargs.get("alpha", 1)) != 1:
            raise w.unsupported(node, "add with alpha != 1")
        if _shape(a) != _shape(b):
            raise w.unsupported(node, f"add with broadcasting {_shape(a)} + {_shape(b)} (the IR's add takes equal shapes)")
        w.add(node, "add", (w.tensor(a, node), w.tensor(b, node)))
    elif op in ("max_pool2d", "max_pool2d_with_indices", "avg_pool2d"):
        _pool(w, node, op)
    elif op in ("adaptive_avg_pool2d", "_adaptive_avg_pool2d"):
        _adaptive(w, node, _ints(node.args[1]))
    elif op == "mean":
        dims = sorted(d % 4 for d in _ints(_arg(node, 1, "dim"), n=1)) if len(_shape(node.args[0])) == 4 else []
        if dims != [2, 3]:
            raise w.unsupported(node, "mean over dimensions other than H and W of an NCHW tensor")
        _adaptive(w, node, (1, 1))
    elif op in RESHAPES:
        w.add(node, "flatten", (w.tensor(node.args[0], node),), {"shape": _shape(node)})
    elif op == "cat":
        tensors, dim = node.args[0], int(_arg(node, 1, "dim", 0))
        w.add(node, "concat", tuple(w.tensor(t, node) for t in tensors), {"dim": dim % len(_shape(node))})
    elif op in IDENTITY_OPS:
        w.alias[node.name] = w.tensor(node.args[0], node)
    else:
        raise w.unsupported(node, f"the network IR has no kind for it (kinds: {_kinds_text()})")


def walk(gm: Any, what: str, observers: dict[str, Any] | None = None) -> Network:
    """The network of an fx GraphModule whose parameters are `get_attr` nodes (`ExportedProgram.module()`,
    or the result of `prepare_pt2e`). Observer modules found on the way go to `observers`, keyed by
    the IR tensor they observe (weights as `"<op>.weight"`)."""
    w = _Walk(gm, what)
    outputs: list[str] = []
    pending: list[tuple[str, Any]] = []  # (param node name, observer): named once its op is known
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            w.inputs.append((node.name, _shape(node)))
            w.alias[node.name] = node.name
        elif node.op == "get_attr":
            w.params[node.name] = _fetch(gm, node.target)
        elif node.op == "call_module":
            if node.target.startswith(OBSERVER_PREFIX):
                src = node.args[0]
                obs = _fetch(gm, node.target)
                node.meta.setdefault("val", src.meta.get("val"))  # PT2E's observer nodes carry no shape
                if src.name in w.params:
                    w.params[node.name] = w.params[src.name]
                    pending.append((node.name, obs))
                else:
                    w.alias[node.name] = w.tensor(src, node)
                    w.observers.setdefault(w.alias[src.name], obs)
            elif node.target != "_guards_fn":
                raise w.unsupported(node, "a submodule call left in the graph")
        elif node.op == "call_function":
            _call(w, node)
        elif node.op == "output":
            flat = node.args[0] if isinstance(node.args[0], (tuple, list)) else (node.args[0],)
            outputs = [w.tensor(t, node) for t in flat if t is not None]
    for name, obs in pending:
        if name in w.weight_of:
            w.observers[f"{w.weight_of[name]}.weight"] = obs
    if observers is not None:
        observers.update(w.observers)
    if not w.ops:
        raise ConfigError(f"{what}: the graph has no ops")
    return Network(what.removeprefix("network ").strip("'"), tuple(w.inputs), tuple(w.ops), tuple(outputs))


def check_inputs(example_inputs: Any, what: str) -> tuple[Any, ...]:
    """The example inputs as a non-empty tuple of tensors, or a one-line error."""
    import torch  # heavy; only importing a network needs it

    if example_inputs is None or (isinstance(example_inputs, (tuple, list)) and not example_inputs):
        raise ConfigError(f"{what} has no example inputs: a factory returns (module, example_inputs), a .pt2 "
                          "must be exported with them; they fix the input shape (give --calibration FILE.npy for data)")
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        raise ConfigError(f"{what}: example inputs must be a tensor or a tuple of tensors, got "
                          f"{', '.join(type(t).__name__ for t in inputs)}")
    return inputs


def as_eval(module: Any) -> Any:
    """The module in inference mode (batch norm on running statistics, dropout off). A `.pt2`'s
    `ExportedProgram.module()` refuses `eval()`: its graph is already the exported one."""
    try:
        return module.eval()
    except NotImplementedError:
        return module


def export_module(module: Any, example_inputs: Any, what: str) -> Any:
    """`torch.export` of a copy of `module` (export and PT2E passes must not touch the user's
    module), unlifted to a GraphModule whose weights are attributes."""
    import torch  # heavy; only importing a network needs it

    inputs = check_inputs(example_inputs, what)
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"{what}: expected a torch.nn.Module, got {type(module).__name__}")
    module = as_eval(copy.deepcopy(module))
    try:
        with torch.no_grad():
            ep = torch.export.export(module, inputs)
    except Exception as exc:  # noqa: BLE001 - torch raises many types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{what}: torch.export cannot export the module: {first[:200]}") from None
    return ep.module()


def import_network(module: Any, example_inputs: Any, name: str = "network") -> Network:
    """Every op of `module` traced on `example_inputs`, with its weights (None on the meta device)."""
    what = f"network {name!r}"
    return walk(export_module(module, example_inputs, what), what)


def load_model(spec: str, seed: int = 0) -> tuple[Any, tuple[Any, ...], str]:
    """(module, example_inputs, name) of a zoo name (seeded random weights), `file.py:factory` or `.pt2`."""
    import torch  # heavy; only importing a network needs it

    text = str(spec).strip()
    key = zoo_key(text)
    if key is not None:
        # The zoo's example inputs are zeros (shapes are all the timing sweeps need); a network with
        # weights gets seeded standard-normal inputs, so calibrating on them observes real ranges.
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            module, inputs = ZOO[key][0]()
            inputs = tuple(torch.randn(t.shape) for t in inputs)
        return module.eval(), inputs, key
    if text.endswith(".pt2"):
        ep = load_exported(text)
        example = getattr(ep, "example_inputs", None)
        args = example[0] if example else None
        return ep.module(), check_inputs(args, f"network file {text!r}"), text.rsplit("/", 1)[-1][:-4]
    if ".py:" in text or text.endswith(".py"):
        module, inputs, name = load_factory(text)
        if not hasattr(module, "eval"):
            raise ConfigError(f"network {spec!r}: expected a torch.nn.Module, got {type(module).__name__}")
        return as_eval(module), check_inputs(inputs, f"network {spec!r}"), name
    raise ConfigError(f"unknown network {spec!r}; allowed: a zoo name ({', '.join(ZOO)}), "
                      "path/to/file.py:factory or a torch.export .pt2 file")


def macs_text(net: Network) -> str:
    return f"{net.macs / 1e9:.3f} GMACs in {len(net.ops)} ops ({', '.join(f'{k} {n}' for k, n in net.counts().items())})"


__all__ = ["as_eval", "walk", "import_network", "export_module", "load_model", "check_inputs", "macs_text"]
