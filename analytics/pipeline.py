"""Keep each question's quality state current as answers arrive: dispatch, locking, sweep.

Flow (Zulip-style check -> do -> notify): the submit transaction marks the answer as pending
(categorical and continuous: ``Annotation.analysis_pending``, an outbox inside the row, so
nothing is lost if the process dies; pairwise: the judgement sequence the state lags behind)
and :func:`quality_schedule` asks for processing once the transaction has committed. Processing
is the question kind's ``process`` (:class:`apps.studies.kinds.QuestionKind`): it locks the
question's :class:`~analytics.models.QualityState` row (:func:`state_for_update`), takes every
pending answer at once (a burst becomes one batch), recomputes only the touched items'
contribution and stores the new statistics. Repeated or concurrent wake-ups find nothing left to
do, so several workers never count an answer twice. This module names no kind.

``QUALITY_UPDATES`` (:mod:`analytics.config`): ``"inline"`` processes in the committing thread
right after the commit (deterministic: the tests use it); ``"thread"`` (a single process such
as ``runserver``) hands the question to one background thread of the process
(:mod:`analytics.background`), which also runs :func:`quality_sweep` every
``QUALITY_SWEEP_INTERVAL`` seconds; ``"worker"`` (``serve`` and ``prod``) does nothing after
the commit: the outbox is the message. Quality worker processes (``manage.py quality_worker``,
:mod:`analytics.worker`) run :func:`quality_sweep` every ``QUALITY_WORKER_INTERVAL`` seconds
and process, in their own process, every question with answers waiting: one update per
question per pass however many answers arrived, and the web processes never spend a cycle on
it. A worker killed mid-batch rolls back; the answers stay pending for the next pass.

Other heavy work derived from a question's answers (evaluating the model registry's runs) uses
the same modes through :func:`job_schedule`: an app registers a named job in :data:`JOBS` and,
for its catch-up (the worker's only way to learn of it), a callable in :data:`SWEEP_HOOKS`;
the job is called with an id after the commit, in the committing thread, on the background
thread (queue = the job's name) or by the worker's next pass.

Once a batch or a rebuild has committed, :func:`analytics.publishing.quality_publish` derives
the indicators, snapshots and flags them and pushes ``dashboard.update`` (from the worker in
worker mode: the channel layer carries it to the web processes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

from analytics import background
from analytics.config import quality_config
from analytics.models import QualityState
from analytics.publishing import quality_publish
from apps.annotations.models import Annotation
from apps.studies.kinds import question_kind, question_kinds
from apps.studies.models import Question
from core.locking import locked_get_or_create

# Called with a question id after its quality state has changed and been published; apps that
# derive figures from a question's answers (the model registry) register here in ready().
AFTER_UPDATE_HOOKS: list[Callable[[int], None]] = []
# Named off-request jobs (see job_schedule), registered by apps in ready(): name -> callable
# taking one id. Each must be idempotent and safe to run concurrently (its own claim or lock).
JOBS: dict[str, Callable[[int], object]] = {}
# Called by quality_sweep after its own dispatches: apps re-dispatch their jobs left waiting.
SWEEP_HOOKS: list[Callable[[], object]] = []
logger = logging.getLogger(__name__)


def quality_schedule(*, question_id: int) -> None:
    """Ask for the question's quality state to be brought up to date after this commit (in
    ``worker`` mode the pending answers are the request: the worker's next pass reads them)."""
    if quality_config().updates != "worker":
        transaction.on_commit(lambda: _dispatch(question_id), robust=True)


def _dispatch(question_id: int) -> None:
    if not Question.objects.filter(pk=question_id, kind__in=list(question_kinds())).exists():
        return
    if quality_config().updates == "thread":
        background.enqueue(question_id, lambda qid: quality_process(question_id=qid))
    else:
        quality_process(question_id=question_id)


def job_schedule(*, job: str, key: int) -> None:
    """Run the registered job ``job`` for ``key`` once this transaction commits, where
    ``QUALITY_UPDATES`` says: inline, on the background thread, or (``worker``) on the
    worker's next pass, whose sweep hooks find it."""
    if quality_config().updates != "worker":
        transaction.on_commit(lambda: _dispatch_job(job, key), robust=True)


