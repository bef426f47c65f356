"""Acting on disagreement in a real browser: a disputed item reaches a third annotator
(adaptive overlap), and a reviewer adjudicates by keyboard, with and without JavaScript."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.adjudication.models import Adjudication
from apps.adjudication.services import overlap_rule_set
from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.annotations.models import Assignment
from apps.studies.models import Membership
from apps.studies.services import membership_add
from tests.factories import UserFactory, running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_disputed_item_reaches_a_third_annotator(open_page, sign_in, screenshot):
    study, annotators = running_study(n_items=2, n_annotators=3, overlap=2)
    question = study.questions.get()
    overlap_rule_set(manager=study.created_by, question=question, base_k=2, k_max=3, threshold=0.5)
    item = study.items.order_by("position").first()
    pair = [a.annotator for a in Assignment.objects.filter(item=item).order_by("annotator_id")]
    (third,) = [user for user in annotators if user not in pair]
    for user, key in zip(pair, ["1", "3"], strict=True):  # negative, then positive
        page = open_page()
        sign_in(page, user.username)
        page.goto(f"/studies/{study.pk}/annotate/")
        expect(page.locator(".item__text")).to_have_text(item.text)
        page.keyboard.press(key)
        expect(page.locator(".progress__text").first).to_contain_text("1 of")
    page = open_page()
    sign_in(page, third.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    expect(page.locator(".item__text")).to_have_text(item.text)  # the extra item comes first
    screenshot(page, "adaptive-overlap-third-annotator")
    page.keyboard.press("3")
    expect(page.locator(".item__text")).not_to_have_text(item.text)
    assert Assignment.objects.filter(item=item, round=1, completed_at__isnull=False).count() == 3


@pytest.fixture
def disputed_study():
    study, annotators = running_study(n_items=3, n_annotators=3)
    items = list(study.items.order_by("position"))
    answers = [["negative", "positive", "neutral"], ["positive", "positive", "neutral"]]
    answers.append(["positive", "negative", "neutral"])
    annotations_import_finished(
        study=study,
        records=[
            FinishedAnnotation(items[i].external_id, user.username, "sentiment", label)
            for user, row in zip(annotators, answers, strict=True)
            for i, label in enumerate(row)
        ],
    )
    reviewer = UserFactory()
    membership_add(study=study, user=reviewer, role=Membership.Role.REVIEWER)
    return study, items, reviewer


TAKEN_OVER_BY_THE_NEXT_TASK = """() => document.body.addEventListener("htmx:afterSwap", () => {
    setTimeout(() => {
        const form = document.querySelector("[data-adjudication-form]");
        window.__takenOver = Boolean(form && form["htmx-internal-data"]?.initHash);
    }, 0);
}, { once: true })"""


def test_reviewer_adjudicates_by_keyboard(open_page, sign_in, screenshot, disputed_study):
    _study, items, reviewer = disputed_study
    page = open_page()
    sign_in(page, reviewer.username)
    page.get_by_role("link", name="Adjudicate: What is the sentiment?").click()
    # until the page has loaded, htmx has not taken over its forms and a key submits natively
    page.wait_for_url("**/adjudicate/**")  # waits for the "load" event too
    first = page.locator("#current-heading")
    expect(first).to_contain_text(f"Item {items[0].external_id}")
    expect(page.locator("[data-majority]")).to_contain_text("Positive")
    screenshot(page, "adjudication-page")
    page.evaluate("window.__sameDocument = 'yes'")
    page.evaluate(TAKEN_OVER_BY_THE_NEXT_TASK)
    page.keyboard.press("1")  # final label: negative
    expect(first).to_contain_text(f"Item {items[1].external_id}")
    # the next key may come in the very next task: htmx must have taken over the new form by
    # then, or Ctrl+Enter submits it natively (seen in CI: a full page load, flaky)
    page.wait_for_function("window.__takenOver !== undefined")
    assert page.evaluate("window.__takenOver") is True
    page.keyboard.press("a")
    page.keyboard.type("Sarcasm: both readings hold.")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("heading", name="Nothing left to decide")).to_be_visible()
    assert page.evaluate("window.__sameDocument") == "yes"
    decisions = list(Adjudication.objects.order_by("id"))
    assert [(d.item, d.label and d.label.key, d.ambiguous) for d in decisions] == [
        (items[0], "negative", False),
        (items[1], None, True),
    ]
    assert decisions[1].note == "Sarcasm: both readings hold."
    assert decisions[0].adjudicator == reviewer


def test_adjudication_without_javascript(open_page, sign_in, disputed_study):
    study, items, reviewer = disputed_study
    page = open_page(java_script_enabled=False)
    sign_in(page, reviewer.username)
    page.goto(f"/studies/{study.pk}/adjudicate/sentiment/")
    page.get_by_role("button", name="Positive").click()
    expect(page.locator("#current-heading")).to_contain_text(f"Item {items[1].external_id}")
    assert Adjudication.objects.get().label.key == "positive"
