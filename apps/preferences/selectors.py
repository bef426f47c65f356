"""Reads of pairwise preferences: the scheduler state rebuilt from the stored judgements,
per-annotator consistency, count scores and Bradley-Terry strengths, and export rows.

Nothing is kept in memory between requests: :func:`pair_state` replays an annotator's stored
judgements through :meth:`PairScheduler.from_judgements` every time.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet

from analytics.metrics.preferences import (
    absolute_scale,
    bradley_terry,
    count_scores,
    transitivity_kappa_from_counts,
    triplet_counts,
)
from apps.items.models import Item
from apps.preferences.models import Judgement, PairSession, PairwiseSettings
from apps.preferences.scheduling import PairScheduler
from apps.studies.models import Question, Study
from apps.studies.selectors import studies_for_user, studies_managed_by

#: Ridge penalty of Bradley-Terry when the pooled comparison graph is not strongly connected.
BT_ALPHA = 0.01

Pair = tuple[int, int]


@dataclass
class PairState:
    """An annotator's position in a pairwise question, rebuilt from the stored judgements.

    While pruning, ``scheduler`` has replayed every judgement and chooses the next pair. Once
    pruning stopped (``session.pruning_stopped_at``), it has replayed only the judgements up to
    that point, and the pending pair is the first pair never asked in a fixed order drawn from
    the session's seed: every remaining pair is asked.
    """

    session: PairSession
    settings: PairwiseSettings
    judgements: list[Judgement]
    scheduler: PairScheduler
    pending: Pair | None
    remaining: int

    @property
    def pruning(self) -> bool:
        """False once the annotator's transitivity kappa fell below the floor."""
        return self.session.pruning_stopped_at is None

    @property
    def done(self) -> bool:
        return self.pending is None

    @property
    def progress(self) -> dict[str, int]:
        """``{"done", "total", "percent"}`` with total = asked + estimated remaining."""
        done = len(self.judgements)
        total = done + self.remaining
        return {"done": done, "total": total, "percent": round(100 * done / total) if total else 0}


def _unasked_pairs(
    *, items: Sequence[int], judgements: Sequence[Judgement], seed: int
) -> list[Pair]:
    """Every pair never asked, in an order and orientation fixed by the seed."""
    rng = random.Random(f"{seed}-exhaustive")
    pairs = list(combinations(items, 2))
    rng.shuffle(pairs)
    asked = {frozenset((j.item_a_id, j.item_b_id)) for j in judgements}
    plan = [pair if rng.random() < 0.5 else pair[::-1] for pair in pairs]
    return [pair for pair in plan if frozenset(pair) not in asked]


def pair_state(*, session: PairSession, judgements: Sequence[Judgement] | None = None) -> PairState:
    """Rebuild the annotator's scheduler from the stored judgements and find the pending pair.

    ``judgements`` (the session's, in sequence order) saves the query when a page has already
    read them for every annotator. Raises ``ValueError`` (from the scheduler) if the stored
    history does not replay, which would mean the session's items or settings were changed
    behind its back.
    """
    settings = session.pairwise_settings
    if judgements is None:
        judgements = _judgements_by_annotator(
            question_id=session.question_id, annotator_id=session.annotator_id
        ).get(session.annotator_id, [])
    judgements = list(judgements)
    items: list[int] = list(session.items)
    stop = session.pruning_stopped_at
    scheduler = PairScheduler.from_judgements(
        items,
        [j.as_tuple() for j in judgements[:stop]],
        strict=settings.strict,
        calibration_triplets=min(settings.calibration_triplets, math.comb(len(items), 3)),
        audit_rate=settings.audit_rate,
        seed=session.seed,
    )
    if stop is None:
        pending = scheduler.next_pair()
        # No pair is ever asked twice, so the pairs never asked bound the estimate.
        never_asked = math.comb(len(items), 2) - len(judgements)
        remaining = min(scheduler.remaining_estimate(), never_asked) if pending else 0
    else:
        unasked = _unasked_pairs(items=items, judgements=judgements, seed=session.seed)
        pending = unasked[0] if unasked else None
        remaining = len(unasked)
    return PairState(
        session=session,
        settings=settings,
        judgements=judgements,
        scheduler=scheduler,
        pending=pending,  # type: ignore[arg-type]  # the scheduler hands back item ids
        remaining=remaining,
    )


