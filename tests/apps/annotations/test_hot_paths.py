"""The annotator page's own path stays cheap: one htmx POST answers and returns the next item
in a bounded number of SQL queries, whatever the annotator's history, with no full scan."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.annotations.models import Assignment
from tests.apps.annotations.test_views import HTMX, answer, queue_url
from tests.factories import running_study
from tests.query_plans import full_scans, orm_built, sorted_reads

pytestmark = pytest.mark.django_db

# The session and its user, the study with the user's role, the ticket's assignment with what
# the answer check reads (study, recruitment, participation, membership), the write transaction
# (a savepoint in a test: insert the annotation, ON CONFLICT DO NOTHING, as the assignment's
# first answer needs no locking read before it; the revision, the pointer and the assignment,
# complete without a completion query), then the next assignment, the latest answered
# assignment and one read of the labels of both (the undo button names the latest's; the shown
# item's are those an undo retracted), and the progress counts. The queue questions, their
# labels and rules come from the per-process cache (apps.studies.selectors.
# study_questions_cached; the page shown before the answer filled it). Before: 22, then 21 (the
# assignment read again by the service and the membership check: 2 more), then 19 (the
# questions and labels on every answer, the annotation's locking read before its insert, the
# completion query: 4 more), then 15; 16 since the labels' read was split from the latest
# answered one (one query joining the revisions to the assignments through their item cost
# more to build and to plan than the two: apps.annotations.selectors._answers_shown); 14
# since the insert needs no savepoint of its own (2 fewer: core.locking).
ANSWER_QUERIES = 14


def captured_answer(client, study, *, after: int) -> tuple[Any, list[dict[str, str]]]:
    """The page's response to an htmx answer, and its queries, once the client has answered
    ``after`` items (their first answers fill the per-process caches)."""
    for _ in range(after):
        response = client.post(queue_url(study), answer(client, study, "positive"), **HTMX)
        assert response.status_code == 200
    data = answer(client, study, "negative")
    with CaptureQueriesContext(connection) as queries:
        response = client.post(queue_url(study), data, **HTMX)
    assert response.status_code == 200
    return response, queries.captured_queries


def test_htmx_answer_runs_a_bounded_number_of_queries(client) -> None:
    study, (annotator, *_) = running_study(n_items=40, n_annotators=2)
    client.force_login(annotator)
    response, queries = captured_answer(client, study, after=30)
    assert response.context["progress"]["done"] == 31
    assert Assignment.objects.filter(annotator=annotator, completed_at__isnull=False).count() == 31
    # pinned: a query added to the page's answer fails here
    assert len(queries) == ANSWER_QUERIES, [q["sql"][:80] for q in queries]
    assert full_scans(queries) == []
    assert sorted_reads(queries) == []


def test_the_queue_stays_in_index_order_with_the_statistics_of_an_import(client) -> None:
    """Planner statistics taken after an import (apps.annotations.importing runs ``ANALYZE``)
    describe finished assignments, each with its own ``completed_at``. SQLite then took
    ``completed_at IS NULL`` for a selective equality on the index of answered assignments
    and read the next item through it, sorting every open assignment of the annotator on each
    answer; the index of answered assignments now holds only those (``IS NOT NULL``)."""
    finished, _ = running_study(n_items=200, n_annotators=3)
    now = timezone.now()
    for n, assignment in enumerate(Assignment.objects.filter(study=finished)):
        assignment.completed_at = now - timedelta(seconds=n)
        assignment.save(update_fields=["completed_at"])
    with connection.cursor() as cursor:
        for table in ("annotations_annotation", "annotations_revision", "annotations_assignment"):
            cursor.execute(f"ANALYZE {table}")
    study, (annotator, *_) = running_study(n_items=40, n_annotators=2)
    client.force_login(annotator)
    _, queries = captured_answer(client, study, after=5)
    assert sorted_reads(queries) == []
    assert full_scans(queries) == []


# The statements of the page's answer that the ORM builds on each call: the revision's insert.
# The others are SQL built once: the session (core.sessions), the user (core.auth), the study
# with the user's role and the latest answered assignment (core.compiled_queries), the updates
# of the annotation and the assignment (core.row_updates). Before: 9 (each of those built
# through the ORM on every answer: 0.2-0.8 ms of CPU each; the page answer took 7.0 ms of CPU
# in process, 4.0 after).
ORM_BUILT = ["SQLInsertCompiler"]


def test_htmx_answer_builds_few_statements_through_the_orm(client, monkeypatch) -> None:
    built = orm_built(monkeypatch)
    study, (annotator, *_) = running_study(n_items=10, n_annotators=2)
    client.force_login(annotator)
    for _ in range(3):
        client.post(queue_url(study), answer(client, study, "positive"), **HTMX)
    data = answer(client, study, "negative")
    built.clear()
    assert client.post(queue_url(study), data, **HTMX).status_code == 200
    assert sorted(built) == ORM_BUILT
