"""Every write of pairwise preferences: start a session, hand out the next pair, record answers.

Judgements are append-only, like annotations: a client-generated idempotency key makes retries,
double clicks and second tabs harmless. A request brings the annotator's scheduler up to the
stored judgements (:func:`apps.preferences.selectors.pair_state`) outside any transaction, so
that no request holds a lock, or on SQLite the database's write lock, while it computes. An
answer is checked against that state and recorded into the scheduler, then stored in a short
transaction that locks the annotator's :class:`PairSession` row (``select_for_update``) and
first checks that no judgement was stored since the state was read; if one was, the request
starts over from the new state. So two concurrent requests of one annotator see one pending
pair and store one answer to it, and the locked section costs a few queries, whatever the
number of items or judgements.

Pruning stops for an annotator whose transitivity kappa falls below the question's
``kappa_floor``. The floor is checked after every answer once calibration is over (after each
sort or audit answer, or when calibration alone settled the order); when kappa, computed as in
:func:`apps.preferences.selectors.consistency` (from the counts the scheduler keeps), is below
it, the session records the number of judgements so far in ``pruning_stopped_at``. From then
on every pair not yet asked is asked (stored with phase "audit", in an order fixed by the
session's seed, :meth:`~apps.preferences.scheduling.PairScheduler.stop_pruning`); the manager
page shows a warning. Those answers are not checked against the closure (``contradicts``
stays False): once pruning stopped, the annotator's consistency is
measured by transitivity kappa over the now complete triplets. Questions with no calibration
and no audit never get a kappa, so they never stop pruning. (The floor is first checked after
the first sort answer, so an annotator below it answers one sort question before pruning stops.)

When an annotator's ranking is complete the session is marked completed. If the study has no
per-item queue questions (a pure pairwise study), the annotator's assignments of the study are
then marked completed as well, so the progress bars of the other pages count the ranking;
otherwise the queue questions keep deciding when an assignment is complete.

Once a judgement or an undo commits, the annotator's part of the question's live quality
statistics is updated and the dashboard published, where ``QUALITY_UPDATES`` says
(:func:`apps.preferences.quality.quality_judgements_process`).
"""

from __future__ import annotations

import datetime
import secrets
import uuid
from typing import NamedTuple

import numpy as np
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from analytics.config import quality_config
from analytics.pipeline import quality_schedule
from apps.annotations.models import Assignment
from apps.preferences.checks import check_plan
from apps.preferences.models import (
    Judgement,
    JudgementQuerySet,
    PairPool,
    PairSession,
    PairwiseSettings,
    Retraction,
    clean_pairwise_settings,
)
from apps.preferences.scheduling import batch_draw
from apps.preferences.selectors import (
    PairState,
    batch_evidence,
    batch_uncertainty,
    pair_state,
    question_scores,
    replay_key,
    replays,
    scheduler_figures,
)
from apps.recruitment.access import participant_check_answering
from apps.studies.kinds import queue_kinds
from apps.studies.models import Membership, Question, Study
from apps.studies.selectors import items_of_any, question_item_filter
from core.limits import time_spent_check
from core.locking import locked_get_or_create
from core.types import Account

NOT_PENDING = (
    "This pair is not the one waiting for your answer (it may have been answered in another "
    "tab or window). Ask for the next pair and answer that one."
)


def _check_can_judge(*, question: Question, annotator: Account) -> None:
    if question.kind != Question.Kind.PAIRWISE:
        raise ValidationError({"question": f"{question.key!r} is not a pairwise question."})
    if not Membership.objects.filter(
        study_id=question.study_id, user=annotator, role=Membership.Role.ANNOTATOR
    ).exists():
        raise PermissionDenied("Only the study's annotators judge its pairs.")
    if question.study.status != Study.Status.RUNNING:
        raise ValidationError({"study": "The study is not running; judgements are closed."})
    participant_check_answering(user=annotator, study=question.study)


def _assigned_items(*, question: Question, annotator: Account) -> list[int]:
    """The annotator's round-1 items of the question's study that the question applies to
    (its scope: no sentence is compared with an audio clip), in queue order."""
    return list(
        Assignment.objects.filter(
            question_item_filter(question, prefix="item__"),
            study_id=question.study_id,
            annotator=annotator,
            round=1,
        )
        .order_by("position", "id")
        .values_list("item_id", flat=True)
    )


class _Draw(NamedTuple):
    """The items a session ranks and, for a batch, the :attr:`PairPool.draws` read before the
    evidence it was drawn from (None: all the annotator's items, nothing drawn)."""

    items: list[int]
    drawn: int | None


