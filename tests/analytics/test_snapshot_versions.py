"""A published figure never goes back in time (issue 25).

Seen under fault (PostgreSQL stopped 10 s): a push showed 667 ratings, the next 652, and the
dashboard stayed at 652 for twelve minutes with nothing pending and the stored state at 667:
an older publish, which had read the state before the newer one, finished last. The race is
made deterministic here by handing a publish a state read before the newest one.
"""

from __future__ import annotations

import copy
import uuid
from unittest import mock

import pytest

from analytics.models import QualitySnapshot, QualityState
from analytics.pipeline import quality_sweep
from analytics.publishing import quality_publish
from apps.annotations.models import Assignment
from apps.annotations.services import annotations_submit
from tests.factories import running_study

pytestmark = pytest.mark.django_db


def _answer(study, n: int, django_capture_on_commit_callbacks) -> None:
    question = study.questions.get()
    open_ = Assignment.objects.filter(study=study, round=1, completed_at__isnull=True)
    with django_capture_on_commit_callbacks(execute=True):
        for assignment in open_[:n]:
            annotations_submit(
                annotator=assignment.annotator,
                assignment=assignment,
                answers={question: "neutral"},
                idempotency_key=uuid.uuid4(),
            )


def _latest(question) -> QualitySnapshot:
    return QualitySnapshot.objects.filter(question=question).order_by("-created_at", "-id")[0]


def test_an_older_publish_finishing_last_does_not_replace_a_newer_one(
    django_capture_on_commit_callbacks,
):
    study, _ = running_study(n_items=6, n_annotators=3)
    question = study.questions.get()
    _answer(study, 6, django_capture_on_commit_callbacks)
    older = copy.deepcopy(QualityState.objects.get(question=question))  # read, then delayed
    _answer(study, 6, django_capture_on_commit_callbacks)  # a newer state, published
    newest = _latest(question)
    assert newest.n_annotations == 12
    read_before = mock.Mock(first=mock.Mock(return_value=older))
    with mock.patch.object(QualityState.objects, "filter", return_value=read_before):
        quality_publish(question_id=question.pk)  # the delayed publish of the older state
    assert _latest(question).n_annotations == 12  # not 6: it never goes back
    assert _latest(question).state_version == QualityState.objects.get(question=question).updated_at


def test_the_sweep_republishes_a_snapshot_behind_its_state(django_capture_on_commit_callbacks):
    """The state moved on but its publish failed (the database went away mid-publish): the
    sweep finds the snapshot behind the state and publishes again."""
    study, _ = running_study(n_items=6, n_annotators=3)
    question = study.questions.get()
    _answer(study, 6, django_capture_on_commit_callbacks)
    state = QualityState.objects.get(question=question)
    QualitySnapshot.objects.filter(question=question).update(
        n_annotations=1, state_version=state.updated_at.replace(year=2000)
    )
    with django_capture_on_commit_callbacks(execute=True):
        quality_sweep()
    assert _latest(question).n_annotations == 6
    assert _latest(question).state_version == state.updated_at
