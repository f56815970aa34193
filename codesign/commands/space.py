"""`codesign space`: a layer's (or a workload's) VTA schedule space — size, valid configs, knob
candidates — and, with --exhaustive, the best schedule found by timing every valid config."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np
from tqdm import tqdm

from codesign import tune
from codesign.analysis.roofline import roofline
from codesign.errors import ConfigError, InvalidSchedule
from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import measure, random_inputs
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.knobs import FAMILIES
from codesign.schedule.support import unsupported_reason
from codesign.sweep.options import DEFAULT_SCHEDULES
from codesign.tune.view import ENUMERATE_LIMIT
from codesign.workloads import get_workload, parse_layer

DESCRIPTION = """\
Show the schedule space of a layer on a VTA hardware config: by default the vta family's (the
template's tiles and sizes that do not divide, with edge tiles, with any loop order, weight- and
input-stationary residency, ACC-resident tiles, 2-8 threads on any axis, kernels that skip
the padding, lifted micro-op loops; docs/schedules.md), which
contains every template schedule; --schedules autotvm the AutoTVM template's (conv2d_packed.vta or
dense_packed.vta) with its knobs in AutoTVM order. Both show the space size and how many configs
pass VTA's validity rules (SRAM capacity per virtual thread, 2-D DMA patterns, padding, micro-op
capacity, instruction field ranges, micro-op dst hazard, virtual-thread divisibility). A layer VTA cannot run (channels not a multiple of the block,
batch not a multiple of BATCH, no config fits...) is reported with the reason.

