"""Model coverage: which of the models people bring import, place and run bit-exact, and how fast.

For each model — torchvision's classification architectures re-implemented in plain torch.nn
(`benchmarks/tv_models.py`, seeded random weights) and the project's zoo networks
(`codesign.workloads.zoo.ZOO`, named `zoo:<name>`) — and each hardware config (`pynq_1x16` with
the PYNQ-Z1's CPU at 100 MHz, the stock Ultra96 build at 250 MHz with its Cortex-A53):

- import: `codesign.network.import_network` (op count, GMACs); on failure its one-line error;
- quantize: torchao PT2E on the example input (`codesign.network.quantize`, once per model);
- place: `codesign.place.plan_network` with `ScheduleChooser` and each VTA step's schedule refined
  for its epilogue — what `codesign.netrun.network.prepare` does after quantizing;
- run: `codesign.netrun.network.execute` with `simulator_executor()`: every VTA step on the
  functional simulator, every op compared bit for bit with the NumPy integer reference;
- ms per image: `plan.latency_s` (timing model for VTA steps, the fitted CPU model for the rest);
- VTA MAC share: MACs of the ops in VTA steps over all MACs;
- VTA compute floor (`vta_floor_ms`): the GEMM uops and epilogue ALU cycles of the VTA steps at the
  timing model's rates with no overhead (`codesign.place.floor`), next to those steps' predicted ms;
- lowest per-op SQNR (`codesign.network.reference.op_sqnr`: the integer network's dequantized
  output of every op against the float network's, on the example input).

Every failure of one model (or of one model on one config) is caught and recorded with its
one-line reason (`stage`: import / quantize / place / run; `error_type`: ConfigError for what the
project reports as unsupported, the exception's type otherwise); the benchmark goes on.

Output: one JSON object at the end (`{"rows": [...]}`), a progress line per model on stderr,
`--json-out FILE` appends each model's row as one JSON line when it finishes (a single append:
an interrupted run keeps every finished row), `--markdown` prints a table for docs instead of the
JSON, `--from FILE` renders rows already measured. `--skip-run` only imports, quantizes and
places (no simulator run, no SQNR: the integer reference of a large model is the slow part).

Cost (measured on 2 shared cores): all 28 models on both configs in ~11 min; per model, placement
(choosing every VTA layer's schedule) dominates (1-46 s per config), quantization takes 1-15 s,
the simulator run of a whole CNN 0.5-10 s, the SQNR pass (float network again) 0.2-5 s.

Usage: `python benchmarks/model_coverage.py [--models resnet18 mobilenet_v2 zoo:lstm] [--hw pynq
ultra96] [--skip-run] [--json-out rows.jsonl] [--markdown]`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tv_models next to this file

ZOO_PREFIX = "zoo:"


class Target(NamedTuple):
    """A hardware config and the board whose CPU runs the rest. (A NamedTuple, not a dataclass: the
    tests load this script without registering it in sys.modules, which dataclasses need.)"""

    key: str
    hw: str
    board: str


TARGETS: dict[str, Target] = {
    "pynq": Target("pynq", "pynq_1x16", "pynq-z1"),
    "ultra96": Target("ultra96", "ultra96_1x16_i8w8a32_15_15_18_17_250MHz", "ultra96"),
}

Factory = Callable[[], tuple[Any, tuple[Any, ...]]]


def catalogue() -> dict[str, Factory]:
    """Every model the benchmark knows: torchvision's, then the zoo's as `zoo:<name>`."""
    from tv_models import MODELS

    from codesign.workloads.zoo import ZOO

    out: dict[str, Factory] = dict(MODELS)
    for name in ZOO:
        out[ZOO_PREFIX + name] = _zoo_factory(name)
    return out


def _zoo_factory(name: str) -> Factory:
    def make() -> tuple[Any, tuple[Any, ...]]:
        from codesign.network import load_model

        module, inputs, _ = load_model(name, seed=0)  # seeded weights and standard-normal inputs
        return module, inputs

    return make


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message, at most 300 characters."""
    text = (str(exc).strip().splitlines() or [""])[0]
    return (text or type(exc).__name__)[:300]


