"""The manager's pages fit the screen (issue #27, point 1): at 1366 x 850 and on a 390 x 844
phone no button, input or select of the quality dashboard (categorical, pairwise and continuous
questions), the items list, adjudication, recruitment and pairwise results is clipped by the
viewport or by the box that scrolls it, and no page scrolls sideways.

The pages are the demo's (``load_demo --skip-real-data``: the emotions study, the pairwise
ranking and the green-screen traces study), each with its annotators' table filled in and one
Exclude confirmation open, the widest state of a row.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from playwright.sync_api import Page

from apps.demo.management.commands.load_demo import DEMO_PASSWORD, EMOTIONS_NAME
from apps.studies.models import Question, Study
from tests.browser.conftest import ARTIFACTS, sign_in_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = {"desktop": {"width": 1366, "height": 850}, "phone": {"width": 390, "height": 844}}

# For every visible control: its box against the viewport and against each ancestor that clips
# (overflow other than visible); a control is clipped when any of its box lies outside either.
CLIPPED_CONTROLS = """() => {
  const width = document.documentElement.clientWidth;
  const clipped = [];
  const controls = document.querySelectorAll(
    'button, input:not([type=hidden]), select, textarea, summary.button, a.button');
  for (const control of controls) {
    const box = control.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;  // not shown
    if (control.closest('.visually-hidden')) continue;
    const name = (control.innerText || control.getAttribute('aria-label') || control.name
                  || control.id || control.tagName).trim().slice(0, 40);
    if (box.left < -0.5 || box.right > width + 0.5) {
      const where = `${Math.round(box.left)}..${Math.round(box.right)} px`;
      clipped.push(`${name}: ${where}, viewport ${width}`);
      continue;
    }
    let box_ = control.parentElement;
    for (; box_ && box_ !== document.body; box_ = box_.parentElement) {
      const style = getComputedStyle(box_);
      if (style.overflowX === 'visible') continue;
      const outer = box_.getBoundingClientRect();
      if (box.left < outer.left - 0.5 || box.right > outer.right + 0.5) {
        const where = `${Math.round(box.left)}..${Math.round(box.right)} px`;
        const around = `${Math.round(outer.left)}..${Math.round(outer.right)}`;
        clipped.push(`${name}: ${where}, in ${box_.className || box_.tagName} ${around}`);
        break;
      }
    }
  }
  return clipped;
}"""


# What reaches past the viewport's right edge (the innermost elements, to name the culprit).
TOO_WIDE = """() => {
  const width = document.documentElement.clientWidth;
  const over = el => el.getBoundingClientRect().right > width + 0.5;
  return [...document.querySelectorAll('body *')]
    .filter(el => over(el) && ![...el.children].some(over))
    .slice(0, 5)
    .map(el => `${el.tagName.toLowerCase()}.${el.className}`
               + ` to ${Math.round(el.getBoundingClientRect().right)} px`);
}"""


def manager_pages() -> dict[str, str]:
    """The demo's manager pages to measure, by name."""
    emotions = Study.objects.get(name=EMOTIONS_NAME)
    emotion = emotions.questions.filter(kind=Question.Kind.CATEGORICAL).first()
    pairwise = Question.objects.filter(kind=Question.Kind.PAIRWISE).first()
    continuous = Question.objects.filter(kind=Question.Kind.CONTINUOUS).first()
    return {
        "dashboard-categorical": f"/studies/{emotions.pk}/quality/?question={emotion.pk}",
        "dashboard-pairwise": f"/studies/{pairwise.study_id}/quality/?question={pairwise.pk}",
        "dashboard-continuous": f"/studies/{continuous.study_id}/quality/?question={continuous.pk}",
        "items": f"/studies/{emotions.pk}/items/?sort=-answers",
        "adjudication": f"/studies/{emotions.pk}/adjudicate/{emotion.key}/",
        "recruitment": f"/studies/{emotions.pk}/recruitment/",
        "results": f"/studies/{pairwise.study_id}/preferences/{pairwise.key}/",
    }


def open_every_exclusion(page: Page) -> None:
    """Open each row's Exclude confirmation: the widest a row of the annotators table gets."""
    page.locator("#quality-annotators details").evaluate_all(
        "all => all.forEach(details => { details.open = true; })"
    )


@pytest.mark.parametrize("device", VIEWPORTS)
def test_no_control_of_the_manager_pages_is_clipped(device, chromium, live_server, screenshot):
    call_command("load_demo", "--skip-real-data", verbosity=0)
    context = chromium.new_context(base_url=live_server.url, viewport=VIEWPORTS[device])
    context.set_default_timeout(20_000)
    page = context.new_page()
    sign_in_page(page, "manager", DEMO_PASSWORD)
    failures: dict[str, list[str]] = {}
    for name, path in manager_pages().items():
        response = page.goto(path)
        assert response is not None, (name, path)
        assert response.ok, (name, path)
        open_every_exclusion(page)
        screenshot(page, f"fit-{name}-{device}")
        for card in page.locator("#quality-annotators, #quality-items").all():
            card.screenshot(path=ARTIFACTS / f"fit-{name}-{card.get_attribute('id')}-{device}.png")
        clipped = page.evaluate(CLIPPED_CONTROLS)
        scroll = page.evaluate("document.documentElement.scrollWidth")
        if scroll > VIEWPORTS[device]["width"]:
            clipped.append(f"the page scrolls sideways: {scroll} px: {page.evaluate(TOO_WIDE)}")
        if clipped:
            failures[name] = clipped
    context.close()
    assert not failures, failures
