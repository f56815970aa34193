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
from codesign.tune.records import best_records, describe_skipped, read_records
from codesign.workloads import parse_layer

DESCRIPTION = """\
Export results for the TVM VTA flow.

  autotvm RECORDS...  the fastest successful record per (layer, hardware config) of tuning
                      records (JSONL from `codesign tune --records` or a sweep) as AutoTVM v0.2
                      log lines, exactly as the VTA flow writes them (vta-docs/vta.md §8): target
                      `ext_dev -device=vta -keys=cpu -model=<config>`, task conv2d_packed.vta /
                      dense_packed.vta, packed tensor arguments, entity and config index, result
                      [[seconds], 0, all_cost, timestamp]. Load it with
                      `autotvm.apply_history_best("vta.log")`.
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
    """[(best record, AutoTVM line)] per (layer, hw), in first-seen order."""
    out = []
    hw_name = HwConfig.resolve(hw_filter).name if hw_filter else None
    best = {key: rec for key, rec in best_records(records).items() if hw_name in (None, key[1])}
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
    if not pairs:
        raise ConfigError("no successful records" + (f" for --hw {args.hw}" if args.hw else ""))
    text = "".join(line + "\n" for _rec, line in pairs)
    if args.output:
        atomic_write_text(args.output, text)
    elif not args.json:
        sys.stdout.write(text)
        return 0
    if args.json:
        print(json.dumps({"output": args.output, "records_read": len(records), "lines": len(pairs),
                          "skipped": notices,
                          "entries": [{"layer": r.layer, "hw": r.hw, "index": r.index, "seconds": r.seconds}
                                      for r, _ in pairs]}))
    else:
        print(f"wrote {len(pairs)} AutoTVM records (best of {len(records)}) to {args.output}")
    return 0


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
