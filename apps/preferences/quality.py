"""Live quality of pairwise-preference questions: statistics, indicators and their specs.

The question's :class:`~analytics.models.QualityState` holds a
:class:`~analytics.sufficient_stats.PairwiseStats` (``annotator_ids`` fixes the annotator axis).
Only the judgements kept count: an undo (:class:`~apps.preferences.models.Retraction`) takes
its judgement out of every statistic. An annotator's judgements and undos are their *events*,
counted 1, 2, ... (:func:`_kept_after` orders them); the ``applied`` column holds how many of
them the state has applied. After a judgement or an undo commits,
:func:`quality_judgements_apply` replaces the annotator's row (judgements, time, triplet counts,
audits, contradictions, where pruning stopped) from their own kept judgements only, and moves
each pair whose latest kept outcome changed since the last update from the "before" to the
"after" outcome in the pair confusion. Another annotator's outcome on a shared pair is the one
of their judgements kept after the events their own update has applied, so each relation is
counted exactly once, whatever order the updates run in. :func:`quality_judgements_rebuild`
recomputes the pair confusion from scratch in one vectorised pass; :func:`derive_pairwise`
turns the statistics into the indicators declared below.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from numpy.typing import NDArray

from analytics.config import quality_config
from analytics.indicators import (
    NO_LAYOUT,
    Derived,
    FlagRule,
    Indicator,
    Json,
    StudyFigure,
    json_counts,
    json_ready,
    pair_matrices,
    pair_totals,
    ratio,
    with_others,
)
from analytics.intervals import IntervalSet, in_evidence_units
from analytics.metrics.categorical import kappa_from_confusion, pairwise_confusion
from analytics.metrics.crowd import clopper_pearson
from analytics.metrics.intervals import indicator_intervals_pairwise, kappa_with_others_interval
from analytics.metrics.krippendorff import coincidence_matrix
from analytics.metrics.preferences import transitivity_kappa_from_counts
from analytics.metrics.uncertainty import (
    CountedTriplets,
    Interval,
    mean_t_interval,
    wilson_interval,
)
from analytics.models import QualityState
from analytics.pipeline import annotator_index, publish_after_commit, state_for_update
from analytics.sufficient_stats import PAIRWISE_COLUMNS, PairwiseStats
from apps.preferences.models import Judgement, PairSession, clean_pairwise_settings
from apps.preferences.selectors import consistency
from apps.studies.models import Question

# The transitivity floor is the question's ``kappa_floor`` (PairwiseKind.indicators_for); 0.4
# is the settings' default.
JUDGEMENTS = Indicator(
    "judgements", "Judgements", "{:.0f}", explanation="Pairs this annotator has judged."
)
SECONDS_PER_JUDGEMENT = Indicator(
    "seconds_per_judgement",
    "Seconds / judgement",
    "{:.1f}",
    evidence="timed_judgements",
    interval="seconds_per_judgement",
    explanation=(
        "Typical time spent on one pair; far below the others' can mean answering without reading."
    ),
)
TRANSITIVITY_KAPPA = Indicator(
    "transitivity_kappa",
    "Transitivity kappa",
    direction="higher",
    rule=FlagRule("transitivity kappa", floor=0.4),
    evidence="triplets",
    interval="transitivity_kappa",
    banded=True,
    explanation=(
        "How consistent this annotator's own choices are (A over B and B over C, then A over C), "
        "corrected for the chance level of answering at random."
    ),
)
CONTRADICTION_RATE = Indicator(
    "contradiction_rate",
    "Audit contradictions",
    "{:.0%}",
    direction="lower",
    rule=FlagRule("audit contradiction rate"),
    evidence="audits",
    interval="contradiction_rate",
    explanation="Share of re-asked pairs this annotator answered the other way round.",
)
PRUNING_STOPPED_AT = Indicator(
    "pruning_stopped_at",
    "Pruning stopped after",
    "{:.0f}",
    explanation=(
        "Judgements after which this annotator's ranking was complete (pairs implied by earlier "
        "answers are not asked)."
    ),
)
OUTCOME_KAPPA = Indicator(
    "outcome_kappa",
    "Kappa with others",
    direction="higher",
    rule=FlagRule("kappa with others on shared pairs"),
    evidence="pairs",
    interval="outcome_kappa",
    banded=True,
    explanation=(
        "Agreement with the other annotators on the pairs both judged, corrected for chance."
    ),
)
#: An annotator who answers "equal" to (nearly) everything: transitivity kappa is undefined
#: for ties alone (chance level 1), so the share of ties is judged itself; flagged when its
#: Wilson interval lies wholly above 0.9.
TIE_RATE = Indicator(
    "tie_rate",
    "Equal answers",
    "{:.0%}",
    direction="lower",
    rule=FlagRule(
        "share of pairs answered 'equal' (ties say nothing about consistency)", floor=0.9
    ),
    evidence="pairs",
    interval="tie_rate",
    explanation='Share of pairs answered "equal"; near 100 % says nothing about the items.',
)
#: An annotator who always picks the same side of the screen: the side of each pair is drawn
#: at random, so such answers order the items at random; flagged when the Clopper-Pearson
#: interval of the favoured side's share of decisive answers lies wholly above 0.9.
SAME_SIDE = Indicator(
    "same_side",
    "Same side",
    "{:.0%}",
    direction="lower",
    rule=FlagRule("share of decisive answers on the favoured side of the screen", floor=0.9),
    evidence="pairs",
    interval="same_side",
    live=False,
    explanation=(
        "Share of decided pairs won by the same side of the screen: about 50 % is expected, near "
        "100 % means pressing one key."
    ),
)
AGREEMENT = Indicator(
    "agreement",
    "Same outcome on shared pairs",
    "{:.0%}",
    direction="higher",
    evidence="comparisons",
    interval="agreement",
    explanation=(
        "Share of the pairs judged by this annotator and another where both chose the same outcome."
    ),
)
INDICATORS = (
    JUDGEMENTS,
    SECONDS_PER_JUDGEMENT,
    TRANSITIVITY_KAPPA,
    TIE_RATE,
    SAME_SIDE,
    CONTRADICTION_RATE,
    PRUNING_STOPPED_AT,
    OUTCOME_KAPPA,
    AGREEMENT,
)
POOLED_TRANSITIVITY_KAPPA = StudyFigure(
    "pooled_transitivity_kappa",
    "Pooled transitivity kappa",
    evidence="triplets",
    explanation=(
        "Consistency of all annotators' own choices (A over B and B over C, then A over C) beyond "
        "chance, pooled; higher is better."
    ),
)


PairKey = tuple[int, int]


def _pair_code(judgement: Judgement) -> tuple[PairKey, int]:
    """The judgement's pair (smaller item id first) and outcome code 0, 1, 2 in that
    orientation (2: the smaller id preferred, 1: tie, 0: the larger id preferred)."""
    a, b, outcome = judgement.as_tuple()
    return (a, b) if a < b else (b, a), (outcome if a < b else -outcome) + 1


def _history(question_id: int, **filters: object) -> QuerySet[Judgement]:
    """Judgements of a pairwise question with their retraction, if any, in one query; the
    answers to attention checks are no data (:meth:`~apps.preferences.models.JudgementQuerySet.
    data`) and are left out, with their undos."""
    return (
        Judgement.objects.filter(question_id=question_id, **filters)
        .data()
        .select_related("retraction")
        .order_by("annotator_id", "sequence")
    )


def _retraction_id(judgement: Judgement) -> int | None:
    return judgement.retraction.pk if hasattr(judgement, "retraction") else None


def _event_count(judgements: Sequence[Judgement]) -> int:
    """An annotator's events: their judgements and their undos."""
    return len(judgements) + sum(_retraction_id(j) is not None for j in judgements)


