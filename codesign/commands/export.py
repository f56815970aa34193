"""`codesign export`: tuned schedules as an AutoTVM log, or a hardware config as vta_config.json."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from codesign.autotvm import format_record
from codesign.errors import CodesignError, ConfigError
from codesign.fileio import atomic_write_text, check_output_path
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.place import choose_layers, plan_network
from codesign.schedule import ScheduleSpace
from codesign.sweep.network import network_from_json, timing_network, vta_layer_counts
from codesign.tune.records import DEFAULT_FAMILY, best_records, describe_skipped, read_records
from codesign.workloads import parse_layer
from codesign.workloads.layers import Layer

DESCRIPTION = """\
Export results for the TVM VTA flow.

  autotvm RECORDS...  the fastest successful template (AutoTVM-family) record per (layer,
                      hardware config) of tuning records (JSONL from `codesign tune --records`
                      or a sweep) as AutoTVM v0.2 log lines, as the VTA flow writes them (docs/vta.md §8): target
                      `ext_dev -device=vta -keys=cpu -model=<config>`, task conv2d_packed.vta /
                      dense_packed.vta, packed tensor arguments, entity and config index, result
                      [[seconds], 0, all_cost, timestamp]. Load it with
                      `autotvm.apply_history_best("vta.log")`. Schedules of the `vta` family
                      cannot be written as AutoTVM logs: per layer it says how much slower
                      the exported template schedule is than the best record of any family
                      (layers without a template record are listed, not exported), and per
                      request of the network (--workload, or a sweep's own): each layer of
                      the network's plan times its count in one request.
  vta-config HW       the hardware config as VTA's vta_config.json (drop it in 3rdparty/vta-hw/config).
"""

EPILOG = """\
examples:
  codesign export autotvm runs/r18.jsonl --workload resnet18 -o vta.log
  codesign export autotvm runs/sweep/records.jsonl --hw pynq_4x8_i8w8a32_15_16_16_18 -o vta_4x8.log
  codesign export vta-config pynq_4x8 -o vta_config.json
  codesign export vta-config hw_configs/pynq_1x16.yaml          # prints the JSON
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("export", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = p.add_subparsers(dest="kind", metavar="KIND")
    a = kinds.add_parser("autotvm", help="best record per (layer, hw) as AutoTVM v0.2 log lines",
                         description="Best tuning record per (layer, hardware config) as an AutoTVM v0.2 log.",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("records", nargs="+", metavar="RECORDS", help="tuning records JSONL file(s)")
    a.add_argument("-o", "--output", metavar="FILE", help="log file to write (default: stdout)")
    a.add_argument("--hw", metavar="NAME", help="only records of this hardware config")
    a.add_argument("--workload", metavar="NET", default=None,
                   help="network the records tune, for the per-request total (zoo name, file.py:factory, .pt2, "
                        ".onnx; default: the sweep's, from sweep.json beside a sweep's records.jsonl)")
    a.add_argument("--json", action="store_true", help="print a JSON summary instead of a text one")
    a.set_defaults(func=run_autotvm)
    v = kinds.add_parser("vta-config", help="a hardware config as vta_config.json",
                         description="Write a hardware config as VTA's vta_config.json.",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("hw", metavar="HW", help="config name, alias (pynq_1x16, pynq_4x8) or YAML/JSON path")
    v.add_argument("-o", "--output", metavar="FILE", help="JSON file to write (default: stdout)")
    v.add_argument("--json", action="store_true", help="print a JSON summary (with -o)")
    v.set_defaults(func=run_vta_config)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def export_autotvm_lines(records: list[Any], hw_filter: str | None = None) -> list[tuple[Any, str]]:
    """[(best template record, AutoTVM line)] per (layer, hw), in first-seen order."""
    out = []
    hw_name = HwConfig.resolve(hw_filter).name if hw_filter else None
    best = {key: rec for key, rec in best_records(records, family=DEFAULT_FAMILY).items()
            if hw_name in (None, key[1])}
    # AutoTVM keys a log on `-model=` (VTA's TARGET_BITSTREAM), which carries no clock or bus width:
    # two of our configs that differ only there would collide, and the TVM flow would mix their
    # schedules. Make the user pick one.
    by_model: dict[str, set[str]] = {}
    for _layer, hw in best:
        by_model.setdefault(HwConfig.resolve(hw).vta_model, set()).add(hw)
    for model, names in by_model.items():
        if len(names) > 1:
            raise ConfigError(
                f"records hold {len(names)} configs that share the AutoTVM model {model} (they differ "
                f"only in clock or AXI width: {', '.join(sorted(names))}); export one with --hw NAME")
    for (_layer, hw), rec in best.items():
        hwc = HwConfig.resolve(hw)
        layer = parse_layer(rec.layer_spec)
        config = ScheduleSpace(layer, hwc).from_knobs(rec.knobs)
        out.append((rec, format_record(layer, hwc, config, rec.seconds, timestamp=rec.timestamp)))
    return out


def slowdowns(records: list[Any], exported: list[Any], hw_filter: str | None = None) -> dict[str, Any]:
    """How much slower each exported template schedule is than the best record of any family of
    its (layer, hw); plus the layers that have records but no template one (not exported). No
    total here: the layers are alternatives and repeats of one network (`per_request` sums them)."""
    hw_name = HwConfig.resolve(hw_filter).name if hw_filter else None
    overall = {key: rec for key, rec in best_records(records).items() if hw_name in (None, key[1])}
    rows = []
    for rec in exported:
        top = overall[(rec.layer, rec.hw)]
        rows.append({"layer": rec.layer, "hw": rec.hw, "index": rec.index, "seconds": rec.seconds,
                     "best_seconds": top.seconds, "best_family": top.family,
                     "slowdown": rec.seconds / top.seconds})
    done = {(r["layer"], r["hw"]) for r in rows}
    missing = [{"layer": k[0], "hw": k[1], "best_seconds": r.seconds, "best_family": r.family}
               for k, r in overall.items() if k not in done]
    return {"entries": rows, "missing": missing}


def per_request(net: Any, entries: list[dict[str, Any]], exported: list[Any]) -> list[dict[str, Any]]:
    """Per exported hw: one request through `net` as its network plan runs it with the exported
    template schedules (`codesign.place.plan_network`; a layer without a template record is not
    offered to VTA). Each VTA layer of that plan counts once per occurrence in the request, in the
    one form the plan uses (the stem's rewritten forms are alternatives, not a sum); its template
    seconds and the best of any family are the records' own times of that layer."""

    out = []
    for hw_name in dict.fromkeys(rec.hw for rec in exported):
        hwc = HwConfig.resolve(hw_name)
        board = Board.for_target(hwc.TARGET)
        tpl = {rec.layer: rec for rec in exported if rec.hw == hw_name}
        best = {e["layer"]: e["best_seconds"] for e in entries if e["hw"] == hw_name}

        def choose(layer: Layer, tpl: dict[str, Any] = tpl, hwc: HwConfig = hwc) -> tuple[Any, float]:
            rec = tpl.get(layer.name)
            if rec is None:
                raise CodesignError(f"no template record of {layer.name}")
            return ScheduleSpace(layer, hwc).from_knobs(rec.knobs), float(rec.seconds)

        counts = vta_layer_counts(plan_network(net, hwc, board, choose))
        layers = [{"layer": layer.name, "count": n, "seconds": tpl[layer.name].seconds,
                   "best_seconds": best[layer.name]} for layer, n in counts.items()]
        t = sum(x["count"] * x["seconds"] for x in layers)
        b = sum(x["count"] * x["best_seconds"] for x in layers)
        unrecorded = [layer.name for layer in choose_layers(net, hwc, board) if layer.name not in tpl]
        out.append({"network": net.name, "hw": hw_name, "layers": layers, "template_seconds": t,
                    "best_seconds": b, "slowdown": t / b if b else None, "unrecorded": unrecorded})
    return out


def request_network(paths: list[str], workload: str | None) -> Any:
    """The network a per-request total is about: `--workload`, else the one a sweep kept in the
    sweep.json beside its records.jsonl; None when neither says."""

    if workload:
        net, why = timing_network(workload)
        if net is None:
            raise ConfigError(f"--workload {workload}: {why}")
        return net
    dirs = {Path(p).resolve().parent for p in paths}
    options = next(iter(dirs)) / "sweep.json" if len(dirs) == 1 else None
    if options is None or not options.is_file():
        return None
    try:
        doc = json.loads(options.read_text()).get("network")
    except (OSError, ValueError, AttributeError):
        return None
    return network_from_json(doc, f"{options} network") if isinstance(doc, dict) else None


def read_all_records(paths: list[str]) -> tuple[list[Any], list[str]]:
    """Records of every file plus one notice per file with skipped lines; a file with no usable
    record at all is refused (a wrong file is a mistake, not an empty result)."""
    records: list[Any] = []
    notices: list[str] = []
    for path in paths:
        recs, skipped = read_records(path)
        if not recs:
            what = (f"{len(skipped)} lines, none a tuning record (line {skipped[0].line}: {skipped[0].reason})"
                    if skipped else "the file is empty")
            raise ConfigError(f"{path}: no tuning records: {what}; expected JSONL lines from "
                              "`codesign tune --records` or a sweep's records.jsonl")
        if skipped:
            notices.append(describe_skipped(path, skipped, len(recs) + len(skipped)))
        records += recs
    return records, notices


def run_autotvm(args: argparse.Namespace) -> int:
    if args.output:
        check_output_path(args.output, "log")
    records, notices = read_all_records(args.records)
    for notice in notices:
        print(f"codesign export: {notice}", file=sys.stderr)
    pairs = export_autotvm_lines(records, args.hw)
    gap = slowdowns(records, [r for r, _ in pairs], args.hw)
    net = request_network(args.records, args.workload) if pairs else None
    gap["per_request"] = per_request(net, gap["entries"], [r for r, _ in pairs]) if net is not None else None
    if not pairs:
        other = f" ({len(gap['missing'])} layer(s) have only records of another schedule family, which AutoTVM " \
                "logs cannot hold)" if gap["missing"] else ""
        raise ConfigError("no successful template (AutoTVM-family) records" + (f" for --hw {args.hw}" if args.hw else "")
                          + other)
    text = "".join(line + "\n" for _rec, line in pairs)
    if args.output:
        atomic_write_text(args.output, text)
    elif not args.json:
        sys.stdout.write(text)
        _print_gap(gap, sys.stderr)  # the log is on stdout
        return 0
    if args.json:
        print(json.dumps({"output": args.output, "records_read": len(records), "lines": len(pairs),
                          "skipped": notices, **gap}))
    else:
        print(f"wrote {len(pairs)} AutoTVM records (best of {len(records)}) to {args.output}")
        _print_gap(gap, sys.stdout)
    return 0


def _print_gap(gap: dict[str, Any], out: Any) -> None:
    """Per layer: the exported template schedule vs the best of any family; then per request of
    the network (each layer of its plan times its count), or why there is no total."""
    for e in gap["entries"]:
        print(f"  {e['layer']} on {e['hw']}: template {e['seconds'] * 1e3:.4f} ms, best {e['best_seconds'] * 1e3:.4f} ms "
              f"({e['best_family']}): {e['slowdown']:.3f}x", file=out)
    for m in gap["missing"]:
        print(f"  {m['layer']} on {m['hw']}: no template record, not exported (best {m['best_seconds'] * 1e3:.4f} ms, "
              f"{m['best_family']})", file=out)
    if gap["per_request"] is None:
        print("no per-request total: the records do not say which network they tune (pass --workload NET)",
              file=out)
        return
    for r in gap["per_request"]:
        if not r["layers"]:
            print(f"no per-request total on {r['hw']}: no exported layer runs on VTA in {r['network']}'s plan",
                  file=out)
            continue
        n = sum(x["count"] for x in r["layers"])
        print(f"per request of {r['network']} on {r['hw']} ({n} VTA layer runs of {len(r['layers'])} layers, "
              f"each times its count): template {r['template_seconds'] * 1e3:.4f} ms vs best "
              f"{r['best_seconds'] * 1e3:.4f} ms of any family: {r['slowdown']:.3f}x slower", file=out)
        if r["unrecorded"]:
            print(f"  not counted: {len(r['unrecorded'])} layer(s) of its plan have no template record "
                  f"({', '.join(r['unrecorded'][:3])}{', ...' if len(r['unrecorded']) > 3 else ''})", file=out)


def run_vta_config(args: argparse.Namespace) -> int:
    if args.output:
        check_output_path(args.output, "vta_config.json")
    hw = HwConfig.resolve(args.hw)
    text = json.dumps(hw.to_vta_json(), indent=2) + "\n"
    if not args.output:
        sys.stdout.write(text)
        return 0
    atomic_write_text(args.output, text)
    if args.json:
        print(json.dumps({"output": args.output, "hw": hw.name, "config": hw.to_vta_json()}))
    else:
        print(f"wrote {hw.name} to {args.output}")
    return 0
