"""What the quality dashboard shows: rows, plot geometry and trend lines from the snapshots.

The page view and the websocket consumer both call :func:`dashboard_context` and render the
same template fragments, so a pushed update looks exactly like a reload. Plots are SVG drawn by
the templates; this module only computes numbers (positions, sizes, colours).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model

from analytics.metrics.outliers import landis_koch_band
from analytics.models import Flag, QualitySnapshot
from analytics.publishing import KINDS
from analytics.selectors import (
    excluded_annotator_ids,
    latest_snapshot,
    question_flags,
    snapshot_history,
    top_disagreements,
)
from apps.continuous.selectors import item_overlay
from apps.studies.models import Question, Study

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

#: Indicator columns of the annotator table: key, heading, format, whether high is good.
COLUMNS: tuple[tuple[str, str, str, bool], ...] = (
    ("items_done", "Items", "{:.0f}", True),
    ("seconds_per_item", "Seconds / item", "{:.1f}", True),
    ("kappa", "Kappa with others", "{:.2f}", True),
    ("aad", "Mean AAD", "{:.2f}", False),
    ("skew", "Label skew", "{:.2f}", False),
    ("retest_kappa", "Test-retest kappa", "{:.2f}", True),
    ("ds_competence", "Dawid-Skene competence", "{:.2f}", True),
    ("judgements", "Judgements", "{:.0f}", True),
    ("seconds_per_judgement", "Seconds / judgement", "{:.1f}", True),
    ("transitivity_kappa", "Transitivity kappa", "{:.2f}", True),
    ("contradiction_rate", "Audit contradictions", "{:.0%}", False),
    ("pruning_stopped_at", "Pruning stopped after", "{:.0f}", False),
    ("agreement", "Same outcome on shared pairs", "{:.0%}", True),
    ("traces_done", "Traces", "{:.0f}", True),
    ("kappa_truth", "kappa_SDA vs truth", "{:.2f}", True),
    ("lag", "Lag behind truth (s)", "{:.1f}", False),
    ("trend_f1", "Trend F1 vs truth", "{:.2f}", True),
)
"""The ``kappa`` column is each kind's agreement with the others: Cohen's kappa on shared items
(categorical) or on the outcomes of shared pairs (pairwise), pooled kappa_SDA (continuous)."""

#: The indicator counting each annotator's work, per question kind (rows without work hide).
COUNT_KEYS = ("items_done", "judgements", "traces_done")

#: Study figures shown in the summary besides Krippendorff alpha: key, label.
STUDY_FIGURES = (
    ("pooled_transitivity_kappa", "Pooled transitivity kappa"),
    ("pooled_kappa_sda", "Pooled kappa_SDA"),
)

#: What the heatmap's "kappa" is, per question kind.
HEATMAP_NOTES = {
    Question.Kind.CATEGORICAL: "Cohen's kappa of each pair on the items both labelled",
    Question.Kind.PAIRWISE: "Cohen's kappa of each pair on the outcomes of the pairs both judged",
    Question.Kind.CONTINUOUS: "kappa_SDA of each pair, sign coincidences pooled over the items "
    "both traced",
}

HEATMAP_SIZE = 480.0
MAP_SIZE = 360.0
SPARK_W, SPARK_H = 96.0, 24.0


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


def _px(value: float) -> str:
    """An SVG coordinate, formatted here once (template filters cost more than the plot)."""
    return f"{value:.1f}"


def _fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


@dataclass
class Row:
    """One annotator in the table."""

    user_id: int
    name: str
    cells: list[dict[str, Any]]
    flags: list[Flag] = field(default_factory=list)
    excluded: bool = False
    band: str = ""
    trend: str = ""


def heatmap_layout(
    matrix: list[list[float | None]],
    *,
    names: list[str],
    order: list[int],
    what: str = "kappa",
    size: float = HEATMAP_SIZE,
) -> dict[str, Any]:
    """Cells, row labels and legend of an annotator x annotator heatmap in ``order``.

    Values print inside the cells when a cell is at least 30 px wide; every cell has a tooltip
    naming the pair and ``what`` the value measures. The legend spans 0 to 1 (cividis).
    """
    cell = size / max(len(order), 1)
    pairs = [(i, a, j, b) for i, a in enumerate(order) for j, b in enumerate(order)]
    values = [matrix[a][b] for _, a, _, b in pairs]
    cells = [
        {
            "x": _px(j * cell),
            "y": _px(i * cell),
            "size": _px(cell),
            "tx": _px((j + 0.5) * cell),
            "ty": _px((i + 0.5) * cell),
            "fill": fill,
            "ink": _ink(value),
            "text": _fmt(value, "{:.2f}") if cell >= 30 else "",
            "title": f"{names[a]} × {names[b]}: {what} {_fmt(value, '{:.2f}')}",
        }
        for (i, a, j, b), value, fill in zip(pairs, values, colours(values), strict=True)
    ]
    labels = [{"pos": _px((i + 0.5) * cell), "name": names[a]} for i, a in enumerate(order)]
    ticks = np.linspace(0, 1, 6)
    step = size / 12
    legend = [
        {"x": _px(i * step), "fill": fill, "label": f"{t:.1f}"}
        for i, (t, fill) in enumerate(zip(ticks, colours(ticks.tolist()), strict=True))
    ]
    return {"cells": cells, "labels": labels, "size": size, "legend": legend}


def _map(mds: list[list[float] | None] | None, names: list[str], flagged: set[int]) -> dict | None:
    if not mds:
        return None
    placed = [(k, p) for k, p in enumerate(mds) if p is not None]
    xy = np.array([p for _, p in placed], dtype=float)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    # 30 px margins, 80 px more on the right for the names; equal scale on both axes
    scale = (MAP_SIZE - 140) / max(float((hi - lo).max()), 1e-9)
    centre = (lo + hi) / 2
    middle = (30 + MAP_SIZE - 110) / 2
    points = [
        {
            "cx": _px(middle + (x - centre[0]) * scale),
            "cy": _px(MAP_SIZE / 2 - (y - centre[1]) * scale),
            "name": names[k],
            "flagged": k in flagged,
        }
        for (k, _), (x, y) in zip(placed, xy, strict=True)
    ]
    return {"points": points, "size": MAP_SIZE}


MAX_HISTOGRAM_BARS = 6


def _histograms(matrices: dict, names: list[str]) -> dict | None:
    """Per annotator: share of shared items at each AAD difference from the others."""
    differences = matrices.get("aad_differences") or []
    counts = np.array(matrices.get("aad_counts") or [], dtype=float)
    if counts.size == 0 or not differences:
        return None
    names_of_bins = [f"{d:g}" for d in differences]  # tooltips
    tick_labels = list(names_of_bins)
    if len(differences) > MAX_HISTOGRAM_BARS:  # label coordinates give many distinct distances
        edges = np.linspace(0.0, max(differences), MAX_HISTOGRAM_BARS + 1)
        which = np.searchsorted(edges, differences, side="right") - 1
        counts = counts @ np.eye(MAX_HISTOGRAM_BARS)[np.clip(which, 0, MAX_HISTOGRAM_BARS - 1)]
        names_of_bins = [f"{lo:.2g} to {hi:.2g}" for lo, hi in itertools.pairwise(edges)]
        tick_labels = [f"{lo:.1f}" if j % 2 == 0 else "" for j, lo in enumerate(edges[:-1])]
    totals = counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(totals > 0, counts / totals, 0.0)
    pooled = counts.sum(axis=0) / max(counts.sum(), 1.0)
    width, height = 150.0, 60.0
    bar = width / len(names_of_bins)
    charts = []
    for k in np.flatnonzero(totals[:, 0] > 0):
        bars = [
            {
                "x": _px(j * bar + 1),
                "x2": _px(j * bar + bar - 1),
                "w": _px(bar - 2),
                "h": _px(shares[k, j] * height),
                "y": _px(height - shares[k, j] * height),
                "ref": _px(height - pooled[j] * height),
                "title": f"AAD {names_of_bins[j]}: {shares[k, j]:.0%} of shared items",
            }
            for j in range(len(names_of_bins))
        ]
        charts.append({"name": names[k], "bars": bars, "n": int(totals[k, 0])})
    ticks = [{"x": _px((j + 0.5) * bar), "label": label} for j, label in enumerate(tick_labels)]
    return {"charts": charts, "ticks": ticks, "width": width, "height": height, "bar": bar}


def dashboard_questions(study: Study) -> list[Question]:
    """The study's questions that have a live dashboard (their kind is registered)."""
    return list(study.questions.filter(kind__in=list(KINDS)))