def _kept_after(judgements: Sequence[Judgement], events: int | None = None) -> list[Judgement]:
    """The judgements of one annotator (all of them, in sequence order) kept after their first
    ``events`` events (default: all), in sequence order.

    The annotator's judgements and undos happen one at a time (both under their session's
    lock) and an undo retracts the latest judgement kept, so the kept judgements form a stack:
    the events replay as pushes in sequence order and pops in retraction order, the next
    retraction as soon as its judgement is on top (before it is on top, only a later judgement
    can come; once it is, a later judgement would have to be retracted first).
    """
    pushes = deque(judgements)
    retracted = [j for j in judgements if _retraction_id(j) is not None]
    pops = deque(sorted(retracted, key=lambda j: j.retraction.pk))
    stack: list[Judgement] = []
    for _ in range(_event_count(judgements) if events is None else events):
        if pops and stack and stack[-1].pk == pops[0].pk:
            stack.pop()
            pops.popleft()
        else:
            stack.append(pushes.popleft())
    return stack


def _annotator_row(
    judgements: Sequence[Judgement], *, strict: bool, stopped_at: int | None, applied: int
) -> NDArray[np.float64]:
    """The annotator's :data:`PAIRWISE_COLUMNS` from their kept judgements (in sequence
    order), ``applied`` events in."""
    found = consistency(judgements, strict=strict)
    timed = [j.time_spent_ms for j in judgements if j.time_spent_ms is not None]
    row = {
        "judgements": len(judgements),
        "time_ms": sum(timed),
        "timed": len(timed),
        "n_transitive": found.n_transitive,
        "n_complete": found.n_complete,
        "audits": sum(j.phase == Judgement.Phase.AUDIT for j in judgements),
        "contradictions": sum(
            j.contradicts and j.phase == Judgement.Phase.AUDIT for j in judgements
        ),
        "pruning_stopped_at": stopped_at or 0,
        "applied": applied,
    }
    return np.array([row[name] for name in PAIRWISE_COLUMNS], dtype=float)


