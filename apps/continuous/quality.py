"""Live quality of continuous (trace) questions: statistics, indicators and their specs.

Trace answers use the annotation outbox (``analysis_pending``, ``analysed_revision``) like
categorical ones; :func:`quality_traces_process` takes every pending trace, and for each touched
item subtracts the item's contribution with the analysed traces and adds it with the current
ones (one ``sign_coincidence_matrix`` per item, and the gold figures of
:func:`apps.continuous.selectors.item_calibration` per trace) in the question's
:class:`~analytics.sufficient_stats.ContinuousStats`. :func:`quality_traces_rebuild` marks every
answer pending again and processes them; :func:`derive_continuous` turns the statistics into the
indicators declared below.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, TypedDict

import numpy as np
from django.db import transaction
from django.db.models import F
from numpy.typing import NDArray

from analytics.indicators import (
    NO_LAYOUT,
    Derived,
    FlagRule,
    Indicator,
    Json,
    StudyFigure,
    json_counts,
    json_ready,
    off_diagonal,
    pair_matrices,
    pair_totals,
    ratio,
    with_others,
)
from analytics.intervals import IntervalSet, in_evidence_units
from analytics.metrics.intervals import indicator_intervals_traces
from analytics.metrics.traces import kappa_sda_from_counts, sign_coincidence_matrix
from analytics.metrics.uncertainty import Interval, mean_bootstrap
from analytics.models import QualityState
from analytics.pipeline import annotator_index, publish_after_commit, state_for_update
from analytics.sufficient_stats import CONTINUOUS_COLUMNS, ContinuousStats
from apps.annotations.models import Annotation
from apps.continuous.config import TraceSettings, trace_settings
from apps.continuous.models import TraceRecording
from apps.continuous.selectors import (
    MAX_LAG_S,
    TRUTH_TOL,
    gold_signal_for_item,
    item_calibration,
    truth_at_rate,
)
from apps.items.models import Item
from apps.studies.models import Question

# kappa_SDA against the truth below 0.2 ("slight"), a reaction lag above 3 s (about twice the
# 1.6 s of the shades-of-green study).
TRACES_DONE = Indicator(
    "traces_done", "Traces", "{:.0f}", explanation="Traces this annotator has finished."
)
KAPPA_SDA = Indicator(
    "kappa_sda",
    "Kappa with others",
    direction="higher",
    rule=FlagRule("kappa_SDA with others"),
    evidence="traces",
    interval="kappa_sda",
    banded=True,
    explanation=(
        "Agreement of this annotator's trace directions (rising, steady, falling) with the other "
        "annotators', corrected for chance (kappa_SDA)."
    ),
)
#: Computed with the intervals only (no incremental state holds the lag-corrected tables):
#: its value is the interval's estimate, shown once the intervals exist.
KAPPA_SDA_ALIGNED = Indicator(
    "kappa_sda_aligned",
    "Kappa with others, lag-corrected",
    direction="higher",
    evidence="traces",
    interval="kappa_sda_aligned",
    live=False,
    banded=True,
    explanation="The same agreement after shifting each trace by its reaction lag.",
)
KAPPA_TRUTH = Indicator(
    "kappa_truth",
    "kappa_SDA vs truth",
    direction="higher",
    rule=FlagRule("kappa_SDA vs truth", floor=0.2),
    evidence="gold_items",
    interval="kappa_truth",
    banded=True,
    explanation=(
        "Agreement of this annotator's trace directions with the known signal of the gold items, "
        "corrected for chance (kappa_SDA)."
    ),
)
LAG = Indicator(
    "lag",
    "Lag behind truth (s)",
    "{:.1f}",
    direction="lower",
    rule=FlagRule("lag behind truth (s)", floor=3.0),
    evidence="gold_items",
    interval="lag",
    explanation=(
        "Seconds by which this annotator's trace follows the known signal of the gold items."
    ),
)
TREND_F1 = Indicator(
    "trend_f1",
    "Trend F1 vs truth",
    direction="higher",
    rule=FlagRule("trend F1 vs truth"),
    evidence="gold_items",
    interval="trend_f1",
    explanation=(
        "How well the trace catches the known signal's rises and falls (F1 score: 0 none, 1 all, "
        "with no false ones)."
    ),
)
INDICATORS = (TRACES_DONE, KAPPA_SDA, KAPPA_SDA_ALIGNED, KAPPA_TRUTH, LAG, TREND_F1)
POOLED_KAPPA_SDA = StudyFigure(
    "pooled_kappa_sda",
    "Pooled kappa_SDA",
    evidence="samples",
    explanation=(
        "Agreement of all traces' directions (rising, steady, falling) beyond chance, pooled over "
        "items; higher is better."
    ),
)
#: Computed with the intervals only (off the live path): shown once they exist.
ICC = StudyFigure(
    "icc",
    "ICC(k) of the lag-corrected traces",
    evidence="samples",
    explanation=(
        "How well the average trace of all annotators would agree with the average of another such "
        "group (ICC(k), 0 to 1) after removing each one's lag; higher is better."
    ),
)


ItemTraces = dict[int, NDArray[np.float64]]  # annotator row -> trace at the analysis rate


class _PendingRow(TypedDict):
    """A round-1 answer of an item with pending answers: the traces analysed and current."""

    id: int
    item_id: int
    annotator_id: int
    analysed_revision__value: Any
    current_revision__value: Any


def _item_contribution(
    traces: ItemTraces, *, truth: NDArray[np.float64] | None, rate_hz: float, tol: float
) -> tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64]]:
    """One item's part of :class:`ContinuousStats`: annotator rows, their sign tables (one
    matrix product) and per-annotator sums of :data:`CONTINUOUS_COLUMNS`."""
    who = np.fromiter(traces, dtype=np.intp, count=len(traces))
    n = min((t.size for t in traces.values()), default=0)
    signs = np.zeros((who.size, who.size, 3, 3), dtype=np.int64)
    if n >= 2:
        signs = sign_coincidence_matrix(np.vstack([t[:n] for t in traces.values()]), tol=tol)
    figures = np.zeros((who.size, len(CONTINUOUS_COLUMNS)))
    figures[:, CONTINUOUS_COLUMNS.index("traces")] = 1.0
    if truth is not None and min(n, truth.size) >= 2:
        for row, trace in enumerate(traces.values()):
            found = item_calibration(trace, truth, rate_hz=rate_hz, tol=tol, truth_tol=TRUTH_TOL)
            figures[row, CONTINUOUS_COLUMNS.index("gold")] = 1.0
            for name, key in (
                ("lag", "lag_seconds"),
                ("f1", "f1"),
                ("kappa_truth", "kappa_sda"),
            ):
                value = float(found[key])
                if np.isfinite(value):
                    figures[row, CONTINUOUS_COLUMNS.index(f"{name}_sum")] = value
                    figures[row, CONTINUOUS_COLUMNS.index(f"{name}_n")] = 1.0
    return who, signs, figures


def _traces_by_uuid(values: Sequence[dict | None]) -> dict[str, NDArray[np.float64]]:
    """The finished traces the answer values point at, by recording uuid."""
    uuids = {str(v["trace"]) for v in values if v}
    recordings = TraceRecording.objects.filter(
        uuid__in=uuids, status=TraceRecording.Status.FINISHED
    ).only("uuid", "resampled")
    return {str(r.uuid): r.trace() for r in recordings}


@transaction.atomic
def quality_traces_process(*, question_id: int) -> int:
    """Apply every pending trace answer of a continuous question to its statistics, then
    publish after the commit; returns how many answers were applied.

    Round-1 traces count; later rounds are marked analysed without counting.
    """
    question = Question.objects.get(pk=question_id)
    state = state_for_update(question_id)
    pending = Annotation.objects.select_for_update().filter(
        question_id=question_id, analysis_pending=True
    )
    pending_ids = set(pending.values_list("id", flat=True))
    if not pending_ids:
        return 0
    rows: list[_PendingRow] = list(
        Annotation.objects.filter(
            question_id=question_id,
            round=1,
            item_id__in=Annotation.objects.filter(pk__in=pending_ids, round=1).values("item_id"),
        ).values(
            "id", "item_id", "annotator_id", "analysed_revision__value", "current_revision__value"
        )
    )
    index = annotator_index(state, *(r["annotator_id"] for r in rows))
    stats = ContinuousStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    stats = stats.grown(n_annotators=len(index))
    found = _traces_by_uuid(
        [r["analysed_revision__value"] for r in rows] + [r["current_revision__value"] for r in rows]
    )
    options = trace_settings(question)
    by_item: dict[int, list[_PendingRow]] = {}
    for row in rows:
        by_item.setdefault(row["item_id"], []).append(row)
    for item in Item.objects.filter(pk__in=by_item):
        signal = gold_signal_for_item(item)
        truth = truth_at_rate(signal, rate_hz=options.analysis_rate_hz) if signal else None
        before: ItemTraces = {}
        after: ItemTraces = {}
        for row in by_item[item.pk]:
            old = row["analysed_revision__value"]
            new = row["current_revision__value"] if row["id"] in pending_ids else old
            for view, value in ((before, old), (after, new)):
                if value and str(value["trace"]) in found:
                    view[index[row["annotator_id"]]] = found[str(value["trace"])]
        for view, sign in ((before, -1.0), (after, 1.0)):
            if view:
                contribution = _item_contribution(
                    view, truth=truth, rate_hz=options.analysis_rate_hz, tol=options.sda_tolerance
                )
                stats.add_item(*contribution, sign=sign)
    pending.update(analysed_revision=F("current_revision"), analysis_pending=False)
    state.annotator_ids = list(index)
    state.stats = stats.to_bytes()
    state.n_applied += len(pending_ids)
    state.save()
    publish_after_commit(question_id)
    return len(pending_ids)


@transaction.atomic
def quality_traces_rebuild(*, question_id: int) -> None:
    """Recompute a continuous question's statistics from every current trace, then publish."""
    state = state_for_update(question_id)
    state.stats = ContinuousStats(len(state.annotator_ids)).to_bytes()
    state.n_applied = 0
    state.save()
    Annotation.objects.filter(question_id=question_id).update(
        analysed_revision=None, analysis_pending=True
    )
    quality_traces_process(question_id=question_id)


