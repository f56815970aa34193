"""PNG plots of a sweep: Pareto projections and hypervolume vs trials (the pareto module's
plots), and the per-layer latency of the front designs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from codesign.pareto.objectives import OBJECTIVES
from codesign.pareto.plots import plot_front, plot_hypervolume
from codesign.plotting import pyplot, save_figure
from codesign.sweep.results import design_points
from codesign.sweep.rows import TrialRow


def write_plots(out: Path, rows: list[TrialRow], doc: dict[str, Any]) -> list[Path]:
    """Write the plot files into `out` from the trials and pareto.json; returns their paths."""
    points = design_points(rows)
    if not points:
        return []
    n_ok = sum(1 for r in rows if r.ok)
    paths = [
        plot_front(doc["points"], out / "pareto_front.png", all_points=points, stock_points=doc.get("stock", ()),
                   objectives=tuple(doc.get("objectives") or OBJECTIVES), title=f"Pareto front: {len(doc['points'])} of {len(points)} feasible designs ({n_ok} trials)"),
        plot_hypervolume(doc.get("hypervolume_history", []), out / "hypervolume.png",
                         title="hypervolume vs trials"),
    ]
    paths.append(plot_layers(doc["points"], out / "layers.png"))
    return paths


def _shape(layer_name: str) -> str:
    """`conv2d_4x64x56x56_64_3x3_s1_p1` -> `conv2d 64x56x56_64_3x3_s1_p1` (the batch prefix dropped)."""
    m = re.match(r"^([a-z0-9_]+?)_\d+x(.*)$", layer_name)
    return f"{m.group(1)} {m.group(2)}" if m else layer_name


MAX_LAYER_BARS = 16  # beyond this many unique layers the smallest are grouped into one bar


def step_bars(point: dict[str, Any]) -> dict[str, float]:
    """{bar name: ms per request} of one design: its VTA steps by layer shape ("VTA conv2d ...")
    and its CPU steps by op kind ("CPU max_pool2d"), from the network plan's steps; a design
    known only by its offloaded layers (no steps) by layer ("VTA ..."), its padded batch's time."""
    ms: dict[str, float] = {}
    if point.get("steps"):
        for st in point["steps"]:
            if st.get("placement") == "vta" and st.get("layer"):
                key = f"VTA {_shape(st['layer'])}"
            else:
                key = f"{str(st.get('placement', 'cpu')).upper()} {st.get('kind', st.get('name'))}"
            ms[key] = ms.get(key, 0.0) + float(st["ms"])
        return ms
    for lay in point["layers"]:
        key = f"VTA {_shape(lay['layer'])}"
        ms[key] = ms.get(key, 0.0) + lay["seconds"] * lay["count"] * 1e3
    return ms


def layer_bars(points: list[dict[str, Any]], max_designs: int = 8, max_layers: int = MAX_LAYER_BARS
               ) -> tuple[list[dict[str, Any]], list[str], list[dict[str, float]], str]:
    """(designs fastest first, bar names, per design {name: ms per request}, note): VTA steps
    by layer, then CPU steps by kind (`step_bars`). Beyond `max_layers` bars the VTA layers with
    the least time (in any shown design) are summed into one "other (N layers)" bar (the note says
    so); the CPU bars are always kept."""
    pts = sorted(points, key=lambda p: p["latency_ms"])[:max_designs]
    per_design: list[dict[str, float]] = []
    names: list[str] = []  # layer shapes without the batch (designs with BATCH > 1 run batch 2, 4)
    for p in pts:
        ms = step_bars(p)
        names.extend(n for n in ms if n not in names)
        per_design.append(ms)
    note = ""
    # Every CPU bar is kept (a handful of op kinds: what the whole-network latency adds to VTA's);
    # VTA layers beyond the remaining bars are summed.
    cpu = [n for n in names if not n.startswith("VTA ")]
    vta = [n for n in names if n.startswith("VTA ")]
    keep = max(4, max_layers - len(cpu))
    if len(vta) > keep:
        top = set(sorted(vta, key=lambda n: -max(ms.get(n, 0.0) for ms in per_design))[:keep - 1])
        rest = [n for n in vta if n not in top]
        other = f"other ({len(rest)} layers)"
        for ms in per_design:
            ms[other] = sum(ms.pop(n, 0.0) for n in rest)
        note = f"; the {len(rest)} smallest of {len(vta)} VTA layers summed as 'other'"
        vta = [n for n in vta if n in top] + [other]
    return pts, vta + cpu, per_design, note


def plot_layers(points: list[dict[str, Any]], path: Path, max_designs: int = 8,
                max_layers: int = MAX_LAYER_BARS) -> Path:
    """Grouped bars: ms per request spent in each step (x its multiplicity) by each front design;
    at most `max_layers` bars per design (`layer_bars`)."""
    plt = pyplot()

    pts, names, per_design, note = layer_bars(points, max_designs, max_layers)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(names) + 2), 4.5))
    width = 0.8 / max(1, len(pts))
    for k, (p, ms) in enumerate(zip(pts, per_design)):
        ax.bar([i + k * width for i in range(len(names))], [ms.get(n, 0.0) for n in names], width,
               label=f"{p['config']} ({p['latency_ms']:.2f} ms/request)")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("ms per request (x multiplicity)")
    shown = (f"the {len(pts)} fastest of {len(points)} Pareto designs" if len(points) > len(pts)
             else "the Pareto designs, fastest first")
    what = ("VTA and CPU steps of one request" if any(p.get("steps") for p in pts)
            else "offloaded layers of one request (CPU ops not costed)")
    ax.set_title(f"{what}: {shown}{note}", fontsize=9)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # beside, not on, the bars
    ax.grid(True, axis="y", alpha=0.3)
    return save_figure(fig, path)