def _failure(row: dict[str, Any], stage: str, exc: BaseException) -> dict[str, Any]:
    from codesign.errors import ConfigError

    row.update(stage=stage, error=one_line(exc), error_type="ConfigError" if isinstance(exc, ConfigError)
               else type(exc).__name__)
    return row


def _vta_mac_share(plan: Any, net: Any) -> float | None:
    """MACs of the ops VTA steps compute over the network's MACs (None: a network without MACs)."""
    total = net.macs
    if not total:
        return None
    on_vta = sum(net.op(name).macs for s in plan.steps if s.placement == "vta" and not s.host for name in s.ops)
    return on_vta / total


def place(qnet: Any, name: str, example: np.ndarray | tuple[np.ndarray, ...], target: Target) -> Any:
    """`codesign.netrun.network.prepare` after its quantization step: plan on `target`, refine each
    VTA step's schedule for its epilogue, check every op is placed once."""
    from codesign.errors import ConfigError
    from codesign.hw.board import Board
    from codesign.hw.config import HwConfig
    from codesign.netrun.network import Prepared
    from codesign.netrun.schedules import ScheduleChooser
    from codesign.place import plan_network
    from codesign.place.refine import refine

    hw = HwConfig.resolve(target.hw)
    chooser = ScheduleChooser(hw)
    plan, schedules = refine(plan_network(qnet, hw, Board.named(target.board), chooser), chooser)
    placed = [o for s in plan.steps if not s.host for o in s.ops]
    if sorted(placed) != sorted(op.name for op in qnet.network.ops):
        raise ConfigError(f"network {name!r}: the plan places {len(placed)} ops for {len(qnet.network.ops)}")
    return Prepared(name, qnet, plan, chooser, example, schedules)


def on_target(qnet: Any, name: str, example: np.ndarray | tuple[np.ndarray, ...], target: Target, run: bool) -> tuple[dict[str, Any], Any]:
    """One model on one config: placement (and the simulator run) -> (its row, the Execution or None)."""
    from codesign.netrun.network import execute, simulator_executor

    row: dict[str, Any] = {"hw": target.hw, "board": target.board}
    t0 = time.perf_counter()
    try:
        prep = place(qnet, name, example, target)
    except Exception as exc:  # noqa: BLE001 - one model's failure is a row, not the end of the benchmark
        return _failure(row, "place", exc), None
    from codesign.place.floor import plan_floor_s

    plan, net = prep.plan, qnet.network
    floor = plan_floor_s(plan)  # the compute floor of its VTA steps: what no schedule goes below
    row.update(place_s=round(time.perf_counter() - t0, 2), latency_ms=plan.latency_s * 1e3,
               vta_ms=plan.vta_s * 1e3, vta_mac_share=_vta_mac_share(plan, net),
               vta_floor_ms={k: round(v * 1e3, 2) for k, v in floor.items()},
               vta_steps=sum(1 for s in plan.steps if s.placement == "vta" and not s.host),
               cpu_ops=sum(len(s.ops) for s in plan.steps if s.placement != "vta" and not s.host))
    if not run:
        return row, None
    t0 = time.perf_counter()
    try:
        exe = execute(prep, example, simulator_executor())
    except Exception as exc:  # noqa: BLE001
        return _failure(row, "run", exc), None
    row.update(run_s=round(time.perf_counter() - t0, 2), bit_exact=exe.bit_exact,
               mismatched_ops=[r.name for r in exe.rows if not r.bit_exact][:5])
    return row, exe


