"""Progress counted once per question kind (issue #16, point 8): the home card shows each task
with the count its own page shows, and the trace page counts a trace as soon as it is saved."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_continuous import SECONDS, short_green_study, upload_gate  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_a_saved_trace_counts_on_the_trace_page_and_the_home_card(
    device, open_page, sign_in, screenshot
):
    study, question, annotator = short_green_study()
    page = open_page(**(PHONE if device == "phone" else {}))
    sign_in(page, annotator.username)
    card = page.locator(".study-card", has_text=study.name)
    expect(card.locator(".progress__text")).to_have_text("0 of 1 done (0%)")
    card.get_by_role("link", name=f"Trace: {question.prompt}").click()
    bar = page.locator("[data-role=progress] .progress__text")
    expect(bar).to_have_text("0 of 1 done (0%)")
    page.get_by_role("button", name="Play").click()
    expect(page.locator("[data-role=status]")).to_have_text(
        "Trace saved. Thank you!", timeout=(SECONDS + 10) * 1000
    )
    expect(bar).to_have_text("1 of 1 done (100%)")
    screenshot(page, f"progress-trace-saved-{device}")

    page.goto("/")
    expect(card.locator(".progress__text")).to_have_text("1 of 1 done (100%)")
    expect(card).to_contain_text("All done")
    screenshot(page, f"progress-home-{device}")
