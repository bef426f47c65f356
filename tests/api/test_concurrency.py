"""Two simultaneous submissions of one assignment, on PostgreSQL (SQLite serialises writes).

Each thread is a separate client with its own database connection; a barrier releases both
requests at once. The same idempotency key must store one revision, whatever the timing;
different keys must share one annotation with two numbered revisions.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import numpy as np
import pytest
from django.db import connection
from knox.models import AuthToken
from rest_framework.test import APIClient

from apps.annotations.models import Annotation, Revision
from tests.api.helpers import next_assignment_id, submit
from tests.apps.continuous.conftest import AUDIO_SECONDS, make_trace_study
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
    return study, annotator, AuthToken.objects.create(user=annotator)[1]


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


def _post_together(token: str, url: str, body: dict[str, Any], n: int = 2) -> list[Any]:
    """POST the same body from ``n`` parallel threads at once; return the responses."""
    barrier = threading.Barrier(n)
    responses: list[Any] = [None] * n
    errors: list[BaseException] = []

    def send(index: int) -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
            barrier.wait(timeout=10)
            responses[index] = client.post(url, body, format="json")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    return responses


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_same_key_at_the_same_time_answers_201_once(queue) -> None:
    """The service decides "created" under the annotation's lock: one 201, one replay."""
    study, annotator, token = queue
    for _ in range(ROUNDS):
        key = uuid.uuid4()
        responses = _submit_together(token, next_assignment_id(study, annotator), [key, key])
        assert sorted(r.status_code for r in responses) == [200, 201]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_finishing_a_recording_twice_at_once_answers_201_once() -> None:
    """Two finishes of one recording: one revision, one 201 and one 200 with the same body."""
    ts = make_trace_study(n_annotators=1, settings={"allow_redo": True})  # a round a trace
    (annotator,) = ts.annotators
    token = AuthToken.objects.create(user=annotator)[1]
    for _ in range(ROUNDS):
        recording = uuid.uuid4()
        times = np.arange(0, AUDIO_SECONDS + 0.05, 0.5)
        ts.send(annotator, ts.audio_item, recording, 0, times, np.full(times.size, 0.3))
        url = f"/api/studies/{ts.study.pk}/traces/finish/"
        responses = _post_together(token, url, {"recording": str(recording)})
        assert sorted(r.status_code for r in responses) == [200, 201]
        assert responses[0].data == responses[1].data
        assert Revision.objects.filter(idempotency_key=recording).count() == 1
