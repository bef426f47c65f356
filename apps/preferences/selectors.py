"""Reads of pairwise preferences: the scheduler state rebuilt from the stored judgements,
per-annotator consistency, count scores and Bradley-Terry strengths (export rows:
:mod:`apps.preferences.exporting`).

:func:`pair_state` brings the annotator's scheduler up to the stored judgements: the stored
judgements are the truth, and :data:`replays` keeps the replayed schedulers of the process
between requests, so that a request replays only the judgements stored since (a cold process
replays them all, in O(items + judgements)). It runs in no transaction: on SQLite, whose
transactions take the write lock at BEGIN, nobody waits for it.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, cast

import numpy as np
from django.core.exceptions import ValidationError
from django.db.models import Count, Q, QuerySet

from analytics.metrics.preferences import (
    SideBias,
    absolute_scale,
    bradley_terry,
    count_scores,
    reliability_weight,
    side_bias,
)
from analytics.selectors import excluded_annotator_ids
from apps.annotations.models import Assignment
from apps.items.models import Item
from apps.preferences.checks import (
    CheckPlan,
    check_due,
    check_plan,
    checked_slots,
    expected_checks,
)
from apps.preferences.models import (
    Judgement,
    PairPool,
    PairSession,
    PairwiseSettings,
    clean_pairwise_settings,
)
from apps.preferences.scheduling import PairScheduler, ReplayCache, TripletCounter
from apps.studies.models import Question, Study
from apps.studies.selectors import question_item_filter, studies_for_user, studies_managed_by
from core.types import Account

#: Ridge penalty of Bradley-Terry when the pooled comparison graph is not strongly connected.
BT_ALPHA = 0.01

Pair = tuple[int, int]


class JudgementRow(NamedTuple):
    """The fields of a stored :class:`Judgement` that states and reports read.

    A plain tuple: reading an annotator's 500 judgements this way costs a fraction of building
    500 model instances, on every request.
    """

    item_a_id: int
    item_b_id: int
    outcome: int
    phase: str
    contradicts: bool
    id: int
    side_a: str

    @property
    def chose_side_a(self) -> bool | None:
        """Whether the preferred item was the one shown as A (left); None for a tie or when
        the side was not recorded."""
        if self.outcome == 0 or not self.side_a:
            return None
        return (self.outcome == 1) == (self.side_a == Judgement.Side.A)

    def as_tuple(self) -> tuple[int, int, int]:
        """As :meth:`Judgement.as_tuple`."""
        return self.item_a_id, self.item_b_id, self.outcome


#: Replayed schedulers kept by this process between requests (least recently used dropped
#: beyond this many items in all; a scheduler holds about 60 bytes per item).
REPLAY_CACHE_ITEMS = 1_000_000
replays = ReplayCache(max_items=REPLAY_CACHE_ITEMS)


@dataclass
class PairState:
    """An annotator's position in a pairwise question, rebuilt from the stored judgements.

    ``scheduler`` has replayed every judgement and chooses the next pair; once pruning stopped
    (``session.pruning_stopped_at``) it hands out every pair never asked, in an order fixed by
    the session's seed (:meth:`PairScheduler.stop_pruning`).

    ``judgements`` are the scheduler's (the data); ``checks`` the answers to hidden attention
    checks kept (:mod:`apps.preferences.checks`), and ``check`` is True when ``pending`` is a
    check pair rather than the scheduler's. ``remaining`` counts the checks expected too.
    """

    session: PairSession
    settings: PairwiseSettings
    judgements: list[JudgementRow]
    scheduler: PairScheduler
    pending: Pair | None
    remaining: int
    checks: list[JudgementRow] = field(default_factory=list)
    check: bool = False

    @property
    def pruning(self) -> bool:
        """False once the annotator's transitivity kappa fell below the floor."""
        return self.session.pruning_stopped_at is None

    @property
    def done(self) -> bool:
        return self.pending is None

    @property
    def answered(self) -> int:
        """Pairs answered and kept, attention checks included."""
        return len(self.judgements) + len(self.checks)

    @property
    def last_answer(self) -> JudgementRow | None:
        """The latest answer kept (an attention check's too): the one an undo takes back."""
        return max((*self.judgements, *self.checks), key=lambda j: j.id, default=None)

    @property
    def progress(self) -> dict[str, int]:
        """``{"done", "total", "percent"}`` with total = asked + estimated remaining."""
        done = self.answered
        total = done + self.remaining
        return {"done": done, "total": total, "percent": round(100 * done / total) if total else 0}


