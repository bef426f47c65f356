"""Batch draws at the same moment (PostgreSQL): no item is taken twice beyond the overlap."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from apps.preferences.models import PairSession
from apps.preferences.services import pair_next
from tests.apps.preferences.conftest import make_pairwise_study
from tests.apps.preferences.test_concurrency import at_once

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def batched(monkeypatch, pinned_pair_seed):
    """12 items in batches of 6; reading the batch evidence is slowed down, so that draws
    overlap, and every session has seed 0, so that two draws from the same evidence take
    the same items."""
    from apps.preferences import services

    evidence = services.batch_evidence

    def slow_evidence(**kwargs: Any) -> Any:
        found = evidence(**kwargs)
        time.sleep(0.3)
        return found

    monkeypatch.setattr(services, "batch_evidence", slow_evidence)
    return make_pairwise_study(
        n_items=12,
        n_annotators=3,
        settings={"batch_size": 6, "calibration_triplets": 2, "audit_rate": 0.0},
    )


def coverage_of(setup: Any) -> Counter[int]:
    return Counter(
        item
        for items in PairSession.objects.filter(question=setup.question).values_list(
            "items", flat=True
        )
        for item in items
    )


def test_two_annotators_starting_at_once_draw_disjoint_batches(batched):
    first, second = batched.annotators[:2]
    visit = lambda user: lambda: pair_next(question=batched.question, annotator=user)  # noqa: E731
    results = at_once(visit(first), visit(second))
    assert not [r for r in results if isinstance(r, Exception)], results
    coverage = coverage_of(batched)
    assert set(coverage) == {item.pk for item in batched.items}  # 2 x 6 of 12: each item once
    assert set(coverage.values()) == {1}


def test_two_tabs_of_one_annotator_draw_one_batch(batched):
    first, second = batched.annotators[:2]
    visit = lambda user: lambda: pair_next(question=batched.question, annotator=user)  # noqa: E731
    results = at_once(visit(first), visit(first), visit(second))
    assert not [r for r in results if isinstance(r, Exception)], results
    assert results[0].pending == results[1].pending  # both tabs on one session, one pair
    assert PairSession.objects.filter(question=batched.question).count() == 2
    assert set(coverage_of(batched).values()) == {1}
