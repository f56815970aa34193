"""`codesign bitstream list|add|fetch|build`: the catalog of VTA bitstreams."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tqdm import tqdm

from codesign.bitstream import bitfile, build, catalog, fetch, vivado
from codesign.errors import ConfigError
from codesign.hw.board import Board
from codesign.hw.config import HwConfig

DESCRIPTION = """\
The bitstream catalog: which VTA hardware configs have a bitstream, for which board, where it
comes from, and what it is (sha256, size, .bit header, utilization and timing when known). The
shipped catalog (bitstreams/catalog.yaml) lists the three published PYNQ bitstreams; your own
builds go to your catalog ($CODESIGN_CATALOG, default ~/.local/share/vta-codesign/catalog.yaml).
"""

EPILOG = """\
examples:
  codesign bitstream list
  codesign bitstream fetch pynq_1x16 --board pynq-z1           # into ~/.vta_cache, sha256 checked
  codesign bitstream build pynq_1x16 --board pynq-z1 --vta-hw ~/tvm/3rdparty/vta-hw
  codesign bitstream add vta.bit --hw pynq_1x16 --board pynq-z1 \\
      --utilization utilization.rpt --timing timing_summary.rpt
  codesign calibrate resources                                  # fit the resource model to builds
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("bitstream", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--catalog", metavar="FILE", default=None,
                   help="your catalog file (default: $CODESIGN_CATALOG or ~/.local/share/vta-codesign/catalog.yaml)")
    bs = p.add_subparsers(dest="bitstream_command", metavar="ACTION")

    q = bs.add_parser("list", help="list catalog entries")
    q.add_argument("--board", default=None, help="only this board")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=run_list)

    q = bs.add_parser("add", help="record a local .bit (header parsed, sha256 stored) with its reports",
                      description="Parse the .bit header, check its part against the board, store sha256, "
                                  "size and the Vivado utilization/timing numbers in your catalog.")
    q.add_argument("bit", metavar="FILE.bit")
    q.add_argument("--hw", required=True, help="hardware config (name, alias or YAML)")
    q.add_argument("--board", required=True, help="board name (hw_configs/boards/)")
    q.add_argument("--utilization", metavar="RPT", default=None, help="Vivado report_utilization text file")
    q.add_argument("--timing", metavar="RPT", default=None, help="Vivado report_timing_summary text file")
    q.add_argument("--url", default=None, help="where others can download it (default: the local file)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_add)

    q = bs.add_parser("fetch", help="download a catalog bitstream into VTA's cache and verify it")
    q.add_argument("hw", metavar="HW", help="hardware config (name or alias)")
    q.add_argument("--board", required=True)
    q.add_argument("--hw-ver", default=None, help="VTA HW_VER (default: the config's, else the newest)")
    q.add_argument("--force", action="store_true", help="download even if a verified copy is cached")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_fetch)

    q = bs.add_parser("build", help="write vta_config.json and run (or print) the HLS + Vivado flow",
                      description=build.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("hw", metavar="HW")
    q.add_argument("--board", required=True)
    q.add_argument("--vta-hw", required=True, metavar="PATH", help="tvm-vta hardware checkout (has config/ "
                   "and hardware/xilinx/)")
    q.add_argument("-o", "--out", default=None, help="output folder (default: build/<config name>)")
    q.add_argument("--dry-run", action="store_true", help="only print the commands, even if the tools exist")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_build)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _user(args: argparse.Namespace) -> Path | None:
    return Path(args.catalog) if args.catalog else None


def _fmt_util(u: dict | None) -> str:
    return "-" if not u else f"{u['lut']} LUT {u['ff']} FF {u['bram18']} BRAM18 {u['dsp']} DSP"


def run_list(args: argparse.Namespace) -> int:
    entries = [e for e in catalog.load(_user(args)) if args.board in (None, e.board)]
    if args.json:
        print(json.dumps({"bitstreams": [asdict(e) for e in entries]}))
        return 0
    print(f"{'config':<34} {'board':<9} {'hw_ver':<6} {'MHz':>5} {'size':>9} {'sha256':<14} {'tool':<7} "
          f"{'date':<20} {'utilization':<40} {'WNS ns':>7} source")
    for e in entries:
        wns = f"{e.timing['wns_ns']:+.3f}" if e.timing else "-"
        mhz = f"{e.clock_mhz:g}" if e.clock_mhz else "-"
        print(f"{e.config:<34} {e.board:<9} {e.hw_ver:<6} {mhz:>5} {e.size:>9} {e.sha256[:12] + '..':<14} "
              f"{e.tool_version or '-':<7} {e.date:<20} {_fmt_util(e.utilization):<40} {wns:>7} {e.source}")
    print(f"{len(entries)} entries (shipped: {catalog.SHIPPED_CATALOG}; yours: {_user(args) or catalog.user_catalog()})")
    return 0


def _report(path: str, parse: Callable[[Path], dict[str, Any]], head: bitfile.BitHeader, bit: Path) -> dict[str, Any]:
    """A Vivado report of `bit`'s build: parsed, and refused if it names another FPGA die."""
    report = parse(Path(path))
    if report["device"] and bitfile.die_of(report["device"]) != head.die:
        raise ConfigError(f"{path}: report of device {report['device']}, but {bit} is for {head.part}")
    return report