def replay_key(session: PairSession) -> Hashable:
    """The key of a session's scheduler in :data:`replays` (a reused id gets a new key)."""
    return (session.pk, session.seed, session.created_at)


def pair_state(
    *,
    session: PairSession,
    judgements: Sequence[JudgementRow] | None = None,
    keep: bool = True,
    plan: CheckPlan | None = None,
) -> PairState:
    """Bring the annotator's scheduler up to the stored judgements and find the pending pair.

    ``judgements`` (the session's, in sequence order) saves the query when a page has already
    read them for every annotator. The scheduler replays only the judgements that are data:
    answers to attention checks are set apart (``state.checks``). With ``plan`` (a recruited
    participant's checks, :func:`~apps.preferences.checks.check_plan`) the pending pair is a
    check pair where one is due (:func:`~apps.preferences.checks.check_due`). With ``keep``
    the scheduler goes back to :data:`replays` for the next request; a caller that records
    into ``state.scheduler`` passes False and keeps it once the judgement is stored.
    ``session.items`` is read only when no scheduler is kept.
    Raises ``ValueError`` (from the scheduler) if the stored history does not replay, which
    would mean the session's items or settings were changed behind its back.

    Cost: O(judgements) to read and check them, plus, for a scheduler kept, O(judgements
    stored since) steps; otherwise O(items + judgements^2) at worst (typically O(items +
    judgements)) to replay them all. Memory: O(items + judgements).
    """
    settings = session.pairwise_settings
    if judgements is None:
        judgements = _judgements_by_annotator(
            question_id=session.question_id, annotator_id=session.annotator_id, checks=True
        ).get(session.annotator_id, [])
    kept = list(judgements)
    judgements = [j for j in kept if j.phase != Judgement.Phase.CHECK]
    checks = [j for j in kept if j.phase == Judgement.Phase.CHECK]
    history = [j.as_tuple() for j in judgements]
    stop = session.pruning_stopped_at
    key = replay_key(session)
    scheduler = replays.take(key)
    try:
        if scheduler is None:
            raise ValueError("no scheduler kept")
        scheduler.replay(history, pruning_stopped_at=stop)
    except ValueError:  # none kept, or kept for another history: replay it all
        items: list[int] = list(session.items)
        scheduler = PairScheduler.from_judgements(
            items,
            history,
            strict=settings.strict,
            calibration_triplets=min(settings.calibration_triplets, math.comb(len(items), 3)),
            audit_rate=settings.audit_rate,
            seed=session.seed,
            audit_rule=cast(Literal[1, 2], session.audit_rule),  # the field's choices
            adaptive=session.adaptive,
            pruning_stopped_at=stop,
        )
    pending = scheduler.next_pair()
    remaining = remaining_pairs(scheduler, done=pending is None)
    check = None
    if plan is not None and pending is not None:
        slot = len(judgements)
        if slot not in checked_slots([j.phase for j in kept]):
            check = check_due(plan, seed=session.seed, slot=slot, answered=len(checks))
        remaining += expected_checks(plan, remaining) + (check is not None)
    if keep and len(scheduler.items) >= 2:  # sessions with fewer take up items assigned later
        replays.keep(key, scheduler)
    return PairState(
        session=session,
        settings=settings,
        judgements=judgements,
        scheduler=scheduler,
        pending=check or pending,  # type: ignore[arg-type]  # the scheduler hands back ids
        remaining=remaining,
        checks=checks,
        check=check is not None,
    )


def remaining_pairs(scheduler: PairScheduler, *, done: bool) -> int:
    """About how many of the scheduler's pairs are left once it chose its next pair (0 when
    ``done``): :meth:`PairScheduler.remaining_estimate`, bounded by the pairs never asked when
    no pair is asked twice (sessions before the adaptive scheduler)."""
    remaining = 0 if done else scheduler.remaining_estimate()
    if not scheduler.adaptive:
        remaining = min(remaining, math.comb(len(scheduler.items), 2) - len(scheduler.judgements))
    return remaining


