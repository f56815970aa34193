"""Where co-design pays (issue 14): per board, the best design at the board's verified clock vs
the stock 1x16 config, with the inner (schedule) search exact.

For each board and network:
- clock: the board's verified clock (PYNQ-Z1 100 MHz, Ultra96 250 MHz). ZCU104 and KV260 have no
  verified clock; they are evaluated at `--unverified-clock` (default 250 MHz, the ZU3EG's) and
  the result says `clock_verified: false`.
- stock: VTA's 1x16_i8w8a32_15_15_18_17 on the board's target at that clock (128-bit port on ZU+).
- candidates: every usable design of the board's shipped space (`hw_configs/spaces/<board>.yaml`)
  at that clock, all AXI widths. "le_stock": designs with LUT, FF, BRAM18 and DSP each at or
  below the stock's (resource model); "board": every design that fits the board.
- latency per image of the part VTA offloads (`codesign.schedule.partition`; e.g. the 3-channel
  stem stays on the CPU): every unique offloaded layer timed on every valid schedule config
  (exact inner search, as `codesign.tune.exhaustive`), best per layer, summed with
  multiplicities, divided by the batch the design runs (`Workload.for_hw`). Designs that differ
  only in buffer sizes share the timing of each schedule (it does not depend on them).
- search over designs is exact too: branch and bound on the compute bound
  (sum of layer MACs / (BATCH*BLOCK_IN*BLOCK_OUT) / clock): candidates in order of that bound;
  any design whose bound is not below the best latency found cannot win and is not timed.
  With `--maximal-buffers` (default) only designs whose four buffer sizes are not all <= those of
  another candidate with the same core, clock and AXI width are timed: buffer sizes only decide
  which schedules are valid (a schedule valid on smaller buffers is valid, and compiles and times
  identically, on larger ones), so a design's best latency cannot beat that of a design with
  larger buffers. `--check-maximal` times every candidate as well and reports whether the two
  minima agree.

Each evaluated design's latency is appended to `--cache` (JSONL, one line per design and network)
as it finishes; a rerun reuses it. Prints one JSON object:
{boards: {board: {network: {clock_mhz, clock_verified, stock, le_stock, board, ...}}}, wall_s}.

Usage: `python benchmarks/boards.py [--boards pynq-z1,ultra96,kv260,zcu104] [--networks resnet18]
[--scopes le_stock,board] [--cache runs/boards/cache.jsonl]`. Run it with `nice`: on 2 shared
cores ResNet-18 takes ~2.5 s per design.
"""

from __future__ import annotations

import os

# One BLAS thread per process (tiny matmuls; see benchmarks/compiler.py).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from codesign.errors import CodesignError  # noqa: E402
from codesign.evaluate.run import measure_seconds  # noqa: E402
from codesign.hw.config import HwConfig  # noqa: E402
from codesign.hw.resources import RESOURCES, estimate  # noqa: E402
from codesign.hw.space import HwSpace  # noqa: E402
from codesign.schedule import ScheduleSpace, partition  # noqa: E402
from codesign.workloads import get_workload  # noqa: E402

STOCK_SHAPE = "1x16_i8w8a32_15_15_18_17"


# Seconds of (design group, layer, schedule index). A schedule's program and timing do not depend
# on the buffer sizes (they only decide validity; tests/test_boards.py checks it), so designs that
# differ only in buffers share one timing per schedule: each is timed once per group.
_TIMES: dict[tuple, float | None] = {}


def _group(hw: HwConfig) -> tuple:
    return (hw.TARGET, hw.LOG_BATCH, hw.LOG_BLOCK_IN, hw.LOG_BLOCK_OUT, hw.clock_mhz, hw.axi_bits)


def network_latency_ms(hw: HwConfig, network: str) -> float | None:
    """Latency per image (ms) with the best schedule of every offloaded layer (every valid
    schedule timed: exhaustive); None if a layer has no valid schedule on `hw`."""
    wl = get_workload(network).for_hw(hw)
    total = 0.0
    for layer, count in partition(wl, hw)[0]:
        space = ScheduleSpace(layer, hw)
        best = math.inf
        for idx in space.valid_indices():
            key = (_group(hw), layer.name, int(idx))
            if key not in _TIMES:
                try:
                    _TIMES[key] = measure_seconds(layer, space.get(int(idx)), hw)[0]
                except CodesignError:  # a config the compiler rejects is not a candidate
                    _TIMES[key] = None
            s = _TIMES[key]
            if s is not None and s < best:
                best = s
        if best == math.inf:
            return None
        total += best * count
    return total / wl.batch * 1e3


def compute_bound_ms(hw: HwConfig, network: str) -> float:
    """Lower bound on the latency per image: GEMM MACs at one BATCH*BLOCK_IN*BLOCK_OUT per cycle."""
    wl = get_workload(network).for_hw(hw)
    macs = sum(layer.macs * count for layer, count in partition(wl, hw)[0])
    return macs / hw.macs_per_cycle / hw.clock_hz / wl.batch * 1e3


class Cache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[tuple[str, str], float | None] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                    self.data[(row["hw"], row["network"])] = row["latency_ms"]
                except (json.JSONDecodeError, KeyError):
                    continue  # a half-written last line of an interrupted run
        path.parent.mkdir(parents=True, exist_ok=True)

    def get(self, hw: HwConfig, network: str) -> tuple[float | None, bool]:
        key = (hw.name, network)
        if key in self.data:
            return self.data[key], False
        lat = network_latency_ms(hw, network)
        self.data[key] = lat
        with self.path.open("a") as f:
            f.write(json.dumps({"hw": hw.name, "network": network, "latency_ms": lat}) + "\n")
        return lat, True