def _latest_codes(judgements: Iterable[Judgement]) -> dict[PairKey, int]:
    """The latest outcome code of each pair (judgements in sequence order)."""
    return dict(_pair_code(j) for j in judgements)


#: Pairs looked up per query by :func:`_shared_pair_views`: one condition per orientation, and
#: SQLite refuses an expression tree deeper than 1,000 (a backlog of 500 changed pairs, e.g.
#: after a worker was down, made every later update of the annotator fail).
SHARED_PAIRS_PER_QUERY = 200


def _shared_pair_views(
    *,
    question_id: int,
    annotator_id: int,
    pairs: set[PairKey],
    stats: PairwiseStats,
    index: Mapping[int, int],
) -> dict[PairKey, dict[int, int]]:
    """Other annotators' latest outcome code on each of ``pairs`` (row -> code) among their
    judgements kept after the events the state has applied."""
    sharing: set[int] = set()
    listed = sorted(pairs)
    for start in range(0, len(listed), SHARED_PAIRS_PER_QUERY):
        either = Q()
        for lo, hi in listed[start : start + SHARED_PAIRS_PER_QUERY]:
            either |= Q(item_a_id=lo, item_b_id=hi) | Q(item_a_id=hi, item_b_id=lo)
        sharing.update(
            Judgement.objects.filter(either, question_id=question_id)
            .data()
            .values_list("annotator_id", flat=True)
            .distinct()
        )
    by_annotator: dict[int, list[Judgement]] = {}
    for judgement in _history(question_id, annotator_id__in=sharing).exclude(
        annotator_id=annotator_id
    ):
        by_annotator.setdefault(judgement.annotator_id, []).append(judgement)
    applied = stats.column("applied")
    views: dict[PairKey, dict[int, int]] = {pair: {} for pair in pairs}
    for other, theirs in by_annotator.items():
        row = index.get(other)
        if row is None:
            continue
        for pair, code in _latest_codes(_kept_after(theirs, int(applied[row]))).items():
            if pair in views:
                views[pair][row] = code
    return views


@transaction.atomic
def quality_judgements_apply(*, question_id: int, annotator_id: int) -> None:
    """Bring the annotator's part of a pairwise question's statistics up to date with their
    judgements and undos, then publish after the commit. Idempotent: events already applied
    are not counted again."""
    question = Question.objects.get(pk=question_id)
    state = state_for_update(question_id)
    index = annotator_index(state, annotator_id)
    k = index[annotator_id]
    stats = PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    stats = stats.grown(n_annotators=len(index))
    mine = list(_history(question_id, annotator_id=annotator_id))
    applied, events = int(stats.column("applied")[k]), _event_count(mine)
    kept = _kept_after(mine)
    before = _latest_codes(_kept_after(mine, applied))
    after = _latest_codes(kept)
    touched = {pair for pair in before.keys() | after.keys() if before.get(pair) != after.get(pair)}
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
            new = dict(old)
            if pair in before:
                old[(k, 1)] = (before[pair], None)
            if pair in after:
                new[(k, 1)] = (after[pair], None)
            stats.pairs.replace_item(old, new)
    session = PairSession.objects.filter(question_id=question_id, annotator_id=annotator_id)
    stats.per_annotator[k] = _annotator_row(
        kept,
        strict=clean_pairwise_settings(question.settings).strict,
        stopped_at=session.values_list("pruning_stopped_at", flat=True).first(),
        applied=events,
    )
    state.annotator_ids = list(index)
    state.stats = stats.to_bytes()
    state.n_applied += events - applied
    state.save()
    publish_after_commit(question_id)


