"""Matplotlib for PNG files: the Agg backend (no display needed) and one way to save a figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from codesign.fileio import check_output_path


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Lay out, write the PNG (creating its folder) and free the figure."""
    path = check_output_path(path, "PNG")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    # An explicit format: otherwise matplotlib writes `curve` as `curve.png`, not where we say we wrote.
    fmt = path.suffix[1:].lower()
    # bbox_inches="tight": a legend placed beside or below the axes is in the file, not clipped.
    fig.savefig(path, dpi=dpi, format=fmt if fmt in fig.canvas.get_supported_filetypes() else "png",
                bbox_inches="tight")
    pyplot().close(fig)
    return path
