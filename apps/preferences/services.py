"""Every write of pairwise preferences: start a session, hand out the next pair, record answers.

Judgements are append-only, like annotations: a client-generated idempotency key makes retries,
double clicks and second tabs harmless. Each request locks the annotator's :class:`PairSession`
row (``select_for_update``) and rebuilds the scheduler from the stored judgements, so two
concurrent requests of one annotator see one pending pair and store one answer to it.

Pruning stops for an annotator whose transitivity kappa falls below the question's
``kappa_floor``. The floor is checked after every answer once calibration is over (after each
sort or audit answer, or when calibration alone settled the order); when kappa, computed as in
:func:`apps.preferences.selectors.consistency`, is below it, the session records the number of
judgements so far in ``pruning_stopped_at``. From then on the scheduler is replayed only up to
that point and every pair not yet asked is asked (stored with phase "audit", in an order fixed by
the session's seed); the manager page shows a warning. Those answers are not checked against the
closure (``contradicts`` stays False): once pruning stopped, the annotator's consistency is
measured by transitivity kappa over the now complete triplets. Questions with no calibration
and no audit never get a kappa, so they never stop pruning. (The floor is first checked after
the first sort answer, so an annotator below it answers one sort question before pruning stops.)

When an annotator's ranking is complete the session is marked completed. If the study has no
per-item queue questions (a pure pairwise study), the annotator's assignments of the study are
then marked completed as well, so the progress bars of the other pages count the ranking;
otherwise the queue questions keep deciding when an assignment is complete.

Once a judgement commits, the annotator's part of the question's live quality statistics is
updated and the dashboard published, where ``QUALITY_UPDATES`` says
(:func:`analytics.quality_kinds.quality_judgements_process`).
"""

from __future__ import annotations

import secrets
import uuid

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from analytics.pipeline import quality_schedule
from apps.annotations.models import Assignment
from apps.annotations.values import QUEUE_KINDS
from apps.preferences.models import Judgement, PairSession, clean_pairwise_settings
from apps.preferences.selectors import PairState, consistency, pair_state
from apps.studies.models import Membership, Question, Study

NOT_PENDING = (
    "This pair is not the one waiting for your answer (it may have been answered in another "
    "tab or window). Ask for the next pair and answer that one."
)


def _check_can_judge(*, question: Question, annotator: AbstractBaseUser) -> None:
    if question.kind != Question.Kind.PAIRWISE:
        raise ValidationError({"question": f"{question.key!r} is not a pairwise question."})
    if not Membership.objects.filter(
        study_id=question.study_id, user=annotator, role=Membership.Role.ANNOTATOR
    ).exists():
        raise PermissionDenied("Only the study's annotators judge its pairs.")
    if question.study.status != Study.Status.RUNNING:
        raise ValidationError({"study": "The study is not running; judgements are closed."})


def _assigned_items(*, question: Question, annotator: AbstractBaseUser) -> list[int]:
    """The annotator's round-1 items of the question's study, in queue order."""
    return list(
        Assignment.objects.filter(study_id=question.study_id, annotator=annotator, round=1)
        .order_by("position", "id")
        .values_list("item_id", flat=True)
    )


def _session_for_update(*, question: Question, annotator: AbstractBaseUser) -> PairSession:
    """Get or create the annotator's session and lock it, safe against concurrent first visits.

    A new session freezes the annotator's round-1 items (queue order) and the question's
    settings, and draws a random seed. A session with nothing to compare yet (fewer than two
    items) takes up the items assigned since.
    """
    lookup = {"question": question, "annotator": annotator}
    if not PairSession.objects.filter(**lookup).exists():
        settings = clean_pairwise_settings(question.settings).as_dict()
        try:
            with transaction.atomic():
                PairSession.objects.create(
                    **lookup,
                    seed=secrets.randbelow(2**31),
                    items=_assigned_items(question=question, annotator=annotator),
                    settings=settings,
                )
        except IntegrityError:
            pass  # a concurrent first visit created it; both use that one
    session = PairSession.objects.select_for_update().get(**lookup)
    if len(session.items) < 2:  # no pair could have been judged: nothing to replay
        session.items = _assigned_items(question=question, annotator=annotator)
        session.save(update_fields=["items"])
    return session


@transaction.atomic
def pair_next(*, question: Question, annotator: AbstractBaseUser) -> PairState:
    """The annotator's state on a pairwise question, with the pair to judge next.

    Starts the session on the first call. Calling it again before answering returns the same
    pair. Raises ``PermissionDenied`` for anyone but the study's annotators and
    ``ValidationError`` for another kind of question or a study that is not running.
    """
    _check_can_judge(question=question, annotator=annotator)
    session = _session_for_update(question=question, annotator=annotator)
    return pair_state(session=session)