def derive_continuous(
    stats: ContinuousStats, *, annotators: Sequence[int], layout: Json | None = None
) -> Derived:
    r"""Indicators of a continuous (trace) question from its sufficient statistics.

    Parameters
    ----------
    stats : ContinuousStats
        Pooled sign-coincidence tables and per-annotator sums over ``M`` annotators.
    annotators : sequence of int, length M
        User ids of the annotator axis.
    layout : dict or None
        A layout (heatmap order and MDS map) to keep, as
        :func:`analytics.indicators.pair_matrices` keeps it; ``None`` fits one.

    Returns
    -------
    Derived
        Indicators ``traces_done``, ``kappa_sda`` (kappa_SDA with the others: each pair's tables
        pooled over the items both traced, then the mean over partners weighted by shared
        steps), ``kappa_truth`` (mean over gold items of kappa_SDA of the lag-corrected trace
        against the truth), ``lag`` (mean reaction lag behind the truth, seconds) and
        ``trend_f1`` (mean F1 of rises and falls against the truth); evidence ``traces`` and
        ``gold_items``; study figure ``pooled_kappa_sda`` (every pair's tables summed);
        matrices ``kappa`` (pooled kappa_SDA of each pair), ``overlap`` (shared steps),
        ``order`` and ``mds``.

    Notes
    -----
    With :math:`C_{kl}` the summed sign-coincidence tables of annotators k and l,

    .. math:: \kappa_{kl} = \kappa_{SDA}(C_{kl}), \qquad
              \kappa_{pooled} = \kappa_{SDA}\Big(\sum_{k \ne l} C_{kl}\Big)
    """
    m = stats.n_annotators
    steps = pair_totals(stats.signs)
    kappa = np.asarray(kappa_sda_from_counts(stats.signs), dtype=float).reshape(m, m)
    kappa, kappa_others = with_others(kappa, steps, min_overlap=1)
    pooled = kappa_sda_from_counts(off_diagonal(stats.signs).sum(axis=(0, 1)))
    traces = stats.column("traces")

    def mean(name: str) -> Any:
        return json_ready(ratio(stats.column(f"{name}_sum"), stats.column(f"{name}_n")))

    return Derived(
        annotators=list(annotators),
        indicators={
            TRACES_DONE.key: json_ready(traces),
            KAPPA_SDA.key: json_ready(kappa_others),
            KAPPA_TRUTH.key: mean("kappa_truth"),
            LAG.key: mean("lag"),
            TREND_F1.key: mean("f1"),
        },
        evidence={
            "traces": [int(n) for n in traces],
            "gold_items": [int(n) for n in stats.column("gold")],
        },
        study={
            POOLED_KAPPA_SDA.key: json_ready(pooled),
            "n_ratings": int(traces.sum()),
            "n_annotators": int((traces > 0).sum()),
        },
        matrices={
            "kappa": json_ready(kappa),
            "overlap": json_counts(steps),
            **pair_matrices(kappa, keep=layout),
        },
    )


