"""`codesign workloads [NAME] [--hw HW]`: the model zoo, or one network's layers with their
multiplicities, MACs and what VTA offloads on a hardware config (and why the rest stays on the CPU).
`--graph` lists every op of the whole network (codesign.network); `--quantize` adds its int8
exponents and shifts and the integer reference's agreement with the float model. `--placement`
places every op on VTA or the board's CPU by predicted cost (codesign.place)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.network import REGISTRY, agreement, import_network, int_outputs, layer_of, load_model, quantize
from codesign.network.kinds import BUILDERS
from codesign.network.reference import op_sqnr
from codesign.place import chooser, plan_network
from codesign.schedule import partition
from codesign.workloads import ZOO, get_workload

EPILOG = """\
examples:
  codesign workloads                                # the zoo: names and what each network is
  codesign workloads mobilenet --hw pynq_1x16       # layers, counts, MACs, offloaded or CPU + reason
  codesign workloads resnet50 --hw pynq_4x8 --json  # the same as JSON
  codesign workloads my_net.py:build --hw pynq_1x16 # your own torch module: build() -> (module, inputs)
  codesign workloads exported.pt2                   # a torch.export.save archive
  codesign workloads model.onnx                     # an ONNX file (pip install 'vta-codesign[onnx]')
  codesign workloads resnet18 --graph               # every op of the whole network: kind, shape, inputs
  codesign workloads my_net.py:build --graph --quantize --calibration x.npy --labels y.npy
                                                    # int8 exponents/shifts, integer vs float agreement
  codesign workloads resnet18 --placement --hw pynq_1x16
                                                    # every op on VTA or the CPU, why, predicted ms
  codesign workloads --kinds                        # the op kinds a network may use, their aten ops
                                                    # and VTA lowering (docs/op-kinds.md)

NAME is a zoo name, path/to/file.py:factory (a function returning (module, example_inputs)) or a
.pt2 or .onnx file; the same forms work for `--workload` of tune, space and sweep. A layer is offloaded when
its template has at least one valid schedule on the hardware (the rules of `codesign space`);
the batch grows to a multiple of the config's BATCH (4 on pynq_4x8).

--graph keeps every op (conv with batch norm folded in, linear, ReLU, residual add, pools,
flatten, concat) with the module's weights; zoo networks get seeded random weights (--seed).
--quantize calibrates int8 power-of-two scales with torchao's PT2E flow on --calibration (an .npy
of shape (N, *input shape without batch); default: the example inputs) and compares the NumPy
integer reference with the float module on those inputs (accuracy too when --labels is given).

