"""Batches in a real browser: an annotator of a question with ``batch_size`` ranks their batch
by keyboard; "about N left" counts the batch, and the page says when the batch is done.

Screenshots land in ``test-artifacts/`` (``preferences-batch-*.png``) for review.
"""

from __future__ import annotations

import random
import re

import pytest
from playwright.sync_api import expect

from apps.preferences.models import Judgement, PairSession
from apps.preferences.selectors import pair_state
from tests.apps.preferences.conftest import make_pairwise_study
from tests.browser.test_preferences import WAIT_FOR_NEXT, shown_pair

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LEFT = re.compile(r"About (\d+) judgements? left in your batch of (\d+) items\.")


def test_an_annotator_ranks_their_batch_by_keyboard(open_page, sign_in, screenshot):
    setup = make_pairwise_study(
        n_items=12,
        n_annotators=1,
        settings={"batch_size": 5, "calibration_triplets": 0, "audit_rate": 0.0},
    )
    (annotator,) = setup.annotators
    hidden = [item.external_id for item in setup.items]
    random.Random(7).shuffle(hidden)  # best first
    level = {external_id: -rank for rank, external_id in enumerate(hidden)}
    by_id = {item.pk: item.external_id for item in setup.items}

    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{setup.study.pk}/compare/{setup.question.key}/")
    expect(page.get_by_role("button", name="Equal")).to_be_visible()
    session = PairSession.objects.get(annotator=annotator, question=setup.question)
    batch = {by_id[item] for item in session.items}
    assert len(batch) == 5  # a batch of the 12 items
    screenshot(page, "preferences-batch-start")

    presses = 0
    while page.locator("[data-compare-form]").count():
        left = LEFT.search(page.locator(".compare-form__left").inner_text())
        assert left is not None, page.locator(".compare-form__left").inner_text()
        assert int(left.group(2)) == 5
        state = pair_state(session=PairSession.objects.get(pk=session.pk))
        assert int(left.group(1)) == state.remaining  # the batch's estimate, as stored
        done, total = state.progress["done"], state.progress["total"]
        expect(page.locator(".progress__text")).to_contain_text(f"{done} of {total}")
        assert total <= 10  # at most every pair of 5 items (12 items: about 29)
        a, b = shown_pair(page)
        assert {a, b} <= batch
        ticket = page.locator("input[name=ticket]").input_value()
        page.keyboard.press("ArrowLeft" if level[a] > level[b] else "ArrowRight")
        page.wait_for_function(WAIT_FOR_NEXT, arg=ticket)
        presses += 1
        assert presses <= 10

    expect(page.get_by_role("heading", name="batch is complete")).to_be_visible()
    expect(page.get_by_text("You ranked the 5 items of your batch")).to_be_visible()
    screenshot(page, "preferences-batch-done")
    session.refresh_from_db()
    assert session.completed_at is not None
    judged = Judgement.objects.filter(annotator=annotator, question=setup.question)
    assert judged.count() == presses
    assert {by_id[j.item_a_id] for j in judged} | {by_id[j.item_b_id] for j in judged} <= batch
    ranking = pair_state(session=session).scheduler.ranking()
    assert [by_id[group[0]] for group in ranking] == [x for x in hidden if x in batch]
