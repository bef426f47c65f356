"""The sweep (the quality worker's pass, the thread mode's catch-up), the sweeper thread and
the dashboard notice of answers waiting.

In ``worker`` mode a commit leaves its answers waiting in the outbox for the worker's next pass
(here: no worker runs until the test calls the sweep).
"""

from __future__ import annotations

import time
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from analytics import background
from analytics.pipeline import answers_waiting, quality_sweep
from apps.annotations.models import Annotation, Assignment
from apps.annotations.services import annotations_submit
from apps.categorical.quality import quality_stats
from apps.preferences.models import Judgement
from tests.apps.preferences.conftest import answer_all, make_pairwise_study
from tests.factories import running_study

pytestmark = pytest.mark.django_db


def _answer_all(study) -> int:
    question = study.questions.get()
    assignments = Assignment.objects.filter(study=study, round=1)
    for assignment in assignments:
        annotations_submit(
            annotator=assignment.annotator,
            assignment=assignment,
            answers={question: "neutral"},
            idempotency_key=uuid.uuid4(),
        )
    return len(assignments)


PENDING_INDEX_SCAN = "SCAN annotations_annotation USING INDEX annotation_analysis_pending"


def _annotation_reads(queries: CaptureQueriesContext) -> list[str]:
    """SQLite's plan lines of the captured queries that read the annotations table."""
    plans = []
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            cursor.execute(f"EXPLAIN QUERY PLAN {query['sql']}")
            plans += [row[-1] for row in cursor.fetchall()]
    return [line for line in plans if "annotations_annotation" in line]


@pytest.fixture
def left_waiting(settings, django_capture_on_commit_callbacks):
    """A study whose answers were dispatched to a channel no worker reads."""
    settings.QUALITY_UPDATES = "worker"
    study, _ = running_study(n_items=4, n_annotators=3)
    with django_capture_on_commit_callbacks(execute=True):
        n = _answer_all(study)
    settings.QUALITY_UPDATES = "inline"  # from here on, what the sweep dispatches is processed
    return study, n


def test_sweep_applies_answers_no_worker_took(left_waiting, django_capture_on_commit_callbacks):
    study, n = left_waiting
    question = study.questions.get()
    assert answers_waiting(question_id=question.pk, kind=question.kind) == n == 12
    with django_capture_on_commit_callbacks(execute=True):
        assert quality_sweep() == [question.pk]
    assert answers_waiting(question_id=question.pk, kind=question.kind) == 0
    _, incremental = quality_stats(question_id=question.pk)
    _, fresh = quality_stats(question_id=question.pk, fresh=True)
    assert incremental.equals(fresh)
    assert quality_sweep() == []  # nothing left: the next tick costs one indexed query


def test_sweep_catches_up_pairwise_judgements(settings, django_capture_on_commit_callbacks):
    settings.QUALITY_UPDATES = "worker"
    setup = make_pairwise_study(n_items=4, settings={"calibration_triplets": 4})
    with django_capture_on_commit_callbacks(execute=True):
        answer_all(setup.question, setup.annotators[0], lambda a, b: 1)
    made = Judgement.objects.filter(question=setup.question).count()
    assert made > 0
    assert answers_waiting(question_id=setup.question.pk, kind=setup.question.kind) == made
    settings.QUALITY_UPDATES = "inline"
    with django_capture_on_commit_callbacks(execute=True):
        assert quality_sweep() == [setup.question.pk]
    assert answers_waiting(question_id=setup.question.pk, kind=setup.question.kind) == 0
    assert quality_sweep() == []


def test_in_worker_mode_a_submit_leaves_its_answer_pending_and_schedules_nothing(
    settings, django_capture_on_commit_callbacks
):
    """The web process does no quality work after the commit, not even a message: the
    pending answer is the worker's queue."""
    settings.QUALITY_UPDATES = "worker"
    study, _ = running_study(n_items=2, n_annotators=1)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert _answer_all(study) == 2
    assert not [c for c in callbacks if "pipeline" in getattr(c, "__module__", "")]
    assert Annotation.objects.filter(analysis_pending=True).count() == 2


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # SystemExit
def test_sweeper_runs_at_start_then_every_interval(monkeypatch):
    monkeypatch.setattr(background, "_sweeper", None)
    ticks: list[float] = []

    def sweep() -> None:
        ticks.append(time.monotonic())
        if len(ticks) == 3:
            raise SystemExit  # ends the sweeper thread, so that it does not outlive the test

    assert background.start_sweeper(sweep, interval=0.05)
    assert not background.start_sweeper(sweep, interval=0.05)  # one per process
    background._sweeper.join(timeout=10)
    assert len(ticks) == 3
    assert ticks[2] - ticks[0] >= 0.1
    monkeypatch.setattr(background, "_sweeper", None)
    assert not background.start_sweeper(sweep, interval=0)


def test_dashboard_says_how_many_answers_wait(
    left_waiting, client, django_capture_on_commit_callbacks
):
    study, n = left_waiting
    client.force_login(study.created_by)
    url = reverse("analytics:dashboard", args=[study.pk])
    html = client.get(url).content.decode()
    assert f"{n} answers waiting for analysis" in html
    assert "No figures yet" not in html  # not an empty study: a study nobody has analysed yet
    polled = client.get(f"{url}?part=summary", headers={"HX-Request": "true"}).content.decode()
    assert polled.lstrip().startswith('<section class="card quality-summary" id="quality-summary"')
    assert f"{n} answers waiting for analysis" in polled
    with django_capture_on_commit_callbacks(execute=True):
        quality_sweep()
    polled = client.get(f"{url}?part=summary", headers={"HX-Request": "true"}).content.decode()
    assert "waiting for analysis" not in polled
    assert "hx-trigger" not in polled  # polling stops once nothing waits


def test_an_idle_sweep_reads_only_the_index_of_pending_answers(
    left_waiting, django_capture_on_commit_callbacks
):
    """The next tick costs one read of the partial index of pending rows, however many
    answers the study holds (plans checked on SQLite, like tests/query_plans.py)."""
    with django_capture_on_commit_callbacks(execute=True):
        quality_sweep()
    with CaptureQueriesContext(connection) as queries:
        assert quality_sweep() == []
    if connection.vendor != "sqlite":
        return
    assert _annotation_reads(queries) == [PENDING_INDEX_SCAN]


def test_after_a_bulk_import_the_idle_sweep_still_reads_only_the_pending_index(
    db, django_capture_on_commit_callbacks
):
    """The import refreshes SQLite's planner statistics; taken while every imported answer was
    still pending, they made the sweep scan every annotation on each tick (seen in CI when an
    import ran earlier in the same test database)."""
    from apps.annotations.importing import FinishedAnnotation, annotations_import_finished

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's query plans")
    study, annotators = running_study(n_items=30, n_annotators=3)
    items = list(study.items.values_list("external_id", flat=True))
    records = [
        FinishedAnnotation(item, user.username, "sentiment", "neutral")
        for user in annotators
        for item in items
    ]
    with django_capture_on_commit_callbacks(execute=True):
        annotations_import_finished(study=study, records=records)
    with CaptureQueriesContext(connection) as queries:
        assert quality_sweep() == []
    assert _annotation_reads(queries) == [PENDING_INDEX_SCAN]