--placement costs every op on VTA (its best template schedule, by the timing model over the
schedule space, plus the host passes its layout needs: quantize/pack, space-to-depth or im2col of
a stem, channel padding) and on the board's CPU (the fitted CPU model, int8), and puts it where it
is cheaper; the CPU is --board's (default: the board of the config's TARGET, pynq-z1 for pynq).
Totals: one request through the whole network (the padded batch when BATCH > 1).
"""



def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("workloads", help=summary, description=summary.capitalize() + ".", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", metavar="NAME", help="zoo name, file.py:factory, .pt2 or .onnx (default: list the zoo)")
    p.add_argument("--hw", default="pynq_1x16", help="hardware config name or YAML (default: pynq_1x16)")
    p.add_argument("--graph", action="store_true", help="every op of the whole network (kind, shape, inputs, MACs)")
    p.add_argument("--quantize", action="store_true", help="with --graph: int8 quantization and integer-vs-float agreement")
    p.add_argument("--calibration", metavar="FILE.npy", help="calibration inputs (N, *input shape[1:]); default: example inputs")
    p.add_argument("--labels", metavar="FILE.npy", help="integer class labels (N,) of the calibration inputs")
    p.add_argument("--placement", action="store_true", help="every op on VTA or the CPU by cost, with the reason")
    p.add_argument("--kinds", action="store_true", help="list the op kinds of the network IR (aten ops, VTA lowering)")
    p.add_argument("--board", default=None, help="board whose CPU runs the rest (default: the config's TARGET board)")
    p.add_argument("--seed", type=int, default=0, help="seed of a zoo network's random weights (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _npy(path: str, what: str) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what} file {path!r} does not exist")
    try:
        return np.load(p, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"{what} file {path!r} is not a NumPy .npy array: {str(exc)[:120]}") from None


def graph(spec: str, quantized: bool = False, calibration: str | None = None, labels: str | None = None,
          seed: int = 0) -> dict[str, Any]:
    """Every op of network `spec` (and, when `quantized`, its exponents/shifts and agreement)."""
    if (calibration or labels) and not quantized:
        raise ConfigError("--calibration and --labels go with --quantize")
    module, inputs, name = load_model(spec, seed)
    cal = _npy(calibration, "--calibration") if calibration else None
    lab = _npy(labels, "--labels") if labels else None
    if lab is not None:
        n = cal.shape[0] if cal is not None else int(inputs[0].shape[0])
        if lab.shape != (n,) or lab.dtype.kind not in "iu":
            raise ConfigError(f"--labels file {labels!r}: shape {lab.shape} dtype {lab.dtype}, expected ({n},) integers")
    net = import_network(module, inputs, name)
    doc: dict[str, Any] = {"network": name, "inputs": [[n, list(s)] for n, s in net.inputs], "outputs": list(net.outputs),
                           "counts": net.counts(), "macs": net.macs, "ops": net.rows()}
    for row, op in zip(doc["ops"], net.ops):
        layer, _ = layer_of(net, op)
        row["layer"] = None if layer is None else layer.spec  # the VTA layer form of conv2d / linear
    if quantized:
        import torch  # heavy; only the float model's outputs need it

        q = quantize(module, inputs, cal, name)
        by_name = {r["name"]: r for r in q.rows()}
        for row in doc["ops"]:
            row.update({k: by_name[row["name"]][k] for k in ("frac", "shift", "mul", "weight_frac", "in_shifts")})
        data = cal if cal is not None else inputs[0].numpy()
        with torch.no_grad():
            ref = module(torch.as_tensor(data.astype(np.float32)))
        ref = (ref[0] if isinstance(ref, (tuple, list)) else ref).numpy()
        doc["agreement"] = agreement(ref, int_outputs(q, data)[0], lab)
        sqnr = op_sqnr(q, data)
        for row in doc["ops"]:
            row["sqnr_db"] = sqnr[row["name"]]
        worst = min(sqnr, key=lambda k: sqnr[k])
        doc["agreement"].update(lowest_op_sqnr_db=sqnr[worst], lowest_sqnr_op=worst)
        doc["input_frac"] = {n: q.frac[n] for n, _ in net.inputs}
    return doc


def _print_graph(doc: dict[str, Any]) -> None:
    counts = ", ".join(f"{k} {n}" for k, n in doc["counts"].items())
    print(f"{doc['network']}: {len(doc['ops'])} ops ({counts}), {doc['macs'] / 1e9:.3f} GMACs")
    quant = "agreement" in doc
    width = max(len(r["name"]) for r in doc["ops"])
    kw = max(len(r["kind"]) for r in doc["ops"])
    head = f"{'op'.ljust(width)}  {'kind'.ljust(kw)}  {'shape'.ljust(16)}  {'MACs':>11}"
    print(head + ("  frac  shift  SQNR dB" if quant else "") + "  inputs")
    for r in doc["ops"]:
        shape = "x".join(map(str, r["shape"]))
        extra = f"  {r['frac']:4d}  {r['shift']:5d}  {r['sqnr_db']:7.1f}" if quant else ""
        print(f"{r['name'].ljust(width)}  {r['kind'].ljust(kw)}  {shape.ljust(16)}  {r['macs']:11d}{extra}  "
              f"{', '.join(r['inputs'])}")
    if quant:
        a = doc["agreement"]
        text = f"integer reference vs float model on {a['samples']} input(s): output SQNR {a['sqnr_db']:.1f} dB " \
               f"(lowest op: {a['lowest_op_sqnr_db']:.1f} dB at {a['lowest_sqnr_op']}), max abs error " \
               f"{a['max_abs_error']:.4g} (outputs up to {a['output_range']:.4g})"
        if "top1_agreement" in a:
            text += (f", top-1 agreement {100 * a['top1_agreement']:.1f}% over {a['distinct_classes']} distinct "
                     "float class(es)")
        if "accuracy_float" in a:
            text += f", accuracy float {100 * a['accuracy_float']:.1f}% / integer {100 * a['accuracy_int']:.1f}%"
        print(text)


def _gmacs(macs: int) -> str:
    return f"{macs / 1e9:.3f}"


def describe(name: str, hw_name: str) -> dict[str, Any]:
    """One network on one hardware config: every unique layer with count, MACs, template and
    offload decision (reason when on the CPU), plus totals. MACs are per run of the batch."""
    hw = HwConfig.resolve(hw_name)
    wl = get_workload(name).for_hw(hw)
    vta, cpu = partition(wl, hw)
    reasons = {layer: reason for layer, _, reason in cpu}
    layers = []
    for layer, count in wl.unique_layers():
        layers.append({"layer": layer.name, "spec": layer.spec, "template": layer.template, "count": count,
                       "macs": layer.macs * count, "offloaded": layer not in reasons,
                       "reason": reasons.get(layer)})
    for op, count in wl.cpu_ops:
        layers.append({"layer": op.name, "spec": None, "template": None, "count": count, "macs": op.macs * count,
                       "offloaded": False, "reason": op.reason})
    off = sum(x["macs"] for x in layers if x["offloaded"])
    total = sum(x["macs"] for x in layers)
    return {"workload": wl.name, "description": wl.description, "hw": hw.name, "batch": wl.batch,
            "unique_layers": len(layers), "unique_offloaded": len(vta), "macs_offloaded": off,
            "macs_cpu": total - off, "layers": layers}


def placement(spec: str, hw_name: str, board_name: str | None = None) -> dict[str, Any]:
    """Every op of network `spec` placed on `hw_name` or the board's CPU (timing only: shapes)."""
    hw = HwConfig.resolve(hw_name)
    board = Board.named(board_name) if board_name else Board.for_target(hw.TARGET)
    module, inputs, name = load_model(spec)
    net = import_network(module, inputs, name)
    plan = plan_network(net, hw, board, chooser(hw))
    doc = plan.to_json()
    return doc


