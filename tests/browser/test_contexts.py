"""Closing a test's browser contexts leaves no request of theirs in the test database."""

from __future__ import annotations

import threading

from django.db import transaction
from playwright.sync_api import Browser

from apps.annotations import views
from apps.studies.models import Question
from tests.browser.conftest import sign_in_page
from tests.browser.contexts import close_contexts
from tests.factories import running_study


def test_closing_waits_for_a_request_the_page_left_in_the_server(
    chromium: Browser, asgi_url: str, monkeypatch
):
    """A request a closed page left behind (a ``keepalive`` upload sent on ``pagehide``) goes
    on in the server, which cancels the response but not the view's thread. The test
    database's flush after the test failed once in CI ("database table is locked:
    studies_question"): the view still held a read of that table in its transaction."""
    study, annotators = running_study(n_items=2, n_annotators=1)
    inside, done = threading.Event(), threading.Event()
    annotated_study = views.annotated_study

    def slow_annotated_study(request, study_id):
        with transaction.atomic():
            found = annotated_study(request, study_id)
            list(Question.objects.filter(study=found))
            inside.set()
            threading.Event().wait(1.5)
            done.set()
        return found

    monkeypatch.setattr(views, "annotated_study", slow_annotated_study)
    context = chromium.new_context(base_url=asgi_url)
    page = context.new_page()
    sign_in_page(page, annotators[0].username)
    page.evaluate(f"() => {{ fetch('/studies/{study.pk}/annotate/', {{keepalive: true}}); }}")
    assert inside.wait(10)
    close_contexts([context])
    assert done.is_set()
