"""Concurrent votes of one annotator on one prompt (PostgreSQL): none lost, none repeated."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from apps.arena import services
from apps.arena.selectors import question_votes
from apps.arena.services import arena_vote_record
from tests.apps.arena.conftest import make_arena_study
from tests.apps.preferences.test_concurrency import at_once

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def arena(monkeypatch):
    """An arena whose service reads the stored votes slowly, so that two requests overlap
    between reading them and appending to them."""
    read = services.votes_of

    def slow_read(value: Any) -> list[dict[str, Any]]:
        time.sleep(0.3)
        return read(value)

    arena = make_arena_study(n_prompts=1, n_annotators=1)
    _vote(arena, "alpaca", "camel")()  # the prompt's answer has a stored vote to read
    monkeypatch.setattr(services, "votes_of", slow_read)
    return arena


def _vote(arena, a: str, b: str):
    return lambda: arena_vote_record(
        question=arena.question,
        annotator=arena.annotators[0],
        item_id=arena.items[0].pk,
        model_a=a,
        model_b=b,
        outcome=1,
        idempotency_key=uuid.uuid4(),  # two tabs: two keys
    )


def test_two_votes_on_one_prompt_at_once_are_both_kept(arena):
    results = at_once(_vote(arena, "alpaca", "bison"), _vote(arena, "camel", "dingo"))
    assert not any(isinstance(result, Exception) for result in results), results
    votes = question_votes(question=arena.question)
    assert {frozenset((v.model_a, v.model_b)) for v in votes} == {
        frozenset(("alpaca", "camel")),
        frozenset(("alpaca", "bison")),
        frozenset(("camel", "dingo")),
    }


def test_one_pair_voted_twice_at_once_is_stored_once(arena):
    results = at_once(_vote(arena, "alpaca", "bison"), _vote(arena, "bison", "alpaca"))
    assert sum(isinstance(result, ValidationError) for result in results) == 1, results
    assert len(question_votes(question=arena.question)) == 2