class SchedulerFigures(NamedTuple):
    """What the manager's pages read of an annotator's scheduler, stored with every answer in
    ``PairSession.figures`` so that those pages replay no scheduler (a cold process replayed
    all of them: 1.5-2.5 s at 200 annotators x 500 judgements).

    ``judgements`` (the data judgements kept) and ``last_id`` (the latest one's id, None
    without one) name the history the figures describe; ``remaining`` is
    :func:`remaining_pairs`, ``error_rate`` :meth:`PairScheduler.error_rate` and ``flagged``
    :meth:`PairScheduler.flagged` at the session's kappa floor.
    """

    judgements: int
    last_id: int | None
    remaining: int
    error_rate: float
    flagged: bool


def scheduler_figures(
    scheduler: PairScheduler, *, kappa_floor: float, last_id: int | None, done: bool
) -> SchedulerFigures:
    """The :class:`SchedulerFigures` of ``scheduler`` once it chose its next pair."""
    return SchedulerFigures(
        judgements=len(scheduler.judgements),
        last_id=last_id,
        remaining=remaining_pairs(scheduler, done=done),
        error_rate=scheduler.error_rate(),
        flagged=scheduler.flagged(kappa_floor),
    )


def annotator_figures(
    *, session: PairSession, judgements: Sequence[JudgementRow]
) -> SchedulerFigures:
    """The figures of the session's scheduler over ``judgements`` (its data judgements kept,
    in order): the stored ones when they describe that history, else by replaying it
    (:func:`pair_state`; sessions answered before the figures were stored, or just undone).
    """
    last_id = judgements[-1].id if judgements else None
    if session.figures is not None:
        stored = SchedulerFigures(**session.figures)
        if (stored.judgements, stored.last_id) == (len(judgements), last_id):
            return stored
    state = pair_state(session=session, judgements=judgements)
    return SchedulerFigures(
        judgements=len(state.judgements),
        last_id=last_id,
        remaining=state.remaining,
        error_rate=state.scheduler.error_rate(),
        flagged=state.scheduler.flagged(state.settings.kappa_floor),
    )


@dataclass(frozen=True)
class Consistency:
    """Transitivity of one annotator over the triplets that test them.

    A triplet counts when a calibration or audit answer completes it, including the answers
    asked after pruning stopped (stored as audits); a sort answer asks a pair still open, so
    the triplets it completes are transitive by construction (see
    :meth:`PairScheduler.transitivity_kappa`).
    """

    kappa: float
    n_transitive: int
    n_complete: int
    tie_rate: float
    #: With ``record``: each counted triplet as ``(a, b, c, transitive)``.
    triplets: Sequence[tuple[int, int, int, bool]] = ()


def consistency(
    judgements: Sequence[Judgement | JudgementRow], *, strict: bool, record: bool = False
) -> Consistency:
    """Amidei's transitivity kappa of one annotator's judgements (see :class:`Consistency`);
    ``record`` lists the counted triplets too.

    Counted by :class:`TripletCounter`: O(judgements x partners per item), no items x items
    matrix (an annotator answering "equal" to everything judges as many items as pairs).
    """
    counter = TripletCounter(record=record)
    for judgement in judgements:
        if judgement.phase == Judgement.Phase.VERIFY:  # a re-ask of a pair asked before
            continue
        a, b, outcome = judgement.as_tuple()
        counter.add(a, b, outcome, sort=judgement.phase == Judgement.Phase.SORT)
    return Consistency(
        kappa=counter.kappa(strict=strict),
        n_transitive=counter.n_transitive,
        n_complete=counter.n_complete,
        tie_rate=counter.tie_rate,
        triplets=counter.triplets or (),
    )


def pairwise_questions(*, study: Study) -> QuerySet[Question]:
    return study.questions.filter(kind=Question.Kind.PAIRWISE)


def sessions_with_pruning_stopped(*, question: Question) -> QuerySet[PairSession]:
    """Annotators whose transitivity fell below the floor (every pair is asked of them).

    For the manager's warning and the live dashboard.
    """
    return (
        PairSession.objects.filter(question=question, pruning_stopped_at__isnull=False)
        .select_related("annotator")
        .order_by("annotator__username")
    )


