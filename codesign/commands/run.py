"""`codesign run --workload NET --hw HW (--simulate | --board ...)`: a network's offloaded layers
with their best schedules, bit-exact against NumPy, per-layer and total latency."""

from __future__ import annotations

import argparse
import json
import sys

from tqdm import tqdm

from codesign.calibrate.profiles import resolve_params
from codesign.commands.replay import _clean
from codesign.deploy import board_executor, check_loaded, connect
from codesign.fileio import check_output_path
from codesign.hw.config import HwConfig
from codesign.netrun import load_schedule_records, plot, run_network

DESCRIPTION = """\
Compile every layer the network offloads to VTA with its best schedule -- from --records (our
records.jsonl or an AutoTVM log), else the tophub schedule VTA itself applies, else AutoTVM's
fallback (first valid config) -- run them in network order on int8 data (a layer's input is the
previous output where the shapes match), check every output bit for bit against the NumPy
reference, and print per-layer and total latency: predicted by the timing model next to measured
(--simulate: the functional simulator; --board/--tracker: a board deployed with HW). Layers repeated in the network count as often as they
occur. Exit status 1 if any output differs from the reference.
"""

EPILOG = """\
examples:
  codesign run --workload resnet18 --hw pynq_1x16 --simulate
  codesign run --workload resnet18 --hw pynq_1x16 --simulate --records runs/sweep/records.jsonl
  codesign run --workload resnet18 --hw pynq_4x8 --simulate --profile tophub-2019 --plot run.png --json
  codesign run --workload resnet18 --hw pynq_1x16 --board 192.168.2.99:9091   # after codesign deploy
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("run", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default="resnet18", help="network (default: %(default)s)")
    p.add_argument("--hw", required=True, help="hardware config (name, alias or YAML)")
    p.add_argument("--records", nargs="*", default=[], metavar="R", help="records.jsonl / AutoTVM logs with schedules")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--simulate", action="store_true", help="run on the functional simulator")
    where.add_argument("--board", metavar="HOST:PORT", default=None, help="run on this board (deployed with HW)")
    where.add_argument("--tracker", metavar="HOST:PORT", default=None, help="run on a board from this tracker")
    p.add_argument("--key", default=None, help="with --tracker: the board type (e.g. pynq)")
    p.add_argument("--profile", default=None, help="calibration profile for the predicted times")
    p.add_argument("--params", default=None, help="timing parameters JSON (default: shipped)")
    p.add_argument("--plot", metavar="PNG", default=None, help="bar chart of predicted vs measured per layer")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.plot:
        check_output_path(args.plot, "PNG")  # before the run, not after it
    hw = HwConfig.resolve(args.hw)
    params, source = resolve_params(args.profile, args.params)
    records = load_schedule_records(args.records) if args.records else []
    bar = tqdm(desc="layers", unit="layer", file=sys.stderr, leave=False) if not args.json and sys.stderr.isatty() else None
    on_layer = (lambda _r: bar.update(1)) if bar is not None else None
    if args.simulate:
        result = run_network(args.workload, hw, records, params, on_layer=on_layer)
        result["measured_by"] = "functional simulator"
    else:
        with connect(args.board, args.tracker, args.key) as client:
            info = check_loaded(client, hw)
            result = run_network(args.workload, hw, records, params, executor=board_executor(client),
                                 on_layer=on_layer)
        result["measured_by"] = f"board {client.name} ({info.get('board')}{', emulated' if info.get('emulated') else ''})"
    if bar is not None:
        bar.close()
    result["params"] = source
    if args.plot:
        plot(result, args.plot, "simulated" if args.simulate else "measured")
    if args.json:
        print(json.dumps(_clean(result)))
        return 0 if result["all_bit_exact"] else 1
    print(f"{result['workload']} (batch {result['batch']}) on {result['hw']}; measured by the {result['measured_by']}; "
          f"predicted with {source}")
    print(f"{'#':>2} {'layer':<34} {'x':>2} {'schedule':<12} {'input':<7} {'pred_dev':>9} {'meas_dev':>9} "
          f"{'pred_call':>9} {'meas_call':>9} {'record':>9} {'output':<10}   (ms per call)")
    for r in result["layers"]:
        rec = "-" if r["record_s"] is None else f"{r['record_s'] * 1e3:9.3f}"
        call = "-" if r["measured_call_s"] is None else f"{r['measured_call_s'] * 1e3:9.3f}"
        out = "bit-exact" if r["bit_exact"] else f"{r['mismatches']} DIFFER"
        print(f"{r['position']:>2} {r['layer']:<34} {r['count']:>2} {r['schedule_source'] + ' ' + str(r['index']):<12} "
              f"{r['input_source']:<7} {r['predicted_device_s'] * 1e3:9.3f} {r['measured_device_s'] * 1e3:9.3f} "
              f"{r['predicted_s'] * 1e3:9.3f} {call:>9} {rec:>9} {out:<10}")
    for c in result["cpu_layers"]:
        print(f"   {c['layer']} x{c['count']}: on the CPU ({c['reason']})")
    print(f"total device time (offloaded layers x count): predicted {result['total_predicted_device_s'] * 1e3:.3f} ms, "
          f"measured {result['total_measured_device_s'] * 1e3:.3f} ms; outputs "
          f"{'all bit-exact' if result['all_bit_exact'] else 'NOT all bit-exact'}")
    meas_call = result["total_measured_call_s"]
    print(f"total per call incl. host: predicted {result['total_predicted_call_s'] * 1e3:.3f} ms"
          + (f", measured {meas_call * 1e3:.3f} ms" if meas_call is not None else " (no board: nothing measured)"))
    if result["total_record_s"] is not None:
        print(f"the records' own seconds sum to {result['total_record_s'] * 1e3:.3f} ms "
              "(for tophub records: measured on a PYNQ-Z1 board in 2019)")
    if args.plot:
        print(f"wrote {args.plot}")
    return 0 if result["all_bit_exact"] else 1
