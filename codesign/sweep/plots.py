"""PNG plots of a sweep: Pareto projections and hypervolume vs trials (the pareto module's
plots), and the per-layer latency of the front designs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from codesign.pareto.plots import plot_front, plot_hypervolume
from codesign.plotting import pyplot, save_figure
from codesign.sweep.results import design_points


def write_plots(out: Path, rows: list[dict[str, Any]], doc: dict[str, Any]) -> list[Path]:
    """Write the plot files into `out` from the trials and pareto.json; returns their paths."""
    points = design_points(rows)
    if not points:
        return []
    n_ok = sum(1 for r in rows if r.get("status") == "ok")
    paths = [
        plot_front(doc["points"], out / "pareto_front.png", all_points=points, stock_points=doc.get("stock", ()),
                   title=f"Pareto front: {len(doc['points'])} of {len(points)} feasible designs ({n_ok} trials)"),
        plot_hypervolume(doc.get("hypervolume_history", []), out / "hypervolume.png",
                         title="hypervolume vs trials"),
    ]
    paths.append(plot_layers(doc["points"], out / "layers.png"))
    return paths


def _shape(layer_name: str) -> str:
    """`conv2d_4x64x56x56_64_3x3_s1_p1` -> `64x56x56_64_3x3_s1_p1` (the batch prefix dropped)."""
    return re.sub(r"^[a-z0-9]+?_\d+x", "", layer_name)


def plot_layers(points: list[dict[str, Any]], path: Path, max_designs: int = 8) -> Path:
    """Grouped bars: ms per image spent in each layer (x its multiplicity) by each front design."""
    plt = pyplot()

    pts = sorted(points, key=lambda p: p["latency_ms"])[:max_designs]
    names: list[str] = []  # layer shapes without the batch (designs with BATCH > 1 run batch 2, 4)
    for p in pts:
        for lay in p["layers"]:
            if _shape(lay["layer"]) not in names:
                names.append(_shape(lay["layer"]))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(names) + 2), 4.5))
    width = 0.8 / max(1, len(pts))
    for k, p in enumerate(pts):
        ms = {_shape(lay["layer"]): lay["seconds"] * lay["count"] / (p.get("batch") or 1) * 1e3 for lay in p["layers"]}
        ax.bar([i + k * width for i in range(len(names))], [ms.get(n, 0.0) for n in names], width,
               label=f"{p['config']} ({p['latency_ms']:.2f} ms"
                     + (", unverified clock)" if p.get("clock_verified") is False else ")"))
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("ms per image (x multiplicity)")
    ax.set_title("per-layer latency of the Pareto designs (fastest first)")
    ax.legend(fontsize=6)
    ax.grid(True, axis="y", alpha=0.3)
    return save_figure(fig, path)
