"""The quality dashboard in a real browser: a manager watches it update while an annotator works.

Websockets need an ASGI server: the pages come from daphne (``asgi_url``, see conftest.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from playwright.sync_api import Browser, Page, expect

from apps.annotations.models import Assignment
from apps.annotations.services import annotations_submit
from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LABELS = ["negative", "neutral", "positive"]


@pytest.fixture
def new_page(chromium: Browser, asgi_url: str) -> Iterator:
    contexts = []

    def open_() -> Page:
        context = chromium.new_context(base_url=asgi_url, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context.new_page()

    yield open_
    for context in contexts:
        context.close()


def _seed_answers(study, annotators) -> None:
    """Three consistent annotators and one who labels at random (gets flagged)."""
    question = study.questions.get()
    rng = np.random.default_rng(7)
    truth = {item: rng.integers(3) for item in study.items.values_list("pk", flat=True)}
    for k, user in enumerate(annotators):
        for assignment in Assignment.objects.filter(annotator=user, round=1):
            label = rng.integers(3) if k == len(annotators) - 1 else truth[assignment.item_id]
            if k < len(annotators) - 1 and rng.random() < 0.1:
                label = (label + 1) % 3
            annotations_submit(
                annotator=user,
                assignment=assignment,
                answers={question: LABELS[label]},
                idempotency_key=uuid.uuid4(),
                time_spent_ms=int(rng.integers(800, 4000)),
            )


def test_dashboard_updates_live_when_an_annotator_submits(new_page, sign_in, screenshot, settings):
    settings.QUALITY_MIN_EVIDENCE = 20
    study, annotators = running_study(n_items=40, n_annotators=5)
    _seed_answers(study, annotators[:4])
    late = annotators[4]

    manager = new_page()
    sign_in(manager, study.created_by.username)
    manager.goto(f"/studies/{study.pk}/quality/")
    expect(manager.get_by_role("heading", name="Annotation quality")).to_be_visible()
    ratings = manager.locator("#quality-summary dd").nth(1)
    expect(ratings).to_have_text("160")
    expect(manager.locator("#quality-annotators")).to_contain_text("kappa with others")
    manager.wait_for_function("document.querySelector('[ws-connect]')")
    manager.evaluate("window.__sameDocument = 'yes'")
    screenshot(manager, "dashboard-before")

    annotator = new_page()
    sign_in(annotator, late.username)
    annotator.goto(f"/studies/{study.pk}/annotate/")
    for n, key in enumerate(["3", "1", "2"], start=1):
        annotator.keyboard.press(key)
        expect(annotator.locator(".progress__text").first).to_contain_text(f"{n} of 40 done")
        expect(ratings).to_have_text(str(160 + n))
    expect(manager.locator("#quality-annotators")).to_contain_text(late.username)
    assert manager.evaluate("window.__sameDocument") == "yes"  # pushed, never reloaded
    screenshot(manager, "dashboard-after")


def test_dashboard_without_javascript_and_exclude(new_page, asgi_url, sign_in, screenshot):
    study, annotators = running_study(n_items=30, n_annotators=4)
    _seed_answers(study, annotators)
    page = new_page()
    page.context.close()
    context = page.context.browser.new_context(
        base_url=asgi_url, java_script_enabled=False, viewport={"width": 1280, "height": 900}
    )
    page = context.new_page()
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/quality/")
    spammer = annotators[-1].username
    row = page.locator("#quality-annotators tr", has_text=spammer)
    expect(row).to_contain_text("Open")
    row.get_by_role("button", name=f"Exclude {spammer}").click()
    expect(page.locator("#messages")).to_contain_text("excluded from curated exports")
    expect(page.locator("#quality-annotators tr", has_text=spammer)).to_contain_text("excluded")
    screenshot(page, "dashboard-no-js")
    context.close()