def _session_items(
    *, question: Question, annotator: Account, settings: PairwiseSettings, seed: int
) -> _Draw:
    """The items a session ranks: the annotator's round-1 items, or a batch of them.

    The count of batches stored is read before the evidence, so that :func:`_draw_current`
    can tell whether a batch was stored after this draw read what it drew from.
    """
    items = _assigned_items(question=question, annotator=annotator)
    if not 0 < settings.batch_size < len(items):
        return _Draw(items, None)
    drawn = PairPool.objects.filter(question=question).values_list("draws", flat=True).first()
    coverage, comparisons = batch_evidence(question=question)
    batch = batch_draw(
        items,
        size=settings.batch_size,
        coverage=coverage,
        uncertainty=batch_uncertainty(question=question, comparisons=comparisons),
        rng=np.random.default_rng(seed),
    )
    return _Draw(batch, drawn or 0)


def _pool_for_update(question: Question) -> PairPool:
    """The question's :class:`PairPool` row, created if missing, locked until the
    transaction ends."""
    return locked_get_or_create(PairPool, question=question)


def _draw_current(*, question: Question, draw: _Draw) -> bool:
    """In the transaction that stores ``draw``, after :func:`_pool_for_update`: whether no
    batch was stored since it read its evidence (then it counts as one more)."""
    if draw.drawn is None:
        return True
    pool = _pool_for_update(question)
    if pool.draws != draw.drawn:
        return False
    PairPool.objects.filter(pk=pool.pk).update(draws=F("draws") + 1)
    return True


def _session(*, question: Question, annotator: Account, seed: int | None = None) -> PairSession:
    """Get or create the annotator's session, safe against concurrent first visits.

    A new session freezes the annotator's round-1 items (queue order), or a batch of them
    when the question has a ``batch_size`` (:func:`~apps.preferences.scheduling.batch_draw`),
    and the question's settings, and draws a random seed (``seed`` instead: a reproducible
    session, as the demo wants). The items are read only when needed (they may be 100,000
    ids).

    A batch is drawn outside any transaction, then stored in a short one that locks the
    question's :class:`PairPool` row and checks that no other batch was stored since the
    draw read its evidence; if one was, the batch is drawn again from the new evidence. So
    batches drawn at the same moment overlap no more than batches drawn one after the other,
    and a second tab of the same annotator finds the session the first stored and uses it
    (the draw is idempotent per annotator: one session, one batch).
    """
    lookup = {"question": question, "annotator": annotator}
    try:
        return PairSession.objects.defer("items").get(**lookup)
    except PairSession.DoesNotExist:
        pass
    settings = clean_pairwise_settings(question.settings)
    seed = secrets.randbelow(2**31) if seed is None else seed
    stored = False
    while not stored:
        draw = _session_items(question=question, annotator=annotator, settings=settings, seed=seed)
        try:
            with transaction.atomic():
                if draw.drawn is not None:
                    _pool_for_update(question)  # first, so that the check below is current
                if PairSession.objects.filter(**lookup).exists():
                    break  # a concurrent first visit stored it; both use that one
                stored = _draw_current(question=question, draw=draw)  # else: draw again
                if stored:
                    PairSession.objects.create(
                        **lookup, seed=seed, items=draw.items, settings=settings.as_dict()
                    )
        except IntegrityError:
            break  # a concurrent first visit created it; both use that one
    return PairSession.objects.defer("items").get(**lookup)


def _session_take_up(
    *,
    question: Question,
    annotator: Account,
    session: PairSession,
    settings: PairwiseSettings,
    placed: int,
) -> bool:
    """Give a session with fewer than two items (``placed``) the items assigned since, a
    batch stored as :func:`_session` stores one; True if its items changed."""
    while True:
        draw = _session_items(
            question=question, annotator=annotator, settings=settings, seed=session.seed
        )
        if len(draw.items) <= placed:
            return False
        with transaction.atomic():
            if draw.drawn is not None:
                _pool_for_update(question)
            stored = PairSession.objects.select_for_update().only("items").get(pk=session.pk)
            if stored.items != session.items:  # another request took them up meanwhile
                session.items = stored.items
                return True
            if _draw_current(question=question, draw=draw):
                PairSession.objects.filter(pk=session.pk).update(items=draw.items)
                session.items = draw.items
                return True
        # another batch was stored meanwhile: draw again


