"""Live quality of pairwise and continuous questions: their statistics and their plug-ins.

Both kinds keep their sufficient statistics in the question's
:class:`~analytics.models.QualityState` (``annotator_ids`` fixes the annotator axis; the bytes
are a :class:`~analytics.sufficient_stats.PairwiseStats` or
:class:`~analytics.sufficient_stats.ContinuousStats`), and publish through
:func:`analytics.publishing.quality_publish` once their update has committed.

Pairwise: after a judgement commits, :func:`quality_judgements_apply` replaces the annotator's
row (judgements, time, triplet counts, audits, contradictions, where pruning stopped) from
their own judgements only, and moves the pairs they judged since the last update from the
"before" to the "after" outcome in the pair confusion. Another annotator's judgement on a
shared pair counts once that annotator's own update has applied it (``applied`` sequence), so
each relation is counted exactly once, whatever order the updates run in.

Continuous: trace answers use the annotation outbox (``analysis_pending``,
``analysed_revision``) like categorical ones; :func:`quality_traces_process` takes every
pending trace, and for each touched item subtracts the item's contribution with the analysed
traces and adds it with the current ones (one ``sign_coincidence_matrix`` per item, and the
gold figures of :func:`apps.continuous.selectors.item_calibration` per trace).

A rebuild (``manage.py rebuild_quality``) recomputes either kind from scratch: the pair
confusion in one vectorised pass, the traces by marking every answer pending again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import F, Max, Q
from numpy.typing import NDArray

from analytics.indicators import (
    CONTINUOUS_RULES,
    PAIRWISE_RULES,
    Derived,
    Rule,
    derive_continuous,
    derive_pairwise,
)
from analytics.metrics.categorical import pairwise_confusion
from analytics.metrics.krippendorff import coincidence_matrix
from analytics.metrics.traces import sign_coincidence_matrix
from analytics.models import QualityState
from analytics.pipeline import PROCESSORS, after_update, state_for_update
from analytics.publishing import QualityKind, register_kind
from analytics.sufficient_stats import (
    CONTINUOUS_COLUMNS,
    PAIRWISE_COLUMNS,
    ContinuousStats,
    PairwiseStats,
)
from apps.annotations.models import Annotation
from apps.continuous.config import trace_settings
from apps.continuous.models import TraceRecording
from apps.continuous.selectors import (
    TRUTH_TOL,
    gold_signal_for_item,
    item_calibration,
    truth_at_rate,
)
from apps.items.models import Item
from apps.preferences.models import Judgement, PairSession, clean_pairwise_settings
from apps.preferences.selectors import consistency
from apps.studies.models import Question

PairKey = tuple[int, int]


def _annotator_index(state: QualityState, *extra: int) -> dict[int, int]:
    """The state's annotator axis (user id -> row), extended by ``extra`` newcomers."""
    index = {a: i for i, a in enumerate(state.annotator_ids)}
    for user_id in extra:
        index.setdefault(user_id, len(index))
    return index


def _publish_after_commit(question_id: int) -> None:
    transaction.on_commit(lambda: after_update(question_id), robust=True)


# --------------------------------------------------------------------------- pairwise


def _pair_code(judgement: Judgement) -> tuple[PairKey, int]:
    """The judgement's pair (smaller item id first) and outcome code 0, 1, 2 in that
    orientation (2: the smaller id preferred, 1: tie, 0: the larger id preferred)."""
    a, b, outcome = judgement.as_tuple()
    return (a, b) if a < b else (b, a), (outcome if a < b else -outcome) + 1


def _annotator_row(
    judgements: Sequence[Judgement], *, strict: bool, stopped_at: int | None
) -> NDArray[np.float64]:
    """The annotator's :data:`PAIRWISE_COLUMNS` from their judgements (in sequence order)."""
    found = consistency(judgements, strict=strict)
    timed = [j.time_spent_ms for j in judgements if j.time_spent_ms is not None]
    row = {
        "judgements": len(judgements),
        "time_ms": sum(timed),
        "timed": len(timed),
        "n_transitive": found.n_transitive,
        "n_complete": found.n_complete,
        "audits": sum(j.phase == Judgement.Phase.AUDIT for j in judgements),
        "contradictions": sum(j.contradicts for j in judgements),
        "pruning_stopped_at": stopped_at or 0,
        "applied": judgements[-1].sequence if judgements else 0,
    }
    return np.array([row[name] for name in PAIRWISE_COLUMNS], dtype=float)


def _latest_codes(judgements: Sequence[Judgement]) -> dict[PairKey, int]:
    """The latest outcome code of each pair (judgements in sequence order)."""
    return dict(_pair_code(j) for j in judgements)