def _oriented(item_a: int, item_b: int, outcome: int) -> tuple[int, int, int]:
    """The same judgement with the smaller item id first (so both orientations compare equal)."""
    return (item_a, item_b, outcome) if item_a < item_b else (item_b, item_a, -outcome)


def _mark_completed(*, session: PairSession) -> None:
    """Complete the session; in a pure pairwise study, complete the annotator's assignments."""
    now = timezone.now()
    session.completed_at = now
    study = session.question.study
    if study.questions.filter(kind__in=QUEUE_KINDS).exists():
        return
    pairwise = study.questions.filter(kind=Question.Kind.PAIRWISE)
    finished = PairSession.objects.filter(
        question__in=pairwise, annotator_id=session.annotator_id, completed_at__isnull=False
    ).exclude(pk=session.pk)
    if finished.count() + 1 == pairwise.count():
        Assignment.objects.filter(
            study=study, annotator_id=session.annotator_id, completed_at__isnull=True
        ).update(completed_at=now)


@transaction.atomic
def judgement_record(
    *,
    question: Question,
    annotator: AbstractBaseUser,
    item_a: int,
    item_b: int,
    outcome: int,
    idempotency_key: uuid.UUID,
    time_spent_ms: int | None = None,
) -> tuple[Judgement, bool]:
    """Record the annotator's answer to their pending pair.

    Parameters
    ----------
    question, annotator
        A pairwise question and one of its study's annotators.
    item_a, item_b : int
        Item ids of the pending pair, in either orientation.
    outcome : {1, 0, -1}
        1: item_a is better, -1: item_b is better, 0: equal (not in strict mode).
    idempotency_key : uuid.UUID
        Made by the client once per answer: resending it returns the first judgement.
    time_spent_ms : int, optional
        Time spent on the pair.

    Returns
    -------
    judgement : Judgement
    created : bool
        False for a replay of an earlier key (nothing new stored).

    Raises
    ------
    ValidationError
        A pair that is not the pending one, a tie in strict mode, an outcome outside
        {1, 0, -1}, a reused key with a different answer, a finished ranking or a closed study.
    PermissionDenied
        For anyone but the study's annotators.
    """
    _check_can_judge(question=question, annotator=annotator)
    if outcome not in Judgement.Outcome.values or isinstance(outcome, bool):
        raise ValidationError({"outcome": "Give 1 (A is better), -1 (B is better) or 0 (equal)."})
    if time_spent_ms is not None and time_spent_ms < 0:
        raise ValidationError({"time_spent_ms": "Time spent cannot be negative."})
    session = _session_for_update(question=question, annotator=annotator)
    previous = Judgement.objects.filter(
        question=question, annotator=annotator, idempotency_key=idempotency_key
    ).first()
    if previous is not None:
        if _oriented(*previous.as_tuple()) != _oriented(item_a, item_b, outcome):
            raise ValidationError(
                {"idempotency_key": "This key was already used for a different answer."}
            )
        return previous, False
    state = pair_state(session=session)
    if state.pending is None:
        raise ValidationError("Your ranking is complete: there is no pair left to judge.")
    if {item_a, item_b} != set(state.pending):
        raise ValidationError(NOT_PENDING)
    if state.settings.strict and outcome == Judgement.Outcome.EQUAL:
        raise ValidationError(
            {"outcome": "This question asks for a strict preference: choose A or B."}
        )
    phase, contradicts = Judgement.Phase.AUDIT, False
    if state.pruning:
        before = len(state.scheduler.contradictions)
        state.scheduler.record(item_a, item_b, outcome)
        phase = Judgement.Phase(state.scheduler.judgements[-1].kind)
        contradicts = len(state.scheduler.contradictions) > before
    judgement = Judgement.objects.create(
        question=question,
        annotator=annotator,
        sequence=len(state.judgements) + 1,
        item_a_id=item_a,
        item_b_id=item_b,
        outcome=outcome,
        phase=phase,
        contradicts=contradicts,
        time_spent_ms=time_spent_ms,
        idempotency_key=idempotency_key,
    )
    judgements = [*state.judgements, judgement]
    if state.pruning and (
        phase != Judgement.Phase.CALIBRATION or state.scheduler.next_pair() is None
    ):
        kappa = consistency(judgements, strict=state.settings.strict).kappa
        if kappa < state.settings.kappa_floor:  # False for nan (no complete triplet yet)
            session.pruning_stopped_at = len(judgements)
    if session.pruning_stopped_at is None:
        done = state.scheduler.next_pair() is None
    else:  # pruning stopped (now or before): the exhaustive order decides
        done = pair_state(session=session).done
    if done and session.completed_at is None:
        _mark_completed(session=session)
    session.save(update_fields=["pruning_stopped_at", "completed_at"])
    quality_schedule(question_id=question.pk)
    return judgement, True
