"""The quality dashboard in a real browser: a manager watches it update while an annotator works.

Websockets need an ASGI server: the pages come from uvicorn as the studio
runs it (``asgi_url``, see conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from playwright.sync_api import Browser, Page, expect

from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.annotations.models import Assignment
from tests.browser.conftest import ARTIFACTS
from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LABELS = ["negative", "neutral", "positive"]
DESKTOP, PHONE = {"width": 1366, "height": 850}, {"width": 390, "height": 844}


@pytest.fixture
def new_page(chromium: Browser, asgi_url: str) -> Iterator:
    contexts = []

    def open_(viewport: dict[str, int] | None = None) -> Page:
        size = viewport or {"width": 1280, "height": 900}
        context = chromium.new_context(base_url=asgi_url, viewport=size)
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context.new_page()

    yield open_
    for context in contexts:
        context.close()


def _seed_answers(study, annotators, *, held_back: int = 0) -> None:
    """Three consistent annotators and one who labels at random (gets flagged); the first
    leaves their last ``held_back`` items for the test to answer.

    Stored in one bulk import (one quality pass), not answer by answer: the pages under test
    read the same answers either way, and 200 live submissions took 15-20 s of each test."""
    question = study.questions.get()
    rng = np.random.default_rng(7)
    truth = {item: rng.integers(3) for item in study.items.values_list("pk", flat=True)}
    records = []
    for k, user in enumerate(annotators):
        assignments = list(
            Assignment.objects.filter(annotator=user, round=1).select_related("item")
        )
        for assignment in assignments[: len(assignments) - held_back] if k == 0 else assignments:
            label = rng.integers(3) if k == len(annotators) - 1 else truth[assignment.item_id]
            if k < len(annotators) - 1 and rng.random() < 0.1:
                label = (label + 1) % 3
            records.append(
                FinishedAnnotation(
                    assignment.item.external_id,
                    user.username,
                    question.key,
                    LABELS[label],
                    time_spent_ms=int(rng.integers(800, 4000)),
                )
            )
    annotations_import_finished(study=study, records=records)


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


def _row_order(page: Page) -> list[str]:
    """The annotators of the table's rows, top to bottom (their user ids)."""
    rows = page.locator("#quality-annotators tbody")
    return rows.evaluate_all("rows => rows.map(row => row.dataset.annotator)")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_exclude_asks_a_reason_keeps_rows_in_place_through_a_push_and_undoes(
    new_page, sign_in, screenshot, viewport
):
    study, annotators = running_study(n_items=30, n_annotators=4)
    _seed_answers(study, annotators, held_back=1)
    spammer = annotators[-1].username
    manager = new_page(viewport)
    manager.set_default_timeout(30_000)
    sign_in(manager, study.created_by.username)
    manager.goto(f"/studies/{study.pk}/quality/")
    ratings = manager.locator("#quality-summary dd").nth(1)
    expect(ratings).to_have_text("119")
    manager.wait_for_function("document.querySelector('[ws-connect]')")
    order = _row_order(manager)
    assert order == sorted(order, key=lambda pk: {u.pk: u.username for u in annotators}[int(pk)])

    row = manager.locator("#quality-annotators tbody", has_text=spammer)
    expect(row).to_contain_text("Open")
    row.locator("summary").click()
    # the page itself never scrolls sideways, on a phone either (the table scrolls in its box)
    assert manager.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    confirm = row.get_by_role("button", name=f"Confirm exclusion of {spammer}")
    confirm.click()  # no reason: refused, the form says why
    expect(row.get_by_role("alert")).to_contain_text("Say why")
    reason = row.get_by_label(f"Why exclude {spammer}?")
    reason.fill("labels at random")
    screenshot(manager, f"dashboard-exclude-confirm-{viewport['width']}")
    manager.locator("#quality-annotators").screenshot(
        path=ARTIFACTS / f"dashboard-exclude-confirm-table-{viewport['width']}.png"
    )

    # another annotator answers meanwhile: the pushed table keeps the rows and the open form
    annotator = new_page()
    sign_in(annotator, annotators[0].username)
    annotator.goto(f"/studies/{study.pk}/annotate/")
    annotator.keyboard.press("2")
    expect(ratings).to_have_text("120")
    expect(reason).to_have_value("labels at random")
    assert _row_order(manager) == order

    row.get_by_role("button", name=f"Confirm exclusion of {spammer}").click()
    expect(row).to_contain_text("“labels at random”")
    expect(row.locator("th")).to_contain_text("excluded")
    assert _row_order(manager) == order
    screenshot(manager, f"dashboard-excluded-{viewport['width']}")

    row.get_by_role("button", name=f"Undo exclusion of {spammer}").click()
    expect(row.locator("summary")).to_be_visible()
    expect(row.locator("th")).not_to_contain_text("excluded")
    assert _row_order(manager) == order


def test_dashboard_without_javascript_and_exclude(new_page, asgi_url, sign_in, screenshot):
    study, annotators = running_study(n_items=30, n_annotators=4)
    _seed_answers(study, annotators)
    page = new_page()
    page.context.close()
    context = page.context.browser.new_context(
        base_url=asgi_url, java_script_enabled=False, viewport=DESKTOP
    )
    context.set_default_timeout(30_000)
    page = context.new_page()
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/quality/")
    order = _row_order(page)
    spammer = annotators[-1].username
    row = page.locator("#quality-annotators tbody", has_text=spammer)
    expect(row).to_contain_text("Open")
    row.locator("summary").click()  # <details> opens without JavaScript
    row.get_by_role("button", name=f"Confirm exclusion of {spammer}").click()
    # no reason: a page with the form again, nothing written
    expect(page.get_by_role("heading", name=f"Exclude {spammer}")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Say why")
    screenshot(page, "dashboard-no-js-exclude-reason-missing")
    page.get_by_label(f"Why exclude {spammer}?").fill("labels at random")
    page.get_by_role("button", name=f"Confirm exclusion of {spammer}").click()
    expect(page.locator("#messages")).to_contain_text("excluded from curated exports")
    row = page.locator("#quality-annotators tbody", has_text=spammer)
    expect(row.locator("th")).to_contain_text("excluded")
    expect(row).to_contain_text("“labels at random”")
    assert _row_order(page) == order
    screenshot(page, "dashboard-no-js")
    row.get_by_role("button", name=f"Undo exclusion of {spammer}").click()
    expect(page.locator("#messages")).to_contain_text(f"{spammer} is included again")
    expect(row.locator("th")).not_to_contain_text("excluded")
    assert _row_order(page) == order
    context.close()
