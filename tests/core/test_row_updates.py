"""``core.row_updates.rows_update`` writes the named fields of each instance, as ``save()``
would store them (JSON, dates, booleans), and nothing else."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from analytics.models import Flag
from core.row_updates import rows_update
from tests.factories import running_study

pytestmark = pytest.mark.django_db


def test_each_row_gets_its_own_values_in_one_statement() -> None:
    study, annotators = running_study(n_items=2, n_annotators=3)
    question = study.questions.get()
    flags = [
        Flag.objects.create(
            study=study, question=question, annotator=user, indicator="alpha", reason="r"
        )
        for user in annotators
    ]
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    for n, flag in enumerate(flags[:2]):
        flag.figures = {"value": n / 3, "evidence": [n, "x"]}
        flag.active = n == 1
        flag.updated_at = when + dt.timedelta(seconds=n)
        flag.reason = "not written"  # not among the fields
    with CaptureQueriesContext(connection) as queries:
        rows_update(flags[:2], ["figures", "active", "updated_at"])
    assert len(queries) == 1
    stored = {f.pk: f for f in Flag.objects.all()}
    for n, flag in enumerate(flags[:2]):
        got = stored[flag.pk]
        assert got.figures == {"value": n / 3, "evidence": [n, "x"]}
        assert got.active is (n == 1)
        assert got.updated_at == when + dt.timedelta(seconds=n)
        assert got.reason == "r"
    assert stored[flags[2].pk].figures == {}
    assert stored[flags[2].pk].active


def test_no_rows_no_statement() -> None:
    with CaptureQueriesContext(connection) as queries:
        rows_update([], ["figures"])
    assert len(queries) == 0