def derive_question(state: QualityState, question: Question, *, layout: Json | None) -> Derived:
    """:func:`derive_continuous` of a question's stored state."""
    return derive_continuous(
        ContinuousStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids)),
        annotators=state.annotator_ids,
        layout=layout,
    )


def _mean_over_gold_traces(
    per_gold_trace: Sequence[tuple[NDArray[np.intp], NDArray[np.float64]]],
    name: str,
    *,
    n_annotators: int,
    seed: int,
) -> Interval:
    """Bootstrap interval of each annotator's mean ``name`` (a :data:`CONTINUOUS_COLUMNS`
    sum) over their gold traces, from the gold items' :func:`_item_contribution` rows: the
    traces whose figure is defined are the units (:func:`mean_bootstrap`)."""
    who = np.concatenate([w for w, _ in per_gold_trace] or [np.zeros(0, dtype=np.intp)])
    rows = np.vstack([f for _, f in per_gold_trace] or [np.zeros((0, len(CONTINUOUS_COLUMNS)))])
    defined = rows[:, CONTINUOUS_COLUMNS.index(f"{name}_n")] > 0
    return mean_bootstrap(
        rows[defined, CONTINUOUS_COLUMNS.index(f"{name}_sum")],
        who[defined],
        n_groups=n_annotators,
        seed=seed,
    )


