"""`codesign run --workload NET --hw HW (--simulate | --board ...)`: a quantized network end to end
(every op placed on VTA or the CPU, bit-exact against the integer reference, whole-network latency);
`--layers`: the workload's offloaded layers only, as before."""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from tqdm import tqdm

from codesign.board import protocol
from codesign.calibrate.profiles import resolve_params
from codesign.commands.replay import _clean
from codesign.cpu import ConvShape, conv_work, cpu_of, dense_work
from codesign.cpu.work import SPATIAL_PACK
from codesign.deploy import board_executor, check_loaded, connect, fused_board_executor
from codesign.errors import ConfigError
from codesign.fileio import check_output_path
from codesign.hw.config import HwConfig
from codesign.netrun import bundle, load_schedule_records, plot, run_network
from codesign.netrun import network as whole
from codesign.netrun.schedules import FAMILIES
from codesign.network import kinds
from codesign.network.reference import run_int
from codesign.place.plan import CPU_DTYPE
from codesign.tune.records import skipped_line
from codesign.workloads import Dense

DESCRIPTION = """\
Run a quantized network end to end on one hardware config: import the model with its weights
(zoo name with seeded random weights, path/to/file.py:factory, a torch.export .pt2 or an .onnx), quantize
it int8 with power-of-two scales (torchao PT2E; calibrated on --calibration FILE.npy, else the
example inputs), place every op on VTA or the board's CPU by cost (fused conv/dense epilogues,
host layout transforms), execute the steps in order -- VTA steps on the functional simulator
(--simulate) or a board deployed with HW (--board/--tracker), CPU steps with the integer reference
-- and check every op's output bit for bit against the integer reference. Prints per op where it
ran, its predicted time (measured too on boards) and bit-exactness; the total per image.

Schedules of the VTA layers: the fastest record of any family in --records (--schedules keeps one
family), else the tophub schedule VTA itself applies, else the best AutoTVM template schedule.
--layers keeps the layer-level run: only the offloaded layers of a workload, on random data.
Exit status 1 if any output differs from the reference.
"""