def run_add(args: argparse.Namespace) -> int:
    hw = HwConfig.resolve(args.hw)
    board = Board.named(args.board)
    bit = Path(args.bit)
    head = bitfile.read_header(bit)
    bitfile.check_part(head.part, board.fpga_part, board.name, str(bit))
    if hw.TARGET != board.target:
        raise ConfigError(f"--hw {hw.name}: TARGET={hw.TARGET!r} does not run on board {board.name} "
                          f"(needs TARGET={board.target!r})")
    util = _report(args.utilization, vivado.parse_utilization, head, bit) if args.utilization else None
    timing = _report(args.timing, vivado.parse_timing_summary, head, bit) if args.timing else None
    clock = float(timing["clock_mhz"]) if timing else float(hw.clock_mhz)  # type: ignore[arg-type]
    entry = catalog.Entry(
        config=hw.name, board=board.name, target=hw.TARGET, hw_ver=str(hw.HW_VER),
        sha256=catalog.sha256_file(bit), size=bit.stat().st_size, part=head.part, design=head.design,
        tool_version=head.tool_version, date=f"{head.date} {head.time}", clock_mhz=clock,
        url=args.url, local=str(bit.resolve()),
        utilization=util, timing=timing, source="local",
        provenance=f"codesign bitstream add {bit}" + (f" --utilization {args.utilization}" if util else "")
        + (f" --timing {args.timing}" if timing else ""))
    path = catalog.add(entry, _user(args))
    if args.json:
        print(json.dumps({"catalog": str(path), "entry": entry.to_yaml_dict()}))
        return 0
    print(f"{bit}: {head.design}, part {head.part}, Vivado {head.tool_version}, {head.date} {head.time}, "
          f"{entry.size} bytes, sha256 {entry.sha256}")
    if util:
        print(f"utilization: {_fmt_util(util)}")
    if timing:
        print(f"timing: WNS {timing['wns_ns']:+.3f} ns at {timing['clock_mhz']:g} MHz "
              f"({'met' if timing['met'] else 'NOT met'}; fmax about {timing['fmax_mhz']:.1f} MHz)")
    print(f"added {hw.name} for {board.name} (HW_VER {hw.HW_VER}) to {path}")
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    hw = HwConfig.resolve(args.hw)
    if args.hw_ver:
        hw = hw.with_(HW_VER=args.hw_ver)
    Board.named(args.board)
    entries = catalog.load(_user(args))
    hits = catalog.find(entries, hw, args.board)
    if args.hw_ver:
        hits = [e for e in hits if e.hw_ver == args.hw_ver]
    if not hits:
        have = sorted({f"{e.config} ({e.board}, {e.hw_ver})" for e in entries})
        raise ConfigError(f"no bitstream for {hw.name} on {args.board} in the catalog; have: {', '.join(have)}. "
                          f"Build one: codesign bitstream build {hw.name} --board {args.board} --vta-hw PATH")
    entry = hits[0]
    bar = None
    if not args.json and sys.stderr.isatty():
        bar = tqdm(total=entry.size, unit="B", unit_scale=True, desc="fetch", file=sys.stderr, leave=False)

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.update(done - bar.n)

    path, downloaded = fetch.fetch(entry, force=args.force, on_progress=progress)
    if bar is not None:
        bar.close()
    if args.json:
        print(json.dumps({"path": str(path), "downloaded": downloaded, "sha256": entry.sha256, "size": entry.size}))
        return 0
    print(f"{'downloaded' if downloaded else 'already cached'}: {path} ({entry.size} bytes, sha256 ok)")
    return 0


def run_build(args: argparse.Namespace) -> int:
    hw = HwConfig.resolve(args.hw)
    board = Board.named(args.board)
    out = Path(args.out) if args.out else Path("build") / hw.name
    p = build.plan(hw, board, args.vta_hw, out)  # refuses a config the board cannot hold, first
    build.write_inputs(p)
    ok, missing = build.tools_available()
    will_run = ok and not args.dry_run
    if args.json and not will_run:
        print(json.dumps({"config_json": str(p.config_json), "commands": p.shell_lines(), "bit": str(p.bit),
                          "reports": str(p.reports), "add": p.add_command(), "notes": p.notes, "ran": False,
                          "missing_tools": missing}))
        return 0
    print(f"wrote {p.config_json} (and reports.tcl; the checkout's config is kept as vta_config.json.orig)")
    for n in p.notes:
        print(f"note: {n}")
    if not will_run:
        why = "--dry-run" if ok else "not on PATH: " + ", ".join(missing)
        print(f"not running the flow ({why}); the commands are:")
        for line in p.shell_lines():
            print(f"  {line}")
        print(f"the bitstream will appear at {p.bit}")
        print(f"the reports at {p.reports}/utilization.rpt and {p.reports}/timing_summary.rpt")
        print(f"then: {p.add_command()}")
        return 0
    print(f"running the flow (log: {p.out / 'build.log'}); this takes tens of minutes")
    build.run(p)
    add_args = argparse.Namespace(bit=str(p.bit), hw=hw.name, board=board.name,
                                  utilization=str(p.reports / "utilization.rpt"),
                                  timing=str(p.reports / "timing_summary.rpt"), url=None, json=args.json,
                                  catalog=args.catalog)
    return run_add(add_args)
