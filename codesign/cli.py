"""`codesign` command line. Each subcommand lives in `codesign/commands/<name>.py` and exposes
`register(subparsers)`; this file only wires them up and turns user errors into one line."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from codesign import interrupts
from codesign.errors import CodesignError

# (module, one-line summary) in the order of the data flow.
COMMANDS = [
    ("workloads", "list the network zoo, or show one network's layers and what VTA offloads"),
    ("simulate", "run a serialized VTA program on the simulator and print cycles and counters"),
    ("board", "PYNQ boards over tvm.rpc: serve a board (or an emulated one), info, run a program, a tracker"),
    ("space", "show a layer's schedule space; --exhaustive finds the true optimum"),
    ("replay", "re-simulate the records of an AutoTVM log and compare with the measured times"),
    ("calibrate", "fit the timing model's physical parameters to measured AutoTVM records"),
    ("tune", "tune the schedules of a layer or a network's layers on one hardware config"),
    ("export", "export tuned schedules as AutoTVM logs or a vta_config.json"),
    ("sweep", "co-design sweep: Ray Tune over hardware configs with inner schedule tuning"),
    ("report", "print the Pareto front of a sweep directory"),
    ("deploy", "program a board with a config's catalog bitstream and smoke-test it against NumPy"),
    ("run", "run a quantized network end to end (VTA + the board's CPU): per-op time, bit-exact check"),
    ("bitstream", "bitstream catalog: list, add a build, fetch into VTA's cache, build with HLS + Vivado"),
]

EPILOG = """\
typical flow:
  codesign sweep                              # small ResNet-18 co-design sweep on PYNQ-Z1
  codesign report runs/sweep                  # Pareto front of that sweep
  codesign run --workload resnet18 --hw pynq_1x16 --simulate    # the network end to end, bit-exact
  codesign tune --workload resnet18 --hw pynq_1x16              # tune one config's layers
  codesign export autotvm runs/sweep/records.jsonl --hw pynq_1x16 -o vta.log
every command takes --help; most take --json for scripts.
"""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (with `command`) one whose only fully built subcommand is `command`:
    the others are listed by name and summary without importing their modules, so
    `codesign simulate` does not load Ray and `codesign --help` loads nothing."""
    parser = argparse.ArgumentParser(
        prog="codesign",
        description="Hardware/schedule co-design for VTA accelerators.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in COMMANDS:
        if command is None or name == command:
            module = importlib.import_module(f"codesign.commands.{name}")
            module.register(sub, summary)
        else:
            sub.add_parser(name, help=summary)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), "")
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with interrupts.catching():
            return int(args.func(args) or 0)
    except CodesignError as exc:
        print(f"codesign {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"codesign {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `codesign ... | head`: the reader left; silence the flush at exit as well.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