def lowest_sqnr(qnet: Any, example: np.ndarray | tuple[np.ndarray, ...], reference: dict[str, np.ndarray] | None) -> tuple[float, str]:
    """`op_sqnr`'s lowest op; the integer reference of a run already made is reused (the same
    `run_int` on the same input), so only the float network runs again."""
    from codesign.network.quantized import dequantize
    from codesign.network.reference import op_sqnr, run_float, sqnr_db

    if reference is None:
        sqnr = op_sqnr(qnet, example)
    else:
        floats = run_float(qnet.network, example)
        sqnr = {op.name: sqnr_db(floats[op.name], dequantize(reference[op.name], qnet.frac[op.name]))
                for op in qnet.network.ops}
    worst = min(sqnr, key=lambda k: sqnr[k])
    return float(sqnr[worst]), worst


def measure(name: str, factory: Factory, targets: Sequence[Target] = tuple(TARGETS.values()),
            run: bool = True) -> dict[str, Any]:
    """One model's row: build, import, quantize, then place (and run) on every target. Never raises
    for the model's sake: a failure ends the row with `stage`, `error` and `error_type`."""
    from codesign.network import import_network, quantize

    row: dict[str, Any] = {"model": name, "source": "zoo" if name.startswith(ZOO_PREFIX) else "torchvision"}
    t_start = time.perf_counter()
    try:
        try:
            module, inputs = factory()
        except Exception as exc:  # noqa: BLE001
            return _failure(row, "build", exc)
        inputs = tuple(inputs)
        row.update(params=int(sum(p.numel() for p in module.parameters())),
                   input_shape=[list(t.shape) for t in inputs])
        t0 = time.perf_counter()
        try:
            net = import_network(module, inputs, name)
        except Exception as exc:  # noqa: BLE001
            return _failure(row, "import", exc)
        row.update(import_s=round(time.perf_counter() - t0, 2), ops=len(net.ops), gmacs=round(net.macs / 1e9, 3),
                   counts=net.counts())
        t0 = time.perf_counter()
        try:
            qnet = quantize(module, inputs, None, name)  # exported at the example inputs' batch
        except Exception as exc:  # noqa: BLE001
            return _failure(row, "quantize", exc)
        row["quantize_s"] = round(time.perf_counter() - t0, 2)
        arrays = tuple(np.asarray(t.detach().numpy(), np.float32) for t in inputs)
        example = arrays if len(arrays) > 1 else arrays[0]  # an LSTM cell takes x, h, c
        reference = None
        row["targets"] = {}
        for target in targets:
            trow, exe = on_target(qnet, name, example, target, run)
            row["targets"][target.key] = trow
            reference = reference if exe is None else exe.reference
        if run:
            t0 = time.perf_counter()
            try:
                row["lowest_op_sqnr_db"], row["lowest_sqnr_op"] = lowest_sqnr(qnet, example, reference)
            except Exception as exc:  # noqa: BLE001
                return _failure(row, "sqnr", exc)
            row["sqnr_s"] = round(time.perf_counter() - t0, 2)
        failed = [(k, t) for k, t in row["targets"].items() if "error" in t]
        if failed:  # the row's failure is its first config's; each config keeps its own
            k, t = failed[0]
            row.update(stage=t["stage"], failed_on=k, error=t["error"], error_type=t["error_type"])
        return row
    finally:
        row["wall_s"] = round(time.perf_counter() - t_start, 2)


def progress(row: dict[str, Any]) -> str:
    """The stderr line of a finished model."""
    head = f"{row['model']}: {row['wall_s']:.1f} s"
    if "targets" not in row or not row["targets"]:
        return f"{head}, failed at {row.get('stage')}: {row.get('error')}"
    parts = []
    for key, t in row["targets"].items():
        if "error" in t:
            parts.append(f"{key} failed at {t['stage']}: {t['error']}")
        else:
            ms, share, exact = _cell(t)
            parts.append(f"{key} {ms} ms, VTA MACs {share}, bit-exact {exact}")
    sq = f", lowest op SQNR {row['lowest_op_sqnr_db']:.1f} dB" if "lowest_op_sqnr_db" in row else ""
    return f"{head}; " + "; ".join(parts) + sq


