"""Plots people can read: headers that break between words, text >= 11 px, labels that neither
collide nor get clipped, sparkline notes, and a trace legend that tells ten annotators apart."""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from tests.apps.continuous.conftest import make_trace_study
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_dashboard import _seed_answers
from tests.factories import running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP, PHONE = {"width": 1366, "height": 850}, {"width": 390, "height": 844}
VIEWPORTS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])

# The smallest on-screen font size of every SVG text in ``root`` (its CSS size times the scale
# of the SVG's user units on screen), with the text that has it.
SMALLEST_SVG_TEXT = """root => {
  let smallest = [1e9, ""];
  for (const text of root.querySelectorAll("svg text")) {
    if (!text.textContent.trim() || !text.getClientRects().length) continue;
    const m = text.getScreenCTM();
    const size = parseFloat(getComputedStyle(text).fontSize) * Math.hypot(m.a, m.b);
    if (size < smallest[0]) smallest = [size, text.textContent];
  }
  return smallest;
}"""

# Words of the column headers that the browser broke over two lines (after a hyphen is fine).
BROKEN_HEADER_WORDS = """table => {
  const broken = [];
  for (const th of table.querySelectorAll("thead th")) {
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.textContent.matchAll(/[^\\s-]+/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (tops.size > 1) broken.push(match[0]);
      }
    }
  }
  return broken;
}"""

# Pairs of SVG texts in ``root`` whose boxes overlap, and texts outside their SVG's box.
LABEL_TROUBLE = """root => {
  const trouble = [];
  for (const svg of root.querySelectorAll("svg")) {
    const frame = svg.getBoundingClientRect();
    const boxes = [...svg.querySelectorAll("text")].filter((t) => t.textContent.trim())
      .map((t) => [t.textContent, t.getBoundingClientRect()]);
    for (const [name, b] of boxes) {
      const out = b.left < frame.left - 0.5 || b.right > frame.right + 0.5
        || b.top < frame.top - 0.5 || b.bottom > frame.bottom + 0.5;
      if (out) trouble.push("clipped " + name);
    }
    boxes.forEach(([a, p], i) => boxes.slice(i + 1).forEach(([b, q]) => {
      const w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
      const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
      if (w > 1 && h > 1) trouble.push(`${a} over ${b}`);
    }));
  }
  return trouble;
}"""


@VIEWPORTS
def test_dashboard_headers_text_labels_and_trend_notes(
    open_page, sign_in, screenshot, settings, viewport
):
    settings.QUALITY_MIN_EVIDENCE = 20
    study, annotators = running_study(n_items=40, n_annotators=5)
    _seed_answers(study, annotators)
    page: Page = open_page(viewport=viewport)
    sign_in(page, study.created_by.username)
    page.goto(f"/studies/{study.pk}/quality/")
    expect(page.locator("#quality-heatmap svg")).to_be_visible()
    expect(page.locator("#quality-map svg")).to_be_visible()

    table = page.locator("#quality-annotators table")
    assert table.evaluate(BROKEN_HEADER_WORDS) == []
    size, text = page.locator("main").evaluate(SMALLEST_SVG_TEXT)
    assert size >= 11, f"{text!r} is drawn at {size:.1f} px"
    assert page.locator("#quality-heatmap").evaluate(LABEL_TROUBLE) == []
    assert page.locator("#quality-map").evaluate(LABEL_TROUBLE) == []
    # one snapshot so far: the trends say so instead of drawing a flat line
    expect(page.locator("#quality-trends")).to_contain_text("one point so far")
    name = "phone" if viewport is PHONE else "desktop"
    screenshot(page, f"plots-dashboard-{name}")
    for card in ("quality-heatmap", "quality-map", "quality-annotators"):
        page.locator(f"#{card}").screenshot(path=str(ARTIFACTS / f"plots-{card}-{name}.png"))


def _rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[k : k + 2], 16) for k in (1, 3, 5)], dtype=float)


@VIEWPORTS
def test_ten_annotators_get_distinct_colours_and_the_legend_toggles_one(
    open_page, sign_in, screenshot, viewport
):
    ts = make_trace_study(n_annotators=10)
    for k, annotator in enumerate(ts.annotators):
        level = 0.05 + 0.09 * k
        ts.trace_gold(annotator, lambda t, a=level: np.clip(a + 0.2 * np.sin(t / (2 + a)), 0, 1))
    page: Page = open_page(viewport=viewport)
    sign_in(page, ts.study.created_by.username)
    page.goto(f"/studies/{ts.study.pk}/traces/{ts.question.key}/?item={ts.gold_item.pk}")
    lines = page.locator("polyline.trace-overlay__line:not(.trace-overlay__line--truth)")
    expect(lines).to_have_count(10)
    colours = [lines.nth(k).get_attribute("stroke") for k in range(10)]
    rgb = np.array([_rgb(c) for c in colours])
    gaps = np.linalg.norm(rgb[:, None] - rgb[None], axis=2) + np.eye(10) * 1e9
    assert gaps.min() > 60, f"too alike: {colours}"  # no two teals

    size, text = page.locator("#overlay").evaluate(SMALLEST_SVG_TEXT)
    assert size >= 11, f"{text!r} is drawn at {size:.1f} px"
    third = ts.annotators[3].username
    toggle = page.get_by_role("button", name=third, exact=True)
    # the toggled annotator's line by its series, not by place: the series are in username
    # order, which is not the order the annotators were made in once their numbers pass a
    # digit (user9 < user10 by number, not by text; the place failed run alone)
    series = toggle.get_attribute("data-trace-toggle")
    line = page.locator(f'polyline.trace-overlay__line[data-series="{series}"]')
    other = page.locator(
        "polyline.trace-overlay__line:not(.trace-overlay__line--truth)"
        f':not([data-series="{series}"])'
    ).first
    expect(line.locator("title")).to_have_text(third)
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    expect(line).to_be_hidden()
    expect(other).to_be_visible()
    screenshot(page, f"plots-trace-legend-{'phone' if viewport is PHONE else 'desktop'}")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(line).to_be_visible()
