"""PNG plots of a sweep: front projections and hypervolume vs trials (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from codesign.pareto.front import PointLike
from codesign.pareto.objectives import BY_KEY, OBJECTIVES
from codesign.pareto.point import DesignPoint
from codesign.plotting import pyplot, save_figure


def axis_label(key: str) -> str:
    """The axis label of an objective key (what it measures, with its unit)."""
    found = BY_KEY.get(key)
    return found.label if found is not None else key


def plot_front(front_points: Sequence[PointLike], path: str | Path, *,
               all_points: Iterable[PointLike] = (), stock_points: Iterable[PointLike] = (),
               objectives: Sequence[str] = OBJECTIVES, title: str = "") -> Path:
    """`front_figure` saved as a PNG."""
    return save_figure(front_figure(front_points, all_points=all_points, stock_points=stock_points,
                                    objectives=objectives, title=title), path)


def front_figure(front_points: Sequence[PointLike], *, all_points: Iterable[PointLike] = (),
                 stock_points: Iterable[PointLike] = (), objectives: Sequence[str] = OBJECTIVES,
                 title: str = "") -> Any:
    """One panel per objective pair (latency-area, latency-power, area-power; latency is one
    request through the whole network, `codesign.pareto.objectives`): every evaluated
    design in grey, the front in colour (filled: clock verified on the board; hollow: unverified,
    its latency rests on timing closure nobody has shown), stock configs as labelled stars."""
    plt = pyplot()
    pairs = list(combinations(objectives, 2))
    fig, axes = plt.subplots(1, len(pairs), figsize=(5 * len(pairs), 4.2), squeeze=False)
    others = [DesignPoint.of(p) for p in all_points]
    stock = [DesignPoint.of(p) for p in stock_points]
    front = [DesignPoint.of(p) for p in front_points]
    # One colour per stock config, named in the legend: labels beside the stars overlapped.
    stock_colors = ["tab:red", "tab:purple", "tab:orange", "tab:brown", "tab:pink", "tab:olive"]
    for ax, (x, y) in zip(axes[0], pairs):
        if others:
            ax.scatter([p.get(x) for p in others], [p.get(y) for p in others], s=12, c="0.75",
                       label="evaluated design")
        pts = sorted(front, key=lambda p: p.get(x))
        ok = [p for p in pts if p.clock_verified is not False]
        bad = [p for p in pts if p.clock_verified is False]
        if ok:
            ax.scatter([p.get(x) for p in ok], [p.get(y) for p in ok], s=28, c="tab:blue", zorder=3,
                       label="Pareto front, verified clock" if bad else f"Pareto front ({len(objectives)}-D)")
        if bad:
            ax.scatter([p.get(x) for p in bad], [p.get(y) for p in bad], s=28, facecolors="none", edgecolors="tab:blue",
                       zorder=3, label="Pareto front, unverified clock (latency optimistic)")
        for k, s in enumerate(stock):
            name = (s.config or "stock").replace("_i8w8a32", "")
            ax.scatter([s.get(x)], [s.get(y)], marker="*", s=160, c=stock_colors[k % len(stock_colors)], zorder=4,
                       edgecolors="black", linewidths=0.4, label=f"stock {name}")
        ax.set_xlabel(axis_label(x))
        ax.set_ylabel(axis_label(y))
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    # One legend for all panels, below them, so it covers no point.
    # (outside the figure's box: `save_figure` writes it with bbox_inches="tight")
    fig.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(len(labels), 3), frameon=False)
    if title:
        fig.suptitle(title)
    return fig


def hypervolume_unit(objectives: Sequence[str]) -> str:
    """'ms x W' -- the unit of a hypervolume over `objectives` (unitless ones left out)."""
    units = [BY_KEY[k].unit for k in objectives if k in BY_KEY and BY_KEY[k].unit]
    return " x ".join(units) if units else "unitless"


def plot_hypervolume(history: Sequence[float], path: str | Path, *, reference_hv: float | None = None,
                     title: str = "", reference_point: dict[str, float] | None = None,
                     objectives: Sequence[str] = ()) -> Path:
    """Hypervolume after each hardware evaluation, from 0 (a y-axis cut near the final value
    would exaggerate the rise); the reference point and the unit in the labels; an optional
    horizontal line for a reference (e.g. the exhaustive front's hypervolume)."""
    return save_figure(hypervolume_figure(history, reference_hv=reference_hv, title=title,
                                          reference_point=reference_point, objectives=objectives), path)


def hypervolume_figure(history: Sequence[float], *, reference_hv: float | None = None, title: str = "",
                       reference_point: dict[str, float] | None = None, objectives: Sequence[str] = ()) -> Any:
    """The figure of `plot_hypervolume`."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    ax.plot(range(1, len(history) + 1), list(history), marker="o", ms=3, label="front found so far")
    if reference_hv is not None:
        ax.axhline(reference_hv, color="tab:red", ls="--", label="reference front")
    ax.set_ylim(bottom=0, top=max([*history, reference_hv or 0.0, 0.0]) * 1.08 or 1.0)
    ax.set_xlim(left=0)
    ax.set_xlabel("trials finished (hardware configs evaluated)")
    objectives = tuple(objectives or (reference_point or {}))
    ax.set_ylabel(f"hypervolume ({hypervolume_unit(objectives)})" if objectives else "hypervolume")
    if reference_point:
        ref = ", ".join(f"{BY_KEY[k].name if k in BY_KEY else k} {v:.4g}"
                        + (f" {BY_KEY[k].unit}" if k in BY_KEY and BY_KEY[k].unit else "")
                        for k, v in reference_point.items())
        ax.text(0.99, 0.03, f"volume dominated by the front, up to the\nreference point: {ref}",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7,
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "0.8"})
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    if title:
        ax.set_title(title)
    return fig


__all__ = ["axis_label", "front_figure", "hypervolume_figure", "hypervolume_unit", "plot_front", "plot_hypervolume"]