def _refit_due(*, fitted: tuple[int, datetime.datetime | None] | None, kept: int) -> bool:
    """Whether the stored pooled fit (judgements it rests on, when) is due for a refit: never
    fitted, resting on fewer than half the judgements kept now (so early fits, cheap and soon
    outgrown, come at 1, 2, 4, ... judgements), or older than ``QUALITY_INTERVAL_SECONDS``
    (when positive) with judgements added since."""
    n_fitted, fitted_at = fitted or (0, None)
    if fitted_at is None:
        return kept > 0
    if kept >= 2 * n_fitted:
        return kept > n_fitted
    seconds = quality_config().interval_seconds
    age = timezone.now() - fitted_at
    return seconds > 0 and age >= datetime.timedelta(seconds=seconds) and kept != n_fitted


def pair_pool_refit(*, question: Question, force: bool = False) -> bool:
    """Store the question's pooled Bradley-Terry standard errors for its next batch draws.

    The fit is the results page's (:func:`~apps.preferences.selectors.question_scores`:
    every annotator's judgements kept, weighted by their reliability); its item ids and
    standard errors go into the question's :class:`PairPool`, from which
    :func:`~apps.preferences.selectors.batch_uncertainty` reads them. Only for questions with
    a ``batch_size``; when due (:func:`_refit_due`) or ``force``. Returns whether it refitted.
    Runs off the request path (:func:`pair_pool_after_update`); costs the fit, O(items +
    judgements) (about 6 s at 100,000 items x 500,000 judgements, ``benchmarks/bt_scale``).
    """
    try:
        batched = clean_pairwise_settings(question.settings).batch_size > 0
    except ValidationError:
        return False
    if not batched:
        return False
    kept = Judgement.objects.filter(question=question).kept().count()
    fitted = (
        PairPool.objects.filter(question=question).values_list("n_judgements", "fitted_at").first()
    )
    if not (force or _refit_due(fitted=fitted, kept=kept)):
        return False
    scores = question_scores(question=question)
    items = np.array([row.item.pk for row in scores.rows], dtype=np.int64)
    se = np.array([row.se for row in scores.rows], dtype=np.float64)
    with transaction.atomic():
        pool = _pool_for_update(question)
        PairPool.objects.filter(pk=pool.pk).update(
            items=items.tobytes(),
            se=se.tobytes(),
            n_judgements=scores.n_judgements,
            alpha=scores.alpha,
            fitted_at=timezone.now(),
        )
    return True


def pair_pool_after_update(question_id: int) -> None:
    """The quality pipeline's hook (:data:`analytics.pipeline.AFTER_UPDATE_HOOKS`, registered
    in :meth:`apps.preferences.apps.PreferencesConfig.ready`): refit a batched pairwise
    question's stored pooled ranking when due."""
    question = Question.objects.filter(pk=question_id, kind=Question.Kind.PAIRWISE).first()
    if question is not None:
        pair_pool_refit(question=question)


def _state(*, question: Question, annotator: Account, keep: bool = True) -> PairState:
    """The annotator's state, outside any transaction (see the module docstring), with a
    recruited participant's hidden attention checks (:mod:`apps.preferences.checks`).

    A session with nothing to compare yet (fewer than two items, so no judgement to replay)
    first takes up the items assigned since (:func:`_session_take_up`).
    """
    session = _session(question=question, annotator=annotator)
    plan = check_plan(question=question, annotator=annotator)
    state = pair_state(session=session, keep=keep, plan=plan)
    if len(state.scheduler.items) < 2:
        placed = len(state.scheduler.items)
        if _session_take_up(
            question=question,
            annotator=annotator,
            session=session,
            settings=state.settings,
            placed=placed,
        ):
            state = pair_state(session=session, keep=keep, plan=plan)
    return state


def pair_session_start(*, question: Question, annotator: Account, seed: int) -> None:
    """Start the annotator's session with a given seed (a reproducible schedule: the demo).

    Does nothing when the session exists. Checks access as :func:`pair_next` does.
    """
    _check_can_judge(question=question, annotator=annotator)
    _session(question=question, annotator=annotator, seed=seed)


def pair_next(*, question: Question, annotator: Account) -> PairState:
    """The annotator's state on a pairwise question, with the pair to judge next.

    Starts the session on the first call. Calling it again before answering returns the same
    pair. Raises ``PermissionDenied`` for anyone but the study's annotators and
    ``ValidationError`` for another kind of question or a study that is not running. Runs in no
    transaction (a read, apart from the first visit's insert); costs as
    :func:`~apps.preferences.selectors.pair_state`.
    """
    _check_can_judge(question=question, annotator=annotator)
    return _state(question=question, annotator=annotator)


