"""Shared plot geometry and palettes of the studio's SVG plots (numbers and markup, no Django).

The quality dashboard, the model registry and the trace overlays compute their plots here
and draw them with the templates (``analytics/_heatmap.html`` is the one heatmap include).
Nothing here reads the database, so any app may import it.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

#: Okabe & Ito (2008), the colour-blind-safe qualitative palette, black last: annotators'
#: points and lines across the dashboard, the trace overlays and the model-registry maps.
OKABE_ITO = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#f0e442",
    "#000000",
)

#: Cividis (Nuñez, Anderton & Renslow 2018, doi:10.1371/journal.pone.0199239), 9 stops:
#: perceptually uniform and readable with colour-vision deficiencies.
CIVIDIS = (
    "#00224e",
    "#123570",
    "#3b496c",
    "#575d6d",
    "#707173",
    "#8a8779",
    "#a69d75",
    "#c4b56c",
    "#fee838",
)

HEATMAP_SIZE = 480.0
HEATMAP_MOST = 60
"""Most annotators a heatmap draws (a cell of 8 units in ``HEATMAP_SIZE``): the cells grow
with the square, and 512 annotators drew 262,144 of them (about 30 MB of SVG on every plot
push) at under a pixel each. Past it the flagged annotators are drawn, then those with the
most answers (:func:`heatmap_rows`)."""
MAP_SIZE = 360.0
MAP_LABELS_MOST = 30
"""Most points of a map that get a name written beside them: past it the flagged annotators
are named, then those farthest from the crowd's median (the outliers a map is read for);
every point keeps its tooltip. 512 names in the map were a blot, and placing them took 97 ms
of every plot push (417 ms at 1,024)."""
SPARK_W, SPARK_H = 96.0, 24.0
AXIS_TEXT = 18.0
"""Height of a heatmap axis name (SVG units, ``.heatmap-axis`` in ``plots.css``)."""
CELL_TEXT_MIN = 44.0
"""Smallest heatmap cell (SVG units) that prints its value."""
LABEL_W, LABEL_H = 7.5, 15.0
"""Width of a character and height of a line of the map's point labels (13 px, SVG units)."""


_STOPS = np.array([[int(c[k : k + 2], 16) for k in (1, 3, 5)] for c in CIVIDIS], dtype=float)


def colours(values: Sequence[float | None], *, low: float = 0.0, high: float = 1.0) -> list[str]:
    """Cividis colours of ``values`` on ``[low, high]`` (clipped, interpolated between the
    stops); light grey for unknown (``None``)."""
    x = np.array([np.nan if v is None else v for v in values], dtype=float)
    t = np.clip((x - low) / (high - low), 0.0, 1.0) * (len(CIVIDIS) - 1)
    i = np.minimum(np.nan_to_num(t).astype(int), len(CIVIDIS) - 2)
    rgb = np.round(_STOPS[i] + (_STOPS[i + 1] - _STOPS[i]) * (np.nan_to_num(t) - i)[:, None])
    return [
        "#e5e7ea" if np.isnan(v) else "#{:02x}{:02x}{:02x}".format(*c)
        for v, c in zip(x, rgb.astype(int), strict=True)
    ]


def _ink(value: float | None) -> str:
    """Readable text colour on top of :func:`colour`."""
    return "#1b1f24" if value is None or value >= 0.55 else "#ffffff"


def sparkline(values: Sequence[float | None]) -> str:
    """SVG ``points`` of a sparkline (``SPARK_W`` x ``SPARK_H``); gaps skipped; '' if < 2."""
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    if len(known) < 2:
        return ""
    xs = np.array([i for i, _ in known], dtype=float)
    ys = np.array([v for _, v in known], dtype=float)
    span = np.ptp(ys) or 1.0
    x = 2 + (xs - xs.min()) / max(np.ptp(xs), 1.0) * (SPARK_W - 4)
    y = SPARK_H - 2 - (ys - ys.min()) / span * (SPARK_H - 4)
    return " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(x, y, strict=True))


def spark_note(values: Sequence[float | None]) -> str:
    """What stands in for a sparkline of fewer than two known points: "one point so far" or
    "no points yet" ("" when :func:`sparkline` draws a line)."""
    known = sum(v is not None for v in values)
    return "" if known >= 2 else "one point so far" if known == 1 else "no points yet"