def _print_placement(doc: dict[str, Any]) -> None:
    print(f"{doc['network']} on {doc['hw']} + {doc['board']} ({doc['cpu']}, CPU ops in {doc['cpu_dtype']}), "
          f"batch {doc['batch']} per request")
    ops = doc["ops"]
    width = max(len(r["name"]) for r in ops)
    kw = max(len(r["kind"]) for r in ops)
    gw = max(len(r["group"]) for r in ops)
    print(f"{'op'.ljust(width)}  {'kind'.ljust(kw)}  where  {'ms':>8}  {'group'.ljust(gw)}  reason")
    for r in ops:
        print(f"{r['name'].ljust(width)}  {r['kind'].ljust(kw)}  {r['placement'].ljust(5)}  "
              f"{r['predicted_ms']:8.3f}  {r['group'].ljust(gw)}  {r['reason']}")
    print(f"total {doc['latency_ms']:.2f} ms per request: VTA {doc['vta_ms']:.2f} ms ({doc['vta_steps']} steps), "
          f"CPU {doc['cpu_ms']:.2f} ms (of which host layout passes {doc['host_ms']:.2f} ms); "
          f"{doc['throughput_ips']:.2f} images/s")


def kinds_rows() -> list[dict[str, Any]]:
    """One row per registered op kind: what it computes, the aten ops it is read from, its VTA
    lowering (gemm, pool, epilogue or none: CPU only) and whether PT2E observes its output."""
    return [{"kind": k.name, "computes": k.doc, "aten": list(k.aten), "vta": k.vta or "none",
             "observed_scale": k.observe} for k in REGISTRY.values()]


def _print_kinds(rows: list[dict[str, Any]]) -> None:
    width = max(len(r["kind"]) for r in rows)
    print(f"{'kind'.ljust(width)}  {'VTA'.ljust(8)}  aten ops -> what it computes")
    for r in rows:
        print(f"{r['kind'].ljust(width)}  {r['vta'].ljust(8)}  {', '.join(r['aten']) or '-'} -> {r['computes']}")
    listed = {a for r in rows for a in r["aten"]}
    other = [a for a in BUILDERS if a not in listed]
    if other:
        print(f"also read: {', '.join(other)} (folded into another op, or made into one of the kinds above)")
    print(f"\n{len(rows)} kinds. An op of no kind is refused at import in one line naming the op, node and module.")


def run(args: argparse.Namespace) -> int:
    if args.kinds:
        rows = kinds_rows()
        if args.json:
            print(json.dumps(rows, indent=1))
        else:
            _print_kinds(rows)
        return 0
    if not args.name:
        rows = [{"workload": n, "description": d} for n, (_, d) in ZOO.items()]
        if args.json:
            print(json.dumps(rows, indent=1))
        else:
            width = max(len(n) for n in ZOO)
            for r in rows:
                print(f"{r['workload'].ljust(width)}  {r['description']}")
            print("\n`codesign workloads NAME --hw HW` shows a network's layers and what is offloaded.")
        return 0
    if args.placement:
        doc = placement(args.name, args.hw, args.board)
        if args.json:
            print(json.dumps(doc, indent=1))
        else:
            _print_placement(doc)
        return 0
    if args.graph or args.quantize or args.calibration or args.labels:
        doc = graph(args.name, args.quantize, args.calibration, args.labels, args.seed)
        if args.json:
            print(json.dumps(doc, indent=1))
        else:
            _print_graph(doc)
        return 0
    doc = describe(args.name, args.hw)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{doc['workload']}: {doc['description']}")
    print(f"on {doc['hw']} at batch {doc['batch']}: {doc['unique_offloaded']} of {doc['unique_layers']} unique "
          f"layers offloaded; GMACs offloaded {_gmacs(doc['macs_offloaded'])}, on CPU {_gmacs(doc['macs_cpu'])}")
    width = max(len(x["layer"]) for x in doc["layers"])
    print(f"{'layer'.ljust(width)}  count  GMACs   where")
    for x in doc["layers"]:
        where = "VTA " + x["template"] if x["offloaded"] else f"CPU: {x['reason']}"
        print(f"{x['layer'].ljust(width)}  {x['count']:5d}  {_gmacs(x['macs'])}  {where}")
    return 0