def _interval_inputs(
    question: Question, annotator_ids: Sequence[int]
) -> (
    tuple[
        list[NDArray[np.float64]],
        list[NDArray[np.float64] | None],
        list[tuple[NDArray[np.intp], NDArray[np.float64]]],
        TraceSettings,
    ]
    | None
):
    """Per item with traces, the ``(len(annotator_ids), n)`` matrix of the current round-1
    traces of ``annotator_ids`` at the analysis rate (others left out), its truth, and each
    gold trace's per-annotator figures; ``None`` without a trace."""
    rows = list(
        Annotation.objects.filter(
            question=question, round=1, current_revision__value__isnull=False
        ).values("item_id", "annotator_id", "current_revision__value")
    )
    found = _traces_by_uuid([r["current_revision__value"] for r in rows])
    row_of = {a: k for k, a in enumerate(annotator_ids)}
    by_item: dict[int, ItemTraces] = {}
    for r in rows:
        value = r["current_revision__value"]  # not null by the filter; typed Any | None
        uuid = str(value["trace"]) if value else ""
        if uuid in found and r["annotator_id"] in row_of:
            by_item.setdefault(r["item_id"], {})[row_of[r["annotator_id"]]] = found[uuid]
    options = trace_settings(question)
    rate = options.analysis_rate_hz
    items: list[NDArray[np.float64]] = []
    truths: list[NDArray[np.float64] | None] = []
    per_gold_trace: list[tuple[NDArray[np.intp], NDArray[np.float64]]] = []
    for item in Item.objects.filter(pk__in=by_item).order_by("pk"):
        signal = gold_signal_for_item(item)
        truth = truth_at_rate(signal, rate_hz=rate) if signal else None
        # the traces' common length, as the live figures use it; the truth keeps its own
        # (the against-truth figures take the samples shared with it, as item_calibration)
        n = min(t.size for t in by_item[item.pk].values())
        if n < 2:
            continue  # shorter than one analysis step: no sign to compare
        if truth is not None and min(n, truth.size) < 2:
            truth = None  # no step shared with the truth: no gold figure, as live
        matrix = np.full((len(row_of), n), np.nan)
        for k, trace in by_item[item.pk].items():
            matrix[k] = trace[:n]
        items.append(matrix)
        truths.append(truth)
        if truth is not None:
            who, _, figures = _item_contribution(
                by_item[item.pk], truth=truth, rate_hz=rate, tol=options.sda_tolerance
            )
            per_gold_trace.append((who, figures))
    if not items:
        return None
    return items, truths, per_gold_trace, options