def trace_overlay_context(*, question: Question, item_id: str | None) -> dict[str, Any]:
    """The traces card of a continuous question: one item's traces overlaid with its gold
    truth (``item_id`` when it names an item of the study, else the first gold item, else the
    first item), drawn by the continuous app (``continuous/traces.html#overlay``)."""
    items = list(question.study.items.order_by("position", "id"))
    chosen = next((i for i in items if str(i.pk) == item_id), None) or next(
        (i for i in items if (i.metadata or {}).get("signal")), items[0] if items else None
    )
    return {
        "trace_items": items,
        "trace_overlay": item_overlay(question=question, item=chosen) if chosen else None,
    }


def dashboard_context(
    *, study: Study, question: Question | None, plots: bool = True
) -> dict[str, Any]:
    """Everything the dashboard template and its fragments need for one question.

    ``plots=False`` leaves out the heatmap, map and histograms (the costly fragments with many
    annotators), for pushes that send only the light fragments.
    """
    context: dict[str, Any] = {
        "study": study,
        "question": question,
        "questions": dashboard_questions(study),
        "snapshot": None,
    }
    snapshot: QualitySnapshot | None = latest_snapshot(question=question) if question else None
    if question is None or snapshot is None or not snapshot.indicators.get("annotators"):
        return context
    spec = KINDS[question.kind]
    indicators, matrices = snapshot.indicators, snapshot.matrices
    ids: list[int] = indicators["annotators"]
    users = dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))
    names = [users.get(a, f"#{a}") for a in ids]
    excluded = excluded_annotator_ids(study=study)
    flags = list(question_flags(question=question))
    by_annotator: dict[int | None, list[Flag]] = {}
    for flag in flags:
        by_annotator.setdefault(flag.annotator_id, []).append(flag)
    values = indicators["values"]
    history = snapshot_history(question=question)
    trend_of: dict[int, list[float | None]] = {a: [] for a in ids}
    for past in history:
        past_kappa = dict(
            zip(
                past["indicators"].get("annotators", []),
                past["indicators"].get("values", {}).get("kappa", []),
                strict=False,
            )
        )
        for a in ids:
            trend_of[a].append(past_kappa.get(a))
    columns = [c for c in COLUMNS if c[0] in values]
    done = next(values[key] for key in COUNT_KEYS if key in values)
    rows = []
    for k, user_id in enumerate(ids):
        if not done[k]:
            continue
        # flags the figures left behind before anyone looked at them are history, not news
        own_flags = [
            f for f in by_annotator.get(user_id, []) if f.active or f.status != Flag.Status.OPEN
        ]
        flagged_keys = {f.indicator for f in own_flags if f.active and f.status != "dismissed"}
        kappa = values["kappa"][k]
        rows.append(
            Row(
                user_id=user_id,
                name=names[k],
                cells=[
                    {
                        "key": key,
                        "text": _fmt(values[key][k], pattern),
                        "flagged": key in flagged_keys,
                    }
                    for key, _, pattern, _ in columns
                ],
                flags=own_flags,
                excluded=user_id in excluded,
                band=landis_koch_band(np.nan if kappa is None else kappa),
                trend=sparkline(trend_of[user_id]),
            )
        )
    rows.sort(key=lambda r: (not any(f.status == "open" and f.active for f in r.flags), r.name))
    flagged_idx = {ids.index(f.annotator_id) for f in flags if f.annotator_id in ids and f.active}
    study_figures = indicators.get("study", {})
    alpha = study_figures.get("alpha")

    def median_of(past: dict, key: str) -> float | None:
        known = [v for v in past["indicators"].get("values", {}).get(key, []) if v is not None]
        return float(np.median(known)) if known else None

    context.update(
        snapshot=snapshot,
        columns=[(key, heading) for key, heading, _, _ in columns],
        rows=rows,
        study_flags=by_annotator.get(None, []),
        alpha=alpha,
        alpha_band=landis_koch_band(np.nan if alpha is None else alpha),
        figures=study_figures,
        study_rows=[
            (label, _fmt(study_figures[key], "{:.2f}"))
            for key, label in STUDY_FIGURES
            if key in study_figures
        ],
        heatmap_note=HEATMAP_NOTES.get(question.kind, ""),
        competence=spec.competence,
        items=list(top_disagreements(question=question)) if spec.item_disagreement else None,
        trends=[
            *(
                [
                    {
                        "label": "Krippendorff alpha",
                        "points": sparkline(
                            [p["indicators"].get("study", {}).get("alpha") for p in history]
                        ),
                        "last": _fmt(alpha, "{:.2f}"),
                    }
                ]
                if "alpha" in study_figures
                else []
            ),
            {
                "label": "Median kappa with others",
                "points": sparkline([median_of(p, "kappa") for p in history]),
                "last": _fmt(median_of({"indicators": indicators}, "kappa"), "{:.2f}"),
            },
            {
                "label": "Ratings",
                "points": sparkline(
                    [p["indicators"].get("study", {}).get("n_ratings") for p in history]
                ),
                "last": str(study_figures.get("n_ratings", 0)),
            },
        ],
        open_flags=sum(f.status == Flag.Status.OPEN and f.active for f in flags),
        min_evidence=settings.QUALITY_MIN_EVIDENCE,
        min_overlap=settings.QUALITY_MIN_OVERLAP,
        snapshot_interval=settings.QUALITY_SNAPSHOT_INTERVAL,
        spark_w=SPARK_W,
        spark_h=SPARK_H,
    )
    if plots:
        context.update(
            heatmap=heatmap_layout(matrices["kappa"], names=names, order=matrices["order"]),
            map=_map(matrices.get("mds"), names, flagged_idx),
            histograms=_histograms(matrices, names),
        )
    return context