def design_summary(hw: HwConfig, board: Any, latency_ms: float | None) -> dict[str, Any]:
    res = estimate(hw, board)
    return {"config": hw.name, "latency_ms": latency_ms, "resources": res.as_dict(),
            "area": round(res.area(board), 4)}


BUFFERS = ("LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE")


def maximal_buffers(candidates: list[HwConfig]) -> list[HwConfig]:
    """Candidates not dominated in all four buffer sizes by another with the same core, clock, AXI."""
    def key(h: HwConfig) -> tuple:
        return (h.LOG_BATCH, h.LOG_BLOCK_IN, h.LOG_BLOCK_OUT, h.clock_mhz, h.axi_bits)

    def bufs(h: HwConfig) -> tuple[int, ...]:
        return tuple(getattr(h, b) for b in BUFFERS)

    out = []
    for h in candidates:
        b = bufs(h)
        if not any(key(o) == key(h) and o != h and all(x >= y for x, y in zip(bufs(o), b)) for o in candidates):
            out.append(h)
    return out


def best_of(candidates: list[HwConfig], network: str, cache: Cache, log: Any) -> tuple[Any, dict[str, int]]:
    """Exact minimum latency over `candidates` (branch and bound on the compute bound)."""
    order = sorted(candidates, key=lambda h: (compute_bound_ms(h, network), h.name))
    best: tuple[float, HwConfig] | None = None
    stats = {"candidates": len(order), "timed": 0, "pruned": 0, "no_schedule": 0}
    for hw in order:
        if best is not None and compute_bound_ms(hw, network) >= best[0]:
            stats["pruned"] += 1
            continue
        lat, fresh = cache.get(hw, network)
        stats["timed"] += 1
        if fresh:
            print(f"  {network} {hw.name}: {lat if lat is None else round(lat, 3)} ms", file=log, flush=True)
        if lat is None:
            stats["no_schedule"] += 1
            continue
        if best is None or lat < best[0]:
            best = (lat, hw)
    return best, stats


def run_board(name: str, networks: list[str], scopes: list[str], unverified_clock: float, cache: Cache,
              log: Any, maximal: bool = True, check: bool = False) -> dict[str, Any]:
    space = HwSpace.load(name)
    board = space.board
    clock = board.verified_clock_mhz if board.verified_clock_mhz is not None else unverified_clock
    stock = HwConfig.from_name(f"{board.target}_{STOCK_SHAPE}").with_(clock_mhz=clock, axi_bits=board.axi_bits)
    stock_res = estimate(stock, board)
    at_clock = [h for h in space.enumerate() if float(h.clock_mhz) == float(clock)]
    sets = {
        "le_stock": [h for h in at_clock if all(getattr(estimate(h, board), r) <= getattr(stock_res, r)
                                                for r in RESOURCES)],
        "board": at_clock,
    }
    out: dict[str, Any] = {}
    for network in networks:
        stock_lat, _ = cache.get(stock, network)
        vta, cpu = partition(get_workload(network).for_hw(stock), stock)
        entry: dict[str, Any] = {
            "offloaded_unique_layers": len(vta), "cpu_layers": [layer.name for layer, _, _ in cpu],
            "clock_mhz": clock, "clock_verified": board.clock_verified(clock), "clock_status": board.clock_status(),
            "space": str(space.source), "stock": design_summary(stock, board, stock_lat),
        }
        for scope in scopes:
            pool = maximal_buffers(sets[scope]) if maximal else sets[scope]
            best, stats = best_of(pool, network, cache, log)
            stats["before_buffer_pruning"] = len(sets[scope])
            if check and maximal:
                full, _ = best_of(sets[scope], network, cache, log)
                stats["check_maximal_agrees"] = (full is None and best is None) or (
                    full is not None and best is not None and abs(full[0] - best[0]) <= 1e-9 * full[0])
            if best is None:
                entry[scope] = {"config": None, **stats}
                continue
            lat, hw = best
            entry[scope] = {**design_summary(hw, board, lat), **stats,
                            "speedup_vs_stock": round(stock_lat / lat, 4) if stock_lat else None}
        out[network] = entry
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--boards", default="pynq-z1,ultra96,kv260,zcu104")
    ap.add_argument("--networks", default="resnet18")
    ap.add_argument("--scopes", default="le_stock,board")
    ap.add_argument("--unverified-clock", type=float, default=250.0,
                    help="clock for boards without a verified one (default 250 MHz, the ZU3EG's)")
    ap.add_argument("--cache", default="runs/boards/cache.jsonl")
    ap.add_argument("--no-maximal-buffers", dest="maximal", action="store_false",
                    help="time every candidate, not only the buffer-maximal ones")
    ap.add_argument("--check-maximal", action="store_true",
                    help="also time every candidate and report whether the minima agree")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    cache = Cache(Path(args.cache))
    scopes = [s for s in args.scopes.split(",") if s]
    for s in scopes:
        if s not in ("le_stock", "board"):
            print(f"error: --scopes {s!r}: allowed le_stock, board", file=sys.stderr)
            return 2
    try:
        result = {b: run_board(b, args.networks.split(","), scopes, args.unverified_clock, cache, sys.stderr,
                               args.maximal, args.check_maximal)
                  for b in args.boards.split(",")}
    except CodesignError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"boards": result, "wall_s": round(time.perf_counter() - start, 1),
                      "note": "machine shared by several engineers (2 cores); wall time is indicative"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
