"""PNG plots of a sweep: Pareto projections and hypervolume vs trials (the pareto module's
plots), and the per-layer latency of the front designs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from codesign.pareto.front import PointLike
from codesign.pareto.io import ParetoDoc
from codesign.pareto.plots import plot_front, plot_hypervolume
from codesign.pareto.point import DesignPoint
from codesign.plotting import pyplot, save_figure
from codesign.sweep.results import design_points
from codesign.sweep.rows import TrialRow


def write_plots(out: Path, rows: list[TrialRow], doc: ParetoDoc) -> list[Path]:
    """Write the plot files into `out` from the trials and pareto.json; returns their paths."""
    points = design_points(rows)
    if not points:
        return []
    n_ok = sum(1 for r in rows if r.ok)
    paths = [
        plot_front(doc.points, out / "pareto_front.png", all_points=points, stock_points=doc.stock,
                   objectives=doc.objective_keys,
                   title=f"Pareto front: {len(doc.points)} of {len(points)} feasible designs ({n_ok} trials)"),
        plot_hypervolume(doc.hypervolume_history or [], out / "hypervolume.png",
                         title="how the front grew: hypervolume after each trial",
                         reference_point=doc.reference_point, objectives=doc.objective_keys),
    ]
    paths.append(plot_layers(doc.points, out / "layers.png"))
    return paths


_LAYER_RE = re.compile(r"^conv2d_\d+x(\d+)x(\d+)x(\d+)_(\d+)_(\d+)x(\d+)_s(\d+)_p(\d+)$")


def _shape(layer_name: str, transform: str | None = None) -> str:
    """A layer's name for a reader: `conv2d_1x64x56x56_128_3x3_s2_p1` -> `conv 3x3/2 64->128 @56x56`
    (the batch dropped: designs with BATCH > 1 run it padded); a host rewrite in brackets
    (`(space-to-depth)`: the stem runs as a 4x4 conv on 16 channels). Other layers: the name
    without its batch."""
    m = _LAYER_RE.match(layer_name)
    if m:
        cin, h, w, cout, kh, kw, stride, _pad = m.groups()
        text = f"conv {kh}x{kw}{'/' + stride if stride != '1' else ''} {cin}->{cout} @{h}x{w}"
    else:
        m = re.match(r"^([a-z0-9_]+?)_\d+x(.*)$", layer_name)
        text = f"{m.group(1)} {m.group(2)}" if m else layer_name
    return f"{text} ({transform.replace('_', '-')})" if transform else text


MAX_LAYER_BARS = 16  # beyond this many unique layers the smallest are grouped into one bar


def step_bars(point: DesignPoint) -> dict[str, float]:
    """{bar name: ms per request} of one design: its VTA steps by layer shape ("VTA conv2d ...")
    and its CPU steps by op kind ("CPU max_pool2d"), from the network plan's steps; a design
    known only by its offloaded layers (no steps) by layer ("VTA ..."), its padded batch's time."""
    ms: dict[str, float] = {}
    if point.steps:
        for st in point.steps:
            if st.placement == "vta" and st.layer:
                key = f"VTA {_shape(st.layer, st.transform)}"
            else:
                key = f"{(st.placement or 'cpu').upper()} {st.kind or st.name}"
            ms[key] = ms.get(key, 0.0) + float(st.ms)
        return ms
    for lay in point.layers:
        key = f"VTA {_shape(lay.layer)}"
        ms[key] = ms.get(key, 0.0) + lay.seconds * lay.count * 1e3
    return ms


def layer_bars(points: Sequence[PointLike], max_designs: int = 8, max_layers: int = MAX_LAYER_BARS
               ) -> tuple[list[DesignPoint], list[str], list[dict[str, float]], str]:
    """(designs fastest first, bar names, per design {name: ms per request}, note): VTA steps
    by layer, then CPU steps by kind (`step_bars`). Beyond `max_layers` bars the VTA layers with
    the least time (in any shown design) are summed into one "other (N layers)" bar (the note says
    so); the CPU bars are always kept."""
    # Designs at a verified clock first (what a build is known to reach), then the unverified ones.
    pts = sorted(map(DesignPoint.of, points), key=lambda p: (p.clock_verified is False, p.latency_ms))[:max_designs]
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
    # CPU steps too small to see beside the largest bar (< 2% of it in every design): one bar.
    largest = max((v for ms in per_design for v in ms.values()), default=0.0)
    tiny = [n for n in cpu if max(ms.get(n, 0.0) for ms in per_design) < 0.02 * largest]
    if len(tiny) > 1:
        small = f"CPU other ({len(tiny)} kinds)"
        for ms in per_design:
            ms[small] = sum(ms.pop(n, 0.0) for n in tiny)
        cpu = [n for n in cpu if n not in tiny] + [small]
        note += f"; {len(tiny)} CPU step kinds under 2% of the largest bar summed as '{small}'"
    return pts, vta + cpu, per_design, note


def plot_layers(points: Sequence[PointLike], path: Path, max_designs: int = 8,
                max_layers: int = MAX_LAYER_BARS) -> Path:
    """Grouped bars: ms per request spent in each step (x its multiplicity) by each front design;
    at most `max_layers` bars per design (`layer_bars`)."""
    plt = pyplot()
    points = [DesignPoint.of(p) for p in points]
    pts, names, per_design, note = layer_bars(points, max_designs, max_layers)
    fig, ax = plt.subplots(figsize=(max(11.0, 0.8 * len(names) + 7), 5.0))  # + the legend beside
    width = 0.8 / max(1, len(pts))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (p, ms) in enumerate(zip(pts, per_design)):
        unverified = p.clock_verified is False
        # Unverified clock: hatched, and said in the legend (its latency assumes timing closure).
        ax.bar([i + k * width for i in range(len(names))], [ms.get(n, 0.0) for n in names], width,
               color=colors[k % len(colors)], hatch="///" if unverified else None,
               edgecolor="white" if unverified else None, linewidth=0,
               label=f"{p.config.replace('_i8w8a32', '')}: {p.latency_ms:.1f} ms/request"
                     + (", unverified clock (optimistic)" if unverified else ", verified clock"))
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
    ax.set_xticklabels(names, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("ms per request (every occurrence)")
    n_ok = sum(1 for p in points if p.clock_verified is not False)
    shown = (f"{len(pts)} of {len(points)} Pareto designs" if len(points) > len(pts) else f"the {len(pts)} Pareto designs")
    order = (f"; {n_ok} at a verified clock first" if n_ok and n_ok < len(points)
             else "; none at a verified clock" if not n_ok else "")
    what = ("where one request's time goes, VTA and CPU steps" if any(p.steps for p in pts)
            else "offloaded layers of one request (CPU ops not costed)")
    ax.set_title(f"{what}\n{shown}{order}{note}", fontsize=9)
    # Beside the bars; save_figure writes the whole legend (it used to be cut off at the edge).
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)
    ax.grid(True, axis="y", alpha=0.3)
    return save_figure(fig, path)
