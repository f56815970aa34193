"""`codesign export`: tuned schedules as an AutoTVM log, or a hardware config as vta_config.json."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from codesign.autotvm import format_record
from codesign.errors import ConfigError
from codesign.fileio import atomic_write_text, check_output_path
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace
from codesign.tune.records import DEFAULT_FAMILY, best_records, describe_skipped, read_records
from codesign.workloads import parse_layer

DESCRIPTION = """\
Export results for the TVM VTA flow.

  autotvm RECORDS...  the fastest successful template (AutoTVM-family) record per (layer,
                      hardware config) of tuning records (JSONL from `codesign tune --records`
                      or a sweep) as AutoTVM v0.2 log lines, exactly as the VTA flow writes them (vta-docs/vta.md §8): target
                      `ext_dev -device=vta -keys=cpu -model=<config>`, task conv2d_packed.vta /
                      dense_packed.vta, packed tensor arguments, entity and config index, result
                      [[seconds], 0, all_cost, timestamp]. Load it with
                      `autotvm.apply_history_best("vta.log")`. Schedules of the `vta` family
                      cannot be written as AutoTVM logs: per layer and in total it says how
                      much slower the exported template schedule is than the best record of
                      any family (layers without a template record are listed, not exported).
  vta-config HW       the hardware config as VTA's vta_config.json (drop it in 3rdparty/vta-hw/config).
"""

EPILOG = """\
examples:
  codesign export autotvm runs/r18.jsonl -o vta.log
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
    its (layer, hw), and in total (the sum over the layers, each once); plus the layers that
    have records but no template one (not exported)."""
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
    total_t = sum(r["seconds"] for r in rows)
    total_b = sum(r["best_seconds"] for r in rows)
    return {"entries": rows, "missing": missing, "template_seconds": total_t, "best_seconds": total_b,
            "slowdown": total_t / total_b if total_b else None}


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
    """Per layer and in total: the exported template schedule vs the best of any family."""
    for e in gap["entries"]:
        print(f"  {e['layer']} on {e['hw']}: template {e['seconds'] * 1e3:.4f} ms, best {e['best_seconds'] * 1e3:.4f} ms "
              f"({e['best_family']}): {e['slowdown']:.3f}x", file=out)
    for m in gap["missing"]:
        print(f"  {m['layer']} on {m['hw']}: no template record, not exported (best {m['best_seconds'] * 1e3:.4f} ms, "
              f"{m['best_family']})", file=out)
    print(f"total of the exported layers: template {gap['template_seconds'] * 1e3:.4f} ms vs best "
          f"{gap['best_seconds'] * 1e3:.4f} ms of any family: {gap['slowdown']:.3f}x slower", file=out)


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
