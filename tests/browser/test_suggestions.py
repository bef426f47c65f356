"""A model's suggestion in a real browser (issue 28): the annotator sees "Model suggests" and
the suggested button marked on a shown item and nothing on a held-out one, answers by keyboard
as always, and the manager's dashboard shows the anchoring card. Screenshots in
``test-artifacts/``."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.annotations.models import Revision
from apps.items.models import Item
from apps.models_registry.suggestions import suggestion_drawn
from tests.apps.models_registry.suggesting import suggesting_study
from tests.browser.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_suggestion_is_shown_on_drawn_items_and_held_out_on_the_others(
    open_page, sign_in, screenshot
):
    study, (annotator,), _ = suggesting_study(n_items=10, n_annotators=1, held_out=0.5)
    question = study.questions.get()
    items = {item.text: item for item in Item.objects.filter(study=study)}
    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    seen = {True: 0, False: 0}
    for n in range(1, 11):
        item = items[page.locator(".item__text").inner_text()]
        drawn = suggestion_drawn(
            question_id=question.pk, item_id=item.pk, annotator_id=annotator.pk, held_out=0.5
        )
        note = page.locator(".suggestion-note")
        suggested = page.locator(".label-button--suggested")
        if drawn:
            expect(note).to_have_text("Model suggests: Negative")
            expect(suggested).to_have_count(1)
            expect(suggested).to_contain_text("Negative")
            # the note is the suggested button's accessible description
            expect(page.get_by_role("button", name="Negative")).to_have_accessible_description(
                "Model suggests: Negative"
            )
            if not seen[True]:
                screenshot(page, "queue-suggestion-shown")
        else:
            expect(note).to_have_count(0)
            expect(suggested).to_have_count(0)
            expect(page.get_by_text("Model suggests")).to_have_count(0)
            if not seen[False]:
                screenshot(page, "queue-suggestion-held-out")
        seen[drawn] += 1
        page.keyboard.press("3")  # the keyboard is unchanged: 3 answers "Positive"
        expect(page.locator(".progress__text").first).to_contain_text(f"{n} of 10 done")
    assert seen[True], seen
    assert seen[False], seen
    revisions = Revision.objects.filter(annotation__annotator=annotator).select_related(
        "suggestion", "label", "annotation"
    )
    assert len(revisions) == 10
    for revision in revisions:
        assert revision.label.key == "positive"
        assert revision.suggestion.shown == suggestion_drawn(
            question_id=question.pk,
            item_id=revision.annotation.item_id,
            annotator_id=annotator.pk,
            held_out=0.5,
        )

    manager = open_page()
    sign_in(manager, study.created_by.username)
    manager.goto(f"/studies/{study.pk}/quality/?question={question.pk}")
    card = manager.locator("#quality-suggestions")
    expect(card).to_contain_text("Suggesting from baseline 1")
    expect(card.locator("tbody tr").first).to_contain_text(annotator.username)
    expect(card.locator("tfoot")).to_contain_text("Whole question")
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(ARTIFACTS / "dashboard-suggestions-card.png"))
