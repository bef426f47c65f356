"""The hot path's reads from SQL built once (core.compiled_queries) give what the ORM gives."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Q
from django.db.models.sql.compiler import SQLCompiler
from django.test.utils import CaptureQueriesContext

from apps.annotations.models import Assignment
from apps.annotations.selectors import (
    _open_in_queue_order,
    assignment_next,
    assignment_to_answer,
    assignments_to_answer,
)
from core.compiled_queries import CompiledQuery
from tests.factories import running_study

pytestmark = pytest.mark.django_db


def _fields(assignment: Assignment) -> dict[str, object]:
    return {f.attname: getattr(assignment, f.attname) for f in Assignment._meta.concrete_fields}


def test_the_assignment_to_answer_equals_the_orms_with_every_related_object_loaded():
    study, (annotator, other, _) = running_study(n_items=4, n_annotators=3)
    mine = Assignment.objects.filter(annotator=annotator).order_by("position")[2]
    Assignment.objects.filter(pk=mine.pk).update(skip_count=2, extra=True)
    expected = assignments_to_answer().get(pk=mine.pk)
    for study_id in (None, study.pk):
        found = assignment_to_answer(pk=mine.pk, annotator=annotator.pk, study=study_id)
        assert found is not None
        assert _fields(found) == _fields(expected)
        assert found.annotating is True
        with CaptureQueriesContext(connection) as queries:  # nothing read lazily
            assert found.item.external_id == expected.item.external_id
            assert found.study.name == study.name
            assert hasattr(found.study, "recruitment") == hasattr(expected.study, "recruitment")
            assert not hasattr(found.annotator, "participation")
        assert len(queries) == 0
    # someone else's, another study's, a missing and an out-of-range id read as none
    assert assignment_to_answer(pk=mine.pk, annotator=other.pk) is None
    assert assignment_to_answer(pk=mine.pk, annotator=annotator.pk, study=study.pk + 1) is None
    assert assignment_to_answer(pk=10**9, annotator=annotator.pk) is None
    with CaptureQueriesContext(connection) as queries:
        assert assignment_to_answer(pk=2**64, annotator=annotator.pk) is None
    assert len(queries) == 0


def test_the_next_assignment_follows_the_orms_order_through_skips_and_extras():
    study, (annotator, *_) = running_study(n_items=6, n_annotators=2)
    queue = list(Assignment.objects.filter(annotator=annotator).order_by("position"))
    Assignment.objects.filter(pk=queue[0].pk).update(skip_count=1)
    Assignment.objects.filter(pk=queue[4].pk).update(extra=True)
    served = []
    while (found := assignment_next(annotator=annotator, study=study)) is not None:
        orm = _open_in_queue_order(study.pk, annotator.pk, Q()).first()  # built by the ORM
        assert orm is not None
        assert found.pk == orm.pk
        assert found.item.pk == found.item_id  # the item came with it
        served.append(found.pk)
        Assignment.objects.filter(pk=found.pk).update(completed_at="2026-01-01T00:00:00Z")
    assert served == [queue[k].pk for k in (4, 1, 2, 3, 5, 0)]


def test_the_sql_is_built_once_per_shape(monkeypatch):
    _study, (annotator, *_) = running_study(n_items=3, n_annotators=1)
    pk = Assignment.objects.filter(annotator=annotator).first().pk
    built = []
    as_sql = SQLCompiler.as_sql
    monkeypatch.setattr(
        SQLCompiler, "as_sql", lambda self, *a, **k: built.append(1) or as_sql(self, *a, **k)
    )
    query = CompiledQuery(
        lambda pk, annotator: Assignment.objects.filter(pk=pk, annotator=annotator)
    )
    for _ in range(3):
        assert [a.pk for a in query.all(pk=pk, annotator=annotator.pk)] == [pk]
    assert len(built) == 1


def test_a_value_the_query_does_not_hold_once_is_refused():
    query = CompiledQuery(lambda pk, annotator: Assignment.objects.filter(pk=pk))
    with pytest.raises(ValueError, match="'annotator' stands 0 times"):
        query.all(pk=1, annotator=2)


def test_the_api_refuses_a_wrong_type_and_an_unknown_id_as_before(client):
    from knox.models import AuthToken

    _study, (annotator, *_) = running_study(n_items=2, n_annotators=1)
    token = AuthToken.objects.create(user=annotator)[1]
    for value, message in (
        ("abc", "Incorrect type"),
        (2**70, "does not exist"),
        (True, "Incorrect type"),
    ):
        response = client.post(
            "/api/annotations/",
            {
                "assignment": value,
                "answers": {"sentiment": "positive"},
                "idempotency_key": "0b6c4f9e-5d39-4a53-9a44-0d5d6c3f0a11",
            },
            content_type="application/json",
            headers={"Authorization": f"Token {token}"},
        )
        assert response.status_code == 400, value
        assert message in str(response.json()["assignment"]), response.json()


@pytest.mark.parametrize("value", ["5", 5.0, True])
def test_an_id_that_is_not_an_int_is_a_type_error(value):
    """``"5" in range(1, 2**63)`` walks the range (a string is never equal to an int): a URL's
    string once made a study's export page loop for minutes. Callers convert first."""
    query = CompiledQuery(
        lambda pk, annotator: Assignment.objects.filter(pk=pk, annotator=annotator)
    )
    with pytest.raises(TypeError, match="pk must be an int"):
        query.all(pk=value, annotator=1)


def test_a_text_parameter_takes_strings_and_matches_the_orm():
    """A key looked up (an API token's) is a text parameter: strings only, as the ORM reads."""
    from knox.models import AuthToken

    _study, (annotator, other) = running_study(n_items=1, n_annotators=2)
    mine, _ = AuthToken.objects.create(user=annotator)
    AuthToken.objects.create(user=other)
    query = CompiledQuery(
        lambda key: AuthToken.objects.filter(token_key=key).select_related("user"), text=("key",)
    )
    found = query.all(key=mine.token_key)
    assert [t.digest for t in found] == [mine.digest]
    assert found[0].user.username == annotator.username
    assert query.all(key="no-such-key") == []
    with pytest.raises(TypeError, match="key must be a str"):
        query.all(key=5)