Every supported layer shows its roofline: the fastest any schedule could be (every MAC on the
GEMM core, or the layer's minimum DRAM traffic through the shared port, plus the least host time).
--exhaustive times every valid config with the timing model and reports the best one (knobs,
AutoTVM index, predicted seconds) and the fraction of the roofline it reaches. --workload lists every unique layer of a workload (a zoo name
from `codesign workloads`, file.py:factory, .pt2 or .onnx) at the batch the config needs (a multiple of BATCH).

Layer syntax: conv2d:N,C,H,W,O,KH,KW,stride,pad   or   dense:N,IN,OUT
"""

EPILOG = """\
examples:
  codesign space --layer conv2d:1,64,56,56,64,3,3,1,1 --hw pynq_1x16_i8w8a32_15_15_18_17
  codesign space --layer conv2d:1,64,56,56,64,3,3,1,1 --schedules autotvm --exhaustive   # the template's optimum
  codesign space --layer conv2d:1,256,14,14,512,3,3,2,1 --hw pynq_1x16 --json
  codesign space --layer dense:16,512,2048 --hw pynq_1x16 --exhaustive
  codesign space --workload resnet18 --hw pynq_4x8
  codesign space --layer conv2d:1,512,7,7,512,3,3,1,1 --hw pynq_1x16 --exhaustive --json | jq .best
  codesign space --layer conv2d:1,512,7,7,512,3,3,1,1 --schedules vta --exhaustive --json
  codesign space --layer conv2d:1,64,14,14,64,3,3,1,1 --exhaustive --save-program best.vtaprog
  codesign simulate best.vtaprog                    # run that program (random int8 inputs embedded)
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("space", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--layer", metavar="SPEC", help="conv2d:N,C,H,W,O,KH,KW,stride,pad or dense:N,IN,OUT")
    what.add_argument("--workload", metavar="NAME",
                      help="zoo name (codesign workloads), path/to/file.py:factory, a .pt2 or an .onnx")
    p.add_argument("--hw", metavar="CONFIG", default="pynq_1x16_i8w8a32_15_15_18_17",
                   help="hardware config name, alias (pynq_1x16, pynq_4x8) or YAML/JSON file "
                        "(default: %(default)s)")
    p.add_argument("--schedules", choices=FAMILIES, default=DEFAULT_SCHEDULES,
                   help="schedule family: the AutoTVM templates' space or the vta family's larger space "
                        "(loop orders, weight residency, threads on any axis, non-dividing tiles; docs/schedules.md) "
                        "(default: %(default)s)")
    p.add_argument("--exhaustive", action="store_true",
                   help="time every valid config in timing mode and report the best")
    p.add_argument("--save-program", metavar="FILE",
                   help="compile one config of --layer (with fixed-seed random int8 inputs) to a VTA "
                        "program file for `codesign simulate`")
    p.add_argument("--index", type=int, metavar="N",
                   help="with --save-program: the config index (default: the --exhaustive best, "
                        "else the first valid config)")
    p.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    p.set_defaults(func=run)


def _exhaustive(layer: Any, hw: Any, space: Any, progress: bool) -> dict[str, Any]:
    """Best of every valid config in timing mode (`codesign.tune.exhaustive`; the vta family:
    `measure` of each valid config), and the fraction of the roofline (`bound_call_seconds`, the
    same operator-call seconds) it reaches."""
    if space.family == "autotvm":
        config, seconds = tune.exhaustive(layer, hw, progress=progress)
    else:
        valid = space.valid_indices()
        times = [measure(layer, space.get(int(i)), hw).seconds
                 for i in tqdm(valid, desc=layer.name, disable=not progress, leave=False)]
        best = int(np.argmin(times))
        config, seconds = space.get(int(valid[best])), times[best]
    return {"knobs": config.knobs, "index": int(config.index), "seconds": float(seconds),
            "roofline_fraction": roofline(layer, hw).bound_call_seconds / float(seconds)}


def _batch_hint(layer: Any, hw: Any) -> str | None:
    """The --layer with the smallest batch >= its own that BATCH divides, when the batch is the problem."""
    if layer.batch % hw.batch == 0:
        return None
    fixed = layer.with_batch(-(-layer.batch // hw.batch) * hw.batch)
    return f"give the layer batch {fixed.batch} (a multiple of BATCH={hw.batch}): --layer {fixed.spec}"


def _save_program(layer: Any, hw: Any, info: dict[str, Any], index: int | None, path: str,
                  family: str = "autotvm") -> dict[str, Any]:
    if not info["valid"]:
        if info["unsupported"]:  # say why (as `tune` does), not only that nothing is valid
            hint = _batch_hint(layer, hw)
            raise InvalidSchedule(f"--layer {layer.spec} cannot run on {hw.name}: {info['unsupported']}"
                                  + (f"; {hint}" if hint else ""))
        raise InvalidSchedule(f"layer {layer.name} on {hw.name}: no valid schedule to compile")
    space = get_space(layer, hw, family)
    if index is None:
        index = info["best"]["index"] if info.get("best") else int(space.valid_indices()[0])
    if not 0 <= index < space.size:
        raise ConfigError(f"--index {index}: the space has indices 0..{space.size - 1}")
    reason = space.why_invalid(space.get(index))
    if reason is not None:
        raise InvalidSchedule(f"--index {index} is not a valid schedule: {reason}")
    data, weight = random_inputs(layer)
    program = compile_layer(layer, space.get(index), hw, data=data, weight=weight)
    program.save(path)
    return {"path": path, "index": index, "n_insns": program.n_insns}


def _valid_count(space: Any, exact: bool) -> tuple[int, bool]:
    """(valid configs, estimated?): counted by listing a space up to `ENUMERATE_LIMIT` configs (or
    when `exact`: --exhaustive lists them anyway), else the space's own sampler estimate (the vta
    family of a large layer has billions of configs; listing its ~10^6 valid ones took tens of seconds)."""
    if exact or space.size <= ENUMERATE_LIMIT or not hasattr(space, "valid_estimate"):
        return int(space.n_valid), False
    return int(round(space.valid_estimate())), True


def _layer_summary(layer: Any, hw: Any, family: str = "autotvm", exact: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"layer": layer.name, "spec": layer.spec, "template": layer.template,
                           "schedules": family, "hw": hw.name, "macs": layer.macs}
    reason = layer.structural_reason(hw)
    if reason is not None:
        out.update(size=0, valid=0, unsupported=reason, knobs={})
        hint = _batch_hint(layer, hw)
        if hint:
            out["hint"] = hint
        return out
    space = get_space(layer, hw, family)
    valid, estimated = _valid_count(space, exact)
    out.update(size=space.size, valid=valid, valid_estimated=estimated, unsupported=unsupported_reason(layer, hw),
               knobs={k.name: [list(c) if k.kind == "sp" else c for c in k.candidates] for k in space.knobs})
    out["roofline"] = roofline(layer, hw).to_dict()
    return out


def _print_layer(info: dict[str, Any]) -> None:
    print(f"layer     {info['layer']}  ({info['spec']})")
    print(f"template  {info['template']}   schedules {info['schedules']}   hw {info['hw']}")
    if info["unsupported"] and not info["size"]:
        print(f"unsupported on VTA (runs on the CPU): {info['unsupported']}")
        if info.get("hint"):
            print(f"hint: {info['hint']}")
        return
    pct = 100.0 * info["valid"] / info["size"] if info["size"] else 0.0
    about = "about " if info.get("valid_estimated") else ""
    how = ", estimated from a seeded sample (--exhaustive lists them)" if info.get("valid_estimated") else ""
    print(f"size      {info['size']}   valid {about}{info['valid']} ({pct:.3g}%{how})")
    if info["unsupported"]:
        print(f"unsupported on VTA (runs on the CPU): {info['unsupported']}")
    print(f"knobs ({'AutoTVM ' if info['schedules'] == 'autotvm' else ''}define order; candidate position = index digit):")
    for name, cands in info["knobs"].items():
        shown = " ".join(str(c).replace(" ", "") for c in cands)
        print(f"  {name:<11} {len(cands):>3}  {shown}")
    r = info["roofline"]
    print(f"roofline  {r['bound_call_seconds'] * 1e3:.4f} ms  ({r['bound']}-bound: {r['macs']} MACs, "
          f"{r['min_bytes']} bytes of minimum DRAM traffic, plus the least host time of a call)")
    if info.get("best"):
        b = info["best"]
        knobs = ", ".join(f"{k}={str(v).replace(' ', '')}" for k, v in b["knobs"].items())
        print(f"best      index {b['index']}  {b['seconds'] * 1e3:.4f} ms  "
              f"({100 * b['roofline_fraction']:.1f}% of the roofline; {knobs})")
    if "program" in info:
        prog = info["program"]
        print(f"program   index {prog['index']} ({prog['n_insns']} instructions) written to {prog['path']}; "
              f"run it with: codesign simulate {prog['path']}")


def run(args: argparse.Namespace) -> int:
    hw = HwConfig.resolve(args.hw)
    progress = not args.json and sys.stderr.isatty()
    if args.layer is not None:  # `--layer ""` is a bad layer, not "no layer"
        layer = parse_layer(args.layer)
        info = _layer_summary(layer, hw, args.schedules, exact=args.exhaustive)
        if args.exhaustive and info["valid"]:
            info["best"] = _exhaustive(layer, hw, get_space(layer, hw, args.schedules), progress)
        elif args.exhaustive:
            info["best"] = None
        if args.save_program:
            info["program"] = _save_program(layer, hw, info, args.index, args.save_program, args.schedules)
        if args.json:
            print(json.dumps(info))
        else:
            _print_layer(info)
        return 0

    if args.save_program:
        raise ConfigError("--save-program needs --layer (one layer per program file)")
    workload = get_workload(args.workload).for_hw(hw)
    rows = []
    for layer, count in workload.unique_layers():
        info = _layer_summary(layer, hw, args.schedules, exact=args.exhaustive)
        info["count"] = count
        if args.exhaustive:
            info["best"] = (_exhaustive(layer, hw, get_space(layer, hw, args.schedules), progress)
                            if info["valid"] else None)
        rows.append(info)
    if args.json:
        print(json.dumps({"workload": workload.name, "batch": workload.batch, "hw": hw.name,
                          "schedules": args.schedules, "layers": rows}))
        return 0
    print(f"workload {workload.name} (batch {workload.batch}) on {hw.name}: {len(rows)} unique layers")
    header = f"{'layer':<38} {'count':>5} {'size':>12} {'valid':>9}"
    header += f" {'roof ms':>9}"
    if args.exhaustive:
        header += f" {'best ms':>9} {'index':>8} {'%roof':>6}"
    print(header)
    if any(info.get("valid_estimated") for info in rows):
        print("(~: valid schedules estimated from a seeded sample of the space; --exhaustive lists them)")
    for info in rows:
        valid = f"~{info['valid']}" if info.get("valid_estimated") else str(info["valid"])  # ~: estimated
        line = f"{info['layer']:<38} {info['count']:>5} {info['size']:>12} {valid:>9}"
        if "roofline" in info:
            line += f" {info['roofline']['bound_call_seconds'] * 1e3:>9.4f}"
        if args.exhaustive and info.get("best"):
            b = info["best"]
            line += f" {b['seconds'] * 1e3:>9.4f} {b['index']:>8} {100 * b['roofline_fraction']:>5.1f}%"
        if info["unsupported"]:
            line += f"  CPU: {info['unsupported']}"
        print(line)
    return 0