def _dispatch_job(job: str, key: int) -> None:
    if quality_config().updates == "thread":
        background.enqueue(key, JOBS[job], queue=job)
    else:
        JOBS[job](key)


def answers_waiting(*, question_id: int, kind: str) -> int:
    """How many answers of the question its quality state has not applied yet."""
    counted = question_kind(kind).waiting(question_id)
    if counted is not None:
        return counted
    return Annotation.objects.filter(question_id=question_id, analysis_pending=True).count()


def quality_sweep(*, hooks: bool = True) -> list[int]:
    """Dispatch every question whose state lags its answers; return their ids. Then, with
    ``hooks``, run the apps' catch-up hooks (:data:`SWEEP_HOOKS`).

    The quality worker's pass (:mod:`analytics.worker`, which processes in the pass itself) and,
    in ``thread`` mode, the catch-up for whatever a dispatch after commit could not do (a
    process that died): :mod:`analytics.background` runs it at start and then every
    ``QUALITY_SWEEP_INTERVAL`` seconds. The outbox kinds cost one query on the partial index of
    pending annotations; the kinds that count their own backlog (``QuestionKind.waiting``) are
    asked question by question.
    """
    kinds = question_kinds()
    # The pending rows' questions, deduplicated here: with a join to the questions or a
    # DISTINCT, SQLite's planner read them through a question index, that is every annotation
    # on every tick, once an import had given it statistics; this reads the partial index of
    # pending rows only.
    pending = set(
        Annotation.objects.filter(analysis_pending=True)
        .order_by()
        .values_list("question_id", flat=True)
    )
    questions = Question.objects.filter(kind__in=list(kinds)).order_by().values_list("pk", "kind")
    lagging = set()
    for pk, kind in questions:
        if pk in pending or kinds[kind].waiting(pk):
            lagging.add(pk)
    for question_id in sorted(lagging):
        _dispatch(question_id)
    for hook in SWEEP_HOOKS if hooks else ():
        try:
            hook()
        except Exception:  # one app's catch-up must not stop the quality sweep
            logger.exception("sweep hook %r failed", hook)
    return sorted(lagging)


def quality_process(*, question_id: int) -> int:
    """Apply the question's pending answers with its kind's ``process``; return how many."""
    kind = Question.objects.filter(pk=question_id).values_list("kind", flat=True).first()
    spec = question_kinds().get(kind or "")
    return spec.process(question_id=question_id) if spec else 0


def quality_rebuild(*, question_id: int) -> Any:
    """Recompute the question's state from scratch with its kind's ``rebuild`` (which
    publishes after the commit); returns what the kind returns (categorical: its statistics)."""
    kind = Question.objects.values_list("kind", flat=True).get(pk=question_id)
    return question_kind(kind).rebuild(question_id=question_id)


def state_for_update(question_id: int) -> QualityState:
    """The question's state row, created if missing, locked until the transaction ends."""
    return locked_get_or_create(QualityState, question_id=question_id)


def annotator_index(state: QualityState, *extra: int) -> dict[int, int]:
    """The state's annotator axis (user id -> row), extended by ``extra`` newcomers."""
    index = {a: i for i, a in enumerate(state.annotator_ids)}
    for user_id in extra:
        index.setdefault(user_id, len(index))
    return index


def after_update(question_id: int, **publish_options: Any) -> None:
    """Once a new state has committed: publish it, then let registered apps follow."""
    quality_publish(question_id=question_id, **publish_options)
    for hook in AFTER_UPDATE_HOOKS:
        hook(question_id)


def publish_after_commit(question_id: int, **publish_options: Any) -> None:
    """Publish the question's new state once the current transaction commits (the kinds call
    it at the end of ``process`` and ``rebuild``). ``publish_options``: ``item_ids`` touched,
    ``rebuild``."""
    transaction.on_commit(lambda: after_update(question_id, **publish_options), robust=True)
