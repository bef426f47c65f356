"""Queue details for a long shift (issue #16, point 9): label buttons never break a word,
the instructions fold after the first answer and stay as the annotator left them, and a key
pressed while the next item loads is visibly ignored (never silently dropped or applied to an
item not seen)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from apps.annotations.models import Revision
from apps.items.models import Item
from apps.studies.models import Membership, Study
from apps.studies.services import membership_add, question_create, study_set_status
from tests.factories import StudyFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EMOTIONS = ["Contentment", "Disappointment", "Anticipation", "Embarrassment", "Joy", "Anger"]
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


def emotion_study(n_items: int = 6):
    study = StudyFactory(instructions="Pick the **emotion** the speaker shows.\n\n" * 4)
    labels = [
        {"key": name.lower(), "name": name, "shortcut": str(k)}
        for k, name in enumerate(EMOTIONS, start=1)
    ]
    question_create(study=study, key="emotion", prompt="Which emotion?", labels=labels)
    for n in range(n_items):
        Item.objects.create(study=study, external_id=f"e{n}", text=f"Utterance number {n}.")
    annotator = UserFactory()
    membership_add(study=study, user=annotator, role=Membership.Role.ANNOTATOR)
    study_set_status(study=study, status=Study.Status.RUNNING)
    return study, annotator


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_label_buttons_keep_words_whole(device, open_page, sign_in, screenshot):
    study, annotator = emotion_study()
    page = open_page(**(PHONE if device == "phone" else {}))
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    screenshot(page, f"queue-labels-{device}")
    names = page.locator(".label-button span")
    expect(names).to_have_count(len(EMOTIONS))
    # Each one-word name is laid out on one line: its text has one line box.
    lines = names.evaluate_all(
        """spans => spans.map(s => {
            const range = document.createRange();
            range.selectNodeContents(s);
            return range.getClientRects().length;
        })"""
    )
    assert lines == [1] * len(EMOTIONS)
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


def test_instructions_fold_after_the_first_answer_and_stay_as_left(open_page, sign_in, screenshot):
    study, annotator = emotion_study()
    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    instructions = page.locator("details.instructions")
    expect(instructions).to_have_attribute("open", "")
    page.keyboard.press("1")
    expect(page.locator(".progress__text").first).to_contain_text("1 of 6 done")
    expect(instructions).not_to_have_attribute("open", "")
    screenshot(page, "queue-instructions-folded")
    page.reload()
    expect(instructions).not_to_have_attribute("open", "")
    instructions.locator("summary").click()  # opened on purpose: it stays open
    page.keyboard.press("2")
    expect(page.locator(".progress__text").first).to_contain_text("2 of 6 done")
    page.reload()
    expect(instructions).to_have_attribute("open", "")


def test_keys_pressed_while_the_next_item_loads_are_shown_as_ignored(
    open_page, sign_in, screenshot
):
    study, annotator = emotion_study()
    page = open_page()
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    page.route("**/annotate/", lambda route: (page.wait_for_timeout(400), route.continue_()))
    for _ in range(5):
        page.keyboard.press("1")
        page.wait_for_timeout(40)
    notice = page.locator("[data-key-notice]")
    expect(notice).to_contain_text("ignored")
    screenshot(page, "queue-key-ignored")
    expect(page.locator(".progress__text").first).to_contain_text("1 of 6 done")
    page.unroute("**/annotate/")
    assert Revision.objects.filter(annotation__annotator=annotator).count() == 1