EPILOG = """\
examples:
  codesign run --workload resnet18 --hw pynq_1x16 --simulate
  codesign run --workload mynet.py:build --hw pynq_1x16 --simulate --calibration calib.npy --json
  codesign run --workload resnet18 --hw pynq_1x16 --simulate --records runs/sweep/records.jsonl --schedules vta
  codesign run --workload resnet18 --hw pynq_1x16 --board 192.168.2.99:9091   # after codesign deploy
  codesign run --workload resnet18 --hw pynq_4x8 --simulate --layers --plot run.png   # offloaded layers only
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("run", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default="resnet18",
                   help="network: zoo name, path/to/file.py:factory, .pt2 or .onnx (default: %(default)s)")
    p.add_argument("--hw", required=True, help="hardware config (name, alias or YAML)")
    p.add_argument("--calibration", metavar="FILE.npy", default=None,
                   help="calibration inputs (N, *input shape[1:]); the run uses their first image")
    p.add_argument("--records", nargs="*", default=[], metavar="R", help="records.jsonl / AutoTVM logs with schedules")
    p.add_argument("--schedules", choices=FAMILIES, default=None,
                   help="use records of this schedule family only (default: the fastest of any family)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--simulate", action="store_true", help="run on the functional simulator")
    where.add_argument("--board", metavar="HOST:PORT", default=None, help="run on this board (deployed with HW)")
    where.add_argument("--tracker", metavar="HOST:PORT", default=None, help="run on a board from this tracker")
    p.add_argument("--key", default=None, help="with --tracker: the board type (e.g. pynq)")
    p.add_argument("--profile", default=None, help="calibration profile for the predicted times")
    p.add_argument("--params", default=None, help="timing parameters JSON (default: shipped)")
    p.add_argument("--layers", action="store_true",
                   help="layer-level run: the workload's offloaded layers only, random int8 data, no CPU ops")
    p.add_argument("--plot", metavar="PNG", default=None, help="bar chart of the predicted time per step (per layer "
                   "with --layers, predicted vs measured)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.layers:
        for flag, value in (("--calibration", args.calibration), ("--schedules", args.schedules)):
            if value:
                raise ConfigError(f"{flag} applies to the whole-network run; --layers runs random data on "
                                  "the offloaded layers with the fastest record of any family")
        return run_layers(args)
    if args.plot:
        check_output_path(args.plot, "PNG")  # before the run, not after it
    hw = HwConfig.resolve(args.hw)
    params, source = resolve_params(args.profile, args.params, hw=hw.vta_model)
    records = load_schedule_records(args.records) if args.records else []

    def prepare():
        return whole.prepare_spec(args.workload, hw, calibration_file=args.calibration, records=records,
                                  family=args.schedules, params=params)

    show = not args.json and sys.stderr.isatty()
    bar = None

    def progress(prep):
        nonlocal bar
        if show:
            bar = tqdm(total=len(prep.plan.steps), desc="steps", unit="step", file=sys.stderr, leave=False)
        return (lambda _s: bar.update(1)) if bar is not None else None

    if args.simulate:
        prep = prepare()
        result = whole.run(prep, whole.simulator_executor(params), "functional simulator", progress(prep))
    else:
        with connect(args.board, args.tracker, args.key) as client:  # a board problem before the import
            info = check_loaded(client, hw)
            prep = prepare()
            where = f"board {client.name} ({info.get('board')}{', emulated' if info.get('emulated') else ''})"
            why = deployable(prep, info)
            if why is None:
                result = run_deployed(prep, client, where)
            else:  # the old path: each VTA step's tensors cross the wire, CPU steps run here
                result = whole.run(prep, fused_board_executor(client), where, progress(prep))
                result["notes"].append(f"per-step run (not a deployed bundle): {why}")
    if bar is not None:
        bar.close()
    untuned = _untuned(prep)
    if records and untuned:  # the user path: `codesign tune --workload` tunes exactly the plan's layers
        print(f"codesign run: {len(untuned)} VTA layer(s) of the plan have no usable record in --records "
              f"(e.g. {untuned[0]}); `codesign tune --workload {args.workload} --hw {args.hw} --records FILE` tunes "
              "every layer the plan asks VTA about", file=sys.stderr)
    if prep.chooser.stale:  # vta records are matched by knobs; those no longer in the space are counted
        print(skipped_line("codesign run: --records", len(prep.chooser.stale), prep.chooser.n_records),
              file=sys.stderr)
    result["params"] = source
    if args.plot:
        whole.plot_steps(prep, result, args.plot)
    if args.json:
        print(json.dumps(_clean(result)))
        return 0 if result["bit_exact"] else 1
    _print_whole(result, source)
    if args.plot:
        print(f"wrote {args.plot}")
    return 0 if result["bit_exact"] else 1


def deployable(prep: whole.Prepared, info: dict) -> str | None:
    """Why `prep` cannot run on the board as a deployed bundle (then each step goes over RPC), or None."""
    if protocol.INFER not in (info.get("functions") or []):
        return "the board server has no load_network/infer (an older codesign)"
    if not (info.get("bitstream") or {}).get("sha256"):
        return "the board's bitstream is unknown (deploy HW first)"
    if isinstance(prep.example, tuple):
        return "the network takes several inputs"
    return bundle.why_not(prep)


def cpu_work(prep: whole.Prepared, op) -> dict | None:
    """A CPU GEMM step's work as the CPU model counts it (the runtime's one NumPy kernel per kind
    is fitted as spatial_pack, a dense as dense), at the run's batch; None for other kinds."""
    if op.kind not in ("conv2d", "linear"):
        return None
    rows = int(prep.network.inputs[0][1][0])
    shape = kinds.get(op.kind).cpu(prep.network, op, rows, 0, 0)
    work = dense_work(shape, CPU_DTYPE) if isinstance(shape, Dense) else \
        conv_work(shape, CPU_DTYPE, SPATIAL_PACK) if isinstance(shape, ConvShape) else shape
    return {"name": work.name, "kind": work.kind, "dtype": work.dtype, "macs": int(work.macs), "bytes": int(work.bytes)}


def run_deployed(prep: whole.Prepared, client, where: str) -> dict:
    """The network as a bundle on the board: loaded once, one inference (only the input and the
    output cross the wire), every step measured there; the output checked against run_int."""
    start = time.perf_counter()
    blob = bundle.to_bytes(prep, client.info()["bitstream"]["sha256"])
    client.load_network(blob)
    reply = client.infer(prep.example)
    reference = run_int(prep.qnet, prep.example)
    env = dict(reference)
    bad = 0
    for t, y in zip(prep.network.outputs, reply.outputs):
        env[t] = y
        bad += int(np.count_nonzero(y != reference[t])) if y.shape == reference[t].shape else int(reference[t].size)
    exe = whole.Execution(env, reference)
    works: dict[str, dict] = {}
    for step in prep.plan.steps:
        chosen = prep.schedules.get(step.name)
        sched = None
        if step.placement == "vta" and step.pool is not None:
            sched = {"source": "pool", "family": "alu", "index": 0, "layer": step.pool.name}
        elif chosen is not None:
            sched = {"source": chosen.source, "family": chosen.family, "index": int(chosen.config.index),
                     "layer": step.layer.name}
        for k, name in enumerate(step.ops):
            kind = step.kind if step.host else prep.network.op(name).kind
            row = whole.OpRow(name, kind, step.placement, step.name, step.predicted_s * 1e3 if k == 0 else 0.0,
                              bad == 0, bad, step.reason if k == 0 else f"fused into {step.name}",
                              step.transform if k == 0 else None, sched if k == 0 else None, host=step.host)
            if k == 0 and step.name in reply.step_ms:
                row.measured_ms = reply.step_ms[step.name]
                if step.placement == "vta":
                    row.measured_device_ms = reply.device_ms[step.name]
            exe.rows.append(row)
            if k == 0 and step.placement == "cpu" and not step.host and row.measured_ms is not None:
                work = cpu_work(prep, prep.network.op(name))
                if work is not None:  # what `codesign calibrate cpu RUN.json` fits the CPU model to
                    works[name] = work
    result = whole.summary(prep, exe, where + ", deployed bundle", time.perf_counter() - start)
    for r in result["ops"]:
        if r["name"] in works:
            r["cpu_work"] = works[r["name"]]
    result["cpu"] = cpu_of(prep.plan.board)
    result["measured_ms"] = sum(reply.step_ms.values())
    result["measured_rpc_ms"] = reply.rpc_s * 1e3
    result["bundle_bytes"] = len(blob)
    result["wire_bytes"] = {"sent": reply.sent_bytes, "received": reply.received_bytes}
    result["bit_exact_scope"] = "network outputs (intermediate tensors stay on the board)"
    return result


