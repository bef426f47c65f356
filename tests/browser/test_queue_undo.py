"""Multi-step undo in the annotator queue: each ``u`` goes one answer further back and names
it, and the reopened item shows the answer that was undone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.annotations.models import Revision
from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize(
    "viewport",
    [{"width": 1200, "height": 900}, {"width": 390, "height": 844}],
    ids=["desktop", "phone"],
)
def test_u_undoes_several_answers_naming_each(open_page, sign_in, screenshot, viewport):
    study, (annotator,) = running_study(n_items=5, n_annotators=1)
    page = open_page(viewport=viewport)
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    seen = []
    for n, key in enumerate(["1", "2", "3"], start=1):
        seen.append(page.locator(".item__text").inner_text())
        page.keyboard.press(key)
        expect(page.locator(".progress__text").first).to_contain_text(f"{n} of 5 done")
    items = {r.annotation.item.text: r.annotation.item.external_id for r in Revision.objects.all()}
    undo = page.locator("#undo-button")
    expect(undo).to_contain_text(f"Undo: ‘Positive’ on item {items[seen[2]]}")
    for step, (name, earlier) in enumerate([("Positive", "Neutral"), ("Neutral", "Negative")]):
        text = seen[2 - step]
        page.keyboard.press("u")
        expect(page.locator("#messages")).to_contain_text(f"Undone: ‘{name}’ on item {items[text]}")
        expect(page.locator(".item__text")).to_have_text(text)
        expect(page.locator(".queue-earlier")).to_have_text(
            f"Your answer before the undo: ‘{name}’"
        )
        expect(undo).to_contain_text(f"Undo: ‘{earlier}’ on item {items[seen[1 - step]]}")
        screenshot(page, f"queue-undo-step-{step + 1}-{viewport['width']}")
    assert Revision.objects.filter(value__isnull=True).count() == 2
    assert Revision.objects.count() == 5  # append-only: the undone labels stay in the history