def px(value: float) -> str:
    """An SVG coordinate, formatted here once (template filters cost more than the plot)."""
    return f"{value:.1f}"


def fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def first_rows(flagged: np.ndarray, score: np.ndarray, most: int) -> np.ndarray:
    """Positions of the ``most`` rows a crowded plot keeps, ascending: the ``flagged`` ones
    first, then the highest ``score``; ties in position order (``lexsort`` is stable)."""
    return np.sort(np.lexsort((-score, ~flagged))[:most])


def heatmap_rows(
    order: Sequence[int],
    *,
    flagged: Collection[int] = (),
    overlap: list[list[int]] | None = None,
    most: int | None = None,
) -> list[int]:
    """The rows of ``order`` a heatmap draws: all of them up to ``most`` (default
    :data:`HEATMAP_MOST`); else the ``flagged`` ones (in ``order``), then those with the most
    answers (the diagonal of ``overlap``; ties in ``order``), kept in ``order``
    (:func:`first_rows`)."""
    most = HEATMAP_MOST if most is None else most
    if len(order) <= most:
        return list(order)
    is_flagged = np.array([a in flagged for a in order])
    answers = np.array([overlap[a][a] if overlap is not None else 0 for a in order])
    kept = first_rows(is_flagged, np.where(is_flagged, 0, answers), most)
    return [order[i] for i in kept]


def heatmap_layout(
    matrix: list[list[float | None]],
    *,
    names: list[str],
    order: list[int],
    what: str = "kappa",
    size: float = HEATMAP_SIZE,
    overlap: list[list[int]] | None = None,
    unit: str = "items",
    flagged: Collection[int] = (),
) -> dict[str, Any]:
    """The cells (as SVG), row labels and legend of an annotator x annotator heatmap in
    ``order``, of at most :data:`HEATMAP_MOST` rows (:func:`heatmap_rows`, ``flagged``
    first); ``of`` says how many ``order`` had.

    Values print inside the cells when a cell is at least :data:`CELL_TEXT_MIN` wide (the
    text stays >= 11 px on screen, ``plots.css``); every cell has a tooltip naming the pair and
    ``what`` the value measures, and with ``overlap`` (the pair matrix of what each pair has
    in common, counted in ``unit``) the evidence the value rests on: "a × b: kappa 0.40;
    12 shared items" (the diagonal: the annotator's own count). The legend spans 0 to 1
    (cividis).

    ``cells`` is the cells' markup, every text in it escaped here, which
    ``analytics/_heatmap.html`` inserts as it is (``|safe``): n annotators make n² cells,
    and the template language drew 128 annotators' 16,384 cells in 350 ms of CPU against
    8-44 ms here (the dashboard draws them on a live push).
    """
    of = len(order)
    order = heatmap_rows(order, flagged=flagged, overlap=overlap)
    n = len(order)
    cell = size / max(n, 1)
    values = [matrix[a][b] for a in order for b in order]
    side = px(cell)
    at = [px(k * cell) for k in range(n)]
    centre = [px((k + 0.5) * cell) for k in range(n)]
    named = [html.escape(names[a]) for a in order]
    measure, counted = html.escape(what), html.escape(unit)
    texts = cell >= CELL_TEXT_MIN
    markup = []
    for k, (value, fill) in enumerate(zip(values, colours(values), strict=True)):
        i, j = divmod(k, n)
        shown = fmt(value, "{:.2f}")
        evidence = ""
        if overlap is not None:
            shared = overlap[order[i]][order[j]]
            evidence = f"; {shared:,} {counted}" if i == j else f"; {shared:,} shared {counted}"
        markup.append(
            f'<rect x="{at[j]}" y="{at[i]}" width="{side}" height="{side}" fill="{fill}">'
            f"<title>{named[i]} × {named[j]}: {measure} {shown}{evidence}</title>"
            "</rect>"
        )
        if texts:
            markup.append(
                f'<text x="{centre[j]}" y="{centre[i]}" text-anchor="middle" '
                f'dominant-baseline="middle" class="heatmap-cell" fill="{_ink(value)}">'
                f"{shown}</text>"
            )
    # an axis name is 18 units high (plots.css): with thinner rows every step-th is written
    # (each cell's tooltip names its pair)
    every = int(np.ceil(AXIS_TEXT / cell)) if n else 1
    labels = [
        {"pos": centre[i], "name": names[a], "written": i % every == 0} for i, a in enumerate(order)
    ]
    ticks = np.linspace(0, 1, 6)
    step = max(size / 12, 40.0)  # a stop is 40 wide: its label "0.2" must not meet the next
    legend = [
        {"x": px(i * step), "fill": fill, "label": f"{t:.1f}"}
        for i, (t, fill) in enumerate(zip(ticks, colours(ticks.tolist()), strict=True))
    ]
    return {
        "cells": "\n".join(markup),
        "labels": labels,
        "size": size,
        "legend": legend,
        "of": of,
    }