def _cell(t: dict[str, Any] | None) -> tuple[str, str, str]:
    if t is None:
        return "-", "-", "-"
    if "latency_ms" not in t:
        return "fails", "-", "-"
    share = "-" if t.get("vta_mac_share") is None else f"{100 * t['vta_mac_share']:.0f}%"
    exact = {True: "yes", False: "**no**", None: "-"}[t.get("bit_exact")]
    return f"{t['latency_ms']:.1f}", share, exact


def markdown(rows: Sequence[dict[str, Any]], keys: Sequence[str] = tuple(TARGETS)) -> str:
    """A table for docs: per model, its ops and GMACs, per config ms per image / VTA MAC share /
    bit-exact, the lowest per-op SQNR, and the one-line reason of a failure."""
    head = ["model", "params", "GMACs", "ops"]
    for k in keys:
        head += [f"{k} ms", f"{k} VTA MACs", f"{k} bit-exact"]
    head += ["lowest op SQNR dB", "wall s", "failure"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["model"], f"{r['params'] / 1e6:.1f}M" if "params" in r else "-",
                 f"{r['gmacs']:.2f}" if "gmacs" in r else "-", str(r.get("ops", "-"))]
        for k in keys:
            cells += _cell(r.get("targets", {}).get(k))
        cells.append(f"{r['lowest_op_sqnr_db']:.1f}" if "lowest_op_sqnr_db" in r else "-")
        cells.append(f"{r.get('wall_s', 0):.0f}")
        # the importer's list of the kinds it knows is the same on every row: not in the table
        on = next((k for k, t in r.get("targets", {}).items() if "error" in t), None)
        where = f"{r.get('stage')} on {on}" if on else r.get("stage", "")
        why = re.sub(r" \(kinds: .*$", "", f"{where}: {r['error']}") if "error" in r else ""
        cells.append(why.replace("|", "\\|")[:260])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", metavar="NAME",
                    help="torchvision names (tv_models.MODELS) and zoo:<name> (the prefix optional where the name is the "
                         "zoo's only; default: all)")
    ap.add_argument("--hw", nargs="+", choices=list(TARGETS), default=list(TARGETS), help="configs (default: both)")
    ap.add_argument("--skip-run", action="store_true", help="only import, quantize and place")
    ap.add_argument("--json-out", metavar="FILE", help="append each model's row as one JSON line when it finishes")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table instead of the JSON")
    ap.add_argument("--from", dest="source", metavar="FILE", help="render rows of an earlier --json-out (no run)")
    args = ap.parse_args(argv)
    if args.source:
        from codesign.fileio import read_jsonl

        rows = list(read_jsonl(args.source))
    else:
        from codesign.errors import ConfigError

        try:
            rows = bench(args.models, [TARGETS[k] for k in args.hw], not args.skip_run, args.json_out)
        except ConfigError as exc:  # an unknown model name: one line, not a traceback
            ap.error(str(exc))
    print(markdown(rows, args.hw) if args.markdown else json.dumps({"rows": rows}, indent=1))


def bench(models: Sequence[str] | None, targets: Sequence[Target], run: bool, json_out: str | None) -> list[dict[str, Any]]:
    from codesign.errors import ConfigError
    from codesign.fileio import append_jsonl

    known = catalogue()
    # a zoo name the torchvision set does not have may go without its prefix (zoo:lstm or lstm)
    names = [n if n in known or ZOO_PREFIX + n not in known else ZOO_PREFIX + n for n in (models or known)]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    rows = []
    for name in names:
        row = measure(name, known[name], targets, run)
        rows.append(row)
        print(progress(row), file=sys.stderr, flush=True)
        if json_out:
            append_jsonl(json_out, row)
    return rows


if __name__ == "__main__":
    main()
