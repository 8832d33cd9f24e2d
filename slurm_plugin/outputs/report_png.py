"""The job's report as a picture: who talks to whom, before and after, and where the
traffic goes.

Three panels side by side: the communication matrix in rank order, the same matrix
with ranks in the order of the PEs they run on (nodes, then sockets, then cores; the
node boundaries drawn when there are few nodes), and the volume per hierarchy level of
every placement in the report.  A good placement moves the volume towards the diagonal
blocks of the middle panel and towards the left (cheap) levels of the bars.

Large matrices are binned to at most ``MAX_PIXELS`` x ``MAX_PIXELS`` cells (the volume
of a cell is the sum over its rank pairs), so a 131k-rank job draws in O(m) time and
memory.  matplotlib is an optional dependency (``pip install matplotlib``, or the
``png`` extra); it is imported only here, only when a picture is asked for.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from mapper.errors import RankmapError

from ..common.safe_text import safe_text
from .report import human

MAX_PIXELS = 512
FIGSIZE = (16.0, 5.0)  # inches; at DPI this is a 1600 x 500 PNG
DPI = 100
_MAX_NODE_LINES = 64


class ReportPictureError(RankmapError, RuntimeError):
    """The picture cannot be drawn here (matplotlib missing)."""


def plain(value: object, limit: int = 200) -> str:
    """``value`` as text matplotlib draws literally: control characters escaped, one
    line per ``\\n`` of the input, and ``$`` escaped (a pair of them would otherwise be
    parsed as mathtext, and a bad formula stops the drawing)."""
    lines = ("-" if value is None else str(value)).split("\n")
    return "\n".join(safe_text(line, limit).replace("$", r"\$") for line in lines)


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ReportPictureError(
            "--png needs matplotlib, which is not installed for "
            f"{sys.executable}; install it with: {sys.executable} -m pip install matplotlib"
        ) from None
    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt

    return plt


def binned_matrix(matrix: sp.spmatrix, order: np.ndarray | None,
                  pixels: int = MAX_PIXELS) -> np.ndarray:
    """The matrix with rank ``order[i]`` at row/column i, summed into square cells.

    ``order`` None keeps rank order.  Returns a ``b x b`` array, b = min(n, pixels).
    """
    coo = sp.coo_matrix(matrix)
    n = coo.shape[0]
    b = max(1, min(n, pixels))
    pos = np.arange(n) if order is None else np.argsort(order)  # rank -> position
    r = pos[coo.row] * b // max(n, 1)
    c = pos[coo.col] * b // max(n, 1)
    return np.bincount(r * b + c, weights=coo.data, minlength=b * b).reshape(b, b)


def level_order(level_distances: Mapping[str, float]) -> list[str]:
    """Levels from the closest (socket) to the farthest (root)."""
    return sorted(level_distances, key=lambda name: (level_distances[name], name))


def draw_report_png(record: Mapping, path: str | os.PathLike,
                    matrix: sp.spmatrix | None = None, order: np.ndarray | None = None,
                    node_sizes: Sequence[int] | None = None, order_label: str = "",
                    note: str = "") -> None:
    """Write the picture of ``record`` (a job's report.json) to ``path``.

    ``matrix`` is the job's communication matrix (None: the matrix panels say why they
    are empty, ``note``), ``order`` the ranks in PE order (None: rank order),
    ``node_sizes`` the ranks per node in that order, for the boundary lines.
    """
    plt = _pyplot()
    units = plain(record.get("units") or "bytes", 40)
    fig, axes = plt.subplots(1, 3, figsize=FIGSIZE, dpi=DPI,
                             gridspec_kw={"width_ratios": [1, 1, 1.3]})
    job = record.get("job_id")
    title = f"rankmap report{' for job ' + plain(job, 40) if job else ''}"
    fig.suptitle(f"{title}: {plain(record.get('summary') or '', 300)}", fontsize=10)
    panels = ((axes[0], None, "communication matrix, rank order"),
              (axes[1], order, "same matrix, ranks in placement order"
                               + (f" ({plain(order_label)})" if order_label else "")))
    for ax, ordering, label in panels:
        ax.set_title(label, fontsize=9)
        if matrix is None:
            ax.text(0.5, 0.5, plain(note or "no communication matrix", 1000), ha="center",
                    va="center", wrap=True, fontsize=9, transform=ax.transAxes)
            ax.set_axis_off()
            continue
        n = matrix.shape[0]
        cells = binned_matrix(matrix, ordering)
        image = ax.imshow(np.log10(1.0 + cells), cmap="viridis", interpolation="nearest",
                          extent=(0, n, n, 0))
        ax.set_xlabel("rank" if ordering is None else "position (PE order)")
        if ordering is not None and node_sizes and len(node_sizes) <= _MAX_NODE_LINES:
            for edge in np.cumsum(node_sizes)[:-1]:
                ax.axhline(edge, color="white", linewidth=0.4, alpha=0.6)
                ax.axvline(edge, color="white", linewidth=0.4, alpha=0.6)
        bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        bar.set_label(f"log10(1 + {units} per cell)", fontsize=8)
    _traffic_bars(axes[2], record, units)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    fig.savefig(path, format="png")
    plt.close(fig)


def _traffic_bars(ax, record: Mapping, units: str) -> None:
    levels = level_order(record.get("level_distances") or {})
    placements = record.get("placements") or []
    ax.set_title("traffic per level (volume whose ranks first share a group there)",
                 fontsize=9)
    if not levels or not placements:
        ax.text(0.5, 0.5, "no placements in the report", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return
    width = 0.8 / len(placements)
    x = np.arange(len(levels))
    for i, p in enumerate(placements):
        label = plain(p["name"], 60) + (" (the job runs with it)" if p.get("applied") else "")
        volumes = [float(p.get("traffic", {}).get(level, 0.0)) for level in levels]
        ax.bar(x + (i - (len(placements) - 1) / 2) * width, volumes, width, label=label)
    distances = record["level_distances"]
    ax.set_xticks(x, [f"{plain(level, 40)}\n(distance {human(distances[level])})"
                      for level in levels], fontsize=8)
    ax.yaxis.set_major_formatter(lambda value, _pos: human(value, units))
    ax.set_ylabel(units)
    ax.legend(fontsize=8)