@dataclass(frozen=True)
class AnnotatorReport:
    """One annotator's numbers on a pairwise question, for the manager page and the API."""

    session: PairSession
    username: str
    n_items: int
    asked: int
    all_pairs: int
    minimum: int
    consistency: Consistency
    contradictions: int
    remaining: int
    flagged: bool
    error_rate: float
    sides: SideBias

    #: Position bias is noted below this two-sided p-value of :func:`side_bias`.
    SIDE_BIAS_P = 0.01

    @property
    def pruning(self) -> bool:
        return self.session.pruning_stopped_at is None

    @property
    def a_share(self) -> float | None:
        """Share of decisive answers choosing the A side; None without one."""
        return None if math.isnan(self.sides.share_a) else self.sides.share_a

    @property
    def side_bias(self) -> str:
        """ "left" or "right" when the share of A answers differs from 1/2 at
        :attr:`SIDE_BIAS_P`, else ""."""
        if self.sides.p_value >= self.SIDE_BIAS_P:
            return ""
        return "left" if self.sides.share_a > 0.5 else "right"

    @property
    def below_floor(self) -> bool:
        return not self.pruning

    @property
    def completed(self) -> bool:
        return self.session.completed_at is not None

    @property
    def kappa(self) -> float | None:
        """Transitivity kappa, None before the first complete triplet."""
        return None if math.isnan(self.consistency.kappa) else self.consistency.kappa


def _judgements_by_annotator(
    *, question_id: int, annotator_id: int | None = None, checks: bool = False
) -> dict[int, list[JudgementRow]]:
    """A question's judgements not retracted, in one query (or one annotator's), per annotator,
    in order; the answers to attention checks only with ``checks``."""
    query = (
        Judgement.objects.filter(question_id=question_id)
        .kept()
        .order_by("annotator_id", "sequence")
    )
    if not checks:
        query = query.data()
    if annotator_id is not None:
        query = query.filter(annotator_id=annotator_id)
    grouped: dict[int, list[JudgementRow]] = defaultdict(list)
    for annotator, *row in query.values_list("annotator_id", *JudgementRow._fields):
        grouped[annotator].append(JudgementRow(*row))
    return grouped


def _sessions(question: Question) -> list[PairSession]:
    return list(
        PairSession.objects.filter(question=question)
        .select_related("annotator")
        .order_by("annotator__username")
    )


def question_judgements(*, question: Question) -> dict[int, list[JudgementRow]]:
    """A question's judgements not retracted, per annotator id, in order: one query, for a
    page that passes them to both :func:`annotator_reports` and :func:`question_scores`
    (reading them costs 0.3-0.5 s at 100,000 judgements)."""
    return _judgements_by_annotator(question_id=question.pk)


def annotator_reports(
    *, question: Question, judgements: Mapping[int, Sequence[JudgementRow]] | None = None
) -> list[AnnotatorReport]:
    """Per annotator: judgements asked against n(n-1)/2 and ceil(log2 n!), kappa, triplets.

    ``judgements`` (:func:`question_judgements`) saves reading them again.
    """
    reports = []
    if judgements is None:
        judgements = question_judgements(question=question)
    for session in _sessions(question):
        data = judgements.get(session.annotator_id, [])  # no attention checks: the data
        figures = annotator_figures(session=session, judgements=data)
        n = len(session.items)
        reports.append(
            AnnotatorReport(
                session=session,
                username=session.annotator.get_username(),
                n_items=n,
                asked=len(data),
                all_pairs=math.comb(n, 2),
                minimum=math.ceil(math.lgamma(n + 1) / math.log(2)),  # log2 n! without n!
                consistency=consistency(data, strict=session.pairwise_settings.strict),
                contradictions=sum(j.contradicts for j in data),
                remaining=figures.remaining,
                flagged=figures.flagged,
                error_rate=figures.error_rate,
                sides=side_bias(
                    sum(j.chose_side_a is True for j in data),
                    sum(j.chose_side_a is False for j in data),
                ),
            )
        )
    return reports


#: Per annotator, item id -> (count score, absolute scale) of the items they judged.
AnnotatorScores = dict[int, tuple[float, float]]


class ItemRef(NamedTuple):
    """An item of the score table as its two identifiers, read without building an
    :class:`~apps.items.models.Item` (100,000 instances cost seconds; pages load the few they
    show)."""

    pk: int
    external_id: str


