"""``core.locking.locked_get_or_create``: one statement for a new row, the row itself either way."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from apps.annotations.models import Annotation
from core.locking import locked_get_or_create
from tests.factories import running_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def lookup():
    study, annotators = running_study(n_items=2, n_annotators=1)
    return {
        "question": study.questions.get(),
        "item": study.items.first(),
        "annotator": annotators[0],
        "round": 1,
    }


def _statements(queries) -> list[str]:
    return [query["sql"].split()[0].upper() for query in queries]


@pytest.mark.parametrize("likely_new", [True, False])
def test_a_new_row_is_inserted_without_a_savepoint(lookup, likely_new):
    """The insert used to run in a savepoint (SAVEPOINT, INSERT, RELEASE: three round trips on
    PostgreSQL, on every first answer); ``INSERT ... ON CONFLICT DO NOTHING`` needs none."""
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        row = locked_get_or_create(Annotation, likely_new=likely_new, **lookup)
    expected = ["INSERT"] if likely_new else ["SELECT", "INSERT"]
    assert _statements(queries.captured_queries) == expected
    stored = Annotation.objects.get(pk=row.pk)
    assert (stored.question, stored.item, stored.annotator, stored.round) == tuple(lookup.values())
    assert row.created_at == stored.created_at  # auto_now_add filled in, as create() does
    assert row.analysis_pending is False  # the model's default


@pytest.mark.parametrize("likely_new", [True, False])
def test_an_existing_row_is_read_locked_and_nothing_is_inserted(lookup, likely_new):
    first = Annotation.objects.create(**lookup)
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        row = locked_get_or_create(Annotation, likely_new=likely_new, **lookup)
    assert row.pk == first.pk
    assert Annotation.objects.count() == 1
    expected = ["INSERT", "SELECT"] if likely_new else ["SELECT"]
    assert _statements(queries.captured_queries) == expected
    assert "SAVEPOINT" not in " ".join(_statements(queries.captured_queries))
