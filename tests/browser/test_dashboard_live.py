"""Dashboard pushes in a real browser: the focused control keeps the focus when its row is
replaced, and the ``aria-live`` region says what changed."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import expect

from analytics.models import Flag
from analytics.services import flag_confirm
from apps.annotations.models import Assignment
from apps.annotations.services import annotation_undo_last, annotations_submit
from tests.browser.test_dashboard import _seed_answers, new_page  # noqa: F401 (a fixture)
from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_push_keeps_the_focus_on_a_flag_button_and_announces_the_change(
    new_page,  # noqa: F811
    sign_in,
    screenshot,
):
    study, annotators = running_study(n_items=30, n_annotators=4)
    _seed_answers(study, annotators)
    spammer = annotators[-1]  # labels at random: flagged
    for _ in range(3):  # their last three answers wait to be given again in the test
        annotation_undo_last(annotator=spammer, study=study, idempotency_key=uuid.uuid4())
    # a confirmed flag stays on the row (with its Dismiss button) whatever the figures do next
    flag = Flag.objects.get(annotator=spammer)
    with ThreadPoolExecutor(1) as pool:  # off Playwright's event loop: the push is sent
        pool.submit(flag_confirm, flag=flag, actor=study.created_by).result()
    manager = new_page()
    manager.set_default_timeout(30_000)
    sign_in(manager, study.created_by.username)
    manager.goto(f"/studies/{study.pk}/quality/")
    ratings = manager.locator("#quality-summary dd").nth(1)
    expect(ratings).to_have_text("117")
    manager.wait_for_function("document.querySelector('[ws-connect]')")
    row = manager.locator(f"#quality-row-{spammer.pk}")
    question = study.questions.get()
    waiting = list(Assignment.objects.filter(annotator=spammer, completed_at__isnull=True))

    def answer_and_see_the_row_replaced(n: int) -> None:
        """The flagged annotator answers (off Playwright's event loop): their row is pushed."""
        row.evaluate("row => { row.dataset.before = 'yes'; }")  # tells a replaced row apart
        with ThreadPoolExecutor(1) as pool:
            pool.submit(
                annotations_submit,
                annotator=spammer,
                assignment=waiting[n - 1],
                answers={question: "neutral"},
                idempotency_key=uuid.uuid4(),
            ).result()
        expect(ratings).to_have_text(str(117 + n))
        expect(manager.locator("#quality-announce")).to_have_text("1 new answer")
        expect(manager.locator(f"#quality-row-{spammer.pk}:not([data-before])")).to_have_count(1)

    # a reason being typed keeps its text and the focus
    row.locator("summary").click()
    reason = row.get_by_label(f"Why exclude {spammer.username}?")
    reason.fill("labels at random")
    answer_and_see_the_row_replaced(1)
    expect(reason).to_have_value("labels at random")
    assert manager.evaluate("document.activeElement.id") == f"exclude-reason-{spammer.pk}"
    row.locator("summary").click()  # Cancel

    dismiss = row.get_by_role("button", name=f"Dismiss flag on {spammer.username}")
    dismiss.focus()
    button_id = f"flag-{flag.pk}-dismiss"
    for n in (2, 3):
        answer_and_see_the_row_replaced(n)
        assert manager.evaluate("document.activeElement.id") == button_id
    expect(manager.locator("#quality-announce")).to_have_attribute("aria-live", "polite")
    screenshot(manager, "dashboard-push-keeps-focus")
    manager.keyboard.press("Enter")  # the button still has the focus: Enter dismisses the flag
    expect(row).to_contain_text("Dismissed")
