"""Small things of every session (issue #16, point 13): the site has an icon (no favicon 404
on a fresh session), and superusers can look at studies, items and answers in the admin
without being able to change them."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.factories import UserFactory, running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_fresh_session_loads_the_icon_and_nothing_is_missing(open_page, live_server):
    page = open_page()
    missing = []
    page.on("response", lambda r: missing.append(r.url) if r.status >= 400 else None)
    page.goto("/accounts/login/")
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert page.request.get(icon).ok
    assert page.request.get("/favicon.ico").ok  # clients that ask without looking
    page.wait_for_load_state("networkidle")
    assert missing == []


def test_admin_shows_studies_items_and_answers_read_only(open_page, sign_in, screenshot):
    study, _ = running_study(n_items=2, n_annotators=1)
    item = study.items.first()
    admin = UserFactory(is_staff=True, is_superuser=True)
    page = open_page()
    sign_in(page, admin.username)
    page.goto("/admin/")
    for model in (
        "studies/study",
        "items/item",
        "annotations/annotation",
        "annotations/revision",
        "preferences/judgement",
    ):
        expect(page.locator(f"a[href='/admin/{model}/']").first).to_be_visible()
        expect(page.locator(f"a.addlink[href^='/admin/{model}/']")).to_have_count(0)
    screenshot(page, "admin-index")
    page.locator("a[href='/admin/studies/study/']").first.click()
    expect(page.get_by_role("link", name=study.name)).to_be_visible()
    expect(page.get_by_role("link", name="Add study")).to_have_count(0)
    page.get_by_role("link", name=study.name).click()
    expect(page.locator("input[name=name]")).to_have_count(0)  # shown, not editable
    expect(page.get_by_role("button", name="Save")).to_have_count(0)
    screenshot(page, "admin-study")
    page.goto("/admin/items/item/")
    expect(page.get_by_role("link", name=item.external_id)).to_be_visible()
