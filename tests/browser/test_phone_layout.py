"""Annotator pages one-handed on a phone (issue #16, point 4): at 390x844 the trace slider
spans the card with its end labels inside it, and the comparison buttons keep "B is better"
on the right of "A is better" (as on a desktop), all of them large targets."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.apps.preferences.conftest import make_pairwise_study
from tests.browser.test_continuous import short_green_study, upload_gate  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
DEVICES = {"desktop": {}, "phone": PHONE}
TARGET = 44  # px: the smallest comfortable touch target (WCAG 2.5.5)


def box(page: Page, selector: str) -> dict[str, float]:
    return page.locator(selector).first.bounding_box()


def inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return (
        inner["x"] >= outer["x"] - 0.5
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
    )


@pytest.mark.parametrize("device", DEVICES)
def test_trace_slider_spans_the_card(device, open_page, sign_in, screenshot):
    study, question, annotator = short_green_study()
    question.settings = {**question.settings, "label_min": "Dark / low"}
    question.save(update_fields=["settings"])
    page = open_page(**DEVICES[device])
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/traces/{question.key}/record/")
    expect(page.get_by_role("button", name="Play")).to_be_enabled()
    screenshot(page, f"trace-layout-{device}")
    card = box(page, "[data-trace-recorder]")
    slider = box(page, ".trace-slider")
    assert slider["width"] >= 0.75 * card["width"]
    assert slider["height"] >= TARGET
    for label in (".trace-scale__label--min", ".trace-scale__label--max"):
        assert inside(box(page, label), card)
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


@pytest.mark.parametrize("device", DEVICES)
def test_b_is_always_on_the_right(device, open_page, sign_in, screenshot):
    setup = make_pairwise_study(n_items=4)
    page = open_page(**DEVICES[device])
    sign_in(page, setup.annotators[0].username)
    page.goto(f"/studies/{setup.study.pk}/compare/{setup.question.key}/")
    a = page.get_by_role("button", name="A is better")
    b = page.get_by_role("button", name="B is better")
    expect(b).to_be_visible()
    screenshot(page, f"compare-layout-{device}")
    a_box, b_box = a.bounding_box(), b.bounding_box()
    assert b_box["x"] >= a_box["x"] + a_box["width"]  # B to the right of A
    assert abs(b_box["y"] - a_box["y"]) < 1  # on the same row
    for button in page.locator(".compare-form__choices .label-button").all():
        assert button.bounding_box()["height"] >= TARGET
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


@pytest.mark.parametrize("width", [1366, 390])
def test_a_five_point_scale_never_leaves_its_last_point_alone(
    open_page, sign_in, screenshot, width
):
    """Five Likert labels laid out 4 + 1, the last alone and full width: a scale is one row of
    equal buttons on a desktop, one column on a phone."""
    from apps.studies.services import question_update
    from tests.factories import running_study

    study, (annotator, *_) = running_study(n_items=2, n_annotators=1)
    question = study.questions.get()
    points = ["Very negative", "Negative", "Neutral", "Positive", "Very positive"]
    question_update(
        question=question,
        labels=[
            {"key": f"p{n}", "name": name, "shortcut": str(n)}
            for n, name in enumerate(points, start=1)
        ],
    )
    page = open_page(viewport={"width": width, "height": 850})
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/annotate/")
    buttons = page.locator(".label-button")
    expect(buttons).to_have_count(5)
    boxes = [buttons.nth(n).bounding_box() for n in range(5)]
    screenshot(page, f"queue-likert-{width}")
    tops = {round(b["y"]) for b in boxes}
    widths = {round(b["width"]) for b in boxes}
    if width > 640:
        assert len(tops) == 1  # one row
    else:
        assert len(tops) == 5  # one column
    assert max(widths) - min(widths) <= 2  # equal buttons: none stretched alone


def test_on_a_phone_play_and_the_live_plot_are_on_the_first_screen(open_page, sign_in, screenshot):
    """With the instructions open and the header, Play sat about 736 px down on a 390 x 844
    phone and the live plot below the fold: the header is one line on a phone now."""
    study, question, annotator = short_green_study()
    study.instructions = (
        "Watch the screen and move the slider **as the green gets brighter**; follow it "
        "closely, without waiting for the colour to settle. It takes a few seconds."
    )
    study.save(update_fields=["instructions"])
    page = open_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    sign_in(page, annotator.username)
    page.goto(f"/studies/{study.pk}/traces/{question.key}/record/")
    play = page.get_by_role("button", name="Play")
    expect(play).to_be_enabled()
    screenshot(page, "trace-first-screen-phone")
    assert play.bounding_box()["y"] + play.bounding_box()["height"] <= 844
    plot = box(page, ".trace-plot")
    assert plot["y"] + plot["height"] <= 844  # the whole live plot is seen while recording
