"""Undo on the pairwise comparison page: the ``u`` key and the button take answers back.

Screenshots land in ``test-artifacts/`` (``preferences-undo-*.png``) for review.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from apps.preferences.models import Judgement, Retraction
from tests.apps.preferences.conftest import make_pairwise_study
from tests.browser.test_preferences import WAIT_FOR_NEXT, shown_pair

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The undo went through: the undo form names another judgement (or is gone) and htmx settled.
WAIT_FOR_UNDO = """old => {
  const last = document.querySelector("[data-undo-form] input[name=judgement]");
  const busy = document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling");
  return !busy && (!last || last.value !== old);
}"""


def undo_by(page: Page, how: str) -> None:
    last = page.locator("[data-undo-form] input[name=judgement]").input_value()
    if how == "key":
        page.keyboard.press("u")
    else:
        page.get_by_role("button", name="Undo last answer").click()
    page.wait_for_function(WAIT_FOR_UNDO, arg=last)


def answer_by_key(page: Page, key: str) -> None:
    ticket = page.locator("input[name=ticket]").input_value()
    page.keyboard.press(key)
    page.wait_for_function(WAIT_FOR_NEXT, arg=ticket)


def test_u_takes_answers_back_one_at_a_time(open_page, sign_in, screenshot):
    setup = make_pairwise_study(
        n_items=6, n_annotators=1, settings={"calibration_triplets": 0, "audit_rate": 0.0}
    )
    (annotator,) = setup.annotators
    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{setup.study.pk}/compare/{setup.question.key}/")
    expect(page.get_by_role("button", name="Undo last answer")).to_have_count(0)
    page.evaluate("window.__sameDocument = 'yes'")
    shown = []
    for key in ("ArrowLeft", "ArrowRight", "ArrowLeft"):
        shown.append(shown_pair(page))
        answer_by_key(page, key)
    expect(page.get_by_role("button", name="Undo last answer")).to_be_visible()

    undo_by(page, "key")
    assert shown_pair(page) == shown[2]  # the undone pair is back, as it was shown
    undo_by(page, "key")
    assert shown_pair(page) == shown[1]
    screenshot(page, "preferences-undo-two-back")
    undo_by(page, "button")
    assert shown_pair(page) == shown[0]
    expect(page.get_by_role("button", name="Undo last answer")).to_have_count(0)
    answer_by_key(page, "ArrowRight")
    assert page.evaluate("window.__sameDocument") == "yes"  # htmx swaps, never a reload

    judgements = list(Judgement.objects.filter(annotator=annotator).order_by("sequence"))
    assert len(judgements) == 4  # append-only: the three undone answers stay
    assert Retraction.objects.count() == 3
    assert [hasattr(j, "retraction") for j in judgements] == [True, True, True, False]
    assert judgements[3].outcome == -1  # the new answer to the first pair
    assert {judgements[3].item_a_id, judgements[3].item_b_id} == {
        judgements[0].item_a_id,
        judgements[0].item_b_id,
    }