class ItemScore(NamedTuple):
    """One item's row of the score table.

    ``annotator_scores`` (following ``QuestionScores.annotators``) is shared by every row, so
    the table holds O(items + judgements), not items x annotators. A tuple: a question may
    have 100,000 rows.
    """

    item: ItemRef
    log_strength: float
    se: float
    rank: int | None
    annotator_scores: Sequence[AnnotatorScores]

    @property
    def per_annotator(self) -> list[tuple[float, float] | None]:
        """``(count, scale)`` per annotator, None where the annotator never judged the item."""
        return [scores.get(self.item.pk) for scores in self.annotator_scores]

    @property
    def counts(self) -> list[float]:
        """Count score per annotator, nan where not judged."""
        return [math.nan if cell is None else cell[0] for cell in self.per_annotator]

    @property
    def scales(self) -> list[float]:
        """Absolute scale per annotator, nan where not judged."""
        return [math.nan if cell is None else cell[1] for cell in self.per_annotator]


@dataclass(frozen=True)
class QuestionScores:
    """Count scores per annotator and pooled Bradley-Terry strengths of one question.

    ``alpha`` is the ridge penalty used: 0 unless the pooled comparison graph is not strongly
    connected (an item never lost or never won, or groups never compared), in which case the
    maximum-likelihood strengths do not exist and ``BT_ALPHA`` shrinks them towards the mean.
    ``weights`` (following ``annotators``) is how much each annotator's judgements count in
    the pooled fit (:func:`~analytics.metrics.preferences.reliability_weight` of their
    measured error rate). ``se_exact`` is False when the standard errors are approximated
    (more than 2,000 items; :func:`~analytics.metrics.preferences.bradley_terry`).
    """

    annotators: list[str]
    rows: list[ItemScore]
    alpha: float
    n_judgements: int
    weights: list[float]
    se_exact: bool = True

    @property
    def regularised(self) -> bool:
        return self.alpha > 0

    @property
    def annotator_weights(self) -> list[tuple[str, float]]:
        """``(username, weight)`` per annotator, in table order."""
        return list(zip(self.annotators, self.weights, strict=True))

    def annotator_scores_of(self, *, limit: int | None = None) -> Sequence[AnnotatorScores]:
        """Item id -> ``(count, scale)`` of the first ``limit`` annotators (every one with None),
        in table order."""
        if not self.rows:
            return []
        return self.rows[0].annotator_scores[:limit]


def _count_scores_of(judged: Sequence[tuple[int, int, int]]) -> AnnotatorScores:
    """One annotator's count scores and absolute scale over the items they judged.

    The count function's closure costs O(k^3) in the k items judged (at most twice the
    judgements, and the batch size when the question is batched), never the question's items.
    """
    if not judged:
        return {}
    judged_items = list(dict.fromkeys(item for a, b, _ in judged for item in (a, b)))
    f = count_scores(judged, items=judged_items)
    scale = absolute_scale(f)
    return {
        item: (float(count), float(s))
        for item, count, s in zip(judged_items, f, scale, strict=True)
    }


def session_weights(
    *, sessions: Sequence[PairSession], judgements: Mapping[int, Sequence[JudgementRow]]
) -> dict[int, float]:
    """Annotator id -> how much their judgements count in a pooled fit: the
    :func:`~analytics.metrics.preferences.reliability_weight` of the error rate their
    scheduler measured (:func:`annotator_figures`), for each of ``sessions``.

    The one definition of an annotator's weight: the pairwise scores and the model arena's
    ranking (:func:`apps.arena.selectors.arena_weights`) both take it from here.
    """
    return {
        session.annotator_id: reliability_weight(
            annotator_figures(
                session=session, judgements=judgements.get(session.annotator_id, [])
            ).error_rate
        )
        for session in sessions
    }


def study_reliability_weights(*, study: Study) -> dict[int, float]:
    """Annotator id -> their weight measured on the study's pairwise questions
    (:func:`session_weights`; the mean over the questions they judged, when several).
    Annotators without a pairwise session are not in it (their reliability is unmeasured)."""
    measured: dict[int, list[float]] = defaultdict(list)
    for question in pairwise_questions(study=study):
        found = session_weights(
            sessions=_sessions(question), judgements=question_judgements(question=question)
        )
        for annotator, weight in found.items():
            measured[annotator].append(weight)
    return {annotator: float(np.mean(w)) for annotator, w in measured.items()}


