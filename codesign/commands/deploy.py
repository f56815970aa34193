"""`codesign deploy HW (--board ADDR | --tracker H:P --key K)`: program a board with the config's
catalog bitstream and smoke-test it against NumPy."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from codesign.deploy import connect, deploy
from codesign.hw.config import HwConfig

DESCRIPTION = """\
Find the catalog bitstream of HW for the board's type, download it into VTA's cache (sha256 and
size checked), upload it (the board checks sha256 and FPGA part again) and program it, then run a
small dense and conv2d layer compiled for HW on the board and compare them with NumPy bit for bit.
Prints the device times and "ok", or which check failed (exit status 1).
"""

EPILOG = """\
examples:
  codesign deploy pynq_1x16 --board 192.168.2.99:9091
  codesign deploy pynq_1x16 --tracker 127.0.0.1:9190 --key pynq
  codesign board serve --emulate pynq_1x16 --port 9091 &      # an emulated board for a dry run
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("deploy", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("hw", metavar="HW", help="hardware config (name or alias)")
    p.add_argument("--board", metavar="HOST:PORT", default=None, help="a board server")
    p.add_argument("--tracker", metavar="HOST:PORT", default=None, help="a tvm RPC tracker")
    p.add_argument("--key", default=None, help="board type registered on the tracker (e.g. pynq)")
    p.add_argument("--catalog", metavar="FILE", default=None, help="your bitstream catalog")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    hw = HwConfig.resolve(args.hw)
    with connect(args.board, args.tracker, args.key) as client:
        result = deploy(client, hw, Path(args.catalog) if args.catalog else None,
                        on_step=None if args.json else (lambda s: print(s, file=sys.stderr)))
    if args.json:
        print(json.dumps(result))
        return 0 if result["ok"] else 1
    for r in result["smoke"]:
        status = "ok" if r["ok"] else f"FAILED: {r['mismatches']} output values differ from NumPy"
        print(f"  {r['layer']:<34} schedule {r['index']:>5}  device {r['device_s'] * 1e3:8.3f} ms  "
              f"call {r['call_s'] * 1e3:8.3f} ms  {status}")
    print("ok" if result["ok"] else "smoke test FAILED")
    return 0 if result["ok"] else 1
