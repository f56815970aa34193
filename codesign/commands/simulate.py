"""`codesign simulate PROGRAM_FILE`: run a serialized VTA program on the simulator."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import CodesignError
from codesign.vta import timing
from codesign.vta.program import Program
from codesign.vta.simulator import simulate

DESCRIPTION = """\
Run a VTA program file (written by Program.save / the compiler: instructions, micro-ops and
DRAM regions in one blob) on the simulator. Functional mode (default) executes every
instruction over DRAM and the SRAMs with VTA's token-queue semantics and reports the output
regions; --timing-only skips all data and only computes cycles and counters (much faster).

Prints device cycles, the predicted operator seconds (device time at the config clock plus the
timing model's host overhead), device-only seconds, busy cycles per module (load / compute /
store) and the profiler counters of VTA's simulator (bytes loaded per memory type, bytes
stored, GEMM and ALU micro-ops executed).
"""

EPILOG = """\
examples:
  codesign simulate layer.vtaprog
  codesign simulate layer.vtaprog --timing-only
  codesign simulate layer.vtaprog --check        # also fail on SRAM accesses no token orders
  codesign simulate layer.vtaprog --json | jq .counters
  codesign simulate layer.vtaprog --input data=act.bin --save-outputs out/
  codesign simulate layer.vtaprog --params my_timing_params.json

making a program file (compile_layer(..., data=, weight=) embeds input tensors):
python - <<'EOF'
from codesign.hw.config import HwConfig
from codesign.schedule.space import ScheduleSpace
from codesign.evaluate.compiler import compile_layer
from codesign.workloads import parse_layer
import numpy as np
hw, layer = HwConfig(), parse_layer("conv2d:1,64,56,56,64,3,3,1,1")
space, rng = ScheduleSpace(layer, hw), np.random.default_rng(0)
data = rng.integers(-128, 128, layer.data_shape(), dtype=np.int8)
weight = rng.integers(-128, 128, layer.weight_shape(), dtype=np.int8)
config = space.get(int(space.valid_indices()[-1]))
compile_layer(layer, config, hw, data=data, weight=weight).save("layer.vtaprog")
EOF
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("simulate", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("program", metavar="PROGRAM_FILE", help="program blob written by Program.save")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--functional", dest="functional", action="store_true", default=True,
                      help="execute the data path too (default)")
    mode.add_argument("--timing-only", dest="functional", action="store_false",
                      help="cycles and counters only; no data is touched")
    p.add_argument("--params", metavar="FILE", default=None,
                   help="timing parameters JSON (default: the shipped sim/timing_params.json)")
    p.add_argument("--input", metavar="REGION=FILE", action="append", default=[],
                   help="raw bytes for an input DRAM region (overrides data in the file; repeatable)")
    p.add_argument("--save-outputs", metavar="DIR", default=None,
                   help="write each output region as DIR/<name>.bin (functional mode)")
    p.add_argument("--check", action="store_true",
                   help="first check that every SRAM row two modules share is ordered by a dependency token "
                        "(a program missing one can pass here and race on the device)")
    p.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    program = Program.load(args.program)
    params = timing.TimingParams.load(args.params)
    inputs: dict[str, Any] = {}
    for spec in args.input:
        name, sep, path = spec.partition("=")
        if not sep:
            raise CodesignError(f"--input {spec!r}: expected REGION=FILE")
        try:
            inputs[name] = np.frombuffer(Path(path).read_bytes(), dtype=np.uint8)
        except OSError as exc:
            raise CodesignError(f"--input {spec!r}: cannot read {path} ({exc.strerror})") from None
    if args.functional:
        empty = [r.name for r in program.regions_with_role("input") if r.data is None and r.name not in inputs]
        if empty:
            raise CodesignError(f"{args.program}: input region {empty[0]!r} has no data (a timing-only "
                                f"compile); pass --input {empty[0]}=FILE or use --timing-only")
    res = simulate(program, functional=args.functional, params=params, inputs=inputs, check=args.check)
    hw = program.hw
    seconds = timing.predict_seconds(res.cycles, res.n_insns, hw, params)
    outputs: dict[str, Any] = {}
    for name, data in res.outputs.items():
        outputs[name] = {"nbytes": int(data.size), "sha256": hashlib.sha256(data.tobytes()).hexdigest()}
        if args.save_outputs:
            path = Path(args.save_outputs) / f"{name}.bin"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data.tobytes())
            outputs[name]["path"] = str(path)
    out = {
        "program": str(args.program),
        "hw": hw.name,
        "mode": "functional" if args.functional else "timing-only",
        "n_insns": res.n_insns,
        "n_uops": program.n_uops,
        "cycles": res.cycles,
        "seconds": seconds,
        "seconds_device": res.seconds_device,
        "busy": res.busy,
        "counters": res.counters,
        "outputs": outputs,
        "tokens_left": res.tokens_left,
        "not_run": res.not_run,
    }
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"program   {out['program']}  ({hw.name}, {res.n_insns} instructions, {program.n_uops} micro-ops, "
          f"{out['mode']})")
    print(f"cycles    {res.cycles}")
    print(f"seconds   {seconds:.6e}  (predicted operator time incl. host overhead)")
    print(f"device    {res.seconds_device:.6e} s  (cycles at {hw.clock_mhz} MHz)")
    cyc = max(res.cycles, 1)
    print("busy      " + "  ".join(f"{k} {v} ({100 * v / cyc:.1f}%)" for k, v in res.busy.items()))
    print("counters")
    for k, v in res.counters.items():
        print(f"  {k:<18} {v}")
    for name, info in outputs.items():
        print(f"output    {name}: {info['nbytes']} bytes, sha256 {info['sha256'][:16]}"
              + (f", saved to {info['path']}" if "path" in info else ""))
    if res.not_run:
        print(f"warning   {res.not_run} instructions never ran: FINISH ended the run first (as on VTA)")
    if res.tokens_left:
        print("warning   tokens left in queues: "
              + ", ".join(f"{k}={v}" for k, v in res.tokens_left.items()))
    return 0