def _judgements_behind(question_id: int) -> dict[int, int]:
    """Annotators of a pairwise question whose events (judgements and undos) the state lags
    behind, with how many of them it has not applied."""
    latest = dict(
        Judgement.objects.filter(question_id=question_id)
        .data()
        .values("annotator_id")
        .annotate(last=Count("pk") + Count("retraction"))
        .values_list("annotator_id", "last")
    )
    state = QualityState.objects.filter(question_id=question_id).first()
    applied: dict[int, int] = {}
    if state is not None and state.annotator_ids:
        stats = PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
        column = stats.column("applied")
        applied = {a: int(column[k]) for k, a in enumerate(state.annotator_ids)}
    return {a: last - applied.get(a, 0) for a, last in latest.items() if last > applied.get(a, 0)}


def judgements_waiting(question_id: int) -> int:
    """How many judgements and undos of a pairwise question its state has not applied yet."""
    return sum(_judgements_behind(question_id).values())


def quality_judgements_process(*, question_id: int) -> int:
    """Apply every annotator of a pairwise question whose judgements or undos the state lags
    behind (the pipeline's processor for this kind); returns how many annotators were updated.

    The state keeps, per annotator, how many of their events it has applied, so this needs no
    outbox flag: a repeated or concurrent call finds nothing more to do.
    """
    behind = _judgements_behind(question_id)
    for annotator_id in behind:
        quality_judgements_apply(question_id=question_id, annotator_id=annotator_id)
    return len(behind)


@transaction.atomic
def quality_judgements_rebuild(*, question_id: int) -> None:
    """Recompute a pairwise question's statistics from every judgement kept, then publish."""
    question = Question.objects.get(pk=question_id)
    strict = clean_pairwise_settings(question.settings).strict
    state = state_for_update(question_id)
    judgements = list(_history(question_id))
    by_annotator: dict[int, list[Judgement]] = {}
    for judgement in judgements:
        by_annotator.setdefault(judgement.annotator_id, []).append(judgement)
    index = annotator_index(state, *by_annotator)
    stats = PairwiseStats(len(index))
    stopped = dict(
        PairSession.objects.filter(question_id=question_id).values_list(
            "annotator_id", "pruning_stopped_at"
        )
    )
    latest: dict[tuple[int, PairKey], int] = {}
    events = 0
    for user_id, mine in by_annotator.items():
        kept, applied = _kept_after(mine), _event_count(mine)
        events += applied
        stats.per_annotator[index[user_id]] = _annotator_row(
            kept, strict=strict, stopped_at=stopped.get(user_id), applied=applied
        )
        for pair, code in _latest_codes(kept).items():
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
    state.n_applied = events
    state.save()
    publish_after_commit(question_id)


