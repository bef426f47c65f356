"""The annotator page's own path stays cheap: one htmx POST answers and returns the next item
in a bounded number of SQL queries, whatever the annotator's history, with no full scan."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.annotations.models import Assignment
from tests.apps.annotations.test_views import HTMX, answer, queue_url
from tests.factories import running_study
from tests.query_plans import full_scans, sorted_reads

pytestmark = pytest.mark.django_db

# The session and its user, the study with the user's role, the queue questions and their
# labels (read once, for the answer and for the next item's form), the ticket's assignment with
# what the answer check reads (study, recruitment, participation, membership), the write
# transaction (a savepoint in a test: lock or create the annotation in a savepoint, the
# revision, the pointer, the completion check and the assignment, the question's
# adaptive-overlap rule), then the next assignment, one read of the labels the undo button
# names (the latest answered assignment's) together with the shown item's answer before an
# undo, and the progress counts. Before: 22, then 21 (the assignment read again by the service
# and the membership check: 2 more).
ANSWER_QUERIES = 19


def test_htmx_answer_runs_a_bounded_number_of_queries(client) -> None:
    study, (annotator, *_) = running_study(n_items=40, n_annotators=2)
    client.force_login(annotator)
    for _ in range(30):
        response = client.post(queue_url(study), answer(client, study, "positive"), **HTMX)
        assert response.status_code == 200
    data = answer(client, study, "negative")
    with CaptureQueriesContext(connection) as queries:
        response = client.post(queue_url(study), data, **HTMX)
    assert response.status_code == 200
    assert response.context["progress"]["done"] == 31
    assert Assignment.objects.filter(annotator=annotator, completed_at__isnull=False).count() == 31
    assert len(queries) <= ANSWER_QUERIES, [q["sql"][:80] for q in queries.captured_queries]
    assert full_scans(queries.captured_queries) == []
    assert sorted_reads(queries.captured_queries) == []
