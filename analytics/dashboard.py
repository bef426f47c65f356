"""What the quality dashboard shows: rows, plot geometry and trend lines from the snapshots.

The page view and the websocket consumer both call :func:`dashboard_context` and render the
same template fragments, so a pushed update looks exactly like a reload. Plots are SVG drawn by
the templates; :mod:`analytics.plotting` computes their numbers. Columns, formats, directions
and flags come from the question kind's :class:`~analytics.indicators.Indicator` specs, extra
cards from the kind (:class:`apps.studies.kinds.QuestionKind`): this module names no kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model

from analytics.config import QualityConfig, quality_config
from analytics.indicators import BAND_MEANING, INTERVAL_MEANING, Indicator, StudyFigure
from analytics.intervals import _entry, evidence_text, freshness, interval_text
from analytics.metrics.outliers import landis_koch_band
from analytics.metrics.uncertainty import median_interval
from analytics.models import Exclusion, Flag, QualitySnapshot
from analytics.pipeline import answers_waiting
from analytics.plotting import (
    SPARK_H,
    SPARK_W,
    fmt,
    heatmap_layout,
    interval_plot,
    map_layout,
    spark_note,
    sparkline,
)
from analytics.selectors import (
    active_exclusions,
    latest_snapshot,
    question_flags,
    snapshot_history,
)
from apps.studies.kinds import question_kind, question_kinds
from apps.studies.models import Question, Study


@dataclass
class Row:
    """One annotator in the table."""

    user_id: int
    name: str
    cells: list[dict[str, Any]]
    flags: list[Flag] = field(default_factory=list)
    exclusion: Exclusion | None = None
    trend: str = ""
    trend_note: str = ""


def _trend(label: str, values: list[float | None], last: str) -> dict[str, str]:
    """One line of the "Over time" card: its sparkline, or a note while it has < 2 points."""
    return {"label": label, "points": sparkline(values), "note": spark_note(values), "last": last}


def dashboard_questions(study: Study) -> list[Question]:
    """The study's questions that have a live dashboard (their kind is registered)."""
    return list(study.questions.filter(kind__in=list(question_kinds())))


def dashboard_page_context(*, question: Question | None, query: Mapping[str, str]) -> dict:
    """The context of the kind's page-only cards (drawn on load, not pushed)."""
    if question is None:
        return {}
    return question_kind(question.kind).page_context(question=question, query=query)


def _band(value: float | None) -> str:
    """The Landis-Koch band of an agreement figure ("" when unknown)."""
    return landis_koch_band(np.nan if value is None else value)


def _series(indicators: Mapping[str, Any], key: str) -> list[float | None]:
    """One indicator's values per annotator in a snapshot's ``indicators`` ([] if absent)."""
    return indicators.get("values", {}).get(key, [])


def _too_few(figure: StudyFigure, study: Mapping[str, Any], config: QualityConfig) -> bool:
    """Whether the figure's interval rests on less than the minimum evidence of its unit."""
    entry = study.get("intervals", {}).get("study", {}).get(figure.key)
    return entry is not None and entry[3] < config.evidence_needed(figure.evidence)


def _study_text(figure: StudyFigure, study: Mapping[str, Any], config: QualityConfig) -> str:
    """A study figure, with its interval and evidence once computed: "0.59 [0.48, 0.69];
    200 items"; below the minimum evidence of its unit, as the annotators' figures, only the
    evidence: "8 triplets: too few"."""
    entry = study.get("intervals", {}).get("study", {}).get(figure.key)
    if entry is None:
        return fmt(study[figure.key], figure.format)
    if _too_few(figure, study, config):
        return f"{evidence_text(entry, figure.evidence)}: too few"
    return f"{interval_text(entry, figure.format)}; {evidence_text(entry, figure.evidence)}"


def _figure_and_detail(text: str) -> tuple[str, str]:
    """``"0.44 [0.34, 0.52]; 35 items"`` as ``("0.44", "[0.34, 0.52]; 35 items")``; a figure
    without an interval has no detail."""
    figure, _, detail = text.partition(" [")
    return (figure, f"[{detail}") if detail else (text, "")