def _oriented(item_a: int, item_b: int, outcome: int) -> tuple[int, int, int]:
    """The same judgement with the smaller item id first (so both orientations compare equal)."""
    return (item_a, item_b, outcome) if item_a < item_b else (item_b, item_a, -outcome)


def _mark_completed(*, session: PairSession) -> None:
    """Complete the session; in a pure pairwise study, complete the annotator's assignments,
    unless every answer was "equal": ties end every insertion at once, so answering "equal"
    throughout finished a 49-item ranking in 48 answers (an honest one took 83), and a
    recruited package would earn its completion code by ties alone. Such a package stays
    open (the participant times out with the screen-out code) and the dashboard flags the
    annotator on the share of "equal" answers."""
    now = timezone.now()
    session.completed_at = now
    study = session.question.study
    queued = list(study.questions.filter(kind__in=queue_kinds()))
    in_queue = items_of_any(queued, prefix="item__")
    if queued and not in_queue:  # a queue question asks about every item: it completes them
        return
    answers = Judgement.objects.filter(
        question_id=session.question_id, annotator_id=session.annotator_id
    )
    if not answers.kept().data().exclude(outcome=0).exists():
        return
    pairwise = study.questions.filter(kind=Question.Kind.PAIRWISE)
    finished = PairSession.objects.filter(
        question__in=pairwise, annotator_id=session.annotator_id, completed_at__isnull=False
    ).exclude(pk=session.pk)
    if finished.count() + 1 == pairwise.count():
        # the items no queue question applies to (all, in a study without queue questions)
        open_ = Assignment.objects.filter(
            study=study, annotator_id=session.annotator_id, completed_at__isnull=True
        )
        (open_.exclude(in_queue) if queued else open_).update(completed_at=now)


