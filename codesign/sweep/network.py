"""The whole network a sweep costs: its graph (`codesign.network.Network`, shapes only) taken once
from the `--workload` by the driver and kept in sweep.json, and a trial's result read from its
network plan (`codesign.place.plan_network`: every op on VTA or the CPU, host passes included).

A workload whose graph the network IR cannot represent (an op no kind of
`codesign.network.kinds` reads) keeps the layers-only sweep: `latency_ms` then counts the layers VTA
offloads, and the result says so (`scope`, `scope_note`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from codesign.errors import ConfigError
from codesign.network.graph import Network, Op
from codesign.network.importer import as_eval, check_inputs, import_network
from codesign.place import VTA, Plan
from codesign.place.fusion import GEMM_KINDS
from codesign.workloads.layers import Layer
from codesign.workloads.onnx_import import load_onnx
from codesign.workloads.torch_import import load_exported, load_factory, zoo_key
from codesign.workloads.zoo import ZOO


def timing_network(spec: str) -> tuple[Network | None, str | None]:
    """(the graph of a `--workload` spec without weights, None) or (None, why it has none). A zoo
    network is built on the meta device (shapes only: VGG-16's weights would take 0.5 GB)."""
    import torch  # heavy; the driver imports a network once, when a sweep starts

    text = str(spec).strip()
    try:
        key = zoo_key(text)
        if key is not None:
            with torch.device("meta"):
                module, inputs = ZOO[key][0]()
            net = import_network(module, inputs, key)
        elif text.endswith(".pt2"):
            ep = load_exported(text)
            example = getattr(ep, "example_inputs", None)
            net = import_network(ep.module(), check_inputs(example[0] if example else None, text),
                                 text.rsplit("/", 1)[-1][:-4])
        elif text.lower().endswith(".onnx"):
            module, inputs, name = load_onnx(text)
            net = import_network(module, inputs, name)
        else:
            module, inputs, name = load_factory(text)
            net = import_network(as_eval(module), check_inputs(inputs, text), name)
    except ConfigError as exc:
        return None, f"the network graph has an op the whole-network costing cannot represent ({exc})"
    return shapes_only(net), None


def shapes_only(net: Network) -> Network:
    """`net` without weights (a trial costs shapes; the graph travels to every trial)."""
    return dataclasses.replace(net, ops=tuple(dataclasses.replace(op, weight=None, bias=None) for op in net.ops))


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def network_to_json(net: Network) -> dict[str, Any]:
    """The graph as JSON (sweep.json `network`): inputs, ops (`Network.rows`), outputs."""
    return {"name": net.name, "inputs": [[n, list(s)] for n, s in net.inputs],
            "ops": [{**row, "module": op.source} for row, op in zip(net.rows(), net.ops)],
            "outputs": list(net.outputs)}


def network_from_json(doc: dict[str, Any], where: str = "sweep.json network") -> Network:
    """`network_to_json` read back (shapes only); one line for a malformed document."""
    try:
        ops = tuple(Op(name=str(o["name"]), kind=str(o["kind"]), inputs=tuple(o["inputs"]), shape=tuple(o["shape"]),
                       attrs={k: _tuples(v) for k, v in o["attrs"].items()}, source=str(o.get("module", "")))
                    for o in doc["ops"])
        return Network(str(doc["name"]), tuple((str(n), tuple(s)) for n, s in doc["inputs"]), ops,
                       tuple(doc["outputs"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: malformed network graph ({type(exc).__name__}: {exc})") from None


def step_rows(plan: Plan) -> list[dict[str, Any]]:
    """Every step of one request, compact (trials.jsonl, pareto.json points, `report`, layers.png):
    name, kind, placement (vta/cpu), ms, the VTA layer, the host rewrite."""
    rows = []
    for s in plan.steps:
        row: dict[str, Any] = {"name": s.name, "kind": s.kind, "placement": s.placement, "ms": s.predicted_s * 1e3}
        if s.placement == VTA and s.layer is not None:
            row["layer"] = s.layer.name
        if s.transform:
            row["transform"] = s.transform
        rows.append(row)
    return rows


def vta_layer_counts(plan: Plan) -> dict[Layer, int]:
    """The layers the plan runs on VTA with their multiplicity (in plan order; a matmul step's
    layer once per batch entry: `Rewrite.calls`)."""
    counts: dict[Layer, int] = {}
    for s in plan.steps:
        if s.placement == VTA and s.layer is not None:
            counts[s.layer] = counts.get(s.layer, 0) + (s.rewrite.calls if s.rewrite is not None else 1)
    return counts


def cpu_gemms(plan: Plan) -> list[dict[str, Any]]:
    """Convs/denses the plan leaves on the CPU, with the reason (the result's `unsupported`)."""
    return [{"layer": s.layer.name if s.layer is not None else s.name, "count": 1, "reason": s.reason}
            for s in plan.steps if s.placement != VTA and s.kind.split("+")[0] in GEMM_KINDS]


__all__ = ["cpu_gemms", "network_from_json", "network_to_json", "shapes_only", "step_rows", "timing_network",
           "vta_layer_counts"]