def _median_text(values: list[float | None], spec: Indicator) -> str:
    """The annotators' median of an indicator with its order-statistic interval and the
    annotators it counts: "0.52 [0.31, 0.66]; 8 annotators" (no bounds below 6 of them)."""
    found = median_interval(np.array([np.nan if v is None else v for v in values], dtype=float))
    if found.n == 0:
        return "–"
    entry = _entry(*(float(part) for part in found[:4]))
    if entry is not None and entry[1] is None:  # no bounds below 6 annotators: say so
        shown = fmt(float(found.estimate), spec.format)
        return f"{shown}; {evidence_text(entry, 'annotators')} (an interval needs 6)"
    return f"{interval_text(entry, spec.format)}; {evidence_text(entry, 'annotators')}"


def _cell(
    spec: Indicator, k: int, indicators: Mapping[str, Any], config: QualityConfig
) -> dict[str, Any]:
    """One table cell: ``0.59 [0.48, 0.69]`` with its evidence when an interval is stored,
    "1 repeat: too few" for a judged figure below its minimum evidence, else the value."""
    value = indicators["values"][spec.key][k]
    counts = indicators.get("evidence", {}).get(spec.evidence)
    n = counts[k] if counts and k < len(counts) else None
    unit = spec.evidence.replace("_", " ")
    unit = unit[:-1] if n == 1 and unit.endswith("s") else unit
    judged = spec.rule is not None and value is not None
    if judged and n is not None and n < config.evidence_needed(spec.evidence):
        return {"text": f"{n} {unit}: too few", "evidence": ""}
    stored = indicators.get("intervals", {}).get(spec.interval) if spec.interval else None
    entry = stored[k] if stored and k < len(stored) else None
    if entry is not None and (entry[1] is None or entry[2] is None):  # estimate, no interval
        estimate = spec.text(value)
        return {  # not "[–, –]": the evidence is too thin for the interval to be trusted
            "text": f"{estimate} [too few for an interval]",
            "estimate": estimate,
            "bounds": "[too few for an interval]",
            "evidence": evidence_text(entry, spec.evidence),
        }
    if entry is not None:
        text = interval_text(entry, spec.format)
        estimate, _, bounds = text.partition(" [")
        return {  # the bounds apart, so that a narrow column breaks before them, not inside
            "text": text,
            "estimate": estimate,
            "bounds": f"[{bounds}",
            "evidence": evidence_text(entry, spec.evidence),
        }
    return {"text": spec.text(value), "evidence": f"{n:,} {unit}" if n is not None else ""}