def map_layout(
    mds: list[list[float] | None] | None, names: list[str], flagged: set[int]
) -> dict | None:
    """Points of a 2-D MDS map (``None`` rows left out) scaled into a ``MAP_SIZE`` square with
    room for the names on the right; ``flagged`` rows are drawn as triangles, after the
    others. At most :data:`MAP_LABELS_MOST` points are named (``labelled``; ``named`` counts
    them)."""
    if not mds:
        return None
    placed = [(k, p) for k, p in enumerate(mds) if p is not None]
    xy = np.array([p for _, p in placed], dtype=float)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    # 30 px margins, 80 px more on the right for the names; equal scale on both axes
    scale = (MAP_SIZE - 140) / max(float((hi - lo).max()), 1e-9)
    centre = (lo + hi) / 2
    middle = (30 + MAP_SIZE - 110) / 2
    cx = middle + (xy[:, 0] - centre[0]) * scale
    cy = MAP_SIZE / 2 - (xy[:, 1] - centre[1]) * scale
    named = _named_points([k for k, _ in placed], xy, flagged)
    written = np.zeros(len(placed), dtype=bool)
    written[named] = True
    rest = np.flatnonzero(~written)
    labels = iter(
        place_labels(
            cx[named],
            cy[named],
            [names[placed[i][0]][:14] for i in named],
            width=MAP_SIZE,
            height=MAP_SIZE,
            unnamed=(cx[rest], cy[rest]),
        )
    )
    points = [
        {
            "cx": px(x),
            "cy": px(y),
            "name": names[k],
            "flagged": k in flagged,
            "labelled": bool(written[i]),
            **(next(labels) if written[i] else {}),
        }
        for i, ((k, _), x, y) in enumerate(zip(placed, cx, cy, strict=True))
    ]
    points.sort(key=lambda point: bool(point["flagged"]))  # drawn last: no circle hides a triangle
    return {"points": points, "size": MAP_SIZE, "named": len(named)}


def _named_points(rows: list[int], xy: np.ndarray, flagged: Collection[int]) -> np.ndarray:
    """Positions (into ``rows``) of the map's points that get a name, ascending: all of them
    up to :data:`MAP_LABELS_MOST`; else the flagged, then the farthest from the median
    (:func:`first_rows`)."""
    if len(rows) <= MAP_LABELS_MOST:
        return np.arange(len(rows))
    far = np.linalg.norm(xy - np.median(xy, axis=0), axis=1)
    return first_rows(np.array([k in flagged for k in rows]), far, MAP_LABELS_MOST)


#: Where a label may sit around its point: (dx, dy of the text's anchor, text-anchor), in
#: order of preference: right, left, above, below, then the four diagonals.
_SPOTS = (
    (8.0, 4.5, "start"),
    (-8.0, 4.5, "end"),
    (0.0, -9.0, "middle"),
    (0.0, 18.0, "middle"),
    (7.0, -8.0, "start"),
    (-7.0, -8.0, "end"),
    (7.0, 17.0, "start"),
    (-7.0, 17.0, "end"),
)
#: The share of a label's width left of its anchor, per text-anchor.
_ANCHOR_SHIFT = {"start": 0.0, "middle": 0.5, "end": 1.0}


