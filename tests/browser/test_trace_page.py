"""The trace page for annotators (issue #16, point 10): the study's instructions are shown,
and nothing on the page tells a calibration (gold) item apart from a real one."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_continuous import short_green_study, upload_gate  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_instructions_shown_and_calibration_not_named(device, open_page, sign_in, screenshot):
    study, question, annotator = short_green_study()
    study.instructions = "Move the slider **as the green gets brighter**."
    study.save(update_fields=["instructions"])
    page = open_page(**(PHONE if device == "phone" else {}))
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/traces/{question.key}/record/")
    expect(page.get_by_role("button", name="Play")).to_be_enabled()
    screenshot(page, f"trace-page-{device}")
    expect(page.locator("details.instructions")).to_contain_text("as the green gets brighter")
    recorder = page.locator("[data-trace-recorder]").evaluate("e => e.outerHTML").lower()
    assert "calibration" not in recorder  # not in the caption nor in the stimulus's label
