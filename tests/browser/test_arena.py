"""The model arena in a real browser: an annotator votes by keyboard (htmx), the manager's
results page ranks the models.

Screenshots land in ``test-artifacts/`` (``arena-*.png``) for review.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from apps.arena.selectors import question_votes
from tests.apps.arena.conftest import STRENGTH, make_arena_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_FOR_NEXT = """old => {
  const ticket = document.querySelector("input[name=ticket]");
  const busy = document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling");
  return !busy && (!ticket || ticket.value !== old);
}"""


def shown_models(page: Page) -> tuple[str, str]:
    """The models behind A and B: the test's responses start with their model's name."""
    texts = [page.locator(f"[data-response={side}] .arena__text").inner_text() for side in "AB"]
    return texts[0].split()[0], texts[1].split()[0]


def test_an_annotator_votes_by_keyboard_and_the_manager_sees_the_ranking(
    open_page, sign_in, screenshot
):
    arena = make_arena_study(n_prompts=2, n_annotators=1)
    (annotator,) = arena.annotators
    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{arena.study.pk}/arena/{arena.question.key}/")
    expect(page.get_by_role("button", name="Tie")).to_be_visible()
    expect(page.locator(".progress__text")).to_contain_text("0 of 12")
    screenshot(page, "arena-vote-start")
    page.evaluate("window.__sameDocument = 'yes'")
    presses = 0
    while page.locator("[data-compare-form]").count():
        a, b = shown_models(page)
        ticket = page.locator("input[name=ticket]").input_value()
        key = (
            "="
            if {a, b} == {"bison", "camel"}
            else ("ArrowLeft" if STRENGTH[a] > STRENGTH[b] else "ArrowRight")
        )
        page.keyboard.press(key)
        page.wait_for_function(WAIT_FOR_NEXT, arg=ticket)
        presses += 1
        assert presses <= 12
    expect(page.get_by_role("heading", name="that is all")).to_be_visible()
    assert page.evaluate("window.__sameDocument") == "yes"  # htmx swaps, never a reload
    votes = question_votes(question=arena.question)
    assert len(votes) == presses == 12
    for vote in votes:
        if {vote.model_a, vote.model_b} == {"bison", "camel"}:
            assert vote.outcome == 0
        else:
            assert vote.outcome == (1 if STRENGTH[vote.model_a] > STRENGTH[vote.model_b] else -1)

    manager = open_page()
    sign_in(manager, arena.manager.username)
    manager.goto(f"/studies/{arena.study.pk}/arena/{arena.question.key}/results/")
    expect(manager.get_by_role("heading", name="Models ranked")).to_be_visible()
    rows = manager.locator("table[data-ranking] tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.first).to_contain_text("alpaca")
    expect(rows.last).to_contain_text("dingo")
    expect(manager.locator("[data-votes]")).to_have_text("12")
    expect(manager.locator("svg.interval-plot circle")).to_have_count(4)
    screenshot(manager, "arena-results")


def test_the_arena_pages_fit_a_phone(open_page, sign_in, screenshot):
    arena = make_arena_study(n_prompts=1, n_annotators=1)
    (annotator,) = arena.annotators
    phone = {"width": 390, "height": 844}
    page = open_page(viewport=phone)
    sign_in(page, annotator.username)
    page.goto(f"/studies/{arena.study.pk}/arena/{arena.question.key}/")
    page.keyboard.press("ArrowLeft")
    expect(page.locator(".progress__text")).to_contain_text("1 of 6")
    fits = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    assert page.evaluate(fits)
    screenshot(page, "arena-vote-phone")
    manager = open_page(viewport=phone)
    sign_in(manager, arena.manager.username)
    manager.goto(f"/studies/{arena.study.pk}/arena/{arena.question.key}/results/")
    expect(manager.locator("table[data-ranking] tbody tr")).to_have_count(2)  # the voted pair
    assert manager.evaluate(fits)
    screenshot(manager, "arena-results-phone")