def derive_pairwise(
    stats: PairwiseStats,
    *,
    annotators: Sequence[int],
    strict: bool,
    min_overlap: int,
    layout: Json | None = None,
) -> Derived:
    r"""Indicators of a pairwise-preference question from its sufficient statistics.

    Parameters
    ----------
    stats : PairwiseStats
        Per-annotator counts and the pair-outcome confusion over ``M`` annotators.
    annotators : sequence of int, length M
        User ids of the annotator axis.
    strict : bool
        Strict preferences (no ties: chance level 3/4 in transitivity kappa).
    min_overlap : int
        Annotator pairs sharing fewer judged pairs get no kappa (nan).
    layout : dict or None
        A layout (heatmap order and MDS map) to keep, as
        :func:`analytics.indicators.pair_matrices` keeps it; ``None`` fits one.

    Returns
    -------
    Derived
        Indicators ``judgements``, ``seconds_per_judgement``, ``transitivity_kappa`` (Amidei,
        with the chance level of a random annotator with this annotator's own tie rate,
        :func:`analytics.metrics.transitivity_chance`; over the triplets that test the
        annotator: see
        :func:`apps.preferences.selectors.consistency`), ``contradiction_rate`` (audits that
        contradicted what earlier answers implied), ``pruning_stopped_at`` (judgements after
        which kappa fell below the floor, ``None`` while pruning), ``outcome_kappa``
        (overlap-weighted Cohen's kappa with the others on the outcomes of shared pairs),
        ``tie_rate`` (share of judged pairs answered "equal", with its Wilson interval in
        ``intervals["tie_rate"]``, computed live),
        ``agreement`` (share of comparisons with others on shared pairs with the same outcome,
        :func:`shared_outcomes`); evidence ``triplets``, ``pairs``, ``audits``,
        ``comparisons`` and ``timed_judgements``; study figure
        ``pooled_transitivity_kappa`` (summed triplet counts); matrices ``kappa``,
        ``agreement``, ``overlap``, ``order`` and ``mds``.

    Notes
    -----
    With pooled counts :math:`n_T = \sum_k n_{T,k}` and :math:`n_C = \sum_k n_{C,k}`,

    .. math:: K_{pooled} = \frac{n_T / n_C - P(E)}{1 - P(E)}

    where P(E) is the chance level of the pooled tie rate (ties over judged pairs).
    """
    m = stats.n_annotators
    confusion = stats.pairs.confusion
    overlap = pair_totals(confusion)
    # the chance level must not depend on which item of a pair is stored first
    kappa = np.asarray(kappa_from_confusion(symmetric_confusion(confusion)), dtype=float)
    kappa = kappa.reshape(m, m)
    kappa, kappa_others = with_others(kappa, overlap, min_overlap=min_overlap)
    agreement = ratio(np.trace(confusion, axis1=2, axis2=3), overlap)
    same_others, comparisons = shared_outcomes(stats)
    transitive, complete = stats.column("n_transitive"), stats.column("n_complete")
    pairs = np.diagonal(overlap)
    ties = confusion[np.arange(m), np.arange(m), 1, 1]
    tie_rate = ratio(ties, pairs)
    transitivity = [
        transitivity_kappa_from_counts(
            int(t), int(c), strict=strict, tie_rate=float(r) if np.isfinite(r) else 0.0
        )
        for t, c, r in zip(transitive, complete, tie_rate, strict=True)
    ]
    judgements = stats.column("judgements")
    stopped = stats.column("pruning_stopped_at")
    ties_interval = wilson_interval(ties, pairs)
    return Derived(
        annotators=list(annotators),
        indicators={
            JUDGEMENTS.key: json_ready(judgements),
            SECONDS_PER_JUDGEMENT.key: json_ready(
                ratio(stats.column("time_ms"), stats.column("timed")) / 1000.0
            ),
            TRANSITIVITY_KAPPA.key: json_ready(np.array(transitivity, dtype=float)),
            TIE_RATE.key: json_ready(tie_rate),
            CONTRADICTION_RATE.key: json_ready(
                ratio(stats.column("contradictions"), stats.column("audits"))
            ),
            PRUNING_STOPPED_AT.key: json_ready(np.where(stopped > 0, stopped, np.nan)),
            OUTCOME_KAPPA.key: json_ready(kappa_others),
            AGREEMENT.key: json_ready(ratio(same_others, comparisons)),
        },
        evidence={
            "triplets": [int(n) for n in complete],
            "pairs": [int(n) for n in pairs],
            "audits": [int(n) for n in stats.column("audits")],
            "comparisons": [int(n) for n in comparisons],
            "timed_judgements": [int(n) for n in stats.column("timed")],
        },
        study={
            POOLED_TRANSITIVITY_KAPPA.key: json_ready(
                transitivity_kappa_from_counts(
                    int(transitive.sum()),
                    int(complete.sum()),
                    strict=strict,
                    tie_rate=float(ties.sum() / pairs.sum()) if pairs.sum() else 0.0,
                )
            ),
            "n_ratings": int(judgements.sum()),
            "n_annotators": int((judgements > 0).sum()),
        },
        intervals={
            str(TIE_RATE.interval): [
                [*json_ready(np.array([est, low, high])), int(n)] if n > 0 else None
                for est, low, high, n in zip(
                    np.atleast_1d(ties_interval.estimate),
                    np.atleast_1d(ties_interval.low),
                    np.atleast_1d(ties_interval.high),
                    np.atleast_1d(ties_interval.n),
                    strict=True,
                )
            ]
        },
        matrices={
            "kappa": json_ready(kappa),
            "agreement": json_ready(agreement),
            "overlap": json_counts(overlap),
            **pair_matrices(kappa, keep=layout),
        },
    )