def question_scores(
    *, question: Question, judgements: Mapping[int, Sequence[JudgementRow]] | None = None
) -> QuestionScores:
    """Amidei count scores (and their absolute scale) per annotator, Bradley-Terry pooled.

    Memory O(items + judgements): Bradley-Terry is fitted sparse over the compared pairs, each
    annotator's count scores cover only the items they judged. ``judgements``
    (:func:`question_judgements`) saves reading them again.
    """
    sessions = _sessions(question)
    item_ids = {item for s in sessions for item in s.items}
    if judgements is None:
        judgements = question_judgements(question=question)
    by_annotator: dict[Hashable, list[tuple[int, int, int]]] = {
        session.annotator_id: [j.as_tuple() for j in judgements.get(session.annotator_id, [])]
        for session in sessions
    }
    items = [
        ItemRef(*item)
        for item in Item.objects.filter(study_id=question.study_id)
        .order_by("position", "id")
        .values_list("pk", "external_id")  # tuples: model instances cost seconds at 100,000
        if item[0] in item_ids
    ]
    order = [item.pk for item in items]
    annotator_scores = [_count_scores_of(by_annotator[s.annotator_id]) for s in sessions]
    n_judgements = sum(len(j) for j in by_annotator.values())
    weights = cast(
        "dict[Hashable, float]", session_weights(sessions=sessions, judgements=judgements)
    )
    nan = np.full(len(order), np.nan)
    theta, se, alpha, se_exact = nan, nan, 0.0, True
    if any(weights[a] > 0 and judged for a, judged in by_annotator.items()):
        try:
            fit = bradley_terry(by_annotator, items=order, weights=weights)
        except ValueError:  # not strongly connected: the MLE does not exist
            alpha = BT_ALPHA
            fit = bradley_terry(by_annotator, items=order, alpha=alpha, weights=weights)
        theta, se, se_exact = fit.log_strengths, fit.se, fit.se_exact
    ranked = np.argsort(-np.nan_to_num(theta, nan=-np.inf), kind="stable")
    fitted = ranked[~np.isnan(theta[ranked])]
    rank = np.zeros(len(order), dtype=np.int64)
    rank[fitted] = np.arange(1, fitted.size + 1)
    rows = [
        ItemScore(
            item=items[k],
            log_strength=float(theta[k]),
            se=float(se[k]),
            rank=int(rank[k]) or None,
            annotator_scores=annotator_scores,
        )
        for k in np.concatenate([fitted, ranked[np.isnan(theta[ranked])]]).tolist()
    ]
    return QuestionScores(
        annotators=[s.annotator.get_username() for s in sessions],
        rows=rows,
        alpha=alpha,
        n_judgements=n_judgements,
        weights=[weights[s.annotator_id] for s in sessions],
        se_exact=se_exact,
    )


def curated_scores(*, question: Question, curated: bool) -> tuple[set[int], QuestionScores]:
    """The annotators a curated export leaves out (ids; none unless ``curated``) and the
    question's scores fitted without their judgements: a file's margins and weights describe
    the rows it ships."""
    left_out = excluded_annotator_ids(study=question.study) if curated else set()
    judgements = {
        annotator: rows
        for annotator, rows in question_judgements(question=question).items()
        if annotator not in left_out
    }
    return left_out, question_scores(question=question, judgements=judgements)


def batch_evidence(*, question: Question) -> tuple[Counter[int], Counter[int]]:
    """What a new annotator's batch is drawn from (:func:`~apps.preferences.scheduling.
    batch_draw`): per item, in how many sessions' items it is, and in how many judgements not
    retracted. Two aggregate queries and the sessions' item lists: O(sessions' items + items).
    """
    coverage: Counter[int] = Counter()
    for items in PairSession.objects.filter(question=question).values_list("items", flat=True):
        coverage.update(items)
    comparisons: Counter[int] = Counter()
    kept = Judgement.objects.filter(question=question).kept().data()
    for side in ("item_a", "item_b"):
        counted = kept.values(side).annotate(n=Count("id")).values_list(side, "n")
        comparisons.update(dict(counted))
    return coverage, comparisons


