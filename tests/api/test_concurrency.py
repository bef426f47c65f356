"""Two simultaneous submissions of one assignment, on PostgreSQL (SQLite serialises writes).

Each thread is a separate client with its own database connection; a barrier releases both
requests at once. The same idempotency key must store one revision, whatever the timing;
different keys must share one annotation with two numbered revisions.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.annotations.models import Annotation, Revision
from tests.api.helpers import next_assignment_id, submit
from tests.factories import running_study

ROUNDS = 5  # one assignment per round, to give the race several chances


def _submit_together(token: str, assignment_id: int, keys: list[uuid.UUID]) -> list[Any]:
    """Send one submission per key from parallel threads; return the responses in key order."""
    barrier = threading.Barrier(len(keys))
    responses: list[Any] = [None] * len(keys)
    errors: list[BaseException] = []

    def send(index: int) -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
            barrier.wait(timeout=10)
            responses[index] = submit(client, assignment_id, "positive", key=keys[index])
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(keys))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    return responses


@pytest.fixture
def queue():
    study, (annotator,) = running_study(n_items=ROUNDS, n_annotators=1)
    return study, annotator, Token.objects.create(user=annotator).key


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_same_key_at_the_same_time_stores_one_revision(queue) -> None:
    study, annotator, token = queue
    for _ in range(ROUNDS):
        assignment_id = next_assignment_id(study, annotator)
        key = uuid.uuid4()
        first, second = _submit_together(token, assignment_id, [key, key])
        assert {first.status_code, second.status_code} <= {200, 201}
        assert first.data == second.data
        assert Revision.objects.filter(idempotency_key=key).count() == 1
    assert Revision.objects.count() == ROUNDS


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_different_keys_at_the_same_time_append_two_revisions(queue) -> None:
    study, annotator, token = queue
    for _ in range(ROUNDS):
        assignment_id = next_assignment_id(study, annotator)
        responses = _submit_together(token, assignment_id, [uuid.uuid4(), uuid.uuid4()])
        assert [r.status_code for r in responses] == [201, 201]
        (annotation,) = Annotation.objects.filter(item__assignments__pk=assignment_id)
        assert sorted(annotation.revisions.values_list("number", flat=True)) == [1, 2]
        assert annotation.current_revision.number == 2
    assert Annotation.objects.count() == ROUNDS