def _shared_pair_views(
    *,
    question_id: int,
    annotator_id: int,
    pairs: set[PairKey],
    stats: PairwiseStats,
    index: Mapping[int, int],
) -> dict[PairKey, dict[int, int]]:
    """Other annotators' latest applied outcome code on each of ``pairs`` (row -> code)."""
    either = Q()
    for lo, hi in pairs:
        either |= Q(item_a_id=lo, item_b_id=hi) | Q(item_a_id=hi, item_b_id=lo)
    applied = stats.column("applied")
    views: dict[PairKey, dict[int, int]] = {pair: {} for pair in pairs}
    rows = (
        Judgement.objects.filter(either, question_id=question_id)
        .exclude(annotator_id=annotator_id)
        .order_by("annotator_id", "sequence")
    )
    for judgement in rows:
        row = index.get(judgement.annotator_id)
        if row is not None and judgement.sequence <= applied[row]:
            pair, code = _pair_code(judgement)
            views[pair][row] = code
    return views


@transaction.atomic
def quality_judgements_apply(*, question_id: int, annotator_id: int) -> None:
    """Bring the annotator's part of a pairwise question's statistics up to date, then publish
    after the commit. Idempotent: judgements already applied are not counted again."""
    question = Question.objects.get(pk=question_id)
    state = state_for_update(question_id)
    index = _annotator_index(state, annotator_id)
    k = index[annotator_id]
    stats = PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    stats = stats.grown(n_annotators=len(index))
    mine = list(
        Judgement.objects.filter(question_id=question_id, annotator_id=annotator_id).order_by(
            "sequence"
        )
    )
    applied = int(stats.column("applied")[k])
    before = _latest_codes([j for j in mine if j.sequence <= applied])
    after = _latest_codes(mine)
    touched = {_pair_code(j)[0] for j in mine if j.sequence > applied}
    if touched:
        views = _shared_pair_views(
            question_id=question_id,
            annotator_id=annotator_id,
            pairs=touched,
            stats=stats,
            index=index,
        )
        for pair, others in views.items():
            old = {(row, 1): (code, None) for row, code in others.items()}
            new = {**old, (k, 1): (after[pair], None)}
            if pair in before:
                old[(k, 1)] = (before[pair], None)
            stats.pairs.replace_item(old, new)
    session = PairSession.objects.filter(question_id=question_id, annotator_id=annotator_id)
    stats.per_annotator[k] = _annotator_row(
        mine,
        strict=clean_pairwise_settings(question.settings).strict,
        stopped_at=session.values_list("pruning_stopped_at", flat=True).first(),
    )
    state.annotator_ids = list(index)
    state.stats = stats.to_bytes()
    state.n_applied += len(touched)
    state.save()
    _publish_after_commit(question_id)


def quality_judgements_process(*, question_id: int) -> int:
    """Apply every annotator of a pairwise question whose judgements the state lags behind
    (the pipeline's processor for this kind); returns how many annotators were updated.

    The state keeps, per annotator, the last judgement sequence applied, so this needs no
    outbox flag: a repeated or concurrent call finds nothing more to do.
    """
    latest = dict(
        Judgement.objects.filter(question_id=question_id)
        .values("annotator_id")
        .annotate(last=Max("sequence"))
        .values_list("annotator_id", "last")
    )
    state = QualityState.objects.filter(question_id=question_id).first()
    applied: dict[int, int] = {}
    if state is not None and state.annotator_ids:
        stats = PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
        column = stats.column("applied")
        applied = {a: int(column[k]) for k, a in enumerate(state.annotator_ids)}
    behind = [a for a, last in latest.items() if last > applied.get(a, 0)]
    for annotator_id in behind:
        quality_judgements_apply(question_id=question_id, annotator_id=annotator_id)
    return len(behind)


@transaction.atomic
def quality_judgements_rebuild(*, question_id: int) -> None:
    """Recompute a pairwise question's statistics from every judgement, then publish."""
    question = Question.objects.get(pk=question_id)
    strict = clean_pairwise_settings(question.settings).strict
    state = state_for_update(question_id)
    judgements = list(
        Judgement.objects.filter(question_id=question_id).order_by("annotator_id", "sequence")
    )
    by_annotator: dict[int, list[Judgement]] = {}
    for judgement in judgements:
        by_annotator.setdefault(judgement.annotator_id, []).append(judgement)
    index = _annotator_index(state, *by_annotator)
    stats = PairwiseStats(len(index))
    stopped = dict(
        PairSession.objects.filter(question_id=question_id).values_list(
            "annotator_id", "pruning_stopped_at"
        )
    )
    latest: dict[tuple[int, PairKey], int] = {}
    for user_id, mine in by_annotator.items():
        stats.per_annotator[index[user_id]] = _annotator_row(
            mine, strict=strict, stopped_at=stopped.get(user_id)
        )
        for pair, code in _latest_codes(mine).items():
            latest[(index[user_id], pair)] = code
    if latest:
        pairs, column = np.unique(
            np.array([pair for _, pair in latest], dtype=np.int64), axis=0, return_inverse=True
        )
        ratings = np.full((len(index), len(pairs)), np.nan)
        rows = np.array([row for row, _ in latest], dtype=np.intp)
        ratings[rows, column.ravel()] = np.fromiter(latest.values(), dtype=float)
        domain = np.arange(3, dtype=np.float64)
        stats.pairs.confusion = pairwise_confusion(ratings, values=domain)
        stats.pairs.coincidence = coincidence_matrix(ratings, values=domain)
    state.annotator_ids = list(index)
    state.stats = stats.to_bytes()
    state.n_applied = len(judgements)
    state.save()
    _publish_after_commit(question_id)


