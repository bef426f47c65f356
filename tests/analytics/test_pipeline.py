"""The incremental quality state equals a rebuild from scratch, whatever the arrival order."""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
import pytest
from channels.layers import get_channel_layer
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.metrics.categorical import kappa_from_confusion, pairwise_kappa
from analytics.pipeline import UPDATE_CHANNEL, quality_schedule
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


@pytest.mark.postgres  # SQLite's in-memory test database locks tables across threads at once
@pytest.mark.django_db(transaction=True)
def test_thread_mode_brings_the_state_up_to_date_off_the_request_thread(settings):
    from analytics import background

    settings.QUALITY_UPDATES = "thread"
    study, annotators = running_study(n_items=4, n_annotators=2)
    question = study.questions.get()
    for user in annotators:
        for assignment in Assignment.objects.filter(annotator=user):
            annotations_submit(
                annotator=user,
                assignment=assignment,
                answers={question: "neutral"},
                idempotency_key=uuid.uuid4(),
            )
    assert background.idle(timeout=30)
    assert not Annotation.objects.filter(analysis_pending=True).exists()
    _, incremental = quality_stats(question_id=question.pk)
    _, fresh = quality_stats(question_id=question.pk, fresh=True)
    assert incremental.equals(fresh)
    assert incremental.confusion.sum() == 16  # 2 x 2 annotator pairs (diagonal too) x 4 items


@pytest.mark.django_db(transaction=True)  # code inside the loop reads on its own connection
def test_a_worker_dispatch_from_inside_a_running_event_loop_reaches_the_worker_channel(
    settings, monkeypatch
) -> None:
    """A commit hands the question to the quality workers from sync code that may run inside
    an event loop (a live server's thread, a browser test): the message must arrive, not fail
    in ``async_to_sync`` and be left to the next sweep."""
    settings.QUALITY_UPDATES = "worker"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # the ORM inside the loop's thread
    study, _ = running_study(n_items=2, n_annotators=2)
    question = study.questions.get()
    layer = get_channel_layer()

    async def commit_inside_a_loop() -> dict:
        with transaction.atomic():
            quality_schedule(question_id=question.pk)  # dispatched when this commits
        return await asyncio.wait_for(layer.receive(UPDATE_CHANNEL), timeout=10)

    message = asyncio.run(commit_inside_a_loop())
    assert message == {"type": "quality.process", "question_id": question.pk}