def _label_spots() -> list[tuple[float, float, str, bool]]:
    """Every spot a label may take, in order: :data:`_SPOTS`, then off to a side a line
    further each time (right, then left; down, then up), with a leader line."""
    spots = [(dx, dy, anchor, False) for dx, dy, anchor in _SPOTS]
    for step in range(1, 12):
        for dx, anchor in ((14.0, "start"), (-14.0, "end")):
            spots += [(dx, 4.5 + sign * step * LABEL_H, anchor, True) for sign in (1, -1)]
    return spots


_LABEL_SPOTS = _label_spots()
_SPOT_DX = np.array([spot[0] for spot in _LABEL_SPOTS])
_SPOT_DY = np.array([spot[1] for spot in _LABEL_SPOTS])
_SPOT_SHIFT = np.array([_ANCHOR_SHIFT[spot[2]] for spot in _LABEL_SPOTS])


def place_labels(
    x: np.ndarray,
    y: np.ndarray,
    texts: list[str],
    *,
    width: float,
    height: float,
    unnamed: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[dict[str, str]]:
    """Positions of point labels that overlap no other label and no point, inside the plot.

    Greedy, points from the top down: each label takes the first spot of :data:`_SPOTS`
    that is free; if none is, the right-hand spot is moved down (then up) in line steps
    until it is, and a leader line joins it to its point. Each point tests all its spots
    against all markers and the labels placed so far in one array comparison, so ``n``
    labels cost ``n`` vector steps of ``spots x 2n`` (128 labels: a few milliseconds).
    ``unnamed`` are the ``(x, y)`` of points drawn without a name, whose markers labels avoid
    too. Returns per label ``dx``/``dy`` (the text's anchor relative to the point),
    ``anchor`` and ``leader`` (``""`` or the line's end, relative to the point).
    """
    n = len(texts)
    ux, uy = unnamed if unnamed is not None else (np.zeros(0), np.zeros(0))
    # obstacles: the unnamed markers, the n markers, then the labels in the order placed
    u = len(ux)
    obstacles = np.zeros((u + 2 * n, 4))
    if u + n:
        mx, my = np.concatenate([ux, x]), np.concatenate([uy, y])
        obstacles[: u + n] = np.stack([mx - 6, my - 7, mx + 6, my + 6], axis=1)
    placed: list[dict[str, str] | None] = [None] * n
    for k, i in enumerate(np.argsort(y, kind="stable")):
        w = len(texts[i]) * LABEL_W
        left = x[i] + _SPOT_DX - _SPOT_SHIFT * w
        top = y[i] + _SPOT_DY - LABEL_H + 4
        right, bottom = left + w, y[i] + _SPOT_DY + 4
        inside = (left >= 2) & (top >= 2) & (right <= width - 2) & (bottom <= height - 2)
        others = np.delete(obstacles[: u + n + k], u + i, axis=0)
        hit = (
            (left[:, None] < others[:, 2])
            & (others[:, 0] < right[:, None])
            & (top[:, None] < others[:, 3])
            & (others[:, 1] < bottom[:, None])
        ).any(axis=1)
        free = np.flatnonzero(inside & ~hit)
        s = int(free[0]) if free.size else 0  # nowhere free: the right-hand spot, overlapping
        dx, dy, anchor, leader = _LABEL_SPOTS[s]
        obstacles[u + n + k] = (left[s], top[s], right[s], bottom[s])
        placed[i] = {
            "dx": px(dx),
            "dy": px(dy),
            "anchor": anchor,
            "leader": f"{px(dx - np.sign(dx) * 2)},{px(dy - 4)}" if leader else "",
        }
    return [p for p in placed if p is not None]


INTERVAL_W = 320.0
INTERVAL_ROW = 22.0


def _bounded(
    entry: Sequence[float | int | None] | None,
) -> tuple[float, float, float, int] | None:
    """``(estimate, low, high, n)`` of a stored interval entry with both bounds, else None."""
    if entry is None:
        return None
    estimate, low, high, n = entry[:4]
    if estimate is None or low is None or high is None or n is None:
        return None
    return float(estimate), float(low), float(high), int(n)


def round_ticks(lo: float, hi: float, target: int = 5) -> tuple[list[float], int]:
    """About ``target`` ticks at round values inside ``[lo, hi]``, and the decimals that print
    them: multiples of a step of 1, 2 or 5 times a power of ten.

    Notes
    -----
    The step is the "nice number" :math:`s \\in \\{1, 2, 5, 10\\} \\cdot 10^k` nearest to
    :math:`(hi - lo) / (target - 1)` (Heckbert's rounding: below 1.5, 3, 7); the ticks are
    :math:`s \\lceil lo / s \\rceil, \\dots, s \\lfloor hi / s \\rfloor`, rounded to the
    step's decimals so that they print exactly (0.2, never 0.20000000000000004).

    References
    ----------
    Heckbert, P. S. (1990). Nice numbers for graph labels. In A. S. Glassner (ed.), Graphics
    Gems, 61-63. Academic Press.

    Examples
    --------
    >>> round_ticks(-0.21, 0.22)
    ([-0.2, -0.1, 0.0, 0.1, 0.2], 1)
    """
    span = hi - lo if hi > lo else abs(lo) or 1.0
    raw = span / max(target - 1, 1)
    power = 10.0 ** np.floor(np.log10(raw))
    fraction = raw / power
    step = power * (1 if fraction < 1.5 else 2 if fraction < 3 else 5 if fraction < 7 else 10)
    decimals = max(0, int(-np.floor(np.log10(step) + 1e-9)))
    first, last = np.ceil(lo / step - 1e-9), np.floor(hi / step + 1e-9)
    ticks = [round(float(k * step), decimals) + 0.0 for k in np.arange(first, last + 1)]
    return ticks, decimals


def interval_plot(
    entries: Sequence[Sequence[float | int | None] | None],
    names: Sequence[str],
    *,
    floor: float | None,
    flagged: set[int],
    fmt: str,
    unit: str = "items",
) -> dict[str, Any] | None:
    """A dot-and-whisker chart of one indicator: per annotator with an interval, its estimate
    (dot) and 95 % interval (error bar); the indicator's floor as a dashed line.

    ``entries`` are the stored ``[estimate, low, high, n, ...]`` per annotator (``None``: no
    interval, no row); ``flagged`` holds the rows flagged on this indicator. ``None`` when no
    annotator has an interval. The x axis spans the intervals and the floor; its ticks fall on
    round values (:func:`round_ticks`).
    """
    rows = [(k, known) for k, entry in enumerate(entries) if (known := _bounded(entry))]
    if not rows:
        return None
    values = [x for _, e in rows for x in (e[1], e[2])] + ([floor] if floor is not None else [])
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.05 or 0.05
    lo, hi = lo - pad, hi + pad
    ticks_at, decimals = round_ticks(lo, hi)
    left, right = 96.0, 12.0

    def x(value: float) -> str:
        return px(left + (value - lo) / (hi - lo) * (INTERVAL_W - left - right))

    height = INTERVAL_ROW * len(rows) + 28.0
    drawn = [
        {
            "y": px(INTERVAL_ROW * (i + 0.5)),
            "top": px(INTERVAL_ROW * (i + 0.5) - 5),
            "bottom": px(INTERVAL_ROW * (i + 0.5) + 5),
            "x": x(e[0]),
            "low": x(e[1]),
            "high": x(e[2]),
            "name": names[k],
            "flagged": k in flagged,
            "title": f"{names[k]}: {fmt.format(e[0])} [{fmt.format(e[1])}, {fmt.format(e[2])}]; "
            f"{e[3]:,} {unit.replace('_', ' ')}",
        }
        for i, (k, e) in enumerate(rows)
    ]
    bottom = INTERVAL_ROW * len(rows)
    # a percentage in the figure's own format, once each; a number with the step's decimals
    # ("0.2", not "0.20": narrow labels do not run into each other)
    labels = [fmt.format(t) if "%" in fmt else f"{t:.{decimals}f}" for t in ticks_at]
    ticks = [
        {"x": x(t), "label": label}
        for i, (t, label) in enumerate(zip(ticks_at, labels, strict=True))
        if i == 0 or label != labels[i - 1]
    ]
    return {
        "rows": drawn,
        "ticks": ticks,
        "floor": None if floor is None else x(floor),
        "width": INTERVAL_W,
        "height": px(height),
        "axis": px(bottom),
        "tick_y": px(bottom + 16),
        "left": px(left),
        "label_x": px(left - 8),
    }
