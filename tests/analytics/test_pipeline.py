"""The incremental quality state equals a rebuild from scratch, whatever the arrival order."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.metrics.categorical import kappa_from_confusion, pairwise_kappa
from analytics.pipeline import quality_sweep
from analytics.worker import quality_worker_run
from apps.annotations.models import Annotation, Assignment
from apps.annotations.services import annotation_undo_last, annotations_submit
from apps.categorical.quality import quality_process_pending, quality_rebuild, quality_stats
from tests.factories import running_study

LABELS = ["negative", "neutral", "positive"]

actions = st.lists(
    st.tuples(
        st.integers(0, 3),  # annotator
        st.integers(0, 4),  # assignment index in that annotator's queue (round 1 and repeats)
        st.sampled_from([*LABELS, "undo"]),
    ),
    min_size=1,
    max_size=25,
)


@pytest.mark.django_db
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=actions)
def test_incremental_state_equals_rebuild(steps, django_db_blocker):
    study, annotators = running_study(n_items=4, n_annotators=4, repeat_rate=0.5)
    question = study.questions.get()
    queues = [
        list(Assignment.objects.filter(annotator=a).order_by("position", "round"))
        for a in annotators
    ]
    for who, index, label in steps:
        user = annotators[who]
        if label == "undo":
            annotation_undo_last(annotator=user, study=study, idempotency_key=uuid.uuid4())
            continue
        assignment = queues[who][index % len(queues[who])]
        annotations_submit(
            annotator=user,
            assignment=assignment,
            answers={question: label},
            idempotency_key=uuid.uuid4(),
            time_spent_ms=100 * (index + 1),
        )
    # inline mode processed every commit as it happened (tests run inside one transaction, so
    # on_commit callbacks don't fire: process what is pending, as a worker would)
    quality_process_pending(question_id=question.pk)
    assert not Annotation.objects.filter(analysis_pending=True).exists()
    _, incremental = quality_stats(question_id=question.pk)
    _, fresh = quality_stats(question_id=question.pk, fresh=True)
    assert incremental.equals(fresh)
    assert quality_rebuild(question_id=question.pk).equals(incremental)


@pytest.mark.django_db
def test_state_kappa_matches_the_metric_on_current_labels():
    study, annotators = running_study(n_items=6, n_annotators=3)
    question = study.questions.get()
    rng = np.random.default_rng(1)
    for user in annotators:
        for assignment in Assignment.objects.filter(annotator=user):
            annotations_submit(
                annotator=user,
                assignment=assignment,
                answers={question: LABELS[rng.integers(3)]},
                idempotency_key=uuid.uuid4(),
            )
    quality_process_pending(question_id=question.pk)
    state, stats = quality_stats(question_id=question.pk)
    ratings = np.full((3, 6), np.nan)
    items = {item: i for i, item in enumerate(study.items.values_list("id", flat=True))}
    for a in Annotation.objects.select_related("current_revision"):
        k = state.annotator_ids.index(a.annotator_id)
        ratings[k, items[a.item_id]] = LABELS.index(a.current_revision.value["label"])
    np.testing.assert_allclose(
        kappa_from_confusion(stats.confusion), pairwise_kappa(ratings), equal_nan=True
    )


def _answer_every_assignment(annotators, question) -> None:
    for user in annotators:
        for assignment in Assignment.objects.filter(annotator=user):
            annotations_submit(
                annotator=user,
                assignment=assignment,
                answers={question: "neutral"},
                idempotency_key=uuid.uuid4(),
            )


@pytest.mark.postgres  # SQLite's in-memory test database locks tables across threads at once
@pytest.mark.django_db(transaction=True)
def test_thread_mode_brings_the_state_up_to_date_off_the_request_thread(settings):
    from analytics import background

    settings.QUALITY_UPDATES = "thread"
    study, annotators = running_study(n_items=4, n_annotators=2)
    question = study.questions.get()
    _answer_every_assignment(annotators, question)
    assert background.idle(timeout=30)
    assert not Annotation.objects.filter(analysis_pending=True).exists()
    _, incremental = quality_stats(question_id=question.pk)
    _, fresh = quality_stats(question_id=question.pk, fresh=True)
    assert incremental.equals(fresh)
    assert incremental.confusion.sum() == 16  # 2 x 2 annotator pairs (diagonal too) x 4 items


@pytest.mark.django_db(transaction=True)  # the pass runs as served: no test transaction
def test_worker_mode_leaves_the_answers_to_the_worker_pass_which_coalesces_them(
    settings, monkeypatch
) -> None:
    """``QUALITY_UPDATES=worker`` (serve, prod): the web process does no quality work after a
    commit (not even a message); the worker's next pass applies every pending answer of the
    question in one update, equal to a rebuild."""
    settings.QUALITY_UPDATES = "worker"
    study, annotators = running_study(n_items=4, n_annotators=3)
    question = study.questions.get()
    processed: list[int] = []
    original = quality_process_pending
    monkeypatch.setattr(
        "apps.categorical.quality.quality_process_pending",
        lambda **kw: processed.append(kw["question_id"]) or original(**kw),
    )
    _answer_every_assignment(annotators, question)
    assert processed == []
    assert Annotation.objects.filter(analysis_pending=True).count() == 12
    settings.QUALITY_UPDATES = "inline"  # what `manage.py quality_worker` sets for itself
    assert quality_worker_run(interval=0, stop=threading.Event(), passes=2) == 2
    assert processed == [question.pk]  # twelve answers, one update; the second pass: none
    assert not Annotation.objects.filter(analysis_pending=True).exists()
    _, incremental = quality_stats(question_id=question.pk)
    _, fresh = quality_stats(question_id=question.pk, fresh=True)
    assert incremental.equals(fresh)


def test_a_worker_runs_the_apps_sweep_hooks_on_its_own_slower_clock(
    transactional_db, settings, monkeypatch
):  # the pass runs as served: no test transaction
    """The apps' catch-up hooks (queue orders, model runs and endpoints, forecasts, interval
    refreshes, snapshot republishing) cost 2.9 ms of CPU a pass, nine tenths of an idle
    pass: run on each of four passes a second, an idle worker spent 1.2 % of a core. A worker
    runs them on its first pass and then once every ``hook_interval`` seconds; the pending
    answers are still looked for on every pass."""
    settings.QUALITY_UPDATES = "inline"
    calls: list[float] = []
    monkeypatch.setattr("analytics.pipeline.SWEEP_HOOKS", [lambda: calls.append(1.0)])
    sweeps = []
    original = quality_sweep
    monkeypatch.setattr(
        "analytics.worker.quality_sweep", lambda **kw: sweeps.append(kw) or original(**kw)
    )
    assert quality_worker_run(interval=0, stop=threading.Event(), passes=3, hook_interval=60) == 3
    assert len(sweeps) == 3
    assert len(calls) == 1
    calls.clear()
    assert quality_worker_run(interval=0, stop=threading.Event(), passes=3, hook_interval=0) == 3
    assert len(calls) == 3
