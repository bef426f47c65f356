"""Pairwise preferences in a real browser: ranking by keyboard with htmx, and without JavaScript.

Screenshots land in ``test-artifacts/`` (``preferences-*.png``) for review.
"""

from __future__ import annotations

import random

import pytest
from playwright.sync_api import Page, expect

from apps.preferences.models import Judgement, PairSession
from apps.preferences.selectors import pair_state
from tests.apps.preferences.conftest import make_pairwise_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The next pair is in and htmx has settled it (keys pressed before that are dropped).
WAIT_FOR_NEXT = """old => {
  const ticket = document.querySelector("input[name=ticket]");
  const busy = document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling");
  return !busy && (!ticket || ticket.value !== old);
}"""


def shown_pair(page: Page) -> tuple[str, str]:
    items = page.locator("[data-item]")
    return items.nth(0).get_attribute("data-item"), items.nth(1).get_attribute("data-item")


def test_ranking_five_items_by_keyboard(open_page, sign_in, screenshot):
    setup = make_pairwise_study(
        n_items=5, n_annotators=1, settings={"calibration_triplets": 0, "audit_rate": 0.0}
    )
    (annotator,) = setup.annotators
    hidden = [item.external_id for item in setup.items]
    random.Random(5).shuffle(hidden)  # best first
    level = {external_id: -rank for rank, external_id in enumerate(hidden)}

    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{setup.study.pk}/compare/{setup.question.key}/")
    expect(page.get_by_role("button", name="Equal")).to_be_visible()
    screenshot(page, "preferences-compare-start")
    page.evaluate("window.__sameDocument = 'yes'")
    presses = 0
    while page.locator("[data-compare-form]").count():
        a, b = shown_pair(page)
        ticket = page.locator("input[name=ticket]").input_value()
        page.keyboard.press("ArrowLeft" if level[a] > level[b] else "ArrowRight")
        page.wait_for_function(WAIT_FOR_NEXT, arg=ticket)
        presses += 1
        if presses == 3:
            screenshot(page, "preferences-compare-after-three")
        assert presses < 10
    expect(page.get_by_role("heading", name="ranking is complete")).to_be_visible()
    screenshot(page, "preferences-compare-done")
    assert page.evaluate("window.__sameDocument") == "yes"  # htmx swaps, never a reload

    session = PairSession.objects.get(annotator=annotator)
    ranking = pair_state(session=session).scheduler.ranking()
    by_id = {item.pk: item.external_id for item in setup.items}
    assert [by_id[group[0]] for group in ranking] == hidden
    assert all(len(group) == 1 for group in ranking)
    assert Judgement.objects.filter(annotator=annotator).count() == presses < 10

    manager_page = open_page()
    sign_in(manager_page, setup.manager.username)
    manager_page.goto(f"/studies/{setup.study.pk}/preferences/{setup.question.key}/")
    expect(manager_page.get_by_role("heading", name="Scores")).to_be_visible()
    first_row = manager_page.locator("table.scores tbody tr").first
    expect(first_row).to_contain_text(hidden[0])
    screenshot(manager_page, "preferences-results")


def test_answering_without_javascript(open_page, sign_in, screenshot):
    setup = make_pairwise_study(n_items=4, n_annotators=1, settings={"strict": True})
    (annotator,) = setup.annotators
    page = open_page(java_script_enabled=False)
    sign_in(page, annotator.username)
    page.goto(f"/studies/{setup.study.pk}/compare/{setup.question.key}/")
    expect(page.get_by_role("button", name="Equal")).to_have_count(0)  # strict
    first = shown_pair(page)
    page.get_by_role("button", name="B is better").click()
    expect(page.locator(".progress__text")).to_contain_text("1 of")
    assert shown_pair(page) != first
    screenshot(page, "preferences-compare-nojs")
    judgement = Judgement.objects.get(annotator=annotator)
    assert judgement.outcome == -1
    assert judgement.phase == "calibration"


def test_equal_key_records_a_tie(open_page, sign_in):
    setup = make_pairwise_study(
        n_items=3, n_annotators=1, settings={"calibration_triplets": 0, "audit_rate": 0.0}
    )
    (annotator,) = setup.annotators
    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{setup.study.pk}/compare/{setup.question.key}/")
    while page.locator("[data-compare-form]").count():
        ticket = page.locator("input[name=ticket]").input_value()
        page.keyboard.press("=")
        page.wait_for_function(WAIT_FOR_NEXT, arg=ticket)
    expect(page.get_by_role("heading", name="ranking is complete")).to_be_visible()
    judgements = Judgement.objects.filter(annotator=annotator)
    assert [j.outcome for j in judgements] == [0, 0]  # the second tie merges all three
