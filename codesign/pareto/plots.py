"""PNG plots of a sweep: front projections and hypervolume vs trials (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from codesign.pareto.objectives import BY_KEY, OBJECTIVES
from codesign.plotting import pyplot, save_figure


def axis_label(key: str) -> str:
    """The axis label of an objective key (what it measures, with its unit)."""
    found = BY_KEY.get(key)
    return found.label if found is not None else key


def plot_front(front_points: Sequence[dict[str, Any]], path: str | Path, *,
               all_points: Iterable[dict[str, Any]] = (), stock_points: Iterable[dict[str, Any]] = (),
               objectives: Sequence[str] = OBJECTIVES, title: str = "") -> Path:
    """`front_figure` saved as a PNG."""
    return save_figure(front_figure(front_points, all_points=all_points, stock_points=stock_points,
                                    objectives=objectives, title=title), path)


def front_figure(front_points: Sequence[dict[str, Any]], *, all_points: Iterable[dict[str, Any]] = (),
                 stock_points: Iterable[dict[str, Any]] = (), objectives: Sequence[str] = OBJECTIVES,
                 title: str = "") -> Any:
    """One panel per objective pair (latency-area, latency-power, area-power; latency is one
    request through the whole network, `codesign.pareto.objectives`): every evaluated
    design in grey, the front in colour (filled: clock verified on the board; hollow: unverified,
    its latency rests on timing closure nobody has shown), stock configs as labelled stars."""
    plt = pyplot()
    pairs = list(combinations(objectives, 2))
    fig, axes = plt.subplots(1, len(pairs), figsize=(5 * len(pairs), 4.2), squeeze=False)
    others = list(all_points)
    stock = list(stock_points)
    for ax, (x, y) in zip(axes[0], pairs):
        if others:
            ax.scatter([p[x] for p in others], [p[y] for p in others], s=12, c="0.75", label="evaluated")
        pts = sorted(front_points, key=lambda p: p[x])
        ok = [p for p in pts if p.get("clock_verified") is not False]
        bad = [p for p in pts if p.get("clock_verified") is False]
        if ok:
            ax.scatter([p[x] for p in ok], [p[y] for p in ok], s=28, c="tab:blue", zorder=3,
                       label="Pareto front, verified clock" if bad else f"Pareto front ({len(objectives)}-D)")
        if bad:
            ax.scatter([p[x] for p in bad], [p[y] for p in bad], s=28, facecolors="none", edgecolors="tab:blue",
                       zorder=3, label="Pareto front, unverified clock")
        for s in stock:
            ax.scatter([s[x]], [s[y]], marker="*", s=160, c="tab:red", zorder=4)
            ax.annotate(str(s.get("config", "stock")).replace("_i8w8a32", ""), (s[x], s[y]), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel(axis_label(x))
        ax.set_ylabel(axis_label(y))
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    return fig


def plot_hypervolume(history: Sequence[float], path: str | Path, *, reference_hv: float | None = None,
                     title: str = "") -> Path:
    """Hypervolume after each hardware evaluation; optional horizontal line for a reference
    (e.g. the exhaustive front's hypervolume)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(range(1, len(history) + 1), list(history), marker="o", ms=3, label="search")
    if reference_hv is not None:
        ax.axhline(reference_hv, color="tab:red", ls="--", label="reference front")
    ax.set_xlabel("hardware configs evaluated")
    ax.set_ylabel("hypervolume")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return save_figure(fig, path)


__all__ = ["axis_label", "front_figure", "plot_front", "plot_hypervolume"]
