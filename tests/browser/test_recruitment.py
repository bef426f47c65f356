"""Recruited participants in a real browser: a Prolific-style session from the link to the
completion code, a participant screened out by training, and one who arrives twice.

Screenshots land in ``test-artifacts/`` for review.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from apps.annotations.models import Assignment
from apps.recruitment.models import Participant
from apps.recruitment.selectors import gold_accuracy
from tests.apps.recruitment.setup import CHECK_ANSWER, recruiting_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
Status = Participant.Status
QUESTIONNAIRE = [
    {"name": "age", "label": "Your age", "type": "integer", "min": 18, "max": 99},
    {"name": "native", "label": "Is English your first language?", "type": "boolean"},
]


def link(recruitment, pid: str) -> str:
    return f"/join/{recruitment.token}/?PROLIFIC_PID={pid}&STUDY_ID=65a1&SESSION_ID=s-{pid}"


def consent(page) -> None:
    expect(page.get_by_role("heading", name="Before you start")).to_be_visible()
    page.get_by_label("Your age").fill("34")
    page.get_by_role("radio", name="Yes").check()
    page.get_by_role("button", name="I agree, start").click()


def train(page, answers: list[str], screenshot=None) -> list[str]:
    """Answer the training items in turn; return the feedback headings seen."""
    seen = []
    for n, label in enumerate(answers):
        expect(page.get_by_role("heading", name="Training", exact=True)).to_be_visible()
        # the task's own one-tap label buttons, not radio buttons and "Check my answer"
        page.locator("button.label-button", has_text=label).click()
        feedback = page.locator(".feedback h2")
        expect(feedback).to_be_visible()
        seen.append(feedback.inner_text())
        if screenshot and n == 1:
            screenshot(page, "recruitment-training-feedback")
        page.get_by_role("link", name="Continue").click()
    return seen


def test_a_prolific_session_from_link_to_completion_code(open_page, screenshot):
    study, recruitment = recruiting_study(
        n_regular=4,
        n_checks=2,
        items_per_participant=4,
        check_rate=0.5,
        consent_text="## Consent\nYou will label **short sentences**; it takes ten minutes.",
        questionnaire=QUESTIONNAIRE,
    )
    page = open_page()
    page.goto(link(recruitment, "5f9c1e"))
    expect(page.locator(".consent strong")).to_have_text("short sentences")
    screenshot(page, "recruitment-consent")
    consent(page)

    headings = train(page, ["Positive", "Neutral"], screenshot)
    assert headings == ["Right!", "Not quite."]
    expect(page.get_by_role("heading", name="You qualified")).to_be_visible()
    expect(page.get_by_text("50% of the training items")).to_be_visible()
    page.get_by_role("button", name="Start the task").click()
    expect(page.locator("#messages")).to_contain_text("Your package has 6 items")

    participant = Participant.objects.get()
    assert participant.status == Status.WORKING
    assert participant.answers == {"age": 34, "native": True}
    package = list(
        Assignment.objects.filter(annotator=participant.user)
        .select_related("item")
        .order_by("position")
    )
    assert len(package) == 6
    checks = {a.item.text for a in package if a.item.external_id.startswith("check-")}
    assert len(checks) == 2
    shapes = []
    for n in range(len(package)):
        expect(page.locator(".progress__text").first).to_contain_text(f"{n} of 6 done")
        text = page.locator(".item__text").inner_text()
        # a check looks like any other item: same markup, same buttons, nothing that tells
        shapes.append(page.locator("#item-area article").evaluate("e => e.outerHTML"))
        if n == 2:
            screenshot(page, "recruitment-work")
        label = CHECK_ANSWER.capitalize() if text in checks else "Neutral"
        page.locator(".label-button", has_text=label).click()
        if n < len(package) - 1:
            expect(page.locator(".item__text")).not_to_have_text(text)
    assert len({re.sub(r">[^<]*<", "><", shape) for shape in shapes}) == 1

    expect(page.get_by_role("heading", name="Thank you, you are done!")).to_be_visible()
    expect(page.locator("[data-code]")).to_have_text("C0MPLETE")
    expect(page.locator("[data-return]")).to_have_attribute(
        "href", "https://app.prolific.com/submissions/complete?cc=C0MPLETE"
    )
    screenshot(page, "recruitment-done")
    participant.refresh_from_db()
    assert (participant.status, participant.code_issued) == (Status.DONE, "C0MPLETE")
    accuracy = gold_accuracy(study=study)[participant.user_id]
    assert (accuracy.correct, accuracy.checked) == (2, 2)

    manager = open_page()
    manager.goto("/accounts/login/")
    manager.get_by_label("Username").fill(study.created_by.username)
    manager.get_by_label("Password").fill("correct-horse-battery")
    manager.get_by_role("button", name="Sign in").click()
    manager.goto(f"/studies/{study.pk}/recruitment/")
    row = manager.locator("#participants tbody tr")
    expect(row).to_contain_text("5f9c1e")
    expect(row).to_contain_text("Done")
    expect(row).to_contain_text("eligible")
    expect(manager.locator("#gold-accuracy")).to_contain_text("2 of 2")
    screenshot(manager, "recruitment-manager")
    with manager.expect_download() as download:
        manager.get_by_role("link", name=re.compile("payment file")).click()
    content = Path(download.value.path()).read_text(encoding="utf-8")
    assert "5f9c1e" in content
    assert "C0MPLETE" in content
    manager.goto(f"/studies/{study.pk}/quality/")
    header = manager.get_by_role("columnheader", name=re.compile("Attention checks"))
    expect(header).to_be_visible()
    expect(manager.get_by_text("2 gold checks", exact=True)).to_be_visible()
    screenshot(manager, "recruitment-dashboard-attention")


def test_a_participant_below_the_threshold_is_screened_out_politely(open_page, screenshot):
    _, recruitment = recruiting_study(qualification_threshold=0.8)
    page = open_page()
    page.goto(link(recruitment, "weak1"))
    train(page, ["Negative", "Neutral"])
    expect(page.get_by_role("heading", name="Thank you for your time")).to_be_visible()
    expect(page.locator("[data-code]")).to_have_text("SCREEN0UT")
    screenshot(page, "recruitment-screened-out")
    participant = Participant.objects.get()
    assert (participant.status, participant.training_score) == (Status.SCREENED_OUT, 0.0)
    assert not Assignment.objects.filter(annotator=participant.user).exists()
    # coming back changes nothing: the same goodbye
    page.goto(link(recruitment, "weak1"))
    expect(page.get_by_role("heading", name="Thank you for your time")).to_be_visible()


def test_a_participant_who_arrives_twice_continues_where_they_stopped(open_page):
    study, recruitment = recruiting_study(n_regular=4, n_checks=0, items_per_participant=4)
    first = open_page()
    first.goto(link(recruitment, "twice"))
    train(first, ["Positive", "Positive"])
    first.get_by_role("button", name="Start the task").click()
    for n in range(2):
        expect(first.locator(".progress__text").first).to_contain_text(f"{n} of 4 done")
        first.locator(".label-button", has_text="Neutral").click()
    expect(first.locator(".progress__text").first).to_contain_text("2 of 4 done")
    first.context.close()  # the browser crashes

    again = open_page()  # a new browser, the same link
    again.goto(link(recruitment, "twice"))
    expect(again).to_have_url(re.compile(f"/studies/{study.pk}/annotate/$"))
    expect(again.locator(".progress__text").first).to_contain_text("2 of 4 done")
    tab = again.context.new_page()  # and a second tab of it
    tab.goto(link(recruitment, "twice"))
    expect(tab.locator(".progress__text").first).to_contain_text("2 of 4 done")
    assert Participant.objects.count() == 1
    assert Assignment.objects.filter(annotator=Participant.objects.get().user).count() == 4