@dataclass(frozen=True)
class Consistency:
    """Transitivity of one annotator over the triplets that test them.

    Triplets made only of *sort* answers are left out: the sort asks only pairs still open, so
    they are transitive by construction (see :meth:`PairScheduler.transitivity_kappa`). Every
    triplet with a calibration or audit answer counts, including the answers asked after
    pruning stopped (stored as audits).
    """

    kappa: float
    n_transitive: int
    n_complete: int


def consistency(judgements: Sequence[Judgement], *, strict: bool) -> Consistency:
    """Amidei's transitivity kappa of one annotator's judgements (see :class:`Consistency`)."""
    every = triplet_counts([j.as_tuple() for j in judgements], strict=strict)
    sort_only = triplet_counts(
        [j.as_tuple() for j in judgements if j.phase == Judgement.Phase.SORT], strict=strict
    )
    n_transitive, n_complete = every[0] - sort_only[0], every[1] - sort_only[1]
    return Consistency(
        kappa=transitivity_kappa_from_counts(n_transitive, n_complete, strict=strict),
        n_transitive=n_transitive,
        n_complete=n_complete,
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

    @property
    def pruning(self) -> bool:
        return self.session.pruning_stopped_at is None

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
    *, question_id: int, annotator_id: int | None = None
) -> dict[int, list[Judgement]]:
    """A question's judgements in one query (or one annotator's), per annotator, in order."""
    query = Judgement.objects.filter(question_id=question_id).order_by("annotator_id", "sequence")
    if annotator_id is not None:
        query = query.filter(annotator_id=annotator_id)
    grouped: dict[int, list[Judgement]] = defaultdict(list)
    for judgement in query:
        grouped[judgement.annotator_id].append(judgement)
    return grouped


def _sessions(question: Question) -> list[PairSession]:
    return list(
        PairSession.objects.filter(question=question)
        .select_related("annotator")
        .order_by("annotator__username")
    )


def annotator_reports(*, question: Question) -> list[AnnotatorReport]:
    """Per annotator: judgements asked against n(n-1)/2 and ceil(log2 n!), kappa, triplets."""
    reports = []
    judgements = _judgements_by_annotator(question_id=question.pk)
    for session in _sessions(question):
        state = pair_state(session=session, judgements=judgements.get(session.annotator_id, []))
        n = len(session.items)
        reports.append(
            AnnotatorReport(
                session=session,
                username=session.annotator.get_username(),
                n_items=n,
                asked=len(state.judgements),
                all_pairs=math.comb(n, 2),
                minimum=math.ceil(math.log2(math.factorial(n))),
                consistency=consistency(state.judgements, strict=state.settings.strict),
                contradictions=sum(j.contradicts for j in state.judgements),
                remaining=state.remaining,
            )
        )
    return reports


@dataclass(frozen=True)
class ItemScore:
    """One item's row of the score table.

    The per-annotator lists follow ``QuestionScores.annotators``; nan: not judged / not fitted.
    """

    item: Item
    log_strength: float
    se: float
    rank: int | None
    counts: list[float]
    scales: list[float]

    @property
    def per_annotator(self) -> list[tuple[float, float] | None]:
        """``(count, scale)`` per annotator, None where the annotator never judged the item."""
        return [
            None if math.isnan(count) else (count, scale)
            for count, scale in zip(self.counts, self.scales, strict=True)
        ]


@dataclass(frozen=True)
class QuestionScores:
    """Count scores per annotator and pooled Bradley-Terry strengths of one question.

    ``alpha`` is the ridge penalty used: 0 unless the pooled comparison graph is not strongly
    connected (an item never lost or never won, or groups never compared), in which case the
    maximum-likelihood strengths do not exist and ``BT_ALPHA`` shrinks them towards the mean.
    """

    annotators: list[str]
    rows: list[ItemScore]
    alpha: float
    n_judgements: int

    @property
    def regularised(self) -> bool:
        return self.alpha > 0


