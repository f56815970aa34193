"""`codesign board serve|info|run`: PYNQ boards over tvm.rpc (docs/board.md)."""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from codesign.board import protocol
from codesign.board.client import BoardClient
from codesign.board.lean_tvm import lean_tvm
from codesign.board.server import LOOPBACK, BoardServer, ServeOptions
from codesign.board.tracker import DEFAULT_TRACKER_PORT, TrackerProcess
from codesign.errors import CodesignError
from codesign.vta.program import Program

DESCRIPTION = """\
Run VTA programs on PYNQ boards. A board runs `codesign board serve`: apache-tvm's RPC server
whose sessions expose only six functions (info, program a bitstream, run a program, run one
whose repeated parts -- inputs, weights -- the session already holds by sha256, load a deployed
network bundle, run it on one input) -- no module upload, no other TVM function. Hosts talk to it with `codesign board info/run` and tune
on it with `codesign tune --board HOST:PORT` or `--tracker HOST:PORT --key KEY`.

Without a board, `--emulate HW_CONFIG` serves an emulated PYNQ: the same driver, register
protocol, buffers and RPC over the bit-exact simulator, with device time from the timing model.
It is never chosen silently, and `info` says `emulated`.
"""

EPILOG = """\
examples:
  # on the board (as root: /dev/mem); binds 127.0.0.1 unless --host is given
  codesign board serve --host 0.0.0.0 --port 9091 --tracker 10.0.0.1:9190 --key pynq
  # an emulated board on this machine (tests, demos)
  codesign board serve --emulate pynq_1x16 --port 9091
  codesign board info 127.0.0.1:9091
  codesign board run layer.vtaprog --board 127.0.0.1:9091 --repeat 5
  codesign board run layer.vtaprog --board 127.0.0.1:9091 --bitstream vta_1x16.bit --json
  # a tracker for several boards (apache-tvm's; binds 127.0.0.1 unless --host is given)
  codesign board tracker --host 0.0.0.0 --port 9290
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("board", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    bsub = p.add_subparsers(dest="board_command", metavar="{serve,info,run,tracker}")

    s = bsub.add_parser("serve", help="serve this board (or an emulated one) over tvm.rpc",
                        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--host", default=None, help="address to bind (default 127.0.0.1; 0.0.0.0 for remote hosts)")
    s.add_argument("--port", type=int, default=protocol.DEFAULT_PORT, help=f"first port to try (default {protocol.DEFAULT_PORT})")
    s.add_argument("--port-end", type=int, default=None, help="last port to try (default port+100)")
    s.add_argument("--tracker", metavar="HOST:PORT", help="register with this RPC tracker")
    s.add_argument("--key", default="", help="board type to register under (with --tracker), e.g. pynq")
    s.add_argument("--custom-addr", default=None, help="address the tracker hands to clients")
    s.add_argument("--board", default="pynq-z1", help="board description (hw_configs/boards; default pynq-z1)")
    s.add_argument("--emulate", metavar="HW_CONFIG", default=None,
                   help="serve an emulated PYNQ running this hardware config (tests and demos)")
    s.add_argument("--max-payload", type=int, default=protocol.DEFAULT_MAX_PAYLOAD, metavar="BYTES",
                   help=f"largest request accepted (default {protocol.DEFAULT_MAX_PAYLOAD})")
    s.add_argument("--cache-bytes", type=int, default=protocol.DEFAULT_CACHE_BYTES, metavar="BYTES",
                   help="bytes of sha256-verified program parts (inputs, weights) each session keeps so "
                        f"clients send them once (LRU; 0: keep none; default {protocol.DEFAULT_CACHE_BYTES})")
    s.add_argument("--network-bytes", type=int, default=ServeOptions.network_bytes, metavar="BYTES",
                   help="contiguous board memory one deployed network (codesign deploy -o NET.vtanet) may take: "
                        "weights, programs and activations; a bigger bundle is refused before anything loads "
                        f"(default {ServeOptions.network_bytes}: PYNQ-Z1's default contiguous-memory pool)")
    s.add_argument("--state-dir", default="", help="where the loaded bitstream is remembered (default: a temp dir)")
    s.set_defaults(func=run_serve)

    i = bsub.add_parser("info", help="what a board runs", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("addr", metavar="HOST:PORT")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=run_info)

    r = bsub.add_parser("run", help="run a program file on a board (output as `codesign simulate`)",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("program", metavar="PROGRAM_FILE")
    r.add_argument("--board", required=True, metavar="HOST:PORT")
    r.add_argument("--bitstream", metavar="FILE", help="program this .bit for the program's config first (if not loaded)")
    r.add_argument("--number", type=int, default=1, help="runs averaged per timing (default 1)")
    r.add_argument("--repeat", type=int, default=1, help="timings (default 1)")
    r.add_argument("--timeout", type=float, default=10.0, help="seconds the device may take per run (default 10)")
    r.add_argument("--save-outputs", metavar="DIR", help="write each output region as DIR/<name>.bin")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=run_run)
    t = bsub.add_parser("tracker", help="run apache-tvm's RPC tracker (boards register, tuning hosts ask it for one)",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--host", default=None, help="address to bind (default 127.0.0.1; 0.0.0.0 for boards on the network)")
    t.add_argument("--port", type=int, default=DEFAULT_TRACKER_PORT, help=f"port (default {DEFAULT_TRACKER_PORT})")
    t.add_argument("--port-end", type=int, default=None,
                   help="last port to try when --port is in use (default: --port only, so the address is known)")
    t.set_defaults(func=run_tracker)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_serve(args: argparse.Namespace) -> int:
    opts = ServeOptions(host=args.host or "127.0.0.1", port=args.port,
                        port_end=args.port_end or args.port + 100, tracker=args.tracker, key=args.key,
                        board=args.board, emulate=args.emulate, max_payload=args.max_payload,
                        cache_bytes=args.cache_bytes, network_bytes=args.network_bytes,
                        state_dir=args.state_dir, custom_addr=args.custom_addr)
    server = BoardServer(opts, host_given=args.host is not None)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"codesign board serving on {server.addr}" + (f" (tracker {opts.tracker}, key {opts.key})" if opts.tracker else ""),
          file=sys.stderr, flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


def run_tracker(args: argparse.Namespace) -> int:
    host = args.host or "127.0.0.1"
    tracker = TrackerProcess(host, args.port, args.port_end)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    where = "" if host not in LOOPBACK else " (this machine only; --host 0.0.0.0 for boards on the network)"
    print(f"codesign board tracker on {tracker.addr}{where}; boards: codesign board serve --tracker "
          f"{tracker.addr} --key KEY", file=sys.stderr, flush=True)
    try:
        stop.wait()
    finally:
        tracker.stop()
    return 0


def run_info(args: argparse.Namespace) -> int:
    lean_tvm()  # this process only talks to a board: tvm's runtime, no torch (~5 s less)
    with BoardClient(args.addr) as client:
        info = client.info()
    info.pop("ok", None)
    if args.json:
        print(json.dumps(info))
        return 0
    bit = info.get("bitstream") or {}
    print(f"board      {info['board']} ({info['fpga_part']}){'  EMULATED' if info['emulated'] else ''}")
    print(f"pynq       {info['pynq_version']}    codesign {info['codesign_version']}")
    print(f"bitstream  {bit.get('config') or 'none'}  sha256 {bit.get('sha256') or '-'}")
    print(f"limits     max payload {info['max_payload']} bytes, cache {info.get('cache_bytes', 0)} bytes per session"
          + (f", network {info['network_bytes']} bytes" if "network_bytes" in info else ""))
    return 0


def run_run(args: argparse.Namespace) -> int:
    lean_tvm()  # this process only talks to a board: tvm's runtime, no torch (~5 s less)
    program = Program.load(args.program)
    empty = [r.name for r in program.regions_with_role("input") if r.data is None]
    if empty:
        raise CodesignError(f"{args.program}: input region {empty[0]!r} has no data (a timing-only compile); "
                            "a board needs the data")
    with BoardClient(args.board) as client:
        loaded = client.ensure_bitstream(program.hw.name, args.bitstream)
        reply = client.run(program.to_bytes(), args.number, args.repeat, args.timeout)
    out = report(args.program, program, reply, loaded, args.save_outputs)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"program   {out['program']}  ({out['hw']}, {out['n_insns']} instructions, {out['n_uops']} micro-ops, "
          f"on board {out['board']}{' (emulated)' if out['emulated'] else ''})")
    print(f"device    {out['device_s']:.6e} s  (median of {len(out['device_s_all'])}, start to done)")
    print(f"call      {out['call_s']:.6e} s  (board driver call)   rpc {out['rpc_s']:.6e} s")
    print(f"bitstream {out['bitstream_sha256'] or '-'}")
    for name, info in out["outputs"].items():
        print(f"output    {name}: {info['nbytes']} bytes, sha256 {info['sha256'][:16]}"
              + (f", saved to {info['path']}" if "path" in info else ""))
    return 0


def report(path: Any, program: Program, reply: Any, loaded: dict[str, Any], save: str | None) -> dict[str, Any]:
    """The `codesign simulate --json` keys that a board can produce, plus measured times."""
    outputs: dict[str, Any] = {}
    for name, data in reply.outputs.items():
        outputs[name] = {"nbytes": int(data.size), "sha256": hashlib.sha256(data.tobytes()).hexdigest()}
        if save:
            p = Path(save) / f"{name}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data.tobytes())
            outputs[name]["path"] = str(p)
    return {"program": str(path), "hw": program.hw.name, "mode": "board", "n_insns": program.n_insns,
            "n_uops": program.n_uops, "outputs": outputs, "board": reply.header.get("board"),
            "emulated": bool(reply.header.get("emulated")), "device_s": reply.device_median_s,
            "device_s_all": reply.device_s, "call_s": reply.call_s, "rpc_s": reply.rpc_s,
            "bitstream_sha256": reply.header.get("bitstream_sha256", loaded.get("sha256"))}