def shared_outcomes(stats: PairwiseStats) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each annotator's comparisons with the others on shared pairs (a pair counts once for
    every other annotator who judged it) and how many of them had the same outcome: the
    counts behind ``agreement``."""
    confusion = stats.pairs.confusion
    others = ~np.eye(stats.n_annotators, dtype=bool)
    same = (np.trace(confusion, axis1=2, axis2=3) * others).sum(axis=1)
    return same, (pair_totals(confusion) * others).sum(axis=1)


def derive_question(state: QualityState, question: Question, *, layout: Json | None) -> Derived:
    """:func:`derive_pairwise` of a question's stored state."""
    return derive_pairwise(
        PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids)),
        annotators=state.annotator_ids,
        strict=clean_pairwise_settings(question.settings).strict,
        min_overlap=quality_config().min_overlap,
        layout=layout,
    )


def _counted_triplets(kept: Sequence[Judgement], *, strict: bool) -> CountedTriplets:
    """What the live transitivity kappa of :func:`_annotator_row` and :func:`derive_pairwise`
    rests on, from one annotator's kept judgements (:func:`_kept_after`): the triplets
    :func:`~apps.preferences.selectors.consistency` counts (those a calibration or audit answer
    completed) and the latest kept outcome of each judged pair (the pair confusion's diagonal,
    whose ties give the chance level)."""
    triplets = consistency(kept, strict=strict, record=True).triplets
    latest = _latest_codes(kept)
    return CountedTriplets(
        np.array([t[:3] for t in triplets], dtype=np.int64).reshape(-1, 3),
        np.array([t[3] for t in triplets], dtype=bool),
        np.array(list(latest), dtype=np.int64).reshape(-1, 2),
        np.array([code == 1 for code in latest.values()], dtype=bool),
    )


def _outcome_ratings(latest: Sequence[Mapping[PairKey, int]]) -> NDArray[np.float64]:
    """Annotators x judged pairs: each annotator's latest kept outcome code per pair (nan where
    they did not judge it), the ratings behind the pair confusion of the live figures."""
    pairs = {pair: k for k, pair in enumerate(sorted(set().union(*latest)))} if latest else {}
    ratings = np.full((len(latest), len(pairs)), np.nan)
    for row, codes in enumerate(latest):
        for pair, code in codes.items():
            ratings[row, pairs[pair]] = code
    return ratings