def question_scores(*, question: Question) -> QuestionScores:
    """Amidei count scores (and their absolute scale) per annotator, Bradley-Terry pooled."""
    sessions = _sessions(question)
    judgements = _judgements_by_annotator(question_id=question.pk)
    by_annotator = {
        session.annotator_id: [j.as_tuple() for j in judgements.get(session.annotator_id, [])]
        for session in sessions
    }
    item_ids = sorted({item for s in sessions for item in s.items})
    items = list(Item.objects.filter(pk__in=item_ids).order_by("position", "id"))
    order = [item.pk for item in items]
    nan = np.full(len(order), np.nan)
    counts, scales = [], []
    for session in sessions:
        judged = by_annotator[session.annotator_id]
        f = count_scores(judged, items=order) if judged else nan
        counts.append(f)
        scales.append(absolute_scale(f) if np.count_nonzero(~np.isnan(f)) >= 2 else nan)
    n_judgements = sum(len(j) for j in by_annotator.values())
    theta, se, alpha = nan, nan, 0.0
    if n_judgements:
        try:
            fit = bradley_terry(by_annotator, items=order)
        except ValueError:  # not strongly connected: the MLE does not exist
            alpha = BT_ALPHA
            fit = bradley_terry(by_annotator, items=order, alpha=alpha)
        theta, se = fit.log_strengths, fit.se
    ranked = np.argsort(-np.nan_to_num(theta, nan=-np.inf), kind="stable")
    rank = {int(k): place for place, k in enumerate(ranked, start=1) if not np.isnan(theta[k])}
    rows = [
        ItemScore(
            item=item,
            log_strength=float(theta[k]),
            se=float(se[k]),
            rank=rank.get(k),
            counts=[float(f[k]) for f in counts],
            scales=[float(s[k]) for s in scales],
        )
        for k, item in enumerate(items)
    ]
    rows.sort(key=lambda row: (row.rank is None, row.rank or 0))
    return QuestionScores(
        annotators=[s.annotator.get_username() for s in sessions],
        rows=rows,
        alpha=alpha,
        n_judgements=n_judgements,
    )


def _cell(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.6g}"


def score_rows(scores: QuestionScores) -> Iterator[list[str]]:
    """CSV rows of the score table: header, then one row per item (best first)."""
    yield [
        "item_id",
        "external_id",
        "rank",
        "bt_log_strength",
        "bt_se",
        "bt_alpha",
        *(f"count_{name}" for name in scores.annotators),
        *(f"scale_{name}" for name in scores.annotators),
    ]
    for row in scores.rows:
        yield [
            str(row.item.pk),
            row.item.external_id,
            "" if row.rank is None else str(row.rank),
            _cell(row.log_strength),
            _cell(row.se),
            f"{scores.alpha:g}",
            *(_cell(v) for v in row.counts),
            *(_cell(v) for v in row.scales),
        ]


def judgement_rows(*, question: Question) -> Iterator[list[str]]:
    """CSV rows of every raw judgement of a question (header first), read in chunks."""
    yield [
        "annotator",
        "sequence",
        "item_a",
        "item_b",
        "outcome",
        "phase",
        "contradicts",
        "time_spent_ms",
        "idempotency_key",
        "created_at",
    ]
    judgements = (
        Judgement.objects.filter(question=question)
        .select_related("annotator", "item_a", "item_b")
        .order_by("annotator__username", "sequence")
    )
    for j in judgements.iterator(chunk_size=2000):
        yield [
            j.annotator.get_username(),
            str(j.sequence),
            j.item_a.external_id,
            j.item_b.external_id,
            str(j.outcome),
            j.phase,
            str(int(j.contradicts)),
            "" if j.time_spent_ms is None else str(j.time_spent_ms),
            str(j.idempotency_key),
            j.created_at.isoformat(),
        ]


def judgements_visible_to(*, user: AbstractBaseUser) -> QuerySet[Judgement]:
    """Managers see every judgement of their studies; annotators only their own."""
    visible = Q(question__study__in=studies_managed_by(user=user)) | Q(
        annotator=user, question__study__in=studies_for_user(user=user)
    )
    return Judgement.objects.filter(visible).select_related("question").order_by("id")
