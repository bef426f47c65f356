"""Geometry of the run page's plots: numbers only, the SVG is drawn by the templates.

Both heatmaps of a run use the ground truth's cluster order and the same cividis scale (the
dashboard's :func:`analytics.plotting.colours`), so cells at the same place compare the same
pair. Both MDS maps share one frame and scale (the model's map is already Procrustes-aligned to
the truth's), and each annotator keeps one Okabe-Ito colour and its name on both maps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from analytics.metrics import agglomerative_order
from analytics.plotting import OKABE_ITO, heatmap_layout

HEATMAP_SIZE = 360.0
MAP_SIZE = 340.0
MAP_MARGIN = 30.0
MAP_LABEL_ROOM = 80.0
_MARKERS = ("circle", "square", "diamond")  # shape changes once the colours are used up


def _px(value: float) -> str:
    return f"{value:.1f}"


def heatmap_order(matrix: list[list[float | None]]) -> list[int]:
    """Cluster order of a (JSON) similarity matrix: similar annotators side by side."""
    arr = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=float)
    return agglomerative_order(arr).tolist()


def heatmap(
    matrix: list[list[float | None]], *, names: list[str], order: list[int], what: str
) -> dict[str, Any]:
    """Cells, labels and legend of one heatmap (``what`` names the measure in tooltips)."""
    return heatmap_layout(matrix, names=names, order=order, what=what, size=HEATMAP_SIZE)


def annotator_styles(n: int) -> list[dict[str, str]]:
    """Okabe-Ito colour and marker of each annotator, the same on every map of the page."""
    return [
        {"colour": OKABE_ITO[k % len(OKABE_ITO)], "marker": _MARKERS[k // len(OKABE_ITO) % 3]}
        for k in range(n)
    ]


def map_pair(maps: dict[str, Any], *, names: list[str]) -> tuple[dict, dict]:
    """Points of the truth's and the model's MDS maps, in one shared frame and scale."""
    keep = maps["annotators"]
    truth = np.array(maps["truth"], dtype=float)
    model = np.array(maps["model"], dtype=float)
    both = np.vstack([truth, model])
    lo, hi = both.min(axis=0), both.max(axis=0)
    inner = MAP_SIZE - 2 * MAP_MARGIN - MAP_LABEL_ROOM
    scale = inner / max(float((hi - lo).max()), 1e-9)
    centre = (lo + hi) / 2
    middle_x = MAP_MARGIN + inner / 2
    styles = annotator_styles(len(names))

    def points(xy: np.ndarray) -> dict[str, Any]:
        return {
            "size": MAP_SIZE,
            "points": [
                {
                    "cx": _px(middle_x + (x - centre[0]) * scale),
                    "cy": _px(MAP_SIZE / 2 - (y - centre[1]) * scale),
                    "name": names[k],
                    **styles[k],
                }
                for k, (x, y) in zip(keep, xy, strict=True)
            ],
        }

    return points(truth), points(model)