def trace_study_figures(question: Question, *, left_out: Collection[int] = ()) -> dict[str, Any]:
    """The study figures of :func:`trace_intervals` (ICC, pooled kappa_SDA, HAC intervals)
    computed once on the current round-1 traces of the dashboard's annotators without
    ``left_out``: for a card or an export that ships those rows. ``{"annotators": ...,
    "traces": ..., "figures": {key: Interval}}``; no figure without two annotators' traces
    of one item."""
    state = QualityState.objects.filter(question=question).first()
    annotator_ids = [a for a in (state.annotator_ids if state else []) if a not in left_out]
    found = _interval_inputs(question, annotator_ids) if annotator_ids else None
    traced = 0 if found is None else sum(int((~np.isnan(m[:, 0])).sum()) for m in found[0])
    who = set()
    if found is not None:
        for matrix in found[0]:
            who.update(np.flatnonzero(~np.isnan(matrix[:, 0])).tolist())
    out: dict[str, Any] = {"annotators": len(who), "traces": traced, "figures": {}}
    if found is None or not any((~np.isnan(m[:, 0])).sum() >= 2 for m in found[0]):
        return out
    items, truths, _, options = found
    intervals = _trace_interval_set(items, truths, options)
    out["figures"] = {figure.key: intervals[figure.key] for figure in (ICC, POOLED_KAPPA_SDA)}
    return out


def _trace_interval_set(
    items: list[NDArray[np.float64]],
    truths: list[NDArray[np.float64] | None],
    options: TraceSettings,
) -> dict[str, Interval]:
    """:func:`~analytics.metrics.intervals.indicator_intervals_traces` at the question's
    analysis rate, with the studio's lag bound, the annotators' dead band (the question's SDA
    tolerance) and the truth's (``TRUTH_TOL``)."""
    return indicator_intervals_traces(
        items,
        rate_hz=options.analysis_rate_hz,
        truths=truths,
        max_lag=MAX_LAG_S,
        tol=options.sda_tolerance,
        truth_tol=TRUTH_TOL,
    )


def trace_intervals(question: Question) -> IntervalSet | None:
    """95 % intervals of kappa_SDA with others (raw and lag-corrected), of kappa_SDA against
    the truth and of the study ICC, from every current round-1 trace at the analysis rate
    (:func:`~analytics.metrics.intervals.indicator_intervals_traces`: HAC intervals over the
    serially correlated steps; the annotators' dead band is the question's SDA tolerance, the
    truth's ``TRUTH_TOL``), their ``n`` in traces and gold items. Lag and trend F1 (means
    over gold traces): a percentile bootstrap over the annotator's gold traces
    (:func:`_mean_over_gold_traces`), no bounds from a single gold trace. Study: the ICC and
    the pooled kappa_SDA (every pair's raw sign tables summed, as :func:`derive_continuous`
    pools them) with the HAC interval of the same steps, ``n`` in samples (time steps where
    two or more annotators traced) with the independent samples they are worth. The
    lag-corrected kappa with others (:data:`KAPPA_SDA_ALIGNED`) has no live value: its
    interval's estimate is its value. ``None`` before the first trace."""
    state = QualityState.objects.filter(question=question).first()
    if state is None or not state.annotator_ids:
        return None
    found = _interval_inputs(question, state.annotator_ids)
    if found is None:
        return None
    items, truths, per_gold_trace, options = found
    intervals = _trace_interval_set(items, truths, options)
    row_of = state.annotator_ids
    for spec, name in ((LAG, "lag"), (TREND_F1, "f1")):
        intervals[spec.key] = _mean_over_gold_traces(
            per_gold_trace, name, n_annotators=len(row_of), seed=question.pk
        )
    study = {figure.key: intervals.pop(figure.key) for figure in (ICC, POOLED_KAPPA_SDA)}
    evidence = derive_question(state, question, layout=NO_LAYOUT).evidence
    return IntervalSet(
        annotators=state.annotator_ids,
        per_annotator=in_evidence_units(intervals, INDICATORS, evidence),
        study=study,
        samples={key: interval.n for key, interval in intervals.items()},
    )
