"""The items list and the item page in a real browser, desktop 1366x850 and phone 390x844."""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from tests.apps.continuous.conftest import make_trace_study
from tests.apps.items.test_item_list import number_items
from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP, PHONE = {"width": 1366, "height": 850}, {"width": 390, "height": 844}
VIEWPORTS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])


def _names(page: Page) -> list[str]:
    return page.locator("#item-results tbody th").all_inner_texts()


@VIEWPORTS
def test_search_filter_jump_and_step_through_items(
    open_page, sign_in, screenshot, viewport, monkeypatch
):
    from apps.items import views

    monkeypatch.setattr(views, "ITEMS_PAGE_SIZE", 10)
    study, _ = running_study(n_items=45, n_annotators=2)
    number_items(study, prefix="doc-", digits=3, text="a heron at dawn", every=5)
    name = "phone" if viewport is PHONE else "desktop"
    page: Page = open_page(viewport=viewport)
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/items/")
    expect(page.get_by_role("heading", name="45 items")).to_be_visible()
    expect(page.get_by_text("of 5", exact=True)).to_be_visible()

    jump = page.get_by_label("Page", exact=True)
    jump.fill("4")
    jump.press("Enter")
    expect(page.locator("#item-results tbody th").first).to_have_text("doc-030")
    assert "page=4" in page.url

    page.get_by_role("searchbox", name="Search").fill("heron")  # htmx: the list follows the typing
    expect(page.get_by_role("heading", name="9 items match")).to_be_visible()
    assert _names(page) == [f"doc-{n:03d}" for n in range(0, 45, 5)]
    page.get_by_label("Order").select_option("-external_id")
    expect(page.locator("#item-results tbody th").first).to_have_text("doc-040")
    screenshot(page, f"items-list-{name}")

    page.get_by_role("link", name="doc-035").click()
    expect(page.get_by_role("heading", name="Item doc-035")).to_be_visible()
    expect(page.get_by_text("2 of 9 matching")).to_be_visible()
    page.get_by_role("link", name="Next item").click()
    expect(page.get_by_role("heading", name="Item doc-030")).to_be_visible()
    page.get_by_role("link", name="Previous item").click()
    expect(page.get_by_role("heading", name="Item doc-035")).to_be_visible()
    page.get_by_role("link", name="2 of 9 matching").click()  # back to the list
    expect(page.get_by_role("searchbox", name="Search")).to_have_value("heron")
    expect(page.get_by_label("Order")).to_have_value("-external_id")


@VIEWPORTS
def test_item_page_shows_the_green_stimulus_and_the_traces(
    open_page, sign_in, screenshot, viewport
):
    ts = make_trace_study(settings={"allow_redo": True})  # one annotator traces twice
    ts.gold_item.text = "Calibration: slow wave"
    ts.gold_item.save()
    ts.trace_gold(ts.annotators[0], lambda t: np.full(t.size, 0.3))
    ts.trace_gold(ts.annotators[0], lambda t: np.full(t.size, 0.6))
    ts.trace_gold(ts.annotators[1], lambda t: np.full(t.size, 0.5))
    page: Page = open_page(viewport=viewport)
    sign_in(page, ts.study.created_by.username)
    page.goto(f"/studies/{ts.study.pk}/items/{ts.gold_item.pk}/")
    strip = page.locator(".green-stimulus__strip")
    expect(strip).to_be_visible()
    box = strip.bounding_box()
    assert box["width"] > 250
    assert box["height"] > 60
    expect(page.locator(".item-traces__plot")).to_have_count(3)
    expect(page.get_by_text("does not count")).to_have_count(1)
    screenshot(page, f"item-page-gold-{'phone' if viewport is PHONE else 'desktop'}")
