"""`codesign report DIR`: the Pareto front of a sweep directory as a table (or `--json`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from codesign.pareto.io import ParetoDoc, read_pareto
from codesign.pareto.point import DesignPoint

STEPS_SHOWN = 5  # front designs whose steps the table lists by default (a large front: --all-steps)

EPILOG = """\
examples:
  codesign report runs/sweep              # table of the front, stock-config comparison
  codesign report runs/sweep --json       # the pareto.json object, for scripts
  codesign report runs/sweep --sort area  # order the table by another objective
  codesign report runs/sweep --all-steps  # the steps of every front design, not only the first few

columns: latency_ms is one request (one image) through the whole network: the VTA steps with their
tuned schedules plus the CPU steps (vta_ms + cpu_ms); a BATCH=N design serves a request in its
padded batch's time, and throughput_ips is images per second with full batches (pareto.json
`objective_info` says what each objective measures; a workload given only as layers counts the
layers VTA offloads, cpu_ms '-'); area is the mean utilization of
LUT, FF, BRAM18 and DSP (docs/resources.md), followed by each resource's utilization; power is
board power at the simulated module activity; energy = power x latency; clock says whether a VTA
build is known to run at the design's clock on this board ('verified') or not ('unverified':
timing closure is not modelled, so its latency is optimistic). A '*' marks designs at verified
clocks that dominate a stock configuration on every objective; designs that beat a stock
config only at an unverified clock are listed separately.
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser(
        "report", help=summary,
        description="Print the Pareto front (default objectives: latency per request, area, power) written "
                    "by `codesign sweep` to DIR/pareto.json, with the designs that dominate the stock VTA "
                    "configs and each front design's steps on the CPU beside its steps on VTA.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="sweep directory (or a pareto.json file)")
    p.add_argument("--json", action="store_true", help="print the pareto.json object as one JSON document")
    p.add_argument("--sort", default="latency_ms",
                   choices=("latency_ms", "throughput_ips", "area", "power_w", "energy_j", "cpu_ms", "vta_ms"),
                   help="table order, best first (default: latency_ms)")
    p.add_argument("--all-steps", action="store_true",
                   help=f"list the steps of every front design (default: the first {STEPS_SHOWN} in table order)")
    p.set_defaults(func=run)


def _pct(point: DesignPoint, key: str) -> str:
    util = point.utilization(key)
    return f"{100 * util:.0f}%" if util is not None else "-"


def _fmt(value: Any, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "-"


def _clock(point: DesignPoint) -> str:
    flag = point.clock_verified
    return "verified" if flag is True else "unverified" if flag is False else "unknown"


def _steps_line(point: DesignPoint, limit: int = 6) -> str | None:
    """`config: VTA 41.2 ms in 17 steps | CPU 30.1 ms in 4 steps: name 25.0, ...` (None: no plan)."""
    if not point.steps:
        return None
    parts = []
    for where in ("vta", "cpu"):
        mine = [s for s in point.steps if s.placement == where]
        total = sum(float(s.ms) for s in mine)
        text = f"{where.upper()} {total:.2f} ms in {len(mine)} steps"
        if where == "cpu" and mine:
            top = sorted(mine, key=lambda s: -float(s.ms))
            text += ": " + ", ".join(f"{s.name} ({s.kind or '?'}) {float(s.ms):.2f}" for s in top[:limit])
            if len(top) > limit:
                text += f", +{len(top) - limit} more"
        parts.append(text)
    return f"  {point.config}: " + " | ".join(parts)


def format_table(doc: ParetoDoc | Mapping[str, Any], sort: str = "latency_ms",
                 steps_shown: int | None = STEPS_SHOWN) -> str:
    """The front as text, best first by `sort`; the steps of the first `steps_shown` designs (None: all).
    `doc`: pareto.json, typed or as its JSON object."""
    doc = ParetoDoc.of(doc)
    flip = -1.0 if sort == "throughput_ips" else 1.0  # best first
    points = sorted(doc.points, key=lambda p: (p.get(sort) is None, flip * (p.get(sort) or 0)))
    dominators = {c for s in doc.stock_comparison.values() for c in s.dominated_by}
    header = ["", "config", "latency_ms", "throughput_ips", "vta_ms", "cpu_ms", "area", "power_w", "energy_j",
              "LUT", "FF", "BRAM18", "DSP", "clock"]
    measured = any(p.measured_latency_ms is not None for p in points)  # `codesign sweep --confirm` ran
    if measured:
        header.insert(3, "measured_ms")
    rows = [header]
    for p in points:
        rows.append([
            "*" if p.config in dominators else "", str(p.config), _fmt(p.latency_ms, ".3f"),
            _fmt(p.throughput_ips, ".2f"), _fmt(p.vta_ms, ".3f"), _fmt(p.cpu_ms, ".3f"),
            _fmt(p.area, ".3f"), _fmt(p.power_w, ".3f"), _fmt(p.energy_j, ".4f"),
            _pct(p, "lut"), _pct(p, "ff"), _pct(p, "bram18"), _pct(p, "dsp"),
            _clock(p),
        ])
        if measured:
            rows[-1].insert(3, _fmt(p.measured_latency_ms, ".3f"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    left = {0, 1}
    lines = ["  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in rows]
    ref = doc.reference_point
    objectives = doc.objectives or list(ref)
    out = [f"Pareto front: {len(points)} designs"
           + (f" of {doc.n_evaluated} evaluated" if doc.n_evaluated else "")
           + f" on {', '.join(_direction(k, doc) for k in objectives)}", *lines]
    if dominators & {p.config for p in points}:
        out.append("*: dominates a stock config at a verified clock (listed below)")
    for info in doc.objective_info or []:
        if info.get("measures"):
            out.append(f"{info['key']}: {info['measures']}")
    scopes = doc.scopes or sorted({str(p.scope) for p in points if p.scope})
    if scopes:
        out.append(f"latency counts: {', '.join(scopes)}")
    steps = [line for line in (_steps_line(p) for p in points) if line]
    if steps:
        shown = steps if steps_shown is None else steps[:steps_shown]
        out.append("steps of one request (CPU beside VTA, slowest CPU steps named)"
                   + (f", the first {len(shown)} of {len(steps)} designs (--all-steps for every one)"
                      if len(shown) < len(steps) else "") + ":")
        out.extend(shown)
    out.append("")
    board = doc.board or {}
    if board.get("status"):
        out.append(f"clock: {board['status']}")
    model = doc.resource_model or {}
    if model.get("label"):
        out.append(f"resources: {model['label']}")
    out.append(f"hypervolume {doc.hypervolume:.6g} w.r.t. reference point "
               + ", ".join(f"{k}={_fmt(v, '.4g')}" for k, v in ref.items()))
    comparison = doc.stock_comparison
    for name, info in comparison.items():
        dom = info.dominated_by or []
        dom_unverified = info.dominated_by_unverified or []
        where = ", ".join(f"{k}={_fmt(v, '.4g')}" for k, v in (info.objectives or {}).items())
        if info.clock_verified is False:
            where += ", its own clock unverified"
        if dom:
            out.append(f"stock {name} ({where}): dominated by {len(dom)} front design(s) at verified clocks: "
                       f"{', '.join(dom)}")
        else:
            state = "on the front" if info.on_front else "not dominated by any front design at a verified clock"
            out.append(f"stock {name} ({where}): {state}")
        if dom_unverified:
            out.append(f"  and by {len(dom_unverified)} more only at unverified clocks: {', '.join(dom_unverified)}")
    if not comparison:
        out.append("no stock configs evaluated in this sweep")
    confirm = doc.confirm
    if confirm:
        out.append(f"confirmed on boards ({confirm['boards']}, {confirm['retune']} schedules per layer re-measured): "
                   f"front on measured latency: {', '.join(confirm['measured_front']) or '-'}")
        for d in confirm.get("missing_bitstream", []):
            out.append(f"  no bitstream for {d['config']}: {d['build']}")
    unverified = [p for p in points if p.clock_verified is False]
    if unverified:
        out.append(f"clock 'unverified': {len(unverified)} front design(s) run at a clock no VTA build is "
                   "known to close timing at on this board; timing closure is not modelled, so treat their "
                   "latency as optimistic (`codesign sweep --verified-clocks-only` leaves them out)")
    return "\n".join(out)


def _direction(key: str, doc: ParetoDoc) -> str:
    info = {o.get("key"): o for o in doc.objective_info or []}.get(key) or {}
    return f"{key} ({info.get('direction', 'min')})"


def run(args: argparse.Namespace) -> int:
    doc = read_pareto(args.dir)
    if args.json:
        print(json.dumps(doc.to_json()))  # the file's object as read (a typed round trip keeps its bytes)
    else:
        print(format_table(doc, args.sort, None if args.all_steps else STEPS_SHOWN))
    return 0