def _derive_pairwise(state: QualityState, question: Question, *, with_map: bool) -> Derived:
    return derive_pairwise(
        PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids)),
        annotators=state.annotator_ids,
        strict=clean_pairwise_settings(question.settings).strict,
        min_overlap=int(getattr(settings, "QUALITY_MIN_OVERLAP", 10)),
        with_map=with_map,
    )


def _pairwise_rules(question: Question) -> dict[str, Rule]:
    """The pairwise rules with the question's own transitivity floor (``kappa_floor``)."""
    floor = clean_pairwise_settings(question.settings).kappa_floor
    rule = PAIRWISE_RULES["transitivity_kappa"]
    return {**PAIRWISE_RULES, "transitivity_kappa": replace(rule, floor=floor)}


# --------------------------------------------------------------------------- continuous

ItemTraces = dict[int, NDArray[np.float64]]  # annotator row -> trace at the analysis rate


def _item_contribution(
    traces: ItemTraces, *, truth: NDArray[np.float64] | None, rate_hz: float, tol: float
) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    """One item's part of :class:`ContinuousStats`: annotator rows, their sign tables (one
    matrix product) and per-annotator sums of :data:`CONTINUOUS_COLUMNS`."""
    who = np.fromiter(traces, dtype=np.intp, count=len(traces))
    n = min((t.size for t in traces.values()), default=0)
    signs = np.zeros((who.size, who.size, 3, 3))
    if n >= 2:
        signs = sign_coincidence_matrix(np.vstack([t[:n] for t in traces.values()]), tol=tol)
    figures = np.zeros((who.size, len(CONTINUOUS_COLUMNS)))
    figures[:, CONTINUOUS_COLUMNS.index("traces")] = 1.0
    if truth is not None and min(n, truth.size) >= 2:
        truth_tol = max(tol, TRUTH_TOL)
        for row, trace in enumerate(traces.values()):
            found = item_calibration(trace, truth, rate_hz=rate_hz, tol=truth_tol)
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
    rows = list(
        Annotation.objects.filter(
            question_id=question_id,
            round=1,
            item_id__in=Annotation.objects.filter(pk__in=pending_ids, round=1).values("item_id"),
        ).values(
            "id", "item_id", "annotator_id", "analysed_revision__value", "current_revision__value"
        )
    )
    index = _annotator_index(state, *(r["annotator_id"] for r in rows))
    stats = ContinuousStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    stats = stats.grown(n_annotators=len(index))
    found = _traces_by_uuid(
        [r["analysed_revision__value"] for r in rows] + [r["current_revision__value"] for r in rows]
    )
    options = trace_settings(question)
    by_item: dict[int, list[dict]] = {}
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
    _publish_after_commit(question_id)
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


def _derive_continuous(state: QualityState, question: Question, *, with_map: bool) -> Derived:
    return derive_continuous(
        ContinuousStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids)),
        annotators=state.annotator_ids,
        with_map=with_map,
    )


#: How ``manage.py rebuild_quality`` rebuilds the kinds of this module.
REBUILDERS: Mapping[str, Callable[..., object]] = {
    Question.Kind.PAIRWISE: quality_judgements_rebuild,
    Question.Kind.CONTINUOUS: quality_traces_rebuild,
}

register_kind(
    Question.Kind.PAIRWISE,
    QualityKind(
        derive=_derive_pairwise,
        rules=PAIRWISE_RULES,
        rules_for=_pairwise_rules,
        item_disagreement=False,
        competence=False,
    ),
)
PROCESSORS[Question.Kind.PAIRWISE] = quality_judgements_process
PROCESSORS[Question.Kind.CONTINUOUS] = quality_traces_process
register_kind(
    Question.Kind.CONTINUOUS,
    QualityKind(
        derive=_derive_continuous,
        rules=CONTINUOUS_RULES,
        item_disagreement=False,
        competence=False,
    ),
)