def batch_uncertainty(*, question: Question, comparisons: Mapping[int, int]) -> dict[int, float]:
    """How uncertain each item's pooled position is, for the next batch draw
    (:func:`~apps.preferences.scheduling.batch_draw`): the standard errors of the pooled
    Bradley-Terry fit stored in the question's :class:`~apps.preferences.models.PairPool`
    (inf for an item that fit did not compare).

    The fit is stored off the request path
    (:func:`apps.preferences.services.pair_pool_refit`, after quality updates): fitting it here
    would cost seconds per new session at 100,000 items. Before the first stored fit, and
    while the stored fit is regularised (its comparison graph not strongly connected, so the
    ridge prior rather than the judgements sets the standard errors of whole batches), the
    standard error's leading term :math:`1 / \\sqrt{d_i}` of each item's pooled judgements
    :math:`d_i` (``comparisons``; items in none are left out: infinitely uncertain), so the
    draw then favours the least compared items. One query and O(items).
    """
    stored = (
        PairPool.objects.filter(question=question, fitted_at__isnull=False, alpha=0)
        .values_list("items", "se")
        .first()
    )
    if stored is None:
        return {item: 1.0 / math.sqrt(n) for item, n in comparisons.items() if n > 0}
    items = np.frombuffer(bytes(stored[0]), dtype=np.int64)
    se = np.nan_to_num(np.frombuffer(bytes(stored[1]), dtype=np.float64), nan=np.inf)
    return dict(zip(items.tolist(), se.tolist(), strict=True))


def judgements_visible_to(*, user: Account) -> QuerySet[Judgement]:
    """Managers see every judgement of their studies; annotators only their own."""
    visible = Q(question__study__in=studies_managed_by(user=user)) | Q(
        annotator=user, question__study__in=studies_for_user(user=user)
    )
    return Judgement.objects.filter(visible).select_related("question", "retraction").order_by("id")


def judgement_progress(*, question: Question, annotator: Account) -> dict[str, int]:
    """The annotator's judgements done and about how many in all on one pairwise question,
    counted as the comparison page counts them (:attr:`PairState.progress`).

    A question not started yet counts its expected judgements, as its page will show on the
    first visit. Costs a replay when started (usually kept in :data:`replays`).
    """
    session = PairSession.objects.filter(question=question, annotator=annotator).first()
    if session is not None:
        plan = check_plan(question=question, annotator=annotator)  # a participant's checks
        return pair_state(session=session, plan=plan).progress
    n = Assignment.objects.filter(
        question_item_filter(question, prefix="item__"),
        study_id=question.study_id,
        annotator=annotator,
        round=1,
    ).count()
    try:
        pairwise = clean_pairwise_settings(question.settings)
    except ValidationError:
        n = 0
    if pairwise.batch_size:
        n = min(n, pairwise.batch_size)
    if n < 2:
        return {"done": 0, "total": 0, "percent": 0}
    fresh = PairScheduler(
        range(n),
        strict=pairwise.strict,
        calibration_triplets=min(pairwise.calibration_triplets, math.comb(n, 3)),
        audit_rate=pairwise.audit_rate,
        adaptive=True,
    )
    return {"done": 0, "total": fresh.remaining_estimate(), "percent": 0}


class ItemJudgement(NamedTuple):
    """One judgement an item was in, seen from that item: ``result`` is "preferred",
    "equal" or "other preferred"."""

    judgement: Judgement
    other: Item
    result: str


def item_judgements(*, question: Question, item: Item) -> list[ItemJudgement]:
    """Every judgement of ``question`` that showed ``item`` (retracted ones too, marked by
    their ``retraction``; attention checks left out), by annotator then sequence: the item
    page's pairwise card."""
    judgements = (
        Judgement.objects.filter(Q(item_a=item) | Q(item_b=item), question=question)
        .data()
        .select_related("annotator", "item_a", "item_b", "retraction")
        .order_by("annotator__username", "sequence")
    )
    rows = []
    for judgement in judgements:
        mine = 1 if judgement.item_a_id == item.pk else -1
        other = judgement.item_b if mine == 1 else judgement.item_a
        result = {1: "preferred", 0: "equal", -1: "other preferred"}[judgement.outcome * mine]
        rows.append(ItemJudgement(judgement, other, result))
    return rows
