"""Storing arena votes: append-only revisions, idempotency keys, refusals, access."""

from __future__ import annotations

import uuid

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from rest_framework.test import APIClient

from apps.annotations.models import Annotation, Assignment, Revision
from apps.arena.services import arena_vote_record
from apps.studies.models import Study
from apps.studies.services import study_set_status
from tests.apps.arena.conftest import make_arena_study

pytestmark = pytest.mark.django_db


def _vote(arena, annotator, item, a="alpaca", b="bison", outcome=1, key=None):
    return arena_vote_record(
        question=arena.question,
        annotator=annotator,
        item_id=item.pk,
        model_a=a,
        model_b=b,
        outcome=outcome,
        idempotency_key=key or uuid.uuid4(),
    )


def test_each_vote_appends_a_revision_holding_every_vote_on_the_prompt():
    arena = make_arena_study(n_prompts=2, n_annotators=1)
    user, item = arena.annotators[0], arena.items[0]
    first, created = _vote(arena, user, item)
    second, _ = _vote(arena, user, item, "camel", "dingo", -1)
    assert created
    assert (first.number, second.number) == (1, 2)
    assert first.value == {"votes": [{"model_a": "alpaca", "model_b": "bison", "outcome": 1}]}
    assert second.value["votes"][-1] == {"model_a": "camel", "model_b": "dingo", "outcome": -1}
    assert len(second.value["votes"]) == 2
    annotation = Annotation.objects.get(question=arena.question, item=item)
    assert annotation.current_revision == second
    assert Revision.objects.filter(annotation=annotation).count() == 2  # the first one stays


def test_a_resent_key_returns_the_first_revision_and_stores_nothing():
    arena = make_arena_study(n_prompts=1, n_annotators=1)
    user, item = arena.annotators[0], arena.items[0]
    key = uuid.uuid4()
    first, created = _vote(arena, user, item, key=key)
    again, created_again = _vote(arena, user, item, key=key)
    assert created
    assert not created_again
    assert again.pk == first.pk
    assert Revision.objects.count() == 1
    with pytest.raises(ValidationError) as caught:
        _vote(arena, user, item, outcome=-1, key=key)
    assert "idempotency_key" in caught.value.message_dict


@pytest.mark.parametrize(
    ("a", "b", "outcome", "field"),
    [
        ("bison", "alpaca", 0, "model_b"),  # the pair judged before, the other way round
        ("alpaca", "alpaca", 1, "model_b"),
        ("alpaca", "gorilla", 1, "model_b"),
        ("alpaca", "camel", 2, "outcome"),
        ("alpaca", "camel", True, "outcome"),
    ],
)
def test_bad_votes_are_refused_by_field_and_store_nothing(a, b, outcome, field):
    arena = make_arena_study(n_prompts=1, n_annotators=1)
    user, item = arena.annotators[0], arena.items[0]
    _vote(arena, user, item)
    with pytest.raises(ValidationError) as caught:
        _vote(arena, user, item, a, b, outcome)
    assert field in caught.value.message_dict
    assert Revision.objects.count() == 1


def test_only_the_annotators_of_the_prompt_may_vote():
    arena = make_arena_study(n_prompts=2, n_annotators=2)
    other = make_arena_study(n_prompts=1, n_annotators=1)
    user = arena.annotators[0]
    Assignment.objects.filter(annotator=user, item=arena.items[1]).delete()
    with pytest.raises(PermissionDenied):
        _vote(arena, user, arena.items[1])  # not assigned to them
    with pytest.raises(PermissionDenied):
        _vote(arena, arena.manager, arena.items[0])  # the manager annotates nothing
    with pytest.raises(PermissionDenied):
        _vote(arena, other.annotators[0], arena.items[0])  # another study's annotator
    assert not Revision.objects.exists()


def test_a_closed_study_takes_no_votes():
    arena = make_arena_study(n_prompts=1, n_annotators=1)
    study_set_status(study=arena.study, status=Study.Status.CLOSED)
    with pytest.raises(ValidationError):
        _vote(arena, arena.annotators[0], arena.items[0])


def test_the_answers_api_only_appends_one_vote_never_rewrites():
    arena = make_arena_study(n_prompts=1, n_annotators=1)
    user, item = arena.annotators[0], arena.items[0]
    _vote(arena, user, item)
    assignment = Assignment.objects.get(annotator=user, item=item)
    client = APIClient()
    client.force_authenticate(user)

    def post(votes):
        return client.post(
            "/api/annotations/",
            {
                "assignment": assignment.pk,
                "answers": {"helpful": {"votes": votes}},
                "idempotency_key": str(uuid.uuid4()),
            },
            format="json",
        )

    rewritten = post([{"model_a": "alpaca", "model_b": "bison", "outcome": -1}])
    assert rewritten.status_code == 400, rewritten.data
    added = post(
        [
            {"model_a": "alpaca", "model_b": "bison", "outcome": 1},
            {"model_a": "camel", "model_b": "alpaca", "outcome": 0},
        ]
    )
    assert added.status_code == 201, added.data
    assert Revision.objects.count() == 2
