"""Where the latency of a zoo network's offloaded layers goes (issue 19 targets): per unique layer,
the best `vta`-family schedule found against its floor, and which module is busy.

Best schedule: the template optimum (exhaustive over the AutoTVM family); a hill climb on the `vta`
family without `pad_skip` from the `--starts` best template points (every valid one-knob neighbour
measured, move to the best, up to `--evals` measurements: `without_pad_skip_ms`); then random valid
`pad_skip` points of whole-plane tiles (up to `--evals`/2), the best points' `pad_skip` twins
(pad_skip = 1 with the kernel's own fold: row tiles, `_pad_skip_twins`) and a climb over the whole
family from the best points. A layer with at most `--exhaustive-max` valid `vta` schedules has
every one timed instead (`search`: "exhaustive", the family's true optimum; the climb is a local
search and misses optima several knobs away, e.g. ACC-slot nests with other tile sizes).

Floor, in device cycles (the timing model's own costs, `sim/timing_params.json`):
- compute: every MAC on real input on the GEMM core (`roofline.compute_cycles`; `floor_padded_ms`
  counts every MAC of the padded conv instead, what a schedule without `pad_skip` runs, and
  `floor_no_reset_padded_ms` that without the reset) + the ACC reset (one cycle per
  accumulator row, the GEMM's II=1 with reset_reg) + the requantization epilogue (each of its ALU
  ops one pass over every accumulator row at `alu_cycles_per_uop`, II=2): GEMM, reset and ALU all
  run on the one compute module, so they add;
- memory: the roofline's minimum DRAM traffic over the shared port (`roofline.memory_cycles`);
- floor = max(compute, memory): loads run on the load module, concurrently with the compute
  module (the decoupled pipeline, virtual threads), so ALU work overlaps loads in memory-bound
  layers; the device floor plus one call's minimum host overhead is `floor_ms`.
The gap of the best schedule is split, in a compute-bound layer, into compute overhead (compute
busy above the compute floor: instruction and loop fills, LOAD UOP on the compute queue, port waits
of those loads) and compute idle (cycles the compute module waits for loads or the port: pipeline
fill); in a memory-bound one into the load module's busy cycles above the memory floor (per-DMA
row and instruction overheads, pads, operands loaded more than once) and its idle cycles.
`pad_skip` schedules run fewer GEMM cycles than `mac_cycles` (the taps that read zero padding are
skipped), so their compute overhead can be negative.

Prints one JSON object (per config: per-image totals and per-layer rows).
Usage: `python benchmarks/latency_gap.py [--nets resnet18] [--hw pynq_1x16,pynq_4x8] [--evals 600]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from codesign.analysis.roofline import MIN_INSNS, roofline
from codesign.evaluate.blocks import compile_blocks
from codesign.evaluate.run import layer_io_bytes, measure
from codesign.hw.config import HwConfig
from codesign.mapping.batch import geometry
from codesign.schedule import get_space, partition
from codesign.schedule.templates import clip_epilogue
from codesign.tune.exhaustive import exhaustive_table
from codesign.vta import timing
from codesign.workloads import get_workload


def floors(layer, hw: HwConfig) -> dict:
    """Compute and memory floors of `layer` in device cycles (module docstring)."""
    r = roofline(layer, hw)
    params = timing.default_params()
    g = geometry(layer, hw)
    rows = g.b * g.co * g.out_h * g.out_w  # accumulator rows (BATCH x BLOCK_OUT vectors)
    alu = len(clip_epilogue(0)) * rows * params.alu_cycles_per_uop
    compute = r.compute_cycles + rows + alu
    padded = layer.macs / hw.macs_per_cycle + rows + alu  # every MAC of the padded conv

    def call_ms(cycles: float) -> float:
        return 1e3 * timing.predict_seconds(cycles, MIN_INSNS, hw, params, *layer_io_bytes(layer))

    return {"mac_cycles": r.compute_cycles, "padded_mac_cycles": layer.macs / hw.macs_per_cycle,
            "reset_cycles": float(rows), "alu_cycles": float(alu),
            "compute_floor": float(compute), "memory_floor": float(r.memory_cycles),
            "floor_cycles": float(max(compute, r.memory_cycles)),
            "floor_ms": call_ms(max(compute, r.memory_cycles)),
            "floor_padded_ms": call_ms(max(padded, r.memory_cycles)),
            "floor_no_reset_padded_ms": call_ms(max(padded - rows, r.memory_cycles)),
            "roofline_ms": 1e3 * r.bound_call_seconds}


def _climb(space, layer, hw, times: dict[int, float], starts: int, max_evals: int, allowed) -> None:
    """Hill climbing from the `starts` best measured points over the valid one-knob neighbours
    that `allowed(indices)` keeps: measure them all, move to the best, until none improves."""
    valid = space.valid_indices()
    for start in sorted(times, key=times.get)[:starts]:
        cur = start
        while len(times) < max_evals:
            pos = space.positions_of(np.array([cur]))[0]
            cand = []
            for j, d in enumerate(space.dims):
                q = np.repeat(pos[None, :], d, axis=0)
                q[:, j] = np.arange(d)
                cand.append(space.index_of(q))
            nbrs = np.unique(np.concatenate(cand))
            nbrs = nbrs[np.isin(nbrs, valid)]
            nbrs = nbrs[allowed(nbrs)].tolist()
            for i in nbrs:
                if i not in times and len(times) < max_evals:
                    times[i] = measure(layer, space.get(i), hw).seconds
            best = min(nbrs + [cur], key=lambda i: times.get(i, float("inf")))
            if best == cur:
                break
            cur = best


def _pad_skip_twins(space, points: list[int]) -> list[int]:
    """The valid configs that are `points` with pad_skip = 1 and the kernel's own fold and no lift
    (uop_fold = uop_lift = 0, rule pad_skip_tile): two or three knobs away, so a one-knob climb from
    a point with a chosen fold never reaches its padding-skipping twin."""
    out = []
    for i in points:
        knobs = {**space.get(i).knobs, "pad_skip": 1, "uop_fold": 0, "uop_lift": 0}
        if space.why_invalid(knobs) is None:
            out.append(space.from_knobs(knobs).index)
    return out


def best_vta(layer, hw: HwConfig, starts: int, evals: int, exhaustive_max: int = 0) -> tuple[dict, object, dict]:
    """(template optimum and the best without pad_skip, best vta config, its measurement): the hill
    climb without pad_skip from the template's best points, then over the whole family from there
    and from every valid pad_skip point; or every valid schedule timed when there are at most
    `exhaustive_max` (module docstring)."""
    table = exhaustive_table(layer, hw)
    tspace, space = get_space(layer, hw), get_space(layer, hw, "vta")
    top = sorted(table, key=lambda i: (table[i][0], i))[:starts]
    t_best = table[top[0]]
    j_ps = space.knob_names.index("pad_skip")
    no_ps = lambda idx: space.positions_of(np.asarray(idx))[:, j_ps] == 0  # noqa: E731
    if exhaustive_max and len(space.valid_indices()) <= exhaustive_max:
        full = exhaustive_table(layer, hw, family="vta")
        idx = np.array(sorted(full), dtype=np.int64)
        without = min(idx[no_ps(idx)].tolist(), key=lambda i: (full[i][0], i))
        best = min(full, key=lambda i: (full[i][0], i))
        config = space.get(best)
        return {"template_ms": 1e3 * t_best[0], "template_cycles": t_best[1],
                "without_pad_skip_ms": 1e3 * full[without][0], "pad_skip_valid": int((~no_ps(idx)).sum()),
                "evaluations": len(full), "search": "exhaustive"}, config, measure(layer, config, hw)
    times: dict[int, float] = {}
    for i in top:
        v = space.from_template(tspace.get(i)).index
        times[v] = measure(layer, space.get(v), hw).seconds
    _climb(space, layer, hw, times, starts, evals, no_ps)
    without = min(times, key=lambda i: (times[i], i))
    valid = space.valid_indices()
    ps = valid[~no_ps(valid)]
    twins = _pad_skip_twins(space, sorted(times, key=times.get)[:starts])
    t = space.batch(ps).t
    whole = ps[(t.tile_h == t.geo.out_h) & (t.tile_w == t.geo.out_w)]  # the whole-plane kernel's points
    for i in whole[np.random.default_rng(0).permutation(len(whole))[:evals // 2]].tolist() + twins:
        if i not in times:
            times[i] = measure(layer, space.get(i), hw).seconds
    _climb(space, layer, hw, times, starts, len(times) + evals // 2, lambda idx: np.ones(len(idx), dtype=bool))
    best = min(times, key=lambda i: (times[i], i))
    config = space.get(best)
    return {"template_ms": 1e3 * t_best[0], "template_cycles": t_best[1], "without_pad_skip_ms": 1e3 * times[without],
            "pad_skip_valid": int(len(ps)), "evaluations": len(times), "search": "hill climb"}, config, \
        measure(layer, config, hw)


def layer_row(layer, count: int, hw: HwConfig, starts: int, evals: int, exhaustive_max: int = 0) -> dict:
    c0 = time.process_time()
    tmpl, config, m = best_vta(layer, hw, starts, evals, exhaustive_max)
    f = floors(layer, hw)
    n_insns = compile_blocks(layer, config, hw).n_insns
    busy = m.busy
    row = {"layer": layer.name, "count": count, **tmpl, "best_ms": 1e3 * m.seconds, "cycles": m.cycles,
           "n_insns": n_insns, "busy": busy, **f,
           "gap_cycles": m.cycles - f["floor_cycles"],
           "compute_overhead": busy["compute"] - f["compute_floor"],
           "compute_idle": m.cycles - busy["compute"],
           "load_over_memory_floor": busy["load"] - f["memory_floor"],
           "load_idle": m.cycles - busy["load"],
           "bound": "compute" if f["compute_floor"] >= f["memory_floor"] else "memory",
           "knobs": {k: v for k, v in config.knobs.items()}, "cpu_s": time.process_time() - c0}
    print(f"  {layer.name}: best {row['best_ms']:.3f} ms (without pad_skip {row['without_pad_skip_ms']:.3f}, "
          f"template {row['template_ms']:.3f}), floor "
          f"{row['floor_ms']:.3f}; gap {row['gap_cycles']:.0f} cyc = " + (
              f"compute overhead {row['compute_overhead']:.0f} + compute idle {row['compute_idle']:.0f}"
              if row["bound"] == "compute" else
              f"load over memory floor {row['load_over_memory_floor']:.0f} + load idle {row['load_idle']:.0f}")
          + f" ({row['bound']}-bound; busy {busy})", file=sys.stderr)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nets", default="resnet18")
    ap.add_argument("--hw", default="pynq_1x16,pynq_4x8")
    ap.add_argument("--starts", type=int, default=4, help="template points the hill climb starts from")
    ap.add_argument("--evals", type=int, default=600, help="vta measurements per layer (default: %(default)s)")
    ap.add_argument("--layers", help="comma-separated indices of the unique offloaded layers (default: all)")
    ap.add_argument("--exhaustive-max", type=int, default=0,
                    help="time every valid vta schedule of a layer that has at most this many (default 0: never)")
    args = ap.parse_args()
    out = []
    for name in args.nets.split(","):
        for hw_name in args.hw.split(","):
            hw = HwConfig.resolve(hw_name)
            wl = get_workload(name).for_hw(hw)
            vta, _ = partition(wl, hw)
            pick = range(len(vta)) if not args.layers else [int(x) for x in args.layers.split(",")]
            rows = [layer_row(vta[i][0], vta[i][1], hw, args.starts, args.evals, args.exhaustive_max) for i in pick]

            def total(key: str, rows: list[dict] = rows, batch: int = wl.batch) -> float:
                return float(sum(r[key] * r["count"] for r in rows) / batch)

            ms = total("best_ms")
            out.append({"network": name, "hw": hw.name, "batch": wl.batch, "best_ms_per_image": ms,
                        "without_pad_skip_ms_per_image": total("without_pad_skip_ms"),
                        "template_ms_per_image": total("template_ms"),
                        "speedup_vs_template": total("template_ms") / ms,
                        "floor_ms_per_image": total("floor_ms"), "floor_padded_ms_per_image": total("floor_padded_ms"),
                        "floor_no_reset_padded_ms_per_image": total("floor_no_reset_padded_ms"),
                        "roofline_ms_per_image": total("roofline_ms"),
                        "gap_ms_per_image": float(sum((r["best_ms"] - r["floor_ms"]) * r["count"] for r in rows)
                                                  / wl.batch),
                        "layers": rows})
            print(f"{name} {hw.name}: {ms:.3f} ms/image, template {total('template_ms'):.3f}, floor "
                  f"{total('floor_ms'):.3f} (every MAC of the padded convs: {total('floor_padded_ms'):.3f})",
                  file=sys.stderr)
    print(json.dumps(out, indent=1, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))


if __name__ == "__main__":
    main()
