"""The annotator queue in a real browser: keyboard labelling with htmx, and without JavaScript.

Screenshots land in ``test-artifacts/`` for review, with the manager pages beside them.
"""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from apps.annotations.models import Revision
from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from apps.studies.services import question_create
from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def current_text(page) -> str:
    return page.locator(".item__text").inner_text()


def test_keyboard_labelling_swaps_items_without_reloading(open_page, sign_in, screenshot):
    study, (annotator,) = running_study(n_items=6, n_annotators=1)
    page = open_page()
    sign_in(page, annotator.username)
    screenshot(page, "annotator-home")
    page.goto(f"/studies/{study.pk}/annotate/")
    screenshot(page, "queue-start")
    page.evaluate("window.__sameDocument = 'yes'")
    seen = []
    for n, key in enumerate(["1", "2", "3"], start=1):
        text = current_text(page)
        seen.append(text)
        page.keyboard.press(key)
        expect(page.locator(".progress__text").first).to_contain_text(f"{n} of 6 done")
        expect(page.locator(".item__text")).not_to_have_text(text)
    screenshot(page, "queue-after-three")
    assert page.evaluate("window.__sameDocument") == "yes"  # never a full page load

    revisions = Revision.objects.filter(annotation__annotator=annotator).order_by("id")
    assert [r.annotation.item.text for r in revisions] == seen
    assert [r.label.key for r in revisions] == ["negative", "neutral", "positive"]
    assert all(r.time_spent_ms is not None for r in revisions)

    page.keyboard.press("u")  # undo brings the third item back
    expect(page.locator(".item__text")).to_have_text(seen[-1])
    expect(page.locator("#messages")).to_contain_text("Undone: ‘Positive’")
    page.keyboard.press("s")  # skip moves it behind the others
    expect(page.locator(".item__text")).not_to_have_text(seen[-1])
    assert page.evaluate("window.__sameDocument") == "yes"


def test_one_request_per_answer(open_page, sign_in):
    """The page answers with one htmx POST whose response is the next item: no follow-up GET,
    no polling, no progress fragment of its own (the serving benchmark's ``page`` path)."""
    study, (annotator,) = running_study(n_items=6, n_annotators=1)
    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    page.wait_for_load_state("networkidle")
    sent = []
    page.on("request", lambda request: sent.append((request.method, request.url)))
    for n, key in enumerate(["1", "2", "3"], start=1):
        page.keyboard.press(key)
        expect(page.locator(".progress__text").first).to_contain_text(f"{n} of 6 done")
    page.wait_for_timeout(1500)  # anything an answer set off later (polling) shows up here
    queue = f"/studies/{study.pk}/annotate/"
    assert [method for method, _ in sent] == ["POST"] * 3
    assert all(url.endswith(queue) for _, url in sent)


def test_several_questions_by_keyboard_then_done(open_page, sign_in, screenshot):
    study, (annotator,) = running_study(n_items=1, n_annotators=1)
    question_create(
        study=study,
        key="intensity",
        prompt="How intense is it?",
        labels=[
            {"key": "low", "name": "Low", "shortcut": "7"},
            {"key": "high", "name": "High", "shortcut": "8"},
        ],
    )
    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    page.keyboard.press("3")  # first question: positive; the second becomes current
    expect(page.locator("[data-question][aria-current]")).to_contain_text("How intense")
    screenshot(page, "queue-two-questions")
    page.keyboard.press("8")  # second question answered: the item is submitted
    expect(page.get_by_role("heading", name=re.compile("Thank you, all done"))).to_be_visible()
    screenshot(page, "queue-done")
    assert sorted(Revision.objects.values_list("label__key", flat=True)) == ["high", "positive"]


def test_without_javascript_a_click_posts_and_the_next_item_appears(open_page, sign_in, screenshot):
    study, (annotator,) = running_study(n_items=3, n_annotators=1)
    page = open_page(java_script_enabled=False)
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    first = current_text(page)
    page.get_by_role("button", name=re.compile("Neutral")).click()
    page.wait_for_load_state()
    expect(page.locator(".item__text")).not_to_have_text(first)
    expect(page.locator(".progress__text").first).to_contain_text("1 of 3 done")
    screenshot(page, "queue-no-javascript")
    revision = Revision.objects.get()
    assert revision.label.key == "neutral"
    assert revision.annotation.item.text == first


def test_queue_on_a_phone(open_page, sign_in, screenshot):
    study, (annotator,) = running_study(n_items=2, n_annotators=1)
    page = open_page(viewport={"width": 390, "height": 800})
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    screenshot(page, "queue-phone")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390  # nothing overflows sideways


def test_manager_pages_render(open_page, sign_in, screenshot, tmp_path):
    study, annotators = running_study(n_items=30, n_annotators=3, overlap=2, repeat_rate=0.1)
    question = study.questions.get()

    def annotate_some() -> None:
        for count, annotator in enumerate(annotators):
            for _ in range(4 * count + 2):
                annotations_submit(
                    annotator=annotator,
                    assignment=assignment_next(annotator=annotator, study=study),
                    answers={question: "neutral"},
                    idempotency_key=uuid.uuid4(),
                )
        connection.close()

    # Submitting publishes live updates through async_to_sync, which refuses to run in the
    # thread where Playwright's event loop lives; a worker thread has none.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(annotate_some).result()
    page = open_page()
    sign_in(page, study.created_by.username)
    page.goto("/")
    screenshot(page, "manager-home")
    page.goto(f"/studies/{study.pk}/")
    expect(page.get_by_role("heading", name="Progress per annotator")).to_be_visible()
    screenshot(page, "manager-overview")
    page.get_by_role("link", name="Next").click()
    expect(page.locator("#coverage")).to_contain_text("Page 2 of 2")

    page.goto(f"/studies/{study.pk}/items/import/")
    bad = tmp_path / "items.csv"
    bad.write_text("external_id,kind,text\nx1,text,\nx2,hologram,Hi\n")
    page.get_by_label("Item file").set_input_files(str(bad))
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_role("alert")).to_contain_text("Nothing was imported")
    screenshot(page, "manager-import-errors")

    page.goto(f"/studies/{study.pk}/annotators/")
    page.get_by_role("button", name="Create invitation link").click()
    link = page.locator("#invitation-link")
    expect(link).to_have_value(re.compile(r"/invite/"))
    screenshot(page, "manager-annotators")
    newcomer = open_page()
    newcomer.goto(link.input_value())
    expect(newcomer.get_by_role("heading", name=re.compile("Join"))).to_be_visible()
    screenshot(newcomer, "invitation-sign-up")

    page.goto(f"/studies/{study.pk}/questions/{study.questions.get().pk}/edit/")
    screenshot(page, "manager-question")

    page.goto("/studies/new/")
    page.get_by_label("Repeat rate").fill("3")
    page.get_by_role("button", name="Create study").click()
    expect(page.locator("#id_name_error")).to_be_visible()
    screenshot(page, "manager-new-study-errors")