def dashboard_context(
    *, study: Study, question: Question | None, plots: bool = True
) -> dict[str, Any]:
    """Everything the dashboard template and its fragments need for one question.

    ``plots=False`` leaves out the heatmap, map and the kind's plot cards (the costly
    fragments with many annotators), for pushes that send only the light fragments.
    """
    config = quality_config()
    context: dict[str, Any] = {
        "study": study,
        "question": question,
        "kind": question_kind(question.kind) if question else None,
        "questions": dashboard_questions(study),
        "snapshot": None,
        "waiting": answers_waiting(question_id=question.pk, kind=question.kind) if question else 0,
    }
    snapshot: QualitySnapshot | None = (
        latest_snapshot(question=question, matrices=plots) if question else None
    )
    if question is None or snapshot is None or not snapshot.indicators.get("annotators"):
        return context
    kind = context["kind"]
    agreement = kind.indicator(kind.agreement)
    indicators = snapshot.indicators
    ids: list[int] = indicators["annotators"]
    users = dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))
    names = [users.get(a, f"#{a}") for a in ids]
    exclusions = {e.annotator_id: e for e in active_exclusions(study=study)}
    flags = list(question_flags(question=question))
    by_annotator: dict[int | None, list[Flag]] = {}
    for flag in flags:
        by_annotator.setdefault(flag.annotator_id, []).append(flag)
    values = indicators["values"]
    history = snapshot_history(
        question=question,
        indicator=agreement.key,
        study_keys=[*(figure.key for figure in kind.study_figures), "n_ratings"],
    )
    trend_of: dict[int, list[float | None]] = {a: [] for a in ids}
    for past in history:
        past_values = dict(zip(past["annotators"], past["values"], strict=False))
        for a in ids:
            trend_of[a].append(past_values.get(a))
    columns = [spec for spec in kind.indicators if spec.key in values]
    done = values[kind.count]
    question_config = config.for_question(question.settings)
    rows = []
    for k, user_id in enumerate(ids):
        if not done[k]:
            continue
        # flags the figures left behind before anyone looked at them are history, not news
        own_flags = [
            f for f in by_annotator.get(user_id, []) if f.active or f.status != Flag.Status.OPEN
        ]
        flagged_keys = {f.indicator for f in own_flags if f.active and f.status != "dismissed"}
        rows.append(
            Row(
                user_id=user_id,
                name=names[k],
                cells=[
                    {
                        **_cell(spec, k, indicators, question_config),
                        "heading": spec.heading,  # the phone's stacked cells name their figure
                        "flagged": spec.key in flagged_keys,
                        "band": _band(values[spec.key][k]) if spec.banded else "",
                    }
                    for spec in columns
                ],
                flags=own_flags,
                exclusion=exclusions.get(user_id),
                trend=sparkline(trend_of[user_id]),
                trend_note=spark_note(trend_of[user_id]),
            )
        )
    # by name only: a key that flags or exclusions change would move the next row's buttons
    # under the pointer after a click or a push
    rows.sort(key=lambda r: (r.name.casefold(), r.user_id))
    flagged_idx = {ids.index(f.annotator_id) for f in flags if f.annotator_id in ids and f.active}
    study_figures = indicators.get("study", {})
    computed = study_figures.get("intervals", {}).get("study", {})
    # a figure computed only with the intervals (the traces' ICC) shows once they exist
    shown = [
        figure
        for figure in kind.study_figures
        if figure.key in study_figures or computed.get(figure.key)
    ]

    def median_of(series: Sequence[float | None]) -> float | None:
        known = [v for v in series if v is not None]
        return float(np.median(known)) if known else None

    context.update(
        snapshot=snapshot,
        columns=[spec.heading for spec in columns],
        # one line per column under the table: what it compares and which way is good
        column_notes=[
            {"heading": spec.heading, "explanation": spec.explanation, "reading": spec.reading}
            for spec in columns
        ],
        band_meaning=BAND_MEANING if any(spec.banded for spec in columns) else "",
        interval_meaning=INTERVAL_MEANING,
        rows=rows,
        study_flags=by_annotator.get(None, []),
        figures=study_figures,
        # (title, figure, its interval and evidence, band, explanation): the card shows the
        # figure large and the rest small, so "0.44 [0.34, 0.52]; 35 items" fits a card
        study_rows=[
            (
                figure.title(study_figures),
                *_figure_and_detail(_study_text(figure, study_figures, config)),
                _band(study_figures[figure.key])
                if figure.headline and not _too_few(figure, study_figures, config)
                else "",
                figure.explanation,
            )
            for figure in shown
        ],
        intervals_freshness=freshness(study_figures),
        trends=[
            *(
                _trend(
                    figure.label,
                    [p["study"][figure.key] for p in history],
                    _study_text(figure, study_figures, config),
                )
                for figure in shown
                if figure.headline
            ),
            _trend(
                f"Median {agreement.label[0].lower()}{agreement.label[1:]}",
                [median_of(p["values"]) for p in history],
                _median_text(_series(indicators, agreement.key), agreement),
            ),
            _trend(
                kind.answers_label,  # what the kind counts: ratings, judgements, traces
                [p["study"]["n_ratings"] for p in history],
                str(study_figures.get("n_ratings", 0)),
            ),
        ],
        open_flags=sum(f.status == Flag.Status.OPEN and f.active for f in flags),
        min_evidence=config.evidence_needed("items"),
        min_overlap=config.min_overlap,
        snapshot_interval=int(config.snapshot_interval),
        spark_w=SPARK_W,
        spark_h=SPARK_H,
        **kind.dashboard_context(question=question, snapshot=snapshot, names=names, plots=plots),
    )
    if plots:
        stored_intervals = indicators.get("intervals", {})

        def flagged_on(key: str) -> set[int]:
            return {
                ids.index(f.annotator_id)
                for f in flags
                if f.indicator == key and f.active and f.annotator_id in ids
            }

        context["interval_plots"] = [
            {"label": spec.label, "floor": spec.rule.floor if spec.rule else None, "plot": plot}
            for spec in columns
            if spec.interval
            and (
                plot := interval_plot(
                    stored_intervals.get(spec.interval, []),
                    names,
                    floor=spec.rule.floor if spec.rule else None,
                    flagged=flagged_on(spec.key),
                    fmt=spec.format,
                    unit=spec.evidence,
                )
            )
        ]
        matrices = snapshot.matrices
        context.update(
            heatmap=heatmap_layout(
                matrices["kappa"],
                names=names,
                order=matrices["order"],
                overlap=matrices.get("overlap"),
                unit=kind.pair_evidence,
                flagged=flagged_idx,
            ),
            map=map_layout(matrices.get("mds"), names, flagged_idx),
        )
    return context
