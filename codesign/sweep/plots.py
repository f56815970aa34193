"""PNG plots of a sweep: Pareto projections and hypervolume vs trials (the pareto module's
plots), and the per-layer latency of the front designs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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
                   title=f"Pareto front: {len(doc['points'])} of {len(points)} feasible designs ({n_ok} trials)"),
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


def layer_bars(points: list[dict[str, Any]], max_designs: int = 8, max_layers: int = MAX_LAYER_BARS
               ) -> tuple[list[dict[str, Any]], list[str], list[dict[str, float]], str]:
    """(designs fastest first, bar names, per design {name: ms per image}, note). Networks with
    more than `max_layers` unique layers keep the `max_layers - 1` layers with the most time (in
    any shown design) and sum the rest into one "other (N layers)" bar; the note says so."""
    pts = sorted(points, key=lambda p: p["latency_ms"])[:max_designs]
    per_design: list[dict[str, float]] = []
    names: list[str] = []  # layer shapes without the batch (designs with BATCH > 1 run batch 2, 4)
    for p in pts:
        ms: dict[str, float] = {}
        for lay in p["layers"]:
            key = _shape(lay["layer"])
            ms[key] = ms.get(key, 0.0) + lay["seconds"] * lay["count"] / (p.get("batch") or 1) * 1e3
            if key not in names:
                names.append(key)
        per_design.append(ms)
    note = ""
    if len(names) > max_layers:
        top = set(sorted(names, key=lambda n: -max(ms.get(n, 0.0) for ms in per_design))[:max_layers - 1])
        rest = [n for n in names if n not in top]
        other = f"other ({len(rest)} layers)"
        for ms in per_design:
            ms[other] = sum(ms.pop(n, 0.0) for n in rest)
        note = f"; the {len(rest)} smallest of {len(names)} layers summed as 'other'"
        names = [n for n in names if n in top] + [other]
    return pts, names, per_design, note


def plot_layers(points: list[dict[str, Any]], path: Path, max_designs: int = 8,
                max_layers: int = MAX_LAYER_BARS) -> Path:
    """Grouped bars: ms per image spent in each layer (x its multiplicity) by each front design;
    at most `max_layers` bars per design (`layer_bars`)."""
    plt = pyplot()

    pts, names, per_design, note = layer_bars(points, max_designs, max_layers)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(names) + 2), 4.5))
    width = 0.8 / max(1, len(pts))
    for k, (p, ms) in enumerate(zip(pts, per_design)):
        ax.bar([i + k * width for i in range(len(names))], [ms.get(n, 0.0) for n in names], width,
               label=f"{p['config']} ({p['latency_ms']:.2f} ms)")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("ms per image (x multiplicity)")
    shown = (f"the {len(pts)} fastest of {len(points)} Pareto designs" if len(points) > len(pts)
             else "the Pareto designs, fastest first")
    ax.set_title(f"per-layer latency of {shown}{note}", fontsize=9)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # beside, not on, the bars
    ax.grid(True, axis="y", alpha=0.3)
    return save_figure(fig, path)
