"""Concurrent requests of one annotator (PostgreSQL): one pending pair, one judgement."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from apps.preferences.models import Judgement, PairSession
from apps.preferences.services import NOT_PENDING, judgement_record, pair_next
from tests.apps.preferences.conftest import make_pairwise_study

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads released together by a barrier; results (or errors) in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = call()
        except Exception as exc:  # handed back to the test
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(k, c)) for k, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


@pytest.fixture
def setup(monkeypatch):
    """A pairwise study whose state rebuild is slowed down, so that requests overlap."""
    from apps.preferences import services

    rebuild = services.pair_state

    def slow_rebuild(**kwargs: Any) -> Any:
        state = rebuild(**kwargs)
        time.sleep(0.2)
        return state

    monkeypatch.setattr(services, "pair_state", slow_rebuild)
    return make_pairwise_study(settings={"calibration_triplets": 2, "audit_rate": 0.0})


def test_first_visits_at_once_share_one_session_and_one_pair(setup):
    annotator = setup.annotators[0]
    visit = lambda: pair_next(question=setup.question, annotator=annotator).pending  # noqa: E731
    first, second = at_once(visit, visit)
    assert first == second
    assert PairSession.objects.filter(annotator=annotator).count() == 1


def test_two_answers_to_one_pair_store_one_judgement(setup):
    annotator = setup.annotators[0]
    a, b = pair_next(question=setup.question, annotator=annotator).pending

    def submit(outcome: int) -> Callable[[], Any]:
        return lambda: judgement_record(
            question=setup.question,
            annotator=annotator,
            item_a=a,
            item_b=b,
            outcome=outcome,
            idempotency_key=uuid.uuid4(),  # two tabs: two keys
        )

    results = at_once(submit(1), submit(-1))
    stored = [r for r in results if isinstance(r, tuple)]
    refused = [r for r in results if isinstance(r, ValidationError)]
    assert len(stored) == 1
    assert len(refused) == 1
    assert refused[0].messages == [NOT_PENDING]
    assert Judgement.objects.filter(annotator=annotator).count() == 1


def test_a_double_submit_with_one_key_stores_one_judgement(setup):
    annotator = setup.annotators[0]
    a, b = pair_next(question=setup.question, annotator=annotator).pending
    key = uuid.uuid4()

    def submit() -> tuple[Judgement, bool]:
        return judgement_record(
            question=setup.question,
            annotator=annotator,
            item_a=a,
            item_b=b,
            outcome=1,
            idempotency_key=key,
        )

    first, second = at_once(submit, submit)
    assert first[0].pk == second[0].pk
    assert sorted([first[1], second[1]]) == [False, True]
    assert Judgement.objects.filter(annotator=annotator).count() == 1
