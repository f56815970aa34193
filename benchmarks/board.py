"""Board benchmark: the cost of measuring over tvm.rpc, on emulated PYNQ boards (localhost).

1. RPC overhead per measurement: for the same configs of a ResNet-18 layer (compiled with the
   same inputs and weights, as in tuning), one `BoardClient.run` round trip minus the board's own
   driver call time (`call_s`, which on the emulated board is dominated by functional
   simulation). That difference is what the RPC path adds: encoding, sending the program,
   session dispatch, checks, and the reply. Median over configs. Target: <= 5 ms.
   `rpc_overhead_ms_median` is what `RPCRunner` does when tuning (no correctness check): the
   board's `run_cached`, whose session holds the layer's inputs and weights after its first run
   (docs/board.md "The run protocol"), with the outputs returned as sha256;
   `..._outputs_bytes` the same with the output bytes returned (`--check-correctness`,
   `codesign board run`); `..._uncached` every blob whole with output bytes
   (`BoardClient(cache=False)`: the path before the cache); `rpc_overhead_ms_first_run` a new
   session's first (cold) run of one program; `rpc_sent_kib_median` the request bytes sent per
   run. Also split: the transport alone (round trip minus the board's whole request handler,
   `server_s`) and the overhead for a one-instruction program (fixed per-call cost, no
   payload). For context it also prints the local simulator runner's median wall time per
   measurement (timing model only) and the RPC runner's median wall time per
   measurement (compile with data + RPC + emulated functional run).
2. Throughput: measurements/s of `RPCRunner` with 1 and with 2 emulated boards on the same
   configs. Target: 2 boards >= 1.7x one board. Each emulated board needs a core for its
   functional simulation, so on a loaded 2-core machine the ratio is bounded by free CPU, not
   by the runner.

Prints one JSON object. Usage: `nice python benchmarks/board.py [--layer SPEC] [--configs N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from codesign.board.client import BoardClient
from codesign.board.local import local_board
from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import random_inputs
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.tune.measure import MeasureInput, SimulatorRunner
from codesign.tune.rpc_runner import RPCRunner
from codesign.vta.program import ProgramBuilder
from codesign.workloads import parse_layer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hw", default="pynq_1x16")
    ap.add_argument("--layer", default="conv2d:1,128,28,28,128,3,3,1,1", help="a ResNet-18 conv")
    ap.add_argument("--configs", type=int, default=24, help="configs measured per phase")
    args = ap.parse_args()
    hw, layer = HwConfig.resolve(args.hw), parse_layer(args.layer)
    space = get_space(layer, hw)
    valid = [int(i) for i in space.valid_indices()]
    step = max(1, len(valid) // args.configs)
    configs = [space.get(i) for i in valid[::step][:args.configs]]
    inputs = [MeasureInput(layer, hw, c) for c in configs]
    out: dict = {"hw": hw.name, "layer": layer.name, "configs": len(configs), "cpus": os.cpu_count(),
                 "note": "shared, loaded machine (2 cores, several other jobs); medians"}

    sim = SimulatorRunner(hw)
    sim.run(inputs[:1])  # numba warm-up
    walls = [r.wall_s for r in sim.run(inputs)]
    out["simulator_runner_wall_ms_median"] = 1e3 * statistics.median(walls)

    with local_board(args.hw) as b1, local_board(args.hw) as b2:
        data, weight = random_inputs(layer)
        blobs = [compile_layer(layer, c, hw, data=data, weight=weight).to_bytes() for c in configs]
        tiny = ProgramBuilder(hw)
        tiny.finish()
        tiny_blob = tiny.build().to_bytes()
        # The three ways, interleaved per config so that they share the machine's load: the
        # runner's tuning path and the full-output path on one cached session (board 1), the old
        # whole-blob path on a session of board 2.
        modes = {"": "sha256", "_outputs_bytes": "bytes", "_uncached": "bytes"}
        with BoardClient(b1.addr) as cached, BoardClient(b2.addr, cache=False) as plain:
            first = cached.run(blobs[0], outputs="sha256")  # the session's first (cold) run
            out["rpc_overhead_ms_first_run"] = 1e3 * (first.rpc_s - first.call_s)
            plain.run(blobs[0])
            overhead: dict[str, list[float]] = {m: [] for m in modes}
            transport: dict[str, list[float]] = {m: [] for m in modes}
            sent = []
            for blob in blobs:
                for suffix, outputs in modes.items():
                    client = plain if suffix == "_uncached" else cached
                    before = client.stats["sent_bytes"]
                    reply = client.run(blob, outputs=outputs)
                    overhead[suffix].append(reply.rpc_s - reply.call_s)
                    transport[suffix].append(reply.rpc_s - reply.header["server_s"])
                    if suffix == "":
                        sent.append(client.stats["sent_bytes"] - before)
            for suffix in modes:
                out[f"rpc_overhead_ms_median{suffix}"] = 1e3 * statistics.median(overhead[suffix])
                out[f"rpc_overhead_ms_max{suffix}"] = 1e3 * max(overhead[suffix])
                # of which the transport (host and tvm.rpc, outside the board's request handler)
                out[f"rpc_transport_ms_median{suffix}"] = 1e3 * statistics.median(transport[suffix])
            # request bytes that travelled per run (the rest was named by sha256)
            out["rpc_sent_kib_median"] = statistics.median(sent) / 1024
            # the fixed per-call cost: a one-instruction program
            small = []
            for _ in range(len(blobs)):
                reply = cached.run(tiny_blob, outputs="sha256")
                small.append(reply.rpc_s - reply.call_s)
            out["rpc_overhead_ms_median_tiny_program"] = 1e3 * statistics.median(small)
        out["program_blob_kib_median"] = statistics.median(len(b) for b in blobs) / 1024
        out["target_rpc_overhead_ms"] = 5.0

        rates = {}
        for n, addrs in ((1, [b1.addr]), (2, [b1.addr, b2.addr])):
            runner = RPCRunner(addrs)
            try:
                runner.run(inputs[:n])  # connect every session first
                start = time.perf_counter()
                res = runner.run(inputs)
                elapsed = time.perf_counter() - start
            finally:
                runner.close()
            assert all(r.ok for r in res), [r.error for r in res if not r.ok]
            rates[n] = len(res) / elapsed
            if n == 1:
                out["rpc_runner_wall_ms_median"] = 1e3 * statistics.median(r.wall_s for r in res)
        out["measurements_per_s_1_board"] = rates[1]
        out["measurements_per_s_2_boards"] = rates[2]
        out["speedup_2_boards"] = rates[2] / rates[1]
        out["target_speedup_2_boards"] = 1.7
    out["rpc_overhead_ok"] = out["rpc_overhead_ms_median"] <= out["target_rpc_overhead_ms"]
    out["rpc_overhead_outputs_bytes_ok"] = out["rpc_overhead_ms_median_outputs_bytes"] <= out["target_rpc_overhead_ms"]
    out["speedup_ok"] = out["speedup_2_boards"] >= out["target_speedup_2_boards"]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
