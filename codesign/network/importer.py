"""Whole networks from PyTorch: `import_network(module, example_inputs)` -> `Network`.

The module is exported with `torch.export` and every call of the graph becomes an `Op` of the
IR (a kind of `codesign.network.kinds.REGISTRY`, whose builder reads the node), with the
module's weights and the graph's edges. Batch norm is folded into the conv before it (w' = w·γ/√(σ²+ε), b' = (b−μ)·γ/√(σ²+ε) + β); ops that
compute nothing in inference (dropout, clone, ...) pass their input through. An op the IR has no
kind for is a one-line error naming the op, the graph node and the module it came from.

The same walk reads the graph `torch.ao`/torchao's PT2E `prepare_pt2e` returns: observer modules
pass their input through and are reported per tensor (`walk(..., observers=...)`), which is how
`codesign.network.quantize` reads the calibrated ranges.

`load_model(spec)` takes the `--workload` forms: a zoo name (built with seeded random weights and
seeded standard-normal example inputs: the zoo defines architectures, not trained weights),
`path/to/file.py:factory`, a `.pt2` or an `.onnx` (converted to a torch module by onnx2torch, example inputs
seeded standard-normal of the graph's static input shapes: `codesign.workloads.onnx_import`).
"""

from __future__ import annotations

import copy
from typing import Any

from codesign.errors import ConfigError
from codesign.network.fx import Walk, fetch, shape_of
from codesign.network.graph import Network
from codesign.network.kinds import BUILDERS, REGISTRY
from codesign.workloads.onnx_import import load_onnx
from codesign.workloads.torch_import import load_exported, load_factory, zoo_key
from codesign.workloads.zoo import ZOO

OBSERVER_PREFIX = "activation_post_process"
# Ops that compute nothing in inference; the walk passes their input through.
IDENTITY_OPS = ("dropout", "clone", "contiguous", "alias", "detach", "identity", "lift_fresh_copy")
IGNORED = ("_assert_tensor_metadata", "sym_size", "_assert_async")
# Ops whose result depends on an operand's shape and dtype only (a mask built in forward): constants.
SHAPE_ONLY = ("new_zeros", "new_ones", "new_full", "new_empty", "zeros_like", "ones_like", "full_like", "empty_like")


def aten_name(node_or_target: Any) -> str:
    """`relu` of aten.relu_.default (an fx node or its target): the op name without namespace,
    overload or in-place mark."""
    target = str(getattr(node_or_target, "target", node_or_target))
    op = target.split(".")[1] if target.startswith("aten.") else target
    return op[:-1] if op.endswith("_") and not op.startswith("_") else op


def _kinds_text() -> str:
    return ", ".join(REGISTRY) + " (batch norm after a conv folds into it)"


def _fold(w: Walk, node: Any) -> bool:
    """Compute, once, with torch, a call whose tensor operands are all module parameters or
    buffers (or constants folded before): its result becomes a constant of the walk, a parameter
    to the builders. Swin's relative position bias (a table gathered by an index buffer), ViT's
    class token expanded to the batch, masks built from constants: no op of the network."""
    import torch  # heavy; the walk runs only when a network is imported

    operands: list[Any] = []
    torch.fx.node.map_arg((node.args, node.kwargs), operands.append)
    shape_only = aten_name(str(node.target)) in SHAPE_ONLY
    if not (shape_only or all(w.is_param(a) for a in operands)) or aten_name(str(node.target)) in IGNORED:
        return False

    def value(a: Any) -> Any:  # an activation operand of a shape-only op: zeros of its shape (its values are unused)
        return w.params[a.name] if w.is_param(a) else torch.zeros(shape_of(a), dtype=a.meta["val"].dtype)

    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), value)
    try:
        with torch.no_grad():
            value = node.target(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - torch raises many types
        raise w.unsupported(node, f"computing it from its constant operands failed: {str(exc).splitlines()[0][:160]}") \
            from None
    if value is not None:
        w.params[node.name] = value
    return True


def _call(w: Walk, node: Any) -> None:
    if _fold(w, node):
        return
    target = str(node.target)
    op = aten_name(target)  # in-place relu_, add_ read as relu, add
    if target == "<built-in function getitem>" or op == "getitem":
        src, i = node.args
        if src.name in w.items:  # an item of a multi-output op: its kind's builder makes it
            w.items[src.name](w, node, int(i))
            return
        if src.name in w.alias and i == 0:  # max_pool2d_with_indices, native batch norm: value 0
            w.alias[node.name] = w.alias[src.name]
            return
        raise w.unsupported(node, f"item {i} of a multi-output op")
    if op in IGNORED:
        return
    if op in IDENTITY_OPS:
        w.alias[node.name] = w.tensor(node.args[0], node)
        return
    build = BUILDERS.get(op)
    if build is None:
        raise w.unsupported(node, f"the network IR has no kind for it (kinds: {_kinds_text()})")
    build(w, node, op)


def walk(gm: Any, what: str, observers: dict[str, Any] | None = None) -> Network:
    """The network of an fx GraphModule whose parameters are `get_attr` nodes (`ExportedProgram.module()`,
    or the result of `prepare_pt2e`). Observer modules found on the way go to `observers`, keyed by
    the IR tensor they observe (weights as `"<op>.weight"`)."""
    w = Walk(gm, what)
    outputs: list[str] = []
    pending: list[tuple[str, Any]] = []  # (param node name, observer): named once its op is known
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            w.inputs.append((node.name, shape_of(node)))
            w.alias[node.name] = node.name
        elif node.op == "get_attr":
            w.params[node.name] = fetch(gm, node.target)
        elif node.op == "call_module":
            if node.target.startswith(OBSERVER_PREFIX):
                src = node.args[0]
                obs = fetch(gm, node.target)
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
    """(module, example_inputs, name) of a zoo name (seeded random weights), `file.py:factory`, `.pt2` or
    `.onnx` (seeded standard-normal inputs of its static input shapes)."""
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
    if text.lower().endswith(".onnx"):
        return load_onnx(text, seed)
    if ".py:" in text or text.endswith(".py"):
        module, inputs, name = load_factory(text)
        if not hasattr(module, "eval"):
            raise ConfigError(f"network {spec!r}: expected a torch.nn.Module, got {type(module).__name__}")
        return as_eval(module), check_inputs(inputs, f"network {spec!r}"), name
    raise ConfigError(f"unknown network {spec!r}; allowed: a zoo name ({', '.join(ZOO)}), "
                      "path/to/file.py:factory, a torch.export .pt2 file or an .onnx file")


def macs_text(net: Network) -> str:
    return f"{net.macs / 1e9:.3f} GMACs in {len(net.ops)} ops ({', '.join(f'{k} {n}' for k, n in net.counts().items())})"


__all__ = ["aten_name", "as_eval", "walk", "import_network", "export_module", "load_model", "check_inputs", "macs_text"]