def judgement_record(
    *,
    question: Question,
    annotator: Account,
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

    Notes
    -----
    The state is computed outside any transaction; the transaction that stores the judgement
    only checks that nothing was stored since, inserts and updates the session (see the module
    docstring). Costs as :func:`~apps.preferences.selectors.pair_state`, plus transitivity
    kappa over the annotator's judgements while pruning.
    """
    _check_can_judge(question=question, annotator=annotator)
    if outcome not in Judgement.Outcome.values or isinstance(outcome, bool):
        raise ValidationError({"outcome": "Give 1 (A is better), -1 (B is better) or 0 (equal)."})
    time_spent_check(time_spent_ms)
    while True:
        previous = Judgement.objects.filter(
            question=question, annotator=annotator, idempotency_key=idempotency_key
        ).first()
        if previous is not None:
            if _oriented(*previous.as_tuple()) != _oriented(item_a, item_b, outcome):
                raise ValidationError(
                    {"idempotency_key": "This key was already used for a different answer."}
                )
            return previous, False
        state = _state(question=question, annotator=annotator, keep=False)
        stored = _judgement_store(
            state=state,
            item_a=item_a,
            item_b=item_b,
            outcome=outcome,
            idempotency_key=idempotency_key,
            time_spent_ms=time_spent_ms,
        )
        if stored is not None:
            return stored, True
        # Another request stored a judgement since the state was read: start over from there.


def _kept_history(stored: JudgementQuerySet) -> tuple[int, int | None]:
    """How many judgements are kept (not retracted), and the id of the latest."""
    kept = stored.kept()
    return kept.count(), kept.order_by("-sequence").values_list("id", flat=True).first()


def _history_of(state: PairState) -> tuple[int, int | None]:
    """:func:`_kept_history` as ``state`` read it (attention checks included)."""
    last = state.last_answer
    return state.answered, last.id if last else None


def _judgement_store(
    *,
    state: PairState,
    item_a: int,
    item_b: int,
    outcome: int,
    idempotency_key: uuid.UUID,
    time_spent_ms: int | None,
) -> Judgement | None:
    """Check the answer against ``state``, record it into the scheduler, then store it.

    The answer to an attention check (``state.check``) is stored with phase ``check`` and not
    recorded into the scheduler: its pair stays the pending one. Returns None, storing
    nothing, if a judgement was stored since ``state`` was read.
    """
    if state.pending is None:
        raise ValidationError("Your ranking is complete: there is no pair left to judge.")
    if {item_a, item_b} != set(state.pending):
        raise ValidationError(NOT_PENDING)
    if state.settings.strict and outcome == Judgement.Outcome.EQUAL:
        raise ValidationError(
            {"outcome": "This question asks for a strict preference: choose A or B."}
        )
    scheduler, session = state.scheduler, state.session
    before = len(scheduler.contradictions)
    if state.check:
        phase = Judgement.Phase.CHECK
    else:
        scheduler.record(item_a, item_b, outcome)
        phase = Judgement.Phase(scheduler.judgements[-1].kind)
    judgement = Judgement(
        question_id=session.question_id,
        annotator_id=session.annotator_id,
        item_a_id=item_a,
        item_b_id=item_b,
        outcome=outcome,
        phase=phase,
        contradicts=len(scheduler.contradictions) > before,
        time_spent_ms=time_spent_ms,
        side_a=Judgement.Side.A if item_a == state.pending[0] else Judgement.Side.B,
        idempotency_key=idempotency_key,
    )
    stopped_at = session.pruning_stopped_at
    # kappa as consistency() computes it; a check's answer is no data
    if not state.check and scheduler.check_floor(state.settings.kappa_floor):
        stopped_at = len(scheduler.judgements)
    done = scheduler.next_pair() is None
    with transaction.atomic():
        locked = PairSession.objects.select_for_update().defer("items").get(pk=session.pk)
        stored = Judgement.objects.filter(
            question_id=session.question_id, annotator_id=session.annotator_id
        )
        if _kept_history(stored) != _history_of(state) or locked.pruning_stopped_at != (
            session.pruning_stopped_at
        ):
            return None
        judgement.sequence = (stored.aggregate(last=Max("sequence"))["last"] or 0) + 1
        judgement.save(force_insert=True)
        locked.pruning_stopped_at = stopped_at
        if done and locked.completed_at is None:
            _mark_completed(session=locked)
        fields = ["pruning_stopped_at", "completed_at"]
        if not state.check:  # a check's answer leaves the scheduler, and its figures, alone
            locked.figures = scheduler_figures(
                scheduler, kappa_floor=state.settings.kappa_floor, last_id=judgement.pk, done=done
            )._asdict()
            fields.append("figures")
        locked.save(update_fields=fields)
        quality_schedule(question_id=session.question_id)
        key = replay_key(locked)
        transaction.on_commit(lambda: replays.keep(key, scheduler))
    return judgement


def judgement_retract(
    *, question: Question, annotator: Account, judgement_id: int | None = None
) -> Judgement:
    """Undo the annotator's latest judgement: store a :class:`Retraction` of it.

    The judgement stays (append-only); the scheduler replays the judgements kept, so the pair
    of the undone answer is pending again. Undo again to go further back.

    Parameters
    ----------
    question, annotator
        A pairwise question and one of its study's annotators.
    judgement_id : int, optional
        The judgement to undo, which must be the latest one kept: a retried request naming a
        judgement already retracted returns it and retracts nothing more (so a double click
        undoes one answer). Default: whatever is latest.

    Returns
    -------
    Judgement
        The retracted judgement.

    Raises
    ------
    ValidationError
        Nothing to undo, a judgement that is not the latest kept, or a closed study.
    PermissionDenied
        For anyone but the study's annotators.

    Notes
    -----
    When the undone answer was the one that stopped pruning (``pruning_stopped_at`` beyond
    the judgements kept), the stop is undone too, and a completed session is open again (in a
    pure pairwise study, with the annotator's assignments it completed).
    """
    _check_can_judge(question=question, annotator=annotator)
    with transaction.atomic():
        session = (
            PairSession.objects.select_for_update()
            .defer("items")
            .filter(question=question, annotator=annotator)
            .first()
        )
        stored = Judgement.objects.filter(question=question, annotator=annotator)
        if judgement_id is not None:
            named = stored.filter(pk=judgement_id).select_related("retraction").first()
            if named is None:
                raise ValidationError("No such judgement of yours on this question.")
            if hasattr(named, "retraction"):
                return named
        latest = stored.kept().order_by("-sequence").first()
        if session is None or latest is None:
            raise ValidationError("Nothing to undo: you have no judgement left on this question.")
        if judgement_id is not None and latest.pk != judgement_id:
            raise ValidationError("Only your latest judgement can be undone.")
        Retraction.objects.create(judgement=latest)
        kept = stored.kept().data().count()  # pruning_stopped_at counts the scheduler's
        if session.pruning_stopped_at is not None and session.pruning_stopped_at > kept:
            session.pruning_stopped_at = None
        if session.completed_at is not None:
            Assignment.objects.filter(
                study_id=question.study_id,
                annotator=annotator,
                completed_at=session.completed_at,
            ).update(completed_at=None)
            session.completed_at = None
        session.figures = None  # the next answer stores them; until then pages replay
        session.save(update_fields=["pruning_stopped_at", "completed_at", "figures"])
        quality_schedule(question_id=question.pk)
    return latest
