"""`codesign deploy HW (--board ADDR | --tracker H:P --key K)`: program a board with the config's
catalog bitstream and smoke-test it against NumPy. `codesign deploy --workload NET --hw HW -o
NET.vtanet`: write a network's bundle for that bitstream (docs/board.md, "The bundle")."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

from codesign.bitstream import catalog
from codesign.deploy import connect, deploy
from codesign.errors import ConfigError
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.netrun import bundle, load_schedule_records
from codesign.netrun import network as whole

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
  codesign deploy --workload resnet18 --hw pynq_1x16 -o resnet18.vtanet   # a network's bundle
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("deploy", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("hw", metavar="HW", nargs="?", default=None, help="hardware config (name or alias)")
    p.add_argument("--hw", dest="hw_opt", metavar="HW", default=None, help="hardware config (same as HW)")
    p.add_argument("--workload", default=None, help="with -o: the network to bundle (zoo name, file.py:factory, .pt2)")
    p.add_argument("-o", "--output", metavar="NET.vtanet", default=None, help="write the network's bundle here")
    p.add_argument("--records", nargs="*", default=[], metavar="R", help="with -o: records with schedules")
    p.add_argument("--calibration", metavar="FILE.npy", default=None, help="with -o: calibration inputs")
    p.add_argument("--bitstream", metavar="FILE.bit", default=None,
                   help="with -o: the bitstream the bundle is for (default: the catalog's for HW and --board-type)")
    p.add_argument("--board-type", default=None, help="with -o: board of the catalog bitstream (default: HW's target)")
    p.add_argument("--board", metavar="HOST:PORT", default=None, help="a board server")
    p.add_argument("--tracker", metavar="HOST:PORT", default=None, help="a tvm RPC tracker")
    p.add_argument("--key", default=None, help="board type registered on the tracker (e.g. pynq)")
    p.add_argument("--catalog", metavar="FILE", default=None, help="your bitstream catalog")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.hw and args.hw_opt and HwConfig.resolve(args.hw).name != HwConfig.resolve(args.hw_opt).name:
        raise ConfigError(f"HW {args.hw} and --hw {args.hw_opt} differ; give one")
    args.hw = args.hw or args.hw_opt
    if not args.hw:
        raise ConfigError("say which hardware config: codesign deploy HW (or --hw HW)")
    if args.output or args.workload:
        return run_bundle(args)
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


def bitstream_sha256(hw: HwConfig, bitstream: str | None, board: str | None, user_catalog: str | None) -> str:
    """The sha256 of `--bitstream FILE`, else of the catalog's bitstream of `hw` on `board`."""
    if bitstream:
        try:
            return hashlib.sha256(Path(bitstream).read_bytes()).hexdigest()
        except OSError as exc:
            raise ConfigError(f"--bitstream {bitstream}: cannot read ({exc.strerror})") from None
    name = board or Board.for_target(hw.TARGET).name
    hits = catalog.find(catalog.load(Path(user_catalog) if user_catalog else None), hw, name)
    if not hits:
        raise ConfigError(f"no bitstream for {hw.name} on {name} in the catalog: pass --bitstream FILE.bit, or "
                          f"build one: codesign bitstream build {hw.name} --board {name} --vta-hw PATH")
    return hits[0].sha256


def run_bundle(args: argparse.Namespace) -> int:
    if not (args.output and args.workload):
        raise ConfigError("a network's bundle needs both --workload NET and -o NET.vtanet")
    if not str(args.output).endswith(".vtanet"):
        raise ConfigError(f"-o {args.output}: a bundle's file name ends in .vtanet")
    if args.board or args.tracker:
        raise ConfigError("-o writes a bundle and talks to no board; load it with codesign run --board, or "
                          "codesign.board.Network on the board")
    hw = HwConfig.resolve(args.hw)
    sha = bitstream_sha256(hw, args.bitstream, args.board_type, args.catalog)
    records = load_schedule_records(args.records) if args.records else []
    prep = whole.prepare_spec(args.workload, hw, calibration_file=args.calibration, records=records)
    start = time.perf_counter()
    nbytes = bundle.write(prep, args.output, sha, args.board_type)
    seconds = time.perf_counter() - start
    steps = prep.plan.steps
    result = {"bundle": str(args.output), "bytes": nbytes, "network": prep.name, "hw": hw.name,
              "bitstream_sha256": sha, "steps": len(steps), "vta_steps": sum(s.placement == "vta" for s in steps),
              "predicted_ms": prep.plan.latency_s * 1e3, "write_s": seconds}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"wrote {args.output}: {nbytes} bytes, {prep.name} on {hw.name} ({result['vta_steps']} of "
              f"{len(steps)} steps on VTA, {result['predicted_ms']:.3f} ms predicted), bitstream sha256 {sha[:16]}..")
    return 0
