"""The members page (issue #16, point 12): a new invitation link is shown whole, not cut off,
on a desktop and on a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_the_invitation_link_is_shown_whole(device, open_page, sign_in, screenshot):
    study, _ = running_study(n_items=2, n_annotators=1)
    page = open_page(**(PHONE if device == "phone" else {}))
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/annotators/")
    page.get_by_role("button", name="Create invitation link").click()
    field = page.locator("#invitation-link")
    expect(field).to_be_visible()
    screenshot(page, f"invitation-link-{device}")
    link = field.input_value()
    assert "/invite/" in link
    overflow = field.evaluate(
        "e => [e.scrollWidth - e.clientWidth, e.scrollHeight - e.clientHeight]"
    )
    assert overflow == [0, 0]  # nothing hidden sideways or below
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
