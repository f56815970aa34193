"""A network deployed on an emulated board (docs/board.md): the `.vtanet` bundle of ResNet-18
(seeded weights, pynq_1x16) behind a real board server on 127.0.0.1.

Prints one JSON object:
- bundle: its bytes, the time to build and write it, the time the board takes to verify and load it
  (`load_network`: sha256 of every part, programs resident in the board's buffers);
- rpc_overhead_ms: one inference over RPC (`BoardClient.infer`, the host's round trip) minus the
  board's own `Network.run` of it (the in-process path); target <= 5 ms. Only the input and the
  output cross the wire: `wire_bytes` beside the input's and output's bytes;
- steps: per step measured ms (wall on the board; VTA: also device ms, which on the emulated board
  is the timing model's) against the plan's predicted ms;
- cpu_kernels: the runtime's CPU GEMM steps (the op kinds' int_ref, NumPy) in GMAC/s on this
  machine, beside the integer reference's own run of the same ops (`run_int`, the same kernels)
  and the rates the CPU model assumes for the board's CPU (sim/cpu_params.json).

Usage: `nice python benchmarks/board_network.py [--workload resnet18] [--hw pynq_1x16] [--repeat 3]`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time

import numpy as np

from codesign.bitstream.bitfile import make_header
from codesign.board.client import BoardClient
from codesign.board.local import local_board
from codesign.commands.run import cpu_work
from codesign.cpu import cpu_of, shipped_model
from codesign.hw.config import HwConfig
from codesign.netrun import bundle
from codesign.netrun import network as whole
from codesign.network.importer import load_model
from codesign.network.reference import int_op, run_int


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="resnet18")
    ap.add_argument("--hw", default="pynq_1x16")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--convs", type=int, default=6, help="conv shapes whose int8 CPU kernel is timed")
    args = ap.parse_args()
    hw = HwConfig.resolve(args.hw)
    module, inputs, name = load_model(args.workload)
    t0 = time.perf_counter()
    prep = whole.prepare(module, inputs, name, hw)
    prepare_s = time.perf_counter() - t0
    body = bytes(range(256)) * 8
    bit = make_header("vta_wrapper", "7z020clg484", "2026/11/22", "13:00:00", len(body)) + body
    sha = hashlib.sha256(bit).hexdigest()
    t0 = time.perf_counter()
    blob = bundle.to_bytes(prep, sha)
    build_s = time.perf_counter() - t0
    x = np.asarray(prep.example, dtype=np.float32)
    out: dict = {"workload": name, "hw": hw.name, "prepare_s": prepare_s}
    with local_board(hw.name, max_payload=max(len(blob) + 4096, 64 << 20)) as board:
        with BoardClient(board.addr) as client:
            client.program(bit, sha, hw.name)
            t0 = time.perf_counter()
            info = client.load_network(blob)
            load_rpc_s = time.perf_counter() - t0
            replies = [client.infer(x) for _ in range(args.repeat)]
    reference = run_int(prep.qnet, x)
    exact = all(np.array_equal(r.outputs[0], reference[prep.network.outputs[0]]) for r in replies)
    overhead = [r.rpc_s * 1e3 - r.run_ms for r in replies]
    last = replies[-1]
    out["bundle"] = {"bytes": len(blob), "build_s": build_s, "load_s_on_board": info["load_s"],
                     "load_s_with_rpc": load_rpc_s, "resident_bytes": info["resident_bytes"]}
    out["bit_exact_vs_integer_reference"] = exact
    out["rpc_overhead_ms"] = {"median": statistics.median(overhead), "all": overhead, "target": 5.0}
    out["inference_ms"] = {"rpc_round_trip": [r.rpc_s * 1e3 for r in replies], "board_run": [r.run_ms for r in replies]}
    out["wire_bytes"] = {"sent": last.sent_bytes, "received": last.received_bytes, "input": int(x.nbytes),
                         "output": int(sum(o.nbytes for o in last.outputs))}
    steps = []
    for s in prep.plan.steps:
        if s.host:
            continue
        row = {"step": s.name, "unit": s.placement, "predicted_ms": s.predicted_s * 1e3,
               "measured_ms": last.step_ms[s.name]}
        if s.name in last.device_ms and s.placement == "vta":
            row["device_ms"] = last.device_ms[s.name]
        steps.append(row)
    vta = [r for r in steps if r["unit"] == "vta"]
    cpu = [r for r in steps if r["unit"] == "cpu"]
    out["steps_summary"] = {
        "vta_steps": len(vta), "cpu_steps": len(cpu),
        "vta_device_ms": sum(r["device_ms"] for r in vta), "vta_predicted_ms": sum(r["predicted_ms"] for r in vta),
        "vta_wall_ms": sum(r["measured_ms"] for r in vta),
        "cpu_measured_ms": sum(r["measured_ms"] for r in cpu), "cpu_predicted_ms": sum(r["predicted_ms"] for r in cpu)}
    out["steps"] = steps
    # CPU kernels: the runtime's GEMM steps against run_int's own op calls and the model's rates
    params = shipped_model().params(cpu_of(prep.plan.board))
    kernels = []
    for s in prep.plan.steps:
        if s.placement != "cpu" or s.host:
            continue
        op = prep.network.op(s.ops[0])
        work = cpu_work(prep, op)
        if work is None or not work["macs"]:
            continue
        xs = [reference[t] for t in op.inputs]
        t0 = time.perf_counter()
        for _ in range(args.repeat):
            int_op(prep.qnet, op, xs)
        ref_s = (time.perf_counter() - t0) / args.repeat
        rate = params.rate(work["kind"], work["dtype"])
        kernels.append({"op": op.name, "kind": work["kind"], "macs": work["macs"],
                        "runtime_gmacs": work["macs"] / (last.step_ms[s.name] / 1e3) / 1e9,
                        "reference_gmacs": work["macs"] / ref_s / 1e9,
                        "model_gmacs": None if rate is None else float(rate[0]),
                        "model_basis": None if rate is None else rate[1]})
    out["cpu_kernels"] = kernels
    # the same kernels on the network's conv shapes (on VTA in this plan), one op per distinct shape
    seen, convs = set(), []
    for op in prep.network.ops:
        if op.kind != "conv2d" or len(convs) >= args.convs:
            continue
        key = (tuple(op.shape), tuple(op.attrs.get("weight_shape", ())), op.attrs.get("stride"))
        if key in seen:
            continue
        seen.add(key)
        work = cpu_work(prep, op)
        xs = [reference[t] for t in op.inputs]
        t0 = time.perf_counter()
        int_op(prep.qnet, op, xs)
        sec = time.perf_counter() - t0
        rate = params.rate(work["kind"], work["dtype"])
        convs.append({"op": op.name, "shape": list(op.shape), "macs": work["macs"], "ms": sec * 1e3,
                      "runtime_gmacs": work["macs"] / sec / 1e9, "model_gmacs": None if rate is None else float(rate[0])})
    out["cpu_conv_kernels"] = convs
    out["cpu_model"] = {"cpu": params.cpu, "gmacs": dict(params.gmacs)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
