"""The dashboard draws a kind's page-only cards from the kind object, before any figures."""

from __future__ import annotations

import pytest
from django.urls import reverse

from analytics.selectors import latest_snapshot
from tests.apps.continuous.conftest import make_trace_study


@pytest.mark.django_db
def test_a_continuous_question_shows_its_traces_card_before_the_first_snapshot(client):
    setup = make_trace_study()
    assert latest_snapshot(question=setup.question) is None
    client.force_login(setup.study.created_by)
    url = reverse("analytics:dashboard", args=[setup.study.pk])
    html = client.get(url, {"question": setup.question.pk}).content.decode()
    assert 'id="quality-traces"' in html
    assert "No figures yet" in html