def _untuned(prep: whole.Prepared) -> list[str]:
    """Names of the plan's VTA layers whose schedule came from no --records record."""
    return sorted({step.layer.name for step in prep.plan.steps
                   if step.placement == "vta" and step.layer is not None
                   and getattr(prep.schedules.get(step.name), "source", "records") != "records"})


def _print_whole(result: dict, source: str) -> None:
    print(f"{result['network']} (batch {result['batch']}) on {result['hw']} + {result['board']} CPU; VTA steps on the "
          f"{result['executor']}; predicted with {source}")
    board = "measured_vta_device_ms" in result
    deployed = "measured_ms" in result
    print(f"{'op':<24} {'kind':<20} {'on':<4} {'pred ms':>8}"
          + (f" {'meas ms':>8} {'meas dev':>8}" if deployed else f" {'meas dev':>8} {'meas call':>9}" if board else "")
          + f" {'output':<10} schedule / transform")
    for r in result["ops"]:
        pred = f"{r['predicted_ms']:8.3f}" if r["predicted_ms"] or r["name"] == r["step"] else f"{'(fused)':>8}"
        meas = ""
        if deployed:
            meas = (f" {r['measured_ms']:8.3f}" if "measured_ms" in r else f" {'-':>8}") + (
                f" {r['measured_device_ms']:8.3f}" if "measured_device_ms" in r else f" {'-':>8}")
        elif board:
            meas = (f" {r['measured_device_ms']:8.3f} {r.get('measured_call_ms', float('nan')):9.3f}"
                    if "measured_device_ms" in r else f" {'-':>8} {'-':>9}")
        out = "-" if r.get("host") else "bit-exact" if r["bit_exact"] else f"{r['mismatches']} DIFFER"
        sched = r.get("schedule")
        extra = (f"{sched['source']}:{sched['family']} #{sched['index']}" if sched else "")
        if r.get("transform"):
            extra += f" [{r['transform']}]"
        print(f"{r['name'][:24]:<24} {r['kind'][:20]:<20} {r['placement']:<4} {pred}{meas} {out:<10} {extra}")
    for note in result["notes"]:
        print(f"note: {note}")
    print(f"total per image: {result['latency_ms']:.3f} ms predicted (VTA {result['vta_ms']:.3f} ms + CPU "
          f"{result['cpu_ms']:.3f} ms + host passes {result['host_ms']:.3f} ms), {result['throughput_ips']:.2f} images/s; outputs "
          f"{'bit-exact' if result['bit_exact'] else 'NOT bit-exact: ' + ', '.join(result['mismatched_ops'][:5])}")
    if deployed:
        print(f"measured on the board (deployed bundle, every step there): {result['measured_ms']:.3f} ms per "
              f"inference ({result['measured_rpc_ms']:.3f} ms with the RPC round trip); outputs checked against "
              "the integer reference")
    elif board:
        calls = result.get("measured_vta_call_ms")
        print(f"measured on the board: VTA device {result['measured_vta_device_ms']:.3f} ms"
              + (f", VTA calls {calls:.3f} ms" if calls is not None else "") + " (CPU steps run on this host: predicted only)")
    print(f"schedules: {', '.join(f'{k} x{v}' for k, v in result['schedules'].items()) or 'none (nothing on VTA)'}; "
          f"wall time {result.get('wall_s', 0.0):.1f} s")


def run_layers(args: argparse.Namespace) -> int:
    if args.plot:
        check_output_path(args.plot, "PNG")  # before the run, not after it
    hw = HwConfig.resolve(args.hw)
    params, source = resolve_params(args.profile, args.params, hw=hw.vta_model)
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
    if result.get("records_skipped"):  # vta records are matched by knobs; those no longer in the space
        print(skipped_line("codesign run: --records", result["records_skipped"], len(records)), file=sys.stderr)
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
        out = "-" if r.get("host") else "bit-exact" if r["bit_exact"] else f"{r['mismatches']} DIFFER"
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