def symmetric_outcome_ratings(
    ratings: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Outcome codes read both ways round, and the pair each column belongs to.

    A pair is stored smaller item id first, a choice without meaning; read the other way
    round its codes are ``2 - c`` (0 and 2 swap, ties stay). Kappa of both readings together
    has a chance level that does not depend on which item is first: each annotator's
    marginal becomes :math:`(p_0 + p_2)/2, p_1, (p_0 + p_2)/2`. This is
    :func:`symmetric_confusion` on the pair confusions; the second array (column ``j`` and
    ``j + n`` are pair ``j``) lets :func:`~analytics.metrics.intervals.
    kappa_with_others_interval` count a pair once.
    """
    n = ratings.shape[1]
    return np.hstack([ratings, 2.0 - ratings]), np.tile(np.arange(n), 2)


def symmetric_confusion(confusion: NDArray[np.float64]) -> NDArray[np.float64]:
    """Pair-outcome confusions ``(..., 3, 3)`` plus their reading the other way round
    (rows and columns reversed): the tables of :func:`symmetric_outcome_ratings`."""
    return confusion + confusion[..., ::-1, ::-1]


def judgement_intervals(question: Question) -> IntervalSet | None:
    """95 % jackknife intervals of each annotator's transitivity kappa (items left out in turn,
    :func:`~analytics.metrics.intervals.indicator_intervals_pairwise`) over the very triplets
    and tie rate the live figure counts (:func:`_counted_triplets` of :func:`_kept_after`), so
    each interval is centred on the value shown; ``n`` in complete triplets. Kappa with others
    on shared pairs: the delta-method interval of
    :func:`~analytics.metrics.intervals.kappa_with_others_interval` on the latest kept outcome
    of every pair (the live pair confusion's ratings), ``n`` in pairs. Audit contradictions
    and the same-outcome share: Wilson's interval of the state's own counts
    (:func:`~analytics.metrics.uncertainty.wilson_interval`, ``n`` in audits and in
    comparisons, :func:`shared_outcomes`). Seconds per judgement: Student's t interval of
    the mean over the timed kept judgements
    (:func:`~analytics.metrics.uncertainty.mean_t_interval`), ``n`` in timed judgements.
    Study: the pooled transitivity kappa (every annotator's counted triplets and tie rate
    summed, as :func:`derive_pairwise` pools them) with the same delete-one-item jackknife
    over those triplets, centred on the live figure, ``n`` in complete triplets (no bounds
    below the jackknife's minimum of items). ``None`` before the first judgement."""
    state = QualityState.objects.filter(question=question).first()
    if state is None or not state.annotator_ids:
        return None
    strict = clean_pairwise_settings(question.settings).strict
    by_annotator: dict[int, list[Judgement]] = {a: [] for a in state.annotator_ids}
    for judgement in _history(question.pk, annotator_id__in=state.annotator_ids):
        by_annotator[judgement.annotator_id].append(judgement)
    kept = [_kept_after(mine) for mine in by_annotator.values()]
    found = indicator_intervals_pairwise(
        [_counted_triplets(mine, strict=strict) for mine in kept], strict=strict
    )
    study = {POOLED_TRANSITIVITY_KAPPA.key: found.pop(POOLED_TRANSITIVITY_KAPPA.key)}
    doubled, pair_of = symmetric_outcome_ratings(
        _outcome_ratings([_latest_codes(mine) for mine in kept])
    )
    found[OUTCOME_KAPPA.key] = kappa_with_others_interval(
        doubled, units=pair_of, min_overlap=2 * quality_config().min_overlap
    )
    stats = PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    found[CONTRADICTION_RATE.key] = wilson_interval(
        stats.column("contradictions"), stats.column("audits")
    )
    found[AGREEMENT.key] = wilson_interval(*shared_outcomes(stats))
    timed = [
        (k, j.time_spent_ms)
        for k, mine in enumerate(kept)
        for j in mine
        if j.time_spent_ms is not None
    ]
    found[SECONDS_PER_JUDGEMENT.key] = mean_t_interval(
        np.array([ms for _, ms in timed], dtype=float) / 1000.0,
        np.array([k for k, _ in timed], dtype=np.intp),
        n_groups=len(kept),
    )
    found[SAME_SIDE.key], notes = _same_side(kept, state.annotator_ids)
    evidence = derive_question(state, question, layout=NO_LAYOUT).evidence
    return IntervalSet(
        annotators=state.annotator_ids,
        per_annotator=in_evidence_units(found, INDICATORS, evidence),
        study=study,
        notes={SAME_SIDE.key: notes},
    )


def _same_side(
    kept: Sequence[Sequence[Judgement]], annotators: Sequence[int]
) -> tuple[Interval, dict[int, str]]:
    """Per annotator: the share of decisive answers (ties and judgements stored before sides
    were recorded left out) that picked the favoured side of the screen, its Clopper-Pearson
    interval, and in words which side and how often."""
    left = np.zeros(len(kept))
    decisive = np.zeros(len(kept))
    for k, mine in enumerate(kept):
        for j in mine:
            if j.outcome != 0 and j.side_a:
                decisive[k] += 1
                left[k] += (j.outcome == 1) == (j.side_a == Judgement.Side.A)
    favoured = np.maximum(left, decisive - left)
    low, high = clopper_pearson(favoured, decisive)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(decisive > 0, favoured / decisive, np.nan)
    notes = {
        int(a): (
            f"picked the {'left' if left[k] >= decisive[k] - left[k] else 'right'} item on "
            f"{int(favoured[k])} of {int(decisive[k])} decisive answers"
        )
        for k, a in enumerate(annotators)
        if decisive[k] > 0
    }
    return Interval(share, low, high, decisive.astype(np.int64)), notes
